/*
 * server_cache.c — this backend's mcfdw servers: their configuration.
 *
 * Owns: the cache of mcfdw foreign servers (keyed by server OID and by the
 * user mapping whose credentials the connections log in with, as
 * postgres_fdw keys its connections; rebuilt when the catalog changes,
 * with the USAGE check cached per role), each entry's ring and its
 * instance health record (allocated zeroed here; health.c alone changes
 * it), the list of its entries (for mc_connections), which servers the
 * current role may use (McServerUsableList, for the views) and what they
 * show of its connections (asked of net/), what the server's
 * owner lets a role with USAGE do beyond reading (write, list keys:
 * McServerCheckWrite, McServerCheckFullScan), and the (sub)transaction
 * callbacks that close connections an error or a cancel left out of step.
 * Must not: touch sockets (the net/ files do; an entry's
 * McNet is theirs), judge health or route keys (health.c does), or know what
 * commands mean (writes.c, reads.c, run.c do).
 *
 * Lifetime: everything here lives in "mcfdw pool", a child of
 * TopMemoryContext, for the life of the backend.  Server entries are marked
 * invalid by syscache callbacks (ALTER/DROP SERVER, GRANT) and rebuilt at
 * their next use; connections to instances that are still configured survive
 * the rebuild.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "health.h"
#include "options.h"
#include "server.h"
#include "server_cache.h"
#include "batch.h"

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
uint64		McServerWritesStarted = 0;

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
			srv->write_ok_user = InvalidOid;
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
			srv->write_ok_user = InvalidOid;
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
	{
		srv->acl_ok_user = InvalidOid;
		srv->write_ok_user = InvalidOid;
	}
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
		McNetCloseBusy(&srv->net);
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
McServerCacheInit(void)
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
	McOptionsParseServer(fs->options, &cfg, cxt);
	if (OidIsValid(srv->umid))
		McOptionsParseUserMapping(mapping_options(srv->umid), &cfg, cxt);
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
	conns = McNetConnArray(cxt, cfg.nendpoints);
	health = MemoryContextAllocZero(cxt, sizeof(McInstanceHealth) * cfg.nendpoints);

	/*
	 * Which old instance each new one continues: the same host and port.
	 * Health starts afresh (an administrator who changed the server wants
	 * it tried), but the last error stays on view.
	 */
	from = palloc(sizeof(int) * cfg.nendpoints);
	taken = palloc0(sizeof(bool) * Max(srv->cfg.nendpoints, 1));
	same_transport = srv->net.conns && McOptionsSameTransport(&srv->cfg, &cfg);
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
	McNetRebuild(&srv->net, conns, cfg.nendpoints, from, cxt);
	pfree(from);
	pfree(taken);
	if (srv->cxt)
		MemoryContextDelete(srv->cxt);

	srv->cxt = cxt;
	srv->cfg = cfg;
	srv->ring = ring;
	McInstanceHealthRebuilt(srv, health);
	srv->hashvalue = GetSysCacheHashValue1(FOREIGNSERVEROID,
										   ObjectIdGetDatum(srv->serverid));
	strlcpy(srv->name, fs->servername, sizeof(srv->name));
	srv->owner = fs->owner;
	srv->write_ok_user = InvalidOid;
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
		McNetDiscard(&srv->net);
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
		Oid			oid = get_foreign_server_oid(name, true);

		/* mcfdw creates no server: the default one is the user's to create */
		if (!OidIsValid(oid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("server \"%s\" does not exist", name),
					 is_default ?
					 errhint("Create it with CREATE SERVER %s FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'host:port'), or set mcfdw.server to the name of another server.",
							 quote_identifier(name)) : 0));
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
		McNetBind(&srv->net, srv->serverid, srv->name, &srv->cfg);
	}
	if (srv->acl_ok_user != userid || !srv->valid)
	{
		AclResult	aclresult = McServerAclCheck(serverid, userid, ACL_USAGE);

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
 * Every entry that holds connections (mc_connections, mc_disconnect), in
 * no particular order, once those of dropped servers and user mappings
 * are swept (their sockets closed).  The entries stay where they are until
 * the next sweep, which only McServerGetSlow and this function run.
 */
List *
McServerCacheEntries(void)
{
	HASH_SEQ_STATUS scan;
	McServer   *srv;
	List	   *entries = NIL;

	if (server_hash == NULL)
		return NIL;
	if (sweep_needed)
		sweep_dropped_servers();
	hash_seq_init(&scan, server_hash);
	while ((srv = hash_seq_search(&scan)) != NULL)
		if (srv->net.conns != NULL)
			entries = lappend(entries, srv);
	return entries;
}

/*
 * What the views show of instance i's connection (mc_connections,
 * mc_servers): asked of the connection layer, which owns it.
 */
void
McServerConnStats(McServer *srv, int i, McConnStats *out)
{
	McConnGetStats(McNetConn(&srv->net, i), out);
}

/*
 * mc_disconnect: close srv's idle connections; the number closed, and in
 * *in_use how many were left open because a request on them has not ended.
 */
int
McServerCloseIdle(McServer *srv, int *in_use)
{
	return McNetCloseIdle(&srv->net, in_use);
}

/*
 * The user mapping the current user logs in to serverid with (see
 * route_of): its entries are the connections it would use itself.
 */
Oid
McServerRoute(Oid serverid)
{
	return route_of(serverid, GetUserId());
}

/*
 * The entry of a server this backend has used, logging in with user
 * mapping umid (the entry's umid when the work was queued: the role at
 * commit may be another, after SET ROLE), with no catalog access and no
 * privilege check; NULL when there is none.  For work resolved and checked
 * earlier in the transaction that runs after its commit (xact.c), when the
 * catalog is off limits.  An entry marked invalid still holds the
 * configuration it was built with, which is what that work was routed by.
 */
McServer *
McServerPeek(Oid serverid, Oid umid)
{
	McServerKey key = {.serverid = serverid,.umid = umid};
	McServer   *srv;

	if (server_hash == NULL)
		return NULL;
	srv = hash_search(server_hash, &key, HASH_FIND, NULL);
	if (srv == NULL || srv->net.conns == NULL)
		return NULL;
	return srv;
}

/*
 * McServerCheckWrite past its shortcut.  With the option writers set, only
 * superusers, the server's owner and roles with the privileges of a listed
 * role may write; the others (USAGE alone) read.  The role is the current
 * effective one, as for USAGE: a SECURITY DEFINER function writes as its
 * owner, a trigger as the role whose statement fired it.  Listed names are
 * looked up at each check, so a role dropped since matches nobody.  The
 * success is kept until a role, membership or server change.
 */
void
McServerCheckWriteSlow(McServer *srv)
{
	Oid			userid = GetUserId();
	ListCell   *lc;

	if (has_privs_of_role(userid, srv->owner))
	{
		srv->write_ok_user = userid;
		return;
	}
	foreach(lc, srv->cfg.writers)
	{
		Oid			role = get_role_oid((const char *) lfirst(lc), true);

		if (OidIsValid(role) && has_privs_of_role(userid, role))
		{
			srv->write_ok_user = userid;
			return;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to write to memcached server \"%s\"", srv->name),
			 errdetail("Role \"%s\" may read but not write: it is not the server's owner and has the privileges of no role in the server's option \"writers\".",
					   GetUserNameFromId(userid, false)),
			 errhint("The server's owner can add a role to option \"writers\" with ALTER SERVER.")));
}

