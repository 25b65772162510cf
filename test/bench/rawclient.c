/*
 * rawclient.c — the floor for mc_get_multi: the same pipelined meta gets,
 * over plain sockets, with the same key routing, and nothing else.
 *
 * Owns: nothing but this benchmark client.  Each batch takes KEYS
 * consecutive keys "k<off>".."k<off+KEYS-1>" from a random offset (the shape
 * test/bench/bench.py gives mc_get_multi and memcache_get_multi), routes
 * each key with src/core/ring.c (modula unless -d says otherwise, exactly what
 * the foreign server of the bench uses), writes to every server one pipeline
 * "mg <key> v f O<pos> q\r\n" ... "mn\r\n" (the bytes mcfdw sends), then
 * reads whichever socket is ready (one epoll set, made once) until each
 * server's "MN", and copies every value once into an output buffer (as the
 * extension copies it once into the tuple).  A batch's time runs from
 * routing its first key to copying its last value.
 *
 * Usage: rawclient -p PORT[,PORT...] -n KEYS [-k KEYSPACE] [-t SECONDS]
 *                  [-b MAXBATCHES] [-w WARMUP] [-d modula|ketama|dalli]
 * Prints one line: batches=N keys=K hits=H median_us=.. mean_us=.. p10_us=..
 * p90_us=..  Exits 1 if any batch missed a key (every key must be there).
 *
 * With -s OFF it is instead the floor for workload 4 (single gets in a
 * loop): KEYS round trips, one key at a time, key "k<(g * 7919) mod
 * KEYSPACE>" for g = OFF .. OFF+KEYS-1 (bench.py's loop), each one
 * "mg <key> v f\r\n" sent, then epoll_wait on that server's own epoll set
 * (made once, as mcfdw keeps one WaitEventSet per connection), then recv:
 * the three system calls a round trip needs, and next to nothing else in
 * user mode.  Prints wall_ms=.. user_us_per_call=.. sys_us_per_call=..
 * (getrusage, so the same tick-sampled split as /proc/<pid>/stat).
 *
 * With -S CAFILE as well, the same single gets go over TLS (the floor for
 * workload 10): each socket's handshake is done first, verifying the
 * server's certificate against CAFILE and 127.0.0.1, with what mcfdw's
 * SSL_CTX sets on the per-request path (read-ahead, partial writes, the
 * ciphersuites of -C if given); then each round trip is one SSL_write,
 * epoll_wait, SSL_read (and SSL_get_error only when a call did not
 * succeed).  It prints the same line, and cipher=.. (the suite
 * negotiated).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "ring.h"

#define MAX_SERVERS 16

typedef struct Server
{
	int			fd;
	int			port;
	char	   *wbuf;
	size_t		wcap,
				wlen,
				woff;
	char	   *rbuf;
	size_t		rcap,
				rstart,
				rend;
	int			nkeys;			/* keys of this batch sent here */
	int			active;			/* waiting for MN */
	int			want_out;		/* epoll armed for EPOLLOUT */
	SSL		   *ssl;			/* -S: the socket's TLS, after the handshake */
} Server;

static Server servers[MAX_SERVERS];
static int nservers;
static int epfd;
static char *outbuf;			/* values are copied here, once */
static size_t outcap,
			outlen;

static void
die(const char *msg)
{
	fprintf(stderr, "rawclient: %s%s%s\n", msg, errno ? ": " : "",
			errno ? strerror(errno) : "");
	exit(2);
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *
ring_alloc(void *ctx, size_t size)
{
	void	   *p = calloc(1, size);

	(void) ctx;
	if (p == NULL)
		die("out of memory");
	return p;
}

static void
reserve(char **buf, size_t *cap, size_t len, size_t more)
{
	if (*cap - len >= more)
		return;
	while (*cap - len < more)
		*cap = *cap ? *cap * 2 : 65536;
	*buf = realloc(*buf, *cap);
	if (*buf == NULL)
		die("out of memory");
}

static int
set_nonblock(int fd)
{
	int			fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void
connect_server(Server *s)
{
	struct sockaddr_in sa;
	int			one = 1;
	struct epoll_event ev;

	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->fd < 0)
		die("socket");
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t) s->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
		die("connect");
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (set_nonblock(s->fd) < 0)
		die("fcntl");
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = s;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0)
		die("epoll_ctl");
}

