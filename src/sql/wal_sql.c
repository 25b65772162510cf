/*
 * wal_sql.c — the watches of invalidation from the write-ahead log, in SQL:
 * mc_watch, mc_unwatch, the event trigger mcfdw_drop_watches and the
 * trigger mc_watches_changed.
 *
 * Owns: checking a watch before it is stored in mc_watches (the table, its
 * key templates against every leaf's columns and replica identity, the
 * server, the actions), creating the replication slot with the first
 * watch, and removing a dropped table's watches (mc_watches_drop).  Must
 * not: decode (wal_decode.c) or send (wal_worker.c); the worker drops the
 * slot when the last watch is gone.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "keytmpl.h"
#include "client.h"
#include "wal.h"

PG_FUNCTION_INFO_V1(mc_watch);
PG_FUNCTION_INFO_V1(mc_unwatch);
PG_FUNCTION_INFO_V1(mc_watches_drop);
PG_FUNCTION_INFO_V1(mc_watches_changed);

/*
 * Refuse a template that does not fit rel, a leaf of root (or root itself):
 * its columns must exist, and where rel holds rows (a table, not a
 * partitioned one) be in its replica identity.
 */
static void
check_templates(Relation rel, Relation root, Datum *elems, int n)
{
	TupleDesc	desc = RelationGetDescr(rel);
	/* every column is logged: identity FULL, or no rows of its own */
	bool		any_column = rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL;
	Bitmapset  *ident = NULL;

	if (!any_column)
		ident = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);
	for (int i = 0; i < n; i++)
	{
		char	   *tmpl = TextDatumGetCString(elems[i]);
		McKeyTmpl	t;
		const char *why;
		char	   *col;

		if (tmpl[0] == '@' && tmpl[1] != '@')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid key template \"%s\" of a watch on \"%s\"",
							tmpl, RelationGetRelationName(root)),
					 errdetail("A watch sends to its one server: \"@name\" does not switch servers here."),
					 errhint("Watch the table once per server, or write \"@@\" for a key that starts with \"@\".")));
		if (!McKeyTmplParse(&t, tmpl[0] == '@' ? tmpl + 1 : tmpl, desc, &why, &col))
		{
			if (why != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid key template \"%s\" of a watch on \"%s\"",
								tmpl, RelationGetRelationName(root)),
						 errdetail("%s", why),
						 errhint("Write {column} for a column's value, {{ and }} for literal braces.")));
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							col, RelationGetRelationName(rel)),
					 errdetail("Key template \"%s\" of a watch refers to it.", tmpl),
					 errhint("The columns of \"%s\" are: %s.",
							 RelationGetRelationName(rel), McKeyTmplColumns(desc))));
		}
		if (any_column)
			continue;
		for (int p = 0; p < t.nparts; p++)
		{
			AttrNumber	a = t.parts[p].attnum;

			if (a == 0 || bms_is_member(a - FirstLowInvalidHeapAttributeNumber, ident))
				continue;
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of relation \"%s\" is not in its replica identity",
							NameStr(TupleDescAttr(desc, a - 1)->attname),
							RelationGetRelationName(rel)),
					 errdetail("Key template \"%s\" refers to it, and the log of an UPDATE or DELETE carries only the replica identity's columns of the old row, so the old key could not be built.",
							   tmpl),
					 errhint("Make the key columns the replica identity: ALTER TABLE %s REPLICA IDENTITY USING INDEX (a unique index on them), or REPLICA IDENTITY FULL.",
							 RelationGetRelationName(rel))));
		}
	}
}

/* Refuse what the decoder cannot follow: temporary, unlogged, not a table. */
static void
check_relation(Relation rel)
{
	char		kind = rel->rd_rel->relkind;

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("Only regular and partitioned tables can be watched.")));
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot watch \"%s\": its changes are not in the write-ahead log",
						RelationGetRelationName(rel)),
				 errdetail("Temporary and unlogged tables are not logically decoded.")));
	if (IsCatalogRelation(rel))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot watch system catalog \"%s\"", RelationGetRelationName(rel))));
}

