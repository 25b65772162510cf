/*
 * sql_args.c — the arguments every SQL surface reads the same way: the
 * single-key functions (writes.c, reads.c), the multi-key ones
 * (batch_sql.c) and the on-commit queue (xact.c).
 *
 * Owns: the optional server name argument (NULL: mcfdw.server;
 * sql_args.h, inline), the ttl argument of a call (an interval, or an
 * absolute expiry for the *_until functions; ttl.c converts it), and
 * (sql_args.h) the server and key of a single-key call, looked up, checked
 * for writing and prepared by keys.c in the order every such call does it.
 * Must not: send anything, apply key rules (keys.c does) or convert times
 * itself (ttl.c does).
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "sql_args.h"

/* The ttl at argument argno: an interval, or with until a timestamptz. */
int64
McSqlArgsTtl(FunctionCallInfo fcinfo, int argno, bool until)
{
	if (until)
		return McTtlFromExpiry(PG_GETARG_TIMESTAMPTZ(argno));
	return McTtlFromInterval(PG_GETARG_INTERVAL_P(argno));
}
