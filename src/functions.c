/*
 * functions.c — the single-key SQL functions that write: stores, deletes,
 * mc_mark_stale, touches, counters, flush; and what every single-key
 * function shares.
 *
 * Owns: argument handling (NULLs, ttl and expiry conversion), the opaque
 * token sequence, building one meta command per call and sending it
 * (McKeyRoundtrip, which reads.c uses too), and turning a write's reply
 * into a SQL value.  A NULL reply base from the pool is on_failure 'miss'
 * degrading the call: writes and deletes give false, counters NULL.  Must
 * not: apply key rules itself (keys.c does), touch sockets (conn.c does,
 * reached through health.c's McRoundtripKey and McRoundtrip, which also
 * count the instance's health), parse bytes (protocol.c does) or compress
 * (values.c does).  Every function takes an optional server name; NULL
 * means mcfdw.server.
 */
#include "postgres.h"

#include <time.h>

#include "common/int.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "single.h"

PG_FUNCTION_INFO_V1(mc_set);
PG_FUNCTION_INFO_V1(mc_add);
PG_FUNCTION_INFO_V1(mc_replace);
PG_FUNCTION_INFO_V1(mc_append);
PG_FUNCTION_INFO_V1(mc_prepend);
PG_FUNCTION_INFO_V1(mc_cas);
PG_FUNCTION_INFO_V1(mc_delete);
PG_FUNCTION_INFO_V1(mc_touch);
PG_FUNCTION_INFO_V1(mc_incr);
PG_FUNCTION_INFO_V1(mc_decr);
PG_FUNCTION_INFO_V1(mc_flush_all);
PG_FUNCTION_INFO_V1(mc_mark_stale);
PG_FUNCTION_INFO_V1(mc_set_until);
PG_FUNCTION_INFO_V1(mc_add_until);
PG_FUNCTION_INFO_V1(mc_replace_until);
PG_FUNCTION_INFO_V1(mc_cas_until);
PG_FUNCTION_INFO_V1(mc_touch_until);
PG_FUNCTION_INFO_V1(mc_incr_until);
PG_FUNCTION_INFO_V1(mc_decr_until);

/* Server name argument at position argno, or NULL for the default. */
const char *
McServerArg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	return NameStr(*PG_GETARG_NAME(argno));
}


/*
 * Convert a ttl interval to what memcached expects.  Months count as 30
 * days and days as 24 hours (as EXTRACT(EPOCH) does); fractions round up so
 * a short ttl never becomes "no expiry".  Beyond 30 days memcached wants an
 * absolute unix time, so the conversion is done here and users can keep
 * thinking in intervals.
 */
static int64
interval_to_ttl(Interval *iv)
{
	int64		usecs;
	int64		secs;

	if (pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH + iv->day,
							USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, iv->time, &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("ttl is out of range")));
	if (usecs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be positive"),
				 errhint("Pass NULL for no expiry, or use mc_delete() to remove a key.")));
	secs = usecs / USECS_PER_SEC + (usecs % USECS_PER_SEC ? 1 : 0);
	if (secs > MC_RELATIVE_TTL_MAX)
	{
		secs += (int64) time(NULL);
		if (secs > PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("ttl is out of range"),
					 errdetail("memcached cannot expire items after January 2038.")));
	}
	return secs;
}

/*
 * Convert an absolute expiry (the *_until functions) to what memcached
 * expects: seconds from now up to 30 days, an absolute unix time beyond.
 * A time already past gives -1, which memcached takes as "expired at
 * once"; -infinity too.  Separate functions rather than timestamptz
 * overloads, because an untyped literal such as '1 hour' would then match
 * both interval and timestamptz and be ambiguous.
 */
