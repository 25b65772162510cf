/*
 * multi_get.c — mc_get_multi / mc_get_multi_bytea: many keys, one round.
 *
 * Owns: the reads of the request engine (engine.c).  Keys are checked and
 * routed once each (keys.c), de-duplicated, and given their instance
 * (health.c); each instance gets one pipeline ("mg <key> v f O<pos> q" per
 * key, then "mn"), which the engine writes before any reply is awaited and
 * serves on one wait for every instance.  Replies are parsed in place,
 * matched to their key by the echoed opaque token, and each value is
 * copied once, into the tuple that SQL receives (laid out by rowlayout.c
 * for the common row); a value the client compressed is inflated
 * (values.c) into one buffer kept for the batch and copied from there.
 *
 * Why O and not k: memcached echoes k as the key was stored, and an item a
 * binary-protocol client (Dalli) stored under a key with spaces comes back
 * as "k<key with spaces>", which no parser can split.  The opaque token is
 * ours, always parseable, and shorter on the wire than most keys.
 *
 * Requests are encoded in slices so memory stays bounded however large the
 * batch; rows go to a tuplestore, which spills to disk past work_mem.  Must
 * not: open, read or write sockets, wait, or restart or time out an
 * instance (the engine does), or allocate per key or per reply.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "access/htup_details.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "engine.h"
#include "keys.h"
#include "multi_get.h"
#include "rowlayout.h"
#include "health.h"
#include "server.h"
#include "server_cache.h"
#include "values.h"

PG_FUNCTION_INFO_V1(mc_get_multi);
PG_FUNCTION_INFO_V1(mc_get_multi_bytea);

/* Keep at most this much encoded request text queued per instance. */
#define MG_WRITE_SLICE		(32 * 1024)

/*
 * One distinct key of the batch, routed once (McKeyRoute): what its wire
 * form is made from, and its instance.  Kept small (the work memory per key
 * is budgeted): the key as given is read back from datum when a message
 * needs it.
 */
typedef struct MgKey
{
	Datum		datum;			/* the array element, returned as "key" */
	const char *src;			/* McKeyWire's src: the key's bytes, or its digest */
	uint32		len;			/* length of src */
	uint16		instance;		/* instance index (< MC_MAX_ENDPOINTS) */
	uint8		form;			/* McKeyForm */
	bool		b64;			/* must go base64 */
} MgKey;

/*
 * One instance's share of the batch: its requests and replies (its
 * connection and progress are the engine's, engine.c).
 */
typedef struct MgInstance
{
	int		   *keys;			/* indexes into the key array, request order */
	int			nkeys;
	int			next_send;		/* keys encoded so far */
	int			next_match;		/* keys answered or passed over as misses */
	bool		mn_queued;
} MgInstance;

/* Everything a batch needs, allocated once per call. */
typedef struct MgBatch
{
	McServer   *srv;
	bool		as_text;
	bool		soft;			/* failover or on_failure 'miss': a failing
								 * instance's keys are misses */
	bool		failover;		/* the run's, not read from srv (MC_MG_STRICT) */
	bool		miss;			/* on_failure 'miss' for the run, likewise */
	MgKey	   *keys;
	int			nkeys;
	MgInstance *instances;		/* one per configured instance */
	McKeyArena	digests;		/* digested keys' routed forms, so mg_fill
								 * need not digest them again (rare: long_keys
								 * 'dalli' and a key over 250 bytes) */
	Tuplestorestate *tupstore;
	TupleDesc	tupdesc;
	char	   *scratch;		/* for values whose header cannot be written in place */
	size_t		scratch_len;
	bool		rows_by_hand;	/* the result type is one McRowPut lays out */
	char	   *rowbuf;			/* McRowPut's tuple, reused for every row */
	char	   *inflated;		/* compressed values inflate here (values.c) */
	size_t		inflated_cap;
	unsigned	want;			/* MC_F_* asked for; 0: v and f (mc_get_multi) */
	McHitFn		hit_fn;			/* McMultiGetRun's caller takes the hits */
	void	   *hit_arg;
	McEngine	engine;			/* runs the instances' pipelines */
} MgBatch;

