/*
 * writes.c — the single-key SQL functions that write: stores, deletes,
 * mc_mark_stale, touches, counters, flush.
 *
 * Owns: their arguments' NULLs and checks (the shared ones are
 * sql_args.c's), the operation each call runs (one meta command per call,
 * a run of one: run.h's McRunOne; flush, a run of one flush operation per
 * instance, run.h), and turning a write's reply into a SQL value.  An operation
 * on_failure 'miss' answered degrades the call: writes and deletes give
 * false, counters NULL.  Must not: apply key rules itself (keys.c does),
 * build requests, route them or touch sockets (the runner's run*.c and engine.c do, and report
 * to health.c), parse bytes (protocol.c does) or compress (values.c
 * does).  Every function takes an optional server name; NULL means
 * mcfdw.server.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "engine.h"
#include "run.h"
#include "sql_args.h"

PG_FUNCTION_INFO_V1(mc_delete);
PG_FUNCTION_INFO_V1(mc_mark_stale);
PG_FUNCTION_INFO_V1(mc_flush_all);

/* A store function without the optional argument. */
#define NO_ARG		(-1)

/*
 * Shared body of every ms-based function: mode is ms's M<mode>, and the
 * other arguments say where its optional arguments sit (NO_ARG when the
 * function has none); until: its ttl is an absolute timestamptz.  Returns
 * true when the server stored the value, false when the mode's condition
 * was not met (add on an existing key, replace/append on a missing one,
 * cas mismatch).  Values are sent as raw bytes with their length, so any
 * byte (NUL included) is safe.
 */
static Datum
store_call(FunctionCallInfo fcinfo, char mode, int cas_arg, int ttl_arg,
		   int flags_arg, int server_arg, bool until)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	McOp	   *op = &run.op;
	McReqOpts	opts = {0};
	struct varlena *value;
	bool		stored;

	McCsSetOp(MC_CS_SET);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) ||
		(cas_arg >= 0 && PG_ARGISNULL(cas_arg)))
		PG_RETURN_NULL();
	srv = McSingleKeyArgs(fcinfo, server_arg, true, &k);
	value = PG_GETARG_VARLENA_PP(1);

	McOpInit(op, MC_OP_STORE, &k);
	op->mode = mode;
	if (ttl_arg >= 0 && !PG_ARGISNULL(ttl_arg))
	{
		op->has_ttl = true;
		op->ttl = McSqlArgsTtl(fcinfo, ttl_arg, until);
	}
	if (flags_arg >= 0 && !PG_ARGISNULL(flags_arg))
	{
		op->has_flags = true;
		op->flags = (uint32) PG_GETARG_INT32(flags_arg);
	}
	if (cas_arg >= 0)
	{
		opts.has_cas = true;
		opts.cas = (uint64) PG_GETARG_INT64(cas_arg);
		op->opts = &opts;
	}
	/* whole values are compressed as the client would; appended bytes never */
	op->data = VARDATA_ANY(value);
	op->datalen = VARSIZE_ANY_EXHDR(value);
	if (mode != 'A' && mode != 'P' &&
		McValueDeflate(srv, &op->data, &op->datalen, &op->flags))
		op->has_flags = true;
	/* only a plain set leaves the same state and answer when run twice */
	op->once = !(mode == 'S' && cas_arg < 0);
	if (!McRunOne(srv, &run))
		PG_RETURN_BOOL(false);
	switch (run.reply.type)
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
			McEngineOpReplyError(&run);
	}
	McOpEnd(&run);
	PG_RETURN_BOOL(stored);
}