static int64
expiry_to_ttl(TimestampTz ts)
{
	int64		usecs;
	int64		secs;

	if (TIMESTAMP_IS_NOBEGIN(ts))
		return -1;
	if (TIMESTAMP_NOT_FINITE(ts) ||
		pg_sub_s64_overflow(ts, GetCurrentTimestamp(), &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("expiry time is out of range"),
				 errhint("Pass NULL for no expiry.")));
	if (usecs <= 0)
		return -1;
	secs = usecs / USECS_PER_SEC + (usecs % USECS_PER_SEC ? 1 : 0);
	if (secs > MC_RELATIVE_TTL_MAX)
	{
		secs = ts / USECS_PER_SEC + (ts % USECS_PER_SEC > 0 ? 1 : 0) +
			(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
		if (secs > PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("expiry time is out of range"),
					 errdetail("memcached cannot expire items after January 2038.")));
	}
	return secs;
}

/* The ttl at argument argno: an interval, or with until a timestamptz. */
int64
McTtlArg(FunctionCallInfo fcinfo, int argno, bool until)
{
	if (until)
		return expiry_to_ttl(PG_GETARG_TIMESTAMPTZ(argno));
	return interval_to_ttl(PG_GETARG_INTERVAL_P(argno));
}

/* interval_to_ttl for the other files (batch.h). */
int64
McIntervalToTtl(Interval *iv)
{
	return interval_to_ttl(iv);
}

/*
 * The opaque token of the next request: a backend-wide sequence (never 0,
 * which means "no token"), so a reply left over from any earlier request,
 * or sent unasked, cannot pass for this one's (conn.c checks the echo).
 */
uint32
McNextOpaque(void)
{
	static uint32 seq = 0;

	if (unlikely(++seq == 0))
		seq = 1;
	return seq;
}

/*
 * Send one request for key k and read its one reply.  idempotent says
 * whether running it twice is harmless: only then may a request whose
 * reply was lost be sent again (see McConnRoundtrip).  Returns the reply
 * base; the caller reads what it needs, then calls McConnConsume and
 * McInstanceEnd.
 */
const char *
McKeyRoundtrip(McServer *srv, McKey *k, McConn **connp, const char *cmd,
		  const char *data, long datalen, const McReqOpts *opts,
		  bool idempotent, McReply *r)
{
	char		hdr[MC_REQ_HEADER_MAX];
	char		otxt[12];
	char		digits[10];
	int			nd = 0;
	McReqOpts	o = *opts;
	McRequest	req;
	uint32		opaque = McNextOpaque();

	/* the token in decimal, as mc_encode_get_value writes it */
	for (uint32 v = opaque; v != 0; v /= 10)
		digits[nd++] = (char) ('0' + v % 10);
	for (int i = 0; i < nd; i++)
		otxt[i] = digits[nd - 1 - i];
	o.opaque = otxt;
	o.opaque_len = nd;
	req.hdr = hdr;
	req.hlen = mc_encode_request(hdr, cmd, k->wire, k->wire_len, k->b64, datalen, &o);
	req.data = data;
	req.dlen = datalen < 0 ? 0 : (size_t) datalen;
	req.opaque = opaque;
	req.idempotent = idempotent;
	return McRoundtripKey(srv, k->raw, k->raw_len, &req, r, connp);
}

/*
 * Where each optional argument of a store function sits; -1 when the
 * function has no such argument.
 */
typedef struct StoreArgs
{
	char		mode;			/* ms M<mode> */
	int			cas_arg;
	int			ttl_arg;
	int			flags_arg;
	int			server_arg;
	bool		until;			/* the ttl is an absolute timestamptz */
} StoreArgs;

/*
 * Shared body of every ms-based function.  Returns true when the server
 * stored the value, false when the mode's condition was not met (add on an
 * existing key, replace/append on a missing one, cas mismatch).  Values are
 * sent as raw bytes with their length, so any byte (NUL included) is safe.
 */
