/*
 * fdw_table.c — a foreign table of the mcfdw wrapper: which column holds
 * which item field, its options, and how values cross between SQL types
 * and the bytes memcached stores.
 *
 * Owns: the column rules (matched by the column option "field", else by
 * name; "key" is required and text or varchar; flags, cas and ttl are
 * whole numbers), the table's key prefix, and the value conversions: text
 * and varchar as their bytes (checked against the database encoding when
 * read), bytea as it is, any other type through its input and output
 * functions; a value read for any type but bytea decoded and refused as
 * mc_get decodes and refuses text (inflated when compressed, no serialized
 * object), for every scan and join alike.  What a table's catalog rows say is kept per backend, keyed
 * by the table, and read again after a relcache invalidation of it (which
 * ALTER FOREIGN TABLE, its column options and renames send, from any
 * session): planning and starting every scan would otherwise read the
 * table's and each column's options again.  Must not: plan or touch
 * connections.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "fdw.h"

/* Check that a field's column has a type the wrapper can convert. */
static void
check_type(Relation rel, McField f, Form_pg_attribute att)
{
	Oid			t = att->atttypid;
	bool		ok;

	switch (f)
	{
		case MC_FIELD_KEY:
			ok = (t == TEXTOID || t == VARCHAROID);
			break;
		case MC_FIELD_FLAGS:
		case MC_FIELD_TTL:
			ok = (t == INT4OID || t == INT8OID);
			break;
		case MC_FIELD_CAS:
			ok = (t == INT8OID);
			break;
		default:
			ok = true;
			break;
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("column \"%s\" of foreign table \"%s\" cannot hold the memcached field \"%s\"",
						NameStr(att->attname), RelationGetRelationName(rel),
						McFieldName(f)),
				 errdetail("Its type is %s.", format_type_be(t)),
				 errhint(f == MC_FIELD_KEY ? "The key column must be text or varchar." :
						 f == MC_FIELD_CAS ? "The cas column must be bigint." :
						 "The flags and ttl columns must be integer or bigint.")));
}

/* A table as last read, valid until a relcache invalidation of it. */
typedef struct McTableCacheEntry
{
	Oid			relid;			/* the hash key */
	bool		valid;
	McTable		t;				/* t.opts.key_prefix in CacheMemoryContext */
} McTableCacheEntry;

static HTAB *table_cache = NULL;
static uint64 table_cache_invals = 0;	/* invalidations seen, to tell one during a load */

/* A relation changed (InvalidOid: any may have): read it again when used. */
static void
table_cache_inval(Datum arg, Oid relid)
{
	McTableCacheEntry *e;

	table_cache_invals++;
	if (OidIsValid(relid))
	{
		e = hash_search(table_cache, &relid, HASH_FIND, NULL);
		if (e != NULL)
			e->valid = false;
	}
	else
	{
		HASH_SEQ_STATUS seq;

		hash_seq_init(&seq, table_cache);
		while ((e = hash_seq_search(&seq)) != NULL)
			e->valid = false;
	}
}

static void load_table(Relation rel, McTable *t);

/*
 * A foreign table as the wrapper reads it (load_table), from this
 * backend's cache.  t gets its own copy of the key prefix, so a reload
 * while t is in use cannot free it from under its user.
 */