/* mc_set(key, value, ttl, flags, server): store unconditionally. */
MC_SQL_FUNCTION(mc_set, store_call, 'S', NO_ARG, 2, 3, 4, false)
/* mc_add(key, value, ttl, flags, server): store only if the key is absent. */
MC_SQL_FUNCTION(mc_add, store_call, 'E', NO_ARG, 2, 3, 4, false)
/* mc_replace(key, value, ttl, flags, server): store only if present. */
MC_SQL_FUNCTION(mc_replace, store_call, 'R', NO_ARG, 2, 3, 4, false)
/* mc_append(key, value, server): add bytes after an existing value. */
MC_SQL_FUNCTION(mc_append, store_call, 'A', NO_ARG, NO_ARG, NO_ARG, 2, false)
/* mc_prepend(key, value, server): add bytes before an existing value. */
MC_SQL_FUNCTION(mc_prepend, store_call, 'P', NO_ARG, NO_ARG, NO_ARG, 2, false)
/* mc_cas(key, value, cas, ttl, flags, server): store if cas still matches. */
MC_SQL_FUNCTION(mc_cas, store_call, 'S', 2, 3, 4, 5, false)
/* mc_set_until(key, value, expires, flags, server): mc_set, absolute expiry. */
MC_SQL_FUNCTION(mc_set_until, store_call, 'S', NO_ARG, 2, 3, 4, true)
/* mc_add_until(key, value, expires, flags, server) */
MC_SQL_FUNCTION(mc_add_until, store_call, 'E', NO_ARG, 2, 3, 4, true)
/* mc_replace_until(key, value, expires, flags, server) */
MC_SQL_FUNCTION(mc_replace_until, store_call, 'R', NO_ARG, 2, 3, 4, true)
/* mc_cas_until(key, value, cas, expires, flags, server) */
MC_SQL_FUNCTION(mc_cas_until, store_call, 'S', 2, 3, 4, 5, true)

/*
 * Shared body of the calls whose answer is whether the key existed: op (a
 * delete or a touch, its options set) answered HD or missing (NF for md,
 * EN for mg).
 */
static Datum
exists_call(FunctionCallInfo fcinfo, int server_argno, McOpRun *run,
			McReplyType missing)
{
	McServer   *srv;
	McKey		k;
	bool		found = false;

	srv = McSingleKeyArgs(fcinfo, server_argno, true, &k);
	McOpKey(&run->op, &k);
	if (!McRunOne(srv, run))
		PG_RETURN_BOOL(false);
	if (run->reply.type == MC_REPLY_HD)
		found = true;
	else if (run->reply.type != missing)
		McEngineOpReplyError(run);
	McOpEnd(run);
	PG_RETURN_BOOL(found);
}

