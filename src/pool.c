/*
 * pool.c — this backend's mcfdw servers: configuration, health, routing.
 *
 * Owns: the cache of mcfdw foreign servers (keyed by server OID and by the
 * user mapping whose credentials the connections log in with, as
 * postgres_fdw keys its connections; rebuilt when the catalog changes,
 * with the USAGE check cached per role), instance health
 * (consecutive failures, dead-until, the count of dead instances, the ring
 * of live instances for failover; nothing else writes them), choosing the
 * instance for a key, and the (sub)transaction callbacks that close
 * connections an error or a cancel left out of step.  Every request goes
 * through here (McInstanceBegin, McRoundtrip, McInstanceFailed,
 * McInstanceEnd) so the connection's outcome reaches the health record.
 * Must not: touch sockets (conn.c does) or know what commands mean
 * (functions.c, multi_get.c do).
 *
 * Lifetime: everything here lives in "mcfdw pool", a child of
 * TopMemoryContext, for the life of the backend.  Server entries are marked
 * invalid by syscache callbacks (ALTER/DROP SERVER, GRANT) and rebuilt at
 * their next use; connections to instances that are still configured survive
 * the rebuild.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "mcfdw.h"
#include "batch.h"
#include "counters.h"

static MemoryContext pool_cxt = NULL;
static HTAB *server_hash = NULL;
static bool sweep_needed = false;

/* server_hash's key: connections are per server and per login. */
typedef struct McServerKey
{
	Oid			serverid;
	Oid			umid;
} McServerKey;

/*
 * Which entry a role uses for a server: the user mapping whose credentials
 * it logs in with (its own, else PUBLIC's), InvalidOid when that mapping
 * has none or there is no mapping.  Looked up once per role and server
 * (two syscache probes and an options parse), forgotten by every change of
 * user mappings or servers.
 */
typedef struct McRoute
{
	Oid			serverid;		/* hash key */
	Oid			userid;
	Oid			umid;
} McRoute;

static HTAB *route_hash = NULL;

/*
 * The hot path's shortcuts, both forgotten by every invalidation: the last
 * server name resolved (a by-name syscache lookup hashes the whole name)
 * and the last entry returned with its USAGE check passed.
 */
static char last_name[NAMEDATALEN];
static Oid	last_oid = InvalidOid;
static uint64 last_default_gen = 0;	/* last_oid is mcfdw.server's as of
										 * this mc_default_server_gen; 0 = not */
McServer   *mc_last_server = NULL;

/* Forget every role's route (see McRoute). */
static void
forget_routes(void)
{
	HASH_SEQ_STATUS scan;
	McRoute    *r;

	if (route_hash == NULL)
		return;
	hash_seq_init(&scan, route_hash);
	while ((r = hash_seq_search(&scan)) != NULL)
		hash_search(route_hash, r, HASH_REMOVE, NULL);
}

/*
 * Syscache callback for pg_user_mapping: CREATE, ALTER and DROP USER
 * MAPPING.  Routes are looked up again, and entries that logged in with a
 * mapping are rebuilt at their next use (new credentials close their
 * connections; a dropped mapping's entry is swept), as postgres_fdw does.
 */
static void
mapping_inval_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS scan;
	McServer   *srv;

	mc_last_server = NULL;
	forget_routes();
	if (server_hash == NULL)
		return;
	hash_seq_init(&scan, server_hash);
	while ((srv = hash_seq_search(&scan)) != NULL)
	{
		if (OidIsValid(srv->umid))
		{
			srv->valid = false;
			srv->acl_ok_user = InvalidOid;
			sweep_needed = true;
		}
	}
}

/*
 * Syscache callback for pg_foreign_server: ALTER SERVER, DROP SERVER and
 * GRANT all land here.  Only marks entries; the rebuild happens at their next
 * use, inside a transaction where catalog access is allowed.
 */
static void
server_inval_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS scan;
	McServer   *srv;

	/* any server change may rename, drop or create the cached name */
	last_oid = InvalidOid;
	mc_last_server = NULL;
	forget_routes();
	if (server_hash == NULL)
		return;
	hash_seq_init(&scan, server_hash);
	while ((srv = hash_seq_search(&scan)) != NULL)
	{
		if (hashvalue == 0 || srv->hashvalue == hashvalue)
		{
			srv->valid = false;
			srv->acl_ok_user = InvalidOid;
			sweep_needed = true;
		}
	}
}

