/*
 * fuzz_protocol.c — fuzz target for mc_parse_reply and mc_parse_reply_z,
 * and for mc_metadump_line (each "\n"-ended line of the input, on an
 * exactly sized copy: an item's key is 1 to MC_KEY_MAX bytes).
 *
 * Owns: the parser's invariants, checked on arbitrary bytes.  The input is
 * read as a stream of replies; for each complete one the consumed bytes are
 * parsed again on their own (same answer) and its prefixes must all be
 * NEED_MORE with a need that stays inside the reply.  Every parse runs on
 * an exactly sized heap copy, so AddressSanitizer sees any over-read.
 *
 * Two builds:
 *	 clang -fsanitize=fuzzer,address,undefined -Isrc/core test/fuzz/fuzz_protocol.c src/core/protocol.c src/core/metadump.c
 *	 cc -DMC_FUZZ_STANDALONE -Isrc/core test/fuzz/fuzz_protocol.c src/core/protocol.c src/core/metadump.c
 * The second has its own main(): it replays the files (or directories)
 * given and then runs random mutations of them, for -n runs or -t seconds.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadump.h"
#include "protocol.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with a message: libFuzzer and the replay driver both catch it. */
static void
check(bool cond, const char *what, const char *buf, size_t len)
{
	if (cond)
		return;
	fprintf(stderr, "fuzz_protocol: invariant failed: %s (input %zu bytes: \"%.*s\")\n",
			what, len, (int) (len < 120 ? len : 120), buf);
	abort();
}

static bool same_reply(const McReply *a, const McReply *b);

/*
 * mc_parse_reply_z's contract: the same type and core fields, and the same
 * value for every flag field it marks present (it leaves the others as they
 * were); whatever it hands to mc_parse_reply is identical.
 */
static bool
z_agrees(const McReply *a, const McReply *z)
{
	if (a->type != z->type)
		return false;
	if (a->type != MC_REPLY_VA)
		return same_reply(a, z);
	return a->consumed == z->consumed && a->header_len == z->header_len &&
		a->value_off == z->value_off && a->value_len == z->value_len &&
		a->present == z->present &&
		(!(a->present & MC_F_FLAGS) || a->client_flags == z->client_flags) &&
		(!(a->present & MC_F_OPAQUE) ||
		 (a->opaque_off == z->opaque_off && a->opaque_len == z->opaque_len)) &&
		(!(a->present & MC_F_KEY) ||
		 (a->key_off == z->key_off && a->key_len == z->key_len)) &&
		(!(a->present & MC_F_CAS) || a->cas == z->cas) &&
		(!(a->present & MC_F_TTL) || a->ttl == z->ttl) &&
		(!(a->present & MC_F_SIZE) || a->size == z->size);
}

/*
 * Parse from an exactly sized copy so any over-read is an ASan error; and
 * the same bytes plus one NUL (all it may read) through mc_parse_reply_z,
 * which must agree.
 */
static McReplyType
parse_copy(const char *src, size_t len, McReply *r)
{
	char	   *copy = malloc(len ? len : 1);
	char	   *zcopy = malloc(len + 1);
	McReplyType t;
	McReply		z;

	if (copy == NULL || zcopy == NULL)
		abort();
	memcpy(copy, src, len);
	t = mc_parse_reply(copy, len, r);
	free(copy);
	memcpy(zcopy, src, len);
	zcopy[len] = '\0';
	memset(&z, 0xa5, sizeof(z));
	(void) mc_parse_reply_z(zcopy, len, &z);
	free(zcopy);
	if (!z_agrees(r, &z))
	{
		fprintf(stderr, "fuzz_protocol: mc_parse_reply_z disagrees (input %zu bytes: \"%.*s\")\n",
				len, (int) (len < 120 ? len : 120), src);
		abort();
	}
	return t;
}

