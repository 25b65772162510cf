/*
 * fdw_scan.c — executing a scan of a foreign table, and its EXPLAIN.
 *
 * Owns: evaluating the key expressions the plan pushed down (when the scan
 * starts, and again on a rescan whose parameters changed: generic plans'
 * parameters and a join's outer values arrive this way), one pipelined
 * multi-get for all the keys (run.c's McRunGets, asking only for
 * the fields the query reads), and turning each hit into a row of the
 * table, kept in a tuplestore (which spills past work_mem) until the
 * executor takes it.  Misses give no row.  A scan without a key
 * condition takes its keys batch by batch from fdw_fullscan.c instead, and
 * keeps one batch's rows at a time.  Also owns ANALYZE's sample (rows of a
 * full scan's random keys, only where full scans are allowed).  Must not:
 * plan, or touch connections other than through McRunGets.
 *
 * The per-key path allocates nothing of its own: prefixed keys are packed
 * into blocks with the key as given stored just before each (so a hit
 * finds the key column's value without a lookup or a copy), a row of the
 * shape mc_get_multi returns — (key text, value text or bytea, flags
 * integer) — is laid out by rowlayout.c as mc_get_multi's rows are, and a
 * stored row reaches the scan slot without a second copy.
 */
#include "postgres.h"

#include <math.h>

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
#include "run.h"
#include "rowlayout.h"

typedef struct McScan
{
	McTable		t;
	unsigned	want;
	McServer   *srv;			/* during fetch: compressed values inflate */
	List	   *kinds;			/* MC_KEYEXPR_* per key expression */
	List	   *exprstates;
	McColumnIO	vio;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	Tuplestorestate *ts;
	TupleTableSlot *mslot;		/* the tuplestore's rows come out here */
	bool		fetched;
	McFullScan *full;			/* a full scan: its keys */
	bool		more;			/* ... and a batch may be left */
	bool		by_hand;		/* rows of mc_get_multi's shape: McRowPut */
	char	   *rowbuf;			/* McRowPut's row, reused */
	MemoryContext scan_cxt;		/* the scan's own: lives until it ends */
	MemoryContext batch_cxt;	/* the keys of one batch */
	MemoryContext row_cxt;		/* one row's conversions */
	Datum	   *keys;			/* prefixed, as the server sees them */
	int			nkeys;
	int			keys_cap;
	char	   *block;			/* where the next prefixed key goes */
	size_t		block_left;
	int			ndistinct;
	int			nhits;
} McScan;

/*
 * A prefixed key in a block: the key as given (the key column's value),
 * then the prefixed key's varlena, which is what the engine sees; a hit
 * steps back from that varlena to the key as given.
 */
typedef struct McPrefixedKey
{
	Datum		given;
	char		key[FLEXIBLE_ARRAY_MEMBER];	/* 4-byte header, prefix, key */
} McPrefixedKey;

#define KEY_BLOCK_SIZE		(64 * 1024)

/*
 * Is the table's row the one McRowPut lays out: key, then a text or bytea
 * value, then integer flags, and nothing else?
 */
static bool
rows_by_hand(const McTable *t, TupleDesc desc, const McColumnIO *vio)
{
	return McRowLayoutFits(desc) &&
		t->attnum[MC_FIELD_KEY] == 1 && t->attnum[MC_FIELD_VALUE] == 2 &&
		t->attnum[MC_FIELD_FLAGS] == 3 && t->atttype[MC_FIELD_FLAGS] == INT4OID &&
		(vio->kind == MC_VALUE_TEXT || vio->kind == MC_VALUE_BYTEA);
}

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

		McTableColumnIOInit(&s->vio, att->atttypid, att->atttypmod);
	}
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	s->values = palloc(sizeof(Datum) * s->desc->natts);
	s->nulls = palloc(sizeof(bool) * s->desc->natts);
	s->ts = tuplestore_begin_heap(false, false, work_mem);
	s->mslot = MakeSingleTupleTableSlot(s->desc, &TTSOpsMinimalTuple);
	s->by_hand = rows_by_hand(&s->t, s->desc, &s->vio);
	s->scan_cxt = CurrentMemoryContext;
	s->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw scan keys",
										 ALLOCSET_DEFAULT_SIZES);
	s->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw scan row",
									   ALLOCSET_DEFAULT_SIZES);
}

