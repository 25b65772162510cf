/*
 * prefetch_exec.c — per-row reads prefetched: running the node.
 *
 * Owns: the prefetching node's batches (rows of the node below, read ahead,
 * batches growing from a few rows to mcfdw.prefetch_batch_size, never past
 * a LIMIT right above), their keys read in one McMultiGetRun per server,
 * the answers kept for the batch (McPrefetchFind, which reads.c asks), the
 * row projected with its batch current (McPrefetchCurrent), rescans and
 * EXPLAIN.  A batch's answers are only used while they are what a call of
 * its own would read: not after this backend wrote to memcached
 * (McPrefetchWrites), not when an instance failed or was dead (the calls
 * then make their own round trips, failing over, degrading or raising as
 * they would), and a value is kept in its reply's form, decoded and
 * checked by the call, so an error about it is raised by its own row.
 * Memory: the rows and values of one batch, within work_mem; a value past
 * that is left to its call.  Must not: decode values (reads.c, values.c),
 * route keys (multi_get.c) or plan (prefetch.c).
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/explain.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "multi_get.h"
#include "prefetch.h"
#include "protocol.h"

void	   *McPrefetchCurrent = NULL;
uint64		McPrefetchWrites = 0;

/* The first batch: a few rows, so a query that stops early reads little. */
#define PF_FIRST_BATCH		16

/* One distinct key of a batch, and what memcached said of it. */
typedef struct PfEntry
{
	struct PfEntry *next;		/* same hash slot */
	uint32		hash;
	uint8		answer;			/* McPrefetchAnswer */
	bool		has_flags;
	uint32		flags;
	char	   *value;
	size_t		vlen;
	/* the key as a text datum (4-byte header), for McMultiGetRun */
	char		key[FLEXIBLE_ARRAY_MEMBER];
} PfEntry;

/* The calls of one server. */
typedef struct PfGroup
{
	char	   *server;			/* NULL: mcfdw.server */
	McServer   *srv;			/* this batch's, or NULL: nothing prefetched */
	bool		usable;			/* the batch's answers may be used */
	uint64		writes;			/* McPrefetchWrites when the keys were read */
	PfEntry   **slots;
	uint32		mask;
	Datum	   *keys;
	int			nkeys;
} PfGroup;

typedef struct PfState
{
	CustomScanState css;
	bool		enabled;		/* mcfdw.prefetch at the start: else rows pass one by one */
	int			nsites;
	ExprState **site_key;		/* per call: its key over the scan tuple */
	int		   *site_group;
	int			ngroups;
	PfGroup    *groups;
	int			max_batch;
	int64		bound;			/* rows a LIMIT above lets through, or -1 */
	int64		returned;		/* since the start or rescan */
	int			next_batch;
	MemoryContext batch_cxt;	/* one batch's rows, keys and values */
	MinimalTuple *rows;
	int			nrows;
	int			pos;
	bool		done;
	Size		budget;			/* bytes of rows and values a batch may keep */
	Size		used;
	/* for EXPLAIN ANALYZE */
	int64		nbatches;
	int64		nkeys;
} PfState;

static Node *pf_create_state(CustomScan *cscan);
static void pf_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *pf_exec(CustomScanState *node);
static void pf_end(CustomScanState *node);
static void pf_rescan(CustomScanState *node);
static void pf_explain(CustomScanState *node, List *ancestors, ExplainState *es);

const CustomScanMethods McPrefetchScanMethods = {
	.CustomName = "MemcachedPrefetch",
	.CreateCustomScanState = pf_create_state,
};

static const CustomExecMethods pf_exec_methods = {
	.CustomName = "MemcachedPrefetch",
	.BeginCustomScan = pf_begin,
	.ExecCustomScan = pf_exec,
	.EndCustomScan = pf_end,
	.ReScanCustomScan = pf_rescan,
	.ExplainCustomScan = pf_explain,
};

