/*
 * fdw_fullscan.c — a scan of a foreign table with no key condition (table
 * option allow_full_scan 'true', and the server's: checked again when the
 * scan starts), and the item counts planning estimates such scans from.
 *
 * Owns: listing the keys of every live instance of the server with
 * "lru_crawler metadump hash" ("all" on a memcached without the hash walk),
 * every instance's dump at once (a run of dump ops, run.h), each
 * line parsed (metadump.c), keeping those under
 * the server's key prefix followed by the table's, in a tuplestore (which
 * spills to disk past work_mem, so memory stays bounded whatever the size
 * of the cache) with the instance that listed each, so that an instance
 * whose dump fails part-way under on_failure 'miss' lists none, and the
 * bound of each instance's dump (twice what its stats say it can hold:
 * dump_bound), past which the dump is the scan's error; then
 * handing them out in batches of MC_FULLSCAN_BATCH keys to the pipelined
 * multi-get (McRunGets), whose hits fdw_scan.c turns into rows.  The keys are all listed before the first is fetched: a dump
 * holds its instance's connection until its END.  ANALYZE's sample is a
 * bounded random choice among the listed keys, fetched the same way.  Also
 * owns the per-server item counts ("curr_items" of the stats command, a
 * run of the runner's: McRunStats, and each instance's "limit_maxbytes"
 * for the dumps' bounds), asked with a short bound and kept for
 * MC_COUNT_TTL_S in this backend.  Must not: build rows, plan
 * paths (fdw.c), or touch a connection (the runner runs the dumps).
 *
 * What a full scan cannot list: items whose key cannot be a key of the
 * table — a NUL byte or bytes invalid in the database encoding (the key
 * column is text), a key Dalli digested (long_keys 'dalli': the digest is
 * not the key the application used, and reading it back would not find
 * the item), a key that needs base64 but is longer than MC_KEY_MAX_B64
 * (it could not be sent) — and items written or expired while the dump
 * runs, which may or may not be listed.  An item listed but gone by the
 * time it is fetched gives no row.
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/pg_prng.h"
#include "commands/explain.h"
#include "executor/tuptable.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "fdw.h"
#include "metadump.h"
#include "engine.h"
#include "run.h"

/* Keys per pipelined multi-get of a full scan. */
#define MC_FULLSCAN_BATCH	1000
/* How long a server's item count is kept, and the bound on asking for it. */
#define MC_COUNT_TTL_S		30
#define MC_COUNT_LIMIT_MS	250
#define MC_COUNT_SLOTS		16

/*
 * How long a dump answered BUSY is retried: a crawl a cancelled scan left
 * running ends when memcached next writes to the closed socket.
 */
#define MC_BUSY_WAIT_MS		2000
#define MC_BUSY_STEP_MS		50

/*
 * The most keys an instance's dump may list (dump_bound): twice what the
 * instance can hold, plus MC_DUMP_SLACK.  What it can hold is the larger of
 * its item count and its memory limit over MC_ITEM_MIN_BYTES (memcached's
 * item header alone is 48 bytes, so no item takes less); twice that, for
 * the items written while the dump runs (they may be listed, and under
 * eviction new items take the place of ones already walked past), and the
 * slack for an instance near empty that is written to meanwhile.  An
 * instance whose "stats" could not be read (planning's bound passed, or it
 * is not memcached's) may list MC_DUMP_UNKNOWN keys.
 */
#define MC_ITEM_MIN_BYTES	48
#define MC_DUMP_SLACK		10000
#define MC_DUMP_UNKNOWN		UINT64CONST(10000000)

/* What an instance's "stats" says of its size: the bound of its dump. */
typedef struct InstSize
{
	bool		known;			/* it answered with curr_items or limit_maxbytes */
	double		items;			/* curr_items */
	double		maxbytes;		/* limit_maxbytes */
} InstSize;

