/*
 * fdw_join_exec.c — executing the batched join that fdw_join.c plans, and
 * its EXPLAIN.
 *
 * Owns: gathering outer rows in batches (growing up to join_batch_size
 * of them while a batch's memory stays under work_mem, each row copied
 * into the batch's memory), evaluating the key expression per outer
 * row, one pipelined multi-get per batch for the batch's distinct keys
 * (run.c's McRunGets, asking only for the fields the query
 * reads), and emitting the joined rows in the outer rows' order: for each
 * outer row its item, if any, when the match clauses accept the pair; else
 * nothing (INNER, SEMI) or the row extended with NULLs (LEFT).  Must not:
 * plan, or touch connections other than through McRunGets.
 *
 * Memory: a batch's outer rows, keys and items live in batch_cxt, which is
 * reset only when the next batch is gathered, inside a later call of the
 * node, after the parent is done with the last row returned (a returned
 * slot's values point there).  The outer plan runs in the context the node
 * is called in, never in batch_cxt, since executor nodes keep state they
 * allocate on their first call.
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/explain.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"

#include "fdw.h"
#include "run.h"

typedef struct McJoinState
{
	CustomScanState css;
	JoinType	jointype;
	McTable		t;
	unsigned	want;
	int			nouter;			/* scan tuple: the outer plan's columns ... */
	int			ninner;			/* ... then these of the foreign table */
	AttrNumber *inner_att;		/* the table attribute of each inner column */
	int16	   *inner_len;
	bool	   *inner_byval;
	int			batch_size;		/* join_batch_size: the most rows a batch has */
	int			cur_batch;		/* this batch's (see next_batch_size) */
	McColumnIO	vio;
	TupleDesc	tabdesc;		/* the foreign table's */
	Datum	   *rowvalues;		/* one item as a row of the table */
	bool	   *rownulls;
	ExprState  *keyexpr;
	ExprState  *match;
	ExprContext *work_econtext; /* key expression and match clauses */
	TupleTableSlot *keyslot;	/* an outer row, as a scan tuple, for the key */
	TupleTableSlot *outer_mslot;	/* a batch's outer row is read back here */
	McServer   *srv;			/* during the multi-get: values inflate */
	MemoryContext batch_cxt;
	MemoryContext row_cxt;		/* one item's conversions */
	/* the batch */
	MinimalTuple *rows;			/* outer rows */
	int		   *row_key;		/* index of each row's key; -1: NULL key */
	int			nrows;
	int			next;			/* next row to emit */
	bool		outer_done;
	Datum	   *keys;			/* distinct keys, with the table's prefix */
	int			nkeys;
	int		   *slots;			/* open addressing: key bytes -> index; -1 empty */
	uint32		mask;
	bool	   *hit;			/* per key: the item exists */
	Datum	   *ivalues;		/* per key: its inner columns */
	bool	   *inulls;
} McJoinState;

static Node *join_create_state(CustomScan *cscan);
static void join_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *join_exec(CustomScanState *node);
static void join_end(CustomScanState *node);
static void join_rescan(CustomScanState *node);
static void join_explain(CustomScanState *node, List *ancestors, ExplainState *es);

const CustomScanMethods McJoinScanMethods = {
	.CustomName = "MemcachedBatchedJoin",
	.CreateCustomScanState = join_create_state,
};

static const CustomExecMethods join_exec_methods = {
	.CustomName = "MemcachedBatchedJoin",
	.BeginCustomScan = join_begin,
	.ExecCustomScan = join_exec,
	.EndCustomScan = join_end,
	.ReScanCustomScan = join_rescan,
	.ExplainCustomScan = join_explain,
};

static Node *
join_create_state(CustomScan *cscan)
{
	McJoinState *s = palloc0(sizeof(McJoinState));

	NodeSetTag(s, T_CustomScanState);
	s->css.flags = cscan->flags;
	s->css.methods = &join_exec_methods;
	return (Node *) s;
}

