/*
 * prefetch_exec.c — per-row reads prefetched: running the node.
 *
 * Owns: the prefetching node's batches (rows of the node below, read ahead,
 * batches growing from 16 rows to mcfdw.prefetch_batch_size, never past a
 * LIMIT right above), their keys computed as the calls will compute them
 * and read in one strict McRunGets per server (in a subtransaction,
 * without failover or on_failure 'miss': see run_softly), the
 * row projected with its batch current (McPrefetchCurrent), rescans and
 * EXPLAIN.  A batch's answers (prefetch_batch.c) are used only when every
 * instance answered; otherwise the calls make their own round trips,
 * failing over, degrading or raising as they would.  Memory: the rows,
 * keys and values of one batch, within work_mem.  Must not: decode values
 * (reads.c, values.c), route keys (run_route.c) or plan (prefetch.c).
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "run.h"
#include "prefetch.h"

/* The first batch: a few rows, so a query that stops early reads little. */
#define PF_FIRST_BATCH		16

typedef struct PfState
{
	CustomScanState css;
	bool		enabled;		/* mcfdw.prefetch at the start: else rows pass one by one */
	int			nsites;
	ExprState **site_key;		/* per call: its key over the scan tuple */
	int		   *site_group;
	McPfAnswers answers;		/* the batch's answers, per server (prefetch_batch.c) */
	int			max_batch;
	int64		bound;			/* rows a LIMIT above lets through, or -1 */
	int64		returned;		/* since the start or rescan */
	int			next_batch;
	MemoryContext batch_cxt;	/* one batch's rows, keys and values: answers.cxt */
	MinimalTuple *rows;
	int			nrows;
	int			pos;
	bool		done;
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
	s->answers.groups = palloc0(sizeof(McPfGroup) * s->nsites);
	foreach(lc, cscan->custom_exprs)
	{
		int			i = foreach_current_index(lc);
		Node	   *srv = list_nth(servers, i);
		char	   *name = IsA(srv, String) ? strVal(srv) : NULL;
		int			g;

		s->site_key[i] = ExecInitExpr(lfirst(lc), &node->ss.ps);
		for (g = 0; g < s->answers.ngroups; g++)
			if (name == NULL ? s->answers.groups[g].server == NULL :
				(s->answers.groups[g].server && strcmp(s->answers.groups[g].server, name) == 0))
				break;
		if (g == s->answers.ngroups)
			s->answers.groups[s->answers.ngroups++].server = name;
		s->site_group[i] = g;
	}
	s->answers.budget = (Size) work_mem * 1024;
	s->batch_cxt = AllocSetContextCreate(estate->es_query_cxt, "mcfdw prefetch",
										 ALLOCSET_DEFAULT_SIZES);
	s->answers.cxt = s->batch_cxt;
	s->rows = palloc(sizeof(MinimalTuple) * s->max_batch);
}

/*
 * The server a group names, if a call would reach it without an error of
 * its own (it exists and the role may use it); else NULL, and the calls
 * raise what they raise, each at its own row.
 */
static McServer *
group_server(McPfGroup *g)
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
 * McRunGets for a group ("v" as mc_get asks, and "f" when the flags say
 * how to decode), strict (MC_RUN_STRICT: as a server without failover and
 * with on_failure 'error' would run it; the server's settings are not
 * touched), in a subtransaction.  A failing instance then raises, and
 * nothing else: no key is failed over, no call counted degraded or warned
 * about; the error is caught (the subtransaction's abort closes the
 * connections it left out of step) and false returned, so the calls ask
 * for themselves and do what they do today, the first one on that
 * instance raising, failing over or degrading.  The failure still counts
 * once towards the instance's failure_limit.  A cancel or a shortage of
 * resources is raised here.
 */
static bool
run_softly(PfState *s, McPfGroup *g, unsigned want)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		McRunGets(g->srv, g->keys, NULL, g->nkeys, want, MC_RUN_STRICT,
					  McPrefetchBatchOnHit, &s->answers);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		int			class;

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
run_group(PfState *s, McPfGroup *g)
{
	McServer   *srv = g->srv;
	int			n = srv->cfg.nendpoints;
	int			failures[MC_MAX_ENDPOINTS];
	uint64		degraded[MC_MAX_ENDPOINTS];
	bool		need_flags = srv->cfg.compression || srv->cfg.serialized_flag != 0;
	MemoryContext old;
	bool		ok;

	/* one key is one round trip either way: its call makes it */
	g->usable = false;
	if (g->nkeys < 2 || srv->ndead > 0)
		return;
	for (int i = 0; i < n; i++)
	{
		failures[i] = McInstanceHealthOf(srv, i)->failures;
		degraded[i] = McInstanceHealthOf(srv, i)->degraded;
	}
	g->writes = McServerWritesStarted;
	s->nkeys += g->nkeys;
	/* what a failed run leaves allocated goes with the batch */
	old = MemoryContextSwitchTo(s->batch_cxt);
	ok = run_softly(s, g, MC_F_VALUE | (need_flags ? MC_F_FLAGS : 0));
	MemoryContextSwitchTo(old);
	if (!ok || srv->ndead > 0)
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
	s->answers.used = 0;
	if (s->done)
		return false;
	if (s->bound >= 0)
		target = (int) Max(Min((int64) target, s->bound - s->returned), 1);

	McPrefetchBatchStart(&s->answers, target * s->nsites);
	for (int g = 0; g < s->answers.ngroups; g++)
		s->answers.groups[g].srv = group_server(&s->answers.groups[g]);

	while (s->nrows < target && s->answers.used < s->answers.budget)
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
		s->answers.used += row->t_len;

		/* the keys of the row's calls, as the calls will compute them */
		ExecForceStoreMinimalTuple(row, scan, false);
		econtext->ecxt_scantuple = scan;
		for (int i = 0; i < s->nsites; i++)
		{
			McPfGroup    *g = &s->answers.groups[s->site_group[i]];
			bool		isnull;
			Datum		d;

			if (g->srv == NULL)
				continue;
			d = ExecEvalExprSwitchContext(s->site_key[i], econtext, &isnull);
			if (!isnull)
				McPrefetchBatchAdd(&s->answers, g, d);
		}
		ResetExprContext(econtext);
	}
	for (int g = 0; g < s->answers.ngroups; g++)
		if (s->answers.groups[g].srv != NULL)
			run_group(s, &s->answers.groups[g]);
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
	McPfAnswers *prev = McPrefetchCurrent;

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
	McPrefetchCurrent = &s->answers;
	result = ExecProject(node->ss.ps.ps_ProjInfo);
	McPrefetchCurrent = prev;
	s->returned++;
	return result;
}

static void
pf_end(CustomScanState *node)
{
	PfState    *s = (PfState *) node;

	if (McPrefetchCurrent == &s->answers)
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
