/*
 * fdw_modify.c — INSERT, COPY, UPDATE and DELETE on a foreign table.
 *
 * Owns: turning rows into writes.  INSERT is a set ("ms", mode S), sent at
 * most once (a reply lost after the request went out is an error saying
 * the rows may or may not have been written); rows come in batches of the
 * table's batch_size (PostgreSQL's batch insert) and each batch is one
 * McBatchWrite (batch.h).  INSERT ... ON CONFLICT DO NOTHING is an add
 * (mode E): a row whose key exists is skipped.  COPY FROM, and rows routed
 * into the table as a partition, come through BeginForeignInsert: COPY's
 * rows are held and written batch_size at a time (PostgreSQL 15 hands them
 * over one by one).  UPDATE and DELETE find their rows with the scan
 * (fdw_scan.c), which a key condition must drive; the row's identity is
 * its key, carried as the junk column "mcfdw_key".
 * UPDATE is a replace ("ms", mode R: an item that expired since the scan
 * is not brought back) and, when the table has a cas column, a
 * compare-and-swap with the row's cas: the one the scan read, or the one
 * the statement set.  A row whose item changed or vanished since is
 * skipped (not updated, not returned, not counted), as a row a concurrent
 * transaction deleted is.  The key of a row cannot be updated, by the
 * statement, a trigger or a generated column.  DELETE is "md"; an item
 * already gone is a skipped row.  What PostgreSQL leaves to a wrapper
 * (CHECK and NOT NULL constraints, a partition's constraint) and a view's
 * check option are checked before a row is written, since a failed
 * statement does not undo a write to memcached.
 *
 * Writes follow the server's on_failure.  With 'error' (the default) an
 * instance that cannot be reached fails the statement.  With 'miss' a row
 * whose instance cannot be reached is not written and is skipped as a row
 * a concurrent transaction deleted is: not counted in the command tag, not
 * returned by RETURNING, and the instance is counted degraded and warned
 * about once per statement, as mc_set_multi does.
 *
 * Values: text and varchar as their bytes, bytea as it is, other types as
 * their output function writes them (fdw_table.c).  ttl: the ttl column's
 * value (seconds, > 0), else the table's ttl option (0 = no expiry).
 * Must not: plan, or touch sockets other than through the request engine
 * (run.h: UPDATE's one replace, a run of one) and batch.h's McBatchWrite (a write run of run.c).
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "batch.h"
#include "fdw.h"
#include "engine.h"
#include "run.h"

typedef struct McModify
{
	McTable		t;
	McServer   *srv;
	McColumnIO	vio;
	AttrNumber	key_junk;		/* UPDATE, DELETE: the row's key in the plan's row */
	AttrNumber	wholerow_junk;	/* DELETE ... RETURNING: the row as the scan read it */
	int			batch_size;
	bool		add;			/* ON CONFLICT DO NOTHING: a store only if absent */
	PlanState  *mtps;			/* ... its ModifyTable, counting skipped rows
								 * as EXPLAIN ANALYZE's conflicting tuples */
	MemoryContext cxt;			/* one row's or one batch's work */
	/* COPY: rows held until batch_size of them go as one batch (hold_rows) */
	bool		hold;
	McOp	   *held;
	int			nheld;
	MemoryContext heldcxt;		/* the held rows' keys and values */
} McModify;

void
McAddForeignUpdateTargets(PlannerInfo *root, Index rtindex,
						  RangeTblEntry *target_rte, Relation target_relation)
{
	McTable		t;
	Form_pg_attribute att;

	McTableLoad(target_relation, &t);
	att = TupleDescAttr(RelationGetDescr(target_relation), t.attnum[MC_FIELD_KEY] - 1);
	add_row_identity_var(root, makeVar(rtindex, att->attnum, att->atttypid,
									   att->atttypmod, att->attcollation, 0),
						 rtindex, "mcfdw_key");
	/* DELETE has only the key; RETURNING may want the rest of the row */
	if (root->parse->commandType == CMD_DELETE && root->parse->returningList != NIL)
		add_row_identity_var(root, makeWholeRowVar(target_rte, rtindex, 0, false),
							 rtindex, "wholerow");
}