/*
 * Role or membership changes can change the outcome of the USAGE check we
 * cached; forget every cached success.
 */
static void
acl_inval_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS scan;
	McServer   *srv;

	mc_last_server = NULL;
	if (server_hash == NULL)
		return;
	hash_seq_init(&scan, server_hash);
	while ((srv = hash_seq_search(&scan)) != NULL)
		srv->acl_ok_user = InvalidOid;
}

/*
 * Close every connection an error or a cancel left in the middle of a
 * request.  Called at (sub)transaction abort so a PL/pgSQL exception handler
 * that swallowed a cancel cannot reuse a socket whose reply is half read;
 * McConnPrepare checks again in case anything slips past.
 */
static void
close_busy_connections(void)
{
	HASH_SEQ_STATUS scan;
	McServer   *srv;

	if (server_hash == NULL)
		return;
	hash_seq_init(&scan, server_hash);
	while ((srv = hash_seq_search(&scan)) != NULL)
		McConnCloseBusy(srv);
}

/* Transaction callback: see close_busy_connections. */
static void
pool_xact_cb(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		close_busy_connections();
}

/* Subtransaction callback: see close_busy_connections. */
static void
pool_subxact_cb(SubXactEvent event, SubTransactionId mySubid,
				SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		close_busy_connections();
}

/* Set up the pool; called once from _PG_init. */
void
McPoolInit(void)
{
	HASHCTL		ctl;

	pool_cxt = AllocSetContextCreate(TopMemoryContext, "mcfdw pool",
									 ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(McServerKey);
	ctl.entrysize = sizeof(McServer);
	ctl.hcxt = pool_cxt;
	server_hash = hash_create("mcfdw servers", 8, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.keysize = 2 * sizeof(Oid);
	ctl.entrysize = sizeof(McRoute);
	route_hash = hash_create("mcfdw routes", 8, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, server_inval_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, mapping_inval_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, acl_inval_cb, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, acl_inval_cb, (Datum) 0);
	RegisterXactCallback(pool_xact_cb, NULL);
	RegisterSubXactCallback(pool_subxact_cb, NULL);
}

/* Allocator handed to the pure-C ring builder. */
static void *
ring_alloc(void *ctx, size_t size)
{
	return MemoryContextAllocZero((MemoryContext) ctx, size);
}

/* The options of user mapping umid (which exists: a route just named it). */
static List *
mapping_options(Oid umid)
{
	HeapTuple	tp = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	Datum		datum;
	bool		isnull;
	List	   *options;

	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for user mapping %u", umid);
	datum = SysCacheGetAttr(USERMAPPINGOID, tp, Anum_pg_user_mapping_umoptions,
							&isnull);
	options = isnull ? NIL : untransformRelOptions(datum);
	ReleaseSysCache(tp);
	return options;
}

/*
 * The user mapping userid logs in to serverid with: its own, else the
 * PUBLIC one (GetUserMapping's rule), if that mapping has credentials.
 * InvalidOid otherwise: no mapping is needed, unlike postgres_fdw.
 */
static Oid
route_of(Oid serverid, Oid userid)
{
	McRoute		key = {.serverid = serverid,.userid = userid};
	McRoute    *r;
	bool		found;
	HeapTuple	tp;
	Oid			umid = InvalidOid;

	r = hash_search(route_hash, &key, HASH_FIND, NULL);
	if (r != NULL)
		return r->umid;
	tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid),
						 ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tp))
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(serverid));
	if (HeapTupleIsValid(tp))
	{
		Oid			oid = ((Form_pg_user_mapping) GETSTRUCT(tp))->oid;
		ListCell   *lc;

		ReleaseSysCache(tp);
		foreach(lc, mapping_options(oid))
			if (strcmp(lfirst_node(DefElem, lc)->defname, "username") == 0)
				umid = oid;
	}
	/* entered last: an error above leaves no half-made route */
	r = hash_search(route_hash, &key, HASH_ENTER, &found);
	r->umid = umid;
	return umid;
}

