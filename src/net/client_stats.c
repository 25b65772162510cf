/*
 * client_stats.c — what mcfdw did, per database, server, instance and kind
 * of operation: calls, keys, hits, misses, bytes, errors by class, degraded
 * calls, latency (total, max, a log-scale histogram); and which instances
 * any backend marked dead, and when.
 *
 * Owns: the store (the cluster's in shared memory when preloaded, this
 * session's otherwise: the same table, in backend memory), each backend's
 * pending counts and moving them to the store.  client_stats_sql.c shows
 * it.  Must not: take a lock or touch shared memory per request, read the
 * catalog, or know what a command means (the connection layer tallies a
 * request; the surface says which operation it is, McCsSetOp).
 *
 * A request adds to this backend's pending counts of its instance and
 * operation (a few stores; the entry is cached on the connection).  The
 * pending counts go to the store at the end of every transaction (commit,
 * abort, and after the on-commit queue was sent: this callback is
 * registered before xact.c's, so it runs after it), when a backend reads
 * the view, and at most a second apart within a long transaction.
 *
 * The store is a fixed table of mcfdw.client_stats_max slots, one per
 * (database, server, instance, operation), taken at its first flush and
 * freed only by a reset.  Once every slot is taken, further counts go to
 * one overflow slot per operation (shown without server and instance to
 * members of pg_read_all_stats), and the backend LOGs it once.  Adds are
 * atomic and take no lock; a backend keeps the slot it found, tagged with
 * the table's generation, which every reset bumps (as counters.c does: an
 * add racing a reset may be lost).
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "client_stats.h"

McCsOp		mc_cs_op = MC_CS_OTHER;
int			mc_client_stats_max = 1000;
bool		mc_client_stats_on = true;

const char *const mc_cs_op_names[MC_NOPS] = {
	"other", "get", "get_multi", "set", "set_multi", "delete", "incr/decr",
	"touch", "lease", "meta", "on_commit", "scan", "join", "modify",
	"full_scan", "stats", "wal"
};

/*
 * Operations whose replies say whether the key was there: the writes that
 * store (a stored value is neither) count no hits or misses.
 */
const bool	mc_cs_finds[MC_NOPS] = {
	[MC_CS_GET] = true, [MC_CS_GET_MULTI] = true, [MC_CS_DELETE] = true,
	[MC_CS_INCR] = true, [MC_CS_TOUCH] = true, [MC_CS_LEASE] = true,
	[MC_CS_META] = true, [MC_CS_SCAN] = true, [MC_CS_JOIN] = true,
	[MC_CS_FULL_SCAN] = true, [MC_CS_WAL] = true
};

/* Quiet pipelined reads: a key without a hit was a miss. */
const bool	mc_cs_quiet_read[MC_NOPS] = {
	[MC_CS_GET_MULTI] = true, [MC_CS_SCAN] = true, [MC_CS_JOIN] = true,
	[MC_CS_FULL_SCAN] = true
};

int64		mc_cs_flush_due = 0;

/* Slots the session's store holds when not preloaded. */
#define SESSION_SLOTS	200

typedef struct CsSlot
{
	Oid			dbid;
	Oid			serverid;
	int16		op;
	bool		used;
	char		instance[MC_CS_NAME_MAX];
	pg_atomic_uint64 c[MC_CS_NFIELDS];
} CsSlot;

typedef struct CsDead
{
	bool		used;
	McCsDeadRow row;
} CsDead;

typedef struct CsStore
{
	LWLock	   *lock;			/* slot keys, dead rows, reset_time */
	pg_atomic_uint32 generation;	/* bumped by every reset */
	TimestampTz reset_time;
	int			nslots;			/* after the MC_NOPS overflow slots */
	CsSlot	   *slots;			/* MC_NOPS + nslots */
	CsDead	   *dead;			/* nslots */
} CsStore;

static CsStore *store = NULL;
static bool cluster = false;
static HTAB *local_hash = NULL;
static McCsInstance **dirty_list = NULL;
static int	ndirty = 0;
static int	dirty_cap = 0;
static bool overflow_logged = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
store_size(int nslots)
{
	return add_size(add_size(MAXALIGN(sizeof(CsStore)),
							 mul_size(MC_NOPS + nslots, sizeof(CsSlot))),
					mul_size(nslots, sizeof(CsDead)));
}