/* One instance's dump, while the dumps of every instance run together. */
typedef struct DumpInst
{
	bool		hash;			/* the hash walk, until the instance says BADCLASS */
	bool		redo;			/* to be sent (again) in the next round */
	int			waited;			/* ms waited out after BUSY */
	/* what its dump said */
	McMdLine	refusal;		/* MC_MD_ITEM when it did not refuse */
	char		refusal_line[128];
	uint64		lines;
	uint64		bound;			/* the most lines of items it may list */
	InstSize	size;			/* what bound comes from */
	/* keys kept from its dump; all dropped when the dump failed */
	uint64		kept;
	bool		failed;
} DumpInst;

static void dump_bounds(McFullScan *fs, McServer *srv);

struct McFullScan
{
	const McTable *t;
	MemoryContext cxt;			/* the scan's: the calls come in per-tuple ones */
	McServer   *srv;			/* during the dump */
	DumpInst   *insts;			/* one per instance */
	int			nfailed;		/* instances whose dump failed */
	char		prefix[2 * MC_MAX_KEY_PREFIX];	/* the server's, then the table's */
	size_t		plen;
	size_t		splen;			/* of which the server's */
	Tuplestorestate *keys;		/* without the server's prefix, and the
								 * instance that listed each */
	TupleDesc	keydesc;
	TupleTableSlot *kslot;
	MemoryContext batch_cxt;
	Datum	   *batch;
	bool		dumped;
	/* for EXPLAIN ANALYZE */
	uint64		listed;			/* items of every instance */
	uint64		kept;			/* keys of this table */
	uint64		skipped;		/* under the prefix, but no key of the table */
	uint64		fetched;		/* keys sent to the multi-get */
};

McFullScan *
McFullScanBegin(const McTable *t)
{
	McFullScan *fs = palloc0(sizeof(McFullScan));
	McServer   *srv = McServerGet(t->serverid);

	McServerCheckFullScan(srv, t->relid);
	fs->t = t;
	fs->cxt = CurrentMemoryContext;
	memcpy(fs->prefix, srv->cfg.key_prefix, srv->cfg.key_prefix_len);
	memcpy(fs->prefix + srv->cfg.key_prefix_len, t->opts.key_prefix, t->opts.key_prefix_len);
	fs->splen = srv->cfg.key_prefix_len;
	fs->plen = fs->splen + t->opts.key_prefix_len;
	return fs;
}

/*
 * One item of the dump: its key, kept when it is under the prefix and can
 * be a key of the table (see the header).
 */
static void
keep_key(McFullScan *fs, int s, const char *key, size_t len)
{
	union
	{
		text		t;
		char		buf[VARHDRSZ + MC_KEY_MAX];
	}			k;
	const char *rest = key + fs->splen;
	size_t		restlen = len - fs->splen;
	bool		b64;
	Datum		d[2];
	bool		isnull[2] = {false, false};

	fs->listed++;
	if (len < fs->plen || memcmp(key, fs->prefix, fs->plen) != 0)
		return;
	if (restlen == 0 || memchr(key, '\0', len) != NULL ||
		!pg_verifymbstr(rest, restlen, true) ||
		(fs->srv->cfg.long_keys_dalli && mc_metadump_is_digest(key, len)) ||
		mc_key_check(key, len, &b64) != MC_KEY_OK)
	{
		fs->skipped++;
		return;
	}
	SET_VARSIZE(&k.t, VARHDRSZ + restlen);
	memcpy(VARDATA(&k.t), rest, restlen);
	d[0] = PointerGetDatum(&k.t);
	d[1] = Int16GetDatum((int16) s);
	tuplestore_putvalues(fs->keys, fs->keydesc, d, isnull);
	fs->insts[s].kept++;
	fs->kept++;
}

