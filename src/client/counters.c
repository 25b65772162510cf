/*
 * counters.c — per-server counters a dashboard can alert on.
 *
 * Owns: the counts of on-commit writes queued, sent and lost (added by
 * xact.c) and of calls answered as misses (health.c), per foreign server;
 * counters_sql.c shows and resets them (mc_counters, mc_counters_reset).
 * Must not: read the catalog when counting (writes are counted after
 * commit), or take a lock to count a server it has counted before.
 *
 * Two modes.  With mcfdw in shared_preload_libraries the counts live in
 * shared memory, one slot per (database, server), so every session sees
 * what every other one counted (scope 'cluster').  Otherwise each backend
 * keeps its own (scope 'session'): a dashboard's session then sees only its
 * own calls, which is why the view says which mode it is in.
 *
 * The shared table has MC_COUNTER_SLOTS slots, taken at a server's first
 * count and freed only by mc_counters_reset() (slots of dropped servers or
 * databases stay until then).  Once every slot is taken, the counts of
 * further servers go to one overflow slot, shown as a row without a server
 * name to members of pg_read_all_stats, and each backend that overflows
 * LOGs it once: an alert must not go silent because the table is full.
 *
 * Each backend remembers the slot of each server it counted, tagged with
 * the table's generation, which every reset bumps; counting is one atomic
 * read of the generation and one atomic add.  An add that races a reset
 * may land in a freed slot, so it is lost or, if another server claims the
 * slot in that instant, counted there: one count, at an administrator's
 * reset, is not worth a lock on every count.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "counters.h"

/* The counts of one server; serverid InvalidOid: free (or the overflow). */
typedef struct CounterSlot
{
	Oid			dbid;
	Oid			serverid;
	pg_atomic_uint64 c[MC_NCOUNTERS];
} CounterSlot;

typedef struct SharedCounters
{
	LWLock	   *lock;			/* slot keys, reset_time */
	pg_atomic_uint32 generation;	/* bumped by every reset */
	TimestampTz reset_time;
	CounterSlot slots[MC_COUNTER_SLOTS + 1];	/* [0]: the overflow */
} SharedCounters;

/* A server this backend counted: its slot, shared or its own. */
typedef struct LocalEntry
{
	Oid			serverid;		/* hash key */
	uint32		generation;		/* of shared->generation when slot was found */
	CounterSlot *slot;			/* NULL: not looked up yet */
	CounterSlot own;			/* the counts when not preloaded */
} LocalEntry;

static SharedCounters *shared = NULL;
static HTAB *local_hash = NULL;
static LocalEntry *last_entry = NULL;
static TimestampTz local_reset = 0; /* 0: the session's start */
static bool overflow_logged = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
counters_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(sizeof(SharedCounters));
	RequestNamedLWLockTranche("mcfdw", 1);
}