/* The key as given, for messages and de-duplication. */
static inline const char *
key_data(const MgKey *k)
{
	return k->form == MC_KEY_DIGESTED ? VARDATA_ANY(DatumGetPointer(k->datum)) : k->src;
}

static inline size_t
key_len(const MgKey *k)
{
	return k->form == MC_KEY_DIGESTED ? VARSIZE_ANY_EXHDR(DatumGetPointer(k->datum)) : k->len;
}

/*
 * Open-addressing set of key indexes, to ask each distinct key once.  Sized
 * once for the batch; no allocation per key.
 */
typedef struct KeySet
{
	int		   *slots;			/* -1 = empty */
	uint32		mask;
} KeySet;

/*
 * Insert key i (not yet routed: src is the key as given) unless an equal
 * key is already there; true if inserted.  h is the key's ring hash
 * (McServerKeyHash of its routed form), which equal keys share: the key is
 * hashed once, for both.
 */
static bool
keyset_add(KeySet *set, MgKey *keys, int i, uint32 h)
{
	const char *data = keys[i].src;
	size_t		len = keys[i].len;

	for (uint32 pos = h & set->mask;; pos = (pos + 1) & set->mask)
	{
		int			j = set->slots[pos];

		if (j < 0)
		{
			set->slots[pos] = i;
			return true;
		}
		if (key_len(&keys[j]) == len && memcmp(key_data(&keys[j]), data, len) == 0)
			return false;
	}
}

/*
 * Read the key array: skip NULLs, check and route (once per key),
 * de-duplicate, choose the instance.  Then group the keys by instance (a
 * counting sort), keeping their order.
 */
static void
collect_keys(MgBatch *b, const Datum *elems, const bool *nulls, int n)
{
	McServer   *srv = b->srv;
	KeySet		set;
	uint32		cap = 16;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive = McInstanceAliveMap(srv, alivebuf);
	int		   *counts;
	bool		any_alive = false;
	int		   *slots;
	char		rawbuf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];

	/* on_failure 'miss' with every instance dead: route as if all were up */
	for (int s = 0; alive && s < srv->cfg.nendpoints; s++)
		any_alive |= alive[s];
	if (alive && !any_alive && b->miss)
		alive = NULL;
	while (cap < (uint32) n * 2)
		cap <<= 1;
	set.slots = palloc(sizeof(int) * cap);
	memset(set.slots, -1, sizeof(int) * cap);
	set.mask = cap - 1;
	b->keys = palloc(sizeof(MgKey) * Max(n, 1));
	b->nkeys = 0;
	counts = palloc0(sizeof(int) * srv->cfg.nendpoints);

	for (int i = 0; i < n; i++)
	{
		MgKey	   *k = &b->keys[b->nkeys];
		const char *raw;
		size_t		rawlen;
		McKeyForm	form;
		uint32		h;

		if (nulls && nulls[i])
			continue;
		k->datum = elems[i];
		k->src = VARDATA_ANY(DatumGetPointer(elems[i]));
		k->len = VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i]));
		/* checked here, so a bad key fails the call before anything is sent */
		form = McKeyRoute(srv, k->src, k->len, rawbuf, &raw, &rawlen, &k->b64);
		h = McServerKeyHash(srv, raw, rawlen);
		if (!keyset_add(&set, b->keys, b->nkeys, h))
			continue;
		k->form = (uint8) form;
		if (unlikely(form == MC_KEY_DIGESTED))
		{
			k->src = McEngineKeyArenaKeep(&b->digests, raw, rawlen);
			k->len = rawlen;
		}
		k->instance = (uint16) McInstancePickHashed(srv, h, raw, rawlen, alive, b->failover);
		counts[k->instance]++;
		b->nkeys++;
	}

	/* group by instance: each instance's keys become a slice of one array */
	slots = palloc(sizeof(int) * Max(b->nkeys, 1));
	b->instances = palloc0(sizeof(MgInstance) * srv->cfg.nendpoints);
	for (int s = 0, off = 0; s < srv->cfg.nendpoints; s++)
	{
		b->instances[s].keys = slots + off;
		off += counts[s];
	}
	for (int i = 0; i < b->nkeys; i++)
	{
		MgInstance *mi = &b->instances[b->keys[i].instance];

		mi->keys[mi->nkeys++] = i;
	}
}