/*
 * Instance s listed more keys than it can hold (DumpInst's bound): a
 * server that streams items without ever sending END would otherwise fill
 * the temporary files until a cancel, statement_timeout or
 * temp_file_limit.  Raised whatever on_failure says, as every reply out of
 * step with the protocol is (health.c); its connection, mid-reply, is
 * never used again.
 */
static pg_noinline void
dump_overflow(McFullScan *fs, int s)
{
	McServer   *srv = fs->srv;
	const DumpInst *d = &fs->insts[s];
	char		size[128];

	McInstanceNoteError(srv, s, "its key dump listed more keys than it holds");
	if (!d->size.known)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("could not list the keys of memcached server \"%s\"", srv->name),
				 errdetail("Instance %s listed more than " UINT64_FORMAT " keys, the most a full scan takes from an instance whose item count could not be read.",
						   McInstanceName(&srv->net, s), d->bound)));
	if (d->size.maxbytes > 0)
		snprintf(size, sizeof(size), "%.0f items and %.0f bytes of memory",
				 d->size.items, d->size.maxbytes);
	else
		snprintf(size, sizeof(size), "%.0f items", d->size.items);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("could not list the keys of memcached server \"%s\"", srv->name),
			 errdetail("Instance %s listed more keys than it holds: more than " UINT64_FORMAT ", where its stats count %s (a full scan takes twice what an instance can hold, plus %d).",
					   McInstanceName(&srv->net, s), d->bound, size, MC_DUMP_SLACK)));
}

/* One line of instance s's dump (the run's line). */
static McLineVerdict
dump_line(void *arg, int s, const char *line, size_t len)
{
	McFullScan *fs = arg;
	DumpInst   *d = &fs->insts[s];
	char		key[MC_KEY_MAX];
	size_t		keylen;
	McMdLine	t = mc_metadump_line(line, len, key, &keylen);

	switch (t)
	{
		case MC_MD_ITEM:
			if (unlikely(++d->lines > d->bound))
				dump_overflow(fs, s);
			keep_key(fs, s, key, keylen);
			return MC_LINE_MORE;
		case MC_MD_END:
			return MC_LINE_DONE;
		case MC_MD_BUSY:
		case MC_MD_NOTSTARTED:
		case MC_MD_REFUSED:
			/* a refusal is the whole reply */
			if (d->lines > 0)
				return MC_LINE_BAD;
			d->refusal = t;
			len = Min(len, sizeof(d->refusal_line) - 1);
			memcpy(d->refusal_line, line, len);
			d->refusal_line[len] = '\0';
			return MC_LINE_DONE;
		case MC_MD_BAD:
			break;
	}
	return MC_LINE_BAD;
}

/*
 * What instance s's dump lists, the argument of its key dump (the engine
 * spells out the command): "hash", the hash table's walk, or "all" on a
 * memcached without it.
 */
static const char *
dump_what(McFullScan *fs, int s)
{
	return fs->insts[s].hash ? "hash" : "all";
}

/*
 * After a round: which refusals are answered by another round (a memcached
 * without the hash walk reads "hash" as a bad class; BUSY is waited out a
 * while), and which are the scan's error.  True when a BUSY is waited out.
 */
