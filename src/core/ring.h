/*
 * ring.h — key routing: the consistent-hash continuum of the three client
 * families mcfdw is compatible with, and its bucket lookup table.
 *
 * Owns: the list of distributions (the names users write and what each
 * reduces to), continuum construction (ketama / dalli / modula), key
 * hashing, the bucket table and failover routing (ring.c), and Dalli's key
 * transformation (dalli_key.c).  Must not: include PostgreSQL headers,
 * do I/O, or allocate except through the caller's allocator at build time.
 * Lookups allocate nothing.
 */
#ifndef MCFDW_RING_H
#define MCFDW_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Which client's routing to reproduce.  The ketama variants differ in the
 * key hash (libmemcached's "hash" behavior; one-at-a-time by default) and in
 * whether the weighted point layout (160 points per server at equal weight,
 * four per MD5 digest) is forced or only used when some weight is > 1.
 * Checked against pylibmc 1.6.3 / libmemcached 1.1.4:
 *
 *   MC_DIST_KETAMA               pylibmc {"ketama": True},
 *                                {"distribution": "consistent"} or
 *                                "consistent ketama"; PHP
 *                                OPT_DISTRIBUTION=DISTRIBUTION_CONSISTENT.
 *                                OAT key hash; weighted layout iff a weight > 1.
 *   MC_DIST_KETAMA_MD5           the same plus {"hash": "md5"} (PHP
 *                                OPT_HASH=HASH_MD5).  MD5 key hash; weighted
 *                                layout iff a weight > 1.
 *   MC_DIST_KETAMA_WEIGHTED      pylibmc {"ketama_weighted": True}; PHP
 *                                OPT_LIBKETAMA_COMPATIBLE=true.  MD5 key
 *                                hash; weighted layout always.
 *   MC_DIST_KETAMA_WEIGHTED_OAT  pylibmc {"distribution": "consistent
 *                                weighted"} alone.  OAT key hash; weighted
 *                                layout always.
 */
typedef enum McDist
{
	MC_DIST_KETAMA = 0,			/* libmemcached / pylibmc / PHP, consistent */
	MC_DIST_KETAMA_MD5,			/* ketama with the MD5 key hash */
	MC_DIST_KETAMA_WEIGHTED,	/* libmemcached KETAMA_WEIGHTED behavior */
	MC_DIST_KETAMA_WEIGHTED_OAT,	/* CONSISTENT_WEIGHTED with the default hash */
	MC_DIST_DALLI,				/* Ruby Dalli 2.7 - 5.x */
	MC_DIST_MODULA				/* libmemcached default: hash % N (pgmemcache) */
} McDist;

/*
 * Number of distributions.  Values 0 .. MC_NDIST - 1 are all valid, in the
 * order error hints list their names; ring.c's table has one row for each
 * and fails to compile if one is missing.
 */
#define MC_NDIST	(MC_DIST_MODULA + 1)

/*
 * The name of a distribution, as the "distribution" server option spells
 * it and the mc_servers view shows it ("ketama", "ketama_md5", ...); "?"
 * for a value outside the enum.
 */
extern const char *mc_dist_name(McDist dist);

/* The distribution a name spells (exact match); false if none does. */
extern bool mc_dist_from_name(const char *name, McDist *dist);

/*
 * Is dist one of libmemcached's consistent (ketama) distributions?  Those
 * search the continuum clockwise and, with failover, are rebuilt without
 * dead instances (mc_ring_build_live); Dalli and modula are not.
 */
extern bool mc_dist_is_ketama(McDist dist);

/* Upper bound on servers per ring (keeps the continuum under ~170k points). */
#define MC_RING_MAX_SERVERS 1024

/* One configured memcached server, in configuration order. */
typedef struct McRingNode
{
	const char *host;			/* as configured, without IPv6 brackets; a Unix
								 * socket's path (starting with '/') */
	int			port;			/* 1..65535; 0 for a Unix socket; part of the
								 * point names */
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
 * A one-server ring has no continuum: every key goes to server 0.
 */
extern McRing *mc_ring_build(McDist dist, const McRingNode *nodes, int n,
							 McAllocFn alloc, void *ctx, const char **errmsg);

/*
 * The ring libmemcached rebuilds when auto-eject (pylibmc "remove_failed" /
 * "auto_eject", PHP OPT_REMOVE_FAILED_SERVERS) has ejected the servers with
 * alive[i] == false: ketama points only for live servers, and for the
 * weighted layout the per-server point counts recomputed from the live
 * servers' count and total weight.  Server indices stay configuration
 * positions.  Dalli and modula never rebuild, so for them alive is ignored
 * and the result equals mc_ring_build.  With no live server the ring has no
 * points and every lookup returns -1 (a one-server ring still returns 0).
 */
extern McRing *mc_ring_build_live(McDist dist, const McRingNode *nodes, int n,
								  const bool *alive, McAllocFn alloc, void *ctx,
								  const char **errmsg);

/* The distribution's key hash of the key as routed (before base64). */
extern uint32_t mc_ring_key_hash(const McRing *ring, const char *key, size_t len);

/*
 * Server index owning hash, via the bucket table (no search, no
 * allocation).  Modula: hash % nservers.  A one-server ring returns 0; a
 * ring without points (mc_ring_build_live with nothing alive) returns -1.
 */
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
 * can be found.  See ring.c for how each rule compares with the clients.
 */
extern int	mc_ring_pick(const McRing *ring, const char *key, size_t len,
						 const bool *alive, bool failover);

/*
 * mc_ring_pick for a key whose mc_ring_key_hash the caller already has
 * (the multi-get hashes every key once, for its de-duplication too).
 */
extern int	mc_ring_pick_hashed(const McRing *ring, uint32_t hash, const char *key,
								size_t len, const bool *alive, bool failover);

/*
 * Dalli's key transformation (KeyManager#validate_key, Dalli 3.x): the key
 * Dalli stores under and routes on.  ns == NULL means no namespace; any
 * other ns (even "") gives ns + ":" + key.  If the result is longer than
 * 250 characters it becomes its first 212 characters (213 with a
 * namespace) + ":md5:" + the lowercase hex MD5 of the whole namespaced key.
 * Ruby counts characters of the string's encoding: pass utf8 = true for
 * UTF-8 strings (the usual case; an invalid byte counts as one character,
 * as in Ruby), false for binary (ASCII-8BIT) keys where characters are
 * bytes.  out must hold MC_DALLI_ROUTE_KEY_MAX bytes; no NUL is written.
 * Returns the routed key's length in bytes.
 */
#define MC_DALLI_MAX_KEY_CHARS 250
#define MC_DALLI_ROUTE_KEY_MAX 1000	/* 250 UTF-8 characters of 4 bytes */

extern size_t mc_dalli_route_key(const char *ns, size_t nslen,
								 const char *key, size_t keylen,
								 bool utf8, char *out);

#endif							/* MCFDW_RING_H */