static Datum
store_common(FunctionCallInfo fcinfo, const StoreArgs *a)
{
	McServer   *srv;
	McKey		k;
	McConn	   *conn;
	McReply		r;
	McReqOpts	opts = {0};
	const char *base;
	struct varlena *value;
	const char *data;
	size_t		len;
	uint32		flags;
	bool		stored;

	McCsSetOp(MC_OP_SET);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) ||
		(a->cas_arg >= 0 && PG_ARGISNULL(a->cas_arg)))
		PG_RETURN_NULL();
	srv = McServerLookup(McServerArg(fcinfo, a->server_arg));
	McServerCheckWrite(srv);
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	value = PG_GETARG_VARLENA_PP(1);

	opts.mode = a->mode;
	if (a->ttl_arg >= 0 && !PG_ARGISNULL(a->ttl_arg))
	{
		opts.has_ttl = true;
		opts.ttl = McTtlArg(fcinfo, a->ttl_arg, a->until);
	}
	if (a->flags_arg >= 0 && !PG_ARGISNULL(a->flags_arg))
	{
		opts.has_client_flags = true;
		opts.client_flags = (uint32) PG_GETARG_INT32(a->flags_arg);
	}
	if (a->cas_arg >= 0)
	{
		opts.has_cas = true;
		opts.cas = (uint64) PG_GETARG_INT64(a->cas_arg);
	}
	/* whole values are compressed as the client would; appended bytes never */
	data = VARDATA_ANY(value);
	len = VARSIZE_ANY_EXHDR(value);
	flags = opts.client_flags;
	if (a->mode != 'A' && a->mode != 'P' && McValueDeflate(srv, &data, &len, &flags))
	{
		opts.has_client_flags = true;
		opts.client_flags = flags;
	}
	/* only a plain set leaves the same state and answer when run twice */
	base = McKeyRoundtrip(srv, &k, &conn, "ms", data, (long) len, &opts,
						  a->mode == 'S' && a->cas_arg < 0, &r);
	if (base == NULL)
		PG_RETURN_BOOL(false);
	switch (r.type)
	{
		case MC_REPLY_HD:
			stored = true;
			break;
		case MC_REPLY_NS:
		case MC_REPLY_EX:
		case MC_REPLY_NF:
			stored = false;
			break;
		default:
			McConnReplyError(conn, base, &r);
	}
	McConnConsume(conn, r.consumed);
	McInstanceEnd(srv, conn);
	PG_RETURN_BOOL(stored);
}

/* mc_set(key, value, ttl, flags, server): store unconditionally. */
Datum
mc_set(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'S', -1, 2, 3, 4, false};

	return store_common(fcinfo, &a);
}

/* mc_add(key, value, ttl, flags, server): store only if the key is absent. */
Datum
mc_add(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'E', -1, 2, 3, 4, false};

	return store_common(fcinfo, &a);
}

/* mc_replace(key, value, ttl, flags, server): store only if present. */
Datum
mc_replace(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'R', -1, 2, 3, 4, false};

	return store_common(fcinfo, &a);
}

/* mc_append(key, value, server): add bytes after an existing value. */
Datum
mc_append(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'A', -1, -1, -1, 2, false};

	return store_common(fcinfo, &a);
}

/* mc_prepend(key, value, server): add bytes before an existing value. */
Datum
mc_prepend(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'P', -1, -1, -1, 2, false};

	return store_common(fcinfo, &a);
}

/* mc_cas(key, value, cas, ttl, flags, server): store if cas still matches. */
Datum
mc_cas(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'S', 2, 3, 4, 5, false};

	return store_common(fcinfo, &a);
}

/* mc_set_until(key, value, expires, flags, server): mc_set, absolute expiry. */
Datum
mc_set_until(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'S', -1, 2, 3, 4, true};

	return store_common(fcinfo, &a);
}

/* mc_add_until(key, value, expires, flags, server) */
Datum
mc_add_until(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'E', -1, 2, 3, 4, true};

	return store_common(fcinfo, &a);
}

/* mc_replace_until(key, value, expires, flags, server) */
Datum
mc_replace_until(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'R', -1, 2, 3, 4, true};

	return store_common(fcinfo, &a);
}

/* mc_cas_until(key, value, cas, expires, flags, server) */
Datum
mc_cas_until(PG_FUNCTION_ARGS)
{
	static const StoreArgs a = {'S', 2, 3, 4, 5, true};

	return store_common(fcinfo, &a);
}

/*
 * Shared body of the calls whose answer is whether the key existed:
 * mc_delete (HD or NF) and mc_touch (HD or EN).
 */