/*
 * INSERT: fdw_private says whether stores are adds (ON CONFLICT DO
 * NOTHING).  ON CONFLICT DO UPDATE needs an arbiter index a foreign table
 * cannot have, so PostgreSQL refuses it first; it is refused here too.
 * UPDATE: the key column cannot be set.
 */
List *
McPlanForeignModify(PlannerInfo *root, ModifyTable *plan, Index resultRelation,
					int subplan_index)
{
	RangeTblEntry *rte = planner_rt_fetch(resultRelation, root);
	Relation	rel;
	McTable		t;

	if (plan->operation == CMD_INSERT)
	{
		if (plan->onConflictAction == ONCONFLICT_UPDATE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ON CONFLICT DO UPDATE is not supported on foreign table \"%s\"",
							get_rel_name(rte->relid)),
					 errhint("Use ON CONFLICT DO NOTHING (memcached's add), or UPDATE the rows.")));
		return list_make1(makeInteger(plan->onConflictAction == ONCONFLICT_NOTHING));
	}
	if (plan->operation != CMD_UPDATE)
		return NIL;
	rel = table_open(rte->relid, NoLock);
	McTableLoad(rel, &t);
	/*
	 * A generated key column is recomputed, not assigned: whether its value
	 * changes is known per row, and checked there (the planner of 16 and
	 * later lists it among the updated columns, 15's does not).
	 */
	if (!TupleDescAttr(RelationGetDescr(rel), t.attnum[MC_FIELD_KEY] - 1)->attgenerated &&
		bms_is_member(t.attnum[MC_FIELD_KEY] - FirstLowInvalidHeapAttributeNumber,
					  McUpdatedCols(root, resultRelation, rte)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot update the key column of foreign table \"%s\"",
						RelationGetRelationName(rel)),
				 errhint("INSERT the row under its new key and DELETE the old one.")));
	table_close(rel, NoLock);
	return NIL;
}

/* The state of one table's writes in one statement, in the query's context. */
static McModify *
modify_state(EState *estate, Relation rel)
{
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	McModify   *m = palloc0(sizeof(McModify));

	McTableLoad(rel, &m->t);
	m->srv = McServerGet(m->t.serverid);
	McServerCheckWrite(m->srv);
	m->batch_size = m->t.opts.batch_size;
	if (m->t.attnum[MC_FIELD_VALUE] != 0)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel),
											  m->t.attnum[MC_FIELD_VALUE] - 1);

		McTableColumnIOInit(&m->vio, att->atttypid, att->atttypmod);
	}
	m->cxt = AllocSetContextCreate(estate->es_query_cxt, "mcfdw modify",
								   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(old);
	return m;
}

void
McBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
					 List *fdw_private, int subplan_index, int eflags)
{
	McModify   *m;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	m = modify_state(mtstate->ps.state, rinfo->ri_RelationDesc);
	if (mtstate->operation == CMD_INSERT && fdw_private != NIL)
		m->add = intVal(linitial(fdw_private)) != 0;
	m->mtps = &mtstate->ps;
	if (mtstate->operation == CMD_UPDATE || mtstate->operation == CMD_DELETE)
	{
		List	   *tlist = outerPlanState(mtstate)->plan->targetlist;

		m->key_junk = ExecFindJunkAttributeInTlist(tlist, "mcfdw_key");
		if (!AttributeNumberIsValid(m->key_junk))
			elog(ERROR, "could not find junk mcfdw_key column");
		m->wholerow_junk = ExecFindJunkAttributeInTlist(tlist, "wholerow");
	}
	rinfo->ri_FdwState = m;
}

/* Has the relation a volatile DEFAULT (one that could read the table)? */
static bool
has_volatile_default(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Node	   *def;

		if (TupleDescAttr(desc, i)->attisdropped || !TupleDescAttr(desc, i)->atthasdef)
			continue;
		def = build_column_default(rel, i + 1);
		if (def != NULL && contain_volatile_functions_not_nextval(def))
			return true;
	}
	return false;
}

/*
 * Could something see a row COPY holds as if it were written?  COPY into
 * the table itself: an INSERT trigger of the table, or a volatile DEFAULT
 * (PostgreSQL's COPY writes local tables row by row for the same reason).
 * COPY into a partitioned table: also a trigger on any table of the tree,
 * since the AFTER triggers of every partition fire before
 * EndForeignInsert, or a volatile DEFAULT of the root.
 */
