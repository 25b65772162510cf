/*
 * client_stats_sql.c — the SQL surface of client_stats.c: mc_client_stats,
 * mc_client_stats_reset(), mc_cluster_health.
 *
 * Owns: which rows the views show (a role sees the rows of the servers of
 * the current database it has USAGE on; members of pg_read_all_stats see
 * every row, those of other databases, dropped servers and the overflow
 * without a server name) and their columns.  Must not: count anything, or
 * hold client_stats.c's lock while reading the catalog.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "client_stats.h"
#include "counters.h"
#include "client.h"

PG_FUNCTION_INFO_V1(mc_client_stats);
PG_FUNCTION_INFO_V1(mc_client_stats_reset);
PG_FUNCTION_INFO_V1(mc_cluster_health);

#define CS_COLS		21
#define DEAD_COLS	9

/*
 * The name of a server the current user may see the row of, or NULL; *show
 * says whether the row is shown at all.
 */
static const char *
row_server(Oid dbid, Oid serverid, List *usable, bool all_stats, bool *show)
{
	if (dbid == MyDatabaseId && serverid != InvalidOid &&
		list_member_oid(usable, serverid))
	{
		*show = true;
		return GetForeignServer(serverid)->servername;
	}
	*show = all_stats;
	if (all_stats && dbid == MyDatabaseId && serverid != InvalidOid)
	{
		ForeignServer *fs = GetForeignServerExtended(serverid, FSV_MISSING_OK);

		return fs ? fs->servername : NULL;
	}
	return NULL;
}

/* mc_client_stats(): one row per database, server, instance and operation. */
Datum
mc_client_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *usable;
	bool		all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	McCsRow    *rows;
	int			n;
	TimestampTz since;
	Datum		scope;

	InitMaterializedSRF(fcinfo, 0);
	usable = McServerUsableList();
	n = McCsReadRows(&rows, &since);
	scope = CStringGetTextDatum(McCsShared() ? "cluster" : "session");
	for (int i = 0; i < n; i++)
	{
		McCsRow    *r = &rows[i];
		Datum		values[CS_COLS];
		bool		nulls[CS_COLS] = {0};
		Datum		hist[MC_CS_NBUCKETS];
		NameData	name;
		bool		show;
		const char *server = row_server(r->dbid, r->serverid, usable,
										all_stats, &show);
		int			c = 0;

		if (!show)
			continue;
		values[c++] = ObjectIdGetDatum(r->dbid);
		nulls[0] = r->serverid == InvalidOid;
		if (server)
		{
			namestrcpy(&name, server);
			values[c++] = NameGetDatum(&name);
		}
		else
			nulls[c++] = true;
		if (r->serverid != InvalidOid)
			values[c++] = CStringGetTextDatum(r->instance);
		else
			nulls[c++] = true;
		values[c++] = CStringGetTextDatum(mc_cs_op_names[r->op]);
		/* a store's HD is no hit; a quiet read's keys without a hit missed */
		if (!mc_cs_finds[r->op])
			r->c[MC_CSF_HITS] = r->c[MC_CSF_MISSES] = 0;
		else if (mc_cs_quiet_read[r->op])
			r->c[MC_CSF_MISSES] = r->c[MC_CSF_KEYS] > r->c[MC_CSF_HITS] ?
				r->c[MC_CSF_KEYS] - r->c[MC_CSF_HITS] : 0;
		for (int k = MC_CSF_CALLS; k < MC_CSF_LAT_TOTAL; k++)
			values[c++] = Int64GetDatum((int64) r->c[k]);
		values[c++] = Float8GetDatum(r->c[MC_CSF_LAT_TOTAL] / 1000.0);
		values[c++] = Float8GetDatum(r->c[MC_CSF_LAT_MAX] / 1000.0);
		for (int b = 0; b < MC_CS_NBUCKETS; b++)
			hist[b] = Int64GetDatum((int64) r->c[MC_CSF_HIST + b]);
		values[c++] = PointerGetDatum(construct_array(hist, MC_CS_NBUCKETS, INT8OID,
													  8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[c++] = TimestampTzGetDatum(since);
		values[c++] = scope;
		Assert(c == CS_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * mc_client_stats_reset(): zero every count, forget every dead mark, and
 * zero mc_counters with them (its degraded column and this view's count the
 * same calls).  Revoked from PUBLIC by the install script.
 */
Datum
mc_client_stats_reset(PG_FUNCTION_ARGS)
{
	McCsReset();
	McCountersReset();
	PG_RETURN_VOID();
}

/* mc_cluster_health(): the instances any backend marked dead, and when. */
Datum
mc_cluster_health(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *usable;
	bool		all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	McCsDeadRow *rows;
	int			n;
	TimestampTz now = GetCurrentTimestamp();
	Datum		scope;

	InitMaterializedSRF(fcinfo, 0);
	usable = McServerUsableList();
	n = McCsReadDead(&rows);
	scope = CStringGetTextDatum(McCsShared() ? "cluster" : "session");
	for (int i = 0; i < n; i++)
	{
		McCsDeadRow *r = &rows[i];
		Datum		values[DEAD_COLS];
		bool		nulls[DEAD_COLS] = {0};
		NameData	name;
		bool		show;
		const char *server = row_server(r->dbid, r->serverid, usable,
										all_stats, &show);

		if (!show)
			continue;
		values[0] = ObjectIdGetDatum(r->dbid);
		if (server)
		{
			namestrcpy(&name, server);
			values[1] = NameGetDatum(&name);
		}
		else
			nulls[1] = true;
		values[2] = CStringGetTextDatum(r->instance);
		values[3] = BoolGetDatum(r->dead_until > now);
		values[4] = TimestampTzGetDatum(r->marked_at);
		values[5] = TimestampTzGetDatum(r->dead_until);
		values[6] = Int32GetDatum(r->failures);
		values[7] = CStringGetTextDatum(r->last_error);
		values[8] = scope;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
