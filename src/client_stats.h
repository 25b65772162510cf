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

/* The kinds of operation; the view's op column, in this order. */
typedef enum McCsOp
{
	MC_OP_OTHER,				/* flush_all, anything not named below */
	MC_OP_GET,					/* mc_get, mc_gets, mc_get_raw */
	MC_OP_GET_MULTI,			/* mc_get_multi */
	MC_OP_SET,					/* mc_set, add, replace, append, prepend, cas */
	MC_OP_SET_MULTI,			/* mc_set_multi */
	MC_OP_DELETE,				/* mc_delete, mc_mark_stale, mc_delete_multi */
	MC_OP_INCR,					/* mc_incr, mc_decr */
	MC_OP_TOUCH,				/* mc_touch, mc_gat, mc_touch_multi */
	MC_OP_LEASE,				/* mc_get_lease */
	MC_OP_META,					/* mc_meta */
	MC_OP_ON_COMMIT,			/* the on-commit queue, sent after commit */
	MC_OP_SCAN,					/* a foreign-table scan on the key */
	MC_OP_JOIN,					/* the batched join */
	MC_OP_MODIFY,				/* INSERT, UPDATE, DELETE, COPY on a foreign table */
	MC_OP_FULL_SCAN,			/* a scan listing every key (metadump) */
	MC_OP_STATS,				/* stats commands (views, the planner's estimate) */
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

/* The operation the backend is doing now: set by each surface. */
extern McCsOp mc_cs_op;
#define McCsSetOp(op) (mc_cs_op = (op))

/* This backend's pending counts of one instance (client_stats.c). */
typedef struct McCsInstance McCsInstance;

/*
 * The tally of the request running on a connection, kept in the connection
 * (conn_int.h) and filled by the conn_*.c files.
 */
typedef struct McCsReq
{
	McCsInstance *inst;			/* NULL: not looked up yet */
	int64		start;			/* McCsNow() when the request began */
	uint64		sent;			/* request bytes */
	uint64		recv;			/* reply bytes consumed */
	uint32		keys;
	uint32		hits;
	uint32		misses;
	bool		pipelined;		/* quiet gets: keys not hit were misses */
	bool		live;			/* a request is running, not yet recorded */
} McCsReq;

/* Microseconds on the monotonic clock (fine-grained: latencies). */
static inline int64
McCsNow(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
}

/* From _PG_init: the setting, shared memory when preloaded, the flush. */
extern void McCsInit(void);

/* This backend's entry of an instance (made at its first request). */
extern McCsInstance *McCsInstanceOf(Oid serverid, const char *instance);

/* A request ended: add its tally (err MC_CSE_NONE when it succeeded). */
extern void McCsRecord(McCsReq *rq, McCsError err);

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

/* One row of the store, as the views read it (client_stats_sql.c). */
#define MC_CS_NFIELDS	(14 + MC_CS_NBUCKETS)
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