static bool
copy_may_read_held(ResultRelInfo *rinfo)
{
	TriggerDesc *td = rinfo->ri_TrigDesc;
	List	   *tree;
	ListCell   *lc;

	if (has_volatile_default(rinfo->ri_RelationDesc))
		return true;
	if (td != NULL &&
		(td->trig_insert_before_row || td->trig_insert_after_row ||
		 td->trig_insert_instead_row || td->trig_insert_before_statement ||
		 td->trig_insert_after_statement || td->trig_insert_new_table))
		return true;
	if (rinfo->ri_RootResultRelInfo == NULL)
		return false;
	if (has_volatile_default(rinfo->ri_RootResultRelInfo->ri_RelationDesc))
		return true;
	/* COPY holds a lock on the root; the partitions' pg_class rows suffice */
	tree = find_all_inheritors(RelationGetRelid(rinfo->ri_RootResultRelInfo->ri_RelationDesc),
							   NoLock, NULL);
	foreach(lc, tree)
	{
		HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(lfirst_oid(lc)));
		bool		has = false;

		if (HeapTupleIsValid(tp))
		{
			has = ((Form_pg_class) GETSTRUCT(tp))->relhastriggers;
			ReleaseSysCache(tp);
		}
		if (has)
			return true;
	}
	return false;
}

/*
 * Rows that do not come from a ModifyTable plan: COPY FROM into the table
 * or into a partitioned table it is a partition of (no plan), and rows an
 * INSERT or UPDATE routes into it as a partition (the plan's).
 *
 * PostgreSQL 15's COPY hands a foreign table one row at a time.  So that
 * COPY goes in pipelined batches as INSERT ... SELECT does, the rows are
 * held here and written batch_size at a time, the rest at EndForeignInsert
 * (hold_row).  A held row is counted before it is written, which is
 * right only when a failure fails the statement: not under on_failure
 * 'miss' (a skipped row must not be counted), and only when neither a
 * trigger (COPY fires the AFTER triggers before EndForeignInsert) nor a
 * volatile DEFAULT could read a held row as written (copy_may_read_held).
 * Otherwise each row is written as it comes.
 *
 * An UPDATE that routes rows into a foreign partition it also updates is
 * refused: its scan of that partition could read the moved row and update
 * it a second time.
 */
void
McBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	ModifyTable *plan = (ModifyTable *) mtstate->ps.plan;
	Relation	rel = rinfo->ri_RelationDesc;
	McModify   *m;

	if (plan != NULL && plan->operation == CMD_UPDATE &&
		(rinfo->ri_FdwState != NULL || rinfo->ri_usesFdwDirectModify))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot move a row into foreign table \"%s\", which the same UPDATE updates",
						RelationGetRelationName(rel)),
				 errhint("Move the row with a DELETE and an INSERT, or restrict the UPDATE so that it does not update that partition.")));
	Assert(rinfo->ri_FdwState == NULL);
	m = modify_state(mtstate->ps.state, rel);
	if (plan != NULL)
	{
		if (plan->onConflictAction == ONCONFLICT_UPDATE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ON CONFLICT DO UPDATE is not supported on foreign table \"%s\"",
							RelationGetRelationName(rel)),
					 errhint("Use ON CONFLICT DO NOTHING (memcached's add), or UPDATE the rows.")));
		m->add = plan->onConflictAction == ONCONFLICT_NOTHING;
		m->mtps = &mtstate->ps;
	}
	else if (m->batch_size > 1 && !m->srv->cfg.on_failure_miss &&
			 !copy_may_read_held(rinfo))
	{
		m->hold = true;
		m->held = MemoryContextAlloc(mtstate->ps.state->es_query_cxt,
									 sizeof(McOp) * m->batch_size);
		m->heldcxt = AllocSetContextCreate(mtstate->ps.state->es_query_cxt,
										   "mcfdw held rows", ALLOCSET_DEFAULT_SIZES);
	}
	rinfo->ri_FdwState = m;
}