static bool
dump_refusals(McFullScan *fs)
{
	McServer   *srv = fs->srv;
	bool		busy = false;

	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		DumpInst   *d = &fs->insts[i];

		if (d->refusal == MC_MD_ITEM)
			continue;
		if (d->refusal == MC_MD_REFUSED && d->hash &&
			strncmp(d->refusal_line, "BADCLASS", 8) == 0)
		{
			d->hash = false;
			d->redo = true;
		}
		else if (d->refusal == MC_MD_BUSY && d->waited < MC_BUSY_WAIT_MS)
		{
			d->waited += MC_BUSY_STEP_MS;
			d->redo = busy = true;
		}
		else if (d->refusal == MC_MD_BUSY || d->refusal == MC_MD_REFUSED)
		{
			for (char *p = d->refusal_line; *p; p++)
				if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
					*p = '?';
			if (d->refusal == MC_MD_BUSY)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_IN_USE),
						 errmsg("could not list the keys of memcached server \"%s\"", srv->name),
						 errdetail_internal("Instance %s replied: %s",
											McInstanceName(&srv->net, i), d->refusal_line),
						 errhint("The instance runs one LRU crawl at a time, and another was still running after %d ms (another full scan, or a tool dumping the cache); try again when it is done.",
								 MC_BUSY_WAIT_MS)));
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("could not list the keys of memcached server \"%s\"", srv->name),
					 errdetail_internal("Instance %s replied: %s",
										McInstanceName(&srv->net, i), d->refusal_line),
					 errhint("A full scan needs memcached's LRU crawler (on unless memcached runs with -o no_lru_crawler) and key dumps (off when it runs with -X).")));
		}
		d->refusal = MC_MD_ITEM;
	}
	return busy;
}

/*
 * After a round: an instance whose dump failed without raising (on_failure
 * 'miss': closed or stalled before its END) lists nothing, not the keys it
 * sent before it failed; the runner counted the call degraded.
 */
static void
dump_failures(McFullScan *fs, const McOp *ops, int nops)
{
	for (int i = 0; i < nops; i++)
	{
		DumpInst   *d = &fs->insts[ops[i].instance];

		if (ops[i].result != MC_OP_FAILED || d->failed)
			continue;
		d->failed = true;
		d->redo = false;
		fs->kept -= d->kept;
		fs->nfailed++;
	}
}

/*
 * The next key listed, skipping those of an instance whose dump failed;
 * false at the end.  The key is the slot's (see McFullScanNext).
 */
static bool
next_key(McFullScan *fs, Datum *key)
{
	bool		isnull;

	while (tuplestore_gettupleslot(fs->keys, true, false, fs->kslot))
	{
		if (fs->nfailed > 0 &&
			fs->insts[DatumGetInt16(slot_getattr(fs->kslot, 2, &isnull))].failed)
			continue;
		*key = slot_getattr(fs->kslot, 1, &isnull);
		return true;
	}
	return false;
}

/*
 * List the keys of every instance, their dumps running together
 * (a run of dump ops, run.h): a round sends every dump still to do and reads them to
 * their ends; an instance that refused is sent its dump again in the next
 * round.  An instance marked dead is passed over only with failover on,
 * where its keys are routed to the others as for any read; otherwise it
 * answers as a failing instance does (pipeline.c): the scan's error,
 * or under on_failure 'miss' no keys and a degraded call, never a silently
 * partial table (dump_failures).
 */
static void
dump_all(McFullScan *fs, McServer *srv)
{
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive = McInstanceAliveMap(srv, alivebuf);
	MemoryContext old = MemoryContextSwitchTo(fs->cxt);
	TupleDesc	desc = CreateTemplateTupleDesc(2);
	bool		todo[MC_MAX_ENDPOINTS];
	McOp		ops[MC_MAX_ENDPOINTS];
	McRun		run = {.ops = ops,.line = dump_line,
	.line_max = MC_METADUMP_LINE_MAX,.arg = fs};
	bool		any;

	TupleDescInitEntry(desc, (AttrNumber) 1, "key", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, (AttrNumber) 2, "instance", INT2OID, -1, 0);
	fs->keydesc = desc;
	fs->keys = tuplestore_begin_heap(false, false, work_mem);
	fs->kslot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	fs->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw full scan keys",
										  ALLOCSET_DEFAULT_SIZES);
	fs->batch = palloc(sizeof(Datum) * MC_FULLSCAN_BATCH);
	fs->insts = palloc0(sizeof(DumpInst) * srv->cfg.nendpoints);
	MemoryContextSwitchTo(old);
	fs->srv = srv;
	dump_bounds(fs, srv);
	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		fs->insts[i].hash = true;
		fs->insts[i].redo = (alive == NULL || alive[i] || !srv->cfg.failover);
	}
	McCsSetOp(MC_CS_FULL_SCAN);
	do
	{
		for (int i = 0; i < srv->cfg.nendpoints; i++)
		{
			DumpInst   *d = &fs->insts[i];

			todo[i] = d->redo;
			d->redo = false;
			d->refusal = MC_MD_ITEM;
			d->lines = 0;
		}
		run.nops = 0;
		for (int i = 0; i < srv->cfg.nendpoints; i++)
		{
			McOp	   *op = &ops[run.nops];

			if (!todo[i])
				continue;
			McOpInit(op, MC_OP_DUMP, NULL);
			op->key = dump_what(fs, i);
			op->keylen = strlen(op->key);
			op->instance = (int16) i;
			run.nops++;
		}
		McRunExec(srv, &run);
		dump_failures(fs, ops, run.nops);
		if (dump_refusals(fs))
		{
			/* a crawl a cancelled scan left running ends when memcached next writes */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 MC_BUSY_STEP_MS, McWaitEvent(true));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		any = false;
		for (int i = 0; i < srv->cfg.nendpoints; i++)
			any |= fs->insts[i].redo;
	} while (any);
	fs->srv = NULL;
	fs->dumped = true;
}