/*
 * Bring an entry in line with the catalog.  Connections to instances that
 * are still listed (same host and port) are carried over, so a GRANT or a
 * timeout change does not cost a reconnect; the others are closed.  Health
 * starts afresh: an administrator who changed the server wants it tried.
 */
static void
server_rebuild(McServer *srv)
{
	ForeignServer *fs = GetForeignServer(srv->serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(fs->fdwid);
	MemoryContext cxt;
	McServerConfig cfg;
	McRingNode *nodes;
	McRing	   *ring;
	McConn	   *conns;
	McInstanceHealth *health;
	int		   *from;
	bool	   *taken;
	bool		same_transport;
	const char *err = NULL;

	if (strcmp(fdw->fdwname, "mcfdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("foreign server \"%s\" does not use foreign-data wrapper \"mcfdw\"",
						fs->servername)));

	/* parse under the current (transaction) context: an error frees it */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw server",
								ALLOCSET_SMALL_SIZES);
	McParseServerOptions(fs->options, &cfg, cxt);
	if (OidIsValid(srv->umid))
		McParseUserMappingOptions(mapping_options(srv->umid), &cfg, cxt);
	nodes = MemoryContextAlloc(cxt, sizeof(McRingNode) * cfg.nendpoints);
	for (int i = 0; i < cfg.nendpoints; i++)
	{
		nodes[i].host = cfg.endpoints[i].host;
		nodes[i].port = cfg.endpoints[i].port;
		nodes[i].weight = cfg.endpoints[i].weight;
	}
	ring = mc_ring_build(cfg.distribution, nodes, cfg.nendpoints,
						 ring_alloc, cxt, &err);
	if (ring == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("cannot build the key ring of foreign server \"%s\"",
						fs->servername),
				 errdetail("%s", err ? err : "unknown error")));
	conns = McConnArrayNew(cxt, cfg.nendpoints);
	health = MemoryContextAllocZero(cxt, sizeof(McInstanceHealth) * cfg.nendpoints);

	/*
	 * Which old instance each new one continues: the same host and port.
	 * Health starts afresh (an administrator who changed the server wants
	 * it tried), but the last error stays on view.
	 */
	from = palloc(sizeof(int) * cfg.nendpoints);
	taken = palloc0(sizeof(bool) * Max(srv->cfg.nendpoints, 1));
	same_transport = srv->conns && McSameTransport(&srv->cfg, &cfg);
	for (int i = 0; i < cfg.nendpoints; i++)
	{
		from[i] = -1;
		for (int j = 0; same_transport && j < srv->cfg.nendpoints; j++)
		{
			if (!taken[j] &&
				srv->cfg.endpoints[j].port == cfg.endpoints[i].port &&
				strcmp(srv->cfg.endpoints[j].host, cfg.endpoints[i].host) == 0)
			{
				from[i] = j;
				taken[j] = true;
				strlcpy(health[i].last_error, srv->health[j].last_error,
						sizeof(health[i].last_error));
				health[i].degraded = srv->health[j].degraded;
				break;
			}
		}
	}

	/* nothing below can fail: commit the new state */
	MemoryContextSetParent(cxt, pool_cxt);
	McConnCarryOver(srv, conns, cfg.nendpoints, from);
	pfree(from);
	pfree(taken);
	if (srv->cxt)
		MemoryContextDelete(srv->cxt);

	srv->cxt = cxt;
	srv->tls_ctx = NULL;		/* freed with the old context */
	srv->live_cxt = NULL;		/* was a child of the old context */
	srv->live = NULL;
	srv->cfg = cfg;
	srv->ring = ring;
	srv->conns = conns;
	srv->health = health;
	srv->ndead = 0;
	srv->sock_gen++;			/* the multi-get wait set points at old conns */
	srv->hashvalue = GetSysCacheHashValue1(FOREIGNSERVEROID,
										   ObjectIdGetDatum(srv->serverid));
	strlcpy(srv->name, fs->servername, sizeof(srv->name));
	srv->valid = true;
}

/*
 * Drop entries of servers (and user mappings) that no longer exist, so a
 * DROP SERVER or DROP USER MAPPING does not leave sockets open for the
 * rest of the session.  Runs only after an
 * invalidation, so the catalog probes cost nothing in steady state.
 */