/* The key as the server routes it (table prefix, then McKeyRoute), in m->cxt. */
static void
route_key(McModify *m, Datum key, const char **raw, size_t *rawlen)
{
	text	   *k = DatumGetTextPP(McTableKeyWithPrefix(&m->t, key));
	char	   *buf = palloc(MC_MAX_KEY_PREFIX + MC_KEY_MAX);
	bool		b64;

	McKeyRoute(m->srv, VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k), buf, raw, rawlen, &b64);
}

/* A field's value in the slot, or false if it has no column or is NULL. */
static bool
field_value(McModify *m, TupleTableSlot *slot, McField f, Datum *d)
{
	AttrNumber	a = m->t.attnum[f];
	bool		isnull;

	if (a == 0)
		return false;
	*d = slot_getattr(slot, a, &isnull);
	return !isnull;
}

static int64
field_int(McModify *m, McField f, Datum d)
{
	return m->t.atttype[f] == INT8OID ? DatumGetInt64(d) : DatumGetInt32(d);
}

/* The row's expiry as memcached reads it; false: none. */
static bool
row_ttl(McModify *m, TupleTableSlot *slot, int64 *ttl)
{
	Datum		d;
	int64		secs = m->t.opts.ttl;
	Interval	iv = {0};

	if (field_value(m, slot, MC_FIELD_TTL, &d))
	{
		secs = field_int(m, MC_FIELD_TTL, d);
		if (secs <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ttl must be positive"),
					 errhint("A NULL ttl writes the table's default ttl (option \"ttl\"; 0 means no expiry).")));
	}
	if (secs == 0)
		return false;
	iv.time = secs * USECS_PER_SEC;
	*ttl = McTtlFromInterval(&iv);
	return true;
}

/* The row's key (checked and routed), value, flags and ttl as one set. */
static void
row_op(McModify *m, TupleTableSlot *slot, McOp *op)
{
	Datum		d;

	McOpInit(op, MC_OP_STORE, NULL);
	op->once = true;			/* a lost reply is an error, never a second send */
	op->mode = m->add ? 'E' : 0;	/* ON CONFLICT DO NOTHING: an add */
	if (!field_value(m, slot, MC_FIELD_KEY, &d))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("the key of a row of a memcached foreign table cannot be NULL")));
	route_key(m, d, &op->key, &op->keylen);
	if (m->t.attnum[MC_FIELD_VALUE] != 0)
	{
		if (!field_value(m, slot, MC_FIELD_VALUE, &d))
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("memcached cannot store a NULL value"),
					 errhint("DELETE the row to remove its key.")));
		op->data = McTableColumnWrite(&m->vio, d, &op->datalen);
	}
	else
		op->data = "";
	if (field_value(m, slot, MC_FIELD_FLAGS, &d))
	{
		int64		f = field_int(m, MC_FIELD_FLAGS, d);

		if (m->t.atttype[MC_FIELD_FLAGS] == INT8OID && (f < 0 || f > PG_UINT32_MAX))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("flags must be between 0 and %u", PG_UINT32_MAX)));
		op->has_flags = true;
		op->flags = (uint32) f;
	}
	op->has_ttl = row_ttl(m, slot, &op->ttl);
}

/*
 * Was op's row written?  An add whose key exists is a skipped row (ON
 * CONFLICT DO NOTHING), and so is a failed op under on_failure 'miss'
 * (McBatchWrite counted its instance degraded); otherwise, and for a set
 * memcached refused, an error.
 */
static bool
op_written(McModify *m, const McOp *op)
{
	if (op->result == MC_OP_DONE)
		return true;
	if (op->result == MC_OP_MISS && op->mode == 'E')
	{
		/* ON CONFLICT DO NOTHING: the key exists */
		InstrCountTuples2(m->mtps, 1);
		return false;
	}
	if (op->result == MC_OP_FAILED && m->srv->cfg.on_failure_miss)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("memcached did not store key \"%.*s\"",
					(int) op->keylen, op->key)));
	return false;				/* keep the compiler quiet */
}

/*
 * Write a batch of sets.  The written rows' slots are moved to the front of
 * slots (when given); returns how many were written.
 */
static int
write_sets(McModify *m, McOp *ops, int n, TupleTableSlot **slots)
{
	int			done = 0;

	McCsSetOp(MC_CS_MODIFY);
	McBatchWrite(m->srv, ops, n, 0, false, NULL, 0);
	for (int i = 0; i < n; i++)
		if (op_written(m, &ops[i]))
		{
			if (slots != NULL && done != i)
			{
				TupleTableSlot *tmp = slots[done];

				slots[done] = slots[i];
				slots[i] = tmp;
			}
			done++;
		}
	return done;
}

