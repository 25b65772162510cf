/*
 * health.c — instance health and routing a key to an instance.
 *
 * Owns: changing instance health (consecutive failures, dead-until, the
 * count of dead instances, the degraded count, the ring of live instances
 * for failover): server_cache.c allocates the record zeroed when it builds a
 * server entry, and nothing but this file writes it afterwards.  The
 * request engine (engine.c, pipeline.c) reports every request's outcome
 * here (McInstanceUsable before, McInstanceCountFailure, McInstanceEnd,
 * McInstanceAnswered, McInstanceNoteError, McInstanceDegraded after), so
 * the connection's outcome reaches the health record; choosing the
 * instance for a key, with failover.  Must not: send requests or touch
 * sockets (the engine and the conn_*.c files do), decide where a request
 * goes after a failure (run_route.c's failover rule) or whether it may be sent
 * again (engine.c's at most once),
 * build requests or know what commands mean (engine.c, run.c
 * do).
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "health.h"
#include "options.h"
#include "server.h"
#include "client_stats.h"
#include "counters.h"

/* Allocator handed to the pure-C ring builder for the live ring. */
static void *
ring_alloc(void *ctx, size_t size)
{
	return MemoryContextAllocZero((MemoryContext) ctx, size);
}

/*
 * Is an instance dead right now?  A dead instance whose retry time has come
 * counts as alive again: the next request to it is the probe that decides.
 */
static bool
instance_alive(McServer *srv, int index, TimestampTz now)
{
	McInstanceHealth *h = &srv->health[index];

	if (h->dead_until == 0)
		return true;
	if (now >= h->dead_until)
	{
		h->dead_until = 0;
		srv->ndead--;
		return true;
	}
	return false;
}

/* An instance's health, for the views: read, never changed. */
const McInstanceHealth *
McInstanceHealthOf(McServer *srv, int index)
{
	return &srv->health[index];
}

/*
 * Health of every instance, for routing: NULL when none is marked dead (the
 * common case, which costs nothing), else buf filled with alive flags.
 */
const bool *
McInstanceAliveMap(McServer *srv, bool *buf)
{
	TimestampTz now;

	if (srv->ndead == 0)
		return NULL;
	now = GetCurrentTimestamp();
	for (int i = 0; i < srv->cfg.nendpoints; i++)
		buf[i] = instance_alive(srv, i, now);
	return srv->ndead == 0 ? NULL : buf;
}

/*
 * The connection reported that its instance failed: count the failure and,
 * unless the call is soft (a multi-get or a failover that goes on without
 * the instance) and the failure is not one to raise regardless, raise it.
 * After failure_limit in a row the instance is marked dead for retry_delay
 * seconds, so callers fail fast (or fail over) instead of each waiting out
 * a timeout.  Returns false when it returns.
 */
bool
McInstanceCountFailure(McServer *srv, McConn *conn, bool soft)
{
	McInstanceHealth *h = &srv->health[McConnIndex(conn)];
	bool		hard;
	const char *why = McConnFailure(conn, &hard);

	strlcpy(h->last_error, why, sizeof(h->last_error));
	if (!McConnFailureCounts(conn))
	{
		McConnFailRaise(conn);	/* a rejected login: never soft */
		return false;
	}
	h->failures++;
	if (h->failures >= srv->cfg.failure_limit && h->dead_until == 0)
	{
		h->dead_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													(int64) srv->cfg.retry_delay * 1000);
		srv->ndead++;
		McCsMarkedDead(srv->serverid, McConnName(conn), h->failures, h->dead_until, h->last_error);
	}
	/*
	 * on_failure 'miss' hides unavailability, not bugs: a reply out of step
	 * with the protocol is raised even when the call would go on without
	 * the instance.
	 */
	if (!soft || hard ||
		(srv->cfg.on_failure_miss &&
		 McConnFailureCode(conn) == ERRCODE_PROTOCOL_VIOLATION))
		McConnFailRaise(conn);
	return false;
}

/*
 * The caller found the instance misbehaving (a reply that fits no request,
 * a batch that stopped making progress): close the connection and count
 * the failure as McInstanceCountFailure does.
 */
