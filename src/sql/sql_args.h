/*
 * sql_args.h — the arguments every SQL surface reads the same way
 * (sql_args.c): the optional server name, a ttl or an expiry, and the
 * server and key of a single-key call.
 */
#ifndef MCFDW_SQL_ARGS_H
#define MCFDW_SQL_ARGS_H

#include "client.h"
#include "keys.h"

/* The server name argument at argno, or NULL for mcfdw.server. */
static inline const char *
McServerArg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	return NameStr(*PG_GETARG_NAME(argno));
}

/* The ttl at argument argno, as memcached reads it: an interval, or with until a timestamptz. */
extern int64 McSqlArgsTtl(FunctionCallInfo fcinfo, int argno, bool until);

/*
 * A SQL function whose body is fn(fcinfo, ...) with the arguments given:
 * the functions of one shape (mc_set and mc_add, mc_get and mc_get_bytea)
 * differ only in what they pass their shared body.
 */
#define MC_SQL_FUNCTION(name, fn, ...) \
	PG_FUNCTION_INFO_V1(name); \
	Datum \
	name(PG_FUNCTION_ARGS) \
	{ \
		return fn(fcinfo, __VA_ARGS__); \
	}

/*
 * The server of a single-key call (named at server_argno), checked for
 * writing when the call writes, and its key (argument 0) as keys.c checks
 * and encodes it into *k: the server first (an unknown one, or one the
 * role may not use, is the first error), then the writers check, then the
 * key's rules.  Inline: every single-key call comes here once.
 */
static inline McServer *
McSingleKeyArgs(FunctionCallInfo fcinfo, int server_argno, bool writes, McKey *k)
{
	McServer   *srv = McServerLookup(McServerArg(fcinfo, server_argno));
	text	   *key;

	if (writes)
		McServerCheckWrite(srv);
	key = PG_GETARG_TEXT_PP(0);
	McKeyPrepare(srv, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), k);
	return srv;
}

#endif							/* MCFDW_SQL_ARGS_H */
