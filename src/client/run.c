/*
 * run.c — the runner: n operations of one server, routed, one pipeline
 * per instance, every pipeline in flight at once (McRunExec), and a
 * single-key call as a run of one (run.h's McRunOne, McRunOneRouted).
 *
 * Owns: the failover rule, the one place that says where a key goes given
 * the instances dead or failed in this call and what becomes of it when
 * none is left (failover_map, McRunPick), for a run of one and the
 * rounds of a run of many's writes alike; the run of one, its request sent
 * alone by the engine (McEngineSendOne) on the instance the rule chose,
 * tried on the next while failover allows.  The one client of the engine's
 * pipelined runs (engine.c's McEngineRun): which ops go to which instance,
 * their requests queued on an instance's connection as it takes them
 * (fill), its replies read and matched to their ops (read), and what an
 * instance's failure does to its ops (dropped).  Reads: keys checked and
 * routed once each (keys.c), de-duplicated, given their instance
 * (health.c) and asked as "mg <key> v f O<tag><pos> q" (or the fields wanted),
 * hits handed to the caller parsed in place; a failing instance's keys are
 * misses when the run may fail softly (as Dalli and libmemcached treat
 * keys of a failing server in a multi-get).  Writes: ops routed (a home op
 * to its own instance) and sent quiet, so only exceptions come back (NS,
 * NF, errors for ms/md; HD for a touch, whose misses are the quiet ones)
 * and what "mn" closes without a word took the default outcome; an
 * instance that failed has its unanswered ops failed over in another round
 * by the failover rule, unless they may have run (the engine's
 * at-most-once rule) or are bound home; over TLS a batch with sets goes in
 * segments (RUN_TLS_SEGMENT).  A SQL caller's write that is going to raise
 * (an instance failed without failover, or answered with an error) first
 * stops: nothing new is sent, and what is out on the other instances is
 * closed by "mn" and answered (stop_run), so nothing it sent runs after its
 * error unless its connection failed.  Dumps: one command per instance
 * (encoded by the engine from its op), its reply read a line at a time.
 * Flushes: flush_all on the instances their ops name, each answered OK; any
 * failure or error reply is raised.  Every request is encoded by the engine's
 * encoders (McEngineOpEncode, and the short get encoders of core/request.c
 * for the plain gets of a multi-get), in slices, so memory stays bounded
 * however many ops a run has; no allocation per op or reply.
 *
 * Why O and not k: memcached echoes k as the key was stored, and an item a
 * binary-protocol client (Dalli) stored under a key with spaces comes back
 * as "k<key with spaces>", which no parser can split.  The opaque token is
 * ours, always parseable, and shorter on the wire than most keys: the
 * part's tag (letters, fresh from the engine's token sequence each time an
 * instance's part starts: protocol.h's McTag) then the op's position, so a
 * late reply to anything sent earlier on the connection (an earlier run,
 * a single-key call's all-decimal token) names no op of this one.
 *
 * A run's memory is its own context, freed when it returns.  Must not:
 * open, read or write sockets, wait, or restart or time out an
 * instance (the engine does), touch the catalog or SQL types beyond a
 * key's text datum, or keep state between runs.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "engine.h"
#include "health.h"
#include "keys.h"
#include "run.h"
#include "server.h"

/* Keep at most this much encoded request text (values included) queued per instance. */
#define RUN_WRITE_SLICE		(32 * 1024)

/*
 * memcached 1.6.18 over TLS stops reading once a set's value runs past the
 * 16 kB its buffer reads at a time: whatever follows the value sits
 * decrypted inside its OpenSSL buffer, where its event loop never looks,
 * and the batch times out (plain TCP, deletes and touches are not
 * affected).  Over TLS a batch with sets is therefore sent in segments of
 * at most this many bytes, each closed by "mn" and answered before the
 * next is sent, so no value crosses the server's buffer; a larger set goes
 * alone, not quiet, with nothing after it until its reply is in.
 */
#define RUN_TLS_SEGMENT		(8 * 1024)

/* Room for a text command and its NUL. */
#define RUN_TEXT_MAX		(MC_REQ_HEADER_MAX + 1)

/*
 * One distinct key of a read, routed once (McKeyRoute): what its wire form
 * is made from, and its instance.  Kept small (the work memory per key is
 * budgeted): the key as given is read back from datum when a message
 * needs it.
 */
typedef struct RunKey
{
	Datum		datum;			/* the caller's text datum, passed back */
	const char *src;			/* McKeyWire's src: the key's bytes, or its digest */
	uint32		len;			/* length of src */
	uint16		instance;		/* instance index (< MC_MAX_ENDPOINTS) */
	uint8		form;			/* McKeyForm */
	bool		b64;			/* must go base64 */
} RunKey;

/*
 * One instance's share of a round: its ops and the replies matched so far
 * (its connection and progress are the engine's, engine.c).
 */
typedef struct RunInst
{
	int		   *items;			/* indexes into the keys or ops, request order */
	int			nitems;
	int			next_send;		/* items encoded so far */
	int			next_match;		/* replies come in order: positions below are passed */
	bool		mn_queued;		/* the last "mn" (a dump: its command) is queued */
	bool		segmented;		/* TLS with sets: see RUN_TLS_SEGMENT */
	int			seg_end;		/* items before this are in sent segments */
	bool		seg_waiting;	/* the segment sent is not answered yet */
	bool		seg_single;		/* ... and it is one large set, not quiet */
	McTag		tag;			/* its requests' opaque tokens: run_start */
} RunInst;

typedef enum RunKind
{
	RUN_READS,
	RUN_WRITES,
	RUN_DUMPS,
	RUN_FLUSHES
} RunKind;

typedef struct RunState
{
	McServer   *srv;
	McRun	   *spec;
	RunKind		kind;
	bool		soft;			/* reads: the instance's failure is not raised;
								 * writes: the caller's MC_RUN_SOFT */
	bool		failover;		/* the run's, not read from srv (MC_RUN_STRICT) */
	bool		miss;			/* on_failure 'miss' for the run, likewise */
	RunInst    *inst;			/* one per configured instance */
	/* reads */
	RunKey	   *keys;
	int			nkeys;
	unsigned	want;			/* MC_F_* asked for; 0: v and f */
	McKeyArena	digests;		/* digested keys' routed forms, so the fill
								 * need not digest them again (rare:
								 * long_keys 'dalli' and a key over 250 bytes) */
	/* writes and dumps */
	McOp	   *ops;
	int			nops;
	bool	   *excluded;		/* instances that failed in this call */
	int		   *slots;
	bool		reroute;		/* a failed instance left ops to fail over */
	bool	   *degraded;		/* under miss: instances whose ops failed */
	bool		segmented;		/* TLS and some sets: see RUN_TLS_SEGMENT */
	char	   *texts;			/* dumps: each op's command (NUL-terminated,
								 * RUN_TEXT_MAX apart), encoded once */
	bool		defer;			/* a SQL caller's: an error waits until every
								 * other pipeline is settled (stop_run) */
	bool		defer_fail;		/* ... and so does any instance's failure
								 * (no failover, no on_failure 'miss') */
	bool		stopping;		/* one will be raised: nothing new is sent */
	ErrorData  *raise;			/* the first such error, raised at the end */
	int			unsure;			/* ops sent, then left unanswered by a failure */
	McRunHitFn	hit;			/* the caller's, from spec */
	void	   *arg;
	McEngine	engine;			/* runs the instances' pipelines */
} RunState;

