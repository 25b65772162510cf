/*
 * ringtool.c — command-line front end to src/core/ring.c, for the compatibility
 * test against the real clients and for looking at rings by hand.
 *
 *   ringtool [options] DIST host:port[:weight] ...
 *
 * DIST is a distribution as the "distribution" server option names it, with
 * hyphens for its underscores (ketama-md5 for ketama_md5).  IPv6 hosts are written [addr]:port[:weight].  Keys are read
 * from stdin, one per line (raw bytes; with -x, hex), and for each one the
 * owning server index is printed.
 *
 * Options:
 *   -x       keys on stdin are hex encoded (for bytes a line cannot carry)
 *   -a       print host:port instead of the server index
 *   -k       print the routed key in hex, a tab, then the server
 *   -n NS    Dalli namespace (the key becomes NS:key before routing)
 *   -b       Dalli keys are binary strings: the 250 limit counts bytes
 *   -r       route the key as given, without Dalli's key transformation
 *   -d LIST  comma-separated indices of dead servers; route with
 *            mc_ring_pick (failover on unless -F)
 *   -F       failover off (with -d)
 *   -L       build with mc_ring_build_live using the -d list
 *   -p       print the continuum ("value server" per line) and exit
 *   -s       print points per server and bucket count, then exit
 *
 * Owns: argument parsing and output formatting only; all routing logic
 * lives in src/core/ring.c.  Exit status 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define MAX_NODES MC_RING_MAX_SERVERS

/* Tests build rings with plain malloc; the ring lives until exit. */
static void *
malloc_alloc(void *ctx, size_t size)
{
	(void) ctx;
	return malloc(size);
}

static void
usage(void)
{
	int			d;
	const char *p;

	fprintf(stderr,
			"usage: ringtool [-x] [-a] [-k] [-n NS] [-b] [-r] [-d LIST] [-F] [-L] [-p] [-s]\n"
			"                DIST host:port[:weight] ...\n"
			"DIST:");
	for (d = 0; d < MC_NDIST; d++)
	{
		fputc(' ', stderr);
		for (p = mc_dist_name((McDist) d); *p; p++)
			fputc(*p == '_' ? '-' : *p, stderr);
	}
	fputc('\n', stderr);
	exit(2);
}

/* ring.c's names, spelled with hyphens on the command line. */
static int
parse_dist(const char *s, McDist *dist)
{
	char		name[64];
	size_t		i;

	for (i = 0; s[i] && i < sizeof(name) - 1; i++)
		name[i] = s[i] == '-' ? '_' : s[i] == '_' ? '-' : s[i];
	name[i] = '\0';
	return s[i] == '\0' && mc_dist_from_name(name, dist);
}