/*
 * A full scan lists every key of the server, whatever prefix it is under:
 * a foreign table's allow_full_scan (which any role with USAGE can set on
 * a table it creates) runs one only where the server's owner allowed it
 * with the server's own allow_full_scan.
 */
void
McServerCheckFullScan(McServer *srv, Oid relid)
{
	if (srv->cfg.allow_full_scan)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to list the keys of memcached server \"%s\"", srv->name),
			 errdetail("Foreign table \"%s\" allows full scans, but its server does not.",
					   get_rel_name(relid)),
			 errhint("Add a condition on the key, or ask the server's owner to set the server's option \"allow_full_scan\".")));
}

/*
 * The OIDs of every mcfdw foreign server the current user has USAGE on.
 * The others are left out rather than reported, so views granted to PUBLIC
 * (mc_servers, the statistics views) show each role what it may see.
 */
List *
McServerUsableList(void)
{
	Oid			fdwid = get_foreign_data_wrapper_oid("mcfdw", false);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *servers = NIL;

	rel = table_open(ForeignServerRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_foreign_server f = (Form_pg_foreign_server) GETSTRUCT(tup);

		if (f->srvfdw == fdwid &&
			McServerAclCheck(f->oid, GetUserId(), ACL_USAGE) == ACLCHECK_OK)
			servers = lappend_oid(servers, f->oid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return servers;
}
