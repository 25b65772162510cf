/*
 * fdw_scan.c — executing a scan of a foreign table, and its EXPLAIN.
 *
 * Owns: evaluating the key expressions the plan pushed down (when the scan
 * starts, and again on a rescan whose parameters changed: generic plans'
 * parameters and a join's outer values arrive this way), one pipelined
 * multi-get for all the keys (multi_get.c's McMultiGetRun, asking only for
 * the fields the query reads), and turning each hit into a row of the
 * table, kept in a tuplestore (which spills past work_mem) until the
 * executor takes it.  Misses give no row.  A scan without a key
 * condition takes its keys batch by batch from fdw_fullscan.c instead, and
 * keeps one batch's rows at a time.  Must not: plan, or touch connections
 * other than through McMultiGetRun.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/tuplestore.h"

#include "fdw.h"
#include "keys.h"
#include "multi_get.h"

typedef struct McScan
{
	McTable		t;
	unsigned	want;
	McServer   *srv;			/* during fetch: compressed values inflate */
	List	   *kinds;			/* MC_KEYEXPR_* per key expression */
	List	   *exprstates;
	McValueIO	vio;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	Tuplestorestate *ts;
	TupleTableSlot *mslot;		/* the tuplestore's rows come out here */
	bool		fetched;
	McFullScan *full;			/* a full scan: its keys */
	bool		more;			/* ... and a batch may be left */
	MemoryContext batch_cxt;	/* the keys of one batch */
	MemoryContext row_cxt;		/* one row's conversions */
	Datum	   *keys;			/* prefixed, as the server sees them */
	int			nkeys;
	int			ndistinct;
	int			nhits;
} McScan;

void
McBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *fs = (ForeignScan *) node->ss.ps.plan;
	Relation	rel = node->ss.ss_currentRelation;
	McScan	   *s = palloc0(sizeof(McScan));

	node->fdw_state = s;
	McTableLoad(rel, &s->t);
	s->want = (unsigned) intVal(linitial(fs->fdw_private));
	s->kinds = lsecond(fs->fdw_private);
	s->exprstates = ExecInitExprList(fs->fdw_exprs, (PlanState *) node);
	if (list_length(fs->fdw_private) > MC_PRIVATE_FULLSCAN)
		s->full = McFullScanBegin(&s->t);
	s->desc = RelationGetDescr(rel);
	if (s->t.attnum[MC_FIELD_VALUE] != 0)
	{
		Form_pg_attribute att = TupleDescAttr(s->desc, s->t.attnum[MC_FIELD_VALUE] - 1);

		McValueIOInit(&s->vio, att->atttypid, att->atttypmod);
	}
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	s->values = palloc(sizeof(Datum) * s->desc->natts);
	s->nulls = palloc(sizeof(bool) * s->desc->natts);
	s->ts = tuplestore_begin_heap(false, false, work_mem);
	s->mslot = MakeSingleTupleTableSlot(s->desc, &TTSOpsMinimalTuple);
	s->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw scan keys",
										 ALLOCSET_DEFAULT_SIZES);
	s->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw scan row",
									   ALLOCSET_DEFAULT_SIZES);
}

/* Add a key (as given) to the batch, with the table's prefix. */
static void
add_key(McScan *s, Datum key, int *cap)
{
	if (s->nkeys == *cap)
	{
		*cap *= 2;
		s->keys = repalloc(s->keys, sizeof(Datum) * *cap);
	}
	s->keys[s->nkeys++] = McKeyWithPrefix(&s->t, key);
}

/*
 * Evaluate the key expressions into s->keys (in batch_cxt): NULLs are no
 * keys, an array gives its elements.
 */
static void
eval_keys(McScan *s, ExprContext *econtext)
{
	ListCell   *le,
			   *lk;
	int			cap = 16;
	MemoryContext old;

	MemoryContextReset(s->batch_cxt);
	old = MemoryContextSwitchTo(s->batch_cxt);
	s->keys = palloc(sizeof(Datum) * cap);
	s->nkeys = 0;
	forboth(le, s->exprstates, lk, s->kinds)
	{
		bool		isnull;
		Datum		d = ExecEvalExpr(lfirst(le), econtext, &isnull);

		if (isnull)
			continue;
		if (lfirst_int(lk) == MC_KEYEXPR_SCALAR)
			add_key(s, d, &cap);
		else
		{
			ArrayType  *arr = DatumGetArrayTypeP(d);
			Datum	   *elems;
			bool	   *nulls;
			int			n;

			deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_INT,
							  &elems, &nulls, &n);
			for (int i = 0; i < n; i++)
				if (!nulls[i])
					add_key(s, elems[i], &cap);
		}
	}
	MemoryContextSwitchTo(old);
}