/* The struct has padding: compare what the contract defines. */
static bool
same_reply(const McReply *a, const McReply *b)
{
	return a->type == b->type && a->consumed == b->consumed &&
		a->need == b->need && a->header_len == b->header_len &&
		a->value_off == b->value_off && a->value_len == b->value_len &&
		a->present == b->present && a->client_flags == b->client_flags &&
		a->cas == b->cas && a->ttl == b->ttl && a->size == b->size &&
		a->key_off == b->key_off && a->key_len == b->key_len &&
		a->opaque_off == b->opaque_off && a->opaque_len == b->opaque_len &&
		a->msg_off == b->msg_off && a->msg_len == b->msg_len &&
		a->stat_value_off == b->stat_value_off &&
		a->stat_value_len == b->stat_value_len;
}

/* A span must lie inside [lo, hi) of the buffer, or be the zero span. */
static bool
span_in(size_t off, size_t len, size_t lo, size_t hi)
{
	if (off == 0 && len == 0)
		return true;
	return off >= lo && len <= hi - lo && off - lo <= hi - lo - len;
}

/* Invariants of one result, whatever the input. */
static void
check_result(const char *buf, size_t len, McReplyType t, const McReply *r)
{
	const unsigned known = MC_F_VALUE | MC_F_FLAGS | MC_F_KEY | MC_F_CAS |
		MC_F_TTL | MC_F_SIZE | MC_F_B64 | MC_F_OPAQUE | MC_F_WIN |
		MC_F_STALE | MC_F_WON;

	check(t == r->type, "return value equals r->type", buf, len);
	check((r->present & ~known) == 0, "present holds known bits only", buf, len);
	switch (t)
	{
		case MC_REPLY_NEED_MORE:
			check(r->need >= 1, "NEED_MORE implies need >= 1", buf, len);
			check(r->consumed == 0, "NEED_MORE consumes nothing", buf, len);
			if (r->header_len != 0)
			{
				/* a complete VA header: need is exact */
				check(r->header_len <= len && r->value_off == r->header_len &&
					  r->header_len + r->value_len + 2 == len + r->need,
					  "NEED_MORE after a VA header gives the exact need", buf, len);
			}
			break;
		case MC_REPLY_BAD:
			check(r->need == 0 && r->consumed == 0 && r->present == 0 &&
				  r->header_len == 0,
				  "BAD carries no fields", buf, len);
			break;
		default:
			check(r->consumed >= 4 && r->consumed <= len, "consumed <= len", buf, len);
			check(r->need == 0, "complete reply needs nothing", buf, len);
			check(r->header_len >= 4 && r->header_len <= r->consumed &&
				  r->header_len <= MC_REPLY_LINE_MAX,
				  "header_len within consumed and the line limit", buf, len);
			check(memcmp(buf + r->header_len - 2, "\r\n", 2) == 0 &&
				  memcmp(buf + r->consumed - 2, "\r\n", 2) == 0,
				  "header and reply end in CRLF", buf, len);
			check(memchr(buf, '\n', r->header_len - 1) == NULL,
				  "the header's LF is its first", buf, len);
			check(span_in(r->key_off, r->key_len, 0, r->header_len) &&
				  span_in(r->opaque_off, r->opaque_len, 0, r->header_len) &&
				  span_in(r->msg_off, r->msg_len, 0, r->header_len) &&
				  span_in(r->stat_value_off, r->stat_value_len, 0, r->header_len),
				  "header spans inside the header", buf, len);
			if (t == MC_REPLY_VA)
				check(r->value_off == r->header_len &&
					  r->header_len + r->value_len + 2 == r->consumed &&
					  r->value_len <= (UINT64_C(1) << 31),
					  "VA value span is the data block", buf, len);
			else
				check(r->value_off == 0 && r->value_len == 0 &&
					  r->consumed == r->header_len,
					  "non-VA replies are one line", buf, len);
			if (!(r->present & MC_F_KEY))
				check(r->key_off == 0 && r->key_len == 0, "no k, no key", buf, len);
			if (t != MC_REPLY_STAT)
				check(r->stat_value_len == 0, "stat value only on STAT", buf, len);
			break;
	}
}

