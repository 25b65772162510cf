/*
 * counters_sql.c — the SQL surface of counters.c: mc_counters and
 * mc_counters_reset().
 *
 * Owns: which rows the view shows (the servers the current user has USAGE
 * on, zeros for one never counted; the overflow row only to members of
 * pg_read_all_stats, once it has counted anything) and its columns.  Must
 * not: count anything or hold counters.c's lock while reading the catalog.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "client_stats.h"
#include "counters.h"
#include "client.h"

PG_FUNCTION_INFO_V1(mc_counters);
PG_FUNCTION_INFO_V1(mc_counters_reset);

#define MC_COUNTERS_COLS	(MC_NCOUNTERS + 3)

static void
put_row(ReturnSetInfo *rsinfo, const char *server, const uint64 *c,
		TimestampTz since, Datum scope)
{
	Datum		values[MC_COUNTERS_COLS];
	bool		nulls[MC_COUNTERS_COLS] = {0};
	NameData	name;

	if (server)
	{
		namestrcpy(&name, server);
		values[0] = NameGetDatum(&name);
	}
	else
		nulls[0] = true;
	for (int k = 0; k < MC_NCOUNTERS; k++)
		values[1 + k] = Int64GetDatum((int64) c[k]);
	values[MC_NCOUNTERS + 1] = TimestampTzGetDatum(since);
	values[MC_NCOUNTERS + 2] = scope;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* mc_counters(): the counts of every usable server, then the overflow. */
Datum
mc_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *servers;
	int			n;
	Oid		   *oids;
	uint64		(*counts)[MC_NCOUNTERS];
	uint64		overflow[MC_NCOUNTERS];
	bool		any_overflow = false;
	TimestampTz since;
	Datum		scope;

	InitMaterializedSRF(fcinfo, 0);
	servers = McServerUsableList();
	n = list_length(servers);
	oids = palloc(sizeof(Oid) * Max(n, 1));
	counts = palloc(sizeof(*counts) * Max(n, 1));
	for (int i = 0; i < n; i++)
		oids[i] = list_nth_oid(servers, i);
	McCountersRead(oids, n, counts, overflow, &since);

	scope = CStringGetTextDatum(McCountersShared() ? "cluster" : "session");
	for (int i = 0; i < n; i++)
		put_row(rsinfo, GetForeignServer(oids[i])->servername, counts[i],
				since, scope);
	for (int k = 0; k < MC_NCOUNTERS; k++)
		any_overflow |= overflow[k] != 0;
	if (any_overflow && has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS))
		put_row(rsinfo, NULL, overflow, since, scope);
	return (Datum) 0;
}

/*
 * mc_counters_reset(): zero every count (in the cluster scope every
 * server's of every database, otherwise this session's).  Revoked from
 * PUBLIC by the install script.
 */
Datum
mc_counters_reset(PG_FUNCTION_ARGS)
{
	McCountersReset();
	McCsReset();				/* one reset for both: see mc_client_stats_reset */
	PG_RETURN_VOID();
}
