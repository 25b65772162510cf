/*
 * counters.h — the per-server counters a dashboard alerts on (counters.c).
 */
#ifndef MCFDW_COUNTERS_H
#define MCFDW_COUNTERS_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* Servers the shared table holds (the rest go to its overflow slot). */
#define MC_COUNTER_SLOTS	256

/* What is counted per server; the columns of mc_counters, in order. */
typedef enum McCounter
{
	MC_COUNT_QUEUED,			/* on-commit writes queued (xact.c) */
	MC_COUNT_SENT,				/* on-commit writes answered after commit */
	MC_COUNT_LOST,				/* on-commit writes lost after commit */
	MC_COUNT_DEGRADED,			/* calls answered as misses (health.c) */
	MC_NCOUNTERS
} McCounter;

/* From _PG_init: asks for shared memory when preloaded. */
extern void McCountersInit(void);

/*
 * Add n to a counter of a server of the current database.  Needs no
 * catalog access (it runs after commit), and a server counted before costs
 * one atomic add.
 */
extern void McCountersAdd(Oid serverid, McCounter which, uint64 n);

/* Whether the counts are the cluster's (preloaded) or this session's. */
extern bool McCountersShared(void);

/*
 * The counts of n servers of the current database (zeros for one never
 * counted), of the overflow slot (zeros in the session scope) and when
 * counting started: one consistent read.
 */
extern void McCountersRead(const Oid *servers, int n,
						   uint64 (*out)[MC_NCOUNTERS], uint64 *overflow,
						   TimestampTz *since);

/* Zero every count: the cluster's, and free its slots, or this session's. */
extern void McCountersReset(void);

#endif							/* MCFDW_COUNTERS_H */
