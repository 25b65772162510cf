/*
 * connections_sql.c — this session's memcached connections at the SQL
 * surface: mc_connections, mc_disconnect(server), mc_disconnect_all(), as
 * postgres_fdw_get_connections and postgres_fdw_disconnect[_all] are for
 * postgres_fdw.
 *
 * Owns: which of the pool's connections a role sees and may close (a
 * superuser every one; another role those of servers it has USAGE on made
 * under the user mapping it logs in with itself, so after SET ROLE a role
 * sees none made under another role's mapping), and their columns.  Must
 * not: open, probe or read a socket (it reports what the pool knows), or
 * close one itself: the pool's entries come from server_cache.c, the closing from
 * the connection layer (McServerCloseIdle asks it), which leaves a socket a request
 * is using open.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_user_mapping.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "client.h"

PG_FUNCTION_INFO_V1(mc_connections);
PG_FUNCTION_INFO_V1(mc_disconnect);
PG_FUNCTION_INFO_V1(mc_disconnect_all);

#define MC_CONNECTIONS_COLS 8

/*
 * The catalog entry of a pool entry's server if the current user may see
 * its connections, else NULL.  A server dropped since the entry was made
 * is left out (its connections are closed at the pool's next sweep).
 */
static ForeignServer *
visible_server(McServer *srv, bool superuser_all)
{
	ForeignServer *fs = GetForeignServerExtended(srv->serverid, FSV_MISSING_OK);

	if (fs == NULL || superuser_all)
		return fs;
	if (McServerAclCheck(srv->serverid, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
		return NULL;
	if (McServerRoute(srv->serverid) != srv->umid)
		return NULL;
	return fs;
}

/*
 * Whose user mapping an entry's connections logged in with: the role's
 * name, "public", or NULL when they log in with none.
 */
static bool
mapping_user(Oid umid, NameData *out)
{
	HeapTuple	tp;
	Oid			umuser;
	char	   *name;

	if (!OidIsValid(umid))
		return false;
	tp = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	if (!HeapTupleIsValid(tp))
		return false;
	umuser = ((Form_pg_user_mapping) GETSTRUCT(tp))->umuser;
	ReleaseSysCache(tp);
	name = OidIsValid(umuser) ? GetUserNameFromId(umuser, true) : "public";
	if (name == NULL)
		return false;
	namestrcpy(out, name);
	return true;
}

/*
 * mc_connections(): one row per open socket the current user may see.
 * Nothing is probed: a socket the server closed since its last use still
 * shows until the next call on it finds out.
 */
Datum
mc_connections(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = superuser();
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, McServerCacheEntries())
	{
		McServer   *srv = lfirst(lc);
		ForeignServer *fs = visible_server(srv, all);
		NameData	server;
		NameData	user;
		bool		has_user;

		if (fs == NULL)
			continue;
		namestrcpy(&server, fs->servername);
		has_user = mapping_user(srv->umid, &user);
		for (int i = 0; i < srv->cfg.nendpoints; i++)
		{
			McConnStats cs;
			Datum		values[MC_CONNECTIONS_COLS];
			bool		nulls[MC_CONNECTIONS_COLS] = {0};

			McServerConnStats(srv, i, &cs);
			if (!cs.open)
				continue;
			values[0] = NameGetDatum(&server);
			values[1] = CStringGetTextDatum(McInstanceName(&srv->net, i));
			if (has_user)
				values[2] = NameGetDatum(&user);
			else
				nulls[2] = true;
			values[3] = BoolGetDatum(cs.tls);
			values[4] = BoolGetDatum(srv->valid);
			values[5] = BoolGetDatum(cs.in_use);
			values[6] = Int64GetDatum((int64) cs.socket_requests);
			values[7] = TimestampTzGetDatum(now - cs.idle_usec);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/*
 * Close the connections of the entries the current user may see, of
 * serverid or (InvalidOid) of every server; true if any socket was
 * closed.  A socket a request is using is left open, with a WARNING.
 */
static bool
disconnect(Oid serverid)
{
	bool		all = superuser();
	bool		closed = false;
	ListCell   *lc;

	foreach(lc, McServerCacheEntries())
	{
		McServer   *srv = lfirst(lc);
		ForeignServer *fs;
		int			in_use;

		if (OidIsValid(serverid) && srv->serverid != serverid)
			continue;
		fs = visible_server(srv, all);
		if (fs == NULL)
			continue;
		if (McServerCloseIdle(srv, &in_use) > 0)
			closed = true;
		if (in_use > 0)
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg_plural("cannot close %d connection of memcached server \"%s\" because it is in use",
								   "cannot close %d connections of memcached server \"%s\" because they are in use",
								   in_use, in_use, fs->servername),
					 errdetail("A request on such a connection has not finished: the call ran inside a statement still reading the server's replies. The connection stays in the pool.")));
	}
	return closed;
}

/*
 * mc_disconnect(server): close this session's connections to one server.
 * An unknown server, or one of another wrapper, is an error, as a call
 * naming it would be.
 */
Datum
mc_disconnect(PG_FUNCTION_ARGS)
{
	Name		name = PG_GETARG_NAME(0);
	Oid			serverid = get_foreign_server_oid(NameStr(*name), false);
	ForeignServer *fs = GetForeignServer(serverid);

	if (strcmp(GetForeignDataWrapper(fs->fdwid)->fdwname, "mcfdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("foreign server \"%s\" does not use foreign-data wrapper \"mcfdw\"",
						fs->servername)));
	PG_RETURN_BOOL(disconnect(serverid));
}

/* mc_disconnect_all(): close this session's connections to every server. */
Datum
mc_disconnect_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(disconnect(InvalidOid));
}
