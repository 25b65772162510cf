/*
 * client_stats.h — what mcfdw did, per database, server, instance and kind
 * of operation (client_stats.c), and which instances any backend marked
 * dead.
 *
 * A surface says what it is doing with McCsSetOp (one store); the
 * connection layer keeps the tally of the request on each connection
 * (McCsReq) and hands it over when the request ends (McCsRecord); health.c
 * reports degraded calls and instances marked dead.  Nothing here touches
 * a socket or the catalog.
 */
#ifndef MCFDW_CLIENT_STATS_H
#define MCFDW_CLIENT_STATS_H

#include "postgres.h"

#include <time.h>

#include "datatype/timestamp.h"
#include "port/pg_bitutils.h"

/*
 * For a global the single-key path reads on every request: hidden, it is
 * read straight, not through the shared library's GOT (one load fewer);
 * nothing outside mcfdw.so names it.
 */
#if defined(__GNUC__)
#define MC_HIDDEN __attribute__((visibility("hidden")))
#else
#define MC_HIDDEN
#endif

/* The kinds of operation; the view's op column, in this order. */
typedef enum McCsOp
{
	MC_CS_OTHER,				/* flush_all, anything not named below */
	MC_CS_GET,					/* mc_get, mc_gets, mc_get_raw */
	MC_CS_GET_MULTI,			/* mc_get_multi */
	MC_CS_SET,					/* mc_set, add, replace, append, prepend, cas */
	MC_CS_SET_MULTI,			/* mc_set_multi */
	MC_CS_DELETE,				/* mc_delete, mc_mark_stale, mc_delete_multi */
	MC_CS_INCR,					/* mc_incr, mc_decr */
	MC_CS_TOUCH,				/* mc_touch, mc_gat, mc_touch_multi */
	MC_CS_LEASE,				/* mc_get_lease */
	MC_CS_META,					/* mc_meta */
	MC_CS_ON_COMMIT,			/* the on-commit queue, sent after commit */
	MC_CS_SCAN,					/* a foreign-table scan on the key */
	MC_CS_JOIN,					/* the batched join */
	MC_CS_MODIFY,				/* INSERT, UPDATE, DELETE, COPY on a foreign table */
	MC_CS_FULL_SCAN,			/* a scan listing every key (metadump) */
	MC_CS_STATS,				/* stats commands (views, the planner's estimate) */
	MC_CS_WAL,					/* the WAL-invalidation worker's deletes and marks */
	MC_NOPS
} McCsOp;

/* What a failed request failed of: the view's errors_* columns. */
typedef enum McCsError
{
	MC_CSE_NONE = -1,
	MC_CSE_CONNECT,				/* refused, reset, closed: the connection */
	MC_CSE_TIMEOUT,				/* connect_timeout, io_timeout, stats_timeout */
	MC_CSE_PROTOCOL,			/* a reply out of step, unparseable, too large */
	MC_CSE_SERVER,				/* SERVER_ERROR, CLIENT_ERROR, ERROR replies */
	MC_CSE_AUTH,				/* a login refused or required */
	MC_CSE_N
} McCsError;

/* The latency histogram: bucket b counts requests of [2^(b-1), 2^b) us. */
#define MC_CS_NBUCKETS	26

/* mcfdw.client_stats_max: the store's slots when preloaded (options.c). */
extern int	mc_client_stats_max;

/*
 * mcfdw.client_stats (options.c): whether requests are counted.  Read when
 * a request begins (conn.c), so a request is counted whole or not at all.
 */
extern MC_HIDDEN bool mc_client_stats_on;

/* The operation the backend is doing now: set by each surface. */
extern MC_HIDDEN McCsOp mc_cs_op;
#define McCsSetOp(op) (mc_cs_op = (op))

/* What is counted: a row's fields, in the view's order. */
#define MC_CS_NFIELDS	(14 + MC_CS_NBUCKETS)

/*
 * A pending row has a bucket for every bit of a latency (bucket 1 +
 * the highest bit set), so counting a request needs no clamp: the flush
 * adds the buckets past the view's last into that last one.
 */
#define MC_CS_PBUCKETS	65
#define MC_CS_NPFIELDS	(14 + MC_CS_PBUCKETS)

/*
 * A pending field holds MC_CS_PSTRIDE operations, MC_NOPS of them used:
 * a power of two, so a latency's bucket is found with one shift.
 */
