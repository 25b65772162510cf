/*
 * server_cache.h — this backend's server entries (server_cache.c): found, checked for
 * USAGE, rebuilt when the catalog changes; what a role may do beyond
 * reading.
 */
#ifndef MCFDW_SERVER_CACHE_H
#define MCFDW_SERVER_CACHE_H

#include "postgres.h"

#include "miscadmin.h"

#include "server.h"

extern void McServerCacheInit(void);
extern McServer *McServerLookup(const char *name);
extern McServer *McServerGetSlow(Oid serverid);

/*
 * The entry of a server this backend has used with a given user mapping's
 * login, with no catalog access and no privilege check; NULL when there is
 * none.  For work whose server was resolved and checked earlier in the
 * transaction and that runs after its commit, when the catalog is off
 * limits (xact.c's on-commit sends).
 */
extern McServer *McServerPeek(Oid serverid, Oid umid);
extern McServer *mc_last_server;
extern List *McServerCacheEntries(void);
extern List *McServerUsableList(void);
extern void McServerConnStats(McServer *srv, int i, McConnStats *out);
extern int	McServerCloseIdle(McServer *srv, int *in_use);
extern Oid	McServerRoute(Oid serverid);

/*
 * The entry of an existing server, checked for USAGE.  The last one
 * returned is kept (and forgotten by every invalidation), so repeated calls
 * cost a few compares.
 */
static inline McServer *
McServerGet(Oid serverid)
{
	McServer   *srv = mc_last_server;

	if (likely(srv != NULL && srv->serverid == serverid && srv->valid &&
			   srv->acl_ok_user == GetUserId()))
		return srv;
	return McServerGetSlow(serverid);
}

/*
 * server_cache.c: refuse a role that may read a server but not write to it (the
 * server option writers), before anything is sent or queued.  Every path
 * that stores, deletes, touches, counts or flushes calls it.
 */
extern void McServerCheckWriteSlow(McServer *srv);

/*
 * Writes this backend started (every McServerCheckWrite): a reader that
 * kept values from before a write can tell that they may be stale (the
 * prefetch of per-row reads, prefetch_batch.c).
 */
extern uint64 McServerWritesStarted;

static inline void
McServerCheckWrite(McServer *srv)
{
	McServerWritesStarted++;
	if (likely(!srv->cfg.writers_set || srv->write_ok_user == GetUserId()))
		return;
	McServerCheckWriteSlow(srv);
}
extern void McServerCheckFullScan(McServer *srv, Oid relid);

#endif							/* MCFDW_SERVER_CACHE_H */
