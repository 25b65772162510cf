/*
 * parser_bench.c — parse K identical-shape VA replies that sit back to back
 * in one buffer, the way a pipelined multi-get reply arrives.
 *
 * Owns: nothing but the benchmark.  test/unit/parser_budget.sh runs it under
 * callgrind for two values of K and divides the difference, so the one-off
 * setup below cancels out; only parse_all() is collected.
 *
 * Usage: parser_bench K [value_len]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

/* Exported (not static) so callgrind's --toggle-collect can name it. */
size_t		parse_all(const char *buf, size_t len, size_t *sum);

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

int
main(int argc, char **argv)
{
	long		k = argc > 1 ? atol(argv[1]) : 100000;
	long		vlen = argc > 2 ? atol(argv[2]) : 100;
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
	/* the shape from the brief: "VA 100 f0 kuser:12345\r\n" */
	hlen = (size_t) snprintf(hdr, sizeof(hdr), "VA %ld f0 kuser:12345\r\n", vlen);
	one = hlen + (size_t) vlen + 2;
	buf = malloc(one * (size_t) k);
	if (buf == NULL)
		return 2;
	for (i = 0; i < k; i++)
	{
		char	   *d = buf + (size_t) i * one;

		memcpy(d, hdr, hlen);
		memset(d + hlen, 'x', (size_t) vlen);
		memcpy(d + hlen + vlen, "\r\n", 2);
	}
	n = parse_all(buf, one * (size_t) k, &sum);
	printf("parsed %zu replies (checksum %zu)\n", n, sum);
	free(buf);
	return n == (size_t) k ? 0 : 1;
}
