/*
 * fdw_join.c — planning the batched join: a join of any relation (the
 * outer side) to a foreign table of the wrapper (the inner side) on the
 * table's key, run by fdw_join_exec.c as batches of outer rows, each batch
 * one pipelined multi-get.
 *
 * Owns: the set_join_pathlist_hook (chained to any previous one), which
 * offers a custom path for INNER, LEFT and SEMI joins whose join clauses
 * include <foreign table>.key = <expression over the outer side>
 * (recognized by fdw.c's McFdwKeyCondition, as a parameterized scan's key
 * condition is), its cost, and the CustomScan plan: which clauses decide
 * whether an outer row matches and which filter the joined rows, and the
 * scan tuple (the outer plan's columns, then the foreign table's).
 * Must not: execute anything (fdw_join_exec.c does).
 *
 * Costs: the parameterized path fdw.c offers costs a round trip per outer
 * row; this one costs the outer rows, a round trip per batch (64 outer
 * rows, then four times as many each time, up to join_batch_size), and a
 * key's share of a pipeline per row, so it wins from the second outer row
 * on.  mcfdw.enable_batched_join off
 * withdraws it.
 *
 * Semantics are the nested loop's: a NULL key matches nothing, each outer
 * row is looked up (duplicates too), a key matches at most one item.  The
 * foreign table's own conditions and, for LEFT joins, the join clauses
 * that are not pushed down (RINFO_IS_PUSHED_DOWN, as postgres_fdw splits
 * them) decide a match; the pushed-down ones filter the joined rows.  For
 * INNER and SEMI joins every clause decides a match.  Not offered: other
 * join types, a parameterized outer side, placeholders, whole-row or system
 * columns of the foreign table, and statements that lock rows or modify
 * tables (whose EvalPlanQual rechecks a custom join cannot serve).
 */
#include "postgres.h"

#include <math.h>

#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"

#include "fdw.h"

static set_join_pathlist_hook_type prev_join_pathlist_hook = NULL;

/* custom_private of the path (a List) */
#define JP_KEYCLAUSE	0		/* the RestrictInfo used as the key condition */
#define JP_KEYEXPR		1		/* its expression over the outer side */
#define JP_MATCH		2		/* List of RestrictInfo: decide a match */
#define JP_FILTER		3		/* List of RestrictInfo: filter joined rows */
#define JP_JOINTYPE		4		/* Integer */
#define JP_INNER		5		/* Integer: the foreign table's relid (RT index) */
#define JP_OJRELID		6		/* Integer: the outer join nulling the inner side, or 0 */

static Plan *plan_join(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
					   List *tlist, List *clauses, List *custom_plans);

static const CustomPathMethods join_path_methods = {
	.CustomName = "MemcachedBatchedJoin",
	.PlanCustomPath = plan_join,
};

static bool
has_placeholders(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, PlaceHolderVar))
		return true;
	return expression_tree_walker(node, has_placeholders, context);
}

static bool
rinfos_have_placeholders(List *rinfos)
{
	ListCell   *lc;

	foreach(lc, rinfos)
		if (has_placeholders((Node *) lfirst_node(RestrictInfo, lc)->clause, NULL))
			return true;
	return false;
}

/*
 * The foreign table's columns the join reads: those its rel yields (for
 * the join clauses and above) and those its own conditions read, which the
 * join now evaluates.  NIL, with *ok false, if one is not a plain column.
 */
static List *
inner_columns(RelOptInfo *innerrel, bool *ok)
{
	List	   *vars = list_copy(innerrel->reltarget->exprs);
	List	   *cols = NIL;
	ListCell   *lc;

	foreach(lc, innerrel->baserestrictinfo)
		vars = list_concat(vars,
						   pull_var_clause((Node *) lfirst_node(RestrictInfo, lc)->clause,
										   PVC_RECURSE_PLACEHOLDERS));
	*ok = true;
	foreach(lc, vars)
	{
		Var		   *v = lfirst(lc);
		ListCell   *lc2;
		bool		dup = false;

		if (!IsA(v, Var) || v->varno != (int) innerrel->relid ||
			v->varattno <= 0 || v->varlevelsup != 0)
		{
			*ok = false;
			return NIL;
		}
		foreach(lc2, cols)
			dup |= ((Var *) lfirst(lc2))->varattno == v->varattno;
		if (!dup)
			cols = lappend(cols, v);
	}
	return cols;
}

/*
 * The join clause that gives one key per outer row: key = <expression over
 * outerrel only>.  For a LEFT join it must be a join clause proper (one
 * that decides a match), not a pushed-down filter.
 */