/*
 * Add a key (as given) to the batch, with the table's prefix: packed into
 * a block (in batch_cxt), not allocated one by one.
 */
static void
add_key(McScan *s, Datum key)
{
	text	   *k = DatumGetTextPP(key);
	size_t		plen = s->t.opts.key_prefix_len;
	size_t		len;
	size_t		need;
	McPrefixedKey *pk;

	if (unlikely(s->nkeys == s->keys_cap))
	{
		s->keys_cap *= 2;
		s->keys = repalloc_huge(s->keys, sizeof(Datum) * s->keys_cap);
	}
	if (plen == 0)
	{
		s->keys[s->nkeys++] = PointerGetDatum(k);
		return;
	}
	len = VARSIZE_ANY_EXHDR(k);
	need = MAXALIGN(offsetof(McPrefixedKey, key) + VARHDRSZ + plen + len);
	if (unlikely(s->block_left < need))
	{
		s->block_left = Max(need, KEY_BLOCK_SIZE);
		s->block = palloc(s->block_left);
	}
	pk = (McPrefixedKey *) s->block;
	s->block += need;
	s->block_left -= need;
	pk->given = PointerGetDatum(k);
	SET_VARSIZE(pk->key, VARHDRSZ + plen + len);
	memcpy(VARDATA(pk->key), s->t.opts.key_prefix, plen);
	memcpy(VARDATA(pk->key) + plen, VARDATA_ANY(k), len);
	s->keys[s->nkeys++] = PointerGetDatum(pk->key);
}

/*
 * The key column's value of a key add_key made; a full scan's keys are
 * fdw_fullscan.c's, without the key as given beside them: the prefix is
 * cut off (in row_cxt, which the caller resets).
 */
static inline Datum
given_key(McScan *s, Datum key)
{
	if (s->t.opts.key_prefix_len == 0)
		return key;
	if (s->full)
	{
		MemoryContext old = MemoryContextSwitchTo(s->row_cxt);
		Datum		given = McTableKeyWithoutPrefix(&s->t, key);

		MemoryContextSwitchTo(old);
		return given;
	}
	return ((const McPrefixedKey *) (DatumGetPointer(key) -
									 offsetof(McPrefixedKey, key)))->given;
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
	MemoryContext old;

	MemoryContextReset(s->batch_cxt);
	old = MemoryContextSwitchTo(s->batch_cxt);
	s->keys_cap = 16;
	s->keys = palloc(sizeof(Datum) * s->keys_cap);
	s->nkeys = 0;
	s->block = NULL;
	s->block_left = 0;
	forboth(le, s->exprstates, lk, s->kinds)
	{
		bool		isnull;
		Datum		d = ExecEvalExpr(lfirst(le), econtext, &isnull);

		if (isnull)
			continue;
		if (lfirst_int(lk) == MC_KEYEXPR_SCALAR)
			add_key(s, d);
		else
		{
			ArrayType  *arr = DatumGetArrayTypeP(d);
			Datum	   *elems;
			bool	   *nulls;
			int			n;

			deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_INT,
							  &elems, &nulls, &n);
			if (s->nkeys + n > s->keys_cap)
			{
				s->keys_cap = s->nkeys + n;
				s->keys = repalloc_huge(s->keys, sizeof(Datum) * s->keys_cap);
			}
			for (int i = 0; i < n; i++)
				if (!nulls[i])
					add_key(s, elems[i]);
		}
	}
	MemoryContextSwitchTo(old);
}

