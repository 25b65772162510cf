/*
 * reads.c — the single-key SQL functions that read: mc_get, mc_gets,
 * mc_gat (and their _bytea and _until forms), mc_get_raw, mc_get_lease,
 * mc_meta.
 *
 * Owns: the operation each read runs (one mg per call, a run of one:
 * run.h's McRunOne), turning its reply into a SQL value (inflated by values.c when the
 * flags say compressed; mc_get_raw returns the stored bytes untouched), the lease's
 * answer (won, stale, the placeholder an N flag creates), and the error
 * for a text value that is not valid in the database encoding (values.c's
 * McValueTextValid says which).  An operation on_failure 'miss' answered
 * degrades the call: reads give NULL.  mc_get and mc_get_bytea first ask
 * the batch a prefetching node read for this row (prefetch.h).  Must not: apply key rules (keys.c),
 * build requests, route them or touch sockets (the runner's run*.c, engine.c), parse bytes
 * (protocol.c) or know zlib (values.c, compress.c).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "engine.h"
#include "run.h"
#include "prefetch.h"
#include "sql_args.h"

PG_FUNCTION_INFO_V1(mc_meta);

/*
 * A text result must be valid in the database encoding; binary values must
 * be read with the bytea variants instead.
 */
static void
check_text_value(struct varlena *v, const McKey *k)
{
	if (!McValueTextValid(VARDATA(v), VARSIZE(v) - VARHDRSZ))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("value of memcached key \"%.*s\" is not valid in encoding \"%s\"",
						(int) k->raw_len, k->raw, GetDatabaseEncodingName()),
				 errhint("Use the _bytea variant of the function to read binary values.")));
}

/* What one read brought back. */
typedef struct ReadResult
{
	bool		hit;			/* VA */
	struct varlena *value;		/* hit: decoded (or raw) value */
	unsigned	present;		/* MC_F_* of a VA reply (MC_F_VALUE set), else 0 */
	uint32		flags;			/* present & MC_F_FLAGS */
	uint64		cas;			/* present & MC_F_CAS */
} ReadResult;

/*
 * Run op, an mg, for the value it returns: the value is wanted, and its
 * flags when the server reads them (compression, serialized_flag).  raw
 * keeps the stored bytes.  The reply is consumed before any error about
 * the value is raised, so the socket stays usable.  False when the call
 * degraded (on_failure 'miss').
 */
static bool
read_value(McServer *srv, McOpRun *run, bool raw, ReadResult *out)
{
	McReply    *r = &run->reply;
	McZStatus	st = MC_Z_DONE;
	bool		need_flags = srv->cfg.compression || srv->cfg.serialized_flag != 0;

	memset(out, 0, sizeof(*out));
	run->op.want |= MC_F_VALUE | (need_flags ? MC_F_FLAGS : 0);
	if (!McRunOne(srv, run))
		return false;
	if (r->type != MC_REPLY_VA && r->type != MC_REPLY_EN)
		McEngineOpReplyError(run);
	if (r->type == MC_REPLY_VA)
	{
		out->present = r->present | MC_F_VALUE;
		out->flags = (r->present & MC_F_FLAGS) ? r->client_flags : 0;
		out->cas = (r->present & MC_F_CAS) ? r->cas : 0;
	}
	/* the empty item a lease (N) created is no value: a miss for every read */
	if (r->type == MC_REPLY_VA && !McReplyIsPlaceholder(r))
	{
		out->hit = true;
		if (raw)
			out->value = McValueDecode(srv, run->base + r->value_off, r->value_len,
									   false, 0, &st);
		else
			out->value = McValueDecode(srv, run->base + r->value_off, r->value_len,
									   (r->present & MC_F_FLAGS) != 0, out->flags, &st);
	}
	McOpEnd(run);
	if (out->hit && out->value == NULL)
		McValueRaise(srv, st, run->op.key, run->op.keylen);
	return true;
}

/* A value about to be returned as text: not serialized, valid in the encoding. */
static void
check_text(McServer *srv, const McKey *k, const ReadResult *rr)
{
	McValueCheckText(srv, (rr->present & MC_F_FLAGS) != 0, rr->flags,
					 k->raw, k->raw_len, MC_BYTEA_HINT);
	check_text_value(rr->value, k);
}

/*
 * A value a prefetching node read for this call (prefetch.h), as the reply
 * carried it: decoded here as read_value decodes it, so its errors are this
 * call's.
 */
static void
prefetched_value(McServer *srv, McKey *k, const McPrefetchHit *pf, ReadResult *out)
{
	McZStatus	st = MC_Z_DONE;

	memset(out, 0, sizeof(*out));
	out->hit = true;
	out->present = MC_F_VALUE | (pf->has_flags ? MC_F_FLAGS : 0);
	out->flags = pf->flags;
	out->value = McValueDecode(srv, pf->data, pf->len, pf->has_flags, pf->flags, &st);
	if (out->value == NULL)
		McValueRaise(srv, st, k->raw, k->raw_len);
}

/*
 * mc_get(key text, server name) returns text, mc_get_bytea(key, server)
 * bytea (binary-safe): NULL on a miss.
 */