/* ---- routing ------------------------------------------------------------- */

/* The key as given, for messages and de-duplication. */
static inline const char *
key_data(const RunKey *k)
{
	return k->form == MC_KEY_DIGESTED ? VARDATA_ANY(DatumGetPointer(k->datum)) : k->src;
}

static inline size_t
key_len(const RunKey *k)
{
	return k->form == MC_KEY_DIGESTED ? VARSIZE_ANY_EXHDR(DatumGetPointer(k->datum)) : k->len;
}

/*
 * Open-addressing set of key indexes, to ask each distinct key once.  Sized
 * once for the run; no allocation per key.
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
keyset_add(KeySet *set, RunKey *keys, int i, uint32 h)
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

/* Lay the instances' item lists out in slots, by their counts (nitems). */
static void
layout_slots(RunState *r, int *slots)
{
	for (int s = 0, off = 0; s < r->srv->cfg.nendpoints; s++)
	{
		r->inst[s].items = slots + off;
		off += r->inst[s].nitems;
		r->inst[s].nitems = 0;
	}
}

/*
 * Group the n items by instance (inst_of[i], -1 for none), a counting sort
 * that keeps their order, into slots.  Returns how many were grouped.
 */
static int
group_items(RunState *r, const int *inst_of, int n, int *slots)
{
	int			grouped = 0;

	memset(r->inst, 0, sizeof(RunInst) * r->srv->cfg.nendpoints);
	for (int i = 0; i < n; i++)
		if (inst_of[i] >= 0)
			r->inst[inst_of[i]].nitems++;
	layout_slots(r, slots);
	for (int i = 0; i < n; i++)
	{
		RunInst    *ri;

		if (inst_of[i] < 0)
			continue;
		ri = &r->inst[inst_of[i]];
		ri->items[ri->nitems++] = i;
		grouped++;
	}
	return grouped;
}

/*
 * A read's keys: skip NULLs, check and route (once per key), de-duplicate,
 * choose the instance, then group them by instance.
 */
static void
route_reads(RunState *r, const Datum *elems, const bool *nulls, int n)
{
	McServer   *srv = r->srv;
	KeySet		set;
	uint32		cap = 16;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive = McInstanceAliveMap(srv, alivebuf);
	bool		any_alive = false;
	RunInst    *inst = r->inst;
	RunKey	   *keys;
	int			nkeys = 0;
	char		rawbuf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];

	/* on_failure 'miss' with every instance dead: route as if all were up */
	for (int s = 0; alive && s < srv->cfg.nendpoints; s++)
		any_alive |= alive[s];
	if (alive && !any_alive && r->miss)
		alive = NULL;
	while (cap < (uint32) n * 2)
		cap <<= 1;
	set.slots = palloc(sizeof(int) * cap);
	memset(set.slots, -1, sizeof(int) * cap);
	set.mask = cap - 1;
	keys = palloc(sizeof(RunKey) * Max(n, 1));
	memset(inst, 0, sizeof(RunInst) * srv->cfg.nendpoints);

	for (int i = 0; i < n; i++)
	{
		RunKey	   *k = &keys[nkeys];
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
		if (!keyset_add(&set, keys, nkeys, h))
			continue;
		k->form = (uint8) form;
		if (unlikely(form == MC_KEY_DIGESTED))
		{
			k->src = McEngineKeyArenaKeep(&r->digests, raw, rawlen);
			k->len = rawlen;
		}
		k->instance = (uint16) McInstancePickHashed(srv, h, raw, rawlen, alive, r->failover);
		inst[k->instance].nitems++;
		nkeys++;
	}

	/* group by instance: each instance's keys become a slice of one array */
	layout_slots(r, palloc(sizeof(int) * Max(nkeys, 1)));
	for (int i = 0; i < nkeys; i++)
	{
		RunInst    *ri = &inst[keys[i].instance];

		ri->items[ri->nitems++] = i;
	}
	r->keys = keys;
	r->nkeys = nkeys;
}

/*
 * The failover rule, the one a run of one (McRunOneRouted) and every round
 * of a run of many's writes (route_writes) follow.  A key goes to its own
 * instance; with failover on, to where the client family would send it
 * with the instances down that health holds dead (alive, from
 * McInstanceAliveMap: NULL when none is) or that failed in this call
 * (failed: NULL when none did), as Dalli does on the spot, each failure
 * still counting towards failure_limit.  With no instance left the call
 * raises (McInstancePickWith), or under on_failure 'miss': a key when no
 * instance failed in this call meets its own instance (all are dead: it
 * refuses the key as the instance's failure), and a key with every
 * instance failed or dead is a miss counted against its own instance.  A
 * request that may have run on a failing instance is not failed over at
 * all: the engine says so (at most once: McEngineSendOne's
 * MC_ENG_ONE_IN_DOUBT, a pipelined run's may_reroute).
 *
 * The instances a key may go to now, into buf: NULL when any may; *none
 * when none is left and the key is a miss (McRunPick, run.h).
 */
static const bool *
failover_map(McServer *srv, const bool *alive, const bool *failed, bool miss,
			 bool *buf, bool *none)
{
	bool		any = false;

	*none = false;
	if (alive == NULL && failed == NULL)
		return NULL;
	for (int s = 0; s < srv->cfg.nendpoints; s++)
	{
		buf[s] = (alive == NULL || alive[s]) && (failed == NULL || !failed[s]);
		any |= buf[s];
	}
	if (any || !miss)
		return buf;				/* with none left, the pick raises (or, failover
								 * off, the key's own instance refuses it) */
	if (failed == NULL)
		return NULL;			/* every instance dead: each key meets its own */
	*none = true;
	return buf;
}

/* The key's own instance, whatever its health (a miss is counted there). */
static int
failover_own(McServer *srv, const char *key, size_t len)
{
	return McInstancePickWith(srv, key, len, NULL);
}

/*
 * The run of one (McRunOne) routed by the failover rule, each instance
 * tried in turn (McEngineSendOne) until one answers: from the start when
 * an instance is dead, or once instance failed (>= 0) failed it.  With
 * failover off the key's instance is the only one, and its failure is the
 * caller's error, or a miss under on_failure 'miss' counted against it.
 */
bool
McRunOneRouted(McServer *srv, McOpRun *run, int failed)
{
	const McOp *op = &run->op;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	bool		failbuf[MC_MAX_ENDPOINTS];
	bool		mapbuf[MC_MAX_ENDPOINTS];
	const bool *alive = McInstanceAliveMap(srv, alivebuf);
	bool		miss = srv->cfg.on_failure_miss;
	bool		failover = srv->cfg.failover;

	memset(failbuf, 0, sizeof(bool) * srv->cfg.nendpoints);
	if (failed >= 0)
		failbuf[failed] = true;
	for (;;)
	{
		bool		none;
		const bool *map = failover_map(srv, alive, failed >= 0 ? failbuf : NULL,
									   miss, mapbuf, &none);
		int			idx = McRunPick(srv, op->key, op->keylen, map, none);
		McEngOne	sent;

		if (idx < 0)
		{
			McInstanceDegraded(srv, failover_own(srv, op->key, op->keylen));
			return false;
		}
		sent = McEngineSendOne(srv, idx, run, failover || miss);
		if (sent == MC_ENG_ONE_REPLY)
			return true;
		if (sent == MC_ENG_ONE_IN_DOUBT || !failover)
		{
			McInstanceDegraded(srv, idx);
			return false;
		}
		failed = idx;
		failbuf[idx] = true;
	}
}