/*
 * What PostgreSQL checks of a local table's new row but leaves to the
 * wrapper for a foreign one, checked before the row is written, since a
 * write to memcached is not undone when the statement fails: NOT NULL and
 * CHECK constraints, the partition constraint of a partition (a row
 * inserted into the partition directly, or an UPDATE that would move it
 * out: PostgreSQL cannot move a row out of a foreign partition), and a
 * view's WITH CHECK OPTION (PostgreSQL checks it too, after the write).
 */
static void
check_row(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot, bool update)
{
	Relation	rel = rinfo->ri_RelationDesc;
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	if (constr != NULL && (constr->has_not_null || constr->num_check > 0))
		ExecConstraints(rinfo, slot, estate);
	if (rel->rd_rel->relispartition &&
		!ExecPartitionCheck(rinfo, slot, estate, !update))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("cannot move a row out of foreign partition \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("The updated row violates the partition constraint, and PostgreSQL cannot move a row out of a foreign partition."),
				 errhint("DELETE the row and INSERT its new version through the partitioned table.")));
	if (rinfo->ri_WithCheckOptions != NIL)
		ExecWithCheckOptions(WCO_VIEW_CHECK, rinfo, slot, estate);
}

/* Write the held rows of a COPY as one batch (all written, or an error). */
static void
flush_held(McModify *m)
{
	MemoryContext old = MemoryContextSwitchTo(m->cxt);

	write_sets(m, m->held, m->nheld, NULL);
	m->nheld = 0;
	MemoryContextSwitchTo(old);
	MemoryContextReset(m->cxt);
	MemoryContextReset(m->heldcxt);
}

/*
 * A COPY's row, held for the next batch: its key and value are copied,
 * as the slot is reused for the next row.
 */
static void
hold_row(McModify *m, TupleTableSlot *slot)
{
	MemoryContext old = MemoryContextSwitchTo(m->heldcxt);
	McOp	   *op = &m->held[m->nheld];

	row_op(m, slot, op);
	op->key = pnstrdup(op->key, op->keylen);
	if (op->datalen > 0)
	{
		char	   *v = palloc(op->datalen);

		memcpy(v, op->data, op->datalen);
		op->data = v;
	}
	MemoryContextSwitchTo(old);
	if (++m->nheld == m->batch_size)
		flush_held(m);
}

TupleTableSlot *
McExecForeignInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
					TupleTableSlot *planSlot)
{
	McModify   *m = rinfo->ri_FdwState;
	MemoryContext old;
	McOp		op;
	int			done;

	check_row(estate, rinfo, slot, false);
	if (m->hold)
	{
		hold_row(m, slot);
		return slot;
	}
	old = MemoryContextSwitchTo(m->cxt);
	row_op(m, slot, &op);
	done = write_sets(m, &op, 1, NULL);
	MemoryContextSwitchTo(old);
	MemoryContextReset(m->cxt);
	return done == 1 ? slot : NULL;
}

void
McEndForeignInsert(EState *estate, ResultRelInfo *rinfo)
{
	McModify   *m = rinfo->ri_FdwState;

	if (m == NULL)
		return;
	if (m->nheld > 0)
		flush_held(m);
	MemoryContextDelete(m->cxt);
	if (m->heldcxt != NULL)
		MemoryContextDelete(m->heldcxt);
	rinfo->ri_FdwState = NULL;
}

TupleTableSlot **
McExecForeignBatchInsert(EState *estate, ResultRelInfo *rinfo,
						 TupleTableSlot **slots, TupleTableSlot **planSlots,
						 int *numSlots)
{
	McModify   *m = rinfo->ri_FdwState;
	MemoryContext old = MemoryContextSwitchTo(m->cxt);
	McOp	   *ops = palloc(sizeof(McOp) * *numSlots);

	for (int i = 0; i < *numSlots; i++)
	{
		check_row(estate, rinfo, slots[i], false);
		row_op(m, slots[i], &ops[i]);
	}
	/* PostgreSQL counts the first *numSlots slots as inserted */
	*numSlots = write_sets(m, ops, *numSlots, slots);
	MemoryContextSwitchTo(old);
	MemoryContextReset(m->cxt);
	return slots;
}

