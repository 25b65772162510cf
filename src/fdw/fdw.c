/*
 * fdw.c — the foreign-data wrapper's handler and planner callbacks.
 *
 * Owns: mcfdw_handler, and planning a scan of a foreign table: which
 * conditions become the scan's keys ("key condition": key = x,
 * key = ANY(array), key IN (...), and ORs of these, where x is a constant,
 * a parameter or an expression over other relations' columns — the latter
 * only in a parameterized path, evaluated per outer row), which fields the
 * query reads (so the scan asks only for those), the paths and their costs.
 * Every other condition stays local.  Must not: touch connections or
 * execute anything (fdw_scan.c, fdw_modify.c do).
 *
 * Costs: a round trip dominates a memcached read, so a scan costs one
 * round trip (MC_ROUNDTRIP_COST) plus a small cost per key; a parameterized
 * path costs that per outer row.  A scan with no key condition runs only
 * with the option allow_full_scan on the table and, as the server owner's
 * consent, on its server (fdw_fullscan.c): it lists every
 * item of the server (MC_DUMP_LINE_COST each) and fetches the table's in
 * batches (MC_KEY_COST each, a round trip per batch); it is estimated from
 * the server's item count, a fraction MC_PREFIX_FRACTION of it when a key
 * prefix filters the items.  Without the option such a path carries
 * disable_cost and GetForeignPlan raises an error with a hint if it is
 * chosen anyway (42501 when only the server's is missing, and then no
 * item count is asked); with it, the path carries disable_cost too whenever a
 * parameterized path exists, so a full scan is never chosen over a keyed
 * one.  fdw_join.c offers a batched join next to the parameterized
 * paths, and reads what this file learned through McFdwPlannedTable and
 * McFdwKeyCondition.
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/selfuncs.h"

#include "fdw.h"

PG_FUNCTION_INFO_V1(mcfdw_handler);

/* Rows assumed for a scan without a key condition, item count unknown. */
#define MC_NOKEY_ROWS		1000.0
/* One item's line of a full scan's key dump. */
#define MC_DUMP_LINE_COST	0.01
/* Keys per batch of a full scan (fdw_fullscan.c's MC_FULLSCAN_BATCH). */
#define MC_FULLSCAN_KEYS	1000.0
/*
 * The share of a server's items a key prefix keeps: a guess (the prefix is
 * one namespace among others sharing the cache), as DEFAULT_EQ_SEL is.
 */
#define MC_PREFIX_FRACTION	0.1

/* What GetForeignRelSize learns, for GetForeignPaths and GetForeignPlan. */
typedef struct McRelInfo
{
	McTable		t;
	unsigned	want;			/* MC_F_* the query reads */
	double		nkeys;			/* keys of the best restriction key condition; -1: none */
	double		items;			/* full scan: the items it lists */
	double		fetched;		/* ... and the keys of the table among them */
	bool		full_refused;	/* the table allows full scans, the server not */
} McRelInfo;

/* The table's key column, seen through binary-compatible casts. */
static bool
is_key_var(Node *node, Index relid, AttrNumber keyatt)
{
	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node && IsA(node, Var) &&
		((Var *) node)->varno == (int) relid &&
		((Var *) node)->varattno == keyatt &&
		((Var *) node)->varlevelsup == 0;
}

/*
 * Can the other side of a key condition be evaluated before the scan: no
 * column of this table, nothing volatile, no subplan (an uncorrelated
 * ARRAY(SELECT ...) arrives here as the parameter of an initplan).
 */
static bool
is_key_source(PlannerInfo *root, Node *node, Index relid)
{
	return !bms_is_member(relid, pull_varnos(root, node)) &&
		!contain_volatile_functions(node) &&
		!contain_subplans(node);
}

/* Text equality whose collation compares bytes. */
static bool
is_byte_equality(Oid opno, Oid collid)
{
	return opno == TextEqualOperator &&
		(!OidIsValid(collid) || get_collation_isdeterministic(collid));
}

/*
 * If clause is a key condition, append its key expressions and their kinds
 * (MC_KEYEXPR_*) and return the number of keys it is estimated to give;
 * else -1 (and the lists are left as they were).
 */
