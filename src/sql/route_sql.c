/*
 * route_sql.c — mc_route: where keys go, asked of the same code that sends
 * them.
 *
 * Owns: the SRF behind mc_route(keys, server), one row per array element:
 * the instance the key maps to on the ring, its wire form, and where a
 * read would go now given the instances' health.  Each key is checked and
 * routed by keys.c (McKeyPrepare, as the single-key functions do, so a bad
 * key is refused with mc_get's error) and given its instance by health.c
 * (McInstancePickWith, McInstancePickNow), so the answer cannot drift from what
 * the get path does.  Must not: connect or send anything (it reports
 * routing, it does not probe), or route a key itself.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "client.h"
#include "keys.h"

PG_FUNCTION_INFO_V1(mc_route);

#define MC_ROUTE_COLS 8

/*
 * mc_route(keys text[], server name) returns (key, instance, host, port,
 * wire_key, base64, dead, failover_instance): one row per element, in
 * array order, a NULL element as a row of NULLs so the rows line up with
 * the array (WITH ORDINALITY).  instance is the key's place on the ring
 * whatever the health (what ring compatibility is about), 1-based as in
 * mc_servers; failover_instance is where a read would go now.
 */
Datum
mc_route(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	McServer   *srv;
	Datum	   *elems;
	bool	   *elnulls;
	int			n;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		return (Datum) 0;
	srv = McServerLookup(PG_ARGISNULL(1) ? NULL : NameStr(*PG_GETARG_NAME(1)));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false,
					  TYPALIGN_INT, &elems, &elnulls, &n);
	/* one health map for the call, as a multi-get takes */
	alive = McInstanceAliveMap(srv, alivebuf);

	for (int i = 0; i < n; i++)
	{
		Datum		values[MC_ROUTE_COLS];
		bool		nulls[MC_ROUTE_COLS];
		McKey		k;
		McEndpoint *ep;
		int			idx;
		int			now;

		CHECK_FOR_INTERRUPTS();
		if (elnulls[i])
		{
			memset(nulls, true, sizeof(nulls));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}
		memset(nulls, false, sizeof(nulls));
		McKeyPrepare(srv, VARDATA_ANY(DatumGetPointer(elems[i])),
					 VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])), &k);
		/* on the ring: the full ring, health ignored (never fails) */
		idx = McInstancePickWith(srv, k.raw, k.raw_len, NULL);
		now = McInstancePickNow(srv, k.raw, k.raw_len, alive);
		ep = &srv->cfg.endpoints[idx];

		values[0] = elems[i];
		values[1] = Int32GetDatum(idx + 1);
		values[2] = CStringGetTextDatum(ep->host);
		values[3] = Int32GetDatum(ep->port);
		/* the wire form is ASCII: printable without spaces, or base64 */
		values[4] = PointerGetDatum(cstring_to_text_with_len(k.wire, (int) k.wire_len));
		values[5] = BoolGetDatum(k.b64);
		values[6] = BoolGetDatum(alive != NULL && !alive[idx]);
		if (now >= 0)
			values[7] = Int32GetDatum(now + 1);
		else
			nulls[7] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
