/*
 * wal_decode.c — the logical decoding output plugin "mcfdw": committed
 * changes of watched tables as the keys to invalidate.
 *
 * Owns: _PG_output_plugin_init and its callbacks; reading the watches
 * (mc_watches, a user_catalog_table, so the decoder reads it as of each
 * decoded transaction: a watch added or changed applies to transactions
 * that commit after it); building a row's keys with the key template
 * parser (keytmpl.h), old and new for an UPDATE; the records of wal.h;
 * where mc_watches is and the slot's name, for wal_sql.c and wal_worker.c.
 * Must not: send anything (wal_worker.c does) or raise for a watch that no
 * longer fits its table (a 'W' record says so: an error here would stop
 * the whole stream).
 *
 * A change of a partition is matched against the watches of the partition
 * and of each of its ancestors; the templates are bound to the partition's
 * own columns, by name.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/partition.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/tuptable.h"
#include "foreign/foreign.h"
#include "nodes/bitmapset.h"
#include "replication/logical.h"
#include "replication/output_plugin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "keytmpl.h"
#include "pg_compat.h"
#include "wal.h"

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/* One watch bound to the descriptor of a changed relation. */
typedef struct BoundWatch
{
	Oid			relid;			/* the watched table (maybe an ancestor) */
	char		server[NAMEDATALEN];
	char		action;			/* 'D' or 'S' */
	char		on_truncate;	/* 'F' or 'I' */
	int			ntmpl;
	McKeyTmpl  *tmpl;
	bool		identity_ok;	/* the old row carries every template column */
	const char *problem;		/* why no keys can be built, or NULL */
	char	   *khead;			/* its 'K' records' head (put_head), made once */
	int			kheadlen;
} BoundWatch;

typedef struct RelWatches
{
	Oid			relid;			/* hash key: the changed relation */
	int			nwatch;
	BoundWatch *watch;
	FmgrInfo   *out;
	TupleTableSlot *slot;
} RelWatches;

typedef struct DecodeState
{
	MemoryContext cxt;			/* the current transaction's cache */
	MemoryContext rowcxt;
	HTAB	   *rels;
	RelWatches *last;			/* the entry of the relation changed last */
	List	   *watches;		/* of WatchRow, read once per transaction */
	bool		loaded;
	bool		wrote;			/* this transaction gave records */
	StringInfoData oldkey;
	StringInfoData newkey;
} DecodeState;

typedef struct WatchRow
{
	Oid			relid;
	char		server[NAMEDATALEN];
	char		action;
	char		on_truncate;
	List	   *templates;		/* of char * */
} WatchRow;

/* The schema of extension ext (PostgreSQL 15 exports no lookup for it). */
static Oid
extension_schema(Oid ext)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

Oid
McWalDecodeTableOid(void)
{
	Oid			ext = get_extension_oid("mcfdw", true);
	Oid			nsp;

	if (!OidIsValid(ext))
		return InvalidOid;
	nsp = extension_schema(ext);
	return OidIsValid(nsp) ? get_relname_relid(MC_WAL_TABLE, nsp) : InvalidOid;
}

/* The slot of a database's watches. */
void
McWalDecodeSlotName(Oid dbid, char *buf, size_t len)
{
	snprintf(buf, len, "mcfdw_%u", dbid);
}

/* mc_watches' columns (wal_sql.c creates the table in the install script) */
#define WCOL_RELID 1
#define WCOL_SERVER 2
#define WCOL_TEMPLATES 3
#define WCOL_ACTION 4
#define WCOL_TRUNCATE 5

/* Column c (1-based) of a deformed mc_watches row. */
static inline Datum
watch_col(const Datum *vals, const bool *nulls, int c, bool *isnull)
{
	*isnull = nulls[c - 1];
	return vals[c - 1];
}

static void
decode_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	DecodeState *st = palloc0(sizeof(DecodeState));

	st->cxt = AllocSetContextCreate(ctx->context, "mcfdw decoding",
									ALLOCSET_DEFAULT_SIZES);
	st->rowcxt = AllocSetContextCreate(ctx->context, "mcfdw decoding row",
									   ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&st->oldkey);
	initStringInfo(&st->newkey);
	ctx->output_plugin_private = st;
	opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;
}

static void
decode_shutdown(LogicalDecodingContext *ctx)
{
}

