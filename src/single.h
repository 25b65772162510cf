/*
 * single.h — what the single-key SQL functions share: writes.c (writes,
 * and the helpers below) and reads.c (reads).
 *
 * Owns: nothing of its own; the declarations of writes.c's helpers for
 * reads.c.  Must not: be included by files that do not implement
 * single-key SQL functions.
 */
#ifndef MCFDW_SINGLE_H
#define MCFDW_SINGLE_H

#include "sql_args.h"

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