/* One hit: the row of the table, into the tuplestore. */
static void
scan_hit(void *arg, Datum key, char *base, const McReply *r)
{
	McScan	   *s = arg;
	MemoryContext old;
	Datum		given = given_key(s, key);

	s->nhits++;
	/*
	 * mc_get_multi's row, laid out by hand as mc_get_multi lays it out (a
	 * compressed value, inflated, is usually longer than McRowPut takes).
	 */
	if (s->by_hand && r->type == MC_REPLY_VA && (r->present & MC_F_FLAGS) &&
		!McValueCompressed(&s->srv->cfg, r->client_flags))
	{
		char	   *data = base + r->value_off;
		text	   *k = (text *) DatumGetPointer(given);	/* add_key detoasted it */
		bool		done;

		McTableColumnCheck(&s->vio, s->srv, r, data, r->value_len, VARDATA_ANY(k),
					 VARSIZE_ANY_EXHDR(k));
		/* the row buffer lives as long as the scan */
		old = MemoryContextSwitchTo(s->scan_cxt);
		done = McRowPut(s->ts, s->desc, &s->rowbuf, given, data, r->value_len,
						(int32) r->client_flags);
		MemoryContextSwitchTo(old);
		if (done)
		{
			if (s->full)
				MemoryContextReset(s->row_cxt);
			return;
		}
	}

	old = MemoryContextSwitchTo(s->row_cxt);
	McTableRowFromReply(&s->t, &s->vio, s->srv, given, base, r, s->values, s->nulls,
				   s->desc->natts);
	tuplestore_putvalues(s->ts, s->desc, s->values, s->nulls);
	MemoryContextSwitchTo(old);
	MemoryContextReset(s->row_cxt);
}

static void
fetch(ForeignScanState *node)
{
	McScan	   *s = node->fdw_state;

	if (s->full)
	{
		s->srv = McServerGet(s->t.serverid);
		tuplestore_clear(s->ts);
		s->more = McFullScanNext(s->full, s->srv, McTableColumnFields(s->srv, &s->vio, s->want),
								 scan_hit, s);
		s->fetched = true;
		return;
	}
	eval_keys(s, node->ss.ps.ps_ExprContext);
	s->nhits = 0;
	s->ndistinct = 0;
	if (s->nkeys > 0)
	{
		s->srv = McServerGet(s->t.serverid);
		McCsSetOp(MC_CS_SCAN);
		s->ndistinct = McRunGets(s->srv, s->keys, NULL, s->nkeys,
									 McTableColumnFields(s->srv, &s->vio, s->want), 0,
									 scan_hit, s);
	}
	s->fetched = true;
}

