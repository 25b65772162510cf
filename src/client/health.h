/*
 * health.h — instance health and routing (health.c): which instance a key
 * goes to, failures counted, dead instances passed over.
 */
#ifndef MCFDW_HEALTH_H
#define MCFDW_HEALTH_H

#include "postgres.h"

#include "server.h"

extern void McInstanceHealthRebuilt(McServer *srv, McInstanceHealth *health);
extern const McInstanceHealth *McInstanceHealthOf(McServer *srv, int index);
extern const bool *McInstanceAliveMap(McServer *srv, bool *buf);
extern bool McInstanceCountFailure(McServer *srv, McConn *conn, bool soft);
extern bool McInstanceMisbehaved(McServer *srv, McConn *conn, bool soft,
						   int sqlerrcode, const char *action,
						   const char *fmt,...) pg_attribute_printf(6, 7);
extern void McInstanceEnd(McServer *srv, McConn *conn);
extern void McInstanceDegraded(McServer *srv, int index);
extern void McInstanceAnswered(McServer *srv, int index);
extern void McInstanceNoteError(McServer *srv, int index, const char *why);
extern int	McInstancePickWith(McServer *srv, const char *key, size_t len,
							 const bool *alive);
extern int	McInstancePickHashed(McServer *srv, uint32 hash, const char *key,
							   size_t len, const bool *alive, bool failover);
extern int	McInstancePickNow(McServer *srv, const char *key, size_t len,
							const bool *alive);
extern bool McInstanceRetryDue(McServer *srv, int index, bool soft);

/*
 * May instance index be tried now?  One marked dead is refused until its
 * retry time: with an error, or false when the call is soft.  Inline: every
 * request asks, and almost always of an instance that is not dead.
 */
static inline bool
McInstanceUsable(McServer *srv, int index, bool soft)
{
	return srv->health[index].dead_until == 0 ||
		McInstanceRetryDue(srv, index, soft);
}

/*
 * The key's hash on srv's ring (as routed: prefix included, before base64),
 * for McInstancePickHashed.
 */
static inline uint32
McServerKeyHash(McServer *srv, const char *key, size_t len)
{
	return mc_ring_key_hash(srv->ring, key, len);
}

#endif							/* MCFDW_HEALTH_H */