/* Lay out a store in mem (zeroed slots); nslots after the overflow ones. */
static CsStore *
store_init(void *mem, int nslots)
{
	CsStore    *s = mem;
	char	   *p = (char *) mem + MAXALIGN(sizeof(CsStore));

	s->lock = NULL;
	pg_atomic_init_u32(&s->generation, 1);
	s->reset_time = GetCurrentTimestamp();
	s->nslots = nslots;
	s->slots = (CsSlot *) p;
	s->dead = (CsDead *) (p + (MC_NOPS + nslots) * sizeof(CsSlot));
	for (int i = 0; i < MC_NOPS + nslots; i++)
	{
		CsSlot	   *sl = &s->slots[i];

		sl->dbid = InvalidOid;
		sl->serverid = InvalidOid;
		sl->op = i < MC_NOPS ? i : 0;
		sl->used = i < MC_NOPS; /* the overflow slots are always there */
		sl->instance[0] = '\0';
		for (int k = 0; k < MC_CS_NFIELDS; k++)
			pg_atomic_init_u64(&sl->c[k], 0);
	}
	for (int i = 0; i < nslots; i++)
		s->dead[i].used = false;
	return s;
}

static void
cs_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(store_size(mc_client_stats_max));
	RequestNamedLWLockTranche("mcfdw client stats", 1);
}

static void
cs_shmem_startup(void)
{
	bool		found;
	void	   *mem;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	mem = ShmemInitStruct("mcfdw client stats", store_size(mc_client_stats_max),
						  &found);
	if (!found)
	{
		store = store_init(mem, mc_client_stats_max);
		store->lock = &(GetNamedLWLockTranche("mcfdw client stats"))->lock;
	}
	else
		store = mem;
	cluster = true;
	LWLockRelease(AddinShmemInitLock);
}

/* The session's own store, made at its first use when not preloaded. */
static inline CsStore *
get_store(void)
{
	if (unlikely(store == NULL))
	{
		int			n = Min(mc_client_stats_max, SESSION_SLOTS);

		store = store_init(MemoryContextAllocZero(TopMemoryContext, store_size(n)), n);
	}
	return store;
}

static inline void
lock_store(LWLockMode mode)
{
	if (cluster)
		LWLockAcquire(store->lock, mode);
}

static inline void
unlock_store(void)
{
	if (cluster)
		LWLockRelease(store->lock);
}

/*
 * Pending counts go to the store when a transaction ends, including after
 * the on-commit queue was sent (xact.c registers its callback later, so
 * it runs first).
 */
static void
cs_xact_cb(XactEvent event, void *arg)
{
	if (ndirty > 0)
		McCsFlush();
}