/*
 * The run of one's request failed on instance index, its key's own, the
 * failure soft (McRunOne): with failover and another instance, and the
 * request not in doubt, the failover rule takes it on; else a miss under
 * on_failure 'miss', counted against the instance.
 */
bool
McRunOneFailed(McServer *srv, McOpRun *run, int index, McEngOne sent)
{
	if (sent == MC_ENG_ONE_FAILED && srv->cfg.failover && srv->cfg.nendpoints > 1)
		return McRunOneRouted(srv, run, index);
	McInstanceDegraded(srv, index);
	return false;
}

/*
 * Route a write's unanswered ops to their instances by the failover rule
 * (those that failed in this call passed over; a home op to its own
 * instance whatever the health map) and group them per instance.  False
 * when none is pending.
 */
static bool
route_writes(RunState *r)
{
	McServer   *srv = r->srv;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	bool		mapbuf[MC_MAX_ENDPOINTS];
	bool		none;
	const bool *map = failover_map(srv, McInstanceAliveMap(srv, alivebuf),
								   r->reroute ? r->excluded : NULL, r->miss,
								   mapbuf, &none);
	int		   *inst_of = r->slots + r->nops;	/* second half of slots */

	r->reroute = false;
	for (int i = 0; i < r->nops; i++)
	{
		McOp	   *op = &r->ops[i];
		int			s = -1;

		if (op->result == MC_OP_PENDING)
		{
			s = McRunPick(srv, op->key, op->keylen, op->home ? NULL : map, none);
			if (s < 0)
			{
				op->result = MC_OP_FAILED;
				r->degraded[failover_own(srv, op->key, op->keylen)] = true;
			}
		}
		inst_of[i] = s;
	}
	return group_items(r, inst_of, r->nops, r->slots) > 0;
}

/*
 * A dump's or a flush's ops go to the instances they name; a dump's
 * command is encoded once, for the connection to queue and name in its
 * messages.
 */
static void
route_instances(RunState *r)
{
	int		   *inst_of = palloc(sizeof(int) * r->nops);

	if (r->kind == RUN_DUMPS)
		r->texts = palloc(RUN_TEXT_MAX * (Size) r->nops);
	for (int i = 0; i < r->nops; i++)
	{
		Assert(r->ops[i].kind == (r->kind == RUN_DUMPS ? MC_OP_DUMP : MC_OP_FLUSH));
		inst_of[i] = r->ops[i].instance;
		if (r->kind == RUN_DUMPS)
		{
			char	   *text = r->texts + RUN_TEXT_MAX * (Size) i;
			size_t		len = McEngineOpEncode(&r->ops[i], NULL, 0, false, text);

			if (len == 0)
				elog(ERROR, "could not encode a key dump command");
			text[len] = '\0';
		}
	}
	group_items(r, inst_of, r->nops, palloc(sizeof(int) * r->nops));
}

/* An instance's dump command (route_instances). */
static inline const char *
dump_text(RunState *r, RunInst *ri)
{
	return r->texts + RUN_TEXT_MAX * (Size) ri->items[0];
}

/* ---- requests ------------------------------------------------------------ */

/*
 * The request of a read that asks for other fields than v and f (the
 * foreign-table scan asks only for what its query reads): the engine's
 * encoder, out of mc_get_multi's way.
 */
static pg_noinline size_t
encode_wanted(RunState *r, const McTag *tag, const RunKey *k, uint32 pos, char *dst)
{
	McOp		op;
	McKey		wk;
	char		token[MC_TAG_MAX + 10];

	wk.raw = k->src;
	wk.raw_len = k->len;
	wk.wire_len = McKeyWire(r->srv, k->src, k->len, k->form, k->b64, wk.wirebuf, &wk.wire);
	wk.b64 = k->b64;
	McOpInit(&op, MC_OP_GET, &wk);
	op.want = r->want;
	return McEngineOpEncode(&op, token, mc_tag_token(tag, pos, token), true, dst);
}

/*
 * Queue more of a read's requests, up to one slice of unsent text: room is
 * taken once for the slice (and for the one request that may overshoot
 * it), so a key costs its encoding alone.
 */
static void
fill_reads(RunState *r, RunInst *ri, McConn *conn)
{
	size_t		unsent = McConnUnsent(conn);
	char	   *start;
	char	   *dst;
	const char *limit;
	char		wirebuf[MC_KEY_MAX];

	/*
	 * What the loop reads is kept in locals: every byte it writes through
	 * dst may alias r and ri as far as the compiler knows, which would
	 * reload them for each key.
	 */
	const RunKey *keys = r->keys;
	const int  *items = ri->items;
	int			nitems = ri->nitems;
	int			next = ri->next_send;
	unsigned	want = r->want;
	bool		with_flags = (want == 0);
	const McTag *tag = &ri->tag;

	if (next >= nitems || unsent >= RUN_WRITE_SLICE)
		return;
	start = dst = McConnWriteSpace(conn, RUN_WRITE_SLICE - unsent + MC_REQ_HEADER_MAX);
	limit = start + (RUN_WRITE_SLICE - unsent);
	while (next < nitems && dst < limit)
	{
		const RunKey *k = &keys[items[next]];
		size_t		n;

		/*
		 * A key routed as given goes out as it is; others as route_reads
		 * routed them.  "v f" (want 0) and "v" alone have their own
		 * encoder; other fields the generic one.
		 */
		if (unlikely(want != 0 && want != MC_F_VALUE))
			n = encode_wanted(r, tag, k, (uint32) next, dst);
		else if (k->form == MC_KEY_GIVEN && !k->b64)
			n = mc_encode_get_opaque(dst, k->src, k->len, false, with_flags,
									 tag, (uint32) next);
		else
		{
			const char *wire;
			size_t		wlen = McKeyWire(r->srv, k->src, k->len, k->form,
										 k->b64, wirebuf, &wire);

			n = mc_encode_get_opaque(dst, wire, wlen, k->b64, with_flags,
									 tag, (uint32) next);
		}
		/* route_reads checked every key: a refusal here is a bug, not a miss */
		if (n == 0)
			elog(ERROR, "could not encode a get request for a checked key");
		dst += n;
		next++;
	}
	ri->next_send = next;
	McConnWritten(conn, dst - start);
}

/* The room encode_op needs for op: its header, and a store's value. */
static inline size_t
op_room(const McOp *op)
{
	return MC_REQ_HEADER_MAX + (op->kind == MC_OP_STORE ? op->datalen + 2 : 0);
}

