/*
 * single.h — what the single-key SQL functions share: functions.c (writes,
 * and the helpers below) and reads.c (reads).
 *
 * Owns: nothing of its own; the declarations of functions.c's helpers for
 * reads.c.  Must not: be included by files that do not implement
 * single-key SQL functions.
 */
#ifndef MCFDW_SINGLE_H
#define MCFDW_SINGLE_H

#include "client.h"
#include "keys.h"

/* The server name argument at argno, or NULL for mcfdw.server. */
extern const char *McServerArg(FunctionCallInfo fcinfo, int argno);

/* The ttl at argument argno, as memcached reads it: an interval, or with until a timestamptz. */
extern int64 McTtlArg(FunctionCallInfo fcinfo, int argno, bool until);

/* The opaque token of the next request (one backend-wide sequence, never 0). */
extern uint32 McNextOpaque(void);

/*
 * Send one request for key k (cmd, opts, data for ms) with a fresh opaque
 * token and read its one reply: health.c's McRoundtripKey.  NULL when
 * on_failure 'miss' degrades the call.
 */
extern const char *McKeyRoundtrip(McServer *srv, McKey *k, McConn **connp,
								  const char *cmd, const char *data, long datalen,
								  const McReqOpts *opts, bool idempotent,
								  McReply *r);

/* McKeyPrepare for a text argument. */
static inline void
McKeyPrepareText(McServer *srv, text *key, McKey *k)
{
	McKeyPrepare(srv, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), k);
}

#endif							/* MCFDW_SINGLE_H */