/* Forget the cache: the next transaction reads the watches as of itself. */
static void
decode_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	DecodeState *st = ctx->output_plugin_private;

	MemoryContextReset(st->cxt);
	st->rels = NULL;
	st->last = NULL;
	st->watches = NIL;
	st->loaded = false;
	st->wrote = false;
}

/* Read mc_watches (as of the decoded transaction). */
static void
load_watches(DecodeState *st)
{
	Oid			tab;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	MemoryContext old = MemoryContextSwitchTo(st->cxt);

	st->loaded = true;
	tab = McWalDecodeTableOid();
	if (!OidIsValid(tab))
	{
		MemoryContextSwitchTo(old);
		return;
	}
	rel = table_open(tab, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		WatchRow   *w = palloc0(sizeof(WatchRow));
		Datum	   *vals = palloc(sizeof(Datum) * desc->natts);
		bool	   *vnull = palloc(sizeof(bool) * desc->natts);
		bool		isnull;
		Datum		d;
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		char	   *s;

		/*
		 * heap_deform_tuple, not heap_getattr: the server-dev headers of
		 * some Debian builds inline a call into heap_getattr that other
		 * builds of the same major do not export.
		 */
		heap_deform_tuple(tup, desc, vals, vnull);
		d = watch_col(vals, vnull, WCOL_RELID, &isnull);
		if (isnull)
			continue;
		w->relid = DatumGetObjectId(d);
		d = watch_col(vals, vnull, WCOL_SERVER, &isnull);
		if (isnull)
			continue;
		strlcpy(w->server, NameStr(*DatumGetName(d)), NAMEDATALEN);
		d = watch_col(vals, vnull, WCOL_ACTION, &isnull);
		s = isnull ? "delete" : TextDatumGetCString(d);
		w->action = strcmp(s, "mark_stale") == 0 ? 'S' : 'D';
		d = watch_col(vals, vnull, WCOL_TRUNCATE, &isnull);
		s = isnull ? "flush" : TextDatumGetCString(d);
		w->on_truncate = strcmp(s, "ignore") == 0 ? 'I' : 'F';
		d = watch_col(vals, vnull, WCOL_TEMPLATES, &isnull);
		if (!isnull)
		{
			deconstruct_array(DatumGetArrayTypePCopy(d), TEXTOID, -1, false,
							  TYPALIGN_INT, &elems, &nulls, &n);
			for (int i = 0; i < n; i++)
				if (!nulls[i])
					w->templates = lappend(w->templates, TextDatumGetCString(elems[i]));
		}
		st->watches = lappend(st->watches, w);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	MemoryContextSwitchTo(old);
}

static void put_head(StringInfo out, char tag, char action, BoundWatch *b);

/* Bind watch w to the changed relation rel (in the transaction's cache). */
static void
bind_watch(BoundWatch *b, WatchRow *w, Relation rel, FmgrInfo *out)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Bitmapset  *ident = NULL;
	bool		full = rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL;
	ListCell   *lc;
	StringInfoData head;

	b->relid = w->relid;
	strlcpy(b->server, w->server, NAMEDATALEN);
	b->action = w->action;
	b->on_truncate = w->on_truncate;
	initStringInfo(&head);
	put_head(&head, 'K', b->action, b);
	b->khead = head.data;
	b->kheadlen = head.len;
	b->tmpl = palloc0(sizeof(McKeyTmpl) * Max(list_length(w->templates), 1));
	b->identity_ok = true;
	if (!full)
		ident = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);
	foreach(lc, w->templates)
	{
		const char *text = lfirst(lc);
		McKeyTmpl  *t = &b->tmpl[b->ntmpl];
		const char *why;
		char	   *col;

		if (text[0] == '@')		/* '@@...': a literal '@' (wal_sql.c refuses '@name') */
			text++;
		if (!McKeyTmplParse(t, text, desc, &why, &col))
		{
			b->problem = why ? psprintf("key template \"%s\": %s", text, why)
				: psprintf("column \"%s\" of key template \"%s\" is not in relation \"%s\"",
						   col, text, RelationGetRelationName(rel));
			return;
		}
		McKeyTmplOutputs(t, desc, out, CurrentMemoryContext);
		for (int i = 0; i < t->nparts && !full; i++)
			if (t->parts[i].attnum > 0 &&
				!bms_is_member(t->parts[i].attnum - FirstLowInvalidHeapAttributeNumber, ident))
				b->identity_ok = false;
		b->ntmpl++;
	}
}