/* host:port[:weight] or [v6addr]:port[:weight]; the host is copied. */
static int
parse_node(const char *spec, McRingNode *node)
{
	const char *rest;
	char	   *host;
	size_t		hlen;
	char	   *end;
	long		v;

	if (spec[0] == '[')
	{
		const char *close = strchr(spec, ']');

		if (close == NULL || close[1] != ':')
			return 0;
		hlen = (size_t) (close - spec - 1);
		host = malloc(hlen + 1);
		memcpy(host, spec + 1, hlen);
		rest = close + 2;
	}
	else
	{
		const char *colon = strchr(spec, ':');

		if (colon == NULL)
			return 0;
		hlen = (size_t) (colon - spec);
		host = malloc(hlen + 1);
		memcpy(host, spec, hlen);
		rest = colon + 1;
	}
	host[hlen] = '\0';
	node->host = host;
	v = strtol(rest, &end, 10);
	node->port = (int) v;
	node->weight = 1;
	if (end == rest)
		return 0;
	if (*end == ':')
	{
		rest = end + 1;
		v = strtol(rest, &end, 10);
		if (end == rest || v < 0)
			return 0;
		node->weight = (uint32_t) v;
	}
	return *end == '\0';
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Slurp stdin: the compat test feeds thousands of keys at once. */
static char *
read_all(size_t *len)
{
	size_t		cap = 1 << 16,
				n = 0,
				got;
	char	   *buf = malloc(cap);

	while ((got = fread(buf + n, 1, cap - n, stdin)) > 0)
	{
		n += got;
		if (n == cap)
		{
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	*len = n;
	return buf;
}

static void
print_server(const McRingNode *nodes, int s, int as_addr)
{
	if (s < 0)
		fputs("-1", stdout);
	else if (as_addr)
		printf("%s:%d", nodes[s].host, nodes[s].port);
	else
		printf("%d", s);
}

int
main(int argc, char **argv)
{
	McRingNode	nodes[MAX_NODES];
	bool		alive[MAX_NODES];
	int			nnodes = 0;
	int			hexin = 0,
				as_addr = 0,
				show_key = 0,
				binary = 0,
				raw = 0,
				have_dead = 0,
				failover = 1,
				live_build = 0,
				dump = 0,
				stats = 0;
	const char *ns = NULL;
	McDist		dist;
	McRing	   *ring;
	const char *err = NULL;
	int			i;
	size_t		inlen,
				pos;
	char	   *in;
	char	   *keybuf;
	char		routed[MC_DALLI_ROUTE_KEY_MAX];

	for (i = 0; i < MAX_NODES; i++)
		alive[i] = true;

	i = 1;
	while (i < argc && argv[i][0] == '-' && argv[i][1] != '\0')
	{
		const char *o = argv[i];

		if (strcmp(o, "-x") == 0)
			hexin = 1;
		else if (strcmp(o, "-a") == 0)
			as_addr = 1;
		else if (strcmp(o, "-k") == 0)
			show_key = 1;
		else if (strcmp(o, "-b") == 0)
			binary = 1;
		else if (strcmp(o, "-r") == 0)
			raw = 1;
		else if (strcmp(o, "-F") == 0)
			failover = 0;
		else if (strcmp(o, "-L") == 0)
			live_build = 1;
		else if (strcmp(o, "-p") == 0)
			dump = 1;
		else if (strcmp(o, "-s") == 0)
			stats = 1;
		else if (strcmp(o, "-n") == 0 && i + 1 < argc)
			ns = argv[++i];
		else if (strcmp(o, "-d") == 0 && i + 1 < argc)
		{
			char	   *p = argv[++i];

			have_dead = 1;
			while (*p)
			{
				long		d = strtol(p, &p, 10);

				if (d < 0 || d >= MAX_NODES)
					usage();
				alive[d] = false;
				if (*p == ',')
					p++;
				else if (*p != '\0')
					usage();
			}
		}
		else
			usage();
		i++;
	}
	if (i >= argc || !parse_dist(argv[i], &dist))
		usage();
	for (i++; i < argc; i++)
	{
		if (nnodes >= MAX_NODES || !parse_node(argv[i], &nodes[nnodes]))
			usage();
		nnodes++;
	}

	if (live_build)
		ring = mc_ring_build_live(dist, nodes, nnodes, alive, malloc_alloc, NULL, &err);
	else
		ring = mc_ring_build(dist, nodes, nnodes, malloc_alloc, NULL, &err);
	if (ring == NULL)
	{
		fprintf(stderr, "ringtool: %s\n", err);
		return 1;
	}

	if (dump)
	{
		uint32_t	p;

		for (p = 0; p < ring->npoints; p++)
			printf("%08x %u\n", ring->points[p].value, ring->points[p].server);
		return 0;
	}
	if (stats)
	{
		for (i = 0; i < nnodes; i++)
			printf("%s:%d %u\n", nodes[i].host, nodes[i].port,
				   ring->points_per_server[i]);
		printf("points %u buckets %u weighted %d\n", ring->npoints,
			   ring->nbuckets, ring->weighted ? 1 : 0);
		return 0;
	}

	in = read_all(&inlen);
	keybuf = malloc(inlen + 1);
	pos = 0;
	while (pos < inlen)
	{
		char	   *nl = memchr(in + pos, '\n', inlen - pos);
		size_t		linelen = nl ? (size_t) (nl - (in + pos)) : inlen - pos;
		const char *key = in + pos;
		size_t		keylen = linelen;
		int			s;

		if (hexin)
		{
			size_t		k;

			keylen = linelen / 2;
			for (k = 0; k < keylen; k++)
			{
				int			hi = hexval((unsigned char) key[2 * k]);
				int			lo = hexval((unsigned char) key[2 * k + 1]);

				if (hi < 0 || lo < 0)
				{
					fprintf(stderr, "ringtool: bad hex key\n");
					return 2;
				}
				keybuf[k] = (char) (hi * 16 + lo);
			}
			key = keybuf;
		}
		if (dist == MC_DIST_DALLI && !raw)
		{
			keylen = mc_dalli_route_key(ns, ns ? strlen(ns) : 0, key, keylen,
										!binary, routed);
			key = routed;
		}

		if (have_dead && !live_build)
			s = mc_ring_pick(ring, key, keylen, alive, failover);
		else
			s = mc_ring_server_for_key(ring, key, keylen);

		if (show_key)
		{
			size_t		k;

			for (k = 0; k < keylen; k++)
				printf("%02x", (unsigned char) key[k]);
			putchar('\t');
		}
		print_server(nodes, s, as_addr);
		putchar('\n');
		pos += linelen + 1;
	}
	return 0;
}