static void
sweep_dropped_servers(void)
{
	HASH_SEQ_STATUS scan;
	McServer   *srv;

	sweep_needed = false;
	hash_seq_init(&scan, server_hash);
	while ((srv = hash_seq_search(&scan)) != NULL)
	{
		if (srv->valid ||
			(SearchSysCacheExists1(FOREIGNSERVEROID, ObjectIdGetDatum(srv->serverid)) &&
			 (!OidIsValid(srv->umid) ||
			  SearchSysCacheExists1(USERMAPPINGOID, ObjectIdGetDatum(srv->umid)))))
			continue;
		McConnDiscardAll(srv);
		if (srv->cxt)
			MemoryContextDelete(srv->cxt);
		hash_search(server_hash, srv, HASH_REMOVE, NULL);
	}
}

/*
 * Resolve a server name (NULL = the mcfdw.server GUC), check that the
 * current user may use it, and return its up-to-date entry.  The USAGE check
 * result is cached per role until a catalog change could alter it, so the
 * hot path costs one syscache name lookup and one hash probe.
 */
McServer *
McServerLookup(const char *name)
{
	bool		is_default = (name == NULL);

	if (is_default)
	{
		/* the usual call names no server: not even a name compare */
		if (likely(last_default_gen == mc_default_server_gen &&
				   last_oid != InvalidOid))
			return McServerGet(last_oid);
		name = mc_default_server;
	}
	if (name == NULL || name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no memcached server was given"),
				 errhint("Pass a server name or set mcfdw.server.")));
	if (last_oid == InvalidOid || strcmp(name, last_name) != 0)
	{
		Oid			oid = get_foreign_server_oid(name, false);

		strlcpy(last_name, name, sizeof(last_name));
		last_oid = oid;
	}
	last_default_gen = is_default ? mc_default_server_gen : 0;
	return McServerGet(last_oid);
}

/* McServerGet past its shortcut: find, check and if need be rebuild the entry. */
McServer *
McServerGetSlow(Oid serverid)
{
	Oid			userid = GetUserId();
	McServerKey key;
	McServer   *srv;
	bool		found;

	mc_last_server = NULL;
	if (sweep_needed)
		sweep_dropped_servers();
	key.serverid = serverid;
	key.umid = route_of(serverid, userid);
	srv = hash_search(server_hash, &key, HASH_ENTER, &found);
	if (!found)
	{
		memset(((char *) srv) + sizeof(key), 0, sizeof(McServer) - sizeof(key));
		srv->valid = false;
	}
	if (srv->acl_ok_user != userid || !srv->valid)
	{
		AclResult	aclresult = pg_foreign_server_aclcheck(serverid, userid, ACL_USAGE);

		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER,
						   GetForeignServer(serverid)->servername);
		if (!srv->valid)
			server_rebuild(srv);
		srv->acl_ok_user = userid;
	}
	mc_last_server = srv;
	return srv;
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
McServerAliveMap(McServer *srv, bool *buf)
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
McInstanceFailed(McServer *srv, McConn *conn, bool soft)
{
	McInstanceHealth *h = &srv->health[McConnIndex(conn)];
	bool		hard;
	const char *why = McConnFailure(conn, &hard);

	strlcpy(h->last_error, why, sizeof(h->last_error));
	if (!McConnFailureCounts(conn))
	{
		McConnRaise(conn);		/* a rejected login: never soft */
		return false;
	}
	h->failures++;
	if (h->failures >= srv->cfg.failure_limit && h->dead_until == 0)
	{
		h->dead_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													(int64) srv->cfg.retry_delay * 1000);
		srv->ndead++;
	}
	/*
	 * on_failure 'miss' hides unavailability, not bugs: a reply out of step
	 * with the protocol is raised even when the call would go on without
	 * the instance.
	 */
	if (!soft || hard ||
		(srv->cfg.on_failure_miss &&
		 McConnFailureCode(conn) == ERRCODE_PROTOCOL_VIOLATION))
		McConnRaise(conn);
	return false;
}

