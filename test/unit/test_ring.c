/*
 * test_ring.c — unit tests for src/core/ring.c.
 *
 * Owns: the published vectors (docs ring.md), the bucket table against
 * binary search on rings of 2..50 weighted servers for every distribution,
 * point counts, continuum order, failover rules checked against independent
 * re-implementations, one-server rings, invalid input, allocation failure,
 * and Dalli's key transformation against values produced by Dalli 3.0.6's
 * KeyManager.  Agreement with the real clients on real servers is
 * test/integration/ring_compat.py's job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "ring.h"
#include "tap.h"

/* Every McDist value is a distribution (ring.h). */
#define NDIST MC_NDIST
#define all_dists(di)	((McDist) (di))
#define dist_names(di)	mc_dist_name((McDist) (di))

/* ------------------------------------------------------------ helpers */

typedef struct Arena
{
	int			calls;
	int			fail_at;		/* fail the Nth call (1-based); 0 = never */
	void	   *blocks[64];
	int			nblocks;
} Arena;

/* Counting allocator: proves all memory comes through McAllocFn. */
static void *
arena_alloc(void *ctx, size_t size)
{
	Arena	   *a = ctx;
	void	   *p;

	a->calls++;
	if (a->fail_at && a->calls == a->fail_at)
		return NULL;
	p = malloc(size);
	if (a->nblocks < 64)
		a->blocks[a->nblocks++] = p;
	return p;
}

static void
arena_free(Arena *a)
{
	int			i;

	for (i = 0; i < a->nblocks; i++)
		free(a->blocks[i]);
	memset(a, 0, sizeof(*a));
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* xorshift64*: deterministic, so a failure reproduces. */
static uint32_t
rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t) ((rng_state * 0x2545f4914f6cdd1dULL) >> 32);
}

/* n nodes 127.0.0.1:20000+i with the given weights (NULL = all 1). */
static void
make_nodes(McRingNode *nodes, int n, const uint32_t *weights)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		nodes[i].host = "127.0.0.1";
		nodes[i].port = 20000 + i;
		nodes[i].weight = weights ? weights[i] : 1;
	}
}

/* ------------------------------------------------------------- vectors */

static void
published_vectors(void)
{
	McRingNode	nodes[3];
	static const struct
	{
		const char *key;
		int			dalli,
					ketama,
					modula;
	}			v[] = {
		{"key0", 11213, 11211, 11213},
		{"key1", 11212, 11211, 11213},
		{"key7", 11212, 11212, 11212},
		{"key9", 11211, 11211, 11212},
	};
	Arena		a = {0};
	McRing	   *rd,
			   *rk,
			   *rm;
	const char *err;
	int			i;

	for (i = 0; i < 3; i++)
	{
		nodes[i].host = "localhost";
		nodes[i].port = 11211 + i;
		nodes[i].weight = 1;
	}
	rd = mc_ring_build(MC_DIST_DALLI, nodes, 3, arena_alloc, &a, &err);
	rk = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
	rm = mc_ring_build(MC_DIST_MODULA, nodes, 3, arena_alloc, &a, &err);
	for (i = 0; i < 4; i++)
	{
		size_t		len = strlen(v[i].key);
		int			d = nodes[mc_ring_server_for_key(rd, v[i].key, len)].port;
		int			k = nodes[mc_ring_server_for_key(rk, v[i].key, len)].port;
		int			m = nodes[mc_ring_server_for_key(rm, v[i].key, len)].port;

		if (!tap_ok(d == v[i].dalli && k == v[i].ketama && m == v[i].modula,
					"ring.md vector %s: dalli %d ketama %d modula %d",
					v[i].key, v[i].dalli, v[i].ketama, v[i].modula))
			tap_diag("got dalli %d ketama %d modula %d", d, k, m);
	}
	tap_ok(mc_ring_key_hash(rd, "key0", 4) == 0x5b5b54c6 &&
		   mc_ring_key_hash(rk, "key0", 4) == 0x74614706 &&
		   mc_ring_key_hash(rm, "key0", 4) == 0x74614706,
		   "key hashes: dalli CRC-32, ketama and modula OAT");
	arena_free(&a);
}

/* ------------------------------------------------- bucket vs bsearch */