/*
 * -S: the TLS handshake on a connected socket, done blocking (it is not
 * timed), then the socket goes back to non-blocking.  The context is set
 * as mcfdw's is (conn_tls.c): verification, read-ahead, partial writes.
 */
static void
tls_connect(Server *s, SSL_CTX *ctx)
{
	int			fl = fcntl(s->fd, F_GETFL);

	if (fl < 0 || fcntl(s->fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		die("fcntl");
	s->ssl = SSL_new(ctx);
	if (s->ssl == NULL || SSL_set_fd(s->ssl, s->fd) != 1 ||
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), "127.0.0.1") != 1)
		die("SSL_new");
	if (SSL_connect(s->ssl) != 1)
	{
		ERR_print_errors_fp(stderr);
		errno = 0;
		die("TLS handshake failed");
	}
	if (set_nonblock(s->fd) < 0)
		die("fcntl");
}

static SSL_CTX *
tls_context(const char *cafile, const char *suites)
{
	SSL_CTX    *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL)
		die("SSL_CTX_new");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1)
		die("cannot load the CA file");
	if (suites != NULL && SSL_CTX_set_ciphersuites(ctx, suites) != 1)
		die("bad -C ciphersuites");
	return ctx;
}

/*
 * -S: write a request whole (a small one goes in one record) and read what
 * is there; the calls succeed in the common case, and SSL_get_error is
 * asked only when one did not.  recv_tls returns the bytes read, 0 when
 * the socket must be waited for.
 */
static void
send_tls(Server *s, const char *buf, int len)
{
	while (len > 0)
	{
		int			n = SSL_write(s->ssl, buf, len);

		if (n <= 0)
		{
			int			e = SSL_get_error(s->ssl, n);

			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
				continue;		/* a full socket buffer: not on this path */
			errno = 0;
			die("SSL_write failed");
		}
		buf += n;
		len -= n;
	}
}

static ssize_t
recv_tls(Server *s, char *buf, size_t len)
{
	int			n = SSL_read(s->ssl, buf, (int) len);

	if (n > 0)
		return n;
	if (SSL_get_error(s->ssl, n) == SSL_ERROR_WANT_READ)
		return 0;
	errno = 0;
	die("SSL_read failed or the server closed the connection");
	return -1;
}

/* Append "mg <key> v f O<pos> q\r\n" (the request mcfdw's multi-get sends). */
static void
encode_get(Server *s, const char *key, size_t klen, int pos)
{
	char	   *p;

	reserve(&s->wbuf, &s->wcap, s->wlen, klen + 32);
	p = s->wbuf + s->wlen;
	memcpy(p, "mg ", 3);
	p += 3;
	memcpy(p, key, klen);
	p += klen;
	p += sprintf(p, " v f O%d q\r\n", pos);
	s->wlen = p - s->wbuf;
}

static void
arm(Server *s, int out)
{
	struct epoll_event ev;

	if (s->want_out == out)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | (out ? EPOLLOUT : 0);
	ev.data.ptr = s;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		die("epoll_ctl");
	s->want_out = out;
}

static void
flush_some(Server *s)
{
	while (s->woff < s->wlen)
	{
		ssize_t		n = send(s->fd, s->wbuf + s->woff, s->wlen - s->woff, MSG_NOSIGNAL);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			die("send");
		}
		s->woff += n;
	}
	arm(s, s->woff < s->wlen);
}

/*
 * Parse what is complete in s->rbuf: "VA <len> ...\r\n<data>\r\n" copies the
 * value out, "MN\r\n" ends the server's batch.  Returns hits found.
 */