void
McTableLoad(Relation rel, McTable *t)
{
	Oid			relid = RelationGetRelid(rel);
	McTableCacheEntry *e;
	bool		found;

	if (table_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(McTableCacheEntry);
		ctl.hcxt = CacheMemoryContext;
		table_cache = hash_create("mcfdw foreign tables", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(table_cache_inval, (Datum) 0);
	}
	e = hash_search(table_cache, &relid, HASH_ENTER, &found);
	if (!found)
	{
		e->valid = false;
		e->t.opts.key_prefix = NULL;
	}
	if (!e->valid)
	{
		McTable		fresh;
		char	   *old_prefix = e->t.opts.key_prefix;
		uint64		invals = table_cache_invals;

		/*
		 * Raises for a table it cannot read: the entry stays invalid.  The
		 * catalog reads may take locks and so take in invalidations: if
		 * one came during the load, what was read is used this once.
		 */
		load_table(rel, &fresh);
		fresh.opts.key_prefix = MemoryContextStrdup(CacheMemoryContext,
													fresh.opts.key_prefix ? fresh.opts.key_prefix : "");
		e->t = fresh;
		e->valid = (invals == table_cache_invals);
		if (old_prefix != NULL)
			pfree(old_prefix);
	}
	*t = e->t;
	t->opts.key_prefix = pstrdup(e->t.opts.key_prefix);
}

/*
 * Read a foreign table's options and columns.  A column with the option
 * "field" holds that field; other columns whose name is a field's hold it;
 * the rest are always NULL.  Raises if no column is the key or two hold
 * the same field.
 */
static void
load_table(Relation rel, McTable *t)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));
	AttrNumber	byname[MC_NFIELDS] = {0};

	memset(t, 0, sizeof(*t));
	t->relid = RelationGetRelid(rel);
	t->serverid = ft->serverid;
	McOptionsParseTable(ft->options, &t->opts);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		McColumnOptions copts;
		McField		f;

		if (att->attisdropped)
			continue;
		McOptionsParseColumn(GetForeignColumnOptions(t->relid, att->attnum), &copts);
		if (copts.field != MC_FIELD_NONE)
		{
			f = copts.field;
			if (t->attnum[f] != 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_COLUMN_NAME),
						 errmsg("two columns of foreign table \"%s\" hold the memcached field \"%s\"",
								RelationGetRelationName(rel), McFieldName(f))));
			t->attnum[f] = att->attnum;
		}
		else if ((f = McFieldFromName(NameStr(att->attname))) != MC_FIELD_NONE)
			byname[f] = att->attnum;
	}
	for (int f = 0; f < MC_NFIELDS; f++)
	{
		if (t->attnum[f] == 0)
		{
			/* a name is taken by a column that holds another field: not this one */
			AttrNumber	a = byname[f];
			bool		taken = false;

			for (int g = 0; g < MC_NFIELDS; g++)
				if (a != 0 && t->attnum[g] == a)
					taken = true;
			if (!taken)
				t->attnum[f] = a;
		}
		if (t->attnum[f] != 0)
		{
			Form_pg_attribute att = TupleDescAttr(desc, t->attnum[f] - 1);

			check_type(rel, (McField) f, att);
			t->atttype[f] = att->atttypid;
		}
	}
	if (t->attnum[MC_FIELD_KEY] == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
				 errmsg("foreign table \"%s\" has no key column", RelationGetRelationName(rel)),
				 errhint("Name a text column \"key\", or give one the column option field 'key'.")));
}

/*
 * One hit of a multi-get (run.h) as a row of the table: every
 * attribute's value and null flag (natts of each), the fields the reply
 * lacks and columns holding no field NULL.  given is the key column's
 * value (the key without the table's prefix, McTableKeyWithoutPrefix, which
 * the scan has at hand); a compressed value is inflated through srv, and
 * checked as mc_get checks a value (McTableColumnCheck).  A
 * by-reference value may lie in the reply's buffer: copy what must outlive
 * the hit.  A value the column's type refuses is an error naming the key.
 */