bool
McInstanceMisbehaved(McServer *srv, McConn *conn, bool soft, int sqlerrcode,
					 const char *action, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	McConnFailedV(conn, sqlerrcode, action, fmt, ap);
	va_end(ap);
	return McInstanceCountFailure(srv, conn, soft);
}

/*
 * The request is complete: end it on the connection, and the instance's
 * run of failures with it.
 */
void
McInstanceEnd(McServer *srv, McConn *conn)
{
	srv->health[McConnIndex(conn)].failures = 0;
	McConnEnd(conn);
}

/*
 * May instance index, marked dead, be tried now (McInstanceUsable's rare
 * part)?  One whose retry time has not come is refused: with an error, or
 * false when the call is soft.
 */
bool
McInstanceRetryDue(McServer *srv, int index, bool soft)
{
	McInstanceHealth *h = &srv->health[index];

	if (instance_alive(srv, index, GetCurrentTimestamp()))
		return true;
	McCsRefused(srv->serverid, McInstanceName(&srv->net, index));
	if (soft)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("memcached server \"%s\" is unavailable", srv->name),
			 errdetail("Instance %s failed %d times in a row, most recently: %s.",
					   McInstanceName(&srv->net, index), h->failures, h->last_error),
			 errhint("It will be tried again at %s.",
					 timestamptz_to_str(h->dead_until))));
	return false;				/* not reached */
}

/*
 * A request of instance index was answered (its connection ended by the
 * caller): the instance's run of failures ends.
 */
void
McInstanceAnswered(McServer *srv, int index)
{
	srv->health[index].failures = 0;
}

/*
 * Instance index failed in a way that is not its health's concern (a
 * rejected login seen by a view): the cause is recorded for the views,
 * nothing is counted.
 */
void
McInstanceNoteError(McServer *srv, int index, const char *why)
{
	strlcpy(srv->health[index].last_error, why,
			sizeof(srv->health[index].last_error));
}

/*
 * The continuum of the live instances only.  libmemcached with auto-eject
 * rebuilds its continuum without the ejected servers, and with weights the
 * surviving servers' point counts change, so walking the full continuum to
 * the next live point would route some keys differently.  Rebuilt only when
 * the set of live instances changes.
 */
static McRing *
live_ring(McServer *srv, const bool *alive)
{
	int			n = srv->cfg.nendpoints;
	McRingNode *nodes;
	const char *err = NULL;

	if (srv->live && memcmp(srv->live_alive, alive, n * sizeof(bool)) == 0)
		return srv->live;
	if (srv->live_cxt == NULL)
		srv->live_cxt = AllocSetContextCreate(srv->cxt, "mcfdw live ring",
											  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(srv->live_cxt);
	srv->live = NULL;
	nodes = MemoryContextAlloc(srv->live_cxt, sizeof(McRingNode) * n);
	srv->live_alive = MemoryContextAlloc(srv->live_cxt, sizeof(bool) * n);
	memcpy(srv->live_alive, alive, sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		nodes[i].host = srv->cfg.endpoints[i].host;
		nodes[i].port = srv->cfg.endpoints[i].port;
		nodes[i].weight = srv->cfg.endpoints[i].weight;
	}
	srv->live = mc_ring_build_live(srv->cfg.distribution, nodes, n, alive,
								   ring_alloc, srv->live_cxt, &err);
	if (srv->live == NULL)
		elog(ERROR, "could not build the live ring: %s", err ? err : "?");
	return srv->live;
}

/* A ketama server failing over: the key's point on the ring of live instances. */
static pg_noinline int
pick_live(McServer *srv, const char *key, size_t len, const bool *alive)
{
	return mc_ring_lookup(live_ring(srv, alive),
						  mc_ring_key_hash(srv->ring, key, len));
}

/* McInstancePickNow's choice, or -1 when no instance is available. */
static inline int
pick_with(McServer *srv, const char *key, size_t len, const bool *alive, bool failover)
{
	if (alive != NULL && failover && mc_dist_is_ketama(srv->cfg.distribution))
		return pick_live(srv, key, len, alive);
	return mc_ring_pick(srv->ring, key, len, alive, failover);
}

/* No instance of srv is available to route a key to. */
static pg_noinline void
no_instance(McServer *srv)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("no memcached server of foreign server \"%s\" is available",
					srv->name),
			 errdetail("Every server has failed %d times in a row and is waiting out its retry delay.",
					   srv->cfg.failure_limit)));
}