/* Encode one write op at dst; returns its length (header, and data for a set). */
static size_t
encode_op(const McOp *op, const McTag *tag, int pos, bool quiet, char *dst)
{
	char		opaque[MC_TAG_MAX + 10];
	size_t		olen = mc_tag_token(tag, (uint32) pos, opaque);
	size_t		n = McEngineOpEncode(op, opaque, olen, quiet, dst);

	/* the caller routed and checked the key: it fits */
	if (n == 0)
		elog(ERROR, "could not encode a write request for a checked key of %zu bytes",
			 op->keylen);
	if (op->kind != MC_OP_STORE)
		return n;
	memcpy(dst + n, op->data, op->datalen);
	n += op->datalen;
	dst[n++] = '\r';
	dst[n++] = '\n';
	return n;
}

/* Queue one write op at the end of conn's unsent requests. */
static void
queue_op(RunState *r, RunInst *ri, McConn *conn, bool quiet)
{
	McOp	   *op = &r->ops[ri->items[ri->next_send]];

	McConnWritten(conn, encode_op(op, &ri->tag, ri->next_send, quiet,
								  McConnWriteSpace(conn, op_room(op))));
	ri->next_send++;
}

/* Encode the next segment of a segmented pipeline, closed by "mn". */
static void
fill_segment(RunState *r, RunInst *ri, McConn *conn)
{
	size_t		bytes = 0;
	int			first = ri->next_send;

	if (ri->seg_waiting || ri->mn_queued)
		return;
	if (ri->next_send < ri->nitems &&
		op_room(&r->ops[ri->items[ri->next_send]]) > RUN_TLS_SEGMENT)
	{
		queue_op(r, ri, conn, false);
		McConnPipelined(conn, 1);
		ri->seg_end = ri->next_send;
		ri->seg_waiting = true;
		ri->seg_single = true;
		return;
	}
	while (ri->next_send < ri->nitems)
	{
		size_t		room = op_room(&r->ops[ri->items[ri->next_send]]);
		size_t		before = McConnUnsent(conn);

		if (room > RUN_TLS_SEGMENT ||
			(ri->next_send > first && bytes + room > RUN_TLS_SEGMENT))
			break;
		queue_op(r, ri, conn, true);
		bytes += McConnUnsent(conn) - before;
	}
	McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
	McConnPipelined(conn, ri->next_send - first);
	ri->seg_end = ri->next_send;
	ri->seg_waiting = true;
	ri->mn_queued = (ri->next_send == ri->nitems);
}

/* The length of op's request at pos as queue_op queued it (quiet). */
static size_t
queued_len(const McOp *op, const McTag *tag, int pos)
{
	char		hdr[MC_REQ_HEADER_MAX];
	char		opaque[MC_TAG_MAX + 10];
	size_t		olen = mc_tag_token(tag, (uint32) pos, opaque);

	return McEngineOpEncode(op, opaque, olen, true, hdr) +
		(op->kind == MC_OP_STORE ? op->datalen + 2 : 0);
}

/*
 * The run stops (stop_run): of an instance's queued requests, those that
 * have not started to go out are taken back, so next_send counts what the
 * server may have received.  Over TLS nothing can be taken back: what is
 * queued (a slice at most) goes.
 */
static void
unqueue(RunState *r, RunInst *ri, McConn *conn)
{
	size_t		tail = McConnUnsent(conn);
	char		mn[8];
	size_t		mnlen = mc_encode_noop(mn);
	int			next = ri->next_send;

	if (tail == 0)
		return;
	if (ri->mn_queued)
	{
		if (tail <= mnlen)
			return;				/* every request is out: its "mn" ends them */
		tail -= mnlen;
	}
	/* the unsent bytes are the last ops' requests; one may be partly out */
	while (tail > 0 && next > ri->next_match)
	{
		size_t		len = queued_len(&r->ops[ri->items[next - 1]], &ri->tag, next - 1);

		if (len > tail)
			break;				/* started: it goes whole */
		tail -= len;
		next--;
	}
	if (!McConnUnqueue(conn, tail))
		return;
	ri->next_send = next;
	ri->mn_queued = false;
}

/*
 * Fill an instance once the run stops: nothing new, and what the server
 * may have received closed by "mn", whose reply ends the part (the ops not
 * sent stay unsettled: they fail).  A TLS segment out already ends so.
 */
static void
fill_stopped(RunState *r, RunInst *ri, McConn *conn)
{
	if (ri->segmented)
	{
		if (ri->seg_waiting || ri->mn_queued)
			return;
	}
	else
		unqueue(r, ri, conn);
	if (ri->mn_queued)
		return;
	McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
	McConnPipelined(conn, ri->next_send);
	ri->mn_queued = true;
}

/*
 * An error will be raised (r->raise): the instances still running send
 * nothing new, and their requests already out are answered (or their
 * instance fails in its turn, within io_timeout and the run's deadline)
 * before it is, so nothing the call sent runs after the caller has its
 * error.  An instance still connecting is filled so when it is ready;
 * failed, the one whose part is ending now.
 */
static void
stop_run(RunState *r, int failed)
{
	if (r->stopping)
		return;
	r->stopping = true;
	for (int s = 0; s < r->srv->cfg.nendpoints; s++)
	{
		McConn	   *conn = r->engine.inst[s].conn;

		if (s != failed && r->engine.inst[s].active && conn != NULL &&
			!McConnConnecting(conn))
			fill_stopped(r, &r->inst[s], conn);
	}
}

/*
 * Queue more requests for an instance (the engine's fill), up to one slice
 * of unsent bytes (a large value may overshoot it by itself), and "mn"
 * once all are queued; a dump's or a flush's one command once.
 */
static void
run_fill(void *arg, int s, McConn *conn)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	if (likely(r->kind == RUN_READS))
		fill_reads(r, ri, conn);
	else if (r->kind == RUN_DUMPS)
	{
		if (!ri->mn_queued)
			McConnLinesQueue(conn, dump_text(r, ri));
		ri->mn_queued = true;
		return;
	}
	else if (r->kind == RUN_FLUSHES)
	{
		/* a text command: no opaque, no "mn"; its one reply ends the part */
		if (!ri->mn_queued)
		{
			queue_op(r, ri, conn, false);
			McConnPipelined(conn, 1);
		}
		ri->mn_queued = true;
		return;
	}
	else if (unlikely(r->stopping))
	{
		fill_stopped(r, ri, conn);
		return;
	}
	else if (ri->segmented)
	{
		fill_segment(r, ri, conn);
		return;
	}
	else
		while (ri->next_send < ri->nitems && McConnUnsent(conn) < RUN_WRITE_SLICE)
			queue_op(r, ri, conn, true);
	if (ri->next_send == ri->nitems && !ri->mn_queued)
	{
		McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
		ri->mn_queued = true;
		McConnPipelined(conn, ri->nitems);
	}
}

/* ---- replies ------------------------------------------------------------- */

/* Keep the first failure's message for a soft caller. */
static void
note_error(RunState *r, const char *fmt,...) pg_attribute_printf(2, 3);

