/*
 * ring.c — continuum construction, bucket-table lookup and failover routing
 * for the Dalli, libmemcached-ketama and modula key distributions.
 *
 * Owns: the table of distributions (names, key hash, layout), reproducing,
 * bit for bit, which server each client family sends a key to (Dalli's
 * key transformation is dalli_key.c's).
 * Must not: include PostgreSQL headers, do I/O, keep mutable globals, or
 * allocate other than through the McAllocFn passed to the build functions.
 * Lookups and mc_ring_pick are allocation-free and run in bounded time.
 *
 * Facts this file encodes were checked against the installed clients
 * (Dalli 3.0.6's Ring and KeyManager, pylibmc 1.6.3 on libmemcached 1.1.4);
 * test/integration/ring_compat.py proves them against real servers.
 */
#include "ring.h"

#include "hash.h"

#include <string.h>

/* Dalli's POINTS_PER_SERVER and libmemcached's two per-server constants. */
#define DALLI_POINTS			160
#define KETAMA_POINTS			100
#define KETAMA_WEIGHTED_POINTS	160

/* Dalli's failover: at most this many lookups per key (Ring#server_from_continuum). */
#define DALLI_TRIES				20

/* Smallest bucket table, so the shift stays well below 32. */
#define MIN_BUCKETS				16

typedef enum KeyHash
{
	KH_CRC32,
	KH_OAT,
	KH_MD5
} KeyHash;

/*
 * The one list of distributions: the name users write, and what each
 * reduces to.  Indexed by McDist, so a lookup is one load (the key hash is
 * read per key); the build below reads these columns instead of comparing
 * McDist values.
 */
typedef struct DistInfo
{
	const char *name;			/* "distribution" option value */
	KeyHash		key_hash;		/* libmemcached "hash" / Dalli's CRC-32 */
	bool		ketama;			/* libmemcached continuum (successor search) */
	bool		always_weighted;	/* weighted layout even at equal weights */
} DistInfo;

static const DistInfo dists[] = {
	[MC_DIST_KETAMA] = {"ketama", KH_OAT, true, false},
	[MC_DIST_KETAMA_MD5] = {"ketama_md5", KH_MD5, true, false},
	[MC_DIST_KETAMA_WEIGHTED] = {"ketama_weighted", KH_MD5, true, true},
	[MC_DIST_KETAMA_WEIGHTED_OAT] = {"ketama_weighted_oat", KH_OAT, true, true},
	[MC_DIST_DALLI] = {"dalli", KH_CRC32, false, false},
	[MC_DIST_MODULA] = {"modula", KH_OAT, false, false},
};

/* C99 has no static_assert: a negative array size stops the build instead. */
typedef char mc_dists_complete[(sizeof(dists) / sizeof(dists[0]) == MC_NDIST) ? 1 : -1];

static bool
dist_valid(McDist dist)
{
	return (unsigned) dist < MC_NDIST;
}

const char *
mc_dist_name(McDist dist)
{
	return dist_valid(dist) ? dists[dist].name : "?";
}

bool
mc_dist_from_name(const char *name, McDist *dist)
{
	int			i;

	for (i = 0; i < MC_NDIST; i++)
	{
		if (strcmp(name, dists[i].name) == 0)
		{
			*dist = (McDist) i;
			return true;
		}
	}
	return false;
}

bool
mc_dist_is_ketama(McDist dist)
{
	return dist_valid(dist) && dists[dist].ketama;
}

/*
 * libmemcached's MD5 hash value: the first digest word read little-endian
 * (hashkit_md5), which is also word 0 of a weighted ketama digest.
 */
static uint32_t
md5_word(const unsigned char *d, unsigned int word)
{
	return (uint32_t) d[word * 4] |
		((uint32_t) d[word * 4 + 1] << 8) |
		((uint32_t) d[word * 4 + 2] << 16) |
		((uint32_t) d[word * 4 + 3] << 24);
}

/* The key hash itself, shared by mc_ring_key_hash and the failover paths. */
static uint32_t
key_hash(KeyHash kh, const char *data, size_t len)
{
	unsigned char d[MC_MD5_DIGEST_LEN];

	switch (kh)
	{
		case KH_CRC32:
			return mc_crc32(data, len);
		case KH_MD5:
			mc_md5(data, len, d);
			return md5_word(d, 0);
		case KH_OAT:
			break;
	}
	return mc_oat(data, len);
}

/*
 * Decimal formatting without snprintf: src/ must not depend on stdio, and
 * point names are built for every point at build time.  Returns the length;
 * buf needs 10 bytes.
 */