/*
 * The request of a batch that asks for other fields than v and f (the
 * foreign-table scan asks only for what its query reads): the generic
 * encoder, out of mc_get_multi's way.
 */
static pg_noinline size_t
encode_wanted(MgBatch *b, const MgKey *k, uint32 pos, char *dst, char *wirebuf)
{
	McReqOpts	opts = {0};
	char		digits[10];
	int			nd = sizeof(digits);
	const char *wire;
	size_t		wlen = McKeyWire(b->srv, k->src, k->len, k->form, k->b64,
								 wirebuf, &wire);

	do
	{
		digits[--nd] = (char) ('0' + pos % 10);
		pos /= 10;
	} while (pos);
	opts.want = b->want;
	opts.quiet = true;
	opts.opaque = digits + nd;
	opts.opaque_len = sizeof(digits) - nd;
	return mc_encode_request(dst, "mg", wire, wlen, k->b64, -1, &opts);
}

/*
 * Queue more requests for an instance, up to one slice of unsent text, and
 * the closing "mn" once every key is queued.
 */
static void
mg_fill(void *arg, int s, McConn *conn)
{
	MgBatch    *b = arg;
	MgInstance *mi = &b->instances[s];
	size_t		unsent = McConnUnsent(conn);

	if (mi->next_send < mi->nkeys && unsent < MG_WRITE_SLICE)
	{
		/* room for the slice, and for the one request that may overshoot it */
		char	   *start = McConnWriteSpace(conn, MG_WRITE_SLICE - unsent + MC_REQ_HEADER_MAX);
		char	   *dst = start;
		char		wirebuf[MC_KEY_MAX];

		while (mi->next_send < mi->nkeys && unsent + (dst - start) < MG_WRITE_SLICE)
		{
			MgKey	   *k = &b->keys[mi->keys[mi->next_send]];
			size_t		n;

			/*
			 * A key routed as given goes out as it is; others as collect_keys
			 * routed them.  "v f" (want 0) and "v" alone have their own
			 * encoder; other fields the generic one.
			 */
			if (unlikely(b->want != 0 && b->want != MC_F_VALUE))
				n = encode_wanted(b, k, (uint32) mi->next_send, dst, wirebuf);
			else if (k->form == MC_KEY_GIVEN && !k->b64)
				n = mc_encode_get_opaque(dst, k->src, k->len, false, b->want == 0,
										 (uint32) mi->next_send);
			else
			{
				const char *wire;
				size_t		wlen = McKeyWire(b->srv, k->src, k->len, k->form,
											 k->b64, wirebuf, &wire);

				n = mc_encode_get_opaque(dst, wire, wlen, k->b64, b->want == 0,
										 (uint32) mi->next_send);
			}
			/* collect_keys checked every key: a refusal here is a bug, not a miss */
			if (n == 0)
				elog(ERROR, "could not encode a get request for a checked key");
			dst += n;
			mi->next_send++;
		}
		McConnWritten(conn, dst - start);
	}
	if (mi->next_send == mi->nkeys && !mi->mn_queued)
	{
		McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
		mi->mn_queued = true;
		McConnPipelined(conn, mi->nkeys);
	}
}

/*
 * The row's datums for the general path (tuplestore_putvalues).  The value
 * is used where it lies in the read buffer: a varlena header is written
 * over the already-parsed reply header just before it, so the tuple builder
 * copies the value once.  A 4-byte header must be aligned; when it cannot
 * be, the value goes through the scratch buffer.
 */