/*
 * One row per batch when PostgreSQL needs each row back at once (RETURNING,
 * row triggers, WITH CHECK OPTION), as postgres_fdw decides.
 */
int
McGetForeignModifyBatchSize(ResultRelInfo *rinfo)
{
	McModify   *m = rinfo->ri_FdwState;
	int			size;

	if (rinfo->ri_projectReturning != NULL || rinfo->ri_WithCheckOptions != NIL ||
		(rinfo->ri_TrigDesc &&
		 (rinfo->ri_TrigDesc->trig_insert_before_row ||
		  rinfo->ri_TrigDesc->trig_insert_after_row)))
		return 1;
	if (m != NULL)
		size = m->batch_size;
	else
	{
		/* EXPLAIN without ANALYZE: no state, read the option */
		McTable		t;

		McTableLoad(rinfo->ri_RelationDesc, &t);
		size = t.opts.batch_size;
	}
	return size;
}

/*
 * One replace, with compare-and-swap when cas is given, as a single round
 * trip; returns the reply type (HD stored, NS gone, EX changed, NF gone),
 * or MC_REPLY_NEED_MORE when on_failure 'miss' hid an unreachable instance.
 * The new cas, when asked for, goes to *newcas.
 */
static McReplyType
replace_one(McModify *m, const McOp *row, bool has_cas, uint64 cas,
			bool want_cas, uint64 *newcas, bool *got_cas)
{
	McKey		k;
	McOpRun		run;
	McOp	   *op = &run.op;
	McReqOpts	opts = {0};
	McReply    *r = &run.reply;

	McKeyFromRouted(row->key, row->keylen, &k);
	/* the row's set (value, ttl, flags), sent as a replace */
	*op = *row;
	McOpKey(op, &k);
	op->mode = 'R';
	opts.has_cas = has_cas;
	opts.cas = cas;
	op->opts = &opts;
	op->want = want_cas ? MC_F_CAS : 0;
	/* a compare-and-swap sent twice could not succeed twice; a replace may be repeated */
	op->once = has_cas;
	McCsSetOp(MC_CS_MODIFY);
	if (!McRunOne(m->srv, &run))
		return MC_REPLY_NEED_MORE;	/* counted degraded by the engine */
	if (r->type != MC_REPLY_HD && r->type != MC_REPLY_NS &&
		r->type != MC_REPLY_EX && r->type != MC_REPLY_NF)
		McEngineOpReplyError(&run);
	*got_cas = r->type == MC_REPLY_HD && (r->present & MC_F_CAS);
	if (*got_cas)
		*newcas = r->cas;
	McOpEnd(&run);
	return r->type;
}

/*
 * The row's key must stay the one it was read under: the plan refuses an
 * UPDATE that sets the key column, but a BEFORE ROW trigger or a generated
 * key column can still change it, and the replace would then write
 * another item.
 */
static void
check_same_key(McModify *m, TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	bool		isnull;
	Datum		old = ExecGetJunkAttribute(planSlot, m->key_junk, &isnull);
	Datum		now;

	if (isnull)
		elog(ERROR, "the mcfdw_key junk column is NULL");
	if (!field_value(m, slot, MC_FIELD_KEY, &now) ||
		!DatumGetBool(DirectFunctionCall2Coll(texteq, C_COLLATION_OID, old, now)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change the key of a row of foreign table \"%s\"",
						get_rel_name(m->t.relid)),
				 errdetail("A trigger or a generated column changed the key of the updated row."),
				 errhint("INSERT the row under its new key and DELETE the old one.")));
}

