/*
 * wal_worker.c — the background worker that delivers the watches' keys,
 * its settings and its shared state (mc_wal_status, pause and resume).
 *
 * Owns: the worker's loop (decode the slot with a logical decoding context
 * of its own, send each batch's keys, then confirm the position past it
 * with LogicalConfirmReceivedLocation, so the confirmed position moves
 * only once every instance acknowledged: at-least-once), that decoding
 * context and when it is kept or dropped, keeping the slot's restart
 * position close to its confirmed one, its backoff, creating a missing
 * slot and dropping it with the last watch or the extension, whether
 * there are watches (read again only after a commit that changed them:
 * McWalWorkerWatchesChanged), the names the worker's queries resolve
 * (worker_role), and the counts of mc_wal_watches.  Sends through the batch engine's public
 * header only (batch.h: one quiet pipeline per instance per batch).
 *
 * Why a decoding loop in the worker rather than the streaming replication
 * protocol: the confirmed position is moved by an explicit call after the
 * acknowledgements, never by the decoder, so a crash anywhere replays the
 * batch; the worker needs no connection string, password or walsender.
 * Why not pg_logical_slot_peek_binary_changes over SPI: each call decodes
 * again from the slot's restart position and copies every record into a
 * tuplestore, and pg_replication_slot_advance decodes the batch a second
 * time; a context kept between polls decodes each record once, and a
 * transaction's changes while it runs (see cycle).
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "access/xlogutils.h"
#include "catalog/pg_type.h"
#include "executor/instrument.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/reorderbuffer.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "storage/standby.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "client_stats.h"
#include "keys.h"
#include "client.h"
#include "pg_compat.h"
#include "wal.h"

PG_FUNCTION_INFO_V1(mc_wal_status);
PG_FUNCTION_INFO_V1(mc_wal_pause);
PG_FUNCTION_INFO_V1(mc_wal_resume);

extern PGDLLEXPORT void McWalWorkerMain(Datum arg);

char	   *mc_wal_database = NULL;
static int	mc_wal_poll_interval = 100;
static int	mc_wal_batch_changes = 20000;
static int	mc_wal_timeout = 10000;

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000

typedef struct WalStat
{
	Oid			relid;			/* InvalidOid: free */
	NameData	server;
	int64		pending;		/* keys of the batch not delivered yet */
	uint64		sent;			/* keys acknowledged */
	uint64		retried;		/* keys sent again after a failed batch */
	TimestampTz last_error_time;
	char		last_error[MC_WAL_ERRLEN];
} WalStat;

typedef struct WalShared
{
	slock_t		mutex;
	pid_t		pid;			/* the worker's, 0 when none */
	Latch	   *latch;
	bool		paused;
	TimestampTz oldest_pending; /* commit time of the first undelivered
								 * transaction of a batch, 0: none */
	TimestampTz last_delivered; /* commit time of the last delivered one */
	uint64		watches_gen;	/* bumped by each commit that changed
								 * mc_watches (McWalWorkerWatchesChanged) */
	WalStat		stats[MC_WAL_STATS];
} WalShared;

static WalShared *wal = NULL;
static bool preloaded = false;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
wal_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(sizeof(WalShared));
}