static void
note_error(RunState *r, const char *fmt,...)
{
	va_list		ap;

	if (r->spec->errlen == 0 || r->spec->errbuf[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(r->spec->errbuf, r->spec->errlen, fmt, ap);
	va_end(ap);
}

/*
 * Keep the error raise(arg) raises for instance s, to raise once the run
 * is settled (stop_run); the first one wins.  False when it raised nothing.
 */
static bool
defer_error(RunState *r, int s, void (*raise) (void *arg), void *arg)
{
	ErrorData  *ed = McEngineCatch(raise, arg, true);

	if (ed == NULL)
		return false;
	if (r->raise == NULL)
		r->raise = ed;
	else
		FreeErrorData(ed);
	stop_run(r, s);
	return true;
}

/* defer_error's raisers: a failed instance's error, an error reply's */
static void
raise_failure(void *arg)
{
	McConnFailRaise((McConn *) arg);
}

typedef struct RunReplyError
{
	RunState   *r;
	RunInst    *ri;
	int			s;
	McConn	   *conn;
	const char *base;
	const McReply *rep;
	const char *line;
} RunReplyError;

static void too_large(RunState *r, RunInst *ri, int s, McConn *conn, const char *line);

static void
raise_too_large(void *arg)
{
	RunReplyError *e = arg;

	too_large(e->r, e->ri, e->s, e->conn, e->line);
}

static void
raise_reply_error(void *arg)
{
	RunReplyError *e = arg;

	McConnReplyError(e->conn, e->base, e->rep);
}

/*
 * The instance's part ends unanswered: the ops it sent may or may not have
 * run (counted for the error's detail), those it did not send did not.
 */
static void
count_unsure(RunState *r, RunInst *ri)
{
	for (int i = 0; i < ri->next_send; i++)
		r->unsure += (r->ops[ri->items[i]].result == MC_OP_PENDING);
}

/*
 * Raise the error kept (defer_error) now that every pipeline is settled,
 * its detail saying what became of the call's requests.
 */
static void
raise_settled(RunState *r)
{
	ErrorData  *ed = r->raise;
	int			executed = 0;
	char	   *what;

	for (int i = 0; i < r->nops; i++)
		executed += (r->ops[i].result == MC_OP_DONE || r->ops[i].result == MC_OP_MISS);
	if (r->unsure > 0)
		what = psprintf("Of the %d requests, %d were executed, %d may or may not have been and %d were not sent.",
						r->nops, executed, r->unsure, r->nops - executed - r->unsure);
	else
		what = psprintf("Of the %d requests, %d were executed and %d were not sent.",
						r->nops, executed, r->nops - executed);
	/* (an error reply's detail ends with the server's line, not a sentence) */
	if (ed->detail != NULL)
		what = psprintf("%s%s%s", ed->detail,
						ed->detail[0] && ed->detail[strlen(ed->detail) - 1] == '.' ? "  " : "\n",
						what);
	ed->detail = what;
	ReThrowError(ed);
}

/* Settle every unanswered op of an instance with result res. */
static void
settle_rest(RunState *r, RunInst *ri, McOpResult res)
{
	for (int i = 0; i < ri->nitems; i++)
	{
		McOp	   *op = &r->ops[ri->items[i]];

		if (op->result == MC_OP_PENDING)
			op->result = res;
	}
}

/*
 * A set of the instance's pipeline was over the server's item size limit.
 * The error carries no opaque, and the sets that went through said
 * nothing, so the refused one is any unanswered set; but the limit is on
 * the item's size, so the largest of them (key and value) is over it too:
 * that one is named.  The key is the routed one, printable bytes only.
 */
static void
too_large(RunState *r, RunInst *ri, int s, McConn *conn, const char *line)
{
	const McOp *big = NULL;
	char		key[MC_KEY_MAX + 1];
	size_t		n;

	for (int i = ri->next_match; i < ri->next_send; i++)
	{
		const McOp *op = &r->ops[ri->items[i]];

		if (op->kind == MC_OP_STORE &&
			(big == NULL || op->keylen + op->datalen > big->keylen + big->datalen))
			big = op;
	}
	if (big == NULL)
		return;
	n = Min(big->keylen, MC_KEY_MAX);
	for (size_t i = 0; i < n; i++)
	{
		unsigned char ch = (unsigned char) big->key[i];

		key[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char) ch;
	}
	key[n] = '\0';
	McConnClose(conn);
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("value of key \"%s\" is too large for memcached server \"%s\"",
					key, r->srv->name),
			 errdetail_internal("Instance %s replied: %s (the value is %zu bytes).",
								McInstanceName(&r->srv->net, s), line, big->datalen),
			 errhint("memcached's item size limit is set with its -I option (1 MB by default).")));
}

/*
 * An error reply to a write ends the instance's part: the failing op
 * cannot be told (errors carry no opaque), so every unanswered op of it
 * fails.  The server did answer: nothing is failed over, and only a soft
 * caller goes on (the engine closes the socket).
 */
static McEngRead
error_reply(RunState *r, RunInst *ri, int s, McConn *conn, const char *base,
			const McReply *rep)
{
	size_t		len = rep->header_len >= 2 ? Min(rep->header_len - 2, 200) : 0;
	char		line[201];

	memcpy(line, base, len);
	line[len] = '\0';
	for (char *p = line; *p; p++)
		if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
			*p = '?';
	count_unsure(r, ri);
	if (r->defer)
	{
		RunReplyError e = {r, ri, s, conn, base, rep, line};

		if (rep->type != MC_REPLY_SERVER_ERROR || strstr(line, "object too large") == NULL ||
			!defer_error(r, s, raise_too_large, &e))
			defer_error(r, s, raise_reply_error, &e);
	}
	note_error(r, "instance %s replied: %s", McInstanceName(&r->srv->net, s), line);
	settle_rest(r, ri, MC_OP_FAILED);
	return MC_ENG_CLOSE;
}

/*
 * Is the "MN" of an instance's part (or of its TLS segment) due, given
 * that more bytes follow it in the buffer or not?  "mn" carries no token,
 * so these are its checks: our "mn" is queued and gone whole to the server
 * (it cannot answer one it did not read), and nothing follows its answer
 * (memcached answers a connection's requests in order, and "mn" is the
 * last).  Else the MN is one nobody asked for, and the connection is out
 * of step.
 */
static inline bool
mn_due(const RunInst *ri, McConn *conn, bool more)
{
	if (more || McConnUnsent(conn) != 0)
		return false;
	/* a TLS segment's "mn" (the last one's sets mn_queued too) */
	return ri->mn_queued || (ri->seg_waiting && !ri->seg_single);
}

/* An "MN" not due (mn_due): the instance fails as out of step. */
static pg_noinline McEngRead
mn_stray(RunState *r, McConn *conn, bool soft)
{
	McInstanceMisbehaved(r->srv, conn, soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
						 "an end of pipeline (MN) came before its request or before the replies it ends");
	return MC_ENG_FAILED;
}

/* What no reply named took the quiet outcome: ops first to before end. */
static void
settle_quiet(RunState *r, RunInst *ri, int first, int end, uint32 *done, uint32 *missed)
{
	for (int i = first; i < end; i++)
	{
		McOp	   *op = &r->ops[ri->items[i]];

		if (op->result == MC_OP_PENDING)
			op->result = (op->kind == MC_OP_GET ? MC_OP_MISS : MC_OP_DONE);
		*done += (op->result == MC_OP_DONE);
		*missed += (op->result == MC_OP_MISS);
	}
}

/*
 * One reply to a write (not NEED_MORE, not an error reply): its op's
 * outcome, or the end of the instance's part ("MN").  MC_ENG_MORE to go
 * on, else what the part came to; *ended when "MN" closed it.
 */