static int
probe(const McRing *r, uint32_t h)
{
	return mc_ring_lookup(r, h) == mc_ring_lookup_bsearch(r, h);
}

/*
 * For every distribution, rings of 2..50 servers with random weights
 * 1..10: every point value, value-1, value+1, 0 and 2^32-1, plus random
 * hashes (1,000,000 on the 2-, 16- and 50-server rings, 20,000 elsewhere).
 */
static void
bucket_table(void)
{
	int			di;

	for (di = 0; di < NDIST; di++)
	{
		long		probes = 0,
					bad = 0;
		int			sizes_ok = 1;
		int			n;

		for (n = 2; n <= 50; n++)
		{
			McRingNode	nodes[50];
			uint32_t	w[50];
			Arena		a = {0};
			McRing	   *r;
			const char *err;
			uint32_t	p;
			long		nrand = (n == 2 || n == 16 || n == 50) ? 1000000 : 20000;
			long		k;
			int			i;

			for (i = 0; i < n; i++)
				w[i] = 1 + rnd() % 10;
			make_nodes(nodes, n, w);
			r = mc_ring_build(all_dists(di), nodes, n, arena_alloc, &a, &err);
			if (r == NULL)
			{
				bad++;
				continue;
			}
			if (r->npoints > 0)
			{
				uint32_t	nb = r->nbuckets;

				/* power of two, about one bucket per point */
				if ((nb & (nb - 1)) != 0 || nb < r->npoints ||
					(nb > 16 && nb / 2 >= r->npoints) ||
					(1ULL << (32 - r->bucket_shift)) != nb)
					sizes_ok = 0;
			}
			for (p = 0; p < r->npoints; p++)
			{
				uint32_t	v = r->points[p].value;

				bad += !probe(r, v) + !probe(r, v - 1) + !probe(r, v + 1);
				probes += 3;
			}
			bad += !probe(r, 0) + !probe(r, 0xffffffffu);
			probes += 2;
			for (k = 0; k < nrand; k++)
				bad += !probe(r, rnd());
			probes += nrand;
			arena_free(&a);
		}
		if (!tap_ok(bad == 0, "%s: bucket lookup equals binary search, rings of 2..50 weighted servers (%ld probes)",
					dist_names(di), probes))
			tap_diag("%ld mismatches", bad);
		if (all_dists(di) != MC_DIST_MODULA)
			tap_ok(sizes_ok, "%s: bucket count is the power of two at or above the point count",
				   dist_names(di));
	}
}

/* Table sizes ring.md quotes for Dalli: 1,024 for 4 servers, 4,096 for 16. */
static void
bucket_sizes(void)
{
	McRingNode	nodes[16];
	Arena		a = {0};
	McRing	   *r4,
			   *r16;
	const char *err;

	make_nodes(nodes, 16, NULL);
	r4 = mc_ring_build(MC_DIST_DALLI, nodes, 4, arena_alloc, &a, &err);
	r16 = mc_ring_build(MC_DIST_DALLI, nodes, 16, arena_alloc, &a, &err);
	tap_ok(r4->npoints == 640 && r4->nbuckets == 1024 &&
		   r16->npoints == 2560 && r16->nbuckets == 4096,
		   "dalli: 4 servers 640 points 1,024 buckets; 16 servers 2,560 points 4,096 buckets");
	arena_free(&a);
}

/* ------------------------------------------------------- point counts */

static int
pps_equal(const McRing *r, const uint32_t *want, int n)
{
	int			i;
	uint32_t	sum = 0;

	for (i = 0; i < n; i++)
	{
		if (r->points_per_server[i] != want[i])
			return 0;
		sum += want[i];
	}
	return sum == r->npoints;
}

static int
sorted_and_owned(const McRing *r)
{
	uint32_t	p;
	uint32_t   *seen = calloc((size_t) r->nservers, sizeof(uint32_t));
	int			ok = 1,
				i;

	for (p = 0; p < r->npoints; p++)
	{
		if (p > 0 && (r->points[p - 1].value > r->points[p].value ||
					  (r->points[p - 1].value == r->points[p].value &&
					   r->points[p - 1].server >= r->points[p].server)))
			ok = 0;
		if (r->points[p].server >= (uint32_t) r->nservers)
			ok = 0;
		else
			seen[r->points[p].server]++;
	}
	for (i = 0; i < r->nservers; i++)
		if (seen[i] != r->points_per_server[i])
			ok = 0;
	free(seen);
	return ok;
}