static Datum
exists_call(FunctionCallInfo fcinfo, int server_argno, const char *cmd,
			const McReqOpts *opts, bool idempotent, McReplyType missing)
{
	McServer   *srv;
	McKey		k;
	McConn	   *conn;
	McReply		r;
	const char *base;
	bool		found = false;

	srv = McServerLookup(McServerArg(fcinfo, server_argno));
	McServerCheckWrite(srv);
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	base = McKeyRoundtrip(srv, &k, &conn, cmd, NULL, -1, opts, idempotent, &r);
	if (base == NULL)
		PG_RETURN_BOOL(false);
	if (r.type == MC_REPLY_HD)
		found = true;
	else if (r.type != missing)
		McConnReplyError(conn, base, &r);
	McConnConsume(conn, r.consumed);
	McInstanceEnd(srv, conn);
	PG_RETURN_BOOL(found);
}

/* mc_delete(key, server) returns true if the key existed. */
Datum
mc_delete(PG_FUNCTION_ARGS)
{
	McReqOpts	opts = {0};

	McCsSetOp(MC_OP_DELETE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	/* a second delete would answer "missing" for a key the first removed */
	return exists_call(fcinfo, 1, "md", &opts, false, MC_REPLY_NF);
}

/*
 * mc_mark_stale(key, ttl, server): mark the item stale instead of removing
 * it ("md <key> I [T<ttl>]"): readers keep getting the old value, the
 * first mc_get_lease wins the right to refresh it, and a set clears the
 * mark.  ttl bounds how long the stale item lives (NULL: as it was).
 * Returns true if the key existed.  Marking bumps the cas, so it is not
 * sent twice.
 */
Datum
mc_mark_stale(PG_FUNCTION_ARGS)
{
	McReqOpts	opts = {0};

	McCsSetOp(MC_OP_DELETE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	opts.invalidate = true;
	if (!PG_ARGISNULL(1))
	{
		opts.has_ttl = true;
		opts.ttl = McTtlArg(fcinfo, 1, false);
	}
	return exists_call(fcinfo, 2, "md", &opts, false, MC_REPLY_NF);
}

/*
 * mc_touch(key, ttl, server): reset an item's expiry without fetching it.
 * A NULL ttl removes the expiry.  Returns true if the key existed.
 */
static Datum
touch_common(FunctionCallInfo fcinfo, bool until)
{
	McReqOpts	opts = {0};

	McCsSetOp(MC_OP_TOUCH);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	opts.has_ttl = true;
	opts.ttl = PG_ARGISNULL(1) ? 0 : McTtlArg(fcinfo, 1, until);
	return exists_call(fcinfo, 2, "mg", &opts, true, MC_REPLY_EN);
}

/* mc_touch(key, ttl, server) */
Datum
mc_touch(PG_FUNCTION_ARGS)
{
	return touch_common(fcinfo, false);
}

/* mc_touch_until(key, expires, server): mc_touch with an absolute expiry. */
Datum
mc_touch_until(PG_FUNCTION_ARGS)
{
	return touch_common(fcinfo, true);
}

/*
 * Shared body of mc_incr / mc_decr (key, delta, initial, ttl, server).
 * memcached counters are unsigned 64-bit; decrements stop at zero and
 * increments wrap, as the server defines.  With an initial value a missing
 * key is created (with ttl, NULL = no expiry); without one a missing key
 * gives NULL.
 */
static Datum
arith_common(FunctionCallInfo fcinfo, bool incr, bool until)
{
	McServer   *srv;
	McKey		k;
	McConn	   *conn;
	McReply		r;
	McReqOpts	opts = {0};
	const char *base;
	uint64		v = 0;
	bool		isnull = false;
	int64		delta;

	McCsSetOp(MC_OP_INCR);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	delta = PG_GETARG_INT64(1);
	if (delta < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delta must not be negative"),
				 errhint("Use mc_%s() to move the counter the other way.",
						 incr ? "decr" : "incr")));
	srv = McServerLookup(McServerArg(fcinfo, 4));
	McServerCheckWrite(srv);
	McKeyPrepareText(srv, PG_GETARG_TEXT_PP(0), &k);
	opts.want = MC_F_VALUE;
	opts.mode = incr ? 'I' : 'D';
	opts.has_delta = true;
	opts.delta = (uint64) delta;
	if (!PG_ARGISNULL(2))
	{
		int64		initial = PG_GETARG_INT64(2);

		if (initial < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("initial value must not be negative")));
		opts.has_initial = true;
		opts.initial = (uint64) initial;
		opts.has_vivify_ttl = true;
		opts.vivify_ttl = PG_ARGISNULL(3) ? 0 : McTtlArg(fcinfo, 3, until);
	}
	base = McKeyRoundtrip(srv, &k, &conn, "ma", NULL, -1, &opts, false, &r);
	if (base == NULL)
		PG_RETURN_NULL();
	if (r.type == MC_REPLY_VA)
	{
		uint64_t	u;

		/* memcached counters are 64-bit unsigned: anything else is garbage */
		if (!mc_parse_u64(base + r.value_off, r.value_len, UINT64_MAX, &u))
			McConnReplyError(conn, base, &r);
		v = u;
	}
	else if (r.type == MC_REPLY_NF || r.type == MC_REPLY_NS)
		isnull = true;
	else if (r.type == MC_REPLY_CLIENT_ERROR &&
			 r.msg_len >= 11 && memmem(base + r.msg_off, r.msg_len, "non-numeric", 11))
	{
		/* the reply is complete and the stream in step: keep the socket */
		McConnConsume(conn, r.consumed);
		McInstanceEnd(srv, conn);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("cannot %s memcached key \"%.*s\": its value is not a number",
						incr ? "increment" : "decrement", (int) k.raw_len, k.raw),
				 errdetail("Counters must hold an unsigned decimal number of at most 20 digits.")));
	}
	else
		McConnReplyError(conn, base, &r);
	McConnConsume(conn, r.consumed);
	McInstanceEnd(srv, conn);
	if (isnull)
		PG_RETURN_NULL();
	if (v > (uint64) PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("counter value %llu of memcached key \"%.*s\" is out of range for type bigint",
						(unsigned long long) v, (int) k.raw_len, k.raw)));
	PG_RETURN_INT64((int64) v);
}