static char *
choice(FunctionCallInfo fcinfo, int argno, const char *what, const char *a, const char *b,
	   const char *dflt)
{
	char	   *v;

	if (PG_ARGISNULL(argno))
		return pstrdup(dflt);
	v = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(v, a) != 0 && strcmp(v, b) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s \"%s\"", what, v),
				 errhint("Use '%s' or '%s'.", a, b)));
	return v;
}

/* The slot exists, or is created now (before anything is written). */
static void
ensure_slot(void)
{
	char		slot[NAMEDATALEN];

	McWalDecodeSlotName(MyDatabaseId, slot, sizeof(slot));
	if (SearchNamedReplicationSlot(slot, true) != NULL)
		return;
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("the first watch must be created before its transaction writes anything"),
				 errdetail("It creates the replication slot \"%s\", which a transaction that has written cannot do.", slot),
				 errhint("Call mc_watch in a transaction of its own, or first in its transaction.")));
	if (SPI_execute_with_args("SELECT pg_catalog.pg_create_logical_replication_slot($1, 'mcfdw'::pg_catalog.name)",
							  1, (Oid[]) {NAMEOID},
							  (Datum[]) {CStringGetDatum(slot)}, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not create replication slot \"%s\"", slot);
	ereport(NOTICE,
			(errmsg("created replication slot \"%s\" for mcfdw's watches", slot),
			 errdetail("It retains the write-ahead log the worker has not delivered yet: see max_slot_wal_keep_size.")));
}

/*
 * mc_watch(tbl regclass, templates text[], server name, action text,
 * on_truncate text): watch a table, or change its watch for that server.
 */