static void
point_counts(void)
{
	McRingNode	nodes[50];
	Arena		a = {0};
	const char *err;
	McRing	   *r;
	static const uint32_t w211[] = {2, 1, 1};
	static const uint32_t w3121[] = {3, 1, 2, 1};
	uint32_t	want[50];
	int			i,
				n;

	make_nodes(nodes, 4, NULL);
	r = mc_ring_build(MC_DIST_DALLI, nodes, 4, arena_alloc, &a, &err);
	want[0] = want[1] = want[2] = want[3] = 160;
	tap_ok(pps_equal(r, want, 4) && !r->weighted, "dalli: 160 points per equal server");
	tap_ok(sorted_and_owned(r), "dalli: continuum sorted by (value, server), counts match");

	make_nodes(nodes, 3, w211);
	r = mc_ring_build(MC_DIST_DALLI, nodes, 3, arena_alloc, &a, &err);
	want[0] = 240;
	want[1] = want[2] = 120;
	tap_ok(pps_equal(r, want, 3), "dalli 2:1:1: floor(N*160*w/W) = 240/120/120");

	make_nodes(nodes, 4, w3121);
	r = mc_ring_build(MC_DIST_DALLI, nodes, 4, arena_alloc, &a, &err);
	want[0] = 274;
	want[1] = 91;
	want[2] = 182;
	want[3] = 91;
	tap_ok(pps_equal(r, want, 4), "dalli 3:1:2:1: 274/91/182/91");

	make_nodes(nodes, 3, NULL);
	r = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
	want[0] = want[1] = want[2] = 100;
	tap_ok(pps_equal(r, want, 3) && !r->weighted, "ketama unweighted: 100 points per server");
	tap_ok(sorted_and_owned(r), "ketama: continuum sorted by (value, server), counts match");
	r = mc_ring_build(MC_DIST_KETAMA_MD5, nodes, 3, arena_alloc, &a, &err);
	tap_ok(pps_equal(r, want, 3) && !r->weighted, "ketama-md5 unweighted: 100 points per server");

	make_nodes(nodes, 3, w211);
	r = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
	want[0] = 240;
	want[1] = want[2] = 120;
	tap_ok(pps_equal(r, want, 3) && r->weighted,
		   "ketama 2:1:1 switches to the weighted layout: 240/120/120");
	tap_ok(sorted_and_owned(r), "ketama weighted: continuum sorted, counts match");

	make_nodes(nodes, 4, w3121);
	r = mc_ring_build(MC_DIST_KETAMA, nodes, 4, arena_alloc, &a, &err);
	want[0] = 272;
	want[1] = 88;
	want[2] = 180;
	want[3] = 88;
	tap_ok(pps_equal(r, want, 4), "ketama 3:1:2:1: floor(w/W*40*N)*4 = 272/88/180/88");

	/*
	 * Forced weighted layout at equal weights: 160 each, except where
	 * single-precision rounding lands just under 40 (25, 47 and 50
	 * servers give 156), as libmemcached computes it.
	 */
	{
		int			ok = 1;

		for (n = 2; n <= 50; n++)
		{
			uint32_t	expect = (n == 25 || n == 47 || n == 50) ? 156 : 160;

			make_nodes(nodes, n, NULL);
			r = mc_ring_build(MC_DIST_KETAMA_WEIGHTED, nodes, n, arena_alloc, &a, &err);
			for (i = 0; i < n; i++)
				want[i] = expect;
			if (!pps_equal(r, want, n) || !r->weighted)
				ok = 0;
			arena_free(&a);
		}
		tap_ok(ok, "ketama-weighted, equal weights: 160 points, 156 at 25/47/50 servers (float rounding)");
	}

	/* weighted point values: MD5("host:port-i") words 0..3 little-endian */
	{
		unsigned char d[MC_MD5_DIGEST_LEN];
		int			found = 0;
		uint32_t	p,
					w0;

		make_nodes(nodes, 2, NULL);
		r = mc_ring_build(MC_DIST_KETAMA_WEIGHTED, nodes, 2, arena_alloc, &a, &err);
		mc_md5("127.0.0.1:20001-0", 17, d);
		w0 = (uint32_t) d[12] | ((uint32_t) d[13] << 8) |
			((uint32_t) d[14] << 16) | ((uint32_t) d[15] << 24);
		for (p = 0; p < r->npoints; p++)
			if (r->points[p].value == w0 && r->points[p].server == 1)
				found = 1;
		tap_ok(found, "ketama-weighted: MD5(\"127.0.0.1:20001-0\") word 3 is a point of server 1");
		arena_free(&a);
	}

	/* port 11211 drops ":port" from ketama point names */
	{
		McRingNode	one[2] = {{"localhost", 11211, 1}, {"localhost", 11212, 1}};
		uint32_t	p;
		int			a0 = 0,
					a1 = 0;

		r = mc_ring_build(MC_DIST_KETAMA, one, 2, arena_alloc, &a, &err);
		for (p = 0; p < r->npoints; p++)
		{
			if (r->points[p].value == mc_oat("localhost-0", 11) && r->points[p].server == 0)
				a0 = 1;
			if (r->points[p].value == mc_oat("localhost:11212-99", 18) && r->points[p].server == 1)
				a1 = 1;
		}
		tap_ok(a0 && a1, "ketama point names: \"localhost-0\" on 11211, \"localhost:11212-99\" otherwise");
	}

	/*
	 * A Unix socket (port 0) is named by its path: Dalli "path:i",
	 * libmemcached "path:0-i" (both checked against the installed clients;
	 * test/integration/unix_socket.py routes through them).
	 */
	{
		McRingNode	socks[2] = {{"/run/mc/a.sock", 0, 1}, {"/run/mc/b.sock", 0, 1}};
		unsigned char d[MC_SHA1_DIGEST_LEN];
		uint32_t	p,
					sv;
		int			k0 = 0,
					d0 = 0,
					dport = 0;

		r = mc_ring_build(MC_DIST_KETAMA, socks, 2, arena_alloc, &a, &err);
		for (p = 0; r != NULL && p < r->npoints; p++)
			if (r->points[p].value == mc_oat("/run/mc/b.sock:0-7", 18) && r->points[p].server == 1)
				k0 = 1;
		tap_ok(r != NULL && k0, "ketama socket point names: \"/run/mc/b.sock:0-7\"");
		r = mc_ring_build(MC_DIST_DALLI, socks, 2, arena_alloc, &a, &err);
		mc_sha1("/run/mc/a.sock:5", 16, d);
		sv = ((uint32_t) d[0] << 24) | ((uint32_t) d[1] << 16) |
			((uint32_t) d[2] << 8) | (uint32_t) d[3];
		mc_sha1("/run/mc/a.sock:0:5", 18, d);
		for (p = 0; r != NULL && p < r->npoints; p++)
		{
			if (r->points[p].value == sv && r->points[p].server == 0)
				d0 = 1;
			if (r->points[p].value == (((uint32_t) d[0] << 24) | ((uint32_t) d[1] << 16) |
									   ((uint32_t) d[2] << 8) | (uint32_t) d[3]))
				dport = 1;
		}
		tap_ok(r != NULL && d0 && !dport, "dalli socket point names: \"/run/mc/a.sock:5\", no port");
		socks[1].host = "relative.sock";
		r = mc_ring_build(MC_DIST_DALLI, socks, 2, arena_alloc, &a, &err);
		tap_ok(r == NULL, "port 0 without a path rejected");
	}
	arena_free(&a);
}

