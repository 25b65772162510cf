/*
 * run_mn.c — an "MN" the runner did not ask for.
 *
 * Owns: failing an instance whose "MN" came before its request or before
 * the replies it ends (run_int.h's mn_due says when one is due) as out of
 * step, for the reply loops of the reads (run_reads.c) and the writes
 * (run_writes.c) alike: one function, out of line and off the loops' way,
 * in a file of its own so that neither loop's file calls the other's (nor
 * run.c, which calls both).  Must not: read or parse replies, or decide
 * what the failure does to the run (health.c and the caller do).
 */
#include "postgres.h"

#include "health.h"
#include "run_int.h"

/* The instance fails as out of step; MC_ENG_FAILED, for the loop to return. */
McEngRead
run_mn_stray(RunState *r, McConn *conn, bool soft)
{
	McInstanceMisbehaved(r->srv, conn, soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
						 "an end of pipeline (MN) came before its request or before the replies it ends");
	return MC_ENG_FAILED;
}