static int
parse_replies(Server *s)
{
	int			hits = 0;

	while (s->active)
	{
		char	   *b = s->rbuf + s->rstart;
		size_t		avail = s->rend - s->rstart;
		char	   *eol = memchr(b, '\n', avail);
		size_t		hdr;

		if (eol == NULL)
			break;
		hdr = eol - b + 1;
		if (avail >= 3 && b[0] == 'V' && b[1] == 'A' && b[2] == ' ')
		{
			size_t		len = 0;
			const char *p = b + 3;

			while (*p >= '0' && *p <= '9')
				len = len * 10 + (*p++ - '0');
			if (avail < hdr + len + 2)
				break;
			reserve(&outbuf, &outcap, outlen, len);
			memcpy(outbuf + outlen, b + hdr, len);
			outlen += len;
			s->rstart += hdr + len + 2;
			hits++;
		}
		else if (hdr == 4 && b[0] == 'M' && b[1] == 'N')
		{
			s->rstart += hdr;
			s->active = 0;
		}
		else if (hdr == 4 && b[0] == 'E' && b[1] == 'N')
			s->rstart += hdr;
		else
		{
			fprintf(stderr, "rawclient: unexpected reply: %.*s\n", (int) hdr, b);
			exit(2);
		}
	}
	if (s->rstart == s->rend)
		s->rstart = s->rend = 0;
	return hits;
}

static int
read_some(Server *s)
{
	for (;;)
	{
		ssize_t		n;

		if (s->rcap - s->rend < 65536)
		{
			if (s->rstart > 0)
			{
				memmove(s->rbuf, s->rbuf + s->rstart, s->rend - s->rstart);
				s->rend -= s->rstart;
				s->rstart = 0;
			}
			reserve(&s->rbuf, &s->rcap, s->rend, 65536);
		}
		n = recv(s->fd, s->rbuf + s->rend, s->rcap - s->rend, 0);
		if (n > 0)
		{
			s->rend += n;
			return parse_replies(s);
		}
		if (n == 0)
			die("server closed the connection");
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		die("recv");
	}
}