/* ------------------------------------------------------------ failover */

static void
key_of(int i, char *buf, size_t *len)
{
	*len = (size_t) sprintf(buf, "fo:%d:\xc3\xa9", i);
}

/* Dalli: lookups of key, "0"+key ... "18"+key, first live wins. */
static int
ref_dalli(const McRing *r, const char *key, size_t len, const bool *alive)
{
	char		buf[64];
	int			t,
				s;

	s = mc_ring_lookup_bsearch(r, mc_crc32(key, len));
	if (alive[s])
		return s;
	for (t = 0; t < 19; t++)
	{
		size_t		n = (size_t) sprintf(buf, "%d", t);

		memcpy(buf + n, key, len);
		s = mc_ring_lookup_bsearch(r, mc_crc32(buf, n + len));
		if (alive[s])
			return s;
	}
	return -1;
}

/* Ketama: walk the continuum clockwise from the key's point. */
static int
ref_ketama(const McRing *r, uint32_t h, const bool *alive)
{
	uint32_t	i = 0,
				k;

	while (i < r->npoints && r->points[i].value < h)
		i++;
	for (k = 0; k < r->npoints; k++)
	{
		uint32_t	j = (i + k) % r->npoints;

		if (alive[r->points[j].server])
			return (int) r->points[j].server;
	}
	return -1;
}