/* mc_incr(key, delta, initial, ttl, server) returns the new value. */
Datum
mc_incr(PG_FUNCTION_ARGS)
{
	return arith_common(fcinfo, true, false);
}

/* mc_incr_until(key, delta, initial, expires, server) */
Datum
mc_incr_until(PG_FUNCTION_ARGS)
{
	return arith_common(fcinfo, true, true);
}

/* mc_decr(key, delta, initial, ttl, server) returns the new value. */
Datum
mc_decr(PG_FUNCTION_ARGS)
{
	return arith_common(fcinfo, false, false);
}

/* mc_decr_until(key, delta, initial, expires, server) */
Datum
mc_decr_until(PG_FUNCTION_ARGS)
{
	return arith_common(fcinfo, false, true);
}

/*
 * mc_flush_all(server) invalidates every item on every instance of the
 * server; returns the number of instances flushed.  Uses the text command:
 * the meta protocol has no flush.
 */
Datum
mc_flush_all(PG_FUNCTION_ARGS)
{
	McServer   *srv = McServerLookup(McServerArg(fcinfo, 0));
	int			n = 0;
	static const char cmd[] = "flush_all\r\n";
	/* a text command: its reply has no opaque; flushing twice is harmless */
	static const McRequest req = {cmd, sizeof(cmd) - 1, NULL, 0, 0, true};

	McCsSetOp(MC_OP_OTHER);
	McServerCheckWrite(srv);
	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		McConn	   *conn;
		McReply		r;
		const char *base;

		base = McRoundtrip(srv, i, &req, &r, &conn, false);
		if (r.type != MC_REPLY_HD)
			McConnReplyError(conn, base, &r);
		McConnConsume(conn, r.consumed);
		McInstanceEnd(srv, conn);
		n++;
	}
	PG_RETURN_INT32(n);
}
