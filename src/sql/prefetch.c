/*
 * prefetch.c — per-row reads prefetched: where (a planner hook).
 *
 * Owns: deciding whether a finished plan may prefetch, and placing the
 * prefetching node (a CustomScan, "MemcachedPrefetch", run by
 * prefetch_exec.c) over each scan or join whose target list calls mc_get
 * or mc_get_bytea with a key computed from the row.  The node below keeps
 * its quals and returns only the columns its target list read; the
 * prefetching node computes the whole target list, row by row as before,
 * after reading the keys of a batch of rows ahead.
 *
 * What may prefetch, so a statement sees what it saw without: a SELECT
 * that writes nothing (no volatile function but the two reads: mc_set and
 * the other writes are volatile, so are functions that might call them),
 * not a cursor (DECLARE and PL/pgSQL's OPEN, which may fetch a row at a
 * time or scroll; a PL/pgSQL FOR loop over a query is no cursor), and at
 * a node whose quals cannot fail for a row read ahead (leakproof
 * functions).  A key must be computed by such functions too, from the
 * row, and the server named by a constant.  A LIMIT with a constant count
 * right above the node bounds its batches.
 *
 * Must not: read or write memcached, or change what any expression
 * computes or when a call runs.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "prefetch.h"

static planner_hook_type prev_planner_hook = NULL;

/* Is funcid mc_get or mc_get_bytea, of this library? */
static bool
is_prefetchable_read(Oid funcid)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		result = false;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->prolang == ClanguageId && !proc->proretset)
	{
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
		Datum		bin;

		if (!isnull)
		{
			char	   *s = TextDatumGetCString(src);

			if (strcmp(s, "mc_get") == 0 || strcmp(s, "mc_get_bytea") == 0)
			{
				bin = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);
				if (!isnull)
				{
					char	   *b = TextDatumGetCString(bin);
					size_t		n = strlen(b);

					/* "$libdir/mcfdw", or a path to the library */
					result = n >= 5 && strcmp(b + n - 5, "mcfdw") == 0 &&
						(n == 5 || b[n - 6] == '/');
				}
			}
		}
	}
	ReleaseSysCache(tup);
	return result;
}

/* check_functions_in_node's test: volatile, and not one of the two reads. */
static bool
volatile_other(Oid funcid, void *context)
{
	return func_volatile(funcid) == PROVOLATILE_VOLATILE &&
		!is_prefetchable_read(funcid);
}

/* Does the statement call anything volatile but mc_get / mc_get_bytea? */
static bool
volatile_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, volatile_other, context))
		return true;
	if (IsA(node, NextValueExpr))
		return true;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, volatile_walker, context, 0);
	return expression_tree_walker(node, volatile_walker, context);
}

/*
 * check_functions_in_node's test for an expression computed for rows read
 * ahead: a function whose error could be raised for a row the statement
 * never returns, or earlier than the row it belongs to, is refused.
 * Leakproof functions raise no error that depends on their arguments;
 * concatenation neither (what keys are usually made of).
 */
static bool
may_fail(Oid funcid, void *context)
{
	if (funcid == F_TEXTCAT || funcid == F_CONCAT || funcid == F_CONCAT_WS)
		return false;
	return !get_func_leakproof(funcid);
}

/* Is the expression one that cannot fail for any row (see may_fail)? */
static bool
unsafe_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
		case T_Const:
		case T_Param:
		case T_RelabelType:
		case T_BoolExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_CaseExpr:
		case T_CaseWhen:
		case T_CaseTestExpr:
		case T_CoalesceExpr:
		case T_List:
			break;
		case T_FuncExpr:
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
		case T_ScalarArrayOpExpr:
			if (check_functions_in_node(node, may_fail, context))
				return true;
			break;
		case T_CoerceViaIO:
			{
				CoerceViaIO *c = (CoerceViaIO *) node;
				Oid			in = exprType((Node *) c->arg);

				/* a built-in type's text form, as text: nothing to fail */
				if ((c->resulttype != TEXTOID && c->resulttype != VARCHAROID) ||
					in >= FirstGenbkiObjectId)
					return true;
				break;
			}
		default:
			return true;
	}
	return expression_tree_walker(node, unsafe_walker, context);
}

/* What placing one node found. */
typedef struct PfSplit
{
	List	   *sites;			/* FuncExprs of the calls to prefetch */
} PfSplit;

/* Collect the calls of an expression that can be prefetched. */
static bool
site_walker(Node *node, PfSplit *sp)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) node;

		if (list_length(f->args) == 2 && IsA(lsecond(f->args), Const) &&
			!f->funcretset && is_prefetchable_read(f->funcid))
		{
			Node	   *key = linitial(f->args);

			/* a key computed from the row that cannot fail, once or twice */
			if (exprType(key) == TEXTOID && !contain_volatile_functions(key) &&
				!unsafe_walker(key, NULL))
				sp->sites = lappend(sp->sites, f);
		}
	}
	return expression_tree_walker(node, site_walker, sp);
}

