/*
 * batch_sql.c — mc_set_multi, mc_delete_multi, mc_touch_multi: the SQL side
 * of batch writes.
 *
 * Owns: reading the key and value arrays, the rules for their shape
 * (one-dimensional, equal lengths), NULLs and duplicates, and turning the
 * ops' results into the count returned.  Keys are checked and routed here
 * (keys.c) before anything is sent, so a bad key fails the whole call with
 * nothing written.  Must not: touch sockets or route to instances
 * (the runner does, behind batch.h).
 *
 * Rules (README): a NULL key array gives NULL; arrays must be
 * one-dimensional (2202E); mc_set_multi's arrays must have equal lengths
 * (2202E), and a NULL key or value is an error (22004), since skipping it
 * would silently drop a write; mc_delete_multi and mc_touch_multi skip NULL
 * keys, as mc_get_multi does.  A key given twice is sent once: for a set
 * the last value wins.  The count is of distinct keys stored, deleted or
 * touched.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "client.h"
#include "batch.h"
#include "engine.h"
#include "keys.h"

PG_FUNCTION_INFO_V1(mc_set_multi);
PG_FUNCTION_INFO_V1(mc_delete_multi);
PG_FUNCTION_INFO_V1(mc_touch_multi);

/* The call's ops, with a set of their routed keys to find duplicates. */
typedef struct BatchBuild
{
	McServer   *srv;
	McOp	   *ops;
	int			nops;
	int		   *slots;			/* open addressing over ops; -1 = empty */
	uint32		mask;
	McKeyArena	arena;			/* routed keys not found in the array itself */
} BatchBuild;

static void
build_init(BatchBuild *bb, McServer *srv, int n)
{
	uint32		cap = 16;

	while (cap < (uint32) n * 2)
		cap <<= 1;
	bb->srv = srv;
	bb->ops = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(McOp) * (Size) Max(n, 1));
	bb->nops = 0;
	bb->slots = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int) * (Size) cap);
	memset(bb->slots, -1, sizeof(int) * (Size) cap);
	bb->mask = cap - 1;
	memset(&bb->arena, 0, sizeof(bb->arena));
}

/*
 * Check and route a key, and give its op: a new one, or the one of an
 * earlier equal key (routed form compared, so the prefix is in it).
 */
static McOp *
add_key(BatchBuild *bb, McOpKind kind, Datum key)
{
	const char *data = VARDATA_ANY(DatumGetPointer(key));
	size_t		len = VARSIZE_ANY_EXHDR(DatumGetPointer(key));
	char		buf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
	const char *raw;
	size_t		rawlen;
	bool		b64;
	uint32		h;
	McOp	   *op;

	(void) McKeyRoute(bb->srv, data, len, buf, &raw, &rawlen, &b64);
	h = hash_bytes((const unsigned char *) raw, rawlen);
	for (uint32 pos = h & bb->mask;; pos = (pos + 1) & bb->mask)
	{
		int			j = bb->slots[pos];

		if (j < 0)
		{
			bb->slots[pos] = bb->nops;
			break;
		}
		op = &bb->ops[j];
		if (op->keylen == rawlen && memcmp(op->key, raw, rawlen) == 0)
			return op;
	}
	op = &bb->ops[bb->nops++];
	McOpInit(op, kind, NULL);
	op->key = (raw == data) ? raw : McEngineKeyArenaKeep(&bb->arena, raw, rawlen);
	op->keylen = rawlen;
	return op;
}

/* A one-dimensional array's elements (text or bytea: both varlena). */
static void
array_elements(ArrayType *arr, const char *what, Datum **elems, bool **nulls, int *n)
{
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
	deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_INT,
					  elems, nulls, n);
}

/* Send the ops and count those that did what was asked. */
static int32
run_ops(BatchBuild *bb)
{
	int32		done = 0;

	if (bb->nops == 0)
		return 0;
	(void) McBatchWrite(bb->srv, bb->ops, bb->nops, 0, false, NULL, 0);
	for (int i = 0; i < bb->nops; i++)
		if (bb->ops[i].result == MC_OP_DONE)
			done++;
	return done;
}

