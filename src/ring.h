/*
 * ring.h — key routing: the consistent-hash continuum of the three client
 * families mcfdw is compatible with, and its bucket lookup table.
 *
 * Owns: continuum construction (ketama / dalli / modula), key hashing, the
 * bucket table and failover routing.  Must not: include PostgreSQL headers,
 * do I/O, or allocate except through the caller's allocator at build time.
 * Lookups allocate nothing.
 */
#ifndef MCFDW_RING_H
#define MCFDW_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum McDist
{
	MC_DIST_KETAMA = 0,			/* libmemcached / pylibmc / PHP, consistent */
	MC_DIST_DALLI,				/* Ruby Dalli 2.7 - 5.x */
	MC_DIST_MODULA				/* libmemcached default: hash % N (pgmemcache) */
} McDist;

/* One configured memcached server, in configuration order. */
typedef struct McRingNode
{
	const char *host;
	int			port;
	uint32_t	weight;			/* >= 1 */
} McRingNode;

typedef struct McRingPoint
{
	uint32_t	value;
	uint32_t	server;			/* index into the node array */
} McRingPoint;

typedef struct McRing
{
	McDist		dist;
	int			nservers;
	bool		weighted;		/* ketama: weighted point layout in use */
	uint32_t	npoints;
	McRingPoint *points;		/* sorted by (value, server) */
	uint32_t   *points_per_server;	/* nservers entries */
	uint32_t	nbuckets;		/* power of two; 0 when there is no continuum */
	uint32_t	bucket_shift;	/* bucket = hash >> bucket_shift */
	uint32_t   *buckets;		/* first point index with value >= bucket start */
} McRing;

typedef void *(*McAllocFn) (void *ctx, size_t size);

/*
 * Build the ring for nodes[0..n-1].  All memory comes from alloc(ctx, ...),
 * so the caller decides its lifetime (a MemoryContext in the backend, malloc
 * in tests).  Returns NULL and sets *errmsg (a static string) on bad input.
 */
extern McRing *mc_ring_build(McDist dist, const McRingNode *nodes, int n,
							 McAllocFn alloc, void *ctx, const char **errmsg);

/* The distribution's key hash of the key as routed (before base64). */
extern uint32_t mc_ring_key_hash(const McRing *ring, const char *key, size_t len);

/* Server index owning hash, via the bucket table (no search, no allocation). */
extern int	mc_ring_lookup(const McRing *ring, uint32_t hash);

/* The same answer by binary search; the reference the bucket table is tested against. */
extern int	mc_ring_lookup_bsearch(const McRing *ring, uint32_t hash);

/* Primary server for key, ignoring server health. */
extern int	mc_ring_server_for_key(const McRing *ring, const char *key, size_t len);

/*
 * Server for key given server health (alive[i]; NULL = all alive).  With
 * failover off, returns the primary whether alive or not.  With failover on,
 * routes a dead primary's keys the way the client family does (dalli:
 * rehash "<try>"+key up to 20 tries; ketama: next live server on the
 * continuum; modula: hash % live servers).  Returns -1 when no live server
 * can be found.
 */
extern int	mc_ring_pick(const McRing *ring, const char *key, size_t len,
						 const bool *alive, bool failover);

#endif							/* MCFDW_RING_H */