/* Collect the distinct Vars of an expression (varlevelsup is 0 after setrefs). */
static bool
var_walker(Node *node, List **vars)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		if (!list_member(*vars, node))
			*vars = lappend(*vars, node);
		return false;
	}
	return expression_tree_walker(node, var_walker, vars);
}

/* The position of a node in a list by equal(), or -1. */
static int
list_index_of(List *list, void *datum)
{
	ListCell   *lc;

	foreach(lc, list)
		if (equal(lfirst(lc), datum))
			return foreach_current_index(lc);
	return -1;
}

/* Each Var of the node's level as the position of its column below: INDEX_VAR. */
static Node *
index_var_mutator(Node *node, List *vars)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;
		int			pos = list_index_of(vars, v);

		if (pos < 0)
			elog(ERROR, "mcfdw: a column of the prefetched target list was not found");
		return (Node *) makeVar(INDEX_VAR, pos + 1, v->vartype, v->vartypmod,
								v->varcollid, 0);
	}
	return expression_tree_mutator(node, index_var_mutator, vars);
}

/* Node types whose target list may be computed one node above. */
static bool
splittable(Plan *plan)
{
	switch (nodeTag(plan))
	{
		case T_SeqScan:
		case T_SampleScan:
		case T_IndexScan:
		case T_IndexOnlyScan:
		case T_BitmapHeapScan:
		case T_TidScan:
		case T_TidRangeScan:
		case T_SubqueryScan:
		case T_FunctionScan:
		case T_ValuesScan:
		case T_CteScan:
		case T_NamedTuplestoreScan:
		case T_WorkTableScan:
			return true;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			return !unsafe_walker((Node *) ((Join *) plan)->joinqual, NULL) &&
				(!IsA(plan, HashJoin) ||
				 !unsafe_walker((Node *) ((HashJoin *) plan)->hashclauses, NULL)) &&
				(!IsA(plan, MergeJoin) ||
				 !unsafe_walker((Node *) ((MergeJoin *) plan)->mergeclauses, NULL));
		case T_Result:
			return plan->lefttree != NULL;
		default:
			return false;
	}
}

/* Placing nodes in one plan. */
typedef struct PfPlace
{
	int			next_id;		/* the next fresh plan_node_id */
} PfPlace;

/*
 * Put a prefetching node over plan, if its target list has calls to
 * prefetch and nothing it computes for a row read ahead can fail.
 */
static Plan *
wrap(Plan *plan, PfPlace *pl, int64 bound)
{
	PfSplit		sp = {NIL};
	List	   *vars = NIL;
	List	   *below = NIL;
	List	   *scan_tlist = NIL;
	List	   *tlist = NIL;
	List	   *servers = NIL;
	List	   *keys = NIL;
	CustomScan *cscan;
	ListCell   *lc;

	if (!splittable(plan) || plan->targetlist == NIL)
		return plan;
	site_walker((Node *) plan->targetlist, &sp);
	if (sp.sites == NIL ||
		contain_subplans((Node *) plan->targetlist) ||
		expression_returns_set((Node *) plan->targetlist) ||
		unsafe_walker((Node *) plan->qual, NULL))
		return plan;

	/* the columns the target list reads: what the node below now returns */
	var_walker((Node *) plan->targetlist, &vars);
	foreach(lc, vars)
	{
		Var		   *v = lfirst(lc);
		int			pos = foreach_current_index(lc) + 1;

		below = lappend(below, makeTargetEntry((Expr *) copyObject(v), pos, NULL, false));
		/* the scan tuple's columns, as the node below's (for EXPLAIN) */
		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) makeVar(OUTER_VAR, pos, v->vartype,
															  v->vartypmod, v->varcollid, 0),
											 pos, NULL, false));
	}
	foreach(lc, plan->targetlist)
	{
		TargetEntry *te = flatCopyTargetEntry(lfirst(lc));

		te->expr = (Expr *) index_var_mutator((Node *) te->expr, vars);
		tlist = lappend(tlist, te);
	}
	foreach(lc, sp.sites)
	{
		FuncExpr   *f = lfirst(lc);
		Const	   *srv = lsecond(f->args);

		keys = lappend(keys, index_var_mutator(linitial(f->args), vars));
		servers = lappend(servers, srv->constisnull ? (Node *) makeInteger(0) :
						  (Node *) makeString(pstrdup(NameStr(*DatumGetName(srv->constvalue)))));
	}

	cscan = makeNode(CustomScan);
	cscan->scan.plan.startup_cost = plan->startup_cost;
	cscan->scan.plan.total_cost = plan->total_cost;
	cscan->scan.plan.plan_rows = plan->plan_rows;
	cscan->scan.plan.plan_width = plan->plan_width;
	cscan->scan.plan.parallel_aware = false;
	cscan->scan.plan.parallel_safe = plan->parallel_safe;
	cscan->scan.plan.plan_node_id = pl->next_id++;
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = NIL;
	cscan->scan.plan.lefttree = plan;
	cscan->scan.plan.extParam = bms_copy(plan->extParam);
	cscan->scan.plan.allParam = bms_copy(plan->allParam);
	cscan->scan.scanrelid = 0;
	cscan->flags = 0;
	cscan->custom_exprs = keys;
	cscan->custom_private = list_make2(makeInteger(bound > PG_INT32_MAX ? -1 : (int) bound),
									   servers);
	cscan->custom_scan_tlist = scan_tlist;
	cscan->methods = &McPrefetchScanMethods;
	plan->targetlist = below;
	return (Plan *) cscan;
}