static void
failover(void)
{
	McRingNode	nodes[8];
	static const uint32_t w[8] = {1, 3, 2, 1, 5, 1, 2, 1};
	bool		alive[8];
	const char *err;
	int			di;

	for (di = 0; di < NDIST; di++)
	{
		McDist		dist = all_dists(di);
		Arena		a = {0};
		McRing	   *r;
		int			bad = 0,
					moved_live = 0,
					nofo_bad = 0,
					hashed_bad = 0,
					i,
					pat;

		make_nodes(nodes, 8, w);
		r = mc_ring_build(dist, nodes, 8, arena_alloc, &a, &err);
		for (pat = 1; pat < 255; pat += 7)
		{
			for (i = 0; i < 8; i++)
				alive[i] = ((pat >> i) & 1) != 0;
			for (i = 0; i < 3000; i++)
			{
				char		key[64];
				size_t		len;
				int			got,
							want,
							prim;

				key_of(i, key, &len);
				prim = mc_ring_server_for_key(r, key, len);
				got = mc_ring_pick(r, key, len, alive, true);
				if (mc_ring_pick(r, key, len, alive, false) != prim)
					nofo_bad++;
				/* the multi-get's pick, from the hash it de-duplicates by */
				if (mc_ring_pick_hashed(r, mc_ring_key_hash(r, key, len), key, len,
										alive, true) != got ||
					mc_ring_pick_hashed(r, mc_ring_key_hash(r, key, len), key, len,
										alive, false) != prim)
					hashed_bad++;
				if (alive[prim] && got != prim)
					moved_live++;
				if (dist == MC_DIST_DALLI)
					want = ref_dalli(r, key, len, alive);
				else if (dist == MC_DIST_MODULA)
				{
					uint32_t	h = mc_oat(key, len);
					int			live[8],
								nl = 0,
								k;

					for (k = 0; k < 8; k++)
						if (alive[k])
							live[nl++] = k;
					want = alive[prim] ? prim : live[h % (uint32_t) nl];
				}
				else
					want = ref_ketama(r, mc_ring_key_hash(r, key, len), alive);
				if (got != want || (got >= 0 && !alive[got]))
					bad++;
			}
		}
		tap_ok(bad == 0 && moved_live == 0 && nofo_bad == 0,
			   "%s: failover routes dead primaries like the reference, keeps live primaries, off = primary",
			   dist_names(di));
		if (bad || moved_live || nofo_bad)
			tap_diag("bad %d moved_live %d nofo_bad %d", bad, moved_live, nofo_bad);
		tap_ok(hashed_bad == 0,
			   "%s: mc_ring_pick_hashed with the key's hash picks as mc_ring_pick, failover on and off",
			   dist_names(di));

		for (i = 0; i < 8; i++)
			alive[i] = false;
		tap_ok(mc_ring_pick(r, "k", 1, alive, true) == -1 &&
			   mc_ring_pick(r, "k", 1, alive, false) == mc_ring_server_for_key(r, "k", 1),
			   "%s: all servers dead: -1 with failover, primary without", dist_names(di));
		arena_free(&a);
	}

	/*
	 * Unweighted ketama: walking clockwise past dead servers is exactly
	 * libmemcached's auto-eject rebuild (mc_ring_build_live).
	 */
	{
		Arena		a = {0};
		McRing	   *full,
				   *live;
		int			bad = 0,
					i;

		make_nodes(nodes, 8, NULL);
		for (i = 0; i < 8; i++)
			alive[i] = (i != 2 && i != 5);
		full = mc_ring_build(MC_DIST_KETAMA, nodes, 8, arena_alloc, &a, &err);
		live = mc_ring_build_live(MC_DIST_KETAMA, nodes, 8, alive, arena_alloc, &a, &err);
		for (i = 0; i < 20000; i++)
		{
			char		key[64];
			size_t		len;

			key_of(i, key, &len);
			if (mc_ring_pick(full, key, len, alive, true) !=
				mc_ring_server_for_key(live, key, len))
				bad++;
		}
		tap_ok(bad == 0 && live->npoints == 600 && live->points_per_server[2] == 0,
			   "ketama unweighted: failover equals the auto-eject rebuild");

		/* weighted: the rebuild recomputes counts from live weight */
		make_nodes(nodes, 3, (const uint32_t[]) {1, 1, 4});
		alive[0] = alive[1] = true;
		alive[2] = false;
		live = mc_ring_build_live(MC_DIST_KETAMA, nodes, 3, alive, arena_alloc, &a, &err);
		full = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
		tap_ok(full->points_per_server[0] == 80 && live->points_per_server[0] == 160 &&
			   live->points_per_server[2] == 0 && live->weighted,
			   "ketama weighted 1:1:4, server 2 ejected: 80 -> 160 points per live server");
		alive[0] = alive[1] = alive[2] = false;
		live = mc_ring_build_live(MC_DIST_KETAMA, nodes, 3, alive, arena_alloc, &a, &err);
		tap_ok(live != NULL && live->npoints == 0 &&
			   mc_ring_server_for_key(live, "k", 1) == -1 &&
			   mc_ring_pick(live, "k", 1, NULL, true) == -1,
			   "ketama: rebuild with nothing alive routes nowhere");
		live = mc_ring_build_live(MC_DIST_DALLI, nodes, 3, alive, arena_alloc, &a, &err);
		tap_ok(live != NULL && live->npoints == 480,
			   "dalli: build_live ignores health (Dalli never rebuilds)");
		arena_free(&a);
	}
}