/*
 * Choose the instance for a key (as routed: prefix included, before base64)
 * given a health map from McInstanceAliveMap, as the server's failover says.
 * (Not a call of McInstancePickHashed: it is on the single get's path, whose
 * instructions make bench counts.)
 */
int
McInstancePickWith(McServer *srv, const char *key, size_t len, const bool *alive)
{
	int			idx;

	/* pick_with's test, reading failover where it is tested: no register to keep */
	if (alive != NULL && srv->cfg.failover && mc_dist_is_ketama(srv->cfg.distribution))
		idx = pick_live(srv, key, len, alive);
	else
		idx = mc_ring_pick(srv->ring, key, len, alive, srv->cfg.failover);

	if (unlikely(idx < 0))
		no_instance(srv);
	return idx;
}

/*
 * McInstancePickWith for a key whose ring hash (McServerKeyHash) the caller
 * has, with failover given by the caller (a run that must not fail over
 * whatever the server's setting: the key's own instance, dead or alive).
 */
int
McInstancePickHashed(McServer *srv, uint32 hash, const char *key, size_t len,
				   const bool *alive, bool failover)
{
	int			idx;

	if (unlikely(alive != NULL && failover && mc_dist_is_ketama(srv->cfg.distribution)))
		idx = mc_ring_lookup(live_ring(srv, alive), hash);
	else
		idx = mc_ring_pick_hashed(srv->ring, hash, key, len, alive, failover);
	if (unlikely(idx < 0))
		no_instance(srv);
	return idx;
}

/*
 * The instance a read of key would try first now, given alive from
 * McInstanceAliveMap (NULL: all alive), or -1 when it would reach none: its
 * instance is dead and failover is off (the read fails, or is a miss with
 * on_failure 'miss'), or failover finds no live instance.  The choice of
 * a run of one (run_route.c), reported instead of raised, for mc_route: nothing
 * is contacted.
 */
int
McInstancePickNow(McServer *srv, const char *key, size_t len, const bool *alive)
{
	int			idx = pick_with(srv, key, len, alive, srv->cfg.failover);

	if (idx >= 0 && alive != NULL && !alive[idx])
		return -1;
	return idx;
}

/*
 * on_failure 'miss': a call answered with a miss because instance index
 * could not be reached.  Counted for mc_servers; warned about once per
 * statement and server (mcfdw.warn_on_miss), so a statement touching
 * thousands of keys of a dead cache logs one line, not thousands.
 */
void
McInstanceDegraded(McServer *srv, int index)
{
	McInstanceHealth *h = &srv->health[index];
	TimestampTz stmt = GetCurrentStatementStartTimestamp();

	h->degraded++;
	McCountersAdd(srv->serverid, MC_COUNT_DEGRADED, 1);
	McCsDegraded(srv->serverid, McInstanceName(&srv->net, index));
	if (!mc_warn_on_miss ||
		(srv->warned_stmt == stmt && srv->warned_lxid == McMyLocalXid()))
		return;
	srv->warned_stmt = stmt;
	srv->warned_lxid = McMyLocalXid();
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("memcached server \"%s\" is unavailable, its keys are treated as misses",
					srv->name),
			 errdetail("Instance %s: %s.", McInstanceName(&srv->net, index),
					   h->last_error[0] ? h->last_error : "unknown error"),
			 errhint("The server has on_failure \"miss\"; set mcfdw.warn_on_miss to off to silence this warning.")));
}

/*
 * A rebuilt server's health (server_cache.c, once its new configuration is in
 * place): the records health (zeroed, the last errors carried over), no
 * instance dead, and no live ring: it was made in the old configuration's
 * context, freed with it.
 */
void
McInstanceHealthRebuilt(McServer *srv, McInstanceHealth *health)
{
	srv->health = health;
	srv->ndead = 0;
	srv->live_cxt = NULL;
	srv->live = NULL;
}
