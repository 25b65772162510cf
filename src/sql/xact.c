/*
 * xact.c — memcached writes that wait for the transaction to commit.
 *
 * Owns: the per-transaction queue behind mc_delete_on_commit,
 * mc_set_on_commit and the mc_invalidate trigger (trigger.c), its
 * (sub)transaction callbacks, sending it once the commit is durable, and
 * this session's counters of mc_invalidation_stats (mc_counters' are
 * counters.c's).  Must not: touch the catalog after commit (a write's
 * server is resolved and its USAGE checked when the write is queued),
 * raise an error at commit (a committed transaction stays committed:
 * failures become one WARNING per server), or wait without a bound
 * (interrupts are held while a transaction commits).
 *
 * The queue is an append-only log in TopTransactionContext, each entry
 * labelled with the subtransaction nesting level that queued it; levels
 * never decrease along the log.  A subtransaction that aborts cuts the log
 * back to where it began, so what it queued is forgotten and what it
 * superseded counts again; one that commits hands its entries to its
 * parent.  Deduplication (the last write of a key wins) happens once, at
 * commit.
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "batch.h"
#include "counters.h"
#include "engine.h"
#include "keys.h"
#include "xact.h"

PG_FUNCTION_INFO_V1(mc_delete_on_commit);
PG_FUNCTION_INFO_V1(mc_set_on_commit);
PG_FUNCTION_INFO_V1(mc_invalidation_stats);

/*
 * After commit a server's writes get at most connect_timeout + io_timeout,
 * each capped here, and a timeout of 0 ("wait forever") counts as the cap:
 * the commit holds its locks while it waits, with interrupts held, so only
 * a terminate or a cancel (which give the send up, McEngineHeldInterrupt)
 * end the wait sooner.
 */
#define MC_COMMIT_WAIT_MAX_MS	5000

/* One queued write. */
typedef struct QueuedWrite
{
	Oid			serverid;
	Oid			umid;			/* the login it was queued under (SET ROLE) */
	int			level;			/* nesting level of the (sub)xact that owns it */
	McOpKind	kind;			/* MC_OP_DELETE or MC_OP_STORE (a set) */
	bool		has_ttl;
	bool		has_flags;
	uint32		flags;
	int64		ttl;
	size_t		keylen;
	size_t		valuelen;
	char	   *key;			/* routed key, then the value: one chunk */
} QueuedWrite;

static QueuedWrite *queue = NULL;
static int	nqueue = 0;
static int	queue_cap = 0;

/*
 * The commit's order of the queue (cmp_writes), allocated as the queue
 * grows so that sorting it at commit cannot fail; writes before
 * order[accounted] are counted sent or lost, the rest not yet.
 */
static int *order = NULL;
static int	accounted = 0;
static bool callbacks_registered = false;

/* This backend's counts for one server (mc_invalidation_stats). */
typedef struct ServerCounts
{
	Oid			serverid;		/* hash key */
	char		name[NAMEDATALEN];	/* as of the last write queued */
	uint64		queued;			/* calls that queued a write */
	uint64		sent;			/* writes the server answered after commit */
	uint64		lost;			/* writes that failed or ran out of time */
	char		last_error[256];
} ServerCounts;

static HTAB *counts_hash = NULL;
static ServerCounts *last_counts = NULL;

static void count_rest_lost(const char *why);
static void xact_cb(XactEvent event, void *arg);
static void subxact_cb(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg);

/* The counts entry of a server, made at its first queued write. */
static ServerCounts *
server_counts(McServer *srv)
{
	ServerCounts *c = last_counts;
	bool		found;

	if (c == NULL || c->serverid != srv->serverid)
	{
		if (counts_hash == NULL)
		{
			HASHCTL		ctl;

			ctl.keysize = sizeof(Oid);
			ctl.entrysize = sizeof(ServerCounts);
			counts_hash = hash_create("mcfdw on-commit counts", 8, &ctl,
									  HASH_ELEM | HASH_BLOBS);
		}
		c = hash_search(counts_hash, &srv->serverid, HASH_ENTER, &found);
		if (!found)
		{
			memset(((char *) c) + sizeof(Oid), 0, sizeof(ServerCounts) - sizeof(Oid));
			strlcpy(c->name, srv->name, sizeof(c->name));
		}
		last_counts = c;
	}
	if (strcmp(c->name, srv->name) != 0)
		strlcpy(c->name, srv->name, sizeof(c->name));	/* renamed */
	return c;
}

/*
 * Append a write to the queue.  The key is checked and routed now, so a bad
 * key is the caller's error, not a lost write at commit.  A write of the
 * same key right after one of the same subtransaction replaces it in place:
 * a loop rewriting one key does not grow the queue.
 */