static void
wal_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wal = ShmemInitStruct("mcfdw wal", sizeof(WalShared), &found);
	if (!found)
	{
		memset(wal, 0, sizeof(WalShared));
		SpinLockInit(&wal->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

static void wake_worker(void);

/*
 * A commit that wrote at least WAKE_WAL_BYTES of WAL wakes the worker at
 * once rather than at its next poll: the time from such a commit to its
 * keys being gone is the worker's decoding and send, not the poll
 * interval too.  Smaller commits (a steady stream of them) wait for the
 * poll, so they cost the worker no wake-up each.  Measured from the
 * backend's WAL counter between two transaction ends.
 */
#define WAKE_WAL_BYTES (64 * 1024)

/*
 * This transaction wrote mc_watches (its statement trigger says so): at
 * its commit, once the change is visible to new snapshots, the generation
 * moves and the worker wakes, so the worker reads mc_watches again only
 * then rather than at every poll.  A write is remembered by the nesting
 * level of the outermost open (sub)transaction that made one (0: none),
 * so a write whose subtransaction rolled back moves nothing: a commit
 * that changed no watch costs the worker no read.
 */
static int	watches_changed_at = 0;

void
McWalWorkerWatchesChanged(void)
{
	int			level = GetCurrentTransactionNestLevel();

	if (watches_changed_at == 0 || level < watches_changed_at)
		watches_changed_at = level;
}

/*
 * A subtransaction's write of mc_watches becomes its parent's when it
 * commits, and is gone when it aborts.
 */
static void
wal_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (watches_changed_at < level)
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		watches_changed_at = level - 1;
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		watches_changed_at = 0;
}

static void
wal_xact_callback(XactEvent event, void *arg)
{
	static uint64 at_last_end = 0;
	uint64		now;

	/*
	 * COMMIT PREPARED, in whatever session, runs no callback here: the
	 * worker would not learn of the change.
	 */
	if (event == XACT_EVENT_PRE_PREPARE && watches_changed_at > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that changed the watches (%s)", MC_WAL_TABLE)));
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	if (event == XACT_EVENT_COMMIT && watches_changed_at > 0 && wal != NULL)
	{
		SpinLockAcquire(&wal->mutex);
		wal->watches_gen++;
		SpinLockRelease(&wal->mutex);
		wake_worker();
	}
	watches_changed_at = 0;
	if (event == XACT_EVENT_PREPARE)
		return;
	now = pgWalUsage.wal_bytes;
	if (event == XACT_EVENT_COMMIT && now >= at_last_end + WAKE_WAL_BYTES &&
		MyBackendType == B_BACKEND)
		wake_worker();
	at_last_end = now;
}

void
McWalWorkerInit(void)
{
	BackgroundWorker bgw;

	DefineCustomIntVariable("mcfdw.wal_poll_interval",
							"How often the write-ahead log worker reads its slot when idle.",
							NULL, &mc_wal_poll_interval, 100, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("mcfdw.wal_batch_changes",
							"Records the write-ahead log worker reads per batch (whole transactions).",
							NULL, &mc_wal_batch_changes, 20000, 1, INT_MAX,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mcfdw.wal_timeout",
							"Bound on one delivery of a batch to a server.",
							NULL, &mc_wal_timeout, 10000, 100, 600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	/* a PGC_POSTMASTER setting can only be defined at start-up */
	DefineCustomStringVariable("mcfdw.wal_database",
							   "Database whose watches the write-ahead log worker delivers.",
							   NULL, &mc_wal_database, "postgres",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	preloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wal_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wal_shmem_startup;
	RegisterXactCallback(wal_xact_callback, NULL);
	RegisterSubXactCallback(wal_subxact_callback, NULL);

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 10;
	strlcpy(bgw.bgw_library_name, "mcfdw", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "McWalWorkerMain", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "mcfdw wal worker", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "mcfdw wal worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

bool
McWalWorkerPreloaded(void)
{
	return preloaded && wal != NULL;
}

/* Wake the worker: the watches changed, a large commit, pause or resume. */
static void
wake_worker(void)
{
	Latch	   *latch = NULL;

	if (wal == NULL)
		return;
	SpinLockAcquire(&wal->mutex);
	if (wal->pid != 0)
		latch = wal->latch;
	SpinLockRelease(&wal->mutex);
	if (latch)
		SetLatch(latch);
}

/* The counts of a watch; mutex held.  NULL when every entry is taken. */
static WalStat *
stat_of(Oid relid, const char *server)
{
	WalStat    *free = NULL;

	for (int i = 0; i < MC_WAL_STATS; i++)
	{
		WalStat    *s = &wal->stats[i];

		if (s->relid == relid && strcmp(NameStr(s->server), server) == 0)
			return s;
		if (s->relid == InvalidOid && free == NULL)
			free = s;
	}
	if (free)
	{
		memset(free, 0, sizeof(*free));
		free->relid = relid;
		namestrcpy(&free->server, server);
	}
	return free;
}

static void
stat_error(Oid relid, const char *server, const char *msg)
{
	WalStat    *s;

	SpinLockAcquire(&wal->mutex);
	s = stat_of(relid, server);
	if (s)
	{
		strlcpy(s->last_error, msg, MC_WAL_ERRLEN);
		s->last_error_time = GetCurrentTimestamp();
	}
	SpinLockRelease(&wal->mutex);
}

/* ---- one batch --------------------------------------------------------- */

/* The keys of one server and action, and which watches they came from. */
typedef struct KeyGroup
{
	char		action;			/* 'D', 'S', or 'F' (flush), 'I' (ignore) */
	char		server[NAMEDATALEN];
	int			nkeys;
	int			cap;
	const char **keys;
	size_t	   *lens;
} KeyGroup;

typedef struct WatchCount
{
	Oid			relid;
	char		server[NAMEDATALEN];
	char		action;
	int64		nkeys;
} WatchCount;

typedef struct Batch
{
	MemoryContext cxt;			/* the cycle's: keys are copied there */
	List	   *groups;			/* of KeyGroup */
	List	   *counts;			/* of WatchCount */
	TimestampTz first_time;
	TimestampTz last_time;
	int64		nkeys;
	int64		nrecords;		/* records of the plugin read into it */
	McKeyArena	arena;			/* the keys' copies, in cxt */

	/*
	 * The head of the last 'K' record (tag, action, relid, server and its
	 * NUL) and where its keys went: a transaction's keys come in runs of
	 * one watch, so a record with the same head skips the lookups.
	 */
	char		last_head[2 + 4 + NAMEDATALEN];
	int			last_headlen;	/* 0: none */
	KeyGroup   *last_group;
	WatchCount *last_count;
} Batch;

/* A copy of a key in the batch's arena: the plugin's buffer is reused. */
static inline const char *
batch_copy(Batch *b, const char *p, size_t len)
{
	return McEngineKeyArenaKeep(&b->arena, p, len);
}

static KeyGroup *
group_of(Batch *b, char action, const char *server)
{
	ListCell   *lc;
	KeyGroup	   *g;

	foreach(lc, b->groups)
	{
		g = lfirst(lc);
		if (g->action == action && strcmp(g->server, server) == 0)
			return g;
	}
	g = palloc0(sizeof(KeyGroup));
	g->action = action;
	strlcpy(g->server, server, NAMEDATALEN);
	b->groups = lappend(b->groups, g);
	return g;
}

static WatchCount *
count_of(Batch *b, Oid relid, const char *server, char action)
{
	ListCell   *lc;
	WatchCount *c;

	foreach(lc, b->counts)
	{
		c = lfirst(lc);
		if (c->relid == relid && strcmp(c->server, server) == 0)
			return c;
	}
	c = palloc0(sizeof(WatchCount));
	c->relid = relid;
	strlcpy(c->server, server, NAMEDATALEN);
	c->action = action;
	b->counts = lappend(b->counts, c);
	return c;
}

static void
group_add(KeyGroup *g, const char *key, size_t len)
{
	if (g->nkeys == g->cap)
	{
		g->cap = Max(64, g->cap * 2);
		g->keys = g->keys ? repalloc_huge(g->keys, sizeof(char *) * g->cap)
			: palloc_extended(sizeof(char *) * g->cap, MCXT_ALLOC_HUGE);
		g->lens = g->lens ? repalloc_huge(g->lens, sizeof(size_t) * g->cap)
			: palloc_extended(sizeof(size_t) * g->cap, MCXT_ALLOC_HUGE);
	}
	g->keys[g->nkeys] = key;
	g->lens[g->nkeys] = len;
	g->nkeys++;
}

/* A key of the last 'K' record's group and count (last_group, last_count). */
static void
key_add(Batch *b, const char *key, size_t len)
{
	group_add(b->last_group, batch_copy(b, key, len), len);
	b->last_count->nkeys++;
	b->nkeys++;
}

/* Read one record of the plugin (wal.h) into the batch. */
static void
parse_record(Batch *b, const char *p, size_t len)
{
	const char *start = p;
	const char *end = p + len;
	char		tag;
	char		action = 0;
	uint32		relid;
	const char *server;
	const char *nul;

	if (len < 1)
		return;
	if (b->last_headlen > 0 && len >= (size_t) b->last_headlen &&
		memcmp(p, b->last_head, b->last_headlen) == 0)
	{
		key_add(b, p + b->last_headlen, len - b->last_headlen);
		return;
	}
	tag = *p++;
	if (tag == 'C')
	{
		uint64		ts;

		/* the commit time; the position is the reader's */
		if (end - p < 8)
			elog(ERROR, "mcfdw: short commit record from the decoder");
		memcpy(&ts, p, 8);
		b->last_time = (TimestampTz) pg_ntoh64(ts);
		if (b->first_time == 0)
			b->first_time = b->last_time;
		return;
	}
	if (tag == 'K' || tag == 'T')
		action = *p++;
	if (end - p < 5)
		elog(ERROR, "mcfdw: short record from the decoder");
	memcpy(&relid, p, 4);
	relid = pg_ntoh32(relid);
	p += 4;
	nul = memchr(p, '\0', end - p);
	if (nul == NULL)
		elog(ERROR, "mcfdw: record without a server name from the decoder");
	server = p;
	p = nul + 1;
	switch (tag)
	{
		case 'K':
			b->last_group = group_of(b, action, server);
			b->last_count = count_of(b, relid, server, action);
			b->last_headlen = 0;
			if (p - start <= (ptrdiff_t) sizeof(b->last_head))
			{
				b->last_headlen = (int) (p - start);
				memcpy(b->last_head, start, b->last_headlen);
			}
			key_add(b, p, end - p);
			break;
		case 'T':
			if (action == 'F')
			{
				group_add(group_of(b, 'F', server), "", 0);
				count_of(b, relid, server, action)->nkeys++;
			}
			else
			{
				ereport(LOG,
						(errmsg("mcfdw: a TRUNCATE of watched table %u was not invalidated (on_truncate 'ignore')", relid)));
				stat_error(relid, server, "a TRUNCATE was not invalidated (on_truncate 'ignore')");
			}
			break;
		case 'W':
			{
				char	   *msg = pnstrdup(p, end - p);

				ereport(WARNING,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("mcfdw: no key could be built for a change of watched table %u: %s",
								relid, msg)));
				stat_error(relid, server, msg);
				break;
			}
		default:
			elog(ERROR, "mcfdw: unknown record '%c' from the decoder", tag);
	}
}

/* Order two keys of group arg by their indexes (length, then bytes). */
static int
cmp_keys(const void *a, const void *b, void *arg)
{
	const KeyGroup *g = arg;
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	if (g->lens[x] != g->lens[y])
		return g->lens[x] < g->lens[y] ? -1 : 1;
	return memcmp(g->keys[x], g->keys[y], g->lens[x]);
}

/*
 * Delete a group's keys, or mark them stale (md I): one pipeline per
 * instance (batch.h).  A key memcached could never take (McKeyRoute
 * refuses it) is skipped and reported: holding the stream for it would
 * hold every other key.  NF (the key is not cached) counts as done.
 *
 * With failover, a key counts as delivered only once its own instance
 * acknowledged it (home ops): a failover instance's ack is not enough,
 * since the dead instance may come back holding the old value.  Keys whose
 * own instance failed are sent to the instance readers fail over to as
 * well, so what they read there meanwhile is not stale either, and the
 * batch is held until the own instance is back.
 *
 * Returns the keys not acknowledged; errbuf gets why.
 */
static int
send_keys(Batch *b, KeyGroup *g, bool stale, char *errbuf, size_t errlen)
{
	McServer   *srv = McServerLookup(g->server);
	McOp	   *ops = palloc_extended(sizeof(McOp) * Max(g->nkeys, 1), MCXT_ALLOC_HUGE);
	int		   *order = palloc_extended(sizeof(int) * Max(g->nkeys, 1), MCXT_ALLOC_HUGE);
	int			nops = 0;
	int			failed;
	TimestampTz start;
	long		left;

	/*
	 * A key changed twice in a batch is sent once: the keys are sorted by
	 * their indexes (the ops, larger, are not moved), and a key equal to
	 * the one before it is skipped.
	 */
	for (int i = 0; i < g->nkeys; i++)
		order[i] = i;
	qsort_arg(order, g->nkeys, sizeof(int), cmp_keys, g);
	for (int n = 0; n < g->nkeys; n++)
	{
		int			i = order[n];
		char		buf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
		const char *raw = NULL;
		size_t		rawlen = 0;
		bool		b64;
		volatile bool ok = true;
		MemoryContext cxt = CurrentMemoryContext;

		if (n > 0 && cmp_keys(&order[n - 1], &order[n], g) == 0)
			continue;
		PG_TRY();
		{
			(void) McKeyRoute(srv, g->keys[i], g->lens[i], buf, &raw, &rawlen, &b64);
		}
		PG_CATCH();
		{
			ErrorData  *e;

			MemoryContextSwitchTo(cxt);
			e = CopyErrorData();
			FlushErrorState();
			ereport(WARNING,
					(errcode(e->sqlerrcode),
					 errmsg("mcfdw: a key of server \"%s\" was skipped: %s", g->server, e->message)));
			ok = false;
		}
		PG_END_TRY();
		if (!ok)
			continue;
		McOpInit(&ops[nops], MC_OP_DELETE, NULL);
		ops[nops].invalidate = stale;
		/* the batch's copy, or the routed form (prefixed, base64) in buf */
		ops[nops].key = raw == g->keys[i] ? raw : batch_copy(b, raw, rawlen);
		ops[nops].keylen = rawlen;
		ops[nops].home = srv->cfg.failover;
		nops++;
	}
	if (nops == 0)
		return 0;
	McCsSetOp(MC_CS_WAL);
	start = GetCurrentTimestamp();
	failed = McBatchWrite(srv, ops, nops, mc_wal_timeout, true, errbuf, errlen);
	/*
	 * The copies for readers who fail over share the delivery's one
	 * mcfdw.wal_timeout: a hung instance has used it up already, and they
	 * are sent again with the batch's next attempt.
	 */
	left = mc_wal_timeout - TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
	if (failed > 0 && srv->cfg.failover && left > 0)
	{
		/* the failed keys again, routed as readers route them now */
		int			nf = 0;

		for (int i = 0; i < nops; i++)
			if (ops[i].result == MC_OP_FAILED)
			{
				ops[nf] = ops[i];
				ops[nf].home = false;
				nf++;
			}
		(void) McBatchWrite(srv, ops, nf, (int) left, true, NULL, 0);
	}
	return failed;
}

static void
send_flush(KeyGroup *g)
{
	Oid			tab = McWalDecodeTableOid();
	char	   *sql;

	if (!OidIsValid(tab))
		return;
	/* the extension's own function, wherever its schema is (see worker_role) */
	sql = psprintf("SELECT %s.mc_flush_all($1)",
				   quote_identifier(get_namespace_name(get_rel_namespace(tab))));
	if (SPI_execute_with_args(sql, 1, (Oid[]) {NAMEOID},
							  (Datum[]) {CStringGetDatum(g->server)},
							  NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mcfdw: mc_flush_all failed");
	ereport(LOG,
			(errmsg("mcfdw: flushed every instance of server \"%s\" after a TRUNCATE of a watched table",
					g->server)));
}

static void
slot_sql(const char *sql, const char *slot, XLogRecPtr lsn)
{
	Datum		args[2] = {CStringGetDatum(slot), LSNGetDatum(lsn)};

	if (SPI_execute_with_args(sql, lsn ? 2 : 1, (Oid[]) {NAMEOID, PG_LSNOID}, args,
							  NULL, false, 0) < 0)
		elog(ERROR, "mcfdw: \"%s\" failed", sql);
}

/* The watches, with a new snapshot (one committed while waiting counts). */
static int64
count_watches(Oid tab)
{
	bool		isnull;

	if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM %s",
							 quote_qualified_identifier(get_namespace_name(get_rel_namespace(tab)),
														MC_WAL_TABLE)),
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mcfdw: could not count the watches");
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Whether there are watches, as of the last commit that changed them: read
 * again only when mc_watches is another table (the extension was created
 * again) or the generation moved.  The generation is read before the
 * count, so a change committed meanwhile is counted now or at the next
 * poll.  Reset after an error.
 */
static Oid	known_tab = InvalidOid;
static uint64 known_gen = 0;
static int64 known_watches = -1;

static int64
watches_known(Oid tab)
{
	uint64		gen;

	SpinLockAcquire(&wal->mutex);
	gen = wal->watches_gen;
	SpinLockRelease(&wal->mutex);
	if (known_watches < 0 || tab != known_tab || gen != known_gen)
	{
		known_watches = count_watches(tab);
		known_tab = tab;
		known_gen = gen;
	}
	return known_watches;
}

/*
 * A decoding context opened afresh (after an idle spell, a failed batch,
 * an error or a restart) decodes from the slot's restart position, which
 * moves only to a running-transactions record decoded before a confirm;
 * PostgreSQL writes one every 15 s at most, so under a steady write load
 * each such start would decode up to 15 s of the log again (hundreds of
 * milliseconds at a thousand updates a second), and a crash would replay
 * that much.  Once the restart position trails the confirmed one by
 * RESTART_LAG_BYTES, the worker writes such a record itself (what
 * PostgreSQL 16's pg_log_standby_snapshot() does), at most every
 * RESTART_LOG_MS, so a later confirm can move the restart position up to
 * it.
 */
#define RESTART_LAG_BYTES	(64 * 1024)
#define RESTART_LOG_MS		200

static void
keep_restart_close(ReplicationSlot *s)
{
	static TimestampTz last_logged = 0;
	XLogRecPtr	restart;
	XLogRecPtr	confirmed;
	TimestampTz now;

	SpinLockAcquire(&s->mutex);
	restart = s->data.restart_lsn;
	confirmed = s->data.confirmed_flush;
	SpinLockRelease(&s->mutex);
	if (restart == InvalidXLogRecPtr || confirmed < restart + RESTART_LAG_BYTES)
		return;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(last_logged, now, RESTART_LOG_MS))
		return;
	last_logged = now;
	(void) LogStandbySnapshot();
}

/* ---- the decoder ------------------------------------------------------- */

/*
 * The worker decodes the slot itself, as pg_logical_slot_get_changes does,
 * but keeps its decoding context from one poll to the next while the log
 * moves: each poll decodes only what was flushed since the last one, so the
 * changes of a transaction still running are queued (its WAL read, its
 * tuples in the reorder buffer) before it commits, and a commit costs only
 * the replay of its changes through the plugin.  The slot stays acquired
 * while the context is open.  The confirmed position still moves only by an
 * explicit LogicalConfirmReceivedLocation once a batch is acknowledged;
 * nothing read is confirmed before.  The context is dropped (and the slot
 * released) when a poll finds the log idle with no transaction in progress,
 * when the worker pauses, when a batch could not be delivered (the next
 * attempt decodes it again from the slot) and on any error.
 */
#define DEC_SLACK (16 * 1024 * 1024)
#define FLUSH_AHEAD_BYTES (64 * 1024)

static LogicalDecodingContext *dec = NULL;
static MemoryContext dec_cxt = NULL;	/* the context's, outlives cycles */
static Batch *dec_batch = NULL;	/* where the plugin's records go */

static void
dec_prepare_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid,
				  bool last_write)
{
	resetStringInfo(ctx->out);
}

static void
dec_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid,
		  bool last_write)
{
	MemoryContext old = MemoryContextSwitchTo(dec_batch->cxt);

	parse_record(dec_batch, ctx->out->data, ctx->out->len);
	dec_batch->nrecords++;
	MemoryContextSwitchTo(old);
}

/*
 * The reader's pages, never waited for.  read_local_xlog_page sleeps until
 * the page it is asked for is flushed, and the tail of a record no commit
 * flushes (a VACUUM's, a non-transactional message's) may stay unflushed
 * for as long as the transaction that wrote it runs: the worker would hold
 * the slot all that while, deaf to pause and to the extension's drop.  A
 * page beyond the flushed log ends the poll's read instead (the reader
 * returns no record and no error), and the next read starts again at that
 * record.
 */
static bool dec_at_flush = false;

static int
dec_page_read(XLogReaderState *state, XLogRecPtr targetPagePtr, int reqLen,
			  XLogRecPtr targetRecPtr, char *cur_page)
{
	if (targetPagePtr + reqLen > GetFlushRecPtr(NULL))
	{
		dec_at_flush = true;
		return -1;
	}
	return read_local_xlog_page(state, targetPagePtr, reqLen, targetRecPtr, cur_page);
}

static void
dec_open(const char *slot)
{
	MemoryContext old;

	if (dec_cxt == NULL)
		dec_cxt = AllocSetContextCreate(TopMemoryContext, "mcfdw wal decoding",
										ALLOCSET_DEFAULT_SIZES);
	CheckLogicalDecodingRequirements();
	McReplicationSlotAcquire(slot);
	old = MemoryContextSwitchTo(dec_cxt);
	dec = CreateDecodingContext(InvalidXLogRecPtr, NIL, false,
								XL_ROUTINE(.page_read = dec_page_read,
										   .segment_open = wal_segment_open,
										   .segment_close = wal_segment_close),
								dec_prepare_write, dec_write, NULL);
	MemoryContextSwitchTo(old);
	/* every transaction committed after the confirmed position, whole */
	XLogBeginRead(dec->reader, MyReplicationSlot->data.restart_lsn);
}

/* Drop the context and release the slot (also after an error). */
static void
dec_close(bool clean)
{
	if (dec != NULL)
	{
		if (clean)
			FreeDecodingContext(dec);
		else
		{
			/* after an error: no callback; the memory and the open segment */
			if (dec->reader->seg.ws_file >= 0)
				wal_segment_close(dec->reader);
			MemoryContextReset(dec_cxt);
		}
		dec = NULL;
	}
	if (MyReplicationSlot != NULL)
		ReplicationSlotRelease();
}

/*
 * Decode the log up to flush into b, stopping after a record once b is
 * full: the plugin's records of a transaction all come from its commit
 * record, so b always ends with whole transactions.  True when it read
 * all the log flushed, up to flush or to a record whose end is not
 * flushed yet.
 */
static bool
dec_read(Batch *b, XLogRecPtr flush)
{
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext old;

	if (dec->reader->EndRecPtr >= flush)
		return true;
	/* the catalog caches built outside decoding are not the decoder's */
	InvalidateSystemCaches();
	dec_batch = b;
	dec_at_flush = false;
	/* the reader allocates its buffers as it goes: they outlive the poll */
	old = MemoryContextSwitchTo(dec->context);
	while (dec->reader->EndRecPtr < flush && b->nrecords < mc_wal_batch_changes)
	{
		char	   *errm = NULL;
		XLogRecord *rec = XLogReadRecord(dec->reader, &errm);

		if (errm)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("mcfdw: could not read the write-ahead log for decoding: %s", errm)));
		if (rec == NULL)
		{
			if (!dec_at_flush)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("mcfdw: could not read the write-ahead log for decoding at %X/%X",
								LSN_FORMAT_ARGS(dec->reader->EndRecPtr))));
			break;
		}
		LogicalDecodingProcessRecord(dec, dec->reader);
		/* the replay's internal transactions may leave another one current */
		CurrentResourceOwner = owner;
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(old);
	dec_batch = NULL;
	InvalidateSystemCaches();
	return dec_at_flush || dec->reader->EndRecPtr >= flush;
}

/* Everything committed up to lsn is delivered. */
static void
dec_confirm(XLogRecPtr lsn)
{
	if (lsn <= MyReplicationSlot->data.confirmed_flush)
		return;
	LogicalConfirmReceivedLocation(lsn);
	/* written at the next checkpoint; a crash replays from the older one */
	ReplicationSlotMarkDirty();
}

typedef enum
{
	CYCLE_IDLE,
	CYCLE_MORE,
	CYCLE_FAILED
} Cycle;

/* One read of the slot and the delivery of what it gave; in a transaction. */
static Cycle
cycle(void)
{
	char		slot[NAMEDATALEN];
	Oid			tab = McWalDecodeTableOid();
	ReplicationSlot *s;
	XLogRecPtr	flush;
	XLogRecPtr	end;
	bool		drain_to_drop = false;
	bool		caught_up;
	Batch		b;
	int			failed = 0;
	char		errbuf[MC_WAL_ERRLEN] = "";
	ListCell   *lc;
	bool		paused;

	McWalDecodeSlotName(MyDatabaseId, slot, sizeof(slot));
	SpinLockAcquire(&wal->mutex);
	paused = wal->paused;
	SpinLockRelease(&wal->mutex);
	if (!OidIsValid(tab) || paused)
		dec_close(true);
	s = SearchNamedReplicationSlot(slot, true);
	if (!OidIsValid(tab))
	{
		/* DROP EXTENSION: nothing left to decode with */
		if (s != NULL)
		{
			slot_sql("SELECT pg_catalog.pg_drop_replication_slot($1)", slot, InvalidXLogRecPtr);
			ereport(LOG, (errmsg("mcfdw: dropped replication slot \"%s\": the extension is gone", slot)));
		}
		return CYCLE_IDLE;
	}
	if (paused)
		return CYCLE_IDLE;
	if (s == NULL)
	{
		dec_close(true);
		if (watches_known(tab) == 0)
			return CYCLE_IDLE;
		/* watches restored by pg_dump, or a slot dropped by hand */
		slot_sql("SELECT pg_catalog.pg_create_logical_replication_slot($1, 'mcfdw'::pg_catalog.name)", slot, InvalidXLogRecPtr);
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mcfdw: created missing replication slot \"%s\"", slot),
				 errdetail("Changes committed before now to watched tables were not decoded: their keys may be stale.")));
		return CYCLE_MORE;
	}
	if (watches_known(tab) == 0)
	{
		/*
		 * The last watch is gone: deliver what was committed before, then
		 * drop the slot.  The lock keeps a new watch (and its slot check)
		 * out until this transaction ends.
		 */
		LockRelationOid(tab, ShareRowExclusiveLock);
		drain_to_drop = count_watches(tab) == 0;
	}
	if (dec == NULL)
		dec_open(slot);
	/*
	 * When backends have inserted a good deal of WAL not flushed yet (a
	 * large transaction running), flush it, as the WAL writer would within
	 * wal_writer_delay: its changes are then decoded while it runs rather
	 * than after its commit, whose record alone lets them out.  Below
	 * FLUSH_AHEAD_BYTES (commits flush their own) the worker adds no flush.
	 */
	flush = GetXLogInsertRecPtr();
	if (flush >= GetFlushRecPtr(NULL) + FLUSH_AHEAD_BYTES)
		XLogFlush(flush);
	flush = GetFlushRecPtr(NULL);

	memset(&b, 0, sizeof(b));
	b.cxt = CurrentMemoryContext;
	b.arena.cxt = b.cxt;
	caught_up = dec_read(&b, flush);
	end = dec->reader->EndRecPtr;
	if (b.nrecords == 0)
	{
		/* nothing watched was committed up to end: let the slot move on */
		dec_confirm(end);
		keep_restart_close(MyReplicationSlot);
		if (caught_up && ReorderBufferGetOldestTXN(dec->reorder) == NULL)
			dec_close(true);	/* nothing in progress: free the slot */
		if (drain_to_drop && caught_up)
		{
			if (dec != NULL)
				dec_close(true);
			slot_sql("SELECT pg_catalog.pg_drop_replication_slot($1)", slot, InvalidXLogRecPtr);
			ereport(LOG, (errmsg("mcfdw: dropped replication slot \"%s\" with the last watch", slot)));
			return CYCLE_IDLE;
		}
		return caught_up ? CYCLE_IDLE : CYCLE_MORE;
	}

	SpinLockAcquire(&wal->mutex);
	if (wal->oldest_pending == 0)
		wal->oldest_pending = b.first_time;
	foreach(lc, b.counts)
	{
		WatchCount *c = lfirst(lc);
		WalStat    *st = stat_of(c->relid, c->server);

		if (st)
			st->pending = c->nkeys;
	}
	SpinLockRelease(&wal->mutex);

	foreach(lc, b.groups)
	{
		KeyGroup	   *g = lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		if (g->action == 'D' || g->action == 'S')
		{
			char		why[MC_WAL_ERRLEN] = "";
			int			f = send_keys(&b, g, g->action == 'S',
									  why, sizeof(why));

			if (f > 0)
			{
				failed += f;
				snprintf(errbuf, sizeof(errbuf), "server \"%s\": %d keys not acknowledged: %s",
						 g->server, f, why[0] ? why : "no reply");
			}
		}
		else if (g->action == 'F')
			send_flush(g);
	}

	SpinLockAcquire(&wal->mutex);
	foreach(lc, b.counts)
	{
		WatchCount *c = lfirst(lc);
		WalStat    *st = stat_of(c->relid, c->server);

		if (st == NULL)
			continue;
		if (failed > 0)
		{
			st->retried += c->nkeys;
			strlcpy(st->last_error, errbuf, MC_WAL_ERRLEN);
			st->last_error_time = GetCurrentTimestamp();
		}
		else
		{
			st->sent += c->nkeys;
			st->pending = 0;
		}
	}
	SpinLockRelease(&wal->mutex);
	if (failed > 0)
	{
		/* the next attempt decodes the batch again from the slot */
		dec_close(true);
		ereport(LOG,
				(errmsg("mcfdw: a batch of %lld keys is held and will be sent again: %s",
						(long long) b.nkeys, errbuf)));
		return CYCLE_FAILED;
	}

	/* every instance acknowledged: the slot moves past the batch */
	dec_confirm(end);
	keep_restart_close(MyReplicationSlot);
	/*
	 * What decoding leaves in the context's memory between polls is freed
	 * with it: start afresh once it holds more than the reorder buffer may
	 * keep before it spills, and some.
	 */
	if (MemoryContextMemAllocated(dec_cxt, true) >
		(Size) logical_decoding_work_mem * 1024 * 2 + DEC_SLACK)
		dec_close(true);
	SpinLockAcquire(&wal->mutex);
	wal->oldest_pending = 0;
	wal->last_delivered = b.last_time;
	SpinLockRelease(&wal->mutex);
	return caught_up ? CYCLE_IDLE : CYCLE_MORE;
}