void
McCsInit(void)
{
	StaticAssertStmt(MC_NOPS <= MC_CS_PSTRIDE, "a pending field holds every operation");
	RegisterXactCallback(cs_xact_cb, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = cs_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = cs_shmem_startup;
}

bool
McCsShared(void)
{
	return cluster;
}

McCsInstance *
McCsInstanceOf(Oid serverid, const char *instance)
{
	char		key[offsetof(McCsInstance, dirty)];
	McCsInstance *in;
	bool		found;

	if (local_hash == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = offsetof(McCsInstance, dirty);
		ctl.entrysize = sizeof(McCsInstance);
		local_hash = hash_create("mcfdw client stats", 16, &ctl,
								 HASH_ELEM | HASH_BLOBS);
	}
	/* the key: the server's OID and the instance's name, zero-padded */
	memset(key, 0, sizeof(key));
	memcpy(key, &serverid, sizeof(Oid));
	strlcpy(key + offsetof(McCsInstance, instance), instance, MC_CS_NAME_MAX);
	in = hash_search(local_hash, key, HASH_ENTER, &found);
	if (!found)
	{
		in->dirty = false;
		in->due = 0;
		memset(in->p, 0, sizeof(in->p));
		memset(in->slot, 0, sizeof(in->slot));
		memset(in->gen, 0, sizeof(in->gen));
	}
	return in;
}

/* Put in on the list of instances to flush. */
static void
mark_dirty(McCsInstance *in)
{
	if (in->dirty)
		return;
	if (ndirty == dirty_cap)
	{
		dirty_cap = dirty_cap ? dirty_cap * 2 : 16;
		dirty_list = dirty_list ?
			repalloc(dirty_list, sizeof(McCsInstance *) * dirty_cap) :
			MemoryContextAlloc(TopMemoryContext, sizeof(McCsInstance *) * dirty_cap);
	}
	dirty_list[ndirty++] = in;
	in->dirty = true;
	in->due = mc_cs_flush_due;
}

/*
 * McCsRecordInline's rare part: a first count since a flush, or a flush
 * due.  An operation of an instance that has no slot yet takes it now, at
 * its first count, so a backend's first second of requests costs what any
 * other second does.
 */
void
McCsRecordSlow(McCsInstance *in, int64 now)
{
	mark_dirty(in);
	if (now > mc_cs_flush_due || unlikely(in->slot[mc_cs_op] == NULL))
		McCsFlush();
}

void
McCsRecord(McCsReq *rq, int64 start, int64 now, McCsError err)
{
	McCsRecordInline(rq, start, now, err);
}

void
McCsRefused(Oid serverid, const char *instance)
{
	McCsInstance *in;
	int			op = mc_cs_op;

	if (!mc_client_stats_on)
		return;
	in = McCsInstanceOf(serverid, instance);
	in->p[MC_CSF_CALLS][op]++;
	in->p[MC_CSF_ERR + MC_CSE_CONNECT][op]++;
	in->p[MC_CSF_HIST][op]++;	/* no time passed */
	mark_dirty(in);
}

void
McCsDegraded(Oid serverid, const char *instance)
{
	McCsInstance *in;
	int			op = mc_cs_op;

	if (!mc_client_stats_on)
		return;
	in = McCsInstanceOf(serverid, instance);
	in->p[MC_CSF_DEGRADED][op]++;
	mark_dirty(in);
}

/* The slot of (this database, in's server and instance, op); lock held. */
static CsSlot *
find_slot(McCsInstance *in, int op)
{
	for (int i = MC_NOPS; i < MC_NOPS + store->nslots; i++)
	{
		CsSlot	   *s = &store->slots[i];

		if (s->used && s->serverid == in->serverid && s->op == op &&
			s->dbid == MyDatabaseId &&
			strcmp(s->instance, in->instance) == 0)
			return s;
	}
	return NULL;
}

/* Point in->slot[op] at its slot, taking a free one if need be. */
static CsSlot *
attach(McCsInstance *in, int op)
{
	CsSlot	   *s;

	lock_store(LW_SHARED);
	s = find_slot(in, op);
	if (s == NULL)
	{
		unlock_store();
		lock_store(LW_EXCLUSIVE);
		s = find_slot(in, op);
		for (int i = MC_NOPS; s == NULL && i < MC_NOPS + store->nslots; i++)
		{
			if (!store->slots[i].used)
			{
				s = &store->slots[i];
				for (int k = 0; k < MC_CS_NFIELDS; k++)
					pg_atomic_write_u64(&s->c[k], 0);
				s->dbid = MyDatabaseId;
				s->serverid = in->serverid;
				s->op = op;
				strlcpy(s->instance, in->instance, sizeof(s->instance));
				s->used = true;
			}
		}
		if (s == NULL)
			s = &store->slots[op];
	}
	/* read under the lock: a reset (exclusive) cannot slip in between */
	in->gen[op] = pg_atomic_read_u32(&store->generation);
	in->slot[op] = s;
	unlock_store();

	if (s == &store->slots[op] && !overflow_logged)
	{
		overflow_logged = true;
		ereport(LOG,
				(errmsg("mcfdw client statistics are full: instance %s of server %u of database %u is counted in the overflow rows of mc_client_stats",
						in->instance, in->serverid, MyDatabaseId),
				 errhint("Raise mcfdw.client_stats_max, or call mc_client_stats_reset().")));
	}
	return s;
}

/*
 * Add one instance's pending counts of op to its slot, and zero them (the
 * pending hits and misses are one field: mc_cs_found_packed).
 */
static void
flush_one(McCsInstance *in, int op)
{
	uint64	   *p = (uint64 *) in->p + op;
	CsSlot	   *s = in->slot[op];

	/* no latency counted is above the maximum: its bucket is the last used */
	int			nk = MC_CSF_HIST + 2 + pg_leftmost_one_pos64(MC_CS_PF(p, MC_CSF_LAT_MAX) | 1);

	if (s == NULL || in->gen[op] != pg_atomic_read_u32(&store->generation))
		s = attach(in, op);
	for (int k = 0; k < nk; k++)
	{
		if (MC_CS_PF(p, k) == 0)
			continue;
		if (k == MC_CSF_HITS)
		{
			McCsFound	f = mc_cs_found_unpacked(MC_CS_PF(p, k));

			pg_atomic_fetch_add_u64(&s->c[MC_CSF_HITS], f.hits);
			pg_atomic_fetch_add_u64(&s->c[MC_CSF_MISSES], f.misses);
		}
		else if (k == MC_CSF_LAT_MAX)
		{
			uint64		old = pg_atomic_read_u64(&s->c[k]);

			while (old < MC_CS_PF(p, k) &&
				   !pg_atomic_compare_exchange_u64(&s->c[k], &old, MC_CS_PF(p, k)))
				;
		}
		else
			/* the pending buckets past the view's last go into it */
			pg_atomic_fetch_add_u64(&s->c[Min(k, MC_CS_NFIELDS - 1)], MC_CS_PF(p, k));
		MC_CS_PF(p, k) = 0;
	}
}

void
McCsFlush(void)
{
	get_store();
	mc_cs_flush_due = McCsNow() + USECS_PER_SEC;
	for (int i = 0; i < ndirty; i++)
	{
		McCsInstance *in = dirty_list[i];

		/* the operations that counted anything (a degraded call is no call) */
		for (int op = 0; op < MC_NOPS; op++)
			if (in->p[MC_CSF_CALLS][op] != 0 || in->p[MC_CSF_DEGRADED][op] != 0)
				flush_one(in, op);
		in->dirty = false;
		in->due = 0;
	}
	ndirty = 0;
}

void
McCsMarkedDead(Oid serverid, const char *instance, int failures,
			   TimestampTz dead_until, const char *last_error)
{
	CsDead	   *d = NULL;
	CsDead	   *free_d = NULL;

	get_store();
	lock_store(LW_EXCLUSIVE);
	for (int i = 0; i < store->nslots && d == NULL; i++)
	{
		CsDead	   *x = &store->dead[i];

		if (!x->used)
		{
			if (free_d == NULL)
				free_d = x;
		}
		else if (x->row.serverid == serverid && x->row.dbid == MyDatabaseId &&
				 strcmp(x->row.instance, instance) == 0)
			d = x;
	}
	if (d == NULL && free_d != NULL)
	{
		d = free_d;
		d->used = true;
		d->row.dbid = MyDatabaseId;
		d->row.serverid = serverid;
		strlcpy(d->row.instance, instance, sizeof(d->row.instance));
	}
	if (d != NULL)
	{
		d->row.marked_at = GetCurrentTimestamp();
		d->row.dead_until = dead_until;
		d->row.failures = failures;
		d->row.pid = MyProcPid;
		strlcpy(d->row.last_error, last_error, sizeof(d->row.last_error));
	}
	unlock_store();
}

int
McCsReadRows(McCsRow **rows, TimestampTz *since)
{
	int			n = 0;

	McCsFlush();
	*rows = palloc(sizeof(McCsRow) * (MC_NOPS + store->nslots));
	lock_store(LW_SHARED);
	for (int i = 0; i < MC_NOPS + store->nslots; i++)
	{
		CsSlot	   *s = &store->slots[i];
		McCsRow    *r = &(*rows)[n];
		bool		any = false;

		if (!s->used)
			continue;
		r->dbid = s->dbid;
		r->serverid = s->serverid;
		r->op = s->op;
		strlcpy(r->instance, s->instance, sizeof(r->instance));
		for (int k = 0; k < MC_CS_NFIELDS; k++)
			any |= (r->c[k] = pg_atomic_read_u64(&s->c[k])) != 0;
		/* an overflow slot is a row once it counted something */
		if (i >= MC_NOPS || any)
			n++;
	}
	*since = store->reset_time;
	unlock_store();
	return n;
}

int
McCsReadDead(McCsDeadRow **rows)
{
	int			n = 0;

	get_store();
	*rows = palloc(sizeof(McCsDeadRow) * Max(store->nslots, 1));
	lock_store(LW_SHARED);
	for (int i = 0; i < store->nslots; i++)
		if (store->dead[i].used)
			(*rows)[n++] = store->dead[i].row;
	unlock_store();
	return n;
}

void
McCsReset(void)
{
	/* this backend's pending counts go too: they were counted before */
	for (int i = 0; i < ndirty; i++)
	{
		memset(dirty_list[i]->p, 0, sizeof(dirty_list[i]->p));
		dirty_list[i]->dirty = false;
		dirty_list[i]->due = 0;
	}
	ndirty = 0;
	get_store();
	lock_store(LW_EXCLUSIVE);
	for (int i = 0; i < MC_NOPS + store->nslots; i++)
	{
		CsSlot	   *s = &store->slots[i];

		s->used = i < MC_NOPS;
		s->dbid = InvalidOid;
		s->serverid = InvalidOid;
		s->instance[0] = '\0';
		for (int k = 0; k < MC_CS_NFIELDS; k++)
			pg_atomic_write_u64(&s->c[k], 0);
	}
	for (int i = 0; i < store->nslots; i++)
		store->dead[i].used = false;
	store->reset_time = GetCurrentTimestamp();
	pg_atomic_fetch_add_u32(&store->generation, 1);
	unlock_store();
}