/* mc_delete(key, server) returns true if the key existed. */
Datum
mc_delete(PG_FUNCTION_ARGS)
{
	McOpRun		run;

	McCsSetOp(MC_CS_DELETE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	McOpInit(&run.op, MC_OP_DELETE, NULL);
	/* a second delete would answer "missing" for a key the first removed */
	run.op.once = true;
	return exists_call(fcinfo, 1, &run, MC_REPLY_NF);
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
	McOpRun		run;

	McCsSetOp(MC_CS_DELETE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	McOpInit(&run.op, MC_OP_DELETE, NULL);
	run.op.invalidate = true;
	if (!PG_ARGISNULL(1))
	{
		run.op.has_ttl = true;
		run.op.ttl = McSqlArgsTtl(fcinfo, 1, false);
	}
	run.op.once = true;
	return exists_call(fcinfo, 2, &run, MC_REPLY_NF);
}

/*
 * mc_touch(key, ttl, server) and mc_touch_until(key, expires, server):
 * reset an item's expiry without fetching it ("mg <key> T<ttl>").  A NULL
 * ttl removes the expiry.  Returns true if the key existed.
 */
static Datum
touch_call(FunctionCallInfo fcinfo, bool until)
{
	McOpRun		run;

	McCsSetOp(MC_CS_TOUCH);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	McOpInit(&run.op, MC_OP_GET, NULL);
	run.op.has_ttl = true;
	run.op.ttl = PG_ARGISNULL(1) ? 0 : McSqlArgsTtl(fcinfo, 1, until);
	return exists_call(fcinfo, 2, &run, MC_REPLY_EN);
}

MC_SQL_FUNCTION(mc_touch, touch_call, false)
MC_SQL_FUNCTION(mc_touch_until, touch_call, true)

/*
 * Shared body of mc_incr / mc_decr (key, delta, initial, ttl, server) and
 * their _until forms (an absolute expiry for a created key).  memcached
 * counters are unsigned 64-bit; decrements stop at zero and increments
 * wrap, as the server defines.  With an initial value a missing key is
 * created (with ttl, NULL = no expiry); without one a missing key gives
 * NULL.  Each returns the new value.
 */
static Datum
arith_call(FunctionCallInfo fcinfo, bool incr, bool until)
{
	McServer   *srv;
	McKey		k;
	McOpRun		run;
	McOp	   *op = &run.op;
	McReqOpts	opts = {0};
	McReply    *r = &run.reply;
	uint64		v = 0;
	bool		isnull = false;
	int64		delta;

	McCsSetOp(MC_CS_INCR);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	delta = PG_GETARG_INT64(1);
	if (delta < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delta must not be negative"),
				 errhint("Use mc_%s() to move the counter the other way.",
						 incr ? "decr" : "incr")));
	srv = McSingleKeyArgs(fcinfo, 4, true, &k);
	McOpInit(op, MC_OP_ARITH, &k);
	op->want = MC_F_VALUE;
	op->opts = &opts;
	op->mode = incr ? 'I' : 'D';
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
		opts.vivify_ttl = PG_ARGISNULL(3) ? 0 : McSqlArgsTtl(fcinfo, 3, until);
	}
	op->once = true;
	if (!McRunOne(srv, &run))
		PG_RETURN_NULL();
	if (r->type == MC_REPLY_VA)
	{
		uint64_t	u;

		/* memcached counters are 64-bit unsigned: anything else is garbage */
		if (!mc_parse_u64(run.base + r->value_off, r->value_len, UINT64_MAX, &u))
			McEngineOpReplyError(&run);
		v = u;
	}
	else if (r->type == MC_REPLY_NF || r->type == MC_REPLY_NS)
		isnull = true;
	else if (r->type == MC_REPLY_CLIENT_ERROR &&
			 r->msg_len >= 11 && memmem(run.base + r->msg_off, r->msg_len, "non-numeric", 11))
	{
		/* the reply is complete and the stream in step: keep the socket */
		McOpEnd(&run);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("cannot %s memcached key \"%.*s\": its value is not a number",
						incr ? "increment" : "decrement", (int) k.raw_len, k.raw),
				 errdetail("Counters must hold an unsigned decimal number of at most 20 digits.")));
	}
	else
		McEngineOpReplyError(&run);
	McOpEnd(&run);
	if (isnull)
		PG_RETURN_NULL();
	if (v > (uint64) PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("counter value %llu of memcached key \"%.*s\" is out of range for type bigint",
						(unsigned long long) v, (int) k.raw_len, k.raw)));
	PG_RETURN_INT64((int64) v);
}

MC_SQL_FUNCTION(mc_incr, arith_call, true, false)
MC_SQL_FUNCTION(mc_incr_until, arith_call, true, true)
MC_SQL_FUNCTION(mc_decr, arith_call, false, false)
MC_SQL_FUNCTION(mc_decr_until, arith_call, false, true)

/*
 * mc_flush_all(server) invalidates every item on every instance of the
 * server; returns the number of instances flushed.  A run of flush
 * operations, one per instance (the text command: the meta protocol has
 * no flush); an instance that fails is raised, as every write's is.
 */
Datum
mc_flush_all(PG_FUNCTION_ARGS)
{
	McServer   *srv;
	McOp	   *ops;
	McRun		run = {0};

	McCsSetOp(MC_CS_OTHER);
	srv = McServerLookup(McServerArg(fcinfo, 0));
	McServerCheckWrite(srv);
	ops = palloc(sizeof(McOp) * srv->cfg.nendpoints);
	for (int i = 0; i < srv->cfg.nendpoints; i++)
		McOpText(&ops[i], MC_OP_FLUSH, i, NULL);
	run.ops = ops;
	run.nops = srv->cfg.nendpoints;
	PG_RETURN_INT32(McRunExec(srv, &run));
}