/*
 * The caller found the instance misbehaving (a reply that fits no request,
 * a batch that stopped making progress): close the connection and count
 * the failure as McInstanceFailed does.
 */
bool
McInstanceFail(McServer *srv, McConn *conn, bool soft, int sqlerrcode,
			   const char *action, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	McConnFailedV(conn, sqlerrcode, action, fmt, ap);
	va_end(ap);
	return McInstanceFailed(srv, conn, soft);
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
 * May instance index be tried now?  A dead one is refused: with an error,
 * or false when the call is soft.
 */
static bool
instance_usable(McServer *srv, int index, bool soft)
{
	McInstanceHealth *h = &srv->health[index];

	if (h->dead_until == 0 || instance_alive(srv, index, GetCurrentTimestamp()))
		return true;
	if (soft)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("memcached server \"%s\" is unavailable", srv->name),
			 errdetail("Instance %s failed %d times in a row, most recently: %s.",
					   McInstanceName(srv, index), h->failures, h->last_error),
			 errhint("It will be tried again at %s.",
					 timestamptz_to_str(h->dead_until))));
	return false;				/* not reached */
}

/*
 * The connection to instance index, ready for a request (McConnPrepare):
 * NULL (soft) when the instance is dead or the connect could not start.
 */
McConn *
McInstanceBegin(McServer *srv, int index, bool soft)
{
	McConn	   *conn = McConnOf(srv, index);

	if (!instance_usable(srv, index, soft))
		return NULL;
	if (!McConnPrepare(conn))
	{
		McInstanceFailed(srv, conn, soft);
		return NULL;
	}
	return conn;
}

/*
 * One request, one reply, on instance index (McConnRoundtrip), with the
 * instance's health checked before and counted after.  With soft set, a
 * failing or dead instance gives NULL instead of an error.
 */
const char *
McRoundtrip(McServer *srv, int index, const McRequest *req, McReply *reply,
			McConn **connp, bool soft)
{
	McConn	   *conn = McConnOf(srv, index);
	const char *base;

	*connp = conn;
	if (!instance_usable(srv, index, soft))
		return NULL;
	base = McConnRoundtrip(conn, req, reply);
	if (base == NULL)
		McInstanceFailed(srv, conn, soft);
	return base;
}

/*
 * A stats command on instance index, softly: false when the instance is
 * dead (not contacted) or failed (counted); see McConnStatLines.
 */
bool
McInstanceStatLines(McServer *srv, int index, const char *cmd,
					int limit_ms, McStatLineFn cb, void *arg)
{
	McConn	   *conn = McConnOf(srv, index);

	if (!instance_usable(srv, index, true))
		return false;
	if (!McConnStatLines(conn, cmd, limit_ms, cb, arg))
		return McInstanceFailed(srv, conn, true);
	srv->health[index].failures = 0;
	return true;
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

/*
 * Choose the instance for a key (as routed: prefix included, before base64)
 * given a health map from McServerAliveMap.
 */
int
McServerPickWith(McServer *srv, const char *key, size_t len, const bool *alive)
{
	int			idx;

	if (alive != NULL && srv->cfg.failover && mc_dist_is_ketama(srv->cfg.distribution))
		idx = mc_ring_lookup(live_ring(srv, alive),
							 mc_ring_key_hash(srv->ring, key, len));
	else
		idx = mc_ring_pick(srv->ring, key, len, alive, srv->cfg.failover);

	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("no memcached server of foreign server \"%s\" is available",
						srv->name),
				 errdetail("Every server has failed %d times in a row and is waiting out its retry delay.",
						   srv->cfg.failure_limit)));
	return idx;
}

/*
 * McRoundtripKey with failover on: an instance that fails the request is
 * skipped for the rest of the call (alive: the health map, or NULL when
 * every instance is alive).  With on_failure 'miss', running out of
 * instances is a miss (NULL) counted against the key's own instance.
 */