static void
join_begin(CustomScanState *node, EState *estate, int eflags)
{
	McJoinState *s = (McJoinState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *priv = cscan->custom_private;
	Relation	rel;
	PlanState  *outer;
	TupleDesc	scandesc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	ListCell   *lc;
	int			i;
	uint32		cap;

	s->jointype = (JoinType) intVal(linitial(priv));
	s->want = (unsigned) intVal(lsecond(priv));
	s->nouter = intVal(lthird(priv));
	s->ninner = list_length((List *) lfourth(priv));
	rel = table_open((Oid) intVal(list_nth(priv, 4)), NoLock);
	McTableLoad(rel, &s->t);
	s->tabdesc = CreateTupleDescCopy(RelationGetDescr(rel));
	table_close(rel, NoLock);
	s->batch_size = s->t.opts.join_batch_size;
	s->inner_att = palloc(sizeof(AttrNumber) * Max(s->ninner, 1));
	s->inner_len = palloc(sizeof(int16) * Max(s->ninner, 1));
	s->inner_byval = palloc(sizeof(bool) * Max(s->ninner, 1));
	i = 0;
	foreach(lc, (List *) lfourth(priv))
	{
		Form_pg_attribute att = TupleDescAttr(s->tabdesc, lfirst_int(lc) - 1);

		s->inner_att[i] = (AttrNumber) lfirst_int(lc);
		s->inner_len[i] = att->attlen;
		s->inner_byval[i] = att->attbyval;
		i++;
	}
	if (s->t.attnum[MC_FIELD_VALUE] != 0)
	{
		Form_pg_attribute att = TupleDescAttr(s->tabdesc, s->t.attnum[MC_FIELD_VALUE] - 1);

		McTableColumnIOInit(&s->vio, att->atttypid, att->atttypmod);
	}

	outer = ExecInitNode(linitial(cscan->custom_plans), estate, eflags);
	node->custom_ps = list_make1(outer);
	s->keyexpr = ExecInitExpr(linitial(cscan->custom_exprs), &node->ss.ps);
	s->match = ExecInitQual(list_copy_tail(cscan->custom_exprs, 1), &node->ss.ps);
	Assert(scandesc->natts == s->nouter + s->ninner);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	s->work_econtext = CreateExprContext(estate);
	s->keyslot = ExecInitExtraTupleSlot(estate, scandesc, &TTSOpsVirtual);
	s->outer_mslot = ExecInitExtraTupleSlot(estate, ExecGetResultType(outer),
											&TTSOpsMinimalTuple);
	Assert(ExecGetResultType(outer)->natts == s->nouter);
	s->rowvalues = palloc(sizeof(Datum) * s->tabdesc->natts);
	s->rownulls = palloc(sizeof(bool) * s->tabdesc->natts);
	s->rows = palloc(sizeof(MinimalTuple) * s->batch_size);
	s->row_key = palloc(sizeof(int) * s->batch_size);
	s->keys = palloc(sizeof(Datum) * s->batch_size);
	s->hit = palloc(sizeof(bool) * s->batch_size);
	s->ivalues = palloc(sizeof(Datum) * Max(s->ninner, 1) * s->batch_size);
	s->inulls = palloc(sizeof(bool) * Max(s->ninner, 1) * s->batch_size);
	for (cap = 16; cap < (uint32) s->batch_size * 2; cap <<= 1)
		;
	s->slots = palloc(sizeof(int) * cap);
	s->cur_batch = Min(MC_JOIN_FIRST_BATCH, s->batch_size);
	s->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw batched join",
										 ALLOCSET_DEFAULT_SIZES);
	s->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw batched join row",
									   ALLOCSET_DEFAULT_SIZES);
	/* the key is evaluated on the outer columns alone */
	for (i = 0; i < scandesc->natts; i++)
		s->keyslot->tts_isnull[i] = true;
}

/*
 * The index of a key among the batch's distinct keys; with add, a key not
 * there yet is added.  -1: not there.
 */
static int
key_index(McJoinState *s, Datum key, bool add)
{
	text	   *k = (text *) DatumGetPointer(key);
	const char *data = VARDATA_ANY(k);
	size_t		len = VARSIZE_ANY_EXHDR(k);
	uint32		h = hash_bytes((const unsigned char *) data, (int) len);

	for (uint32 pos = h & s->mask;; pos = (pos + 1) & s->mask)
	{
		int			j = s->slots[pos];
		text	   *o;

		if (j < 0)
		{
			if (!add)
				return -1;
			s->slots[pos] = s->nkeys;
			s->keys[s->nkeys] = key;
			s->hit[s->nkeys] = false;
			return s->nkeys++;
		}
		o = (text *) DatumGetPointer(s->keys[j]);
		if (VARSIZE_ANY_EXHDR(o) == len && memcmp(VARDATA_ANY(o), data, len) == 0)
			return j;
	}
}

