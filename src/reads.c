/*
 * reads.c — the single-key SQL functions that read: mc_get, mc_gets,
 * mc_gat (and their _bytea and _until forms), mc_get_raw, mc_get_lease,
 * mc_meta.
 *
 * Owns: the request each read sends (one mg per call), turning its reply
 * into a SQL value (inflated by values.c when the flags say compressed;
 * mc_get_raw returns the stored bytes untouched), the lease's answer
 * (won, stale, the placeholder an N flag creates), and the check that a
 * text value is valid in the database encoding (McTextValid, shared with
 * multi_get.c).  A NULL reply base from the pool is on_failure 'miss'
 * degrading the call: reads give NULL.  Must not: apply key rules (keys.c),
 * touch sockets (conn.c, through functions.c's McKeyRoundtrip), parse
 * bytes (protocol.c) or know zlib (values.c, compress.c).
 */
#include "postgres.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "access/htup_details.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "single.h"

PG_FUNCTION_INFO_V1(mc_get);
PG_FUNCTION_INFO_V1(mc_get_bytea);
PG_FUNCTION_INFO_V1(mc_gets);
PG_FUNCTION_INFO_V1(mc_gets_bytea);
PG_FUNCTION_INFO_V1(mc_gat);
PG_FUNCTION_INFO_V1(mc_gat_bytea);
PG_FUNCTION_INFO_V1(mc_gat_until);
PG_FUNCTION_INFO_V1(mc_gat_bytea_until);
PG_FUNCTION_INFO_V1(mc_get_raw);
PG_FUNCTION_INFO_V1(mc_get_lease);
PG_FUNCTION_INFO_V1(mc_get_lease_bytea);
PG_FUNCTION_INFO_V1(mc_meta);

/*
 * Is this value valid text in the database encoding?  Every server encoding
 * is ASCII-compatible, so ASCII without NUL bytes is valid in all of them:
 * check eight bytes at a time for a high bit or a zero byte, and leave the
 * full verification to the rest.
 */
bool
McTextValid(const char *p, size_t len)
{
	const char *start = p;
	const char *end = p + len;
	uint64		acc = 0;

#ifdef __SSE2__
	/* sixteen bytes a step: a high bit, or a zero byte (made 0xff by cmpeq) */
	{
		const __m128i zero = _mm_setzero_si128();
		__m128i		vacc = zero;

		if (len >= 16)
		{
			__m128i		v;

			while (end - p > 16)
			{
				v = _mm_loadu_si128((const __m128i *) p);
				vacc = _mm_or_si128(vacc, _mm_or_si128(v, _mm_cmpeq_epi8(v, zero)));
				p += 16;
			}
			/* the last sixteen bytes, overlapping what was already seen */
			v = _mm_loadu_si128((const __m128i *) (end - 16));
			vacc = _mm_or_si128(vacc, _mm_or_si128(v, _mm_cmpeq_epi8(v, zero)));
			return _mm_movemask_epi8(vacc) == 0 ||
				pg_verifymbstr(start, (int) len, true);
		}
	}
#endif
	/* one test at the end: any high bit or zero byte in any word */
	while (end - p >= 8)
	{
		uint64		w;

		memcpy(&w, p, 8);
		acc |= w | ((w - UINT64CONST(0x0101010101010101)) & ~w);
		p += 8;
	}
	if (acc & UINT64CONST(0x8080808080808080))
		return pg_verifymbstr(start, (int) len, true);
	for (; p < end; p++)
		if (*p == '\0' || IS_HIGHBIT_SET(*p))
			return pg_verifymbstr(start, (int) len, true);
	return true;
}

/*
 * A text result must be valid in the database encoding; binary values must
 * be read with the bytea variants instead.
 */