static void
row_datums(MgBatch *b, const MgKey *k, char *v, size_t len, const McReply *r,
		   Datum *values, bool *nulls)
{
	char	   *p;

	if (len + VARHDRSZ_SHORT <= VARATT_SHORT_MAX)
	{
		p = v - VARHDRSZ_SHORT;
		SET_VARSIZE_SHORT(p, len + VARHDRSZ_SHORT);
	}
	else if (len <= MaxAllocSize - VARHDRSZ &&
			 (((uintptr_t) (v - VARHDRSZ)) % sizeof(int32)) == 0)
	{
		p = v - VARHDRSZ;
		SET_VARSIZE(p, len + VARHDRSZ);
	}
	else
	{
		/* a 4-byte header must be aligned: use the scratch buffer */
		if (len > MaxAllocSize - VARHDRSZ)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("memcached value of %zu bytes is too large", len)));
		if (b->scratch_len < len + VARHDRSZ)
		{
			b->scratch_len = Max(len + VARHDRSZ, 2 * b->scratch_len);
			b->scratch = b->scratch ? repalloc(b->scratch, b->scratch_len)
				: palloc(b->scratch_len);
		}
		p = b->scratch;
		SET_VARSIZE(p, len + VARHDRSZ);
		memcpy(VARDATA(p), v, len);
	}
	values[0] = k->datum;
	values[1] = PointerGetDatum(p);
	nulls[0] = nulls[1] = false;
	nulls[2] = !(r->present & MC_F_FLAGS);
	values[2] = Int32GetDatum(nulls[2] ? 0 : (int32) r->client_flags);
}

/*
 * Turn a VA reply into a row: laid out by hand (rowlayout.c) for the common
 * row, else the general path (row_datums, then tuplestore_putvalues).
 */
static void
emit_row(MgBatch *b, char *base, const McReply *r, const MgKey *k)
{
	Datum		values[3];
	bool		nulls[3];
	char	   *v = base + r->value_off;
	size_t		len = r->value_len;

	/* a value the client compressed is inflated into a buffer kept for the batch */
	if (unlikely((r->present & MC_F_FLAGS) && McValueCompressed(&b->srv->cfg, r->client_flags)))
		v = McValueInflateInto(b->srv, v, len, &b->inflated, &b->inflated_cap, &len,
							   key_data(k), key_len(k));
	if (unlikely(b->as_text && b->srv->cfg.serialized_flag != 0))
		McValueCheckText(b->srv, (r->present & MC_F_FLAGS) != 0, r->client_flags,
						 key_data(k), key_len(k), MC_BYTEA_HINT);
	if (b->as_text && !McValueTextValid(v, len))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("value of memcached key \"%.*s\" is not valid in encoding \"%s\"",
						(int) key_len(k), key_data(k), GetDatabaseEncodingName()),
				 errhint("Use mc_get_multi_bytea() to read binary values.")));
	if (b->rows_by_hand && (r->present & MC_F_FLAGS) &&
		McRowPut(b->tupstore, b->tupdesc, &b->rowbuf, k->datum, v, len,
				 (int32) r->client_flags))
		return;
	row_datums(b, k, v, len, r, values, nulls);
	tuplestore_putvalues(b->tupstore, b->tupdesc, values, nulls);
}

/*
 * Parse and handle every complete reply buffered for an instance (the
 * engine's read): hits become rows (or go to the caller's callback), "MN"
 * ends the instance's part.
 */
