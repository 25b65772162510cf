/*
 * run_route.h — the failover rule (run_route.c) as a run of one (run.h's
 * McRunOne) takes it: the pick of an instance for a key, and the run of
 * one routed by the rule when its instance is dead or failed.
 */
#ifndef MCFDW_RUN_ROUTE_H
#define MCFDW_RUN_ROUTE_H

#include "engine.h"
#include "health.h"
#include "server.h"

extern MC_HIDDEN bool McRunRouteOne(McServer *srv, McOpRun *run, int failed);
extern MC_HIDDEN bool McRunRouteFailed(McServer *srv, McOpRun *run, int index,
									   McEngOne sent);

/*
 * The failover rule's choice of an instance for key (run_route.c says the
 * rule): map the instances it may go to (NULL: every one, as when none
 * is dead and none failed in this call), none when there is none left
 * and the key is a miss (-1).  Raises when none is left without
 * on_failure 'miss'.
 */
static inline int
McRunRoutePick(McServer *srv, const char *key, size_t len, const bool *map, bool none)
{
	if (unlikely(none))
		return -1;
	if (map == NULL && srv->cfg.nendpoints == 1)
		return 0;
	return McInstancePickWith(srv, key, len, map);
}

#endif							/* MCFDW_RUN_ROUTE_H */