static void
counters_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("mcfdw counters", sizeof(SharedCounters), &found);
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche("mcfdw"))->lock;
		pg_atomic_init_u32(&shared->generation, 0);
		shared->reset_time = GetCurrentTimestamp();
		for (int i = 0; i <= MC_COUNTER_SLOTS; i++)
		{
			shared->slots[i].dbid = InvalidOid;
			shared->slots[i].serverid = InvalidOid;
			for (int k = 0; k < MC_NCOUNTERS; k++)
				pg_atomic_init_u64(&shared->slots[i].c[k], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
McCountersInit(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = counters_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = counters_shmem_startup;
}

/* The shared slot of a server of this database, or NULL; lock held. */
static CounterSlot *
find_slot(Oid serverid)
{
	for (int i = 1; i <= MC_COUNTER_SLOTS; i++)
	{
		CounterSlot *s = &shared->slots[i];

		if (s->serverid == serverid && s->dbid == MyDatabaseId)
			return s;
	}
	return NULL;
}

/* Point e at its server's shared slot, taking a free one if need be. */
static void
attach(LocalEntry *e)
{
	CounterSlot *s;

	LWLockAcquire(shared->lock, LW_SHARED);
	s = find_slot(e->serverid);
	if (s == NULL)
	{
		LWLockRelease(shared->lock);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		s = find_slot(e->serverid);
		for (int i = 1; s == NULL && i <= MC_COUNTER_SLOTS; i++)
		{
			if (shared->slots[i].serverid == InvalidOid)
			{
				s = &shared->slots[i];
				for (int k = 0; k < MC_NCOUNTERS; k++)
					pg_atomic_write_u64(&s->c[k], 0);
				s->dbid = MyDatabaseId;
				s->serverid = e->serverid;
			}
		}
		if (s == NULL)
			s = &shared->slots[0];
	}
	/* read under the lock: a reset (exclusive) cannot slip in between */
	e->generation = pg_atomic_read_u32(&shared->generation);
	e->slot = s;
	LWLockRelease(shared->lock);

	if (s == &shared->slots[0] && !overflow_logged)
	{
		overflow_logged = true;
		ereport(LOG,
				(errmsg("mcfdw counters are full: server %u of database %u is counted in the overflow row of mc_counters",
						e->serverid, MyDatabaseId),
				 errhint("mc_counters_reset() frees the slots of every server.")));
	}
}

/* This backend's entry of a server, made at its first count. */
static LocalEntry *
local_entry(Oid serverid)
{
	LocalEntry *e;
	bool		found;

	if (local_hash == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(LocalEntry);
		local_hash = hash_create("mcfdw counters", 8, &ctl,
								 HASH_ELEM | HASH_BLOBS);
	}
	e = hash_search(local_hash, &serverid, HASH_ENTER, &found);
	if (!found)
	{
		e->generation = 0;
		e->slot = NULL;
		e->own.dbid = MyDatabaseId;
		e->own.serverid = serverid;
		for (int k = 0; k < MC_NCOUNTERS; k++)
			pg_atomic_init_u64(&e->own.c[k], 0);
		if (shared == NULL)
			e->slot = &e->own;
	}
	return e;
}

void
McCountersAdd(Oid serverid, McCounter which, uint64 n)
{
	LocalEntry *e = last_entry;

	if (e == NULL || e->serverid != serverid)
		last_entry = e = local_entry(serverid);
	if (shared != NULL &&
		(e->slot == NULL || e->generation != pg_atomic_read_u32(&shared->generation)))
		attach(e);
	pg_atomic_fetch_add_u64(&e->slot->c[which], n);
}

bool
McCountersShared(void)
{
	return shared != NULL;
}

/* Copy a slot's counts (none: zeros). */
static void
read_slot(CounterSlot *s, uint64 *out)
{
	for (int k = 0; k < MC_NCOUNTERS; k++)
		out[k] = s ? pg_atomic_read_u64(&s->c[k]) : 0;
}

void
McCountersRead(const Oid *servers, int n, uint64 (*out)[MC_NCOUNTERS],
			   uint64 *overflow, TimestampTz *since)
{
	if (shared != NULL)
	{
		LWLockAcquire(shared->lock, LW_SHARED);
		for (int i = 0; i < n; i++)
			read_slot(find_slot(servers[i]), out[i]);
		read_slot(&shared->slots[0], overflow);
		*since = shared->reset_time;
		LWLockRelease(shared->lock);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		LocalEntry *e = local_hash ?
			hash_search(local_hash, &servers[i], HASH_FIND, NULL) : NULL;

		read_slot(e ? e->slot : NULL, out[i]);
	}
	read_slot(NULL, overflow);
	*since = local_reset ? local_reset : MyStartTimestamp;
}

void
McCountersReset(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (shared != NULL)
	{
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i <= MC_COUNTER_SLOTS; i++)
		{
			shared->slots[i].dbid = InvalidOid;
			shared->slots[i].serverid = InvalidOid;
			for (int k = 0; k < MC_NCOUNTERS; k++)
				pg_atomic_write_u64(&shared->slots[i].c[k], 0);
		}
		shared->reset_time = now;
		pg_atomic_fetch_add_u32(&shared->generation, 1);
		LWLockRelease(shared->lock);
	}
	else
	{
		HASH_SEQ_STATUS scan;
		LocalEntry *e;

		if (local_hash != NULL)
		{
			hash_seq_init(&scan, local_hash);
			while ((e = hash_seq_search(&scan)) != NULL)
				for (int k = 0; k < MC_NCOUNTERS; k++)
					pg_atomic_write_u64(&e->own.c[k], 0);
		}
		local_reset = now;
	}
}