static void
queue_write(McServer *srv, McOpKind kind, const char *key, size_t len,
			const char *value, size_t vlen, bool has_ttl, int64 ttl,
			bool has_flags, uint32 flags)
{
	char		buf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
	size_t		rawlen;
	bool		b64;
	const char *raw;
	int			level = GetCurrentTransactionNestLevel();
	ServerCounts *counts;
	QueuedWrite *w = NULL;
	char	   *data;

	McServerCheckWrite(srv);	/* refused now, not lost after commit */
	(void) McKeyRoute(srv, key, len, buf, &raw, &rawlen, &b64);
	if (!callbacks_registered)
	{
		RegisterXactCallback(xact_cb, NULL);
		RegisterSubXactCallback(subxact_cb, NULL);
		callbacks_registered = true;
	}
	counts = server_counts(srv);
	if (nqueue == queue_cap)
	{
		if (queue_cap >= INT_MAX / 2)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many memcached writes are queued in this transaction")));
		if (queue == NULL)
		{
			queue = MemoryContextAlloc(TopTransactionContext, 64 * sizeof(QueuedWrite));
			order = MemoryContextAlloc(TopTransactionContext, 64 * sizeof(int));
			queue_cap = 64;
		}
		else
		{
			queue = repalloc_huge(queue, (Size) queue_cap * 2 * sizeof(QueuedWrite));
			order = repalloc_huge(order, (Size) queue_cap * 2 * sizeof(int));
			queue_cap *= 2;
		}
	}
	data = MemoryContextAllocExtended(TopTransactionContext, rawlen + vlen,
									  MCXT_ALLOC_HUGE);
	memcpy(data, raw, rawlen);
	if (vlen > 0)
		memcpy(data + rawlen, value, vlen);

	/* nothing below can fail */
	if (nqueue > 0)
	{
		QueuedWrite *last = &queue[nqueue - 1];

		if (last->serverid == srv->serverid && last->umid == srv->umid &&
			last->level == level &&
			last->keylen == rawlen && memcmp(last->key, raw, rawlen) == 0)
		{
			pfree(last->key);
			w = last;
		}
	}
	if (w == NULL)
		w = &queue[nqueue++];
	w->serverid = srv->serverid;
	w->umid = srv->umid;
	w->level = level;
	w->kind = kind;
	w->has_ttl = has_ttl;
	w->ttl = ttl;
	w->has_flags = has_flags;
	w->flags = flags;
	w->keylen = rawlen;
	w->valuelen = vlen;
	w->key = data;
	counts->queued++;
	McCountersAdd(srv->serverid, MC_COUNT_QUEUED, 1);
}

void
McXactQueueDelete(McServer *srv, const char *key, size_t len)
{
	queue_write(srv, MC_OP_DELETE, key, len, NULL, 0, false, 0, false, 0);
}

/*
 * Order for deduplication: by server and login, then key, then queue
 * position.  Writes queued under different roles' logins go in separate
 * batches, each with its own login, so no write is sent as another role.
 */
static int
cmp_writes(const void *a, const void *b)
{
	int			ia = *(const int *) a;
	int			ib = *(const int *) b;
	const QueuedWrite *x = &queue[ia];
	const QueuedWrite *y = &queue[ib];
	int			c;

	if (x->serverid != y->serverid)
		return x->serverid < y->serverid ? -1 : 1;
	if (x->umid != y->umid)
		return x->umid < y->umid ? -1 : 1;
	if (x->keylen != y->keylen)
		return x->keylen < y->keylen ? -1 : 1;
	c = memcmp(x->key, y->key, x->keylen);
	if (c != 0)
		return c;
	return ia < ib ? -1 : (ia > ib);
}

static bool
same_key(const QueuedWrite *x, const QueuedWrite *y)
{
	return x->serverid == y->serverid && x->umid == y->umid &&
		x->keylen == y->keylen &&
		memcmp(x->key, y->key, x->keylen) == 0;
}

/* The commit-time budget of one server: see MC_COMMIT_WAIT_MAX_MS. */
static int
commit_budget(McServer *srv)
{
	int			ct = srv->cfg.connect_timeout;
	int			io = srv->cfg.io_timeout;

	if (ct <= 0 || ct > MC_COMMIT_WAIT_MAX_MS)
		ct = MC_COMMIT_WAIT_MAX_MS;
	if (io <= 0 || io > MC_COMMIT_WAIT_MAX_MS)
		io = MC_COMMIT_WAIT_MAX_MS;
	return ct + io;
}