/* The rows a Limit lets through, when its count is a constant; else -1. */
static int64
limit_bound(Limit *lim)
{
	Const	   *count = (Const *) lim->limitCount;
	Const	   *offset = (Const *) lim->limitOffset;
	int64		n;

	if (lim->limitOption != LIMIT_OPTION_COUNT ||
		count == NULL || !IsA(count, Const) || count->constisnull)
		return -1;
	n = DatumGetInt64(count->constvalue);
	if (offset != NULL)
	{
		if (!IsA(offset, Const))
			return -1;
		if (!offset->constisnull)
			n += Max(DatumGetInt64(offset->constvalue), 0);
	}
	return Max(n, 0);
}

/*
 * Walk a plan, children first, placing prefetching nodes.  bound is what a
 * Limit right above lets through; keep says the node must stay as it is
 * (a merge join's inner side marks and restores its position).
 */
static Plan *
place(Plan *plan, PfPlace *pl, int64 bound, bool keep)
{
	ListCell   *lc;

	if (plan == NULL)
		return NULL;
	switch (nodeTag(plan))
	{
		case T_Gather:
		case T_GatherMerge:
			return plan;		/* parallel plans are left alone */
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				lfirst(lc) = place(lfirst(lc), pl, -1, false);
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				lfirst(lc) = place(lfirst(lc), pl, -1, false);
			break;
		case T_SubqueryScan:
			((SubqueryScan *) plan)->subplan =
				place(((SubqueryScan *) plan)->subplan, pl, -1, false);
			break;
		case T_CustomScan:
			foreach(lc, ((CustomScan *) plan)->custom_plans)
				lfirst(lc) = place(lfirst(lc), pl, -1, false);
			break;
		default:
			break;
	}
	plan->lefttree = place(plan->lefttree, pl,
						   IsA(plan, Limit) ? limit_bound((Limit *) plan) : -1, false);
	plan->righttree = place(plan->righttree, pl, -1, IsA(plan, MergeJoin));
	if (keep)
		return plan;
	return wrap(plan, pl, bound);
}

/* The largest plan_node_id of a tree. */
static void
max_id(Plan *plan, int *id)
{
	ListCell   *lc;

	if (plan == NULL)
		return;
	*id = Max(*id, plan->plan_node_id);
	max_id(plan->lefttree, id);
	max_id(plan->righttree, id);
	if (IsA(plan, Append))
		foreach(lc, ((Append *) plan)->appendplans)
			max_id(lfirst(lc), id);
	else if (IsA(plan, MergeAppend))
		foreach(lc, ((MergeAppend *) plan)->mergeplans)
			max_id(lfirst(lc), id);
	else if (IsA(plan, SubqueryScan))
		max_id(((SubqueryScan *) plan)->subplan, id);
	else if (IsA(plan, CustomScan))
		foreach(lc, ((CustomScan *) plan)->custom_plans)
			max_id(lfirst(lc), id);
}

/* The planner hook: plan as always, then place prefetching nodes. */
static PlannedStmt *
prefetch_planner(Query *parse, const char *query_string, int cursorOptions,
				 ParamListInfo boundParams)
{
	PlannedStmt *stmt;
	bool		may;
	PfPlace		pl;
	ListCell   *lc;

	/* decided before planning: the planner scribbles on the query */
	may = mc_prefetch && parse->commandType == CMD_SELECT &&
		parse->utilityStmt == NULL && !parse->hasModifyingCTE &&
		parse->rowMarks == NIL &&
		(cursorOptions & (CURSOR_OPT_SCROLL | CURSOR_OPT_FAST_PLAN)) == 0 &&
		!volatile_walker((Node *) parse, NULL);
	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);
	if (!may || stmt->commandType != CMD_SELECT)
		return stmt;

	pl.next_id = 0;
	max_id(stmt->planTree, &pl.next_id);
	foreach(lc, stmt->subplans)
		max_id(lfirst(lc), &pl.next_id);
	pl.next_id++;
	stmt->planTree = place(stmt->planTree, &pl, -1, false);
	foreach(lc, stmt->subplans)
		lfirst(lc) = place(lfirst(lc), &pl, -1, false);
	return stmt;
}

/* _PG_init: the hook, and the node's methods by name (for plan copies). */
void
McPrefetchInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = prefetch_planner;
	RegisterCustomScanMethods(&McPrefetchScanMethods);
}