static Datum
get_call(FunctionCallInfo fcinfo, bool as_text)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	ReadResult	rr;
	McPrefetchHit pf;

	McCsSetOp(MC_CS_GET);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	srv = McSingleKeyArgs(fcinfo, 1, false, &k);
	switch (McPrefetchLookup(srv, k.raw, k.raw_len, &pf))
	{
		case MC_PF_MISS:
			PG_RETURN_NULL();
		case MC_PF_HIT:
			prefetched_value(srv, &k, &pf, &rr);
			break;
		default:
			McOpInit(&run.op, MC_OP_GET, &k);
			if (!read_value(srv, &run, false, &rr) || !rr.hit)
				PG_RETURN_NULL();
			break;
	}
	if (as_text)
		check_text(srv, &k, &rr);
	PG_RETURN_POINTER(rr.value);
}

MC_SQL_FUNCTION(mc_get, get_call, true)
MC_SQL_FUNCTION(mc_get_bytea, get_call, false)

/* A composite result of natts columns. */
static Datum
make_record(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * Shared body of mc_gets / mc_gets_bytea and mc_get_raw: value, flags (and
 * the cas token, for optimistic read-modify-write with mc_cas) in one round
 * trip.  mc_get_raw returns the bytes as stored, compressed or not.
 */
static Datum
gets_call(FunctionCallInfo fcinfo, bool as_text, bool raw)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	ReadResult	rr;
	Datum		values[3];
	bool		nulls[3];

	McCsSetOp(MC_CS_GET);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	srv = McSingleKeyArgs(fcinfo, 1, false, &k);
	McOpInit(&run.op, MC_OP_GET, &k);
	run.op.want = MC_F_FLAGS | (raw ? 0 : MC_F_CAS);
	if (!read_value(srv, &run, raw, &rr) || !rr.hit)
		PG_RETURN_NULL();
	if (as_text)
		check_text(srv, &k, &rr);
	values[0] = PointerGetDatum(rr.value);
	nulls[0] = false;
	nulls[1] = !(rr.present & MC_F_FLAGS);
	values[1] = Int32GetDatum((int32) rr.flags);
	nulls[2] = !(rr.present & MC_F_CAS);
	values[2] = Int64GetDatum((int64) rr.cas);
	PG_RETURN_DATUM(make_record(fcinfo, values, nulls));
}

/* mc_gets(key, server) returns (value text, flags integer, cas bigint). */
MC_SQL_FUNCTION(mc_gets, gets_call, true, false)
/* mc_gets_bytea(key, server) returns (value bytea, flags integer, cas bigint). */
MC_SQL_FUNCTION(mc_gets_bytea, gets_call, false, false)
/* mc_get_raw(key, server) returns (value bytea, flags integer): as stored. */
MC_SQL_FUNCTION(mc_get_raw, gets_call, false, true)

/*
 * Shared body of mc_gat / mc_gat_bytea (key, ttl, server) and their _until
 * forms (key, expires, server): get and touch in one round trip (mg <key>
 * v T<ttl>), returning the value, its expiry reset.  NULL on a miss; a
 * NULL ttl removes the expiry, as mc_touch's does.
 */
static Datum
gat_call(FunctionCallInfo fcinfo, bool as_text, bool until)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	ReadResult	rr;
	int64		ttl;

	McCsSetOp(MC_CS_TOUCH);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	ttl = PG_ARGISNULL(1) ? 0 : McSqlArgsTtl(fcinfo, 1, until);
	/* a touch: the item's expiry changes */
	srv = McSingleKeyArgs(fcinfo, 2, true, &k);
	McOpInit(&run.op, MC_OP_GET, &k);
	run.op.has_ttl = true;
	run.op.ttl = ttl;
	if (!read_value(srv, &run, false, &rr) || !rr.hit)
		PG_RETURN_NULL();
	if (as_text)
		check_text(srv, &k, &rr);
	PG_RETURN_POINTER(rr.value);
}

MC_SQL_FUNCTION(mc_gat, gat_call, true, false)
MC_SQL_FUNCTION(mc_gat_bytea, gat_call, false, false)
MC_SQL_FUNCTION(mc_gat_until, gat_call, true, true)
MC_SQL_FUNCTION(mc_gat_bytea_until, gat_call, false, true)

/*
 * Shared body of mc_get_lease / mc_get_lease_bytea (key, lease_ttl,
 * recache_below, server) returning (value, flags, cas, won, stale): a read
 * that hands out at most one right to recompute (memcached's N and R
 * flags).  On a miss memcached creates an empty placeholder living
 * lease_ttl and the first caller wins (W); later callers see Z.  With
 * recache_below, a hit whose remaining ttl is below it lets one caller win
 * an early refresh while everyone gets the value.  An item marked stale
 * (mc_mark_stale) is served with stale = true, and the first reader wins.
 *
 * value is NULL on a miss and on the placeholder (zero bytes, W or Z, no
 * X: McReplyIsPlaceholder): an empty value while a lease is out reads as a
 * miss, here and in every other read.  won is also true when
 * no lease could be handed out (a reply without N's placeholder, or
 * on_failure 'miss' degrading the call): then every caller must compute,
 * as without leases.  Sending it twice could hand the win to nobody, so it
 * is never resent.
 */