static Node *
pf_create_state(CustomScan *cscan)
{
	PfState    *s = palloc0(sizeof(PfState));

	NodeSetTag(s, T_CustomScanState);
	s->css.methods = &pf_exec_methods;
	return (Node *) s;
}

/* A batch that ended with an error must not be looked at again. */
static void
pf_xact_callback(XactEvent event, void *arg)
{
	McPrefetchCurrent = NULL;
}

static void
pf_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		McPrefetchCurrent = NULL;
}

static void
pf_begin(CustomScanState *node, EState *estate, int eflags)
{
	static bool callbacks = false;
	PfState    *s = (PfState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *servers = list_nth(cscan->custom_private, MC_PF_PRIVATE_SERVERS);
	ListCell   *lc;

	if (!callbacks)
	{
		RegisterXactCallback(pf_xact_callback, NULL);
		RegisterSubXactCallback(pf_subxact_callback, NULL);
		callbacks = true;
	}
	outerPlanState(node) = ExecInitNode(outerPlan(cscan), estate, eflags);
	/* the settings as they are now: a cached plan follows them too */
	s->enabled = mc_prefetch;
	s->max_batch = mc_prefetch_batch_size;
	s->bound = intVal(list_nth(cscan->custom_private, MC_PF_PRIVATE_BOUND));
	s->next_batch = Min(PF_FIRST_BATCH, s->max_batch);
	s->nsites = list_length(cscan->custom_exprs);
	s->site_key = palloc(sizeof(ExprState *) * s->nsites);
	s->site_group = palloc(sizeof(int) * s->nsites);
	s->groups = palloc0(sizeof(PfGroup) * s->nsites);
	foreach(lc, cscan->custom_exprs)
	{
		int			i = foreach_current_index(lc);
		Node	   *srv = list_nth(servers, i);
		char	   *name = IsA(srv, String) ? strVal(srv) : NULL;
		int			g;

		s->site_key[i] = ExecInitExpr(lfirst(lc), &node->ss.ps);
		for (g = 0; g < s->ngroups; g++)
			if (name == NULL ? s->groups[g].server == NULL :
				(s->groups[g].server && strcmp(s->groups[g].server, name) == 0))
				break;
		if (g == s->ngroups)
			s->groups[s->ngroups++].server = name;
		s->site_group[i] = g;
	}
	s->budget = (Size) work_mem * 1024;
	s->batch_cxt = AllocSetContextCreate(estate->es_query_cxt, "mcfdw prefetch",
										 ALLOCSET_DEFAULT_SIZES);
	s->rows = palloc(sizeof(MinimalTuple) * s->max_batch);
}

/*
 * The server a group names, if a call would reach it without an error of
 * its own (it exists and the role may use it); else NULL, and the calls
 * raise what they raise, each at its own row.
 */
static McServer *
group_server(PfGroup *g)
{
	const char *name = g->server ? g->server : mc_default_server;
	Oid			oid;

	if (name == NULL || name[0] == '\0')
		return NULL;
	oid = get_foreign_server_oid(name, true);
	if (!OidIsValid(oid) ||
		McServerAclCheck(oid, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
		return NULL;
	return McServerLookup(g->server);
}

/*
 * Add a key to its group's batch, unless the call is better left to ask
 * itself: a NULL key (no call asks), one the key rules refuse (the call
 * raises the error) or one digested as too long (rare; it asks alone).
 */
static void
add_key(PfState *s, PfGroup *g, Datum d)
{
	text	   *t = (text *) PG_DETOAST_DATUM_PACKED(d);
	const char *data = VARDATA_ANY(t);
	size_t		len = VARSIZE_ANY_EXHDR(t);
	size_t		plen = g->srv->cfg.key_prefix_len;
	char		raw[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
	bool		b64;
	uint32		h;
	PfEntry    *e;

	if (len == 0 || len + plen > MC_KEY_MAX)
		return;
	memcpy(raw, g->srv->cfg.key_prefix, plen);
	memcpy(raw + plen, data, len);
	if (mc_key_check(raw, plen + len, &b64) != MC_KEY_OK)
		return;
	h = hash_bytes((const unsigned char *) data, len);
	for (e = g->slots[h & g->mask]; e; e = e->next)
		if (e->hash == h && VARSIZE(e->key) - VARHDRSZ == len &&
			memcmp(VARDATA(e->key), data, len) == 0)
			return;
	e = MemoryContextAlloc(s->batch_cxt, offsetof(PfEntry, key) + VARHDRSZ + len);
	e->hash = h;
	e->answer = MC_PF_MISS;
	e->value = NULL;
	SET_VARSIZE(e->key, VARHDRSZ + len);
	memcpy(VARDATA(e->key), data, len);
	e->next = g->slots[h & g->mask];
	g->slots[h & g->mask] = e;
	g->keys[g->nkeys++] = PointerGetDatum(e->key);
	s->used += offsetof(PfEntry, key) + VARHDRSZ + len;
}

/* McMultiGetRun's hit: keep the value as the reply has it. */
static void
pf_hit(void *arg, Datum key, char *base, const McReply *r)
{
	PfState    *s = arg;
	PfEntry    *e = (PfEntry *) (DatumGetPointer(key) - offsetof(PfEntry, key));

	if (s->used + r->value_len > s->budget)
	{
		e->answer = MC_PF_UNKNOWN;	/* over work_mem: its call asks itself */
		return;
	}
	e->value = MemoryContextAllocHuge(s->batch_cxt, Max(r->value_len, 1));
	memcpy(e->value, base + r->value_off, r->value_len);
	e->vlen = r->value_len;
	e->has_flags = (r->present & MC_F_FLAGS) != 0;
	e->flags = e->has_flags ? r->client_flags : 0;
	e->answer = MC_PF_HIT;
	s->used += r->value_len;
}

/*
 * McMultiGetRun for a group ("v" as mc_get asks, and "f" when the flags say
 * how to decode), as a server without failover and with on_failure 'error'
 * would run it, in a subtransaction.  A failing instance then raises, and
 * nothing else: no key is failed over, no call counted degraded or warned
 * about; the error is caught (the subtransaction's abort closes the
 * connections it left out of step) and false returned, so the calls ask
 * for themselves and do what they do today, the first one on that
 * instance raising, failing over or degrading.  The failure still counts
 * once towards the instance's failure_limit.  A cancel or a shortage of
 * resources is raised here.
 *
 * The two settings are set aside on the server entry for the run, and put
 * back before anything else can read them.
 */
static bool
run_softly(PfState *s, PfGroup *g, unsigned want)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	McServer   *srv = g->srv;
	bool		failover = srv->cfg.failover;
	bool		miss = srv->cfg.on_failure_miss;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		srv->cfg.failover = false;
		srv->cfg.on_failure_miss = false;
		McMultiGetRun(srv, g->keys, NULL, g->nkeys, want, pf_hit, s);
		srv->cfg.failover = failover;
		srv->cfg.on_failure_miss = miss;
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		int			class;

		srv->cfg.failover = failover;
		srv->cfg.on_failure_miss = miss;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		class = ERRCODE_TO_CATEGORY(edata->sqlerrcode);
		if (class == ERRCODE_OPERATOR_INTERVENTION ||
			class == ERRCODE_INSUFFICIENT_RESOURCES)
			ReThrowError(edata);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * Read a group's keys in one round.  The answers are usable only if every
 * instance answered: an instance marked dead, or failing now, leaves every
 * call of the batch to ask for itself (failover, on_failure), as it would
 * have without the prefetch.  With on_failure 'error' a failure is raised
 * here, as the first call to that instance would raise it.
 */
static void
run_group(PfState *s, PfGroup *g)
{
	McServer   *srv = g->srv;
	int			n = srv->cfg.nendpoints;
	int			failures[MC_MAX_ENDPOINTS];
	uint64		degraded[MC_MAX_ENDPOINTS];
	bool		need_flags = srv->cfg.compression || srv->cfg.serialized_flag != 0;

	g->usable = false;
	if (g->nkeys == 0 || srv->ndead > 0)
		return;
	for (int i = 0; i < n; i++)
	{
		failures[i] = McInstanceHealthOf(srv, i)->failures;
		degraded[i] = McInstanceHealthOf(srv, i)->degraded;
	}
	g->writes = McPrefetchWrites;
	s->nkeys += g->nkeys;
	if (!run_softly(s, g, MC_F_VALUE | (need_flags ? MC_F_FLAGS : 0)) ||
		srv->ndead > 0)
		return;
	for (int i = 0; i < n; i++)
		if (McInstanceHealthOf(srv, i)->failures > failures[i] ||
			McInstanceHealthOf(srv, i)->degraded != degraded[i])
			return;
	g->usable = true;
}

/*
 * Read the next batch of rows from the node below, and their keys.  False
 * when there are no more rows.
 */
static bool
refill(PfState *s)
{
	PlanState  *outer = outerPlanState(&s->css);
	ExprContext *econtext = s->css.ss.ps.ps_ExprContext;
	TupleTableSlot *scan = s->css.ss.ss_ScanTupleSlot;
	int			target = s->next_batch;
	MemoryContext old;

	McPrefetchCurrent = NULL;
	ExecClearTuple(scan);
	MemoryContextReset(s->batch_cxt);
	s->nrows = s->pos = 0;
	s->used = 0;
	if (s->done)
		return false;
	if (s->bound >= 0)
		target = (int) Max(Min((int64) target, s->bound - s->returned), 1);

	old = MemoryContextSwitchTo(s->batch_cxt);
	for (int g = 0; g < s->ngroups; g++)
	{
		PfGroup    *grp = &s->groups[g];
		uint32		cap = 16;

		while (cap < (uint32) target * s->nsites * 2)
			cap <<= 1;
		grp->slots = palloc0(sizeof(PfEntry *) * cap);
		grp->mask = cap - 1;
		grp->keys = palloc(sizeof(Datum) * target * s->nsites);
		grp->nkeys = 0;
		grp->usable = false;
		grp->srv = NULL;
	}
	MemoryContextSwitchTo(old);
	for (int g = 0; g < s->ngroups; g++)
		s->groups[g].srv = group_server(&s->groups[g]);

	while (s->nrows < target && s->used < s->budget)
	{
		TupleTableSlot *slot = ExecProcNode(outer);
		MinimalTuple row;

		if (TupIsNull(slot))
		{
			s->done = true;
			break;
		}
		old = MemoryContextSwitchTo(s->batch_cxt);
		row = ExecCopySlotMinimalTuple(slot);
		MemoryContextSwitchTo(old);
		s->rows[s->nrows++] = row;
		s->used += row->t_len;

		/* the keys of the row's calls, as the calls will compute them */
		ExecForceStoreMinimalTuple(row, scan, false);
		econtext->ecxt_scantuple = scan;
		for (int i = 0; i < s->nsites; i++)
		{
			PfGroup    *g = &s->groups[s->site_group[i]];
			bool		isnull;
			Datum		d;

			if (g->srv == NULL)
				continue;
			d = ExecEvalExprSwitchContext(s->site_key[i], econtext, &isnull);
			if (!isnull)
				add_key(s, g, d);
		}
		ResetExprContext(econtext);
	}
	for (int g = 0; g < s->ngroups; g++)
		if (s->groups[g].srv != NULL)
			run_group(s, &s->groups[g]);
	if (s->nrows > 0)
		s->nbatches++;
	s->next_batch = Min(s->next_batch * 2, s->max_batch);
	return s->nrows > 0;
}

/*
 * The next row, projected with its batch current: the calls of its target
 * list take their answers from the batch.
 */
static TupleTableSlot *
pf_exec(CustomScanState *node)
{
	PfState    *s = (PfState *) node;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	TupleTableSlot *scan = node->ss.ss_ScanTupleSlot;
	TupleTableSlot *result;
	void	   *prev = McPrefetchCurrent;

	CHECK_FOR_INTERRUPTS();
	if (!s->enabled)
	{
		TupleTableSlot *slot = ExecProcNode(outerPlanState(node));

		if (TupIsNull(slot))
			return ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
		ResetExprContext(econtext);
		econtext->ecxt_scantuple = slot;
		return ExecProject(node->ss.ps.ps_ProjInfo);
	}
	if (s->pos >= s->nrows)
	{
		bool		more = refill(s);

		McPrefetchCurrent = prev;
		if (!more)
			return ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
	}
	ResetExprContext(econtext);
	ExecForceStoreMinimalTuple(s->rows[s->pos++], scan, false);
	econtext->ecxt_scantuple = scan;
	McPrefetchCurrent = s;
	result = ExecProject(node->ss.ps.ps_ProjInfo);
	McPrefetchCurrent = prev;
	s->returned++;
	return result;
}

/*
 * The answer of the current batch for a key of srv.  UNKNOWN unless the
 * batch asked it of srv, every instance answered, and nothing was written
 * since.
 */
McPrefetchAnswer
McPrefetchFind(McServer *srv, const char *key, size_t len, McPrefetchHit *hit)
{
	PfState    *s = McPrefetchCurrent;
	uint32		h = 0;
	bool		hashed = false;

	for (int gi = 0; gi < s->ngroups; gi++)
	{
		PfGroup    *g = &s->groups[gi];

		if (g->srv != srv || !g->usable || g->writes != McPrefetchWrites)
			continue;
		if (!hashed)
		{
			h = hash_bytes((const unsigned char *) key, len);
			hashed = true;
		}
		for (PfEntry *e = g->slots[h & g->mask]; e; e = e->next)
		{
			if (e->hash != h || VARSIZE(e->key) - VARHDRSZ != len ||
				memcmp(VARDATA(e->key), key, len) != 0)
				continue;
			if (e->answer == MC_PF_HIT)
			{
				hit->data = e->value;
				hit->len = e->vlen;
				hit->has_flags = e->has_flags;
				hit->flags = e->flags;
			}
			return (McPrefetchAnswer) e->answer;
		}
	}
	return MC_PF_UNKNOWN;
}

static void
pf_end(CustomScanState *node)
{
	PfState    *s = (PfState *) node;

	if (McPrefetchCurrent == (void *) s)
		McPrefetchCurrent = NULL;
	ExecEndNode(outerPlanState(node));
	MemoryContextDelete(s->batch_cxt);
}

/* Start over: the rows read ahead belong to the scan before. */
static void
pf_rescan(CustomScanState *node)
{
	PfState    *s = (PfState *) node;
	PlanState  *outer = outerPlanState(node);

	MemoryContextReset(s->batch_cxt);
	s->nrows = s->pos = 0;
	s->done = false;
	s->returned = 0;
	s->next_batch = Min(PF_FIRST_BATCH, s->max_batch);
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (outer->chgParam == NULL)
		ExecReScan(outer);
}

static void
pf_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	PfState    *s = (PfState *) node;

	if (!s->enabled)
		ExplainPropertyText("Prefetch", "off", es);
	ExplainPropertyInteger("Prefetched Calls", NULL, s->nsites, es);
	ExplainPropertyInteger("Batch Size", NULL, s->max_batch, es);
	if (s->bound >= 0)
		ExplainPropertyInteger("Row Bound", NULL, s->bound, es);
	if (es->analyze)
	{
		ExplainPropertyInteger("Prefetch Batches", NULL, s->nbatches, es);
		ExplainPropertyInteger("Prefetched Keys", NULL, s->nkeys, es);
	}
}