/* The watches that apply to a change of rel (its own and its ancestors'). */
static RelWatches *
rel_watches(DecodeState *st, Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	RelWatches *rw;
	bool		found;
	List	   *ids;
	ListCell   *lc;
	MemoryContext old;

	/* a transaction's changes come in runs of one relation */
	if (st->last != NULL && st->last->relid == relid)
		return st->last;
	if (!st->loaded)
		load_watches(st);
	if (st->watches == NIL)
		return NULL;
	old = MemoryContextSwitchTo(st->cxt);
	if (st->rels == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(RelWatches);
		ctl.hcxt = st->cxt;
		st->rels = hash_create("mcfdw decoded relations", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	rw = hash_search(st->rels, &relid, HASH_ENTER, &found);
	st->last = rw;
	if (found)
	{
		MemoryContextSwitchTo(old);
		return rw;
	}
	rw->nwatch = 0;
	rw->watch = palloc0(sizeof(BoundWatch) * list_length(st->watches));
	rw->out = palloc0(sizeof(FmgrInfo) * Max(RelationGetDescr(rel)->natts, 1));
	rw->slot = NULL;
	ids = list_make1_oid(relid);
	if (rel->rd_rel->relispartition)
		ids = list_concat(ids, get_partition_ancestors(relid));
	foreach(lc, st->watches)
	{
		WatchRow   *w = lfirst(lc);

		if (list_member_oid(ids, w->relid))
			bind_watch(&rw->watch[rw->nwatch++], w, rel, rw->out);
	}
	/* with its constraints: a row older than an added column reads its default */
	if (rw->nwatch > 0)
		rw->slot = MakeSingleTupleTableSlot(CreateTupleDescCopyConstr(RelationGetDescr(rel)),
											&TTSOpsHeapTuple);
	MemoryContextSwitchTo(old);
	return rw;
}

static void
put_head(StringInfo out, char tag, char action, BoundWatch *b)
{
	appendStringInfoChar(out, tag);
	if (action)
		appendStringInfoChar(out, action);
	{
		uint32		n = pg_hton32(b->relid);

		appendBinaryStringInfo(out, (char *) &n, 4);
	}
	appendBinaryStringInfo(out, b->server, strlen(b->server) + 1);
}

static void
write_key(LogicalDecodingContext *ctx, BoundWatch *b, StringInfo key)
{
	DecodeState *st = ctx->output_plugin_private;

	OutputPluginPrepareWrite(ctx, true);
	appendBinaryStringInfo(ctx->out, b->khead, b->kheadlen);
	appendBinaryStringInfo(ctx->out, key->data, key->len);
	OutputPluginWrite(ctx, true);
	st->wrote = true;
}

static void
write_warning(LogicalDecodingContext *ctx, BoundWatch *b, const char *msg)
{
	DecodeState *st = ctx->output_plugin_private;

	OutputPluginPrepareWrite(ctx, true);
	put_head(ctx->out, 'W', 0, b);
	appendStringInfoString(ctx->out, msg);
	OutputPluginWrite(ctx, true);
	st->wrote = true;
}

/*
 * Build t's key of tuple tup; false when a column is NULL or is an unchanged
 * TOASTed value the decoder does not have (*missing then).
 */
static bool
tuple_key(RelWatches *rw, McKeyTmpl *t, HeapTuple tup, StringInfo buf, bool *missing)
{
	TupleTableSlot *slot = rw->slot;

	*missing = false;
	ExecStoreHeapTuple(tup, slot, false);
	for (int i = 0; i < t->nparts; i++)
	{
		AttrNumber	a = t->parts[i].attnum;
		Form_pg_attribute att;
		Datum		d;
		bool		isnull;

		if (a == 0)
			continue;
		att = TupleDescAttr(slot->tts_tupleDescriptor, a - 1);
		d = slot_getattr(slot, a, &isnull);
		if (!isnull && att->attlen == -1 && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)))
		{
			*missing = true;
			ExecClearTuple(slot);
			return false;
		}
	}
	if (!McKeyTmplBuild(t, slot, rw->out, buf))
	{
		ExecClearTuple(slot);
		return false;
	}
	ExecClearTuple(slot);
	return true;
}