static const char *
roundtrip_failover(McServer *srv, const char *key, size_t keylen,
				   const McRequest *req, McReply *reply, McConn **connp,
				   const bool *alive)
{
	bool		buf[MC_MAX_ENDPOINTS];
	int			n = srv->cfg.nendpoints;

	if (alive != NULL)
		memcpy(buf, alive, sizeof(bool) * n);
	else
		for (int i = 0; i < n; i++)
			buf[i] = true;
	for (;;)
	{
		int			idx;
		const char *base;
		bool		any = false;

		for (int i = 0; i < n && !any; i++)
			any = buf[i];
		if (!any && srv->cfg.on_failure_miss)
		{
			idx = mc_ring_pick(srv->ring, key, keylen, NULL, false);
			*connp = McConnOf(srv, idx);
			McInstanceDegraded(srv, idx);
			return NULL;
		}
		idx = McServerPickWith(srv, key, keylen, buf);
		base = McRoundtrip(srv, idx, req, reply, connp, true);
		if (base != NULL)
			return base;
		/* a write that may have run on idx must not run on another too */
		if (McConnInDoubt(*connp))
		{
			if (!srv->cfg.on_failure_miss)
				McConnRaise(*connp);
			McInstanceDegraded(srv, idx);
			return NULL;
		}
		buf[idx] = false;		/* McServerPickWith errors once none is left */
	}
}

/*
 * McRoundtrip for a key, choosing its instance.  With failover on, an
 * instance that fails the request is skipped for the rest of this call and
 * the key goes where the client family would send it with that instance
 * down (as Dalli does on the spot); each failure still counts towards
 * failure_limit.  With failover off the key's instance is the only one, and
 * its failure is the caller's error.  A request that is not idempotent
 * and may have run on the failing instance (McConnInDoubt) is not failed
 * over.  With on_failure 'miss' a key whose instance (or, with failover,
 * every instance, or an in-doubt write's) cannot be reached gives NULL
 * instead, counted by McInstanceDegraded; *connp is then the key's instance.
 */
const char *
McRoundtripKey(McServer *srv, const char *key, size_t keylen,
			   const McRequest *req, McReply *reply, McConn **connp)
{
	bool		buf[MC_MAX_ENDPOINTS];
	const bool *alive;
	bool		miss = srv->cfg.on_failure_miss;
	const char *base;

	/* one healthy instance: nothing to choose */
	if (srv->cfg.nendpoints == 1 && srv->ndead == 0)
		base = McRoundtrip(srv, 0, req, reply, connp, miss);
	else
	{
		alive = McServerAliveMap(srv, buf);
		if (srv->cfg.failover)
			return roundtrip_failover(srv, key, keylen, req, reply, connp,
									  alive ? buf : NULL);
		base = McRoundtrip(srv, McServerPickWith(srv, key, keylen, alive),
						   req, reply, connp, miss);
	}
	if (unlikely(base == NULL))
		McInstanceDegraded(srv, McConnIndex(*connp));
	return base;
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
	if (!mc_warn_on_miss ||
		(srv->warned_stmt == stmt && srv->warned_lxid == MyProc->lxid))
		return;
	srv->warned_stmt = stmt;
	srv->warned_lxid = MyProc->lxid;
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("memcached server \"%s\" is unavailable, its keys are treated as misses",
					srv->name),
			 errdetail("Instance %s: %s.", McInstanceName(srv, index),
					   h->last_error[0] ? h->last_error : "unknown error"),
			 errhint("The server has on_failure \"miss\"; set mcfdw.warn_on_miss to off to silence this warning.")));
}

/*
 * The entry of a server this backend has used, with no catalog access and
 * no privilege check; NULL when there is none.  For work resolved and
 * checked earlier in the transaction that runs after its commit (xact.c),
 * when the catalog is off limits.  An entry marked invalid still holds the
 * configuration it was built with, which is what that work was routed by.
 */
McServer *
McServerPeek(Oid serverid)
{
	McRoute		rkey = {.serverid = serverid,.userid = GetUserId()};
	McRoute    *r;
	McServerKey key = {.serverid = serverid,.umid = InvalidOid};
	McServer   *srv;

	if (server_hash == NULL)
		return NULL;
	/* the current role's login, as routed when the work was queued */
	r = hash_search(route_hash, &rkey, HASH_FIND, NULL);
	if (r != NULL)
		key.umid = r->umid;
	srv = hash_search(server_hash, &key, HASH_FIND, NULL);
	if (srv == NULL || srv->conns == NULL)
		return NULL;
	return srv;
}