/* Run one cycle; an error is reported, rolled back and retried later. */
static Cycle
run_cycle(MemoryContext cxt)
{
	volatile Cycle r = CYCLE_IDLE;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		pgstat_report_activity(STATE_RUNNING, "delivering invalidations");
		r = cycle();
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				(errcode(e->sqlerrcode),
				 errmsg("mcfdw: delivery of invalidations failed, retrying: %s", e->message)));
		dec_close(false);
		dec_batch = NULL;
		known_watches = -1;
		McReplicationSlotCleanup();
		AbortCurrentTransaction();
		InvalidateSystemCaches();
		SpinLockAcquire(&wal->mutex);
		for (int i = 0; i < MC_WAL_STATS; i++)
			if (wal->stats[i].relid != InvalidOid)
			{
				strlcpy(wal->stats[i].last_error, e->message, MC_WAL_ERRLEN);
				wal->stats[i].last_error_time = GetCurrentTimestamp();
			}
		SpinLockRelease(&wal->mutex);
		FreeErrorData(e);
		pgstat_report_activity(STATE_IDLE, NULL);
		r = CYCLE_FAILED;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return r;
}

/*
 * The worker runs as the bootstrap superuser, in a database where others
 * may create objects: no name in what it runs may resolve to one of
 * theirs.  Every query it sends through SPI names pg_catalog's functions
 * and operators, and the extension's objects by their schema; the search
 * path is pinned as well (over the database's and the role's settings and
 * the configuration file), so that a name left unqualified, here or in
 * what PostgreSQL runs on the worker's behalf, finds only the catalog.
 *
 * Why not log in as the extension's owner: mcfdw is not a trusted
 * extension, so its owner was a superuser when it created it, and the
 * worker needs a superuser or REPLICATION role for its slot anyway; the
 * role is also chosen at start-up, before the extension may exist.  A
 * role switch would not lower the worker's privileges, only move them.
 */