static Datum
lease_call(FunctionCallInfo fcinfo, bool as_text)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	McReqOpts	opts = {0};
	ReadResult	rr;
	Datum		values[5] = {0};
	bool		nulls[5] = {true, true, true, false, false};
	bool		won = true;
	bool		stale = false;

	McCsSetOp(MC_CS_LEASE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease_ttl must not be NULL"),
				 errdetail("It bounds how long other callers wait for the winner's value.")));
	opts.has_vivify_ttl = true;
	opts.vivify_ttl = McSqlArgsTtl(fcinfo, 1, false);
	if (!PG_ARGISNULL(2))
	{
		opts.has_recache_ttl = true;
		opts.recache_ttl = McSqlArgsTtl(fcinfo, 2, false);
		/* R compares with the remaining ttl: seconds, never a unix time */
		if (opts.recache_ttl > MC_RELATIVE_TTL_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("recache_below must be at most 30 days")));
	}
	/* creates the placeholder, takes the win */
	srv = McSingleKeyArgs(fcinfo, 3, true, &k);
	McOpInit(&run.op, MC_OP_GET, &k);
	run.op.want = MC_F_FLAGS | MC_F_CAS;
	run.op.opts = &opts;
	run.op.once = true;
	if (read_value(srv, &run, false, &rr) && rr.present != 0)
	{
		won = (rr.present & MC_F_WIN) != 0;
		stale = (rr.present & MC_F_STALE) != 0;
		nulls[2] = !(rr.present & MC_F_CAS);
		values[2] = Int64GetDatum((int64) rr.cas);
		if (rr.hit)
		{
			if (as_text)
				check_text(srv, &k, &rr);
			values[0] = PointerGetDatum(rr.value);
			nulls[0] = false;
			nulls[1] = !(rr.present & MC_F_FLAGS);
			values[1] = Int32GetDatum((int32) rr.flags);
		}
	}
	values[3] = BoolGetDatum(won);
	values[4] = BoolGetDatum(stale);
	PG_RETURN_DATUM(make_record(fcinfo, values, nulls));
}

MC_SQL_FUNCTION(mc_get_lease, lease_call, true)
MC_SQL_FUNCTION(mc_get_lease_bytea, lease_call, false)

/*
 * mc_meta(key, server) returns (size, ttl_remaining, last_access,
 * hit_before, cas, flags, stale) without the value: "mg <key> f c t s h l
 * u".  u leaves the item's LRU position and its hit state alone, so
 * looking does not change what is looked at.  ttl_remaining is NULL for an
 * item that never expires; the whole row is NULL on a miss.  (memcached
 * hands the recache win of a stale item to the first mg whatever its
 * flags, this one included: see the README.)
 */
Datum
mc_meta(PG_FUNCTION_ARGS)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	McReqOpts	opts = {0};
	McReply    *r = &run.reply;
	Datum		values[7];
	bool		nulls[7];
	uint64_t	v;
	bool		hit = false;

	McCsSetOp(MC_CS_META);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	srv = McSingleKeyArgs(fcinfo, 1, false, &k);
	McOpInit(&run.op, MC_OP_GET, &k);
	run.op.want = MC_F_SIZE | MC_F_TTL | MC_F_HIT | MC_F_LAST | MC_F_CAS | MC_F_FLAGS;
	run.op.opts = &opts;
	opts.no_bump = true;
	if (!McRunOne(srv, &run))
		PG_RETURN_NULL();
	if (r->type == MC_REPLY_HD)
	{
		hit = true;
		nulls[0] = !(r->present & MC_F_SIZE) || r->size > PG_INT32_MAX;
		values[0] = Int32GetDatum(nulls[0] ? 0 : (int32) r->size);
		nulls[1] = !(r->present & MC_F_TTL) || r->ttl < 0 || r->ttl > PG_INT32_MAX;
		values[1] = Int32GetDatum(nulls[1] ? 0 : (int32) r->ttl);
		nulls[2] = !mc_reply_flag_u64(run.base, r, 'l', &v) || v > PG_INT32_MAX;
		values[2] = Int32GetDatum(nulls[2] ? 0 : (int32) v);
		nulls[3] = !mc_reply_flag_u64(run.base, r, 'h', &v);
		values[3] = BoolGetDatum(!nulls[3] && v != 0);
		nulls[4] = !(r->present & MC_F_CAS);
		values[4] = Int64GetDatum((int64) r->cas);
		nulls[5] = !(r->present & MC_F_FLAGS);
		values[5] = Int32GetDatum((int32) r->client_flags);
		nulls[6] = false;
		values[6] = BoolGetDatum((r->present & MC_F_STALE) != 0);
	}
	else if (r->type != MC_REPLY_EN)
		McEngineOpReplyError(&run);
	McOpEnd(&run);
	if (!hit)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(make_record(fcinfo, values, nulls));
}