/* One batch of nkeys keys from off; returns hits. */
static int
run_batch(const McRing *ring, long off, int nkeys)
{
	char		key[32];
	int			hits = 0;
	int			pending = 0;
	struct epoll_event evs[MAX_SERVERS];

	outlen = 0;
	for (int i = 0; i < nservers; i++)
	{
		servers[i].nkeys = 0;
		servers[i].wlen = servers[i].woff = 0;
	}
	for (int i = 0; i < nkeys; i++)
	{
		int			klen = sprintf(key, "k%ld", off + i);
		Server	   *s = &servers[mc_ring_server_for_key(ring, key, (size_t) klen)];

		encode_get(s, key, (size_t) klen, s->nkeys++);
	}
	for (int i = 0; i < nservers; i++)
	{
		Server	   *s = &servers[i];

		if (s->nkeys == 0)
			continue;
		reserve(&s->wbuf, &s->wcap, s->wlen, 4);
		memcpy(s->wbuf + s->wlen, "mn\r\n", 4);
		s->wlen += 4;
		s->active = 1;
		pending++;
		flush_some(s);
	}
	while (pending > 0)
	{
		int			n = epoll_wait(epfd, evs, MAX_SERVERS, 10000);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(n == 0 ? "timed out waiting for replies" : "epoll_wait");
		for (int e = 0; e < n; e++)
		{
			Server	   *s = evs[e].data.ptr;

			if (evs[e].events & EPOLLOUT)
				flush_some(s);
			if (evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			{
				int			was = s->active;

				hits += read_some(s);
				if (was && !s->active)
					pending--;
			}
		}
	}
	return hits;
}

/*
 * -s: KEYS single gets, one round trip each (see the header).  Returns the
 * number of misses.
 */
static long
run_singles(const McRing *ring, long off, int nkeys, long keyspace)
{
	int			ep[MAX_SERVERS];
	struct rusage r0,
				r1;
	double		t0,
				wall;
	long		misses = 0;
	char		req[64];

	for (int i = 0; i < nservers; i++)
	{
		struct epoll_event ev;

		ep[i] = epoll_create1(EPOLL_CLOEXEC);
		if (ep[i] < 0)
			die("epoll_create1");
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		if (epoll_ctl(ep[i], EPOLL_CTL_ADD, servers[i].fd, &ev) < 0)
			die("epoll_ctl");
		reserve(&servers[i].rbuf, &servers[i].rcap, 0, 65536);
	}
	reserve(&outbuf, &outcap, 0, 65536);
	getrusage(RUSAGE_SELF, &r0);
	t0 = now_us();
	for (long g = off; g < off + nkeys; g++)
	{
		int			klen = sprintf(req, "mg k%ld", (g * 7919) % keyspace);
		Server	   *s = &servers[mc_ring_server_for_key(ring, req + 3, (size_t) klen - 3)];
		size_t		have = 0;
		ssize_t		n;
		int			starved;

		memcpy(req + klen, " v f\r\n", 6);
		if (s->ssl != NULL)
			send_tls(s, req, klen + 6);
		else if (send(s->fd, req, (size_t) klen + 6, MSG_NOSIGNAL) != klen + 6)
			die("send");
		starved = 1;
		for (;;)
		{
			struct epoll_event ev;
			char	   *eol;

			/*
			 * Bytes OpenSSL holds are read before waiting, unless they are
			 * part of a record (the last read wanted more): as mcfdw does.
			 */
			if ((s->ssl == NULL || starved || !SSL_has_pending(s->ssl)) &&
				epoll_wait(ep[s - servers], &ev, 1, 10000) < 0 && errno != EINTR)
				die("epoll_wait");
			if (s->ssl != NULL)
			{
				n = recv_tls(s, s->rbuf + have, s->rcap - have);
				starved = (n == 0);
				if (n == 0)
					continue;
			}
			else
			{
				n = recv(s->fd, s->rbuf + have, s->rcap - have, 0);
				if (n == 0)
					die("server closed the connection");
				if (n < 0)
				{
					if (errno == EAGAIN || errno == EINTR)
						continue;
					die("recv");
				}
			}
			have += (size_t) n;
			eol = memchr(s->rbuf, '\n', have);
			if (eol == NULL)
				continue;
			if (s->rbuf[0] == 'V' && s->rbuf[1] == 'A')
			{
				size_t		len = strtoul(s->rbuf + 3, NULL, 10);
				size_t		hdr = (size_t) (eol - s->rbuf) + 1;

				if (have < hdr + len + 2)
					continue;
				memcpy(outbuf, s->rbuf + hdr, len);
			}
			else
				misses++;
			break;
		}
	}
	wall = now_us() - t0;
	getrusage(RUSAGE_SELF, &r1);
	printf("calls=%d misses=%ld wall_ms=%.3f user_us_per_call=%.3f sys_us_per_call=%.3f%s%s\n",
		   nkeys, misses, wall / 1e3,
		   ((r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e6 +
			(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec)) / nkeys,
		   ((r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
			(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec)) / nkeys,
		   servers[0].ssl ? " cipher=" : "",
		   servers[0].ssl ? SSL_get_cipher_name(servers[0].ssl) : "");
	return misses;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	char	   *ports = NULL;
	int			nkeys = 100;
	long		keyspace = 100000;
	double		seconds = 2.0;
	long		maxbatches = 1000000;
	int			warmup = 20;
	McDist		dist = MC_DIST_MODULA;
	McRingNode	nodes[MAX_SERVERS];
	const char *err = NULL;
	McRing	   *ring;
	double	   *times;
	long		nb = 0;
	long		misses = 0;
	long		hits_total = 0;
	double		sum = 0,
				t0;
	long		singles = -1;
	const char *cafile = NULL;
	const char *suites = NULL;
	SSL_CTX    *ctx = NULL;
	int			opt;

	while ((opt = getopt(argc, argv, "p:n:k:t:b:w:d:s:S:C:")) != -1)
	{
		switch (opt)
		{
			case 'S':
				cafile = optarg;
				break;
			case 'C':
				suites = optarg;
				break;
			case 's':
				singles = atol(optarg);
				break;
			case 'p':
				ports = optarg;
				break;
			case 'n':
				nkeys = atoi(optarg);
				break;
			case 'k':
				keyspace = atol(optarg);
				break;
			case 't':
				seconds = atof(optarg);
				break;
			case 'b':
				maxbatches = atol(optarg);
				break;
			case 'w':
				warmup = atoi(optarg);
				break;
			case 'd':
				if (strcmp(optarg, "modula") == 0)
					dist = MC_DIST_MODULA;
				else if (strcmp(optarg, "ketama") == 0)
					dist = MC_DIST_KETAMA;
				else if (strcmp(optarg, "dalli") == 0)
					dist = MC_DIST_DALLI;
				else
				{
					fprintf(stderr, "rawclient: unknown distribution %s\n", optarg);
					return 2;
				}
				break;
			default:
				fprintf(stderr, "usage: rawclient -p PORT[,PORT...] -n KEYS [-k KEYSPACE] "
						"[-t SECONDS] [-b MAXBATCHES] [-w WARMUP] [-d modula|ketama|dalli] "
						"[-s OFF [-S CAFILE [-C CIPHERSUITES]]]\n");
				return 2;
		}
	}
	if (ports == NULL || nkeys < 1 || keyspace < nkeys || maxbatches < 1)
	{
		fprintf(stderr, "rawclient: need -p PORTS and 1 <= KEYS <= KEYSPACE\n");
		return 2;
	}
	if (cafile != NULL && singles < 0)
	{
		fprintf(stderr, "rawclient: -S is for single gets (-s) only\n");
		return 2;
	}
	if (cafile != NULL)
	{
		signal(SIGPIPE, SIG_IGN);	/* SSL_write has no MSG_NOSIGNAL */
		ctx = tls_context(cafile, suites);
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1");
	for (char *tok = strtok(ports, ","); tok; tok = strtok(NULL, ","))
	{
		if (nservers == MAX_SERVERS)
			die("too many servers");
		servers[nservers].port = atoi(tok);
		nodes[nservers].host = "127.0.0.1";
		nodes[nservers].port = servers[nservers].port;
		nodes[nservers].weight = 1;
		connect_server(&servers[nservers]);
		if (ctx != NULL)
			tls_connect(&servers[nservers], ctx);
		nservers++;
	}
	ring = mc_ring_build(dist, nodes, nservers, ring_alloc, NULL, &err);
	if (ring == NULL)
	{
		fprintf(stderr, "rawclient: ring: %s\n", err ? err : "?");
		return 2;
	}
	if (singles >= 0)
		return run_singles(ring, singles, nkeys, keyspace) ? 1 : 0;
	srandom((unsigned) getpid());
	for (int i = 0; i < warmup; i++)
		(void) run_batch(ring, random() % (keyspace - nkeys + 1), nkeys);

	times = malloc(sizeof(double) * (size_t) maxbatches);
	if (times == NULL)
		die("out of memory");
	t0 = now_us();
	while (nb < maxbatches && now_us() - t0 < seconds * 1e6)
	{
		long		off = random() % (keyspace - nkeys + 1);
		double		a = now_us();
		int			hits = run_batch(ring, off, nkeys);

		times[nb] = now_us() - a;
		sum += times[nb];
		nb++;
		hits_total += hits;
		if (hits != nkeys)
			misses += nkeys - hits;
	}
	qsort(times, (size_t) nb, sizeof(double), cmp_double);
	printf("batches=%ld keys=%d hits=%ld misses=%ld median_us=%.2f mean_us=%.2f "
		   "p10_us=%.2f p90_us=%.2f\n",
		   nb, nkeys, hits_total, misses, times[nb / 2], sum / nb,
		   times[nb / 10], times[(nb * 9) / 10]);
	return misses ? 1 : 0;
}