/*
 * The next batch of listed keys through the multi-get, each hit to fn
 * (listing the keys first, at the first call).  Returns false when no key
 * was left.
 */
bool
McFullScanNext(McFullScan *fs, McServer *srv, unsigned want,
			   McRunHitFn fn, void *arg)
{
	MemoryContext old;
	int			n = 0;
	Datum		d;

	if (!fs->dumped)
		dump_all(fs, srv);
	MemoryContextReset(fs->batch_cxt);

	/*
	 * A tuple read back from disk is the slot's, allocated in the current
	 * context and freed at the next read: read in the scan's context, and
	 * copy the keys into the batch's.
	 */
	old = MemoryContextSwitchTo(fs->cxt);
	while (n < MC_FULLSCAN_BATCH && next_key(fs, &d))
	{
		Size		sz = VARSIZE_ANY(DatumGetPointer(d));
		char	   *copy = MemoryContextAlloc(fs->batch_cxt, sz);

		memcpy(copy, DatumGetPointer(d), sz);
		fs->batch[n++] = PointerGetDatum(copy);
	}
	ExecClearTuple(fs->kslot);
	MemoryContextSwitchTo(old);
	if (n == 0)
		return false;
	fs->fetched += n;
	McCsSetOp(MC_CS_FULL_SCAN);
	McRunGets(srv, fs->batch, NULL, n, want, 0, fn, arg);
	return true;
}

/*
 * ANALYZE's sample: every key listed (the dump a full scan makes), at most
 * n of them kept at random (a reservoir, so memory is bounded by n, not
 * by the cache), those fetched through the multi-get in batches, each hit
 * to fn.  Returns how many keys of the table were listed; *nsampled: how
 * many were fetched.
 */
double
McFullScanSample(McFullScan *fs, McServer *srv, int n, unsigned want,
				 McRunHitFn fn, void *arg, int *nsampled)
{
	MemoryContext old;
	Datum	   *sample;
	uint64		seen = 0;
	int			kept = 0;
	Datum		d;

	if (!fs->dumped)
		dump_all(fs, srv);
	old = MemoryContextSwitchTo(fs->cxt);
	sample = palloc(sizeof(Datum) * Max(n, 1));
	while (n > 0 && next_key(fs, &d))
	{
		int			at = -1;

		if (kept < n)
			at = kept++;
		else
		{
			uint64		j = pg_prng_uint64_range(&pg_global_prng_state, 0, seen);

			if (j < (uint64) n)
			{
				at = (int) j;
				pfree(DatumGetPointer(sample[at]));
			}
		}
		if (at >= 0)
			sample[at] = PointerGetDatum(pg_detoast_datum_copy((struct varlena *) DatumGetPointer(d)));
		seen++;
		CHECK_FOR_INTERRUPTS();
	}
	ExecClearTuple(fs->kslot);
	MemoryContextSwitchTo(old);
	McCsSetOp(MC_CS_FULL_SCAN);
	for (int i = 0; i < kept; i += MC_FULLSCAN_BATCH)
		McRunGets(srv, sample + i, NULL, Min(MC_FULLSCAN_BATCH, kept - i), want, 0, fn, arg);
	fs->fetched += kept;
	*nsampled = kept;
	return (double) fs->kept;
}

