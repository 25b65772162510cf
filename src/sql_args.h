/*
 * sql_args.h — the arguments every SQL surface reads the same way
 * (sql_args.c): the optional server name, a ttl or an expiry as memcached
 * reads it, and the server and key of a single-key call.
 */
#ifndef MCFDW_SQL_ARGS_H
#define MCFDW_SQL_ARGS_H

#include "keys.h"

/* memcached reads a ttl above 30 days as an absolute unix time. */
#define MC_RELATIVE_TTL_MAX		(30 * SECS_PER_DAY)

/* The server name argument at argno, or NULL for mcfdw.server. */
extern const char *McServerArg(FunctionCallInfo fcinfo, int argno);

/* The ttl at argument argno, as memcached reads it: an interval, or with until a timestamptz. */
extern int64 McTtlArg(FunctionCallInfo fcinfo, int argno, bool until);

/* A ttl interval as memcached reads it. */
extern int64 McIntervalToTtl(Interval *iv);

/*
 * The server of a single-key call (named at server_argno), checked for
 * writing when the call writes, and its key (argument 0) as keys.c checks
 * and encodes it into *k.
 */
extern McServer *McSingleKeyArgs(FunctionCallInfo fcinfo, int server_argno,
								 bool writes, McKey *k);

#endif							/* MCFDW_SQL_ARGS_H */