static McServer *
server_arg(FunctionCallInfo fcinfo, int argno)
{
	McServer   *srv = McServerLookup(PG_ARGISNULL(argno) ? NULL : NameStr(*PG_GETARG_NAME(argno)));

	McServerCheckWrite(srv);	/* all three functions write */
	return srv;
}

/*
 * mc_set_multi(keys text[], values text[] | bytea[], ttl interval, flags
 * integer, server name) returns integer: the keys stored.
 */
Datum
mc_set_multi(PG_FUNCTION_ARGS)
{
	BatchBuild	bb;
	Datum	   *keys,
			   *values;
	bool	   *knulls,
			   *vnulls;
	int			nkeys,
				nvalues;
	bool		has_ttl = false;
	int64		ttl = 0;
	bool		has_flags = false;
	uint32		flags = 0;

	McCsSetOp(MC_CS_SET_MULTI);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	array_elements(PG_GETARG_ARRAYTYPE_P(0), "keys", &keys, &knulls, &nkeys);
	array_elements(PG_GETARG_ARRAYTYPE_P(1), "values", &values, &vnulls, &nvalues);
	if (nkeys != nvalues)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys and values must have the same number of elements"),
				 errdetail("There are %d keys and %d values.", nkeys, nvalues)));
	if (!PG_ARGISNULL(2))
	{
		has_ttl = true;
		ttl = McTtlFromInterval(PG_GETARG_INTERVAL_P(2));
	}
	if (!PG_ARGISNULL(3))
	{
		has_flags = true;
		flags = (uint32) PG_GETARG_INT32(3);
	}
	build_init(&bb, server_arg(fcinfo, 4), nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		McOp	   *op;

		if (knulls[i] || vnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s %d of mc_set_multi is NULL", knulls[i] ? "key" : "value", i + 1)));
		op = add_key(&bb, MC_OP_STORE, keys[i]);
		/* a key given again: its last value wins */
		op->data = VARDATA_ANY(DatumGetPointer(values[i]));
		op->datalen = VARSIZE_ANY_EXHDR(DatumGetPointer(values[i]));
		op->has_ttl = has_ttl;
		op->ttl = ttl;
		op->has_flags = has_flags;
		op->flags = flags;
		/* compressed as the application's client would (values.c) */
		if (McValueDeflate(bb.srv, &op->data, &op->datalen, &op->flags))
			op->has_flags = true;
	}
	PG_RETURN_INT32(run_ops(&bb));
}

/* The keys of a delete or touch: NULLs skipped, duplicates sent once. */
static void
collect_keys(BatchBuild *bb, ArrayType *arr, McOpKind kind, bool has_ttl, int64 ttl)
{
	Datum	   *keys;
	bool	   *nulls;
	int			n;

	array_elements(arr, "keys", &keys, &nulls, &n);
	build_init(bb, bb->srv, n);
	for (int i = 0; i < n; i++)
	{
		McOp	   *op;

		if (nulls[i])
			continue;
		op = add_key(bb, kind, keys[i]);
		op->has_ttl = has_ttl;
		op->ttl = ttl;
	}
}

/* mc_delete_multi(keys text[], server name) returns integer: the keys deleted. */
Datum
mc_delete_multi(PG_FUNCTION_ARGS)
{
	BatchBuild	bb;

	McCsSetOp(MC_CS_DELETE);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	bb.srv = server_arg(fcinfo, 1);
	collect_keys(&bb, PG_GETARG_ARRAYTYPE_P(0), MC_OP_DELETE, false, 0);
	PG_RETURN_INT32(run_ops(&bb));
}

/*
 * mc_touch_multi(keys text[], ttl interval, server name) returns integer:
 * the keys that exist and got the new ttl.
 */
Datum
mc_touch_multi(PG_FUNCTION_ARGS)
{
	BatchBuild	bb;
	int64		ttl;

	McCsSetOp(MC_CS_TOUCH);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ttl of mc_touch_multi must not be NULL")));
	ttl = McTtlFromInterval(PG_GETARG_INTERVAL_P(1));
	bb.srv = server_arg(fcinfo, 2);
	collect_keys(&bb, PG_GETARG_ARRAYTYPE_P(0), MC_OP_GET, true, ttl);
	PG_RETURN_INT32(run_ops(&bb));
}