static void
check_text_value(struct varlena *v, McKey *k)
{
	if (!McTextValid(VARDATA(v), VARSIZE(v) - VARHDRSZ))
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
 * Send one mg for key k and read the value it returns.  opts NULL is the
 * plain get (mc_encode_get_value's short request); otherwise flags are
 * added when the server reads them (compression, serialized_flag).  raw
 * keeps the stored bytes.  The reply is consumed before any error about
 * the value is raised, so the socket stays usable.  False when the call
 * degraded (on_failure 'miss').
 */
static bool
read_value(McServer *srv, McKey *k, McReqOpts *opts, bool idempotent, bool raw,
		   ReadResult *out)
{
	McConn	   *conn;
	McReply		r;
	const char *base;
	McZStatus	st = MC_Z_DONE;
	bool		need_flags = srv->cfg.compression || srv->cfg.serialized_flag != 0;

	memset(out, 0, sizeof(*out));
	if (opts == NULL && !need_flags)
	{
		char		hdr[MC_REQ_HEADER_MAX];
		McRequest	req;

		req.opaque = McNextOpaque();
		req.hdr = hdr;
		req.hlen = mc_encode_get_value(hdr, k->wire, k->wire_len, k->b64, req.opaque);
		req.data = NULL;
		req.dlen = 0;
		req.idempotent = true;
		base = McRoundtripKey(srv, k->raw, k->raw_len, &req, &r, &conn);
	}
	else
	{
		McReqOpts	o = {0};

		if (opts != NULL)
			o = *opts;
		o.want |= MC_F_VALUE | (need_flags ? MC_F_FLAGS : 0);
		base = McKeyRoundtrip(srv, k, &conn, "mg", NULL, -1, &o, idempotent, &r);
	}
	if (base == NULL)
		return false;
	if (r.type != MC_REPLY_VA && r.type != MC_REPLY_EN)
		McConnReplyError(conn, base, &r);
	if (r.type == MC_REPLY_VA)
	{
		out->present = r.present | MC_F_VALUE;
		out->flags = (r.present & MC_F_FLAGS) ? r.client_flags : 0;
		out->cas = (r.present & MC_F_CAS) ? r.cas : 0;
	}
	/* the empty item a lease (N) created is no value: a miss for every read */
	if (r.type == MC_REPLY_VA && !McReplyIsPlaceholder(&r))
	{
		out->hit = true;
		if (raw)
			out->value = McValueDecode(srv, base + r.value_off, r.value_len,
									   false, 0, &st);
		else
			out->value = McValueDecode(srv, base + r.value_off, r.value_len,
									   (r.present & MC_F_FLAGS) != 0, out->flags, &st);
	}
	McConnConsume(conn, r.consumed);
	McInstanceEnd(srv, conn);
	if (out->hit && out->value == NULL)
		McValueRaise(srv, st, k->raw, k->raw_len);
	return true;
}

/* A value about to be returned as text: not serialized, valid in the encoding. */
static void
check_text(McServer *srv, McKey *k, const ReadResult *rr)
{
	McValueCheckText(srv, (rr->present & MC_F_FLAGS) != 0, rr->flags,
					 k->raw, k->raw_len, MC_BYTEA_HINT);
	check_text_value(rr->value, k);
}

/* Shared body of mc_get / mc_get_bytea. */
static Datum
get_common(FunctionCallInfo fcinfo, bool as_text)
{
	McServer   *srv;
	McKey		k;
	ReadResult	rr;

	McCsSetOp(MC_OP_GET);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	srv = McServerLookup(McServerArg(fcinfo, 1));
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	if (!read_value(srv, &k, NULL, true, false, &rr) || !rr.hit)
		PG_RETURN_NULL();
	if (as_text)
		check_text(srv, &k, &rr);
	PG_RETURN_POINTER(rr.value);
}

/* mc_get(key text, server name) returns text: NULL on a miss. */
Datum
mc_get(PG_FUNCTION_ARGS)
{
	return get_common(fcinfo, true);
}

/* mc_get_bytea(key text, server name) returns bytea: binary-safe. */
Datum
mc_get_bytea(PG_FUNCTION_ARGS)
{
	return get_common(fcinfo, false);
}

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
gets_common(FunctionCallInfo fcinfo, bool as_text, bool raw)
{
	McServer   *srv;
	McKey		k;
	McReqOpts	opts = {0};
	ReadResult	rr;
	Datum		values[3];
	bool		nulls[3];

	McCsSetOp(MC_OP_GET);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	srv = McServerLookup(McServerArg(fcinfo, 1));
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	opts.want = MC_F_FLAGS | (raw ? 0 : MC_F_CAS);
	if (!read_value(srv, &k, &opts, true, raw, &rr) || !rr.hit)
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
Datum
mc_gets(PG_FUNCTION_ARGS)
{
	return gets_common(fcinfo, true, false);
}

/* mc_gets_bytea(key, server) returns (value bytea, flags integer, cas bigint). */
Datum
mc_gets_bytea(PG_FUNCTION_ARGS)
{
	return gets_common(fcinfo, false, false);
}

/* mc_get_raw(key, server) returns (value bytea, flags integer): as stored. */
Datum
mc_get_raw(PG_FUNCTION_ARGS)
{
	return gets_common(fcinfo, false, true);
}

/*
 * Shared body of mc_gat / mc_gat_bytea and their _until forms: get and
 * touch in one round trip (mg <key> v T<ttl>).  NULL on a miss; a NULL ttl
 * removes the expiry, as mc_touch's does.
 */
static Datum
gat_common(FunctionCallInfo fcinfo, bool as_text, bool until)
{
	McServer   *srv;
	McKey		k;
	McReqOpts	opts = {0};
	ReadResult	rr;

	McCsSetOp(MC_OP_TOUCH);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	opts.has_ttl = true;
	opts.ttl = PG_ARGISNULL(1) ? 0 : McTtlArg(fcinfo, 1, until);
	srv = McServerLookup(McServerArg(fcinfo, 2));
	McServerCheckWrite(srv);	/* a touch: the item's expiry changes */
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	if (!read_value(srv, &k, &opts, true, false, &rr) || !rr.hit)
		PG_RETURN_NULL();
	if (as_text)
		check_text(srv, &k, &rr);
	PG_RETURN_POINTER(rr.value);
}

/* mc_gat(key, ttl, server) returns text: the value, its expiry reset. */
Datum
mc_gat(PG_FUNCTION_ARGS)
{
	return gat_common(fcinfo, true, false);
}

/* mc_gat_bytea(key, ttl, server) returns bytea. */
Datum
mc_gat_bytea(PG_FUNCTION_ARGS)
{
	return gat_common(fcinfo, false, false);
}

/* mc_gat_until(key, expires, server) returns text. */
Datum
mc_gat_until(PG_FUNCTION_ARGS)
{
	return gat_common(fcinfo, true, true);
}

/* mc_gat_bytea_until(key, expires, server) returns bytea. */
Datum
mc_gat_bytea_until(PG_FUNCTION_ARGS)
{
	return gat_common(fcinfo, false, true);
}

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
lease_common(FunctionCallInfo fcinfo, bool as_text)
{
	McServer   *srv;
	McKey		k;
	McReqOpts	opts = {0};
	ReadResult	rr;
	Datum		values[5] = {0};
	bool		nulls[5] = {true, true, true, false, false};
	bool		won = true;
	bool		stale = false;

	McCsSetOp(MC_OP_LEASE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease_ttl must not be NULL"),
				 errdetail("It bounds how long other callers wait for the winner's value.")));
	opts.want = MC_F_FLAGS | MC_F_CAS;
	opts.has_vivify_ttl = true;
	opts.vivify_ttl = McTtlArg(fcinfo, 1, false);
	if (!PG_ARGISNULL(2))
	{
		opts.has_recache_ttl = true;
		opts.recache_ttl = McTtlArg(fcinfo, 2, false);
		/* R compares with the remaining ttl: seconds, never a unix time */
		if (opts.recache_ttl > MC_RELATIVE_TTL_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("recache_below must be at most 30 days")));
	}
	srv = McServerLookup(McServerArg(fcinfo, 3));
	McServerCheckWrite(srv);	/* creates the placeholder, takes the win */
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	if (read_value(srv, &k, &opts, false, false, &rr) && rr.present != 0)
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

/* mc_get_lease(key, lease_ttl, recache_below, server) */
Datum
mc_get_lease(PG_FUNCTION_ARGS)
{
	return lease_common(fcinfo, true);
}

/* mc_get_lease_bytea(key, lease_ttl, recache_below, server) */
Datum
mc_get_lease_bytea(PG_FUNCTION_ARGS)
{
	return lease_common(fcinfo, false);
}

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
	McConn	   *conn;
	McReply		r;
	McReqOpts	opts = {0};
	const char *base;
	Datum		values[7];
	bool		nulls[7];
	uint64_t	v;
	bool		hit = false;

	McCsSetOp(MC_OP_META);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	srv = McServerLookup(McServerArg(fcinfo, 1));
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	opts.want = MC_F_SIZE | MC_F_TTL | MC_F_HIT | MC_F_LAST | MC_F_CAS | MC_F_FLAGS;
	opts.no_bump = true;
	base = McKeyRoundtrip(srv, &k, &conn, "mg", NULL, -1, &opts, true, &r);
	if (base == NULL)
		PG_RETURN_NULL();
	if (r.type == MC_REPLY_HD)
	{
		hit = true;
		nulls[0] = !(r.present & MC_F_SIZE) || r.size > PG_INT32_MAX;
		values[0] = Int32GetDatum(nulls[0] ? 0 : (int32) r.size);
		nulls[1] = !(r.present & MC_F_TTL) || r.ttl < 0 || r.ttl > PG_INT32_MAX;
		values[1] = Int32GetDatum(nulls[1] ? 0 : (int32) r.ttl);
		nulls[2] = !mc_reply_flag_u64(base, &r, 'l', &v) || v > PG_INT32_MAX;
		values[2] = Int32GetDatum(nulls[2] ? 0 : (int32) v);
		nulls[3] = !mc_reply_flag_u64(base, &r, 'h', &v);
		values[3] = BoolGetDatum(!nulls[3] && v != 0);
		nulls[4] = !(r.present & MC_F_CAS);
		values[4] = Int64GetDatum((int64) r.cas);
		nulls[5] = !(r.present & MC_F_FLAGS);
		values[5] = Int32GetDatum((int32) r.client_flags);
		nulls[6] = false;
		values[6] = BoolGetDatum((r.present & MC_F_STALE) != 0);
	}
	else if (r.type != MC_REPLY_EN)
		McConnReplyError(conn, base, &r);
	McConnConsume(conn, r.consumed);
	McInstanceEnd(srv, conn);
	if (!hit)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(make_record(fcinfo, values, nulls));
}
