/*
 * run_route.c — where the runner's requests go: the failover rule, the
 * run of one, and the ops of a run of many grouped by instance.
 *
 * Owns: the failover rule, the one place that says where a key goes given
 * the instances dead or failed in this call and what becomes of it when
 * none is left (failover_map, run_route.h's McRunRoutePick), for a run of
 * one, a read's keys and the rounds of a run of many's writes alike; the
 * run of one (run.h's McRunOne) once its instance is dead or failed, its
 * request sent alone by the engine (McEngineSendOne) on the instance the
 * rule chose, tried on the next while failover allows; and the ops of a
 * run of many grouped by instance, each instance's a slice of one array:
 * a read's keys checked and routed once each (keys.c), de-duplicated and
 * given their instance by the failover rule, a write's unanswered ops by
 * it too (a home op to its own instance), a dump's or a flush's to the
 * instance it names.  Must not: encode, send or read requests (run_reads.c,
 * run_writes.c and the engine do), wait, or keep state between calls.
 */
#include "postgres.h"

#include "health.h"
#include "keys.h"
#include "run_int.h"
#include "run_route.h"

/*
 * The failover rule, the one a run of one (McRunRouteOne), a read's keys
 * (run_route_reads) and every round of a run of many's writes
 * (run_route_writes) follow.  A key goes to its own instance; with
 * failover on, to where the client family would send it with the
 * instances down that health holds dead (alive, from McInstanceAliveMap:
 * NULL when none is) or that failed in this call (failed: NULL when none
 * did), as Dalli does on the spot, each failure still counting towards
 * failure_limit.  With no instance left the call
 * raises (McInstancePickWith), or under on_failure 'miss': a key when no
 * instance failed in this call meets its own instance (all are dead: it
 * refuses the key as the instance's failure), and a key with every
 * instance failed or dead is a miss counted against its own instance.  A
 * request that may have run on a failing instance is not failed over at
 * all: the engine says so (at most once: McEngineSendOne's
 * MC_ENG_ONE_IN_DOUBT, a pipelined run's may_reroute).
 *
 * The instances a key may go to now, into buf: NULL when any may; *none
 * when none is left and the key is a miss (McRunRoutePick, run_route.h).
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
McRunRouteOne(McServer *srv, McOpRun *run, int failed)
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
		int			idx = McRunRoutePick(srv, op->key, op->keylen, map, none);
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
McRunRouteFailed(McServer *srv, McOpRun *run, int index, McEngOne sent)
{
	if (sent == MC_ENG_ONE_FAILED && srv->cfg.failover && srv->cfg.nendpoints > 1)
		return McRunRouteOne(srv, run, index);
	McInstanceDegraded(srv, index);
	return false;
}

/* ---- a run of many's ops, by instance ------------------------------------ */

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
 * choose the instance by the failover rule (no instance failed in this
 * call yet: one that fails in it leaves its keys misses, or raises), then
 * group them by instance.
 */
void
run_route_reads(RunState *r, const Datum *elems, const bool *nulls, int n)
{
	McServer   *srv = r->srv;
	KeySet		set;
	uint32		cap = 16;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	bool		mapbuf[MC_MAX_ENDPOINTS];
	bool		none;
	const bool *map = failover_map(srv, McInstanceAliveMap(srv, alivebuf), NULL,
								   r->miss, mapbuf, &none);
	RunInst    *inst = r->inst;
	RunKey	   *keys;
	int			nkeys = 0;
	char		rawbuf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];

	/* none is left only when an instance failed in this call: none has yet */
	Assert(!none);
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
		/*
		 * McRunRoutePick's pick, the hash known: under the run's failover
		 * (off in a strict run: a dead instance's keys go to it, which
		 * refuses them)
		 */
		k->instance = (uint16) McInstancePickHashed(srv, h, raw, rawlen, map, r->failover);
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
 * Route a write's unanswered ops to their instances by the failover rule
 * (those that failed in this call passed over; a home op to its own
 * instance whatever the health map) and group them per instance.  False
 * when none is pending.
 */
bool
run_route_writes(RunState *r)
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
			s = McRunRoutePick(srv, op->key, op->keylen, op->home ? NULL : map, none);
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
void
run_route_instances(RunState *r)
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