static double
key_condition(PlannerInfo *root, Node *clause, Index relid, AttrNumber keyatt,
			  List **exprs, List **kinds)
{
	if (IsA(clause, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) clause;
		Node	   *l,
				   *r;

		if (list_length(op->args) != 2 || !is_byte_equality(op->opno, op->inputcollid))
			return -1;
		l = linitial(op->args);
		r = lsecond(op->args);
		if (is_key_var(r, relid, keyatt))
		{
			Node	   *tmp = l;

			l = r;
			r = tmp;
		}
		if (!is_key_var(l, relid, keyatt) || !is_key_source(root, r, relid))
			return -1;
		*exprs = lappend(*exprs, r);
		*kinds = lappend_int(*kinds, MC_KEYEXPR_SCALAR);
		return 1;
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *sa = (ScalarArrayOpExpr *) clause;
		Node	   *arr = lsecond(sa->args);

		if (!sa->useOr || !is_byte_equality(sa->opno, sa->inputcollid) ||
			!is_key_var(linitial(sa->args), relid, keyatt) ||
			!is_key_source(root, arr, relid))
			return -1;
		*exprs = lappend(*exprs, arr);
		*kinds = lappend_int(*kinds, MC_KEYEXPR_ARRAY);
		return Max(McEstimateArrayLength(root, arr), 1);
	}
	if (is_orclause(clause))
	{
		List	   *e = NIL;
		List	   *k = NIL;
		double		total = 0;
		ListCell   *lc;

		foreach(lc, ((BoolExpr *) clause)->args)
		{
			double		n = key_condition(root, lfirst(lc), relid, keyatt, &e, &k);

			if (n < 0)
				return -1;
			total += n;
		}
		*exprs = list_concat(*exprs, e);
		*kinds = list_concat(*kinds, k);
		return total;
	}
	return -1;
}

/*
 * The best key condition among clauses (RestrictInfos): the one giving
 * fewest keys.  Returns it (NULL if none) with its expressions and kinds.
 */
static RestrictInfo *
best_key_condition(PlannerInfo *root, List *clauses, Index relid,
				   AttrNumber keyatt, List **exprs, List **kinds, double *nkeys)
{
	RestrictInfo *best = NULL;
	ListCell   *lc;

	*exprs = *kinds = NIL;
	*nkeys = -1;
	foreach(lc, clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		List	   *e = NIL;
		List	   *k = NIL;
		double		n;

		if (ri->pseudoconstant)
			continue;
		n = key_condition(root, (Node *) ri->clause, relid, keyatt, &e, &k);
		if (n >= 0 && (best == NULL || n < *nkeys))
		{
			best = ri;
			*exprs = e;
			*kinds = k;
			*nkeys = n;
		}
	}
	return best;
}

/* The fields the query reads: from the target list and the conditions. */
static unsigned
wanted_fields(RelOptInfo *baserel, const McTable *t)
{
	Bitmapset  *attrs = NULL;
	ListCell   *lc;
	unsigned	want = 0;
	bool		wholerow;

	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &attrs);
	foreach(lc, baserel->baserestrictinfo)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause,
					   baserel->relid, &attrs);
	wholerow = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
	for (int f = MC_FIELD_VALUE; f < MC_NFIELDS; f++)
		if (t->attnum[f] != 0 &&
			(wholerow || bms_is_member(t->attnum[f] - FirstLowInvalidHeapAttributeNumber, attrs)))
			want |= McFieldWant((McField) f);
	return want;
}

/*
 * May the query's role read the table (any of its columns)?  The planner
 * keeps the role to check as (a view owner's, or none for the current
 * user) in the relation itself.
 */
static bool
may_select(RelOptInfo *baserel, Oid relid)
{
	Oid			user = OidIsValid(baserel->userid) ? baserel->userid : GetUserId();

	return pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, user, ACL_SELECT, ACLMASK_ANY) == ACLCHECK_OK;
}

static void
mcGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	McRelInfo  *info = palloc0(sizeof(McRelInfo));
	RangeTblEntry *rte = planner_rt_fetch(baserel->relid, root);
	Relation	rel = table_open(rte->relid, NoLock);
	List	   *exprs,
			   *kinds;

	McTableLoad(rel, &info->t);
	table_close(rel, NoLock);
	info->want = wanted_fields(baserel, &info->t);
	best_key_condition(root, baserel->baserestrictinfo, baserel->relid,
					   info->t.attnum[MC_FIELD_KEY], &exprs, &kinds, &info->nkeys);
	baserel->fdw_private = info;
	/* each key gives at most one row; other conditions filter those */
	if (info->nkeys >= 0)
		baserel->rows = clamp_row_est(info->nkeys);
	else
	{
		/*
		 * asked of memcached only when a full scan may run (the table and
		 * its server allow it), and by a role that may read the table: the
		 * executor refuses the others later, and until then they must not
		 * make this backend log in there
		 */
		bool		full = info->t.opts.allow_full_scan && may_select(baserel, rte->relid);

		info->full_refused = full &&
			!McServerGet(info->t.serverid)->cfg.allow_full_scan;
		info->items = full && !info->full_refused ?
			McFullScanItems(info->t.serverid) : -1;
		if (info->items < 0)
			info->items = info->fetched = MC_NOKEY_ROWS;
		else
			info->fetched = info->items *
				(info->t.opts.key_prefix_len > 0 ||
				 McServerGet(info->t.serverid)->cfg.key_prefix_len > 0 ?
				 MC_PREFIX_FRACTION : 1.0);
		baserel->rows = clamp_row_est(info->fetched *
									  clauselist_selectivity(root, baserel->baserestrictinfo,
															 0, JOIN_INNER, NULL));
	}
}