TupleTableSlot *
McExecForeignUpdate(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
					TupleTableSlot *planSlot)
{
	McModify   *m = rinfo->ri_FdwState;
	MemoryContext old = MemoryContextSwitchTo(m->cxt);
	McOp		op;
	Datum		d;
	bool		has_cas;
	uint64		cas = 0;
	uint64		newcas;
	bool		got_cas;
	McReplyType t;

	check_row(estate, rinfo, slot, true);
	check_same_key(m, slot, planSlot);
	row_op(m, slot, &op);
	has_cas = field_value(m, slot, MC_FIELD_CAS, &d);
	if (has_cas)
		cas = (uint64) DatumGetInt64(d);
	t = replace_one(m, &op, has_cas, cas, m->t.attnum[MC_FIELD_CAS] != 0,
					&newcas, &got_cas);
	MemoryContextSwitchTo(old);
	MemoryContextReset(m->cxt);
	if (t != MC_REPLY_HD)
		return NULL;			/* changed or gone since the scan, or
								 * unreachable under 'miss': skipped */
	if (got_cas)
	{
		/* RETURNING cas shows the item's new cas */
		TupleDesc	desc = slot->tts_tupleDescriptor;
		Datum	   *values = palloc(sizeof(Datum) * desc->natts);
		bool	   *nulls = palloc(sizeof(bool) * desc->natts);

		slot_getallattrs(slot);
		memcpy(values, slot->tts_values, sizeof(Datum) * desc->natts);
		memcpy(nulls, slot->tts_isnull, sizeof(bool) * desc->natts);
		values[m->t.attnum[MC_FIELD_CAS] - 1] = Int64GetDatum((int64) newcas);
		nulls[m->t.attnum[MC_FIELD_CAS] - 1] = false;
		ExecForceStoreHeapTuple(heap_form_tuple(desc, values, nulls), slot, true);
	}
	return slot;
}

TupleTableSlot *
McExecForeignDelete(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
					TupleTableSlot *planSlot)
{
	McModify   *m = rinfo->ri_FdwState;
	MemoryContext old = MemoryContextSwitchTo(m->cxt);
	McOp		op;
	bool		isnull;
	Datum		key = ExecGetJunkAttribute(planSlot, m->key_junk, &isnull);
	McOpResult	res;

	if (isnull)
		elog(ERROR, "the mcfdw_key junk column is NULL");
	McOpInit(&op, MC_OP_DELETE, NULL);
	route_key(m, key, &op.key, &op.keylen);
	McCsSetOp(MC_CS_MODIFY);
	McBatchWrite(m->srv, &op, 1, 0, false, NULL, 0);
	res = op.result;
	MemoryContextSwitchTo(old);
	MemoryContextReset(m->cxt);
	if (res == MC_OP_FAILED && !m->srv->cfg.on_failure_miss)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("memcached did not delete key \"%s\"",
						TextDatumGetCString(key))));
	if (res != MC_OP_DONE)
		return NULL;			/* gone since the scan, or unreachable under
								 * 'miss': skipped */

	/* the deleted row, for RETURNING */
	ExecClearTuple(slot);
	if (AttributeNumberIsValid(m->wholerow_junk))
	{
		Datum		row = ExecGetJunkAttribute(planSlot, m->wholerow_junk, &isnull);

		if (!isnull)
		{
			HeapTupleHeader th = McDatumGetTupleHeader(row);
			HeapTupleData tup;

			tup.t_len = HeapTupleHeaderGetDatumLength(th);
			ItemPointerSetInvalid(&tup.t_self);
			tup.t_tableOid = InvalidOid;
			tup.t_data = th;
			/* the slot keeps the tuple: a copy it owns */
			ExecForceStoreHeapTuple(heap_copytuple(&tup), slot, true);
			return slot;
		}
	}
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	slot->tts_values[m->t.attnum[MC_FIELD_KEY] - 1] = key;
	slot->tts_isnull[m->t.attnum[MC_FIELD_KEY] - 1] = false;
	ExecStoreVirtualTuple(slot);
	return slot;
}

/* EXPLAIN (VERBOSE): how many rows an INSERT sends per pipelined batch. */
void
McExplainForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
					   List *fdw_private, int subplan_index,
					   struct ExplainState *es)
{
	if (es->verbose && mtstate->operation == CMD_INSERT && rinfo->ri_BatchSize > 0)
		ExplainPropertyInteger("Batch Size", NULL, rinfo->ri_BatchSize, es);
}

void
McEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	McModify   *m = rinfo->ri_FdwState;

	if (m != NULL)
		MemoryContextDelete(m->cxt);
	rinfo->ri_FdwState = NULL;
}

int
McIsForeignRelUpdatable(Relation rel)
{
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}