static RestrictInfo *
join_key_clause(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
				RelOptInfo *innerrel, const McTable *t, JoinType jointype,
				List *restrictlist, Node **keyexpr)
{
	ListCell   *lc;

	foreach(lc, restrictlist)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		List	   *e = NIL;
		List	   *k = NIL;

		if (jointype == JOIN_LEFT && RINFO_IS_PUSHED_DOWN(ri, joinrel->relids))
			continue;
		if (McFdwKeyCondition(root, (Node *) ri->clause, innerrel->relid,
						   t->attnum[MC_FIELD_KEY], &e, &k) != 1 ||
			list_length(e) != 1 || linitial_int(k) != MC_KEYEXPR_SCALAR)
			continue;
		if (!bms_is_subset(pull_varnos(root, linitial(e)), outerrel->relids))
			continue;
		*keyexpr = linitial(e);
		return ri;
	}
	return NULL;
}

/*
 * How many batches rows outer rows take: the first has MC_JOIN_FIRST_BATCH
 * rows, each next four times as many, up to join_batch_size (as
 * fdw_join_exec.c sizes them while a batch's memory is small).
 */
static double
batches_for(double rows, int batch_size)
{
	double		size = Min(MC_JOIN_FIRST_BATCH, batch_size);
	double		n = 0;

	while (rows > 0 && size < batch_size)
	{
		rows -= size;
		n++;
		size = Min(size * 4, batch_size);
	}
	return rows > 0 ? n + ceil(rows / batch_size) : n;
}

/*
 * Can no EvalPlanQual recheck reach the join: no enclosing query level
 * locks rows or modifies a table.  A recheck would run the join as a
 * single joined row (ExecScanFetch), which the batched join cannot give.
 */
static bool
without_recheck(PlannerInfo *root)
{
	for (PlannerInfo *r = root; r != NULL; r = r->parent_root)
		if (r->parse->commandType != CMD_SELECT || r->rowMarks != NIL ||
			r->parse->rowMarks != NIL)
			return false;
	return true;
}

static void
mc_join_pathlist(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
				 RelOptInfo *innerrel, JoinType jointype, JoinPathExtraData *extra)
{
	const McTable *t;
	unsigned	want;
	Path	   *outer_path;
	RestrictInfo *key;
	Node	   *keyexpr = NULL;
	List	   *match = NIL;
	List	   *filter = NIL;
	ListCell   *lc;
	CustomPath *cp;
	QualCost	match_cost,
				filter_cost;
	double		outer_rows,
				nbatches;
	Cost		run;
	bool		ok;

	if (prev_join_pathlist_hook)
		prev_join_pathlist_hook(root, joinrel, outerrel, innerrel, jointype, extra);
	if (!mc_enable_batched_join)
		return;
	if (jointype != JOIN_INNER && jointype != JOIN_LEFT && jointype != JOIN_SEMI)
		return;
	if (!McFdwPlannedTable(innerrel, &t, &want))
		return;
	if (!without_recheck(root))
		return;
	outer_path = outerrel->cheapest_total_path;
	if (outer_path == NULL || PATH_REQ_OUTER(outer_path) != NULL ||
		!bms_is_empty(innerrel->lateral_relids) ||
		!bms_is_empty(joinrel->lateral_relids))
		return;
	inner_columns(innerrel, &ok);
	if (!ok ||
		has_placeholders((Node *) joinrel->reltarget->exprs, NULL) ||
		rinfos_have_placeholders(extra->restrictlist) ||
		rinfos_have_placeholders(innerrel->baserestrictinfo))
		return;
	key = join_key_clause(root, joinrel, outerrel, innerrel, t, jointype,
						  extra->restrictlist, &keyexpr);
	if (key == NULL)
		return;

	foreach(lc, extra->restrictlist)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		if (ri == key)
			continue;
		if (jointype == JOIN_LEFT && RINFO_IS_PUSHED_DOWN(ri, joinrel->relids))
			filter = lappend(filter, ri);
		else
			match = lappend(match, ri);
	}
	match = list_concat(match, innerrel->baserestrictinfo);

	/* the outer rows, a round trip per batch, a key and the checks per row */
	cost_qual_eval(&match_cost, match, root);
	cost_qual_eval(&filter_cost, filter, root);
	outer_rows = Max(outer_path->rows, 1.0);
	nbatches = batches_for(outer_rows, t->opts.join_batch_size);
	run = outer_path->total_cost - outer_path->startup_cost +
		nbatches * MC_ROUNDTRIP_COST +
		outer_rows * (MC_KEY_COST + cpu_tuple_cost + match_cost.per_tuple +
					  filter_cost.per_tuple) +
		joinrel->rows * joinrel->reltarget->cost.per_tuple;

	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = joinrel;
	cp->path.pathtarget = joinrel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;
	cp->path.parallel_workers = 0;
	cp->path.rows = joinrel->rows;
	/* the first row waits for the first batch */
	cp->path.startup_cost = outer_path->startup_cost + match_cost.startup +
		filter_cost.startup + joinrel->reltarget->cost.startup + MC_ROUNDTRIP_COST +
		(outer_path->total_cost - outer_path->startup_cost) *
		Min(1.0, Min(MC_JOIN_FIRST_BATCH, t->opts.join_batch_size) / outer_rows);
	cp->path.total_cost = outer_path->startup_cost + match_cost.startup +
		filter_cost.startup + joinrel->reltarget->cost.startup + run;
	/* rows come out in the outer side's order */
	cp->path.pathkeys = build_join_pathkeys(root, joinrel, jointype, outer_path->pathkeys);
	/* ExecScan projects: no Result node above */
	cp->flags = CUSTOMPATH_SUPPORT_PROJECTION;
	cp->custom_paths = list_make1(outer_path);
	cp->custom_private = list_make4(key, keyexpr, match, filter);
	cp->custom_private = lappend(cp->custom_private, makeInteger((int) jointype));
	cp->custom_private = lappend(cp->custom_private, makeInteger((int) innerrel->relid));
	cp->custom_private = lappend(cp->custom_private,
								 makeInteger(jointype == JOIN_LEFT ? McOuterJoinRelid(extra) : 0));
	cp->methods = &join_path_methods;
	add_path(joinrel, &cp->path);
}