/* ---------------------------------------------------------- one server */

static void
one_server(void)
{
	McRingNode	node = {"127.0.0.1", 20000, 7};
	bool		dead = false;
	int			di;

	for (di = 0; di < NDIST; di++)
	{
		Arena		a = {0};
		const char *err;
		McRing	   *r = mc_ring_build(all_dists(di), &node, 1, arena_alloc, &a, &err);
		int			ok = r != NULL && r->npoints == 0 && r->nbuckets == 0;
		int			i;

		for (i = 0; ok && i < 1000; i++)
		{
			char		key[64];
			size_t		len;

			key_of(i, key, &len);
			ok = mc_ring_server_for_key(r, key, len) == 0 &&
				mc_ring_lookup(r, rnd()) == 0 &&
				mc_ring_lookup_bsearch(r, rnd()) == 0 &&
				mc_ring_pick(r, key, len, NULL, true) == 0;
		}
		ok = ok && mc_ring_pick(r, "k", 1, &dead, true) == -1 &&
			mc_ring_pick(r, "k", 1, &dead, false) == 0 &&
			mc_ring_pick_hashed(r, rnd(), "k", 1, NULL, true) == 0 &&
			mc_ring_pick_hashed(r, rnd(), "k", 1, &dead, true) == -1 &&
			mc_ring_pick_hashed(r, rnd(), "k", 1, &dead, false) == 0;
		tap_ok(ok, "%s: one server gets every key, no continuum; dead -> -1 only with failover",
			   dist_names(di));
		arena_free(&a);
	}
}

/* ------------------------------------------------------- invalid input */

