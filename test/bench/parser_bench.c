/*
 * parser_bench.c — parse K identical-shape VA replies that sit back to back
 * in one buffer, the way a pipelined multi-get reply arrives.
 *
 * Owns: nothing but the benchmark.  test/unit/parser_budget.sh runs it under
 * callgrind for two values of K and divides the difference, so the one-off
 * setup below cancels out; only parse_all() is collected.
 *
 * Usage: parser_bench K [value_len] [z|general]
 *   z (default): the multi-get's reply "VA 100 f0 O12345" through
 *                mc_parse_reply_z, the path the connection buffers take;
 *   general:     "VA 100 f0 kuser:12345" through mc_parse_reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

/* Exported (not static) so callgrind's --toggle-collect can name it. */
size_t		parse_all(const char *buf, size_t len, size_t *sum);
size_t		parse_all_z(const char *buf, size_t len, size_t *sum);

/*
 * Kept out of line so the measured region is exactly the caller's loop and
 * the parser; the checksum keeps the compiler from dropping the work.
 */
__attribute__((noinline)) size_t
parse_all(const char *buf, size_t len, size_t *sum)
{
	McReply		r;
	size_t		off = 0;
	size_t		n = 0;
	size_t		s = 0;

	while (off < len)
	{
		if (mc_parse_reply(buf + off, len - off, &r) != MC_REPLY_VA)
			break;
		s += r.value_len + r.key_len + r.client_flags;
		off += r.consumed;
		n++;
	}
	*sum = s;
	return n;
}

/* The same over a NUL-terminated buffer with mc_parse_reply_z. */
__attribute__((noinline)) size_t
parse_all_z(const char *buf, size_t len, size_t *sum)
{
	McReply		r;
	size_t		off = 0;
	size_t		n = 0;
	size_t		s = 0;

	while (off < len)
	{
		if (mc_parse_reply_z(buf + off, len - off, &r) != MC_REPLY_VA)
			break;
		s += r.value_len + r.opaque_len + r.client_flags;
		off += r.consumed;
		n++;
	}
	*sum = s;
	return n;
}

int
main(int argc, char **argv)
{
	long		k = argc > 1 ? atol(argv[1]) : 100000;
	long		vlen = argc > 2 ? atol(argv[2]) : 100;
	int			z = !(argc > 3 && strcmp(argv[3], "general") == 0);
	char		hdr[64];
	size_t		hlen;
	size_t		one;
	char	   *buf;
	size_t		sum;
	size_t		n;
	long		i;

	if (k < 1 || vlen < 0 || vlen > 1000000)
	{
		fprintf(stderr, "usage: parser_bench K [value_len]\n");
		return 2;
	}
	/* what mc_get_multi asks for, or the brief's shape with k */
	hlen = (size_t) snprintf(hdr, sizeof(hdr),
							 z ? "VA %ld f0 O12345\r\n" : "VA %ld f0 kuser:12345\r\n",
							 vlen);
	one = hlen + (size_t) vlen + 2;
	buf = malloc(one * (size_t) k + 1);
	if (buf == NULL)
		return 2;
	for (i = 0; i < k; i++)
	{
		char	   *d = buf + (size_t) i * one;

		memcpy(d, hdr, hlen);
		memset(d + hlen, 'x', (size_t) vlen);
		memcpy(d + hlen + vlen, "\r\n", 2);
	}
	buf[one * (size_t) k] = '\0';
	n = z ? parse_all_z(buf, one * (size_t) k, &sum) : parse_all(buf, one * (size_t) k, &sum);
	printf("parsed %zu replies (checksum %zu)\n", n, sum);
	free(buf);
	return n == (size_t) k ? 0 : 1;
}
