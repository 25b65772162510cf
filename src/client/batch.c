/*
 * batch.c — McBatchWrite: many writes of one server, one call.
 *
 * Owns: the writers' entry (batch.h): their ops handed to the runner
 * (run.c) as one write run, soft or not and bounded as the caller says.
 * Must not: route, encode, send or read requests (the runner and the
 * engine do), touch the catalog or SQL types, or keep state between calls.
 */
#include "postgres.h"

#include "batch.h"
#include "run.h"

int
McBatchWrite(McServer *srv, McOp *ops, int nops, int timeout_ms,
			 bool soft, char *errbuf, size_t errlen)
{
	McRun		run = {.ops = ops,.nops = nops,.timeout_ms = timeout_ms,
		.flags = soft ? MC_RUN_SOFT : 0,.errbuf = errbuf,.errlen = errlen};

	return McRunExec(srv, &run);
}