/* Send one server's deduplicated writes (order up to end); count and report the lost ones. */
static void
send_server(Oid serverid, Oid umid, McOp *ops, int nops, int end)
{
	ServerCounts *counts = hash_search(counts_hash, &serverid, HASH_FIND, NULL);
	McServer   *srv = McServerPeek(serverid, umid);
	char		err[256];
	int			failed;

	Assert(counts != NULL);
	McCsSetOp(MC_CS_ON_COMMIT);
	if (srv == NULL)
	{
		failed = nops;
		strlcpy(err, "The server was dropped.", sizeof(err));
	}
	else
		failed = McBatchWrite(srv, ops, nops, commit_budget(srv), true,
							  err, sizeof(err));
	counts->sent += nops - failed;
	counts->lost += failed;
	McCountersAdd(serverid, MC_COUNT_SENT, nops - failed);
	McCountersAdd(serverid, MC_COUNT_LOST, failed);
	accounted = end;
	if (failed == 0)
		return;
	strlcpy(counts->last_error, err, sizeof(counts->last_error));
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg_plural("could not send %d of %d queued write to memcached server \"%s\" after commit",
						   "could not send %d of %d queued writes to memcached server \"%s\" after commit",
						   nops, failed, nops, counts->name),
			 errdetail("First failure: %s", err),
			 errhint("The transaction is committed.  Cached values of those keys may be stale until they expire.")));
}

/*
 * Sort the queue for deduplication (cannot fail: order is allocated with
 * the queue); from here on every write is counted, sent or lost.
 */
static void
sort_queue(void)
{
	for (int i = 0; i < nqueue; i++)
		order[i] = i;
	qsort(order, nqueue, sizeof(int), cmp_writes);
	accounted = 0;
}

/* Deduplicate the sorted queue and send it, server by server. */
static void
send_queue(void)
{
	McOp	   *ops;
	int			start = 0;

	ops = MemoryContextAllocHuge(TopTransactionContext, (Size) nqueue * sizeof(McOp));
	while (start < nqueue)
	{
		Oid			serverid = queue[order[start]].serverid;
		Oid			umid = queue[order[start]].umid;
		int			nops = 0;
		int			end;

		for (end = start; end < nqueue && queue[order[end]].serverid == serverid &&
			 queue[order[end]].umid == umid; end++)
		{
			QueuedWrite *w = &queue[order[end]];
			McOp	   *op;

			/* only the last write of a key counts */
			if (end + 1 < nqueue && same_key(w, &queue[order[end + 1]]))
				continue;
			op = &ops[nops++];
			McOpInit(op, w->kind, NULL);
			op->key = w->key;
			op->keylen = w->keylen;
			op->data = w->key + w->keylen;
			op->datalen = w->valuelen;
			op->has_ttl = w->has_ttl;
			op->ttl = w->ttl;
			op->has_flags = w->has_flags;
			op->flags = w->flags;
			op->result = MC_OP_FAILED;
		}
		send_server(serverid, umid, ops, nops, end);
		start = end;
		/* a terminate or cancel ended the wait: the other servers are not tried */
		if (start < nqueue && McEngineHeldInterrupt() != NULL)
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("queued memcached writes to other servers were not sent after commit: %s",
							McEngineHeldInterrupt()),
					 errhint("The transaction is committed.  Cached values of the queued keys may be stale until they expire.")));
			count_rest_lost(McEngineHeldInterrupt());
			break;
		}
	}
}

/*
 * An error ended the send: every deduplicated write not counted yet (the
 * server being sent and those after it) is lost, whatever raised it.
 */
static void
count_rest_lost(const char *why)
{
	int			i = accounted;

	while (i < nqueue)
	{
		Oid			serverid = queue[order[i]].serverid;
		ServerCounts *counts = hash_search(counts_hash, &serverid, HASH_FIND, NULL);
		uint64		lost = 0;

		for (; i < nqueue && queue[order[i]].serverid == serverid; i++)
			if (i + 1 == nqueue || !same_key(&queue[order[i]], &queue[order[i + 1]]))
				lost++;
		if (counts != NULL)
		{
			counts->lost += lost;
			strlcpy(counts->last_error, why, sizeof(counts->last_error));
		}
		McCountersAdd(serverid, MC_COUNT_LOST, lost);
	}
	accounted = nqueue;
}

/*
 * send_queue after commit: whatever goes wrong is a WARNING, and what was
 * not sent is counted lost (McEngineCatch puts back the interrupt hold-off
 * counts the commit relies on).
 */
static void
send_queue_cb(void *arg)
{
	send_queue();
}