static McEngRead
mg_read(void *arg, int s, McConn *conn, char *buf, size_t len,
		size_t *consumed, size_t *need)
{
	MgBatch    *b = arg;
	MgInstance *mi = &b->instances[s];
	size_t		off = 0;		/* bytes of buf handled, consumed at the end */

	for (;;)
	{
		char	   *base = buf + off;
		McReply		r;
		McReplyType t = mc_parse_reply_z(base, len - off, &r);

		if (t == MC_REPLY_NEED_MORE)
		{
			*need = r.need;
			break;
		}
		/* HD is a hit only for a caller that asked for no value (existence) */
		if (t == MC_REPLY_VA ||
			(t == MC_REPLY_HD && b->hit_fn != NULL && b->want != 0 &&
			 !(b->want & MC_F_VALUE)))
		{
			/*
			 * The opaque is the key's position.  Replies come in request
			 * order, so positions only grow: keys passed over were misses.
			 */
			int			j = mc_reply_position(base, &r, (uint32) mi->next_match,
											  (uint32) mi->nkeys);

			if (j < 0)
			{
				if (!McInstanceMisbehaved(b->srv, conn, b->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
									"a reply does not match any outstanding request"))
					return MC_ENG_FAILED;
			}
			/* a lease's empty placeholder is a miss (McReplyIsPlaceholder) */
			if (!McReplyIsPlaceholder(&r))
			{
				if (unlikely(b->hit_fn != NULL))
					b->hit_fn(b->hit_arg, b->keys[mi->keys[j]].datum, base, &r);
				else
					emit_row(b, base, &r, &b->keys[mi->keys[j]]);
				b->engine.inst[s].hits++;
			}
			McConnHit(conn, &r);
			mi->next_match = j + 1;
		}
		else if (t == MC_REPLY_MN)
		{
			mi->next_match = mi->nkeys;
			*consumed = off + r.consumed;
			return MC_ENG_DONE;
		}
		else if (t == MC_REPLY_EN)
		{
			/* q suppresses EN: one that arrives answers nothing we asked */
			if (!McInstanceMisbehaved(b->srv, conn, b->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
								"a miss reply does not match any outstanding request"))
				return MC_ENG_FAILED;
		}
		else if ((t == MC_REPLY_BAD || t == MC_REPLY_ERROR || t == MC_REPLY_CLIENT_ERROR) &&
				 McConnForeignReply(conn, base, t == MC_REPLY_BAD ? len - off : r.header_len,
									MC_FOREIGN_META | MC_FOREIGN_UNPARSED))
		{
			/* a server that needs a login, knows no meta command, or is not memcached */
			if (!McInstanceCountFailure(b->srv, conn, b->soft))
				return MC_ENG_FAILED;
		}
		else if (t == MC_REPLY_BAD || t == MC_REPLY_HD)
		{
			/* an HD where a value was asked for would be a row without its value */
			if (!McInstanceMisbehaved(b->srv, conn, b->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
								t == MC_REPLY_HD ? "a hit carries no value although one was asked for" :
								"the reply is not valid meta protocol"))
				return MC_ENG_FAILED;
		}
		else
		{
			/* on_failure 'miss' hides unavailability, not error replies */
			if (b->soft && !b->miss)
			{
				McInstanceMisbehaved(b->srv, conn, true, ERRCODE_FDW_ERROR, "read from",
							   "unexpected reply");
				return MC_ENG_FAILED;
			}
			McConnReplyError(conn, base, &r);
		}
		off += r.consumed;
	}
	*consumed = off;
	return MC_ENG_MORE;
}

/* The instance starts (again, on a fresh socket) from its first key. */
static void
mg_start(void *arg, int s)
{
	MgInstance *mi = &((MgBatch *) arg)->instances[s];

	mi->next_send = 0;
	mi->mn_queued = false;
}

/*
 * Fetch the collected keys, every instance's pipeline at once (engine.c);
 * an instance that fails softly is dropped, its unanswered keys misses (as
 * Dalli and libmemcached treat keys of a failing server in a multi-get
 * with failover), and with on_failure 'miss' counts as degraded.
 */
static void
run_collected(MgBatch *b)
{
	McEngine   *e = &b->engine;

	McEngineInit(e, b->srv, b);
	e->soft = b->soft;
	e->degrade = b->miss;
	e->start = mg_start;
	e->fill = mg_fill;
	e->read = mg_read;
	for (int s = 0; s < b->srv->cfg.nendpoints; s++)
		e->inst[s].work = b->instances[s].nkeys;
	McEngineRun(e);
}

