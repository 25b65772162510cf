/*
 * health.h — instance health and routing (health.c): which instance a key goes to,
 * failures counted, dead instances passed over, one request's roundtrip
 * with its failure reported.
 */
#ifndef MCFDW_HEALTH_H
#define MCFDW_HEALTH_H

#include "postgres.h"

#include "server.h"

extern void McHealthRebuilt(McServer *srv, McInstanceHealth *health);
extern const McInstanceHealth *McInstanceHealthOf(McServer *srv, int index);
extern const bool *McServerAliveMap(McServer *srv, bool *buf);
extern McConn *McInstanceBegin(McServer *srv, int index, bool soft,
							   bool probed, int cap_ms);
extern bool McInstanceCountFailure(McServer *srv, McConn *conn, bool soft);
extern bool McInstanceMisbehaved(McServer *srv, McConn *conn, bool soft,
						   int sqlerrcode, const char *action,
						   const char *fmt,...) pg_attribute_printf(6, 7);
extern void McInstanceEnd(McServer *srv, McConn *conn);
extern void McInstanceDegraded(McServer *srv, int index);
extern const char *McRoundtrip(McServer *srv, int index, const McRequest *req,
							   McReply *reply, McConn **connp, bool soft);
extern bool McInstanceStatLines(McServer *srv, int index, const char *cmd,
								int limit_ms, bool limit_counts,
								McStatLineFn cb, void *arg);
extern int	McServerPickWith(McServer *srv, const char *key, size_t len,
							 const bool *alive);
extern int	McServerPickHashed(McServer *srv, uint32 hash, const char *key,
							   size_t len, const bool *alive, bool failover);
extern int	McServerPickNow(McServer *srv, const char *key, size_t len,
							const bool *alive);
extern const char *McRoundtripRouted(McServer *srv, const char *key, size_t keylen,
								  const McRequest *req, McReply *reply,
								  McConn **connp);

/*
 * The key's hash on srv's ring (as routed: prefix included, before base64),
 * for McServerPickHashed.
 */
static inline uint32
McServerKeyHash(McServer *srv, const char *key, size_t len)
{
	return mc_ring_key_hash(srv->ring, key, len);
}

#endif							/* MCFDW_HEALTH_H */