static void
worker_role(void)
{
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * The worker's process keeps the memory it frees, up to KEEP_FREED_BYTES,
 * rather than giving it back to the kernel after each batch.  Decoding a
 * large transaction fills the reorder buffer (its 8 MB tuple blocks are
 * above glibc's default mmap threshold, and the rest is trimmed from the
 * heap once freed): with glibc's defaults each batch touches its memory
 * afresh, a page fault per 4 kB (14 % of the worker's samples on a
 * 20,000-row UPDATE, malloc itself 5 %: docs/benchmarks.md).  Allocations
 * up to MMAP_FROM_BYTES come from the heap, whose free top is kept up to
 * KEEP_FREED_BYTES; what the decoding context holds is bounded apart
 * (DEC_SLACK).
 */
#define KEEP_FREED_BYTES (64 * 1024 * 1024)
#define MMAP_FROM_BYTES (32 * 1024 * 1024)

static void
keep_freed_memory(void)
{
#ifdef __GLIBC__
	(void) mallopt(M_MMAP_THRESHOLD, MMAP_FROM_BYTES);
	(void) mallopt(M_TRIM_THRESHOLD, KEEP_FREED_BYTES);
#endif
}

static void
worker_exit(int code, Datum arg)
{
	SpinLockAcquire(&wal->mutex);
	wal->pid = 0;
	wal->latch = NULL;
	SpinLockRelease(&wal->mutex);
}

void
McWalWorkerMain(Datum arg)
{
	MemoryContext cxt;
	long		backoff = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (wal_level < WAL_LEVEL_LOGICAL)
	{
		ereport(LOG,
				(errmsg("mcfdw wal worker not started: wal_level is not \"logical\"")));
		proc_exit(0);			/* not restarted */
	}
	BackgroundWorkerInitializeConnection(mc_wal_database, NULL, 0);
	worker_role();
	keep_freed_memory();
	before_shmem_exit(worker_exit, (Datum) 0);
	SpinLockAcquire(&wal->mutex);
	wal->pid = MyProcPid;
	wal->latch = MyLatch;
	SpinLockRelease(&wal->mutex);
	cxt = AllocSetContextCreate(TopMemoryContext, "mcfdw wal worker", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	for (;;)
	{
		Cycle		r;
		long		wait;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		r = run_cycle(cxt);
		MemoryContextReset(cxt);
		/* its scans and WAL in the statistics views (at most every second) */
		pgstat_report_stat(false);
		if (r == CYCLE_FAILED)
		{
			/* no spin: each failure waits longer, up to BACKOFF_MAX_MS */
			backoff = backoff == 0 ? BACKOFF_MIN_MS : Min(backoff * 2, BACKOFF_MAX_MS);
			wait = backoff;
		}
		else
		{
			backoff = 0;
			wait = r == CYCLE_MORE ? 0 : mc_wal_poll_interval;
		}
		if (wait > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/* ---- SQL ------------------------------------------------------------------ */

/*
 * mc_wal_status(): the worker's counts per watch (relid, server), and the
 * lag in seconds: how long the oldest undelivered transaction has waited.
 */
Datum
mc_wal_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WalShared	copy;

	InitMaterializedSRF(fcinfo, 0);
	if (wal == NULL)
		return (Datum) 0;
	SpinLockAcquire(&wal->mutex);
	memcpy(&copy, wal, sizeof(copy));
	SpinLockRelease(&wal->mutex);
	for (int i = 0; i < MC_WAL_STATS; i++)
	{
		WalStat    *s = &copy.stats[i];
		Datum		v[9];
		bool		n[9] = {0};

		if (s->relid == InvalidOid)
			continue;
		v[0] = ObjectIdGetDatum(s->relid);
		v[1] = NameGetDatum(&s->server);
		v[2] = Int64GetDatum(s->pending);
		v[3] = Int64GetDatum((int64) s->sent);
		v[4] = Int64GetDatum((int64) s->retried);
		v[5] = CStringGetTextDatum(s->last_error);
		n[5] = s->last_error[0] == '\0';
		v[6] = TimestampTzGetDatum(s->last_error_time);
		n[6] = s->last_error_time == 0;
		v[7] = Float8GetDatum(copy.oldest_pending == 0 ? 0.0 :
							  (double) (GetCurrentTimestamp() - copy.oldest_pending) / 1e6);
		v[8] = BoolGetDatum(copy.paused);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}

static void
set_paused(bool paused)
{
	if (wal == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mcfdw is not in shared_preload_libraries"),
				 errhint("The write-ahead log worker runs only when mcfdw is preloaded.")));
	SpinLockAcquire(&wal->mutex);
	wal->paused = paused;
	SpinLockRelease(&wal->mutex);
	wake_worker();
}

/* mc_wal_pause(): hold the delivery (the slot keeps every change). */
Datum
mc_wal_pause(PG_FUNCTION_ARGS)
{
	set_paused(true);
	PG_RETURN_VOID();
}

Datum
mc_wal_resume(PG_FUNCTION_ARGS)
{
	set_paused(false);
	PG_RETURN_VOID();
}