/* Startup and total cost of one batch of nkeys keys giving rows rows. */
static void
batch_cost(double nkeys, double rows, Cost *startup, Cost *total)
{
	*startup = MC_ROUNDTRIP_COST;
	*total = MC_ROUNDTRIP_COST + nkeys * MC_KEY_COST + rows * cpu_tuple_cost;
}

/* Is an equivalence-class member this table's key column? */
static bool
ec_member_is_key(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
				 EquivalenceMember *em, void *arg)
{
	return is_key_var((Node *) em->em_expr, rel->relid, *(AttrNumber *) arg);
}

/* Is relids one of the sets in list?  (A Bitmapset is not a Node in 15.) */
static bool
relids_listed(List *list, Relids relids)
{
	ListCell   *lc;

	foreach(lc, list)
	{
		if (bms_equal((Relids) lfirst(lc), relids))
			return true;
	}
	return false;
}

/*
 * A path per set of outer relations a join key condition needs: the key
 * comes from the outer row, one batch per outer row.
 */
static int
add_parameterized_paths(PlannerInfo *root, RelOptInfo *baserel, McRelInfo *info)
{
	AttrNumber	keyatt = info->t.attnum[MC_FIELD_KEY];
	List	   *clauses = NIL;
	List	   *done = NIL;
	ListCell   *lc;

	if (baserel->has_eclass_joins)
		clauses = generate_implied_equalities_for_column(root, baserel,
														 ec_member_is_key, &keyatt,
														 baserel->lateral_referencers);
	clauses = list_concat(clauses, list_copy(baserel->joininfo));
	foreach(lc, clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		List	   *e = NIL;
		List	   *k = NIL;
		double		n;
		Relids		outer;
		ParamPathInfo *ppi;
		Cost		startup,
					total;

		if (!join_clause_is_movable_to(ri, baserel))
			continue;
		n = key_condition(root, (Node *) ri->clause, baserel->relid, keyatt, &e, &k);
		if (n < 0)
			continue;
		outer = bms_union(ri->clause_relids, baserel->lateral_relids);
		outer = bms_del_member(outer, baserel->relid);
		if (bms_is_empty(outer) || relids_listed(done, outer))
			continue;
		done = lappend(done, outer);
		ppi = get_baserel_parampathinfo(root, baserel, outer);
		batch_cost(n, n, &startup, &total);
		add_path(baserel, (Path *)
				 McForeignScanPath(root, baserel, clamp_row_est(n),
								   startup, total, ppi->ppi_req_outer));
	}
	return list_length(done);
}

static void
mcGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	McRelInfo  *info = baserel->fdw_private;
	Cost		startup,
				total;
	int			nparam = add_parameterized_paths(root, baserel, info);

	if (info->nkeys >= 0)
		batch_cost(info->nkeys, baserel->rows, &startup, &total);
	else if (info->t.opts.allow_full_scan && !info->full_refused)
	{
		/* the whole dump comes before the first fetch */
		startup = MC_ROUNDTRIP_COST + info->items * MC_DUMP_LINE_COST;
		total = startup + (info->fetched / MC_FULLSCAN_KEYS + 1) * MC_ROUNDTRIP_COST +
			info->fetched * (MC_KEY_COST + cpu_tuple_cost);
		if (nparam > 0)
		{
			startup += disable_cost;
			total += disable_cost;
		}
	}
	else
	{
		/* no key condition: possible only as the failing last resort */
		batch_cost(MC_NOKEY_ROWS, MC_NOKEY_ROWS, &startup, &total);
		startup += disable_cost;
		total += disable_cost;
	}
	add_path(baserel, (Path *)
			 McForeignScanPath(root, baserel, baserel->rows,
							   startup, total, baserel->lateral_relids));
}