/* A complete reply: its prefixes and its exact bytes, parsed alone. */
static void
check_complete(const char *buf, const McReply *r)
{
	McReply		r2;
	McReplyType t;
	size_t		n = r->consumed;
	size_t		k;
	size_t		step = n <= 300 ? 1 : n / 97;

	t = parse_copy(buf, n, &r2);
	check(same_reply(r, &r2), "consumed bytes alone parse the same", buf, n);
	for (k = 0; k < n; k += step)
	{
		t = parse_copy(buf, k, &r2);
		check_result(buf, k, t, &r2);
		check(t == MC_REPLY_NEED_MORE, "every prefix of a complete reply is NEED_MORE", buf, k);
		check(k + r2.need <= n, "need stays inside the reply", buf, k);
		if (r->type == MC_REPLY_VA && k >= r->header_len)
			check(r2.need == n - k && r2.header_len == r->header_len &&
				  r2.present == r->present && r2.key_len == r->key_len &&
				  r2.value_len == r->value_len,
				  "prefix after the VA header: exact need, same header", buf, k);
	}
	/* the last few prefixes always, whatever the step */
	for (k = n > 3 ? n - 3 : 0; k < n; k++)
	{
		t = parse_copy(buf, k, &r2);
		check(t == MC_REPLY_NEED_MORE && k + r2.need <= n,
			  "last prefixes are NEED_MORE", buf, k);
	}
}

/* Every "\n"-ended line of the input as a metadump line. */
static void
fuzz_metadump(const char *buf, size_t size)
{
	const char *p = buf;
	const char *end = buf + size;
	const char *nl;

	while (p < end && (nl = memchr(p, '\n', end - p)) != NULL)
	{
		size_t		len = nl - p;
		char	   *copy = malloc(len ? len : 1);
		char		key[MC_KEY_MAX];
		size_t		keylen;
		McMdLine	t;

		memcpy(copy, p, len);
		t = mc_metadump_line(copy, len, key, &keylen);
		check(t == MC_MD_ITEM ? keylen >= 1 && keylen <= MC_KEY_MAX : keylen == 0,
			  "metadump key length", p, len);
		check(t != MC_MD_ITEM || (len >= 5 && memcmp(copy, "key=", 4) == 0),
			  "metadump item without key=", p, len);
		free(copy);
		p = nl + 1;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *) data;
	size_t		off = 0;
	McReply		r;
	McReplyType t;
	int			replies = 0;

	fuzz_metadump(buf, size);

	/* read the input as a pipelined stream of replies */
	while (off <= size && replies < 64)
	{
		t = parse_copy(buf + off, size - off, &r);
		check_result(buf + off, size - off, t, &r);
		if (t == MC_REPLY_NEED_MORE || t == MC_REPLY_BAD)
			break;
		check_complete(buf + off, &r);
		off += r.consumed;
		replies++;
	}
	return 0;
}

#ifdef MC_FUZZ_STANDALONE
/*
 * Replay driver for machines without libFuzzer: seeds first, then random
 * mutations of them (byte flips, protocol tokens, splices, cuts).
 */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#define FUZZ_MAX_SEEDS	4096
#define FUZZ_MAX_INPUT	8192

static char *seeds[FUZZ_MAX_SEEDS];
static size_t seed_len[FUZZ_MAX_SEEDS];
static int	nseeds;
static uint64_t rs = UINT64_C(0x2545f4914f6cdd1d);

static uint64_t
rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* Load one seed file; unreadable files are skipped, not fatal. */
static void
add_file(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	char	   *b;
	size_t		n;

	if (f == NULL || nseeds >= FUZZ_MAX_SEEDS)
	{
		if (f)
			fclose(f);
		return;
	}
	b = malloc(FUZZ_MAX_INPUT);
	n = fread(b, 1, FUZZ_MAX_INPUT, f);
	fclose(f);
	seeds[nseeds] = b;
	seed_len[nseeds++] = n;
}