/* An outer row's key (in batch_cxt, with the table's prefix); -1 if NULL. */
static int
batch_key(McJoinState *s, TupleTableSlot *outer)
{
	ExprContext *econtext = s->work_econtext;
	TupleTableSlot *ks = s->keyslot;
	MemoryContext old;
	Datum		d;
	Datum		key;
	bool		isnull;

	slot_getallattrs(outer);
	ExecClearTuple(ks);
	memcpy(ks->tts_values, outer->tts_values, sizeof(Datum) * s->nouter);
	memcpy(ks->tts_isnull, outer->tts_isnull, sizeof(bool) * s->nouter);
	ExecStoreVirtualTuple(ks);
	econtext->ecxt_scantuple = ks;
	d = ExecEvalExprSwitchContext(s->keyexpr, econtext, &isnull);
	if (isnull)
	{
		ResetExprContext(econtext);
		return -1;
	}
	old = MemoryContextSwitchTo(s->batch_cxt);
	if (s->t.opts.key_prefix_len > 0)
		key = McTableKeyWithPrefix(&s->t, d);
	else
		key = PointerGetDatum(DatumGetTextPCopy(d));
	MemoryContextSwitchTo(old);
	ResetExprContext(econtext);
	return key_index(s, key, true);
}

/* One hit: the item's inner columns, copied into the batch. */
static void
join_hit(void *arg, Datum key, char *base, const McReply *r)
{
	McJoinState *s = arg;
	int			k = key_index(s, key, false);
	Datum	   *values;
	bool	   *nulls;
	MemoryContext old;

	Assert(k >= 0);
	if (k < 0)
		return;
	values = s->ivalues + (size_t) k * s->ninner;
	nulls = s->inulls + (size_t) k * s->ninner;
	old = MemoryContextSwitchTo(s->row_cxt);
	McTableRowFromReply(&s->t, &s->vio, s->srv, McTableKeyWithoutPrefix(&s->t, key), base, r,
				   s->rowvalues, s->rownulls,
				   s->tabdesc->natts);
	MemoryContextSwitchTo(s->batch_cxt);
	for (int i = 0; i < s->ninner; i++)
	{
		AttrNumber	a = s->inner_att[i];

		nulls[i] = s->rownulls[a - 1];
		values[i] = nulls[i] ? (Datum) 0 :
			datumCopy(s->rowvalues[a - 1], s->inner_byval[i], s->inner_len[i]);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(s->row_cxt);
	s->hit[k] = true;
}

/*
 * The size of the next batch.  A batch holds its outer rows and items in
 * memory, and an item can be up to a megabyte: batches start small
 * (MC_JOIN_FIRST_BATCH rows) and grow fourfold, up to join_batch_size,
 * while a batch takes less than half of work_mem; one that took more than
 * work_mem shrinks the next in proportion.  So a batch's memory stays
 * near work_mem, and the first rows come after a short first batch.
 */
static void
next_batch_size(McJoinState *s)
{
	double		used = (double) MemoryContextMemAllocated(s->batch_cxt, true);
	double		budget = (double) work_mem * 1024.0;

	if (s->nrows < s->cur_batch)
		return;					/* the outer side ended */
	if (used < budget / 2)
		s->cur_batch = (int) Min((double) s->batch_size, s->cur_batch * 4.0);
	else if (used > budget)
		s->cur_batch = (int) Max(1.0, s->cur_batch * budget / used);
}

/*
 * The next batch: up to cur_batch outer rows and their keys, then one
 * multi-get for the distinct keys.  Frees the previous batch, which no
 * one refers to any more.
 */
static void
fill_batch(McJoinState *s)
{
	PlanState  *outer = linitial(s->css.custom_ps);

	uint32		cap;

	ExecClearTuple(s->css.ss.ss_ScanTupleSlot);
	MemoryContextReset(s->batch_cxt);
	for (cap = 16; cap < (uint32) s->cur_batch * 2; cap <<= 1)
		;
	s->mask = cap - 1;
	memset(s->slots, -1, sizeof(int) * cap);
	s->nrows = s->nkeys = s->next = 0;
	while (s->nrows < s->cur_batch)
	{
		TupleTableSlot *o = ExecProcNode(outer);
		MemoryContext old;

		if (TupIsNull(o))
		{
			s->outer_done = true;
			break;
		}
		s->row_key[s->nrows] = batch_key(s, o);
		old = MemoryContextSwitchTo(s->batch_cxt);
		s->rows[s->nrows] = ExecCopySlotMinimalTuple(o);
		MemoryContextSwitchTo(old);
		s->nrows++;
	}
	if (s->nkeys > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(s->batch_cxt);

		s->srv = McServerGet(s->t.serverid);
		McCsSetOp(MC_CS_JOIN);
		McRunGets(s->srv, s->keys, NULL, s->nkeys,
					  McTableColumnFields(s->srv, &s->vio, s->want), 0, join_hit, s);
		MemoryContextSwitchTo(old);
	}
	next_batch_size(s);
}

/*
 * The next joined row (ExecScan's access method): outer row, then its
 * item's columns or NULLs.
 */
static TupleTableSlot *
join_next(ScanState *ss)
{
	McJoinState *s = (McJoinState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	for (;;)
	{
		int			i,
					k;
		bool		matched;

		CHECK_FOR_INTERRUPTS();
		if (s->next >= s->nrows)
		{
			if (s->outer_done)
				return ExecClearTuple(slot);
			fill_batch(s);
			continue;
		}
		i = s->next++;
		k = s->row_key[i];
		matched = k >= 0 && s->hit[k];

		ExecClearTuple(slot);
		ExecStoreMinimalTuple(s->rows[i], s->outer_mslot, false);
		slot_getallattrs(s->outer_mslot);
		memcpy(slot->tts_values, s->outer_mslot->tts_values, sizeof(Datum) * s->nouter);
		memcpy(slot->tts_isnull, s->outer_mslot->tts_isnull, sizeof(bool) * s->nouter);
		if (matched)
		{
			memcpy(slot->tts_values + s->nouter, s->ivalues + (size_t) k * s->ninner,
				   sizeof(Datum) * s->ninner);
			memcpy(slot->tts_isnull + s->nouter, s->inulls + (size_t) k * s->ninner,
				   sizeof(bool) * s->ninner);
		}
		else
			memset(slot->tts_isnull + s->nouter, true, sizeof(bool) * s->ninner);
		ExecStoreVirtualTuple(slot);

		if (matched && s->match != NULL)
		{
			ExprContext *econtext = s->work_econtext;

			econtext->ecxt_scantuple = slot;
			matched = ExecQual(s->match, econtext);
			ResetExprContext(econtext);
		}
		if (matched)
			return slot;
		if (s->jointype == JOIN_LEFT)
		{
			if (k >= 0 && s->hit[k])
			{
				/* the item did not match: the outer row with NULLs */
				ExecClearTuple(slot);
				memset(slot->tts_isnull + s->nouter, true, sizeof(bool) * s->ninner);
				ExecStoreVirtualTuple(slot);
			}
			return slot;
		}
	}
}

static bool
join_recheck(ScanState *ss, TupleTableSlot *slot)
{
	/* not reached: fdw_join.c offers no batched join to statements that lock rows */
	return true;
}

static TupleTableSlot *
join_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, join_next, join_recheck);
}