Datum
mc_watch(PG_FUNCTION_ARGS)
{
	Oid			relid;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char *server;
	char	   *action;
	char	   *on_truncate;
	Relation	rel;
	List	   *leaves;
	ListCell   *lc;
	Oid			tab;
	McServer   *srv;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("mc_watch needs a table and its key templates")));
	relid = PG_GETARG_OID(0);
	arr = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("templates must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key template %d of mc_watch is NULL", i + 1)));
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mc_watch needs at least one key template"),
				 errhint("Pass templates as in ARRAY['user:{id}'].")));
	server = PG_ARGISNULL(2) ? NULL : NameStr(*PG_GETARG_NAME(2));
	action = choice(fcinfo, 3, "action", "delete", "mark_stale", "delete");
	on_truncate = choice(fcinfo, 4, "truncate action", "flush", "ignore", "flush");

	/* serializes with other watches and with the worker's slot drop */
	tab = McWalDecodeTableOid();
	if (!OidIsValid(tab))
		elog(ERROR, "relation \"%s\" of extension mcfdw does not exist", MC_WAL_TABLE);
	LockRelationOid(tab, ShareRowExclusiveLock);

	rel = relation_open(relid, AccessShareLock);
	check_relation(rel);
	if (!McClassOwnercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
	/* the leaves are what the decoder sees; a partitioned table has no rows */
	leaves = find_all_inheritors(relid, AccessShareLock, NULL);
	foreach(lc, leaves)
	{
		Relation	leaf = relation_open(lfirst_oid(lc), NoLock);

		/* a partitioned one too: its columns must exist without a partition */
		check_templates(leaf, rel, elems, n);
		relation_close(leaf, NoLock);
	}
	srv = McServerLookup(server);
	McServerCheckWrite(srv);
	server = srv->name;

	if (!McWalWorkerPreloaded())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mcfdw is not in shared_preload_libraries"),
				 errdetail("The worker that delivers a watch's keys starts with the server."),
				 errhint("Add mcfdw to shared_preload_libraries and restart.")));
	if (strcmp(get_database_name(MyDatabaseId), mc_wal_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("watches live in database \"%s\", not in \"%s\"",
						mc_wal_database, get_database_name(MyDatabaseId)),
				 errhint("The worker that delivers them reads one database: set mcfdw.wal_database and restart, or watch from \"%s\".",
						 mc_wal_database)));
	if (wal_level < WAL_LEVEL_LOGICAL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("watches need wal_level \"logical\""),
				 errhint("Set wal_level = logical and restart.")));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ensure_slot();
	/*
	 * An update, else an insert (no ON CONFLICT on a user_catalog_table);
	 * the lock taken above keeps another mc_watch out in between.
	 */
	{
		char	   *qual = quote_qualified_identifier(get_namespace_name(get_rel_namespace(tab)),
													  MC_WAL_TABLE);
		Oid			types[5] = {REGCLASSOID, NAMEOID, TEXTARRAYOID, TEXTOID, TEXTOID};
		Datum		vals[5] = {ObjectIdGetDatum(relid), CStringGetDatum(server),
			PointerGetDatum(arr), CStringGetTextDatum(action),
		CStringGetTextDatum(on_truncate)};

		if (SPI_execute_with_args(psprintf("UPDATE %s SET templates = $3, action = $4, on_truncate = $5 "
										   "WHERE relid OPERATOR(pg_catalog.=) $1 AND server OPERATOR(pg_catalog.=) $2", qual),
								  5, types, vals, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not store the watch");
		if (SPI_processed == 0 &&
			SPI_execute_with_args(psprintf("INSERT INTO %s (relid, server, templates, action, on_truncate) "
										   "VALUES ($1, $2, $3, $4, $5)", qual),
								  5, types, vals, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not store the watch");
	}
	SPI_finish();
	relation_close(rel, AccessShareLock);
	PG_RETURN_VOID();
}

/*
 * mc_unwatch(tbl regclass, server name): stop watching a table (for one
 * server, or every one when NULL); true if a watch was removed.  Changes
 * committed before are still delivered.
 */
Datum
mc_unwatch(PG_FUNCTION_ARGS)
{
	Oid			tab = McWalDecodeTableOid();
	uint64		n;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	if (!OidIsValid(tab))
		elog(ERROR, "relation \"%s\" of extension mcfdw does not exist", MC_WAL_TABLE);
	if (!McClassOwnercheck(PG_GETARG_OID(0), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(PG_GETARG_OID(0)));
	LockRelationOid(tab, ShareRowExclusiveLock);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(psprintf("DELETE FROM %s.%s WHERE relid OPERATOR(pg_catalog.=) $1 "
									   "AND ($2 IS NULL OR server OPERATOR(pg_catalog.=) $2)",
									   quote_identifier(get_namespace_name(get_rel_namespace(tab))),
									   MC_WAL_TABLE),
							  2, (Oid[]) {OIDOID, NAMEOID},
							  (Datum[]) {PG_GETARG_DATUM(0),
							   PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1)},
							  PG_ARGISNULL(1) ? " n" : "  ", false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not remove the watch");
	n = SPI_processed;
	SPI_finish();
	PG_RETURN_BOOL(n > 0);
}

/*
 * mc_watches_drop(): the event trigger mcfdw_drop_watches, at sql_drop.  A
 * dropped table's watches go with it (its changes committed before are
 * still delivered: the decoder reads mc_watches as of each transaction),
 * so no orphan keeps the slot.  SECURITY DEFINER: whoever drops the table
 * need not be able to write mc_watches.
 */
Datum
mc_watches_drop(PG_FUNCTION_ARGS)
{
	Oid			tab;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("mc_watches_drop was not called by the event trigger manager")));
	tab = McWalDecodeTableOid();
	if (!OidIsValid(tab))
		PG_RETURN_VOID();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("DELETE FROM %s w USING pg_catalog.pg_event_trigger_dropped_objects() d "
							 "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
							 "AND d.objsubid OPERATOR(pg_catalog.=) 0 "
							 "AND d.objid OPERATOR(pg_catalog.=) w.relid::pg_catalog.oid",
							 quote_qualified_identifier(get_namespace_name(get_rel_namespace(tab)),
														MC_WAL_TABLE)),
					false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not remove the watches of dropped tables");
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * mc_watches_changed(): the statement trigger mc_watches_changed of
 * mc_watches, whoever writes it (mc_watch, mc_unwatch, the event trigger,
 * a restore, a hand-written statement): the worker learns of the change
 * at commit (McWalWorkerWatchesChanged).
 */
Datum
mc_watches_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("mc_watches_changed was not called by the trigger manager")));
	McWalWorkerWatchesChanged();
	return PointerGetDatum(NULL);
}