static void
invalid_input(void)
{
	static McRingNode big[MC_RING_MAX_SERVERS + 1];
	McRingNode	nodes[3];
	Arena		a = {0};
	const char *err;
	McRing	   *r;
	int			i;

	make_nodes(nodes, 3, NULL);

	err = NULL;
	r = mc_ring_build(MC_DIST_DALLI, nodes, 0, arena_alloc, &a, &err);
	tap_ok(r == NULL && err != NULL && a.calls == 0, "n = 0 rejected: %s", err ? err : "(none)");

	nodes[1].weight = 0;
	err = NULL;
	r = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
	tap_ok(r == NULL && err != NULL, "weight 0 rejected: %s", err ? err : "(none)");
	nodes[1].weight = 1;

	nodes[2].port = 0;
	err = NULL;
	r = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
	tap_ok(r == NULL && err != NULL, "port 0 rejected: %s", err ? err : "(none)");
	nodes[2].port = 65536;
	r = mc_ring_build(MC_DIST_KETAMA, nodes, 3, arena_alloc, &a, &err);
	tap_ok(r == NULL, "port 65536 rejected");
	nodes[2].port = 20002;

	nodes[0].host = "";
	err = NULL;
	r = mc_ring_build(MC_DIST_DALLI, nodes, 3, arena_alloc, &a, &err);
	tap_ok(r == NULL && err != NULL, "empty host rejected: %s", err ? err : "(none)");
	nodes[0].host = NULL;
	r = mc_ring_build(MC_DIST_DALLI, nodes, 3, arena_alloc, &a, &err);
	tap_ok(r == NULL, "NULL host rejected");
	nodes[0].host = "127.0.0.1";

	err = NULL;
	r = mc_ring_build((McDist) 99, nodes, 3, arena_alloc, &a, &err);
	tap_ok(r == NULL && err != NULL, "unknown distribution rejected: %s", err ? err : "(none)");

	for (i = 0; i <= MC_RING_MAX_SERVERS; i++)
	{
		big[i].host = "h";
		big[i].port = 1 + i;
		big[i].weight = 1;
	}
	err = NULL;
	r = mc_ring_build(MC_DIST_DALLI, big, MC_RING_MAX_SERVERS + 1, arena_alloc, &a, &err);
	tap_ok(r == NULL && err != NULL, "%d servers rejected: %s", MC_RING_MAX_SERVERS + 1,
		   err ? err : "(none)");
	r = mc_ring_build(MC_DIST_KETAMA, big, MC_RING_MAX_SERVERS, arena_alloc, &a, &err);
	tap_ok(r != NULL && r->npoints == 100 * MC_RING_MAX_SERVERS,
		   "%d servers accepted", MC_RING_MAX_SERVERS);
	arena_free(&a);

	/* allocation failure at every allocation step */
	{
		int			ok = 1,
					k,
					calls;

		make_nodes(nodes, 3, NULL);
		r = mc_ring_build(MC_DIST_DALLI, nodes, 3, arena_alloc, &a, &err);
		calls = a.calls;
		arena_free(&a);
		for (k = 1; k <= calls; k++)
		{
			a.fail_at = k;
			err = NULL;
			r = mc_ring_build(MC_DIST_DALLI, nodes, 3, arena_alloc, &a, &err);
			if (r != NULL || err == NULL)
				ok = 0;
			arena_free(&a);
		}
		tap_ok(ok && calls == 4, "allocation failure at each of the %d allocations returns NULL with a message",
			   calls);
	}
	r = mc_ring_build(MC_DIST_DALLI, nodes, 0, arena_alloc, &a, NULL);
	tap_ok(r == NULL, "errmsg may be NULL");
}

/* ------------------------------------------------- Dalli key transform */

/*
 * Expected lengths and CRC-32s of the routed key, produced by Dalli 3.0.6
 * (Dalli::KeyManager#validate_key) for the same inputs.
 */