static void
send_queue_after_commit(void)
{
	ErrorData  *ed;

	sort_queue();
	ed = McEngineCatch(send_queue_cb, NULL, true);
	if (ed != NULL)
	{
		count_rest_lost(ed->message ? ed->message : "unknown error");
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not send the queued memcached writes after commit"),
				 errdetail_internal("%s", ed->message),
				 errhint("The transaction is committed.  Cached values of the queued keys may be stale until they expire.")));
		FreeErrorData(ed);
	}

	/*
	 * A cancel that came during the send gave the send up; the transaction
	 * is committed, so it cancels nothing else (an error now would report a
	 * committed COMMIT as failed).  Consumed, as the wait for synchronous
	 * replication consumes it.  A terminate stays pending: the backend
	 * exits once interrupts are resumed.
	 */
	if (QueryCancelPending && McEngineHeldInterrupt() != NULL && !ProcDiePending)
		QueryCancelPending = false;
}

/* The queue's memory goes with TopTransactionContext; forget it. */
static void
forget_queue(void)
{
	queue = NULL;
	order = NULL;
	nqueue = 0;
	queue_cap = 0;
}

static void
xact_cb(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (nqueue > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has queued memcached writes"),
						 errdetail("Writes queued by mc_delete_on_commit, mc_set_on_commit or mc_invalidate are sent when the transaction commits in this session.")));
			break;
		case XACT_EVENT_COMMIT:
			/* durable and visible to others by now: safe to invalidate */
			if (nqueue > 0)
				send_queue_after_commit();
			forget_queue();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			forget_queue();
			break;
		default:
			break;
	}
}

static void
subxact_cb(SubXactEvent event, SubTransactionId mySubid,
		   SubTransactionId parentSubid, void *arg)
{
	int			level;

	if (nqueue == 0)
		return;
	level = GetCurrentTransactionNestLevel();
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		while (nqueue > 0 && queue[nqueue - 1].level >= level)
			pfree(queue[--nqueue].key);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int i = nqueue - 1; i >= 0 && queue[i].level >= level; i--)
			queue[i].level = level - 1;
	}
}

/* Server name argument at position argno, or NULL for the default. */
static const char *
server_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return NULL;
	return NameStr(*PG_GETARG_NAME(argno));
}

/*
 * mc_delete_on_commit(key, server): delete key once the transaction
 * commits.  A NULL key queues nothing.
 */
Datum
mc_delete_on_commit(PG_FUNCTION_ARGS)
{
	McServer   *srv;
	text	   *key;

	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	srv = McServerLookup(server_arg(fcinfo, 1));
	key = PG_GETARG_TEXT_PP(0);
	McXactQueueDelete(srv, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	PG_RETURN_VOID();
}

/*
 * mc_set_on_commit(key, value text|bytea, ttl, flags, server): store the
 * value once the transaction commits, as mc_set would.  A NULL key or value
 * queues nothing.  The ttl is converted now: a relative one counts from
 * when memcached receives the write.
 */
Datum
mc_set_on_commit(PG_FUNCTION_ARGS)
{
	McServer   *srv;
	text	   *key;
	struct varlena *value;
	bool		has_ttl = !PG_ARGISNULL(2);
	bool		has_flags = !PG_ARGISNULL(3);
	int64		ttl = 0;
	const char *data;
	size_t		len;
	uint32		flags;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_VOID();
	srv = McServerLookup(server_arg(fcinfo, 4));
	key = PG_GETARG_TEXT_PP(0);
	value = PG_GETARG_VARLENA_PP(1);
	if (has_ttl)
		ttl = McTtlFromInterval(PG_GETARG_INTERVAL_P(2));
	/* compressed now, as mc_set would: nothing can fail at commit */
	data = VARDATA_ANY(value);
	len = VARSIZE_ANY_EXHDR(value);
	flags = has_flags ? (uint32) PG_GETARG_INT32(3) : 0;
	has_flags |= McValueDeflate(srv, &data, &len, &flags);
	queue_write(srv, MC_OP_STORE, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
				data, len, has_ttl, ttl, has_flags, flags);
	PG_RETURN_VOID();
}

/*
 * mc_invalidation_stats(): this backend's on-commit counts, one row per
 * server it queued writes for.
 */
Datum
mc_invalidation_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS scan;
	ServerCounts *c;

	InitMaterializedSRF(fcinfo, 0);
	if (counts_hash == NULL)
		return (Datum) 0;
	hash_seq_init(&scan, counts_hash);
	while ((c = hash_seq_search(&scan)) != NULL)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		NameData	name;

		namestrcpy(&name, c->name);
		values[0] = NameGetDatum(&name);
		values[1] = Int64GetDatum((int64) c->queued);
		values[2] = Int64GetDatum((int64) c->sent);
		values[3] = Int64GetDatum((int64) c->lost);
		if (c->last_error[0] != '\0')
			values[4] = CStringGetTextDatum(c->last_error);
		else
			nulls[4] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