static McEngRead
write_reply(RunState *r, int s, McConn *conn, char *base, McReplyType t,
			const McReply *rep, bool more, bool *ended)
{
	RunInst    *ri = &r->inst[s];
	uint32		done = 0,
				missed = 0;
	int			j;

	if (t == MC_REPLY_MN)
	{
		if (!mn_due(ri, conn, more))
			return mn_stray(r, conn, r->engine.soft);
		if (ri->segmented && ri->seg_end < ri->nitems && !r->stopping)
		{
			/* a segment is done: its unnamed ops took the quiet outcome */
			settle_quiet(r, ri, ri->next_match, ri->seg_end, &done, &missed);
			ri->next_match = ri->seg_end;
			ri->seg_waiting = false;
			return MC_ENG_MORE;
		}
		/* (a run that stops sent fewer: the rest fail) */
		settle_quiet(r, ri, 0, ri->next_send, &done, &missed);
		r->engine.inst[s].hits += done;
		/* the client statistics' hits and misses (a store's are not shown) */
		McConnFound(conn, done, missed);
		ri->next_match = ri->nitems;
		*ended = true;
		return MC_ENG_DONE;
	}
	j = mc_reply_position(base, rep, &ri->tag, (uint32) ri->next_match,
						  (uint32) ri->next_send);
	if (j < 0)
	{
		McInstanceMisbehaved(r->srv, conn, r->engine.soft, ERRCODE_PROTOCOL_VIOLATION,
							 "read from", "a reply does not match any outstanding request");
		return MC_ENG_FAILED;
	}
	r->ops[ri->items[j]].result = (t == MC_REPLY_HD ? MC_OP_DONE : MC_OP_MISS);
	ri->next_match = j + 1;
	if (ri->seg_single && j == ri->seg_end - 1)
		ri->seg_single = ri->seg_waiting = false;
	return MC_ENG_MORE;
}

/*
 * One reply to a read that is not a hit or "MN": a stray miss, a foreign
 * or invalid reply, or an error reply.  MC_ENG_MORE when the run goes on
 * past it (a soft run whose instance could not be failed: never), else
 * MC_ENG_FAILED.
 */
static pg_noinline McEngRead
read_odd_reply(RunState *r, McConn *conn, char *base, size_t avail,
			   McReplyType t, const McReply *rep)
{
	if (t == MC_REPLY_EN)
	{
		/* q suppresses EN: one that arrives answers nothing we asked */
		if (!McInstanceMisbehaved(r->srv, conn, r->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
								  "a miss reply does not match any outstanding request"))
			return MC_ENG_FAILED;
	}
	else if ((t == MC_REPLY_BAD || t == MC_REPLY_ERROR || t == MC_REPLY_CLIENT_ERROR) &&
			 McConnForeignReply(conn, base, t == MC_REPLY_BAD ? avail : rep->header_len,
								MC_FOREIGN_META | MC_FOREIGN_UNPARSED))
	{
		/* a server that needs a login, knows no meta command, or is not memcached */
		if (!McInstanceCountFailure(r->srv, conn, r->soft))
			return MC_ENG_FAILED;
	}
	else if (t == MC_REPLY_BAD || t == MC_REPLY_HD)
	{
		/* an HD where a value was asked for would be a row without its value */
		if (!McInstanceMisbehaved(r->srv, conn, r->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
								  t == MC_REPLY_HD ? "a hit carries no value although one was asked for" :
								  "the reply is not valid meta protocol"))
			return MC_ENG_FAILED;
	}
	else
	{
		/* on_failure 'miss' hides unavailability, not error replies */
		if (r->soft && !r->miss)
		{
			McInstanceMisbehaved(r->srv, conn, true, ERRCODE_FDW_ERROR, "read from",
								 "unexpected reply");
			return MC_ENG_FAILED;
		}
		McConnReplyError(conn, base, rep);
	}
	return MC_ENG_MORE;
}

/*
 * A read's replies: hits to the caller (counted once per buffer), "MN"
 * ends the part, anything else read_odd_reply.
 */
static inline McEngRead
read_gets(RunState *r, int s, McConn *conn, char *buf, size_t len,
		  size_t *consumed, size_t *need)
{
	RunInst    *ri = &r->inst[s];
	const RunKey *keys = r->keys;
	McRunHitFn	hit = r->hit;
	void	   *arg = r->arg;
	unsigned	want = r->want;
	size_t		off = 0;		/* bytes of buf handled, consumed at the end */
	int			hits = 0;
	McEngRead	res = MC_ENG_MORE;

	for (;;)
	{
		char	   *base = buf + off;
		McReply		rep;
		McReplyType t = mc_parse_reply_z(base, len - off, &rep);

		if (t == MC_REPLY_NEED_MORE)
		{
			*need = rep.need;
			break;
		}
		/* HD is a hit only for a caller that asked for no value (existence) */
		if (t == MC_REPLY_VA ||
			(t == MC_REPLY_HD && want != 0 && !(want & MC_F_VALUE)))
		{
			int			j = mc_reply_position(base, &rep, &ri->tag,
											  (uint32) ri->next_match,
											  (uint32) ri->next_send);

			if (j < 0)
			{
				if (!McInstanceMisbehaved(r->srv, conn, r->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
										  "a reply does not match any outstanding request"))
				{
					res = MC_ENG_FAILED;
					break;
				}
			}
			/* a lease's empty placeholder is a miss (McReplyIsPlaceholder) */
			if (!McReplyIsPlaceholder(&rep))
			{
				hit(arg, keys[ri->items[j]].datum, base, &rep);
				hits++;
			}
			McConnHit(conn, &rep);
			ri->next_match = j + 1;
		}
		else if (t == MC_REPLY_MN)
		{
			if (!mn_due(ri, conn, off + rep.consumed < len))
			{
				res = mn_stray(r, conn, r->soft);
				break;
			}
			ri->next_match = ri->nitems;
			off += rep.consumed;
			res = MC_ENG_DONE;
			break;
		}
		else if (read_odd_reply(r, conn, base, len - off, t, &rep) != MC_ENG_MORE)
		{
			res = MC_ENG_FAILED;
			break;
		}
		off += rep.consumed;
	}
	r->engine.inst[s].hits += hits;
	if (res != MC_ENG_FAILED)
		*consumed = off;
	return res;
}

/*
 * A write's replies: each op's outcome, "MN" ends the part (or a TLS
 * segment, letting the next be queued), an error reply ends it too.
 */
