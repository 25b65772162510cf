/*
 * servers_sql.c — the mc_servers view: this backend's picture of its servers.
 *
 * Owns: the SRF behind mc_servers, one row per memcached instance of every
 * mcfdw foreign server the current user may use, with its place on the
 * ring, its health (asked of health.c) and its connection (asked of conn.c).
 * Must not: connect or send anything;
 * it reports, it does not probe.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_foreign_server.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "client.h"

PG_FUNCTION_INFO_V1(mc_servers);

#define MC_SERVERS_COLS 14

/* The state word of an instance, as documented for the view. */
static const char *
conn_state(const McConnStats *cs, bool dead)
{
	if (dead)
		return "dead";
	if (cs->open)
		return "connected";
	if (cs->connects > 0)
		return "idle";
	return "never used";
}

/* mc_servers() returns one row per instance of every usable server. */
Datum
mc_servers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *servers;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	/* collected first: building an entry may read the catalog itself */
	servers = McServerUsableList();

	foreach(lc, servers)
	{
		McServer   *srv = McServerGet(lfirst_oid(lc));

		for (int i = 0; i < srv->cfg.nendpoints; i++)
		{
			McConnStats cs;
			const McInstanceHealth *h = McInstanceHealthOf(srv, i);
			McEndpoint *ep = &srv->cfg.endpoints[i];
			Datum		values[MC_SERVERS_COLS];
			bool		nulls[MC_SERVERS_COLS] = {0};
			bool		dead = h->dead_until != 0 && now < h->dead_until;

			McServerConnStats(srv, i, &cs);
			values[0] = DirectFunctionCall1(namein, CStringGetDatum(srv->name));
			values[1] = CStringGetTextDatum(ep->host);
			values[2] = Int32GetDatum(ep->port);
			nulls[2] = (ep->port == 0); /* a Unix socket: host is its path */
			values[3] = Int32GetDatum((int32) ep->weight);
			values[4] = CStringGetTextDatum(mc_dist_name(srv->cfg.distribution));
			values[5] = Int32GetDatum(srv->ring->points_per_server ?
									  (int32) srv->ring->points_per_server[i] : 0);
			values[6] = CStringGetTextDatum(conn_state(&cs, dead));
			values[7] = Int32GetDatum(h->failures);
			if (h->last_error[0])
				values[8] = CStringGetTextDatum(h->last_error);
			else
				nulls[8] = true;
			if (dead)
				values[9] = TimestampTzGetDatum(h->dead_until);
			else
				nulls[9] = true;
			values[10] = Int64GetDatum((int64) cs.connects);
			values[11] = Int64GetDatum((int64) cs.requests);
			values[12] = Int32GetDatum(i + 1);
			values[13] = Int64GetDatum((int64) h->degraded);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}