static void
dalli_keys(void)
{
	char		in[2048];
	char		out[MC_DALLI_ROUTE_KEY_MAX];
	struct
	{
		const char *ns;
		const char *unit;
		int			reps;
		const char *prefix;		/* bytes before the repeated unit */
		bool		utf8;
		size_t		want_len;
		uint32_t	want_crc;
		const char *what;
	}			v[] = {
		{NULL, "x", 251, "", true, 249, 2434818496u, "251 ASCII chars: 212 + :md5: + hex"},
		{NULL, "x", 250, "", true, 250, 2305333394u, "250 ASCII chars unchanged"},
		{"ns", "x", 247, "", true, 250, 4059692715u, "namespace, 250 total unchanged"},
		{"ns", "x", 248, "", true, 250, 86985942u, "namespace, 251 total: 213 + :md5: + hex"},
		{NULL, "\xc3\xa9", 251, "", true, 461, 657707120u, "251 x e-acute: 212 characters kept"},
		{NULL, "\xc3\xa9", 200, "", true, 400, 465116752u, "200 x e-acute (400 bytes) unchanged"},
		{NULL, "\xc3\xa9", 200, "", false, 249, 1829594059u, "binary string: bytes counted"},
		{"", "y", 300, "", true, 250, 4224003567u, "empty namespace still adds ':'"},
		{NULL, "\xc3\xa9", 300, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", true, 451, 1101907938u,
		"invalid bytes count one character each"},
		{"\xc3\xb1s", "a", 260, "", true, 251, 1353356800u, "multibyte namespace"},
	};
	size_t		i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
	{
		size_t		len = strlen(v[i].prefix),
					ulen = strlen(v[i].unit),
					got;
		int			k;

		memcpy(in, v[i].prefix, len);
		for (k = 0; k < v[i].reps; k++)
		{
			memcpy(in + len, v[i].unit, ulen);
			len += ulen;
		}
		got = mc_dalli_route_key(v[i].ns, v[i].ns ? strlen(v[i].ns) : 0, in, len,
								 v[i].utf8, out);
		if (!tap_ok(got == v[i].want_len && mc_crc32(out, got) == v[i].want_crc,
					"dalli key: %s", v[i].what))
			tap_diag("got len %zu crc %u", got, mc_crc32(out, got));
	}

	/* the short path copies the namespace and key */
	{
		size_t		got = mc_dalli_route_key("app", 3, "user:1", 6, true, out);

		tap_ok(got == 10 && memcmp(out, "app:user:1", 10) == 0,
			   "dalli key: namespace prefix \"app:user:1\"");
		got = mc_dalli_route_key(NULL, 0, "user:1", 6, true, out);
		tap_ok(got == 6 && memcmp(out, "user:1", 6) == 0, "dalli key: no namespace, unchanged");
	}
}

/*
 * The distribution table: one distinct name per McDist value, names and
 * values map both ways, and the ketama family is exactly the four
 * libmemcached consistent distributions.
 */
static void
dist_table(void)
{
	static const struct
	{
		const char *name;
		McDist		dist;
		bool		ketama;
	}			want[] = {
		{"ketama", MC_DIST_KETAMA, true},
		{"ketama_md5", MC_DIST_KETAMA_MD5, true},
		{"ketama_weighted", MC_DIST_KETAMA_WEIGHTED, true},
		{"ketama_weighted_oat", MC_DIST_KETAMA_WEIGHTED_OAT, true},
		{"dalli", MC_DIST_DALLI, false},
		{"modula", MC_DIST_MODULA, false},
	};
	static const char *const unknown[] = {
		"", "Ketama", "ketama-md5", "ketama_", "dall", "modula ", "consistent"
	};
	size_t		i;
	McDist		d;

	tap_ok(MC_NDIST == sizeof(want) / sizeof(want[0]), "MC_NDIST is %d", (int) MC_NDIST);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
	{
		d = (McDist) 99;
		tap_ok((int) want[i].dist == (int) i &&
			   strcmp(mc_dist_name(want[i].dist), want[i].name) == 0 &&
			   mc_dist_from_name(want[i].name, &d) && d == want[i].dist &&
			   mc_dist_is_ketama(want[i].dist) == want[i].ketama,
			   "distribution %s: value %d, name both ways, %sketama",
			   want[i].name, (int) want[i].dist, want[i].ketama ? "" : "not ");
	}
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
	{
		d = (McDist) 99;
		tap_ok(!mc_dist_from_name(unknown[i], &d) && d == (McDist) 99,
			   "\"%s\" is no distribution", unknown[i]);
	}
	tap_ok(strcmp(mc_dist_name((McDist) MC_NDIST), "?") == 0 &&
		   strcmp(mc_dist_name((McDist) -1), "?") == 0 &&
		   !mc_dist_is_ketama((McDist) MC_NDIST),
		   "values outside the enum: name \"?\", not ketama");
}

int
main(void)
{
	dist_table();
	published_vectors();
	bucket_sizes();
	point_counts();
	bucket_table();
	failover();
	one_server();
	invalid_input();
	dalli_keys();
	return tap_done();
}