static McEngRead
read_writes(RunState *r, int s, McConn *conn, char *buf, size_t len,
			size_t *consumed, size_t *need)
{
	RunInst    *ri = &r->inst[s];
	size_t		off = 0;

	for (;;)
	{
		char	   *base = buf + off;
		McReply		rep;
		McReplyType t = mc_parse_reply_z(base, len - off, &rep);
		McEngRead	res;
		bool		ended = false;

		if (t == MC_REPLY_NEED_MORE)
		{
			*need = rep.need;
			break;
		}
		switch (t)
		{
			case MC_REPLY_HD:
			case MC_REPLY_NS:
			case MC_REPLY_NF:
			case MC_REPLY_EN:
			case MC_REPLY_EX:
			case MC_REPLY_MN:
				res = write_reply(r, s, conn, base, t, &rep,
								  off + rep.consumed < len, &ended);
				if (ended)
					*consumed = off + rep.consumed;
				if (res != MC_ENG_MORE)
					return res;
				break;
			case MC_REPLY_ERROR:
			case MC_REPLY_CLIENT_ERROR:
				/* a server that needs a login, or knows no meta command */
				if (McConnForeignReply(conn, base, rep.header_len, MC_FOREIGN_META))
				{
					McInstanceCountFailure(r->srv, conn, r->engine.soft);
					return MC_ENG_FAILED;
				}
				/* FALLTHROUGH */
			case MC_REPLY_SERVER_ERROR:
				*consumed = off;
				return error_reply(r, ri, s, conn, base, &rep);
			default:
				if (McConnForeignReply(conn, base, len - off, MC_FOREIGN_UNPARSED))
				{
					McInstanceCountFailure(r->srv, conn, r->engine.soft);
					return MC_ENG_FAILED;
				}
				McInstanceMisbehaved(r->srv, conn, r->engine.soft, ERRCODE_PROTOCOL_VIOLATION,
									 "read from", "the reply is not valid meta protocol");
				return MC_ENG_FAILED;
		}
		off += rep.consumed;
	}
	*consumed = off;
	return (ri->segmented && !ri->seg_waiting) ? MC_ENG_REFILL : MC_ENG_MORE;
}

/*
 * A flush's reply: OK (parsed as HD) settles its op and ends the part.
 * Anything else is raised, as a single-key call's would be: a server that
 * needs a login or is not memcached as the instance's failure (counted),
 * an error reply as the server's (the socket closed, nothing counted).
 */
static McEngRead
read_flush(RunState *r, int s, McConn *conn, char *buf, size_t len,
		   size_t *consumed, size_t *need)
{
	RunInst    *ri = &r->inst[s];
	McReply		rep;
	McReplyType t = mc_parse_reply_z(buf, len, &rep);

	if (t == MC_REPLY_NEED_MORE)
	{
		*need = rep.need;
		*consumed = 0;
		return MC_ENG_MORE;
	}
	if (t == MC_REPLY_HD)
	{
		r->ops[ri->items[0]].result = MC_OP_DONE;
		r->engine.inst[s].hits++;
		McConnFound(conn, 1, 0);
		*consumed = rep.consumed;
		return MC_ENG_DONE;
	}
	/* memcached at its connection limit (-c) greets a new socket so, and closes it */
	if (t == MC_REPLY_ERROR && rep.msg_len > 0 &&
		memmem(buf + rep.msg_off, rep.msg_len, "Too many open connections", 25))
	{
		McInstanceMisbehaved(r->srv, conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							 "connect to", "the server refused the connection: too many open connections");
		return MC_ENG_FAILED;
	}
	if (McConnForeignReply(conn, buf, t == MC_REPLY_BAD ? len : rep.header_len,
						   t == MC_REPLY_BAD ? MC_FOREIGN_UNPARSED : MC_FOREIGN_META))
	{
		McInstanceCountFailure(r->srv, conn, false);
		return MC_ENG_FAILED;
	}
	McConnReplyError(conn, buf, &rep);
}

/*
 * Parse and handle every complete reply buffered for an instance (the
 * engine's read), each matched to its op by the echoed opaque token (the
 * part's tag and the op's position in the instance's pipeline; replies come
 * in request order, so positions only grow and a read's keys passed over
 * were misses); a token of another tag, a position not sent or passed, or
 * an "MN" that is not due (mn_due) fails the instance as out of step.
 */
static McEngRead
run_read(void *arg, int s, McConn *conn, char *buf, size_t len,
		 size_t *consumed, size_t *need)
{
	RunState   *r = arg;

	if (likely(r->kind == RUN_READS))
		return read_gets(r, s, conn, buf, len, consumed, need);
	if (r->kind == RUN_FLUSHES)
		return read_flush(r, s, conn, buf, len, consumed, need);
	return read_writes(r, s, conn, buf, len, consumed, need);
}

/* A dump's command for instance s, and its lines to the caller. */
static const char *
run_line_cmd(void *arg, int s)
{
	RunState   *r = arg;

	return dump_text(r, &r->inst[s]);
}

static McLineVerdict
run_line(void *arg, int s, const char *line, size_t len)
{
	RunState   *r = arg;

	return r->spec->line(r->spec->arg, s, line, len);
}

/* ---- an instance's part -------------------------------------------------- */

/*
 * The instance starts (again, after a restart on a fresh socket: never for
 * an at-most-once run) from its first op.
 */
static void
run_start(void *arg, int s)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	ri->next_send = 0;
	ri->mn_queued = false;
	/* a tag never used before on any connection of this backend */
	mc_tag_make(&ri->tag, McOpNextOpaque());
	ri->segmented = r->segmented;
	ri->seg_end = 0;
	ri->seg_waiting = ri->seg_single = false;
}

/*
 * The instance failed (counted already by health.c; the engine's
 * dropped).  A read's unanswered keys are misses (the engine counts the
 * instance degraded under 'miss').  A write's unanswered ops go to another
 * instance with failover, unless no time is left or they may have run there
 * and must not run twice (the engine's at-most-once rule says so in
 * may_reroute, or raised the failure); else they fail.
 */
static void
run_dropped(void *arg, int s, McConn *conn, bool may_reroute)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	if (r->kind == RUN_READS)
		return;
	note_error(r, "instance %s: %s", McInstanceName(&r->srv->net, s),
			   McInstanceHealthOf(r->srv, s)->last_error);
	if (r->kind == RUN_WRITES && may_reroute && r->srv->cfg.failover)
	{
		/* an op bound to its own instance fails with it */
		for (int i = 0; i < ri->nitems; i++)
		{
			McOp	   *op = &r->ops[ri->items[i]];

			if (op->home && op->result == MC_OP_PENDING)
				op->result = MC_OP_FAILED;
		}
		r->excluded[s] = true;
		r->reroute = true;
	}
	else
	{
		if (r->kind == RUN_WRITES)
			count_unsure(r, ri);
		settle_rest(r, ri, MC_OP_FAILED);
		if (r->kind == RUN_WRITES && r->miss)
			r->degraded[s] = true;
	}
	/*
	 * Raised: any failure without failover or on_failure 'miss'; one after
	 * at-most-once ops may have run there without 'miss' (a connect that
	 * could not start left no connection with the engine)
	 */
	if (r->defer_fail || (r->kind == RUN_WRITES && r->engine.inst[s].in_doubt && !r->miss))
		defer_error(r, s, raise_failure, conn != NULL ? conn : McNetConn(&r->srv->net, s));
}

/*
 * A soft run gave the instance up on a held interrupt: its unanswered
 * ops fail (nothing is counted against its health).
 */
static void
run_gave_up(void *arg, int s, const char *why)
{
	RunState   *r = arg;

	note_error(r, "instance %s: the send was given up: %s",
			   McInstanceName(&r->srv->net, s), why);
	settle_rest(r, &r->inst[s], MC_OP_FAILED);
}

/* One round of the engine over the instances with work. */
static void
run_round(RunState *r)
{
	for (int s = 0; s < r->srv->cfg.nendpoints; s++)
		r->engine.inst[s].work = r->inst[s].nitems;
	McEngineRun(&r->engine);
}