/* Fetch the listed keys again from the first (a rescan lists nothing anew). */
void
McFullScanRewind(McFullScan *fs)
{
	if (fs->dumped)
		tuplestore_rescan(fs->keys);
}

void
McFullScanEnd(McFullScan *fs)
{
	if (fs->keys)
	{
		tuplestore_end(fs->keys);
		ExecDropSingleTupleTableSlot(fs->kslot);
		fs->keys = NULL;
	}
}

/* EXPLAIN: that this is a full scan, its prefix filter, and what it found. */
void
McFullScanExplain(McFullScan *fs, ExplainState *es)
{
	ExplainPropertyText("Memcached Full Scan", "lru_crawler metadump", es);
	if (fs->plen > 0)
	{
		char	   *p = pnstrdup(fs->prefix, fs->plen);

		ExplainPropertyText("Memcached Key Prefix Filter",
							pg_verifymbstr(p, fs->plen, true) ? quote_literal_cstr(p) :
							"(not valid in the database encoding)", es);
	}
	else
		ExplainPropertyText("Memcached Key Prefix Filter", "none", es);
	if (fs->dumped && es->analyze)
	{
		ExplainPropertyInteger("Memcached Items Listed", NULL, (int64) fs->listed, es);
		ExplainPropertyInteger("Memcached Keys Kept", NULL, (int64) fs->kept, es);
		if (fs->skipped > 0)
			ExplainPropertyInteger("Memcached Keys Skipped", NULL, (int64) fs->skipped, es);
	}
}

/* ---- item counts, for planning -------------------------------------- */

typedef struct ItemCount
{
	Oid			serverid;
	TimestampTz at;
	double		items;			/* -1: could not be asked */
	InstSize   *sizes;			/* per instance, for the dumps' bounds; in
								 * TopMemoryContext, room for cap */
	int			nsizes;
	int			cap;
	uint32		instances;		/* whose sizes: instances_id */
} ItemCount;

static ItemCount counts[MC_COUNT_SLOTS];

static void
count_line(void *arg, const char *name, size_t namelen,
		   const char *value, size_t valuelen)
{
	InstSize   *z = arg;
	uint64_t	n;

	if (namelen == 10 && memcmp(name, "curr_items", 10) == 0 &&
		mc_parse_u64(value, valuelen, UINT64_MAX, &n))
	{
		z->items += (double) n;
		z->known = true;
	}
	else if (namelen == 14 && memcmp(name, "limit_maxbytes", 14) == 0 &&
			 mc_parse_u64(value, valuelen, UINT64_MAX, &n))
	{
		z->maxbytes = (double) n;
		z->known = true;
	}
}

/*
 * The server's instances, in order: sizes counted before ALTER SERVER
 * changed them are not the instances' now.
 */
static uint32
instances_id(const McServer *srv)
{
	uint32		h = 0;

	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		const McEndpoint *e = &srv->cfg.endpoints[i];

		h = hash_combine(h, hash_bytes((const unsigned char *) e->host, strlen(e->host)) ^
						 (uint32) e->port);
	}
	return h;
}