#define MC_CS_PSTRIDE	32
enum
{
	MC_CSF_CALLS,
	MC_CSF_KEYS,
	MC_CSF_HITS,
	MC_CSF_MISSES,
	MC_CSF_SENT,
	MC_CSF_RECV,
	MC_CSF_ERR,					/* MC_CSE_N of them */
	MC_CSF_DEGRADED = MC_CSF_ERR + MC_CSE_N,
	MC_CSF_LAT_TOTAL,			/* us */
	MC_CSF_LAT_MAX,				/* us */
	MC_CSF_HIST
};

#define MC_CS_NAME_MAX	264		/* an instance's name: host:port or a path */

/*
 * This backend's pending counts of one instance, per operation: the hash
 * entry of client_stats.c, here so the connection keeps a pointer to it.
 */
typedef struct McCsInstance
{
	Oid			serverid;		/* hash key: server ... */
	char		instance[MC_CS_NAME_MAX];	/* ... and instance */
	bool		dirty;			/* on the list of instances to flush */
	int64		due;			/* dirty: mc_cs_flush_due when marked; else 0 */
	uint64		p[MC_CS_NPFIELDS][MC_CS_PSTRIDE];	/* field by field: MC_CS_PF */
	struct CsSlot *slot[MC_NOPS];	/* client_stats.c's: NULL, not looked up */
	uint32		gen[MC_NOPS];	/* of the store when slot was found */
} McCsInstance;

/*
 * Field k of an operation's pending row p ((uint64 *) in->p + op): the
 * rows are kept field by field, so finding an operation's row is one
 * scaled add.
 */
#define MC_CS_PF(p, k)	((p)[(k) * MC_CS_PSTRIDE])

/* A reply's verdict on its keys: found or not (a request's, or a sum). */
typedef struct McCsFound
{
	uint32		hits;			/* replies saying the key was there */
	uint32		misses;			/* ... that it was not */
} McCsFound;

/*
 * A pending row keeps hits and misses in one field, both halves of a
 * McCsFound added at once (MC_CSF_HITS; its MC_CSF_MISSES stays 0): a
 * half cannot carry into the other, as pending counts go to the store at
 * most a second apart and no backend finds 2^32 keys in a second.
 * mc_cs_found_unpacked splits the sum.
 */
static inline uint64
mc_cs_found_packed(McCsFound f)
{
	uint64		v;

	StaticAssertStmt(sizeof(f) == sizeof(v), "McCsFound is two uint32");
	memcpy(&v, &f, sizeof(v));
	return v;
}

static inline McCsFound
mc_cs_found_unpacked(uint64 v)
{
	McCsFound	f;

	memcpy(&f, &v, sizeof(f));
	return f;
}

/*
 * The tally of the request running on a connection, kept in the connection
 * (conn_int.h, with whether a request is running and when it began) and
 * filled by the conn_*.c files.
 */
typedef struct McCsReq
{
	McCsInstance *inst;			/* NULL: not looked up yet */
	uint64		sent;			/* request bytes */
	uint64		recv;			/* reply bytes consumed */
	uint32		keys;
	McCsFound	found;
	uint32		spare;			/* 32 bytes past inst: zeroed in two stores */
} McCsReq;

/*
 * Microseconds on the monotonic clock (fine-grained: latencies).  The
 * timespec is static, not on the caller's stack: an address-taken local
 * would give every caller a stack-protector check (a backend is one
 * thread, and nothing runs between the read and its use).
 */
static inline int64
McCsNow(void)
{
	static struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* unsigned: a division by a constant without sign fix-ups */
	return (int64) ((uint64) ts.tv_sec * USECS_PER_SEC + (uint64) ts.tv_nsec / 1000);
}

/* From _PG_init: the setting, shared memory when preloaded, the flush. */
extern void McCsInit(void);

/* This backend's entry of an instance (made at its first request). */
extern McCsInstance *McCsInstanceOf(Oid serverid, const char *instance);

/*
 * Which operations' hits and misses the views show (a store's HD is no
 * hit), and which are quiet reads (their keys without a hit were misses):
 * decided when the view is read, so a request counts without a branch.
 */
extern const bool mc_cs_finds[MC_NOPS];
extern const bool mc_cs_quiet_read[MC_NOPS];
extern int64 mc_cs_flush_due;	/* McCsNow() past which pending counts go */