/* A directory argument means every regular file in it. */
static void
add_path(const char *path)
{
	struct stat st;
	DIR		   *d;
	struct dirent *e;
	char		full[4096];

	if (stat(path, &st) != 0)
		return;
	if (!S_ISDIR(st.st_mode))
	{
		add_file(path);
		return;
	}
	d = opendir(path);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		if (e->d_name[0] == '.')
			continue;
		snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
		add_file(full);
	}
	closedir(d);
}

/* Tokens that steer mutations towards interesting parser states. */
static const char *const tokens[] = {
	"\r\n", "\r", "\n", " ", "VA ", "HD", "EN", "END", "MN", "NS", "EX", "NF",
	"OK", "STAT ", "ERROR", "CLIENT_ERROR ", "SERVER_ERROR ", " f", " k",
	" b", " c", " t-", " s", " O", " W", " X", " Z", "4294967295",
	"4294967296", "2147483648", "2147483649", "18446744073709551615",
	"18446744073709551616", "9223372036854775808", "0", "00000000000000000000001",
};

/* One random edit of buf (length *len, capacity FUZZ_MAX_INPUT). */
static void
mutate(char *buf, size_t *len)
{
	size_t		n = *len;
	size_t		pos = n ? rnd() % (n + 1) : 0;

	switch (rnd() % 6)
	{
		case 0:					/* flip a byte */
			if (n)
				buf[rnd() % n] = (char) rnd();
			break;
		case 1:					/* insert a token */
			{
				const char *t = tokens[rnd() % (sizeof(tokens) / sizeof(tokens[0]))];
				size_t		tl = strlen(t);

				if (n + tl <= FUZZ_MAX_INPUT)
				{
					memmove(buf + pos + tl, buf + pos, n - pos);
					memcpy(buf + pos, t, tl);
					*len = n + tl;
				}
				break;
			}
		case 2:					/* delete a range */
			if (n)
			{
				size_t		cut = 1 + rnd() % (n - pos + 1);

				if (pos + cut > n)
					cut = n - pos;
				memmove(buf + pos, buf + pos + cut, n - pos - cut);
				*len = n - cut;
			}
			break;
		case 3:					/* truncate */
			*len = pos;
			break;
		case 4:					/* splice another seed in */
			if (nseeds)
			{
				int			s = (int) (rnd() % (uint64_t) nseeds);
				size_t		sl = seed_len[s];

				if (n + sl <= FUZZ_MAX_INPUT)
				{
					memmove(buf + pos + sl, buf + pos, n - pos);
					memcpy(buf + pos, seeds[s], sl);
					*len = n + sl;
				}
			}
			break;
		default:				/* replace a digit run's neighbour */
			if (n)
				buf[rnd() % n] = "0123456789 \r\nfkb-"[rnd() % 17];
			break;
	}
}

int
main(int argc, char **argv)
{
	long		runs = 100000;
	double		seconds = 0;
	long		done = 0;
	int			i;
	char	   *buf = malloc(FUZZ_MAX_INPUT);
	time_t		start = time(NULL);

	for (i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			runs = atol(argv[++i]);
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
		{
			seconds = atof(argv[++i]);
			runs = -1;
		}
		else
			add_path(argv[i]);
	}
	for (i = 0; i < nseeds; i++, done++)
		LLVMFuzzerTestOneInput((const uint8_t *) seeds[i], seed_len[i]);
	while (runs < 0 ? difftime(time(NULL), start) < seconds : done < runs)
	{
		size_t		len = 0;
		int			edits = 1 + (int) (rnd() % 6);

		if (nseeds)
		{
			int			s = (int) (rnd() % (uint64_t) nseeds);

			len = seed_len[s];
			memcpy(buf, seeds[s], len);
		}
		while (edits-- > 0)
			mutate(buf, &len);
		LLVMFuzzerTestOneInput((const uint8_t *) buf, len);
		done++;
	}
	printf("fuzz_protocol: %ld runs (%d seeds), no invariant broken\n", done, nseeds);
	fflush(stdout);
	for (i = 0; i < nseeds; i++)
		free(seeds[i]);
	free(buf);
	return 0;
}
#endif							/* MC_FUZZ_STANDALONE */