static void
decode_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  Relation rel, ReorderBufferChange *change)
{
	DecodeState *st = ctx->output_plugin_private;
	RelWatches *rw = rel_watches(st, rel);
	HeapTuple	oldtup = NULL;
	HeapTuple	newtup = NULL;
	MemoryContext old;

	if (rw == NULL || rw->nwatch == 0)
		return;
	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			if (change->data.tp.newtuple)
				newtup = McChangeTuple(change->data.tp.newtuple);
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			if (change->data.tp.oldtuple)
				oldtup = McChangeTuple(change->data.tp.oldtuple);
			if (change->data.tp.newtuple)
				newtup = McChangeTuple(change->data.tp.newtuple);
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			if (change->data.tp.oldtuple)
				oldtup = McChangeTuple(change->data.tp.oldtuple);
			break;
		default:
			return;
	}
	old = MemoryContextSwitchTo(st->rowcxt);
	for (int w = 0; w < rw->nwatch; w++)
	{
		BoundWatch *b = &rw->watch[w];
		bool		is_update = change->action == REORDER_BUFFER_CHANGE_UPDATE;
		bool		is_delete = change->action == REORDER_BUFFER_CHANGE_DELETE;
		HeapTuple	wold;

		if (b->problem)
		{
			write_warning(ctx, b, b->problem);
			continue;
		}
		/*
		 * The logged old row has only the identity's columns (the others
		 * read as NULL): without every key column in it, the old key is
		 * unknown.  An UPDATE still gives its new key.
		 */
		wold = b->identity_ok ? oldtup : NULL;
		if ((is_update || is_delete) && !b->identity_ok)
		{
			write_warning(ctx, b, psprintf("the old row of %s of \"%s\" lacks key columns: they are not in its replica identity",
										   is_update ? "an UPDATE" : "a DELETE",
										   RelationGetRelationName(rel)));
			if (is_delete)
				continue;
		}
		if (is_delete && wold == NULL)
		{
			write_warning(ctx, b, psprintf("a DELETE of \"%s\" logged no old row (REPLICA IDENTITY NOTHING)",
										   RelationGetRelationName(rel)));
			continue;
		}
		for (int i = 0; i < b->ntmpl; i++)
		{
			McKeyTmpl  *t = &b->tmpl[i];
			bool		have_old = false;
			bool		missing;

			/*
			 * An UPDATE logs the old row only when its identity changed (or
			 * with REPLICA IDENTITY FULL): otherwise the key columns, all in
			 * the identity, are the new row's, and so is the old key.
			 */
			if (wold != NULL)
			{
				have_old = tuple_key(rw, t, wold, &st->oldkey, &missing);
				if (have_old)
					write_key(ctx, b, &st->oldkey);
			}
			if (newtup == NULL)
				continue;
			if (!tuple_key(rw, t, newtup, &st->newkey, &missing))
			{
				if (missing && !have_old)
					write_warning(ctx, b, psprintf("a key column of \"%s\" is an unchanged TOASTed value the log does not carry",
												   RelationGetRelationName(rel)));
				continue;
			}
			if (have_old && st->oldkey.len == st->newkey.len &&
				memcmp(st->oldkey.data, st->newkey.data, st->newkey.len) == 0)
				continue;
			write_key(ctx, b, &st->newkey);
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->rowcxt);
}

static void
decode_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				int nrelations, Relation relations[], ReorderBufferChange *change)
{
	DecodeState *st = ctx->output_plugin_private;

	for (int r = 0; r < nrelations; r++)
	{
		RelWatches *rw = rel_watches(st, relations[r]);

		if (rw == NULL)
			continue;
		for (int w = 0; w < rw->nwatch; w++)
		{
			BoundWatch *b = &rw->watch[w];

			OutputPluginPrepareWrite(ctx, true);
			put_head(ctx->out, 'T', b->on_truncate, b);
			OutputPluginWrite(ctx, true);
			st->wrote = true;
		}
	}
}

static void
decode_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	DecodeState *st = ctx->output_plugin_private;
	int64		ts;

	if (!st->wrote)
		return;
	OutputPluginPrepareWrite(ctx, true);
	appendStringInfoChar(ctx->out, 'C');
	ts = (int64) pg_hton64((uint64) txn->xact_time.commit_time);
	appendBinaryStringInfo(ctx->out, (char *) &ts, 8);
	OutputPluginWrite(ctx, true);
	st->wrote = false;
}

/* Only this database's changes reach a slot; skip none by origin. */
void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = decode_startup;
	cb->begin_cb = decode_begin;
	cb->change_cb = decode_change;
	cb->truncate_cb = decode_truncate;
	cb->commit_cb = decode_commit;
	cb->shutdown_cb = decode_shutdown;
}
