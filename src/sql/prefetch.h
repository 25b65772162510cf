/*
 * prefetch.h — per-row reads prefetched: a query that calls mc_get or
 * mc_get_bytea once per row of a scan or join reads the keys of a batch of
 * rows in one pipelined round, and each call takes its answer from the
 * batch.  prefetch.c places the node (a planner hook), prefetch_exec.c runs
 * it, prefetch_batch.c keeps a batch's answers; reads.c asks
 * McPrefetchLookup before its own round trip.
 */
#ifndef MCFDW_PREFETCH_H
#define MCFDW_PREFETCH_H

#include "client.h"
#include "nodes/extensible.h"

/* What a batch knows of a key. */
typedef enum McPrefetchAnswer
{
	MC_PF_UNKNOWN,				/* not in the batch: the call asks memcached */
	MC_PF_MISS,					/* asked, and memcached had no value */
	MC_PF_HIT					/* asked, and the value is in *hit */
} McPrefetchAnswer;

/* A prefetched value as the reply carried it: still to be decoded. */
typedef struct McPrefetchHit
{
	const char *data;
	size_t		len;
	bool		has_flags;		/* the reply carried client flags */
	uint32		flags;
} McPrefetchHit;

typedef struct McPfEntry McPfEntry;

/* The calls of one server in a batch, and their keys' answers. */
typedef struct McPfGroup
{
	char	   *server;			/* NULL: mcfdw.server */
	McServer   *srv;			/* this batch's, or NULL: nothing prefetched */
	bool		usable;			/* every instance answered */
	uint64		writes;			/* McServerWritesStarted when the keys were read */
	McPfEntry **slots;			/* hash table of the keys */
	uint32		mask;
	Datum	   *keys;			/* the distinct keys, for McRunGets */
	int			nkeys;
} McPfGroup;

/* A batch's answers, per server (prefetch_batch.c). */
typedef struct McPfAnswers
{
	int			ngroups;
	McPfGroup  *groups;
	MemoryContext cxt;			/* one batch's keys and values (and rows) */
	Size		budget;			/* bytes a batch may keep: work_mem */
	Size		used;
} McPfAnswers;

/* The batch whose row is being projected now, or NULL. */
extern MC_HIDDEN McPfAnswers *McPrefetchCurrent;

extern void McPrefetchBatchStart(McPfAnswers *a, int nkeys);
extern void McPrefetchBatchAdd(McPfAnswers *a, McPfGroup *g, Datum key);
extern void McPrefetchBatchOnHit(void *arg, Datum key, char *base, const McReply *r);

extern McPrefetchAnswer McPrefetchBatchFind(McServer *srv, const char *key,
									   size_t len, McPrefetchHit *hit);

/*
 * The answer the batch of the row being projected has for key of srv:
 * MC_PF_UNKNOWN, at the cost of one test, outside a prefetching node.
 */
static inline McPrefetchAnswer
McPrefetchLookup(McServer *srv, const char *key, size_t len, McPrefetchHit *hit)
{
	if (likely(McPrefetchCurrent == NULL))
		return MC_PF_UNKNOWN;
	return McPrefetchBatchFind(srv, key, len, hit);
}

/* The settings (options.c). */

extern const CustomScanMethods McPrefetchScanMethods;
extern void McPrefetchInit(void);

/* custom_private of the node */
#define MC_PF_PRIVATE_BOUND		0	/* rows a LIMIT above lets through, -1: none */
#define MC_PF_PRIVATE_SERVERS	1	/* per call: its server's name, or Integer 0 for mcfdw.server */

#endif							/* MCFDW_PREFETCH_H */