/* McCsRecordInline's rare part: a first count since a flush, or a flush due. */
extern pg_noinline void McCsRecordSlow(McCsInstance *in, int64 now);

/*
 * The latency bucket of us: 1 + its highest bit set (1 under 2 us).  In
 * 64 bits, so that the bucket's address is one shift and an add.
 */
static inline uint64
mc_cs_bucket(uint64 us)
{
#ifdef HAVE__BUILTIN_CLZ
	return 64 - (uint64) __builtin_clzll(us | 1);
#else
	return 1 + (uint64) pg_leftmost_one_pos64(us | 1);
#endif
}

/*
 * A request that began at start ended at now (McCsNow): add its tally (err
 * MC_CSE_NONE when it succeeded) to the backend's pending counts.  Inline
 * for the path every request that succeeds takes (conn.c's McConnEnd);
 * McCsRecord for the others.  The caller reads the clock, so nothing here
 * lives across a call.  Latency bucket b counts [2^(b-1), 2^b) us, 1
 * under 2 us; bucket 0 holds the calls refused without a request
 * (McCsRefused).
 */
static pg_attribute_always_inline void
McCsRecordInline(McCsReq *rq, int64 start, int64 now, McCsError err)
{
	McCsInstance *in = rq->inst;
	uint64	   *p = (uint64 *) in->p + mc_cs_op;
	uint64		us = (uint64) (now - start);	/* one monotonic clock */

	MC_CS_PF(p, MC_CSF_CALLS)++;
	MC_CS_PF(p, MC_CSF_KEYS) += rq->keys;
	MC_CS_PF(p, MC_CSF_HITS) += mc_cs_found_packed(rq->found);
	MC_CS_PF(p, MC_CSF_SENT) += rq->sent;
	MC_CS_PF(p, MC_CSF_RECV) += rq->recv;
	if (unlikely(err != MC_CSE_NONE))
		MC_CS_PF(p, MC_CSF_ERR + err)++;
	MC_CS_PF(p, MC_CSF_LAT_TOTAL) += us;
	if (us > MC_CS_PF(p, MC_CSF_LAT_MAX))
		MC_CS_PF(p, MC_CSF_LAT_MAX) = us;
	/* the bucket of us, unclamped (MC_CS_PBUCKETS) */
	MC_CS_PF(p, MC_CSF_HIST + mc_cs_bucket(us))++;
	/* in->due is 0 until in is on the flush list, then the flush's time */
	if (unlikely(now > in->due))
		McCsRecordSlow(in, now);
}

extern void McCsRecord(McCsReq *rq, int64 start, int64 now, McCsError err);

/* A call refused without contacting instance: it is marked dead. */
extern void McCsRefused(Oid serverid, const char *instance);

/* on_failure 'miss': a call of instance answered as a miss. */
extern void McCsDegraded(Oid serverid, const char *instance);

/* health.c marked an instance dead until dead_until. */
extern void McCsMarkedDead(Oid serverid, const char *instance, int failures,
						   TimestampTz dead_until, const char *last_error);

/* Move this backend's pending counts to the store. */
extern void McCsFlush(void);

/* Zero every count and forget every dead mark. */
extern void McCsReset(void);

/* Whether the store is the cluster's (preloaded) or this session's. */
extern bool McCsShared(void);


typedef struct McCsRow
{
	Oid			dbid;
	Oid			serverid;		/* InvalidOid: the overflow row of op */
	int			op;
	char		instance[MC_CS_NAME_MAX];
	uint64		c[MC_CS_NFIELDS];
} McCsRow;

typedef struct McCsDeadRow
{
	Oid			dbid;
	Oid			serverid;
	char		instance[MC_CS_NAME_MAX];
	TimestampTz marked_at;
	TimestampTz dead_until;
	int			failures;
	int			pid;
	char		last_error[256];
} McCsDeadRow;

/* A copy of every used slot (palloc'd), and when counting started. */
extern int	McCsReadRows(McCsRow **rows, TimestampTz *since);
extern int	McCsReadDead(McCsDeadRow **rows);

/* The op column's words. */
extern const char *const mc_cs_op_names[MC_NOPS];

#endif							/* MCFDW_CLIENT_STATS_H */