void
McTableRowFromReply(const McTable *t, McColumnIO *vio, McServer *srv, Datum given,
			   char *base, const McReply *r, Datum *values, bool *nulls, int natts)
{
	AttrNumber	a;

	memset(nulls, true, sizeof(bool) * natts);
	values[t->attnum[MC_FIELD_KEY] - 1] = given;
	nulls[t->attnum[MC_FIELD_KEY] - 1] = false;
	if ((a = t->attnum[MC_FIELD_VALUE]) != 0 && r->type == MC_REPLY_VA)
	{
		text	   *k = DatumGetTextPP(given);
		char	   *data = base + r->value_off;
		size_t		len = r->value_len;

		if ((r->present & MC_F_FLAGS) && McValueCompressed(&srv->cfg, r->client_flags))
		{
			McZStatus	st;
			struct varlena *v = McValueDecode(srv, data, len, true,
											  r->client_flags, &st);

			if (v == NULL)
				McValueRaise(srv, st, VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
			data = VARDATA(v);
			len = VARSIZE(v) - VARHDRSZ;
		}
		values[a - 1] = McTableColumnRead(vio, srv, r, data, len, VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
		nulls[a - 1] = false;
	}
	if ((a = t->attnum[MC_FIELD_FLAGS]) != 0 && (r->present & MC_F_FLAGS))
	{
		values[a - 1] = t->atttype[MC_FIELD_FLAGS] == INT8OID ?
			Int64GetDatum((int64) r->client_flags) : Int32GetDatum((int32) r->client_flags);
		nulls[a - 1] = false;
	}
	if ((a = t->attnum[MC_FIELD_CAS]) != 0 && (r->present & MC_F_CAS))
	{
		values[a - 1] = Int64GetDatum((int64) r->cas);
		nulls[a - 1] = false;
	}
	/* -1 is "never expires": NULL, as a NULL ttl writes no expiry */
	if ((a = t->attnum[MC_FIELD_TTL]) != 0 && (r->present & MC_F_TTL) && r->ttl >= 0)
	{
		values[a - 1] = t->atttype[MC_FIELD_TTL] == INT8OID ?
			Int64GetDatum(r->ttl) : Int32GetDatum((int32) Min(r->ttl, PG_INT32_MAX));
		nulls[a - 1] = false;
	}
}

McColumnKind
McTableColumnKindOf(Oid type)
{
	if (type == TEXTOID || type == VARCHAROID)
		return MC_VALUE_TEXT;
	if (type == BYTEAOID)
		return MC_VALUE_BYTEA;
	return MC_VALUE_IO;
}

/* The table's key prefix, then the key: the key as the server sees it. */
Datum
McTableKeyWithPrefix(const McTable *t, Datum key)
{
	text	   *k = DatumGetTextPP(key);
	size_t		len = VARSIZE_ANY_EXHDR(k);
	size_t		plen = t->opts.key_prefix_len;
	text	   *r;

	if (plen == 0)
		return PointerGetDatum(k);
	r = palloc(VARHDRSZ + plen + len);
	SET_VARSIZE(r, VARHDRSZ + plen + len);
	memcpy(VARDATA(r), t->opts.key_prefix, plen);
	memcpy(VARDATA(r) + plen, VARDATA_ANY(k), len);
	return PointerGetDatum(r);
}

/* The inverse: the key column's value of a key McTableKeyWithPrefix made. */
Datum
McTableKeyWithoutPrefix(const McTable *t, Datum key)
{
	text	   *k = DatumGetTextPP(key);
	size_t		plen = t->opts.key_prefix_len;

	if (plen == 0)
		return key;
	Assert(VARSIZE_ANY_EXHDR(k) >= plen);
	return PointerGetDatum(cstring_to_text_with_len(VARDATA_ANY(k) + plen,
													VARSIZE_ANY_EXHDR(k) - plen));
}

void
McTableColumnIOInit(McColumnIO *io, Oid type, int32 typmod)
{
	Oid			func;
	bool		isvarlena;

	memset(io, 0, sizeof(*io));
	io->kind = McTableColumnKindOf(type);
	io->type = type;
	io->typmod = typmod;
	if (io->kind == MC_VALUE_IO)
	{
		getTypeInputInfo(type, &func, &io->ioparam);
		fmgr_info(func, &io->in);
		getTypeOutputInfo(type, &func, &isvarlena);
		fmgr_info(func, &io->out);
	}
}

/* A varlena of the value's bytes, in place when a short header fits before it. */
static Datum
bytes_datum(char *v, size_t len)
{
	struct varlena *p;

	if (len + VARHDRSZ_SHORT <= VARATT_SHORT_MAX)
	{
		/* the byte before the value is its reply header's: ours to overwrite */
		p = (struct varlena *) (v - VARHDRSZ_SHORT);
		SET_VARSIZE_SHORT(p, len + VARHDRSZ_SHORT);
		return PointerGetDatum(p);
	}
	if (len > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("memcached value of %zu bytes is too large", len)));
	p = palloc(len + VARHDRSZ);
	SET_VARSIZE(p, len + VARHDRSZ);
	memcpy(VARDATA(p), v, len);
	return PointerGetDatum(p);
}

/*
 * The fields a scan or batched join asks for to read the value column as
 * mc_get reads a value: the flags too when they may say it is compressed,
 * or (for a column that is not bytea) a serialized object.
 */
unsigned
McTableColumnFields(McServer *srv, const McColumnIO *io, unsigned want)
{
	if ((want & MC_F_VALUE) &&
		(srv->cfg.compression ||
		 (srv->cfg.serialized_flag != 0 && io->kind != MC_VALUE_BYTEA)))
		want |= MC_F_FLAGS;
	return want;
}

/*
 * Raise unless a stored value (of reply r, inflated if it was compressed)
 * can be the value column's bytes, as mc_get decides for text: no
 * serialized object for any type but bytea, and text valid in the
 * database encoding (McValueTextValid refuses NUL bytes too); bytea takes any.
 */
void
McTableColumnCheck(const McColumnIO *io, McServer *srv, const McReply *r,
			  const char *v, size_t len, const char *key, size_t keylen)
{
	if (io->kind == MC_VALUE_BYTEA)
		return;
	McValueCheckText(srv, (r->present & MC_F_FLAGS) != 0, r->client_flags, key, keylen,
					 "Declare the value column bytea to read its bytes");
	if (!McValueTextValid(v, len))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("value of memcached key \"%.*s\" is not valid in encoding \"%s\"",
						(int) keylen, key, GetDatabaseEncodingName()),
				 errhint("Declare the value column bytea to read binary values.")));
}