/*
 * The plan: the best key condition among the path's clauses (a join
 * clause's outer columns become nestloop parameters) goes to the scan as
 * expressions evaluated when it starts; every other clause stays local.
 * fdw_private: the fields to ask for, and the kind of each expression.
 */
static ForeignScan *
mcGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				 ForeignPath *best_path, List *tlist, List *scan_clauses,
				 Plan *outer_plan)
{
	McRelInfo  *info = baserel->fdw_private;
	RestrictInfo *key;
	List	   *exprs,
			   *kinds;
	List	   *local = NIL;
	double		nkeys;
	ListCell   *lc;

	key = best_key_condition(root, scan_clauses, baserel->relid,
							 info->t.attnum[MC_FIELD_KEY], &exprs, &kinds, &nkeys);
	if (key == NULL && !info->t.opts.allow_full_scan)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_UNABLE_TO_CREATE_EXECUTION),
				 errmsg("a scan of foreign table \"%s\" needs a condition on its key",
						get_rel_name(foreigntableid)),
				 errdetail("memcached cannot list its keys cheaply, so mcfdw reads only the keys a query names."),
				 errhint("Add a condition such as key = 'k', key IN ('a', 'b') or key = ANY($1), or join on the key column.")));
	if (key == NULL && info->full_refused)
		McServerCheckFullScan(McServerGet(info->t.serverid), foreigntableid);
	foreach(lc, scan_clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		if (ri != key && !ri->pseudoconstant)
			local = lappend(local, ri->clause);
	}
	/*
	 * The key condition is rechecked in an EvalPlanQual recheck: there the
	 * executor hands the scan the row it returned before (a copy, as no row
	 * of memcached is locked), which the outer row's new key may not match.
	 */
	return make_foreignscan(tlist, local, baserel->relid, exprs,
							key == NULL ?
							list_make3(makeInteger((int) info->want), kinds, makeInteger(1)) :
							list_make2(makeInteger((int) info->want), kinds),
							NIL, key == NULL ? NIL : list_make1(key->clause),
							outer_plan);
}

/*
 * For fdw_join.c: is rel a foreign table of this wrapper as planned here,
 * and if so its table and the fields the query reads of it.
 */
bool
McFdwPlannedTable(RelOptInfo *rel, const McTable **t, unsigned *want)
{
	McRelInfo  *info;

	if (rel->reloptkind != RELOPT_BASEREL || rel->rtekind != RTE_RELATION ||
		rel->fdwroutine == NULL ||
		rel->fdwroutine->GetForeignRelSize != mcGetForeignRelSize ||
		rel->fdw_private == NULL)
		return false;
	info = rel->fdw_private;
	*t = &info->t;
	*want = info->want;
	return true;
}

/* For fdw_join.c: a join's key condition is recognized as a scan's. */
double
McFdwKeyCondition(PlannerInfo *root, Node *clause, Index relid, AttrNumber keyatt,
			   List **exprs, List **kinds)
{
	return key_condition(root, clause, relid, keyatt, exprs, kinds);
}

Datum
mcfdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r = makeNode(FdwRoutine);

	r->GetForeignRelSize = mcGetForeignRelSize;
	r->GetForeignPaths = mcGetForeignPaths;
	r->GetForeignPlan = mcGetForeignPlan;
	r->BeginForeignScan = McBeginForeignScan;
	r->IterateForeignScan = McIterateForeignScan;
	r->ReScanForeignScan = McReScanForeignScan;
	r->EndForeignScan = McEndForeignScan;
	r->ExplainForeignScan = McExplainForeignScan;
	r->AnalyzeForeignTable = McAnalyzeForeignTable;

	r->AddForeignUpdateTargets = McAddForeignUpdateTargets;
	r->PlanForeignModify = McPlanForeignModify;
	r->BeginForeignModify = McBeginForeignModify;
	r->ExecForeignInsert = McExecForeignInsert;
	r->ExecForeignBatchInsert = McExecForeignBatchInsert;
	r->GetForeignModifyBatchSize = McGetForeignModifyBatchSize;
	r->ExecForeignUpdate = McExecForeignUpdate;
	r->ExecForeignDelete = McExecForeignDelete;
	r->EndForeignModify = McEndForeignModify;
	r->BeginForeignInsert = McBeginForeignInsert;
	r->EndForeignInsert = McEndForeignInsert;
	r->ExplainForeignModify = McExplainForeignModify;
	r->IsForeignRelUpdatable = McIsForeignRelUpdatable;
	PG_RETURN_POINTER(r);
}
