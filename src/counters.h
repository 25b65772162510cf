/*
 * counters.h — the per-server counters a dashboard alerts on (counters.c).
 */
#ifndef MCFDW_COUNTERS_H
#define MCFDW_COUNTERS_H

#include "postgres.h"

/* What is counted per server; the columns of mc_counters, in order. */
typedef enum McCounter
{
	MC_COUNT_QUEUED,			/* on-commit writes queued (xact.c) */
	MC_COUNT_SENT,				/* on-commit writes answered after commit */
	MC_COUNT_LOST,				/* on-commit writes lost after commit */
	MC_COUNT_DEGRADED,			/* calls answered as misses (pool.c) */
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

#endif							/* MCFDW_COUNTERS_H */