static List *
clauses_of(List *rinfos)
{
	List	   *r = NIL;
	ListCell   *lc;

	/* pseudoconstant ones too: there is no gating node above a custom join */
	foreach(lc, rinfos)
		r = lappend(r, lfirst_node(RestrictInfo, lc)->clause);
	return r;
}

/*
 * The plan.  The scan tuple (custom_scan_tlist) is the outer plan's
 * columns, then the foreign table's columns the join reads; setrefs.c
 * rewrites the target list, the filters (plan.qual) and custom_exprs to
 * refer to it.  custom_exprs: the key expression, then the match clauses.
 * custom_private: join type, fields to ask for, number of outer columns,
 * the table attribute of each inner column, the table's OID.
 */
static Plan *
plan_join(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
		  List *tlist, List *clauses, List *custom_plans)
{
	Plan	   *outer_plan = linitial(custom_plans);
	List	   *priv = best_path->custom_private;
	RelOptInfo *innerrel = find_base_rel(root, intVal(list_nth(priv, JP_INNER)));
	const McTable *t;
	unsigned	want;
	CustomScan *cscan = makeNode(CustomScan);
	List	   *scan_tlist = NIL;
	List	   *inner_atts = NIL;
	Index		inner = intVal(list_nth(priv, JP_INNER));
	int			ojrelid = intVal(list_nth(priv, JP_OJRELID));
	int			resno = 0;
	int			nouter;
	bool		ok;
	ListCell   *lc;

	if (!McFdwPlannedTable(innerrel, &t, &want))
		elog(ERROR, "batched join of a relation that is not an mcfdw foreign table");
	foreach(lc, outer_plan->targetlist)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry(copyObject(te->expr), ++resno, NULL, false));
	}
	nouter = resno;
	foreach(lc, inner_columns(innerrel, &ok))
	{
		Var		   *v = lfirst_node(Var, lc);

		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) McNulledBy((Node *) copyObject(v),
																 inner, ojrelid),
											 ++resno, NULL, false));
		inner_atts = lappend_int(inner_atts, v->varattno);
	}

	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = clauses_of(list_nth(priv, JP_FILTER));
	cscan->scan.scanrelid = 0;
	cscan->flags = best_path->flags;
	cscan->custom_plans = custom_plans;
	/* the key expression reads only the outer side */
	cscan->custom_exprs = lcons(copyObject(list_nth(priv, JP_KEYEXPR)),
								(List *) McNulledBy((Node *) clauses_of(list_nth(priv, JP_MATCH)),
													inner, ojrelid));
	cscan->custom_private = list_make5(list_nth(priv, JP_JOINTYPE),
									   makeInteger((int) want),
									   makeInteger(nouter),
									   inner_atts,
									   makeInteger((int) t->relid));
	cscan->custom_scan_tlist = scan_tlist;
	cscan->methods = &McJoinScanMethods;
	return &cscan->scan.plan;
}

/* Install the hook; called once from _PG_init. */
void
McFdwJoinInit(void)
{
	prev_join_pathlist_hook = set_join_pathlist_hook;
	set_join_pathlist_hook = mc_join_pathlist;
	RegisterCustomScanMethods(&McJoinScanMethods);
}
