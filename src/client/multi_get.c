/*
 * multi_get.c — mc_get_multi / mc_get_multi_bytea: many keys, one round.
 *
 * Owns: the SQL face of a multi-get: the key array handed to the runner
 * (run.c) as one read, and each hit turned into the row SQL receives.  The
 * value is copied once, into the tuple (laid out by rowlayout.c for the
 * common row); a value the client compressed is inflated (values.c) into
 * one buffer kept for the call and copied from there.  Rows go to a
 * tuplestore, which spills to disk past work_mem.  Must not: route, encode
 * or read requests (the runner does), or allocate per key or per reply.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "access/htup_details.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "run.h"
#include "rowlayout.h"
#include "health.h"
#include "server.h"
#include "server_cache.h"
#include "values.h"

PG_FUNCTION_INFO_V1(mc_get_multi);
PG_FUNCTION_INFO_V1(mc_get_multi_bytea);

/* Everything a call needs to turn hits into rows. */
typedef struct MgBatch
{
	McServer   *srv;
	bool		as_text;
	Tuplestorestate *tupstore;
	TupleDesc	tupdesc;
	char	   *scratch;		/* for values whose header cannot be written in place */
	size_t		scratch_len;
	bool		rows_by_hand;	/* the result type is one McRowPut lays out */
	char	   *rowbuf;			/* McRowPut's tuple, reused for every row */
	char	   *inflated;		/* compressed values inflate here (values.c) */
	size_t		inflated_cap;
} MgBatch;

/*
 * The row's datums for the general path (tuplestore_putvalues).  The value
 * is used where it lies in the read buffer: a varlena header is written
 * over the already-parsed reply header just before it, so the tuple builder
 * copies the value once.  A 4-byte header must be aligned; when it cannot
 * be, the value goes through the scratch buffer.
 */
static void
row_datums(MgBatch *b, Datum key, char *v, size_t len, const McReply *r,
		   Datum *values, bool *nulls)
{
	char	   *p;

	if (len + VARHDRSZ_SHORT <= VARATT_SHORT_MAX)
	{
		p = v - VARHDRSZ_SHORT;
		SET_VARSIZE_SHORT(p, len + VARHDRSZ_SHORT);
	}
	else if (len <= MaxAllocSize - VARHDRSZ &&
			 (((uintptr_t) (v - VARHDRSZ)) % sizeof(int32)) == 0)
	{
		p = v - VARHDRSZ;
		SET_VARSIZE(p, len + VARHDRSZ);
	}
	else
	{
		/* a 4-byte header must be aligned: use the scratch buffer */
		if (len > MaxAllocSize - VARHDRSZ)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("memcached value of %zu bytes is too large", len)));
		if (b->scratch_len < len + VARHDRSZ)
		{
			b->scratch_len = Max(len + VARHDRSZ, 2 * b->scratch_len);
			b->scratch = b->scratch ? repalloc(b->scratch, b->scratch_len)
				: palloc(b->scratch_len);
		}
		p = b->scratch;
		SET_VARSIZE(p, len + VARHDRSZ);
		memcpy(VARDATA(p), v, len);
	}
	values[0] = key;
	values[1] = PointerGetDatum(p);
	nulls[0] = nulls[1] = false;
	nulls[2] = !(r->present & MC_F_FLAGS);
	values[2] = Int32GetDatum(nulls[2] ? 0 : (int32) r->client_flags);
}

/* The general path: row_datums, then tuplestore_putvalues. */
static pg_noinline void
put_datums(MgBatch *b, Datum key, char *v, size_t len, const McReply *r)
{
	Datum		values[3];
	bool		nulls[3];

	row_datums(b, key, v, len, r, values, nulls);
	tuplestore_putvalues(b->tupstore, b->tupdesc, values, nulls);
}

/*
 * The value v (len bytes) of key as a row: laid out by hand (rowlayout.c)
 * for the common row, else the general path (put_datums).
 */