/* One hit: the row of the table, into the tuplestore. */
static void
scan_hit(void *arg, Datum key, char *base, const McReply *r)
{
	McScan	   *s = arg;
	const McTable *t = &s->t;
	MemoryContext old = MemoryContextSwitchTo(s->row_cxt);
	Datum		given = McKeyWithoutPrefix(t, key);
	AttrNumber	a;

	memset(s->nulls, true, sizeof(bool) * s->desc->natts);
	s->values[t->attnum[MC_FIELD_KEY] - 1] = given;
	s->nulls[t->attnum[MC_FIELD_KEY] - 1] = false;
	if ((a = t->attnum[MC_FIELD_VALUE]) != 0 && r->type == MC_REPLY_VA)
	{
		text	   *k = DatumGetTextPP(given);
		char	   *data = base + r->value_off;
		size_t		len = r->value_len;

		if ((r->present & MC_F_FLAGS) && McValueCompressed(&s->srv->cfg, r->client_flags))
		{
			McZStatus	st;
			struct varlena *v = McValueDecode(s->srv, data, len, true,
											  r->client_flags, &st);

			if (v == NULL)
				McValueRaise(s->srv, st, VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
			data = VARDATA(v);
			len = VARSIZE(v) - VARHDRSZ;
		}
		s->values[a - 1] = McValueRead(&s->vio, data, len,
									   VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
		s->nulls[a - 1] = false;
	}
	if ((a = t->attnum[MC_FIELD_FLAGS]) != 0 && (r->present & MC_F_FLAGS))
	{
		s->values[a - 1] = t->atttype[MC_FIELD_FLAGS] == INT8OID ?
			Int64GetDatum((int64) r->client_flags) : Int32GetDatum((int32) r->client_flags);
		s->nulls[a - 1] = false;
	}
	if ((a = t->attnum[MC_FIELD_CAS]) != 0 && (r->present & MC_F_CAS))
	{
		s->values[a - 1] = Int64GetDatum((int64) r->cas);
		s->nulls[a - 1] = false;
	}
	/* -1 is "never expires": NULL, as a NULL ttl writes no expiry */
	if ((a = t->attnum[MC_FIELD_TTL]) != 0 && (r->present & MC_F_TTL) && r->ttl >= 0)
	{
		s->values[a - 1] = t->atttype[MC_FIELD_TTL] == INT8OID ?
			Int64GetDatum(r->ttl) : Int32GetDatum((int32) Min(r->ttl, PG_INT32_MAX));
		s->nulls[a - 1] = false;
	}
	tuplestore_putvalues(s->ts, s->desc, s->values, s->nulls);
	s->nhits++;
	MemoryContextSwitchTo(old);
	MemoryContextReset(s->row_cxt);
}

static void
fetch(ForeignScanState *node)
{
	McScan	   *s = node->fdw_state;

	if (s->full)
	{
		unsigned	want = s->want;

		s->srv = McServerGet(s->t.serverid);
		if (s->srv->cfg.compression && (want & MC_F_VALUE))
			want |= MC_F_FLAGS;
		tuplestore_clear(s->ts);
		s->more = McFullScanNext(s->full, s->srv, want, scan_hit, s);
		s->fetched = true;
		return;
	}
	eval_keys(s, node->ss.ps.ps_ExprContext);
	s->nhits = 0;
	s->ndistinct = 0;
	if (s->nkeys > 0)
	{
		unsigned	want = s->want;

		s->srv = McServerGet(s->t.serverid);
		/* a compressed value is known by its flags: ask for them */
		if (s->srv->cfg.compression && (want & MC_F_VALUE))
			want |= MC_F_FLAGS;
		s->ndistinct = McMultiGetRun(s->srv, s->keys, NULL, s->nkeys, want,
									 scan_hit, s);
	}
	s->fetched = true;
}

TupleTableSlot *
McIterateForeignScan(ForeignScanState *node)
{
	McScan	   *s = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	if (!s->fetched)
		fetch(node);
	while (!tuplestore_gettupleslot(s->ts, true, false, s->mslot))
	{
		if (!s->more)
			return ExecClearTuple(slot);
		fetch(node);			/* a full scan's next batch */
	}
	ExecCopySlot(slot, s->mslot);
	return slot;
}

void
McReScanForeignScan(ForeignScanState *node)
{
	McScan	   *s = node->fdw_state;

	if (s->full)
	{
		McFullScanRewind(s->full);
		s->fetched = false;
		tuplestore_clear(s->ts);
		return;
	}
	/* the same keys give the same rows: read them again unless a parameter changed */
	if (node->ss.ps.chgParam != NULL || !s->fetched)
	{
		s->fetched = false;
		tuplestore_clear(s->ts);
	}
	else
		tuplestore_rescan(s->ts);
}

void
McEndForeignScan(ForeignScanState *node)
{
	McScan	   *s = node->fdw_state;

	if (s && s->full)
		McFullScanEnd(s->full);
	if (s && s->ts)
	{
		tuplestore_end(s->ts);
		ExecDropSingleTupleTableSlot(s->mslot);
	}
}

/* The meta flags the scan asks for, as EXPLAIN shows them. */
static const char *
fields_text(unsigned want)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (want & MC_F_VALUE)
		appendStringInfoString(&buf, " v");
	if (want & MC_F_FLAGS)
		appendStringInfoString(&buf, " f");
	if (want & MC_F_CAS)
		appendStringInfoString(&buf, " c");
	if (want & MC_F_TTL)
		appendStringInfoString(&buf, " t");
	return buf.len ? buf.data + 1 : "none (existence only)";
}

/* How many distinct keys, and how many instances they route to. */
static void
count_routes(McServer *srv, const Datum *keys, int n, int *ndistinct, int *ninstances)
{
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive = McServerAliveMap(srv, alivebuf);
	bool		used[MC_MAX_ENDPOINTS] = {0};
	HTAB	   *seen;
	HASHCTL		ctl;

	ctl.keysize = MC_KEY_MAX + MC_MAX_KEY_PREFIX;
	ctl.entrysize = ctl.keysize;
	ctl.hcxt = CurrentMemoryContext;
	seen = hash_create("mcfdw explain keys", Max(n, 16), &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	*ndistinct = *ninstances = 0;
	for (int i = 0; i < n; i++)
	{
		text	   *k = DatumGetTextPP(keys[i]);
		char		rawbuf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
		char		hkey[MC_KEY_MAX + MC_MAX_KEY_PREFIX] = {0};
		const char *raw;
		size_t		rawlen;
		bool		b64;
		bool		found;
		int			inst;

		McKeyRoute(srv, VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k), rawbuf, &raw, &rawlen, &b64);
		memcpy(hkey, raw, Min(rawlen, sizeof(hkey)));
		hash_search(seen, hkey, HASH_ENTER, &found);
		if (found)
			continue;
		(*ndistinct)++;
		inst = McServerPickWith(srv, raw, rawlen, alive);
		if (!used[inst])
		{
			used[inst] = true;
			(*ninstances)++;
		}
	}
	hash_destroy(seen);
}

/* The pushed-down key condition: key = x, key = ANY (a), ORed. */
static const char *
key_condition_text(ForeignScanState *node, ExplainState *es)
{
	McScan	   *s = node->fdw_state;
	ForeignScan *fs = (ForeignScan *) node->ss.ps.plan;
	List	   *cxt = set_deparse_context_plan(es->deparse_cxt, (Plan *) fs, NIL);
	const char *keycol = get_attname(s->t.relid, s->t.attnum[MC_FIELD_KEY], false);
	StringInfoData buf;
	ListCell   *le,
			   *lk;

	initStringInfo(&buf);
	forboth(le, fs->fdw_exprs, lk, s->kinds)
	{
		char	   *e = deparse_expression(lfirst(le), cxt, list_length(es->rtable) > 1, false);

		appendStringInfo(&buf, lfirst_int(lk) == MC_KEYEXPR_SCALAR ? "%s%s = %s" : "%s%s = ANY (%s)",
						 buf.len ? " OR " : "", quote_identifier(keycol), e);
	}
	return buf.data;
}

/* Does an expression refer to a parameter (known only at execution)? */
static bool
has_params(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return true;
	return expression_tree_walker(node, has_params, context);
}

/*
 * EXPLAIN (VERBOSE): the keys and the instances they route to when they
 * are known (constants, or after EXPLAIN ANALYZE ran the scan), else how
 * many key expressions the scan evaluates when it starts; and the fields
 * asked for.  Nothing is sent to memcached.
 */
void
McExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	McScan	   *s = node->fdw_state;
	ForeignScan *fs = (ForeignScan *) node->ss.ps.plan;

	if (s->full)
		McFullScanExplain(s->full, es);
	if (!es->verbose)
		return;
	if (s->full)
	{
		ExplainPropertyText("Memcached Fields", fields_text(s->want), es);
		return;
	}
	ExplainPropertyText("Memcached Key Condition", key_condition_text(node, es), es);
	if (!s->fetched && !has_params((Node *) fs->fdw_exprs, NULL) &&
		!contain_var_clause((Node *) fs->fdw_exprs) &&
		!contain_mutable_functions((Node *) fs->fdw_exprs))
	{
		/* constant keys (or a custom plan's parameters, already substituted) */
		if (s->batch_cxt == NULL)
			s->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw scan keys",
												 ALLOCSET_DEFAULT_SIZES);
		eval_keys(s, node->ss.ps.ps_ExprContext);
		s->fetched = true;		/* the keys are known; nothing was fetched */
	}
	if (s->fetched)
	{
		int			ndistinct,
					ninstances;

		count_routes(McServerGet(s->t.serverid), s->keys, s->nkeys, &ndistinct, &ninstances);
		ExplainPropertyInteger("Memcached Keys", NULL, ndistinct, es);
		ExplainPropertyInteger("Memcached Instances", NULL, ninstances, es);
	}
	ExplainPropertyText("Memcached Fields", fields_text(s->want), es);
}