TupleTableSlot *
McIterateForeignScan(ForeignScanState *node)
{
	McScan	   *s = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	MemoryContext old;
	bool		got;

	if (!s->fetched)
		fetch(node);

	/*
	 * A row read back from disk is allocated in the current context and
	 * owned by mslot, which frees it at the next read: read it in the
	 * scan's context, not in the per-tuple one the executor calls us in
	 * (reset between rows, which freed it first, and mslot's free crashed).
	 */
	for (;;)
	{
		old = MemoryContextSwitchTo(s->scan_cxt);
		got = tuplestore_gettupleslot(s->ts, true, false, s->mslot);
		MemoryContextSwitchTo(old);
		if (got)
			break;
		if (!s->more)
			return ExecClearTuple(slot);
		fetch(node);			/* a full scan's next batch */
	}

	/*
	 * The row's columns point into the stored tuple, which stays where it
	 * is until the next row is read (mslot owns it when it came back from
	 * disk): deformed, not copied again.
	 */
	ExecForceStoreMinimalTuple(((MinimalTupleTableSlot *) s->mslot)->mintuple,
							   slot, false);
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

/* ANALYZE's sample being taken: the rows, formed from the hits. */
typedef struct McSample
{
	McTable		t;
	McColumnIO	vio;
	McServer   *srv;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	HeapTuple  *rows;
	int			nrows;
	int			targrows;
	MemoryContext rows_cxt;		/* ANALYZE's, where the rows go */
	MemoryContext row_cxt;		/* one row's conversions */
} McSample;

static void
sample_hit(void *arg, Datum key, char *base, const McReply *r)
{
	McSample   *a = arg;
	MemoryContext old;

	if (a->nrows >= a->targrows)
		return;
	old = MemoryContextSwitchTo(a->row_cxt);
	McTableRowFromReply(&a->t, &a->vio, a->srv, McTableKeyWithoutPrefix(&a->t, key), base, r,
				   a->values, a->nulls, a->desc->natts);
	MemoryContextSwitchTo(a->rows_cxt);
	a->rows[a->nrows++] = heap_form_tuple(a->desc, a->values, a->nulls);
	MemoryContextSwitchTo(old);
	MemoryContextReset(a->row_cxt);
}

/*
 * ANALYZE's rows: only a table that allows full scans lists its keys (the
 * dump a full scan makes), and of those a random sample of at most
 * targrows is fetched.  Any other table gives no rows and no statistics,
 * quietly: listing the cache is what its owner did not allow, and the
 * planner estimates its scans from their keys, not from statistics.
 */
static int
acquire_sample(Relation rel, int elevel, HeapTuple *rows, int targrows,
			   double *totalrows, double *totaldeadrows)
{
	McSample	a = {0};
	McFullScan *fs;
	unsigned	want = 0;
	int			nsampled = 0;
	double		listed;

	*totalrows = *totaldeadrows = 0;
	McTableLoad(rel, &a.t);
	if (!a.t.opts.allow_full_scan)
	{
		ereport(elevel,
				(errmsg("\"%s\": no sample taken: memcached lists keys only for a full scan, and the table does not allow one",
						RelationGetRelationName(rel))));
		return 0;
	}
	/* the server's owner consents to listing its keys, as for a full scan */
	if (!McServerGet(a.t.serverid)->cfg.allow_full_scan)
	{
		ereport(elevel,
				(errmsg("\"%s\": no sample taken: memcached lists keys only for a full scan, and the table's server does not allow one",
						RelationGetRelationName(rel))));
		return 0;
	}
	a.desc = RelationGetDescr(rel);
	if (a.t.attnum[MC_FIELD_VALUE] != 0)
	{
		Form_pg_attribute att = TupleDescAttr(a.desc, a.t.attnum[MC_FIELD_VALUE] - 1);

		McTableColumnIOInit(&a.vio, att->atttypid, att->atttypmod);
	}
	for (int f = MC_FIELD_VALUE; f < MC_NFIELDS; f++)
		if (a.t.attnum[f] != 0)
			want |= McFieldWant((McField) f);
	a.values = palloc(sizeof(Datum) * a.desc->natts);
	a.nulls = palloc(sizeof(bool) * a.desc->natts);
	a.rows = rows;
	a.targrows = targrows;
	a.rows_cxt = CurrentMemoryContext;
	a.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw analyze row",
									  ALLOCSET_DEFAULT_SIZES);
	a.srv = McServerGet(a.t.serverid);
	fs = McFullScanBegin(&a.t);
	listed = McFullScanSample(fs, a.srv, targrows, McTableColumnFields(a.srv, &a.vio, want),
							  sample_hit, &a, &nsampled);
	McFullScanEnd(fs);
	MemoryContextDelete(a.row_cxt);
	/* keys listed but gone by the time they were fetched are no rows */
	*totalrows = nsampled > 0 ? floor(listed * a.nrows / nsampled + 0.5) : 0;
	ereport(elevel,
			(errmsg("\"%s\": %.0f keys listed, %d sampled, %d rows",
					RelationGetRelationName(rel), listed, nsampled, a.nrows)));
	return a.nrows;
}

bool
McAnalyzeForeignTable(Relation rel, AcquireSampleRowsFunc *func,
					  BlockNumber *totalpages)
{
	*func = acquire_sample;
	*totalpages = 0;
	return true;
}

/* The meta flags a scan or batched join asks for, as EXPLAIN shows them. */
const char *
McFdwScanFieldsText(unsigned want)
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
	const bool *alive = McInstanceAliveMap(srv, alivebuf);
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
		inst = McInstancePickWith(srv, raw, rawlen, alive);
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
		ExplainPropertyText("Memcached Fields", McFdwScanFieldsText(s->want), es);
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
	ExplainPropertyText("Memcached Fields", McFdwScanFieldsText(s->want), es);
}