static pg_attribute_always_inline void
put_row(MgBatch *b, Datum key, char *v, size_t len, const McReply *r)
{
	if (unlikely(b->as_text && b->srv->cfg.serialized_flag != 0))
		McValueCheckText(b->srv, (r->present & MC_F_FLAGS) != 0, r->client_flags,
						 VARDATA_ANY(DatumGetPointer(key)), VARSIZE_ANY_EXHDR(DatumGetPointer(key)), MC_BYTEA_HINT);
	if (b->as_text && !McValueTextValid(v, len))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("value of memcached key \"%.*s\" is not valid in encoding \"%s\"",
						(int) VARSIZE_ANY_EXHDR(DatumGetPointer(key)), VARDATA_ANY(DatumGetPointer(key)), GetDatabaseEncodingName()),
				 errhint("Use mc_get_multi_bytea() to read binary values.")));
	if (b->rows_by_hand && (r->present & MC_F_FLAGS) &&
		McRowPut(b->tupstore, b->tupdesc, &b->rowbuf, key, v, len,
				 (int32) r->client_flags))
		return;
	put_datums(b, key, v, len, r);
}

/* A value the client compressed, inflated into a buffer kept for the call. */
static pg_noinline void
put_inflated(MgBatch *b, Datum key, char *v, size_t len, const McReply *r)
{
	v = McValueInflateInto(b->srv, v, len, &b->inflated, &b->inflated_cap, &len,
						   VARDATA_ANY(DatumGetPointer(key)), VARSIZE_ANY_EXHDR(DatumGetPointer(key)));
	put_row(b, key, v, len, r);
}

/*
 * Turn a VA reply into a row (the runner's hit).  No local whose address
 * is taken, so no stack guard per hit: the rare paths are calls of their
 * own.
 */
static void
emit_row(void *arg, Datum key, char *base, const McReply *r)
{
	MgBatch    *b = arg;

	if (unlikely((r->present & MC_F_FLAGS) && McValueCompressed(&b->srv->cfg, r->client_flags)))
		put_inflated(b, key, base + r->value_off, r->value_len, r);
	else
		put_row(b, key, base + r->value_off, r->value_len, r);
}

/* Shared body of the two SQL functions. */
static Datum
get_multi_common(FunctionCallInfo fcinfo, bool as_text)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MgBatch		b;
	McRun		run = {.want = MC_F_VALUE | MC_F_FLAGS,.hit = emit_row,.arg = &b};
	MemoryContext work;
	MemoryContext old;
	int			nkeys;

	McCsSetOp(MC_CS_GET_MULTI);
	/*
	 * The row type the caller expects is the declared one: taking it saves
	 * reading the OUT parameters from pg_proc on every call (about half of
	 * a call's fixed instructions).  Without one, the declaration is read.
	 */
	InitMaterializedSRF(fcinfo, rsinfo != NULL && IsA(rsinfo, ReturnSetInfo) &&
						rsinfo->expectedDesc != NULL ? MAT_SRF_USE_EXPECTED_DESC : 0);
	if (PG_ARGISNULL(0))
		return (Datum) 0;

	memset(&b, 0, sizeof(b));
	b.srv = McServerLookup(PG_ARGISNULL(1) ? NULL : NameStr(*PG_GETARG_NAME(1)));
	b.as_text = as_text;
	b.tupstore = rsinfo->setResult;
	b.tupdesc = rsinfo->setDesc;
	b.rows_by_hand = McRowLayoutFits(b.tupdesc);

	/* per-call work memory, freed at the end (or with the query on error) */
	work = AllocSetContextCreate(CurrentMemoryContext, "mcfdw multi-get",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &nulls, &n);
		run.keys = elems;
		run.nulls = nulls;
		run.nkeys = n;
		nkeys = McRunExec(b.srv, &run);
	}
	MemoryContextSwitchTo(old);
	/* what a batch costs in work memory (the run's too), for the allocation budget test */
	if (message_level_is_interesting(DEBUG1))
		elog(DEBUG1, "mcfdw: mc_get_multi of %d keys used %zu bytes of work memory",
			 nkeys, MemoryContextMemAllocated(work, true) + run.mem_used);
	MemoryContextDelete(work);
	return (Datum) 0;
}

/* mc_get_multi(keys text[], server name) returns (key text, value text, flags integer). */
Datum
mc_get_multi(PG_FUNCTION_ARGS)
{
	return get_multi_common(fcinfo, true);
}

/* mc_get_multi_bytea(keys text[], server name) returns (key text, value bytea, flags integer). */
Datum
mc_get_multi_bytea(PG_FUNCTION_ARGS)
{
	return get_multi_common(fcinfo, false);
}