/* Shared body of the two SQL functions. */
static Datum
get_multi_common(FunctionCallInfo fcinfo, bool as_text)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MgBatch		b;
	MemoryContext work;
	MemoryContext old;

	McCsSetOp(MC_CS_GET_MULTI);
	/*
	 * The row type the caller expects is the declared one: taking it saves
	 * reading the OUT parameters from pg_proc on every call (about half of
	 * a call's fixed instructions).  Without one, the declaration is read.
	 */
	InitMaterializedSRF(fcinfo, rsinfo != NULL && IsA(rsinfo, ReturnSetInfo) &&
						rsinfo->expectedDesc != NULL ? MAT_SRF_USE_EXPECTED_DESC : 0);
	if (PG_ARGISNULL(0))
		return (Datum) 0;

	memset(&b, 0, sizeof(b));
	b.srv = McServerLookup(PG_ARGISNULL(1) ? NULL : NameStr(*PG_GETARG_NAME(1)));
	b.as_text = as_text;
	b.failover = b.srv->cfg.failover;
	b.miss = b.srv->cfg.on_failure_miss;
	b.soft = b.failover || b.miss;
	b.tupstore = rsinfo->setResult;
	b.tupdesc = rsinfo->setDesc;
	b.rows_by_hand = McRowLayoutFits(b.tupdesc);

	/* per-call work memory, freed at the end (or with the query on error) */
	work = AllocSetContextCreate(CurrentMemoryContext, "mcfdw multi-get",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &nulls, &n);
		collect_keys(&b, elems, nulls, n);
	}
	if (b.nkeys > 0)
		run_collected(&b);
	MemoryContextSwitchTo(old);
	/* what a batch costs in work memory, for the allocation budget test */
	if (message_level_is_interesting(DEBUG1))
		elog(DEBUG1, "mcfdw: mc_get_multi of %d keys used %zu bytes of work memory",
			 b.nkeys, MemoryContextMemAllocated(work, true));
	MemoryContextDelete(work);
	return (Datum) 0;
}

/* mc_get_multi(keys text[], server name) returns (key text, value text, flags integer). */
Datum
mc_get_multi(PG_FUNCTION_ARGS)
{
	return get_multi_common(fcinfo, true);
}

/* mc_get_multi_bytea(keys text[], server name) returns (key text, value bytea, flags integer). */
Datum
mc_get_multi_bytea(PG_FUNCTION_ARGS)
{
	return get_multi_common(fcinfo, false);
}

/*
 * The engine for C callers (the foreign-table scan and join): the n keys
 * (text datums; NULLs skipped, duplicates asked once) are fetched in one
 * pipelined round as mc_get_multi fetches them, asking for the fields in
 * want (MC_F_VALUE, MC_F_FLAGS, MC_F_CAS, MC_F_TTL; none: existence only).
 * fn is called once per hit with the key's datum and the reply, parsed in
 * place: base and r are valid only during the call, and the bytes before
 * the value (its reply header) may be overwritten.  Returns the number of
 * distinct keys asked.  Work memory is freed before returning.  With
 * MC_MG_STRICT in flags the run neither fails over nor degrades to misses,
 * whatever the server's failover and on_failure: a failing instance
 * raises.
 */
int
McMultiGetRun(McServer *srv, const Datum *keys, const bool *nulls, int n,
			  unsigned want, unsigned flags, McHitFn fn, void *arg)
{
	MgBatch		b;
	MemoryContext work;
	MemoryContext old;

	memset(&b, 0, sizeof(b));
	b.srv = srv;
	b.failover = !(flags & MC_MG_STRICT) && srv->cfg.failover;
	b.miss = !(flags & MC_MG_STRICT) && srv->cfg.on_failure_miss;
	b.soft = b.failover || b.miss;
	/*
	 * b.want 0 is mc_get_multi's "v f" request, so "v f" asked here takes
	 * the same encoder; want 0 asks for the key's existence as "O" alone.
	 */
	b.want = want == (MC_F_VALUE | MC_F_FLAGS) ? 0 : want != 0 ? want : MC_F_OPAQUE;
	b.hit_fn = fn;
	b.hit_arg = arg;
	work = AllocSetContextCreate(CurrentMemoryContext, "mcfdw multi-get",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);
	collect_keys(&b, keys, nulls, n);
	if (b.nkeys > 0)
		run_collected(&b);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(work);
	return b.nkeys;
}