/* Write rounds until every op is settled: the first, then one per failover. */
static void
run_writes(void *arg)
{
	RunState   *r = arg;
	int			n = r->srv->cfg.nendpoints;

	r->excluded = palloc0(sizeof(bool) * n);
	r->degraded = palloc0(sizeof(bool) * n);
	r->slots = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int) * 2 * (Size) r->nops);
	while (route_writes(r))
	{
		/*
		 * A dead instance is raised as before anything is sent: the engine
		 * would only pass it over (defer_fail)
		 */
		for (int s = 0; r->defer_fail && s < n; s++)
			if (r->inst[s].nitems > 0)
				(void) McInstanceUsable(r->srv, s, false);
		run_round(r);
		if (r->raise != NULL)
		{
			/* the ops of an instance that failed are not failed over now */
			for (int s = 0; r->reroute && s < n; s++)
				if (r->excluded[s])
					count_unsure(r, &r->inst[s]);
			break;
		}
		if (!r->reroute)
			break;
	}
}

/*
 * A write run: at most once when a SQL caller's deletes or once sets are
 * among its ops, bounded by timeout_ms, soft as the caller says (an error
 * no instance reported, no instance left to route to or out of memory,
 * fails what is unsettled instead of raising: McEngineCatch; a cancel is
 * raised on).
 */
static int
exec_writes(RunState *r)
{
	McServer   *srv = r->srv;
	McRun	   *spec = r->spec;
	int			failed = 0;

	for (int i = 0; i < r->nops; i++)
	{
		r->ops[i].result = MC_OP_PENDING;
		r->segmented |= (r->ops[i].kind == MC_OP_STORE && srv->cfg.tls != MC_TLS_DISABLE);
		/*
		 * a second send of a delete answers NF for what the first one
		 * deleted; a set marked once (an INSERT's row) may have been
		 * overwritten by another client in between
		 */
		r->engine.at_most_once |= ((r->ops[i].kind == MC_OP_DELETE || r->ops[i].once) &&
								   !r->soft);
	}
	/*
	 * A SQL caller's error waits until every other instance's requests
	 * already out are answered (stop_run): the engine raises none itself.
	 */
	r->defer = !r->soft;
	r->defer_fail = !(r->soft || srv->cfg.failover || r->miss);
	r->engine.soft = true;
	r->engine.client_raises = r->defer;
	r->engine.give_up_held = r->soft;
	r->engine.timeout_ms = spec->timeout_ms;
	r->engine.deadline = spec->timeout_ms > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), spec->timeout_ms) : 0;
	r->engine.dropped = run_dropped;
	r->engine.gave_up = run_gave_up;
	if (r->soft)
	{
		ErrorData  *ed = McEngineCatch(run_writes, r, false);

		if (ed != NULL)
		{
			note_error(r, "%s%s%s", ed->message,
					   ed->detail ? ": " : "", ed->detail ? ed->detail : "");
			FreeErrorData(ed);
		}
	}
	else
		run_writes(r);
	/*
	 * A SQL caller's degraded instances are counted and warned about as the
	 * single-key functions' are; a soft caller (the commit) reports its
	 * failures itself.
	 */
	for (int s = 0; !r->soft && s < srv->cfg.nendpoints; s++)
		if (r->degraded[s])
			McInstanceDegraded(srv, s);
	for (int i = 0; i < r->nops; i++)
	{
		if (r->ops[i].result == MC_OP_PENDING)
			r->ops[i].result = MC_OP_FAILED;
		if (r->ops[i].result == MC_OP_FAILED)
			failed++;
	}
	if (r->raise != NULL)
		raise_settled(r);
	return failed;
}

int
McRunExec(McServer *srv, McRun *spec)
{
	RunState	r;
	int			ret = 0;
	MemoryContext work;
	MemoryContext old;

	memset(&r, 0, sizeof(r));
	r.srv = srv;
	r.spec = spec;
	r.ops = spec->ops;
	r.nops = spec->nops;
	r.hit = spec->hit;
	r.arg = spec->arg;
	r.kind = spec->hit != NULL ? RUN_READS :
		spec->line != NULL ? RUN_DUMPS :
		(spec->nops > 0 && spec->ops[0].kind == MC_OP_FLUSH) ? RUN_FLUSHES : RUN_WRITES;
	r.failover = !(spec->flags & MC_RUN_STRICT) && srv->cfg.failover;
	r.miss = !(spec->flags & MC_RUN_STRICT) && srv->cfg.on_failure_miss;
	if (spec->errlen > 0)
		spec->errbuf[0] = '\0';
	spec->mem_used = 0;
	if (r.kind != RUN_READS && r.nops <= 0)
		return 0;
	/* the run's work memory, freed at the end (or with the query on error) */
	work = AllocSetContextCreate(CurrentMemoryContext, "mcfdw run",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);
	McEngineInit(&r.engine, srv, &r);
	r.engine.start = run_start;
	r.engine.fill = run_fill;
	r.engine.read = run_read;
	r.inst = palloc(sizeof(RunInst) * srv->cfg.nendpoints);
	switch (r.kind)
	{
		case RUN_READS:
			/*
			 * "v f" takes mc_get_multi's short encoder; nothing wanted asks
			 * for the key's existence as "O" alone.
			 */
			r.want = spec->want == (MC_F_VALUE | MC_F_FLAGS) ? 0 :
				spec->want != 0 ? spec->want : MC_F_OPAQUE;
			r.soft = r.failover || r.miss;
			r.engine.soft = r.soft;
			r.engine.degrade = r.miss;
			route_reads(&r, spec->keys, spec->nulls, spec->nkeys);
			if (r.nkeys > 0)
				run_round(&r);
			ret = r.nkeys;
			break;
		case RUN_WRITES:
			r.soft = (spec->flags & MC_RUN_SOFT) != 0;
			ret = exec_writes(&r);
			break;
		case RUN_DUMPS:
			/*
			 * An instance's dump fails softly only under on_failure 'miss':
			 * an unreachable instance lists nothing (degraded); otherwise
			 * its failure is raised.
			 */
			r.engine.soft = r.engine.degrade = srv->cfg.on_failure_miss;
			r.engine.dropped = run_dropped;
			r.engine.line_cmd = run_line_cmd;
			r.engine.line = run_line;
			r.engine.line_max = spec->line_max;
			for (int i = 0; i < r.nops; i++)
				r.ops[i].result = MC_OP_PENDING;
			route_instances(&r);
			run_round(&r);
			for (int i = 0; i < r.nops; i++)
				if (r.ops[i].result == MC_OP_PENDING)
					r.ops[i].result = MC_OP_DONE;
			break;
		case RUN_FLUSHES:

			/*
			 * Every instance named is flushed, or the run raises: a dead or
			 * failing instance whatever failover and on_failure say (a
			 * flush cannot go elsewhere, nor pass for a miss).  Flushing
			 * twice is harmless: a pooled socket found closed is retried.
			 */
			for (int i = 0; i < r.nops; i++)
				r.ops[i].result = MC_OP_PENDING;
			route_instances(&r);
			run_round(&r);
			for (int i = 0; i < r.nops; i++)
				ret += (r.ops[i].result == MC_OP_DONE);
			break;
	}
	MemoryContextSwitchTo(old);
	spec->mem_used = MemoryContextMemAllocated(work, true);
	MemoryContextDelete(work);
	return ret;
}