/* The slot's per-instance sizes, those of srv's instances, all unknown. */
static void
count_sizes_reset(ItemCount *slot, const McServer *srv)
{
	int			n = srv->cfg.nendpoints;

	slot->instances = instances_id(srv);
	if (slot->cap < n)
	{
		InstSize   *sizes = MemoryContextAlloc(TopMemoryContext, sizeof(InstSize) * n);

		if (slot->sizes != NULL)
			pfree(slot->sizes);
		slot->sizes = sizes;
		slot->cap = n;
	}
	memset(slot->sizes, 0, sizeof(InstSize) * n);
	slot->nsizes = n;
}

/*
 * The count slot of the server, asked again unless it is one at most
 * MC_COUNT_TTL_S old and, with match, counted for match's instances (sizes
 * counted before ALTER SERVER changed them are not the instances' now).
 * The items of the server's live instances ("curr_items"), or -1 when
 * none answered.  Asked within MC_COUNT_LIMIT_MS for all instances
 * together, softly: a server that is down or slow costs planning that
 * bound, once, and the planner falls back to its default.  That bound
 * passing is planning giving up, not the instance failing: it is not
 * counted against its health (a failure within the bound, io_timeout's
 * included, is).
 */
static ItemCount *
count_ask(Oid serverid, const McServer *match)
{
	TimestampTz now = GetCurrentTimestamp();
	ItemCount  *slot = &counts[0];
	McServer   *srv;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive;
	double		total = 0;
	bool		any = false;
	TimestampTz end;

	for (int i = 0; i < MC_COUNT_SLOTS; i++)
	{
		if (counts[i].serverid == serverid &&
			!TimestampDifferenceExceeds(counts[i].at, now, MC_COUNT_TTL_S * 1000) &&
			(match == NULL || counts[i].instances == instances_id(match)))
			return &counts[i];
		/* the slot of this server, else the oldest */
		if (counts[i].serverid == serverid ||
			(slot->serverid != serverid && counts[i].at < slot->at))
			slot = &counts[i];
	}
	srv = McServerGet(serverid);
	alive = McInstanceAliveMap(srv, alivebuf);
	/* asked again if the loop raises */
	slot->serverid = InvalidOid;
	count_sizes_reset(slot, srv);
	end = TimestampTzPlusMilliseconds(now, MC_COUNT_LIMIT_MS);
	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		InstSize	items = {0};
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);
		McOp		op;

		if ((alive != NULL && !alive[i]) || left <= 0)
			continue;
		McOpText(&op, MC_OP_STATS, i, NULL);
		if (McRunStats(srv, &op, (int) left, false, count_line, &items))
		{
			total += items.items;
			any = true;
			slot->sizes[i] = items;
		}
	}
	slot->serverid = serverid;
	slot->at = now;
	slot->items = any ? total : -1;
	return slot;
}

/*
 * The items of the server's live instances, for planning: asked at most
 * once per MC_COUNT_TTL_S per server and backend (count_ask).
 */
double
McFullScanItems(Oid serverid)
{
	return count_ask(serverid, NULL)->items;
}

/* The bound of a dump of an instance of this size (see MC_DUMP_SLACK). */
static uint64
dump_bound(const InstSize *z)
{
	double		b;

	if (!z->known)
		return MC_DUMP_UNKNOWN;
	b = 2 * Max(z->items, z->maxbytes / MC_ITEM_MIN_BYTES) + MC_DUMP_SLACK;
	return b >= (double) PG_INT64_MAX ? (uint64) PG_INT64_MAX : (uint64) b;
}

/*
 * Each instance's dump bound, from its size as counted for planning
 * (count_ask: the count this statement's planning asked for, or one at
 * most MC_COUNT_TTL_S old, asked again when the server's instances changed
 * since).
 */
static void
dump_bounds(McFullScan *fs, McServer *srv)
{
	const ItemCount *slot = count_ask(srv->serverid, srv);

	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		DumpInst   *d = &fs->insts[i];

		if (i < slot->nsizes)
			d->size = slot->sizes[i];
		d->bound = dump_bound(&d->size);
	}
}