/*
 * A stored value (of reply r, see McTableColumnCheck) as the value column's
 * type.  v lies in the read buffer, and the bytes before it may be
 * overwritten.  A value the type does not accept is an error naming the
 * key (the primary message), with the type's own complaint as the detail.
 */
Datum
McTableColumnRead(McColumnIO *io, McServer *srv, const McReply *r, char *v, size_t len,
			 const char *key, size_t keylen)
{
	char	   *str;
	Datum		d = (Datum) 0;
	MemoryContext cxt = CurrentMemoryContext;

	McTableColumnCheck(io, srv, r, v, len, key, keylen);
	if (io->kind != MC_VALUE_IO)
		return bytes_datum(v, len);

	str = palloc(len + 1);
	memcpy(str, v, len);
	str[len] = '\0';
	PG_TRY();
	{
		d = InputFunctionCall(&io->in, str, io->ioparam, io->typmod);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		/* only a value the type refuses is reworded; anything else goes on as it is */
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(edata->sqlerrcode),
				 errmsg("value of memcached key \"%.*s\" is not a valid %s",
						(int) keylen, key, format_type_be(io->type)),
				 errdetail("%s", edata->message)));
	}
	PG_END_TRY();
	pfree(str);
	return d;
}

/* A column value as the bytes to store (*len of them). */
const char *
McTableColumnWrite(McColumnIO *io, Datum d, size_t *len)
{
	if (io->kind == MC_VALUE_IO)
	{
		char	   *s = OutputFunctionCall(&io->out, d);

		*len = strlen(s);
		return s;
	}
	else
	{
		struct varlena *v = PG_DETOAST_DATUM_PACKED(d);

		*len = VARSIZE_ANY_EXHDR(v);
		return VARDATA_ANY(v);
	}
}