static size_t
fmt_uint(uint32_t v, char *buf)
{
	char		tmp[10];
	size_t		n = 0,
				i;

	do
	{
		tmp[n++] = (char) ('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

/* Total order on points, the tie-break libmemcached uses (value, index). */
static bool
point_less(const McRingPoint *a, const McRingPoint *b)
{
	return a->value < b->value ||
		(a->value == b->value && a->server < b->server);
}

static void
sift_down(McRingPoint *p, uint32_t root, uint32_t n)
{
	for (;;)
	{
		uint32_t	child = 2 * root + 1;
		McRingPoint tmp;

		if (child >= n)
			break;
		if (child + 1 < n && point_less(&p[child], &p[child + 1]))
			child++;
		if (!point_less(&p[root], &p[child]))
			break;
		tmp = p[root];
		p[root] = p[child];
		p[child] = tmp;
		root = child;
	}
}

/*
 * Heapsort: in place and O(n log n) worst case.  qsort is avoided because
 * glibc's may call malloc, which src/ must not do behind the caller's
 * allocator; the order is total, so stability does not matter.
 */
static void
sort_points(McRingPoint *p, uint32_t n)
{
	uint32_t	i;

	if (n < 2)
		return;
	for (i = n / 2; i-- > 0;)
		sift_down(p, i, n);
	for (i = n - 1; i > 0; i--)
	{
		McRingPoint tmp = p[0];

		p[0] = p[i];
		p[i] = tmp;
		sift_down(p, 0, i);
	}
}

/*
 * Dalli: floor(N * 160 * w / W), computed as Ruby does (an exact integer
 * product divided by Float(total_weight)); every operand is below 2^53 so
 * the double arithmetic is exact up to the final division, like Ruby's.
 */
static uint32_t
dalli_points(int nservers, uint32_t weight, uint64_t total_weight)
{
	uint64_t	num = (uint64_t) nservers * DALLI_POINTS * weight;
	double		q = (double) num / (double) total_weight;

	return (uint32_t) q;
}

/*
 * libmemcached's weighted ketama count, in single precision step by step as
 * update_continuum() computes it: floor(w/W * 160/4 * live + 1e-10f) * 4.
 * Float rounding decides whether equal weights give 156 or 160 points, so
 * each intermediate is rounded to float by assignment.
 */
static uint32_t
ketama_weighted_points(uint32_t weight, uint64_t total_weight, int live)
{
	float		pct = (float) weight / (float) total_weight;
	float		x = pct * (float) KETAMA_WEIGHTED_POINTS;

	x = x / 4.0f;
	x = x * (float) live;
	x = x + 0.0000000001f;
	return (uint32_t) x * 4;
}

/*
 * Emit the points of one server.  Point names: Dalli "host:port:i" (SHA-1,
 * first four bytes big-endian); libmemcached "host-i" on port 11211 and
 * "host:port-i" otherwise, hashed with the key hash (unweighted) or MD5
 * yielding four little-endian words per name (weighted).  A Unix socket
 * (port 0) is named by its path: Dalli "path:i" (Server#name is the path
 * alone), libmemcached "path:0-i" (its socket servers have port 0), as the
 * installed clients route.  The name prefix
 * is hashed once and its hash state copied per point, so no name buffer of
 * host length is needed.
 */
static void
emit_points(McDist dist, bool weighted, const McRingNode *node,
			uint32_t server, uint32_t count, McRingPoint *out)
{
	char		port[10];
	size_t		portlen = fmt_uint((uint32_t) node->port, port);
	size_t		hostlen = strlen(node->host);
	char		idx[10];
	size_t		idxlen;
	uint32_t	i;

	if (dist == MC_DIST_DALLI)
	{
		McSha1Ctx	base,
					c;
		unsigned char d[MC_SHA1_DIGEST_LEN];

		mc_sha1_init(&base);
		mc_sha1_update(&base, node->host, hostlen);
		if (node->port != 0)
		{
			mc_sha1_update(&base, ":", 1);
			mc_sha1_update(&base, port, portlen);
		}
		mc_sha1_update(&base, ":", 1);
		for (i = 0; i < count; i++)
		{
			c = base;
			idxlen = fmt_uint(i, idx);
			mc_sha1_update(&c, idx, idxlen);
			mc_sha1_final(&c, d);
			out[i].value = ((uint32_t) d[0] << 24) | ((uint32_t) d[1] << 16) |
				((uint32_t) d[2] << 8) | (uint32_t) d[3];
			out[i].server = server;
		}
	}
	else if (weighted || dists[dist].key_hash == KH_MD5)
	{
		/* weighted: 4 points per name; unweighted MD5: MD5 word 0 only */
		uint32_t	per = weighted ? 4 : 1;
		McMd5Ctx	base,
					c;
		unsigned char d[MC_MD5_DIGEST_LEN];
		uint32_t	h,
					w;

		mc_md5_init(&base);
		mc_md5_update(&base, node->host, hostlen);
		if (node->port != 11211)
		{
			mc_md5_update(&base, ":", 1);
			mc_md5_update(&base, port, portlen);
		}
		mc_md5_update(&base, "-", 1);
		for (h = 0; h < count / per; h++)
		{
			c = base;
			idxlen = fmt_uint(h, idx);
			mc_md5_update(&c, idx, idxlen);
			mc_md5_final(&c, d);
			for (w = 0; w < per; w++)
			{
				out[h * per + w].value = md5_word(d, w);
				out[h * per + w].server = server;
			}
		}
	}
	else
	{
		uint32_t	base = mc_oat_update(0, node->host, hostlen);

		if (node->port != 11211)
		{
			base = mc_oat_update(base, ":", 1);
			base = mc_oat_update(base, port, portlen);
		}
		base = mc_oat_update(base, "-", 1);
		for (i = 0; i < count; i++)
		{
			idxlen = fmt_uint(i, idx);
			out[i].value = mc_oat_final(mc_oat_update(base, idx, idxlen));
			out[i].server = server;
		}
	}
}

/*
 * Bucket b covers hashes whose top log2(nbuckets) bits equal b and holds
 * the first point at or after the bucket's start.  Both search directions
 * start there: everything before it is below the hash.
 */
static void
fill_buckets(McRing *ring)
{
	uint32_t	b,
				i = 0;

	for (b = 0; b < ring->nbuckets; b++)
	{
		uint64_t	start = (uint64_t) b << ring->bucket_shift;

		while (i < ring->npoints && ring->points[i].value < start)
			i++;
		ring->buckets[b] = i;
	}
}

/* Reject what no client accepts, with a message the caller can show. */
static bool
validate(McDist dist, const McRingNode *nodes, int n, McAllocFn alloc,
		 const char **errmsg)
{
	int			i;

	if (!dist_valid(dist))
	{
		*errmsg = "unknown key distribution";
		return false;
	}
	if (alloc == NULL)
	{
		*errmsg = "no allocator given";
		return false;
	}
	if (n < 1 || nodes == NULL)
	{
		*errmsg = "a ring needs at least one server";
		return false;
	}
	if (n > MC_RING_MAX_SERVERS)
	{
		*errmsg = "too many servers for one ring";
		return false;
	}
	for (i = 0; i < n; i++)
	{
		if (nodes[i].host == NULL || nodes[i].host[0] == '\0')
		{
			*errmsg = "server host must not be empty";
			return false;
		}
		if (nodes[i].port == 0 && nodes[i].host[0] == '/')
			;					/* a Unix socket */
		else if (nodes[i].port < 1 || nodes[i].port > 65535)
		{
			*errmsg = "server port must be between 1 and 65535";
			return false;
		}
		if (nodes[i].weight < 1)
		{
			*errmsg = "server weight must be at least 1";
			return false;
		}
	}
	return true;
}

/*
 * Shared by mc_ring_build and mc_ring_build_live.  alive == NULL means the
 * full configured ring; otherwise dead servers get no points (ketama only,
 * as libmemcached's auto-eject rebuild) and the weighted counts use the live
 * count and live total weight.  The weighted flag itself comes from the
 * whole configuration: libmemcached sets it when a server is added.
 */
static McRing *
build(McDist dist, const McRingNode *nodes, int n, const bool *alive,
	  McAllocFn alloc, void *ctx, const char **errmsg)
{
	McRing	   *ring;
	uint64_t	total_weight = 0;
	uint64_t	npoints = 0;
	int			live = 0;
	int			i;
	bool		ketama;
	const char *dummy;

	if (errmsg == NULL)
		errmsg = &dummy;
	*errmsg = NULL;
	if (!validate(dist, nodes, n, alloc, errmsg))
		return NULL;
	ketama = dists[dist].ketama;
	if (!ketama)
		alive = NULL;

	ring = alloc(ctx, sizeof(McRing));
	if (ring == NULL)
		goto oom;
	memset(ring, 0, sizeof(McRing));
	ring->dist = dist;
	ring->nservers = n;
	ring->points_per_server = alloc(ctx, sizeof(uint32_t) * (size_t) n);
	if (ring->points_per_server == NULL)
		goto oom;
	memset(ring->points_per_server, 0, sizeof(uint32_t) * (size_t) n);

	if (ketama)
	{
		ring->weighted = dists[dist].always_weighted;
		for (i = 0; i < n; i++)
			if (nodes[i].weight > 1)
				ring->weighted = true;
	}

	/* One server: no continuum, every key goes to it (all three clients). */
	if (dist == MC_DIST_MODULA || n == 1)
		return ring;

	for (i = 0; i < n; i++)
	{
		if (alive == NULL || alive[i])
		{
			live++;
			total_weight += nodes[i].weight;
		}
	}
	for (i = 0; i < n; i++)
	{
		uint32_t	c;

		if (alive != NULL && !alive[i])
			c = 0;
		else if (dist == MC_DIST_DALLI)
			c = dalli_points(n, nodes[i].weight, total_weight);
		else if (ring->weighted)
			c = ketama_weighted_points(nodes[i].weight, total_weight, live);
		else
			c = KETAMA_POINTS;
		ring->points_per_server[i] = c;
		npoints += c;
	}

	ring->npoints = (uint32_t) npoints;
	if (npoints > 0)
	{
		uint32_t	nb = MIN_BUCKETS;
		uint32_t	shift = 32 - 4;
		uint32_t	off = 0;

		ring->points = alloc(ctx, sizeof(McRingPoint) * (size_t) npoints);
		if (ring->points == NULL)
			goto oom;
		for (i = 0; i < n; i++)
		{
			emit_points(dist, ring->weighted, &nodes[i], (uint32_t) i,
						ring->points_per_server[i], ring->points + off);
			off += ring->points_per_server[i];
		}
		sort_points(ring->points, ring->npoints);

		/* About one bucket per point: 640 points -> 1,024; 2,560 -> 4,096. */
		while (nb < npoints)
		{
			nb <<= 1;
			shift--;
		}
		ring->nbuckets = nb;
		ring->bucket_shift = shift;
		ring->buckets = alloc(ctx, sizeof(uint32_t) * (size_t) nb);
		if (ring->buckets == NULL)
			goto oom;
		fill_buckets(ring);
	}
	return ring;

oom:
	*errmsg = "out of memory building the ring";
	return NULL;
}

McRing *
mc_ring_build(McDist dist, const McRingNode *nodes, int n,
			  McAllocFn alloc, void *ctx, const char **errmsg)
{
	return build(dist, nodes, n, NULL, alloc, ctx, errmsg);
}

McRing *
mc_ring_build_live(McDist dist, const McRingNode *nodes, int n,
				   const bool *alive, McAllocFn alloc, void *ctx,
				   const char **errmsg)
{
	return build(dist, nodes, n, alive, alloc, ctx, errmsg);
}

/*
 * Dalli hashes with CRC-32, libmemcached with its "hash" behavior (OAT by
 * default, MD5 for the MD5 variants).  Computed even for one-server rings;
 * the lookup ignores it there, as the clients do.
 */
uint32_t
mc_ring_key_hash(const McRing *ring, const char *key, size_t len)
{
	return key_hash(dists[ring->dist].key_hash, key, len);
}

/*
 * Continuum index owning hash, from the bucket table.  Ketama takes the
 * first point >= hash and wraps to 0 (libmemcached's dispatch_host); Dalli
 * takes the last point <= hash and wraps to the last point (Ring#
 * server_for_hash_key).  Caller guarantees npoints > 0.
 */
static uint32_t
point_index(const McRing *ring, uint32_t hash)
{
	uint32_t	i = ring->buckets[hash >> ring->bucket_shift];
	uint32_t	n = ring->npoints;

	if (ring->dist == MC_DIST_DALLI)
	{
		while (i < n && ring->points[i].value <= hash)
			i++;
		return i == 0 ? n - 1 : i - 1;
	}
	while (i < n && ring->points[i].value < hash)
		i++;
	return i == n ? 0 : i;
}

int
mc_ring_lookup(const McRing *ring, uint32_t hash)
{
	if (ring->nservers == 1)
		return 0;
	if (ring->dist == MC_DIST_MODULA)
		return (int) (hash % (uint32_t) ring->nservers);
	if (ring->npoints == 0)
		return -1;
	return (int) ring->points[point_index(ring, hash)].server;
}

/*
 * Plain binary search over the whole continuum, deliberately independent
 * of the bucket table so the tests can hold one against the other.
 */
int
mc_ring_lookup_bsearch(const McRing *ring, uint32_t hash)
{
	uint32_t	lo = 0,
				hi;
	uint32_t	n = ring->npoints;

	if (ring->nservers == 1)
		return 0;
	if (ring->dist == MC_DIST_MODULA)
		return (int) (hash % (uint32_t) ring->nservers);
	if (n == 0)
		return -1;

	hi = n;
	if (ring->dist == MC_DIST_DALLI)
	{
		/* first index with value > hash */
		while (lo < hi)
		{
			uint32_t	mid = lo + (hi - lo) / 2;

			if (ring->points[mid].value > hash)
				hi = mid;
			else
				lo = mid + 1;
		}
		return (int) ring->points[lo == 0 ? n - 1 : lo - 1].server;
	}
	/* first index with value >= hash */
	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (ring->points[mid].value < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int) ring->points[lo == n ? 0 : lo].server;
}

int
mc_ring_server_for_key(const McRing *ring, const char *key, size_t len)
{
	if (ring->nservers == 1)
		return 0;
	return mc_ring_lookup(ring, mc_ring_key_hash(ring, key, len));
}

/*
 * Failover routing.  What the clients do with a dead server:
 *
 * dalli: Ring#server_from_continuum looks up crc32(key), then
 *   crc32("0" + key) ... crc32("18" + key): 20 lookups in all, the first
 *   live server wins, else "No server available".  Reproduced exactly, the
 *   "<try>" prefix fed to the CRC before the key so nothing is copied.  A
 *   one-server Dalli ring has no failover.
 *
 * ketama: libmemcached never reroutes unless auto-eject is on; then it
 *   rebuilds the continuum without the ejected servers.  For the
 *   unweighted layout a server's points do not depend on the others, so
 *   "next live server clockwise on the full continuum" is exactly that
 *   rebuilt ring.  For the weighted layout the rebuild also changes every
 *   live server's point count; use mc_ring_build_live for that exact ring.
 *   Here we walk clockwise, which moves only the dead server's keys.
 *
 * modula: libmemcached keeps hash % N even with auto-eject (the request to
 *   the dead server simply fails), so no client reroutes these keys.  Our
 *   policy, per ring.h: the dead primary's keys go to hash % L over the L
 *   live servers in configuration order; live primaries keep their keys.
 */
static int
pick_failover(const McRing *ring, uint32_t hash, const char *key, size_t len,
			  const bool *alive)
{
	if (ring->dist == MC_DIST_DALLI)
	{
		uint32_t	attempt;

		for (attempt = 0; attempt < DALLI_TRIES - 1; attempt++)
		{
			char		digits[10];
			size_t		nd = fmt_uint(attempt, digits);
			int			s;

			hash = mc_crc32_update(mc_crc32(digits, nd), key, len);
			s = mc_ring_lookup(ring, hash);
			if (alive[s])
				return s;
		}
		return -1;
	}

	if (ring->dist == MC_DIST_MODULA)
	{
		uint32_t	nlive = 0,
					k;
		int			i;

		for (i = 0; i < ring->nservers; i++)
			if (alive[i])
				nlive++;
		if (nlive == 0)
			return -1;
		k = hash % nlive;
		for (i = 0; i < ring->nservers; i++)
			if (alive[i] && k-- == 0)
				return i;
		return -1;				/* not reached */
	}

	/* ketama family: clockwise to the next point of a live server */
	{
		uint32_t	i = point_index(ring, hash);
		uint32_t	step;

		for (step = 1; step < ring->npoints; step++)
		{
			uint32_t	s;

			if (++i == ring->npoints)
				i = 0;
			s = ring->points[i].server;
			if (alive[s])
				return (int) s;
		}
	}
	return -1;
}

/* The primary for hash when alive, else pick_failover's choice (a multi-server ring). */
static inline int
pick_hashed(const McRing *ring, uint32_t hash, const char *key, size_t len,
			const bool *alive, bool failover)
{
	int			primary = mc_ring_lookup(ring, hash);

	if (primary < 0)
		return -1;
	if (alive == NULL || alive[primary] || !failover)
		return primary;
	return pick_failover(ring, hash, key, len, alive);
}

int
mc_ring_pick(const McRing *ring, const char *key, size_t len,
			 const bool *alive, bool failover)
{
	if (ring->nservers == 1)
		return (alive == NULL || alive[0] || !failover) ? 0 : -1;
	return pick_hashed(ring, mc_ring_key_hash(ring, key, len), key, len, alive, failover);
}

int
mc_ring_pick_hashed(const McRing *ring, uint32_t hash, const char *key, size_t len,
					const bool *alive, bool failover)
{
	if (ring->nservers == 1)
		return (alive == NULL || alive[0] || !failover) ? 0 : -1;
	return pick_hashed(ring, hash, key, len, alive, failover);
}