static void
join_rescan(CustomScanState *node)
{
	McJoinState *s = (McJoinState *) node;
	PlanState  *outer = linitial(node->custom_ps);

	if (node->ss.ps.chgParam != NULL)
		UpdateChangedParamSet(outer, node->ss.ps.chgParam);
	if (outer->chgParam == NULL)
		ExecReScan(outer);
	/* the batch's memory goes when the next batch is gathered */
	s->nrows = s->next = 0;
	s->outer_done = false;
	s->cur_batch = Min(MC_JOIN_FIRST_BATCH, s->batch_size);
}

static void
join_end(CustomScanState *node)
{
	McJoinState *s = (McJoinState *) node;

	ExecEndNode(linitial(node->custom_ps));
	if (s->work_econtext)
		FreeExprContext(s->work_econtext, true);
}

/*
 * EXPLAIN: the join type, the key condition and the clauses that decide a
 * match; with VERBOSE, the batch size and the fields asked for.  Nothing is
 * sent to memcached.
 */
static void
join_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	McJoinState *s = (McJoinState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *cxt = set_deparse_context_plan(es->deparse_cxt, &cscan->scan.plan, ancestors);
	List	   *match = list_copy_tail(cscan->custom_exprs, 1);
	const char *keycol = get_attname(s->t.relid, s->t.attnum[MC_FIELD_KEY], false);

	ExplainPropertyText("Join Type",
						s->jointype == JOIN_LEFT ? "Left" :
						s->jointype == JOIN_SEMI ? "Semi" : "Inner", es);
	ExplainPropertyText("Memcached Key Condition",
						psprintf("%s = %s", quote_identifier(keycol),
								 deparse_expression(linitial(cscan->custom_exprs),
													cxt, true, false)), es);
	if (match != NIL)
		ExplainPropertyText("Join Filter",
							deparse_expression((Node *) make_ands_explicit(match),
											   cxt, true, false), es);
	if (es->verbose)
	{
		ExplainPropertyInteger("Batch Size", NULL, s->batch_size, es);
		ExplainPropertyText("Memcached Fields", McFdwScanFieldsText(s->want), es);
	}
}
