/*
 * test_protocol.c — unit tests for src/core/protocol.c (no server needed).
 *
 * Owns: the table of reply shapes the parser must accept or refuse, the
 * exact bytes of every encoder, key/base64 boundaries and a generated
 * round-trip property test.  Must not: depend on other modules, the
 * network, or anything but libc.  Every reply is also fed as every prefix
 * and through a reader that reads exactly r.need bytes at a time, so
 * NEED_MORE and the final result are checked together.
 *
 * Build: gcc -O2 -Wall -Wextra -Werror -Isrc test/unit/test_protocol.c \
 *            src/core/protocol.c -o /tmp/test_protocol
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "tap.h"

/* length of a string literal, embedded NULs included */
#define L(s)	(sizeof(s) - 1)

/* ---------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

/* Deterministic xorshift so a failure reproduces run after run. */
static uint64_t
rnd(void)
{
	uint64_t	x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* Uniform-enough pick in [0, n); n > 0. */
static uint64_t
rnd_below(uint64_t n)
{
	return rnd() % n;
}

static long z_checked;
static long z_mismatch;

static bool reply_equal(const McReply *a, const McReply *b);

/*
 * Does mc_parse_reply_z's result agree with mc_parse_reply's?  Its fast
 * path leaves the fields a reply does not define untouched, so only the
 * defined ones are compared; a result it handed to mc_parse_reply must be
 * identical.
 */
static bool
reply_agrees(const McReply *a, const McReply *z)
{
	if (a->type != z->type)
		return false;
	if (a->type != MC_REPLY_VA)
		return reply_equal(a, z);
	if (a->consumed != z->consumed || a->header_len != z->header_len ||
		a->value_off != z->value_off || a->value_len != z->value_len ||
		a->present != z->present)
		return false;
	if ((a->present & MC_F_FLAGS) && a->client_flags != z->client_flags)
		return false;
	if ((a->present & MC_F_OPAQUE) &&
		(a->opaque_off != z->opaque_off || a->opaque_len != z->opaque_len))
		return false;
	if ((a->present & MC_F_KEY) &&
		(a->key_off != z->key_off || a->key_len != z->key_len))
		return false;
	if ((a->present & MC_F_CAS) && a->cas != z->cas)
		return false;
	if ((a->present & MC_F_TTL) && a->ttl != z->ttl)
		return false;
	if ((a->present & MC_F_SIZE) && a->size != z->size)
		return false;
	return true;
}

/*
 * Parse from an exactly sized heap copy, so a sanitizer build reports any
 * read past the end instead of silently reading the caller's slack.  Every
 * input is also given to mc_parse_reply_z (with exactly one NUL after it,
 * which is all that function may read), and the two must agree.
 */
static McReplyType
parse_exact(const char *in, size_t len, McReply *r)
{
	char	   *copy = malloc(len ? len : 1);
	char	   *zcopy = malloc(len + 1);
	McReplyType t;
	McReply		z;

	if (copy == NULL || zcopy == NULL)
		abort();
	memcpy(copy, in, len);
	t = mc_parse_reply(copy, len, r);
	free(copy);

	memcpy(zcopy, in, len);
	zcopy[len] = '\0';
	memset(&z, 0xa5, sizeof(z));
	(void) mc_parse_reply_z(zcopy, len, &z);
	z_checked++;
	if (!reply_agrees(r, &z))
	{
		if (z_mismatch++ < 5)
			tap_diag("mc_parse_reply_z disagrees on %.*s", (int) (len > 60 ? 60 : len), in);
	}
	free(zcopy);
	return t;
}

/* Field-by-field, because the struct has padding. */
static bool
reply_equal(const McReply *a, const McReply *b)
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

/* Does buf[off, off+len) hold exactly want (NULL meaning "absent")? */
static bool
span_is(const char *buf, size_t off, size_t len, const char *want,
		size_t wantlen)
{
	if (want == NULL)
		return off == 0 && len == 0;
	return len == wantlen && memcmp(buf + off, want, len) == 0;
}

/* ---------------------------------------------------------------------
 * Table of reply shapes
 * --------------------------------------------------------------------- */

typedef struct Shape
{
	const char *name;
	const char *in;
	size_t		inlen;
	McReplyType type;
	unsigned	present;
	uint32_t	flags;
	uint64_t	cas;
	int64_t		ttl;
	uint64_t	size;
	const char *key;
	const char *opaque;
	const char *value;			/* VA data (text; binary cases are generated) */
	const char *msg;			/* error text, or STAT name */
	const char *stat_value;
} Shape;

#define OK_(n, i, t) .name = n, .in = i, .inlen = L(i), .type = t
#define BAD_(n, i) .name = n, .in = i, .inlen = L(i), .type = MC_REPLY_BAD

static const Shape shapes[] = {
	/* the multi-get reply and its variations */
	{OK_("typical VA", "VA 5 f0 kuser:12345\r\nhello\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS | MC_F_KEY,
		.key = "user:12345",
		.value = "hello"},
	{OK_("VA long key", "VA 3 f7 kmyapp:session:0123456789abcdef0123\r\nabc\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS | MC_F_KEY,
		.flags = 7,
		.key = "myapp:session:0123456789abcdef0123",
		.value = "abc"},
	{OK_("VA key only", "VA 2 kfoo\r\nhi\r\n", MC_REPLY_VA),
		.present = MC_F_KEY,
		.key = "foo",
		.value = "hi"},
	{OK_("VA no flags", "VA 1\r\nx\r\n", MC_REPLY_VA),
		.value = "x"},
	{OK_("VA missing k", "VA 1 f9\r\nx\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS,
		.flags = 9,
		.value = "x"},
	{OK_("VA flags any order", "VA 2 s2 t-1 c9 f5 kfoo\r\nhi\r\n", MC_REPLY_VA),
		.present = MC_F_SIZE | MC_F_TTL | MC_F_CAS | MC_F_FLAGS | MC_F_KEY,
		.flags = 5,
		.cas = 9,
		.ttl = -1,
		.size = 2,
		.key = "foo",
		.value = "hi"},
	{OK_("VA flags other order", "VA 2 kfoo f5 c9 t-1 s2\r\nhi\r\n", MC_REPLY_VA),
		.present = MC_F_SIZE | MC_F_TTL | MC_F_CAS | MC_F_FLAGS | MC_F_KEY,
		.flags = 5,
		.cas = 9,
		.ttl = -1,
		.size = 2,
		.key = "foo",
		.value = "hi"},
	{OK_("VA 1.6.18 mg s t c", "VA 3 s3 t-1 c1\r\nbar\r\n", MC_REPLY_VA),
		.present = MC_F_SIZE | MC_F_TTL | MC_F_CAS,
		.cas = 1,
		.ttl = -1,
		.size = 3,
		.value = "bar"},
	{OK_("VA repeated flags: first wins", "VA 1 f1 f2 kaa kbb c3 c4 t5 t-6 s1 s9 Oa Ob\r\nx\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS | MC_F_KEY | MC_F_CAS | MC_F_TTL | MC_F_SIZE | MC_F_OPAQUE,
		.flags = 1,
		.cas = 3,
		.ttl = 5,
		.size = 1,
		.key = "aa",
		.opaque = "a",
		.value = "x"},
	{OK_("VA b after k (1.6.18 order)", "VA 2 kZm9vIGJhcg== b f0\r\nhi\r\n", MC_REPLY_VA),
		.present = MC_F_KEY | MC_F_B64 | MC_F_FLAGS,
		.key = "Zm9vIGJhcg==",
		.value = "hi"},
	{OK_("VA b before k", "VA 2 b kZm9vIGJhcg==\r\nhi\r\n", MC_REPLY_VA),
		.present = MC_F_KEY | MC_F_B64,
		.key = "Zm9vIGJhcg==",
		.value = "hi"},
	{OK_("VA key named b", "VA 1 kb b\r\nx\r\n", MC_REPLY_VA),
		.present = MC_F_KEY | MC_F_B64,
		.key = "b",
		.value = "x"},
	{OK_("VA unknown and junk tokens skipped", "VA 1 h0 l12 zz 9abc ~ kk f3\r\nx\r\n", MC_REPLY_VA),
		.present = MC_F_KEY | MC_F_FLAGS,
		.flags = 3,
		.key = "k",
		.value = "x"},
	{OK_("VA zero size", "VA 0\r\n\r\n", MC_REPLY_VA),
		.value = ""},
	{OK_("VA zero size with flags", "VA 0 s0 f0 kfoo\r\n\r\n", MC_REPLY_VA),
		.present = MC_F_SIZE | MC_F_FLAGS | MC_F_KEY,
		.key = "foo",
		.value = ""},
	{OK_("VA data holding CRLF", "VA 6 kx\r\na\r\nb\r\n\r\n", MC_REPLY_VA),
		.present = MC_F_KEY,
		.key = "x",
		.value = "a\r\nb\r\n"},
	{OK_("VA W X from a stale item", "VA 1 c22 X W\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_CAS | MC_F_STALE | MC_F_WIN,
		.cas = 22,
		.value = "z"},
	{OK_("VA Z lease already won", "VA 0 t30 Z\r\n\r\n", MC_REPLY_VA),
		.present = MC_F_TTL | MC_F_WON,
		.ttl = 30,
		.value = ""},
	{OK_("VA high bytes in raw key", "VA 1 kcaf\xc3\xa9\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_KEY,
		.key = "caf\xc3\xa9",
		.value = "z"},
	{OK_("VA DEL in key", "VA 1 ka\x7f\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_KEY,
		.key = "a\x7f",
		.value = "z"},
	{OK_("VA all echoed flags", "VA 1 s1 f0 ktt c28 t99 O7\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_SIZE | MC_F_FLAGS | MC_F_KEY | MC_F_CAS | MC_F_TTL | MC_F_OPAQUE,
		.cas = 28,
		.ttl = 99,
		.size = 1,
		.key = "tt",
		.opaque = "7",
		.value = "z"},
	{OK_("VA empty k token", "VA 1 k\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_KEY,
		.key = "",
		.value = "z"},
	{OK_("VA doubled and trailing space", "VA 1  f1 \r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS,
		.flags = 1,
		.value = "z"},
	{OK_("VA max flags/cas/ttl", "VA 1 f4294967295 c18446744073709551615 t9223372036854775807\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS | MC_F_CAS | MC_F_TTL,
		.flags = UINT32_MAX,
		.cas = UINT64_MAX,
		.ttl = INT64_MAX,
		.value = "z"},
	{OK_("VA min ttl", "VA 1 t-9223372036854775808\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_TTL,
		.ttl = INT64_MIN,
		.value = "z"},
	{OK_("VA leading zeros", "VA 0000000000000000000000001 f0000000000000000000000007\r\nz\r\n", MC_REPLY_VA),
		.present = MC_F_FLAGS,
		.flags = 7,
		.value = "z"},
	{OK_("ma VA", "VA 2\r\n10\r\n", MC_REPLY_VA),
		.value = "10"},
	{OK_("ma VA with t c k", "VA 1 t-1 c7 kc1\r\n4\r\n", MC_REPLY_VA),
		.present = MC_F_TTL | MC_F_CAS | MC_F_KEY,
		.cas = 7,
		.ttl = -1,
		.key = "c1",
		.value = "4"},

	/* status replies, with and without flags */
	{OK_("HD", "HD\r\n", MC_REPLY_HD)},
	{OK_("HD c", "HD c123\r\n", MC_REPLY_HD),
		.present = MC_F_CAS,
		.cas = 123},
	{OK_("HD f (mg f on 1.6.18)", "HD f4294967295\r\n", MC_REPLY_HD),
		.present = MC_F_FLAGS,
		.flags = UINT32_MAX},
	{OK_("HD t", "HD t99\r\n", MC_REPLY_HD),
		.present = MC_F_TTL,
		.ttl = 99},
	{OK_("HD k O c (ms k O c)", "HD kc1 O9 c5\r\n", MC_REPLY_HD),
		.present = MC_F_KEY | MC_F_OPAQUE | MC_F_CAS,
		.cas = 5,
		.key = "c1",
		.opaque = "9"},
	{OK_("HD trailing space", "HD \r\n", MC_REPLY_HD)},
	{OK_("OK is HD (old servers)", "OK\r\n", MC_REPLY_HD)},
	{OK_("EN", "EN\r\n", MC_REPLY_EN)},
	{OK_("EN k b (1.6.18 echoes)", "EN kfoo b\r\n", MC_REPLY_EN),
		.present = MC_F_KEY | MC_F_B64,
		.key = "foo"},
	{OK_("EN k b O", "EN kAP9taXNz b O5\r\n", MC_REPLY_EN),
		.present = MC_F_KEY | MC_F_B64 | MC_F_OPAQUE,
		.key = "AP9taXNz",
		.opaque = "5"},
	{OK_("NS", "NS\r\n", MC_REPLY_NS)},
	{OK_("EX", "EX\r\n", MC_REPLY_EX)},
	{OK_("NF", "NF\r\n", MC_REPLY_NF)},
	{OK_("NF k O (md k O)", "NF kc1 O1\r\n", MC_REPLY_NF),
		.present = MC_F_KEY | MC_F_OPAQUE,
		.key = "c1",
		.opaque = "1"},
	{OK_("MN", "MN\r\n", MC_REPLY_MN)},
	{OK_("END", "END\r\n", MC_REPLY_END)},
	{OK_("ERROR", "ERROR\r\n", MC_REPLY_ERROR)},
	{OK_("ERROR with text", "ERROR unknown command\r\n", MC_REPLY_ERROR),
		.msg = "unknown command"},
	{OK_("CLIENT_ERROR", "CLIENT_ERROR bad data chunk\r\n", MC_REPLY_CLIENT_ERROR),
		.msg = "bad data chunk"},
	{OK_("CLIENT_ERROR empty", "CLIENT_ERROR\r\n", MC_REPLY_CLIENT_ERROR)},
	{OK_("SERVER_ERROR", "SERVER_ERROR object too large for cache\r\n", MC_REPLY_SERVER_ERROR),
		.msg = "object too large for cache"},
	{OK_("STAT", "STAT pid 4453\r\n", MC_REPLY_STAT),
		.msg = "pid",
		.stat_value = "4453"},
	{OK_("STAT slab row", "STAT 1:chunk_size 96\r\n", MC_REPLY_STAT),
		.msg = "1:chunk_size",
		.stat_value = "96"},
	{OK_("STAT items row", "STAT items:1:number_hot 0\r\n", MC_REPLY_STAT),
		.msg = "items:1:number_hot",
		.stat_value = "0"},
	{OK_("STAT value with spaces", "STAT ssl_chain_cert (null) x\r\n", MC_REPLY_STAT),
		.msg = "ssl_chain_cert",
		.stat_value = "(null) x"},
	{OK_("STAT empty value", "STAT x \r\n", MC_REPLY_STAT),
		.msg = "x",
		.stat_value = ""},

	/* refused */
	{BAD_("junk after digits in f", "VA 1 f12x\r\nz\r\n")},
	{BAD_("junk after digits in size", "VA 1x\r\nz\r\n")},
	{BAD_("junk after digits in c", "HD c5-\r\n")},
	{BAD_("junk after digits in t", "HD t1.5\r\n")},
	{BAD_("junk after digits in s", "VA 1 s1s\r\nz\r\n")},
	{BAD_("f without digits", "VA 1 f\r\nz\r\n")},
	{BAD_("t minus only", "HD t-\r\n")},
	{BAD_("c negative", "HD c-1\r\n")},
	{BAD_("f plus sign", "HD f+1\r\n")},
	{BAD_("b with junk", "VA 1 bx kfoo\r\nz\r\n")},
	{BAD_("W with junk", "VA 1 Wz\r\nz\r\n")},
	{BAD_("flags overflow u32", "VA 1 f4294967296\r\nz\r\n")},
	{BAD_("cas overflow u64", "HD c18446744073709551616\r\n")},
	{BAD_("cas way too long", "HD c99999999999999999999999\r\n")},
	{BAD_("ttl overflow", "HD t9223372036854775808\r\n")},
	{BAD_("ttl underflow", "HD t-9223372036854775809\r\n")},
	{BAD_("size over 2^31", "VA 2147483649\r\n")},
	{BAD_("size overflow u64", "VA 18446744073709551616\r\n")},
	{BAD_("size negative", "VA -1\r\n")},
	{BAD_("size missing", "VA\r\n")},
	{BAD_("size empty", "VA \r\n")},
	{BAD_("size then junk flag spacing", "VA 1kfoo\r\nz\r\n")},
	{BAD_("data not followed by CRLF", "VA 2\r\nabXY")},
	{BAD_("data too long", "VA 2\r\nabc\r\n")},
	{BAD_("data followed by LF CR", "VA 2\r\nab\n\r")},
	{BAD_("lone LF", "HD\n")},
	{BAD_("lone LF in VA", "VA 1 f0\nz\r\n")},
	{BAD_("just LF", "\n")},
	{BAD_("lone LF after error text", "ERROR x\n")},
	{BAD_("lone LF after CLIENT_ERROR text", "CLIENT_ERROR bad\n")},
	{BAD_("lone LF after STAT value", "STAT a b\n")},
	{BAD_("lone LF after END", "END\n")},
	{BAD_("empty line", "\r\n")},
	{BAD_("CR inside the line", "HD\rX\r\n")},
	{BAD_("control byte in key", "VA 1 kfo\to\r\nz\r\n")},
	{BAD_("NUL in key", "VA 1 kfo\0o\r\nz\r\n")},
	{BAD_("text protocol VALUE", "VALUE foo 0 1\r\nz\r\nEND\r\n")},
	{BAD_("lower case", "hd\r\n")},
	{BAD_("HD glued to junk", "HDX\r\n")},
	{BAD_("END with junk", "ENDX\r\n")},
	{BAD_("END with space", "END \r\n")},
	{BAD_("ERROR glued to junk", "ERRORS\r\n")},
	{BAD_("STAT without name", "STAT  x\r\n")},
	{BAD_("STAT bare", "STAT\r\n")},
	{BAD_("unknown code", "XX\r\n")},
	{BAD_("RESET (stats reset) is not ours", "RESET\r\n")},
	{BAD_("VERSION is not ours", "VERSION 1.6.18\r\n")},
	{BAD_("single letter", "H\r\n")},
};

/*
 * One shape: the whole buffer, the buffer with more replies after it (the
 * parser must stop at the reply's end), every prefix, and a reader that only
 * ever asks for r.need more bytes.
 */
static void
check_shape(const Shape *sh)
{
	McReply		r;
	McReply		r2;
	McReplyType t;
	char	   *big;
	size_t		k;
	bool		ok;
	const char *filler = "MN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\n"
		"MN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\nMN\r\n";
	size_t		flen = strlen(filler);

	t = parse_exact(sh->in, sh->inlen, &r);
	if (sh->type == MC_REPLY_BAD)
	{
		ok = (t == MC_REPLY_BAD && r.type == MC_REPLY_BAD && r.consumed == 0 &&
			  r.need == 0 && r.present == 0 && r.key_len == 0);
	}
	else
	{
		size_t		vl = sh->value ? strlen(sh->value) : 0;

		/* a few shapes carry NULs or CRLF in the value: use sizes */
		ok = (t == sh->type && r.type == sh->type && r.consumed == sh->inlen &&
			  r.need == 0 && r.present == sh->present &&
			  r.client_flags == sh->flags && r.cas == sh->cas &&
			  r.ttl == sh->ttl && r.size == sh->size &&
			  span_is(sh->in, r.key_off, r.key_len, sh->key,
					  sh->key ? strlen(sh->key) : 0) &&
			  span_is(sh->in, r.opaque_off, r.opaque_len, sh->opaque,
					  sh->opaque ? strlen(sh->opaque) : 0));
		if (sh->type == MC_REPLY_VA)
			ok = ok && r.value_len == vl &&
				memcmp(sh->in + r.value_off, sh->value, vl) == 0 &&
				r.header_len == r.value_off &&
				r.consumed == r.value_off + vl + 2;
		else
			ok = ok && r.value_off == 0 && r.value_len == 0 &&
				r.header_len == r.consumed;
		if (sh->type == MC_REPLY_STAT)
			ok = ok && span_is(sh->in, r.msg_off, r.msg_len, sh->msg, strlen(sh->msg)) &&
				(r.stat_value_len == strlen(sh->stat_value)) &&
				memcmp(sh->in + r.stat_value_off, sh->stat_value, r.stat_value_len) == 0;
		else if (sh->msg != NULL)
			ok = ok && span_is(sh->in, r.msg_off, r.msg_len, sh->msg, strlen(sh->msg)) &&
				r.stat_value_len == 0;
		else
			ok = ok && r.msg_off == 0 && r.msg_len == 0 && r.stat_value_len == 0;
	}
	tap_ok(ok, "shape \"%s\": whole buffer", sh->name);

	/* followed by more replies: same answer */
	big = malloc(sh->inlen + flen);
	memcpy(big, sh->in, sh->inlen);
	memcpy(big + sh->inlen, filler, flen);
	t = mc_parse_reply(big, sh->inlen + flen, &r2);
	if (sh->type == MC_REPLY_BAD)
		tap_ok(t == MC_REPLY_BAD, "shape \"%s\": still BAD with more data after", sh->name);
	else
		tap_ok(reply_equal(&r, &r2), "shape \"%s\": same result with more data after", sh->name);
	free(big);

	/* every prefix */
	ok = true;
	for (k = 0; k < sh->inlen && ok; k++)
	{
		t = parse_exact(sh->in, k, &r2);
		if (sh->type == MC_REPLY_BAD)
		{
			ok = (t == MC_REPLY_NEED_MORE && r2.need >= 1) || t == MC_REPLY_BAD;
			continue;
		}
		ok = (t == MC_REPLY_NEED_MORE && r2.need >= 1 && k + r2.need <= r.consumed);
		/* once a VA header is in, need is exact and the header is filled */
		if (ok && sh->type == MC_REPLY_VA && k >= r.header_len)
			ok = (r2.need == r.consumed - k && r2.header_len == r.header_len &&
				  r2.value_off == r.value_off && r2.value_len == r.value_len &&
				  r2.present == r.present && r2.key_off == r.key_off &&
				  r2.key_len == r.key_len && r2.client_flags == r.client_flags &&
				  r2.consumed == 0);
		else if (ok)
			ok = (r2.header_len == 0 && r2.present == 0 && r2.consumed == 0);
		if (!ok)
			tap_diag("prefix %zu of \"%s\": type %d need %zu", k, sh->name, (int) t, r2.need);
	}
	tap_ok(ok, "shape \"%s\": every prefix is NEED_MORE%s", sh->name,
		   sh->type == MC_REPLY_BAD ? " or BAD" : " with a sound need");

	/* a reader that reads exactly what it is told is missing */
	if (sh->type != MC_REPLY_BAD)
	{
		size_t		have = 0;
		int			rounds = 0;

		for (;;)
		{
			t = parse_exact(sh->in, have, &r2);
			if (t != MC_REPLY_NEED_MORE || ++rounds > 10000)
				break;
			have += r2.need;
			if (have > sh->inlen)
				break;
		}
		tap_ok(have <= sh->inlen && reply_equal(&r, &r2),
			   "shape \"%s\": need-driven reader ends on the same reply (%d reads)",
			   sh->name, rounds + 1);
	}
}

/* ---------------------------------------------------------------------
 * Generated parser cases
 * --------------------------------------------------------------------- */

/* Each numeric flag with each kind of junk glued on, and bare flags too. */
static void
test_junk_after_digits(void)
{
	const char	letters[] = "fcst";
	const char	junk[] = "x-+./:ZkbO~\x7f\x80";
	const char	bare[] = "bWXZ";
	char		buf[64];
	McReply		r;
	int			n = 0;
	int			bad = 0;
	size_t		i;
	size_t		j;

	for (i = 0; i < L(letters); i++)
		for (j = 0; j < L(junk); j++)
		{
			int			len = snprintf(buf, sizeof(buf), "VA 1 %c12%c kfoo\r\nz\r\n",
									   letters[i], junk[j]);

			n++;
			if (parse_exact(buf, (size_t) len, &r) == MC_REPLY_BAD)
				bad++;
			else
				tap_diag("not BAD: %s", buf);
			len = snprintf(buf, sizeof(buf), "HD %c7%c\r\n", letters[i], junk[j]);
			n++;
			if (parse_exact(buf, (size_t) len, &r) == MC_REPLY_BAD)
				bad++;
			else
				tap_diag("not BAD: %s", buf);
		}
	for (i = 0; i < L(bare); i++)
		for (j = 0; j < L(junk); j++)
		{
			int			len = snprintf(buf, sizeof(buf), "VA 1 kfoo %c%c\r\nz\r\n",
									   bare[i], junk[j]);

			n++;
			if (parse_exact(buf, (size_t) len, &r) == MC_REPLY_BAD)
				bad++;
		}
	tap_ok(bad == n, "junk after a known flag's argument is BAD (%d/%d cases)", bad, n);
}

/* Every byte value inside a key token: printable and high bytes pass. */
static void
test_key_bytes(void)
{
	char		buf[64];
	McReply		r;
	int			c;
	int			wrong = 0;

	for (c = 0; c < 256; c++)
	{
		int			len = snprintf(buf, sizeof(buf), "VA 1 ka%cb f3\r\nz\r\n", 'Q');
		McReplyType t;
		McReplyType want;

		buf[7] = (char) c;		/* replaces the Q */
		(void) len;
		t = parse_exact(buf, (size_t) len, &r);
		if (c == ' ')
			want = MC_REPLY_VA; /* "ka" then a junk token "b": skipped */
		else if (c <= 0x20)
			want = MC_REPLY_BAD;
		else
			want = MC_REPLY_VA;
		if (t != want)
		{
			wrong++;
			tap_diag("key byte 0x%02x: type %d, want %d", c, (int) t, (int) want);
		}
		else if (want == MC_REPLY_VA && c != ' ' &&
				 (r.key_len != 3 || (unsigned char) buf[r.key_off + 1] != c ||
				  r.client_flags != 3))
			wrong++;
	}
	tap_ok(wrong == 0, "every byte value in a key token: <= 0x20 BAD (space splits), others kept");
}

/* The header-length limit, counted with the CRLF. */
static void
test_line_limit(void)
{
	char	   *buf = malloc(MC_REPLY_LINE_MAX + 16);
	McReply		r;
	size_t		n;

	/* "HD " + junk token + CRLF, exactly MC_REPLY_LINE_MAX bytes */
	memcpy(buf, "HD ", 3);
	memset(buf + 3, 'z', MC_REPLY_LINE_MAX - 5);
	memcpy(buf + MC_REPLY_LINE_MAX - 2, "\r\n", 2);
	tap_ok(parse_exact(buf, MC_REPLY_LINE_MAX, &r) == MC_REPLY_HD &&
		   r.consumed == MC_REPLY_LINE_MAX,
		   "header of exactly MC_REPLY_LINE_MAX bytes is accepted");

	memcpy(buf, "HD ", 3);
	memset(buf + 3, 'z', MC_REPLY_LINE_MAX - 4);
	memcpy(buf + MC_REPLY_LINE_MAX - 1, "\r\n", 2);
	tap_ok(parse_exact(buf, MC_REPLY_LINE_MAX + 1, &r) == MC_REPLY_BAD,
		   "header of MC_REPLY_LINE_MAX + 1 bytes is BAD");

	memset(buf + 3, 'z', MC_REPLY_LINE_MAX + 10);
	n = MC_REPLY_LINE_MAX - 1;
	tap_ok(parse_exact(buf, n, &r) == MC_REPLY_NEED_MORE && r.need == 2,
		   "%zu bytes without LF: NEED_MORE", n);
	tap_ok(parse_exact(buf, MC_REPLY_LINE_MAX, &r) == MC_REPLY_BAD,
		   "MC_REPLY_LINE_MAX bytes without LF: BAD");
	tap_ok(parse_exact(buf, MC_REPLY_LINE_MAX + 10, &r) == MC_REPLY_BAD,
		   "more than MC_REPLY_LINE_MAX bytes without LF: BAD");
	buf[5] = '\r';
	tap_ok(parse_exact(buf, 6, &r) == MC_REPLY_NEED_MORE && r.need == 1,
		   "partial header ending in CR needs 1 byte");
	tap_ok(parse_exact("XY", 2, &r) == MC_REPLY_BAD &&
		   parse_exact("Q", 1, &r) == MC_REPLY_BAD &&
		   parse_exact("", 0, &r) == MC_REPLY_NEED_MORE && r.need == 2 &&
		   parse_exact("V", 1, &r) == MC_REPLY_NEED_MORE,
		   "garbage is BAD as soon as two bytes are in");
	free(buf);
}

/* Largest VA size: header complete, need counts the whole value. */
static void
test_va_size_limit(void)
{
	McReply		r;
	const char	in[] = "VA 2147483648 kbig\r\nab";

	tap_ok(parse_exact(in, L(in), &r) == MC_REPLY_NEED_MORE &&
		   r.value_len == UINT64_C(2147483648) && r.header_len == L(in) - 2 &&
		   r.need == UINT64_C(2147483648) + 2 - 2 && r.key_len == 3,
		   "VA 2^31: NEED_MORE with the exact remaining size");
}

/* ---------------------------------------------------------------------
 * Round trip: random replies rendered, then parsed
 * --------------------------------------------------------------------- */

typedef struct Model
{
	McReplyType type;
	unsigned	present;
	uint32_t	flags;
	uint64_t	cas;
	int64_t		ttl;
	uint64_t	size;
	char		key[251];
	size_t		keylen;
	char		opaque[32];
	size_t		opaquelen;
	char		value[400];
	size_t		valuelen;
	char		msg[64];
	size_t		msglen;
	char		statv[32];
	size_t		statvlen;
} Model;

static void
rnd_token(char *dst, size_t len, bool b64ish)
{
	static const char b64c[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t		i;

	for (i = 0; i < len; i++)
		dst[i] = b64ish ? b64c[rnd_below(64)] : (char) (0x21 + rnd_below(0x7e - 0x21 + 1));
}

/* A random u64 biased towards short numbers and the edges. */
static uint64_t
rnd_num(void)
{
	switch (rnd_below(5))
	{
		case 0:
			return rnd_below(10);
		case 1:
			return rnd_below(100000);
		case 2:
			return UINT64_MAX - rnd_below(3);
		default:
			return rnd() >> rnd_below(64);
	}
}

/* Append a random flag token (maybe a repeat) and update the model. */
static size_t
render_flag(char *d, Model *m)
{
	char	   *start = d;
	unsigned	bit;
	int			which = (int) rnd_below(11);

	*d++ = ' ';
	switch (which)
	{
		case 0:
			{
				uint32_t	v = (uint32_t) rnd_num();

				bit = MC_F_FLAGS;
				d += sprintf(d, "f%u", v);
				if (!(m->present & bit))
					m->flags = v;
				break;
			}
		case 1:
			{
				uint64_t	v = rnd_num();

				bit = MC_F_CAS;
				d += sprintf(d, "c%llu", (unsigned long long) v);
				if (!(m->present & bit))
					m->cas = v;
				break;
			}
		case 2:
			{
				int64_t		v = (int64_t) rnd_num();

				if (rnd_below(4) == 0)
					v = -1;
				bit = MC_F_TTL;
				d += sprintf(d, "t%lld", (long long) v);
				if (!(m->present & bit))
					m->ttl = v;
				break;
			}
		case 3:
			{
				uint64_t	v = rnd_num();

				bit = MC_F_SIZE;
				d += sprintf(d, "s%llu", (unsigned long long) v);
				if (!(m->present & bit))
					m->size = v;
				break;
			}
		case 4:
		case 5:
			{
				size_t		n = rnd_below(4) == 0 ? rnd_below(251) : 1 + rnd_below(40);
				char		tmp[251];

				bit = MC_F_KEY;
				rnd_token(tmp, n, rnd_below(2));
				*d++ = 'k';
				memcpy(d, tmp, n);
				d += n;
				if (!(m->present & bit))
				{
					memcpy(m->key, tmp, n);
					m->keylen = n;
				}
				break;
			}
		case 6:
			{
				size_t		n = rnd_below(32);
				char		tmp[32];

				bit = MC_F_OPAQUE;
				rnd_token(tmp, n, false);
				*d++ = 'O';
				memcpy(d, tmp, n);
				d += n;
				if (!(m->present & bit))
				{
					memcpy(m->opaque, tmp, n);
					m->opaquelen = n;
				}
				break;
			}
		case 7:
			bit = MC_F_B64;
			*d++ = 'b';
			break;
		case 8:
			{
				static const char wxz[] = "WXZ";
				static const unsigned bits[] = {MC_F_WIN, MC_F_STALE, MC_F_WON};
				int			i = (int) rnd_below(3);

				bit = bits[i];
				*d++ = wxz[i];
				break;
			}
		default:
			{
				/* unknown flag: letters the parser does not know, any token */
				static const char unk[] = "hlaxyzQRP~9";
				size_t		n = rnd_below(12);

				bit = 0;
				*d++ = unk[rnd_below(L(unk))];
				rnd_token(d, n, false);
				/* must not be mistaken for nothing: keep it <= 0x20-free */
				d += n;
				break;
			}
	}
	m->present |= bit;
	return (size_t) (d - start);
}

/* Render a random reply; returns its length, fills the model. */
static size_t
render_reply(char *d, Model *m)
{
	static const McReplyType flagged[] = {
		MC_REPLY_VA, MC_REPLY_VA, MC_REPLY_VA, MC_REPLY_HD, MC_REPLY_EN,
		MC_REPLY_NS, MC_REPLY_EX, MC_REPLY_NF, MC_REPLY_MN
	};
	static const char *codes[] = {"VA", "VA", "VA", "HD", "EN", "NS", "EX", "NF", "MN"};
	char	   *start = d;
	int			pick = (int) rnd_below(13);
	int			nflags;
	int			i;

	memset(m, 0, sizeof(*m));
	if (pick >= 9)
	{
		/* text replies */
		switch (pick)
		{
			case 9:
				m->type = MC_REPLY_STAT;
				m->msglen = 1 + rnd_below(30);
				rnd_token(m->msg, m->msglen, false);
				m->statvlen = rnd_below(20);
				rnd_token(m->statv, m->statvlen, false);
				if (m->statvlen > 2)
					m->statv[1] = ' ';
				d += sprintf(d, "STAT ");
				memcpy(d, m->msg, m->msglen);
				d += m->msglen;
				*d++ = ' ';
				memcpy(d, m->statv, m->statvlen);
				d += m->statvlen;
				break;
			case 10:
				m->type = MC_REPLY_END;
				d += sprintf(d, "END");
				break;
			case 11:
				m->type = rnd_below(2) ? MC_REPLY_CLIENT_ERROR : MC_REPLY_SERVER_ERROR;
				d += sprintf(d, m->type == MC_REPLY_CLIENT_ERROR ? "CLIENT_ERROR" : "SERVER_ERROR");
				m->msglen = rnd_below(40);
				rnd_token(m->msg, m->msglen, false);
				if (m->msglen > 3)
					m->msg[2] = ' ';
				if (m->msglen > 0 || rnd_below(2))
				{
					*d++ = ' ';
					memcpy(d, m->msg, m->msglen);
					d += m->msglen;
				}
				break;
			default:
				m->type = MC_REPLY_ERROR;
				d += sprintf(d, "ERROR");
				break;
		}
		memcpy(d, "\r\n", 2);
		return (size_t) (d + 2 - start);
	}

	m->type = flagged[pick];
	memcpy(d, codes[pick], 2);
	d += 2;
	if (m->type == MC_REPLY_VA)
	{
		size_t		j;

		m->valuelen = rnd_below(4) == 0 ? 0 : rnd_below(sizeof(m->value));
		for (j = 0; j < m->valuelen; j++)
			m->value[j] = rnd_below(5) == 0 ? "\r\n \0"[rnd_below(4)] : (char) rnd();
		d += sprintf(d, " %zu", m->valuelen);
	}
	nflags = (int) rnd_below(8);
	for (i = 0; i < nflags; i++)
		d += render_flag(d, m);
	memcpy(d, "\r\n", 2);
	d += 2;
	if (m->type == MC_REPLY_VA)
	{
		memcpy(d, m->value, m->valuelen);
		d += m->valuelen;
		memcpy(d, "\r\n", 2);
		d += 2;
	}
	return (size_t) (d - start);
}

/* Compare a parsed reply with the model it came from. */
static bool
matches_model(const char *buf, const McReply *r, const Model *m, size_t len)
{
	bool		ok;

	ok = r->type == m->type && r->consumed == len && r->need == 0 &&
		r->present == m->present && r->client_flags == m->flags &&
		r->cas == m->cas && r->ttl == m->ttl && r->size == m->size &&
		r->key_len == m->keylen && r->opaque_len == m->opaquelen &&
		memcmp(buf + r->key_off, m->key, m->keylen) == 0 &&
		memcmp(buf + r->opaque_off, m->opaque, m->opaquelen) == 0 &&
		r->msg_len == m->msglen &&
		memcmp(buf + r->msg_off, m->msg, m->msglen) == 0 &&
		r->stat_value_len == m->statvlen &&
		memcmp(buf + r->stat_value_off, m->statv, m->statvlen) == 0;
	if (m->type == MC_REPLY_VA)
		ok = ok && r->value_len == m->valuelen &&
			memcmp(buf + r->value_off, m->value, m->valuelen) == 0;
	else
		ok = ok && r->value_len == 0 && r->header_len == len;
	if (!(m->present & MC_F_KEY))
		ok = ok && r->key_off == 0;
	return ok;
}

#define STREAM_MAX 64

/*
 * Random replies, one at a time and as pipelined streams read in random
 * chunks; the stream reader is the loop a caller would write.
 */
static void
test_round_trip(int n)
{
	static char buf[STREAM_MAX * 4096];	/* a reply is < 2.5 kB */
	static Model models[STREAM_MAX];
	static size_t lens[STREAM_MAX];
	McReply		r;
	int			i;
	int			bad_single = 0;
	int			bad_stream = 0;
	int			bad_prefix = 0;
	int			streams = 0;
	int			replies = 0;

	for (i = 0; i < n; i++)
	{
		size_t		len = render_reply(buf, &models[0]);
		size_t		k;

		if (parse_exact(buf, len, &r) != models[0].type ||
			!matches_model(buf, &r, &models[0], len))
		{
			if (bad_single++ < 5)
				tap_diag("round trip %d failed: %.*s", i, (int) (len < 200 ? len : 200), buf);
		}
		/* a few random prefixes of each */
		for (k = 0; k < 3 && len > 1; k++)
		{
			size_t		cut = rnd_below(len);

			if (parse_exact(buf, cut, &r) != MC_REPLY_NEED_MORE || r.need < 1 ||
				cut + r.need > len)
				bad_prefix++;
		}
	}
	tap_ok(bad_single == 0, "round trip: %d random replies parse back to their model", n);
	tap_ok(bad_prefix == 0, "round trip: random prefixes of them are NEED_MORE with need inside the reply");

	for (i = 0; i < n / 20; i++)
	{
		int			count = 1 + (int) rnd_below(STREAM_MAX);
		size_t		total = 0;
		size_t		have = 0;
		size_t		off = 0;
		int			j;
		int			next = 0;
		int			guard = 0;

		for (j = 0; j < count; j++)
		{
			lens[j] = render_reply(buf + total, &models[j]);
			total += lens[j];
		}
		streams++;
		/* read in random chunks, parse whatever is complete */
		while (next < count && guard++ < 100000)
		{
			McReplyType t = mc_parse_reply(buf + off, have - off, &r);

			if (t == MC_REPLY_NEED_MORE)
			{
				size_t		chunk = 1 + rnd_below(300);

				if (have == total)
				{
					bad_stream++;
					break;
				}
				have += chunk;
				if (have > total)
					have = total;
				continue;
			}
			if (!matches_model(buf + off, &r, &models[next], lens[next]))
			{
				bad_stream++;
				break;
			}
			off += r.consumed;
			next++;
			replies++;
		}
		if (next != count)
			bad_stream++;
	}
	tap_ok(bad_stream == 0, "round trip: %d pipelined streams (%d replies) read in random chunks",
		   streams, replies);
}

/* Random bytes and mutations of valid replies never crash or overrun. */
static void
test_garbage(int n)
{
	static char buf[4096];
	McReply		r;
	Model		m;
	int			i;
	int			bad = 0;

	for (i = 0; i < n; i++)
	{
		size_t		len = render_reply(buf, &m);
		int			muts = 1 + (int) rnd_below(4);
		McReplyType t;

		while (muts-- > 0 && len > 0)
			buf[rnd_below(len)] = rnd_below(2) ? (char) rnd() : "\r\n 0-9fkbVA"[rnd_below(11)];
		t = parse_exact(buf, len, &r);
		if (t == MC_REPLY_NEED_MORE ? r.need < 1 : (t != MC_REPLY_BAD && r.consumed > len))
			bad++;
		if (t != MC_REPLY_NEED_MORE && t != MC_REPLY_BAD &&
			(r.key_off + r.key_len > len || r.value_off + r.value_len > len ||
			 r.opaque_off + r.opaque_len > len || r.msg_off + r.msg_len > len ||
			 r.stat_value_off + r.stat_value_len > len))
			bad++;
	}
	tap_ok(bad == 0, "%d mutated replies: invariants hold (need >= 1, spans inside the buffer)", n);
}

/* ---------------------------------------------------------------------
 * Encoders
 * --------------------------------------------------------------------- */

/* Compare encoder output with the exact expected bytes. */
static void
expect_bytes(const char *name, const char *got, size_t gotlen, const char *want)
{
	bool		ok = gotlen == strlen(want) && memcmp(got, want, gotlen) == 0;

	if (!ok)
		tap_diag("got \"%.*s\" (%zu), want \"%s\"", (int) gotlen, got, gotlen, want);
	tap_ok(ok, "encode %s", name);
}

static void
test_encoders(void)
{
	char		dst[MC_REQ_HEADER_MAX + 64];
	McReqOpts	o;
	size_t		n;
	char		key[MC_KEY_MAX];
	char		opq[32];
	size_t		i;

	n = mc_encode_noop(dst);
	expect_bytes("noop", dst, n, "mn\r\n");

	n = mc_encode_request(dst, "mg", "foo", 3, false, -1, NULL);
	expect_bytes("mg, NULL opts", dst, n, "mg foo\r\n");

	memset(&o, 0, sizeof(o));
	o.want = MC_F_VALUE | MC_F_FLAGS | MC_F_KEY | MC_F_CAS | MC_F_TTL | MC_F_SIZE;
	n = mc_encode_request(dst, "mg", "foo", 3, false, -1, &o);
	expect_bytes("mg all return flags", dst, n, "mg foo v f k c t s\r\n");

	o.has_ttl = true;
	o.ttl = 30;
	o.quiet = true;
	o.opaque = "op1";
	o.opaque_len = 3;
	n = mc_encode_request(dst, "mg", "Zm9v", 4, true, -1, &o);
	expect_bytes("mg gat b64 O q", dst, n, "mg Zm9v b T30 v f k c t s Oop1 q\r\n");

	memset(&o, 0, sizeof(o));
	o.has_vivify_ttl = true;
	o.vivify_ttl = 30;
	o.want = MC_F_VALUE | MC_F_TTL;
	n = mc_encode_request(dst, "mg", "lease", 5, false, -1, &o);
	expect_bytes("mg lease N", dst, n, "mg lease N30 v t\r\n");

	memset(&o, 0, sizeof(o));
	o.has_ttl = true;
	o.ttl = 0;
	o.has_client_flags = true;
	o.client_flags = 5;
	n = mc_encode_request(dst, "ms", "foo", 3, false, 3, &o);
	expect_bytes("ms T0 F5", dst, n, "ms foo 3 T0 F5\r\n");

	memset(&o, 0, sizeof(o));
	o.has_ttl = true;
	o.ttl = -1;
	o.has_cas = true;
	o.cas = UINT64_MAX;
	o.has_client_flags = true;
	o.client_flags = UINT32_MAX;
	o.mode = 'E';
	o.invalidate = true;
	o.quiet = true;
	o.want = MC_F_KEY | MC_F_CAS;
	o.opaque = "9";
	o.opaque_len = 1;
	n = mc_encode_request(dst, "ms", "Zm9vIGJhcg==", 12, true, 0, &o);
	expect_bytes("ms every option", dst, n,
				 "ms Zm9vIGJhcg== 0 b T-1 C18446744073709551615 F4294967295 ME I k c O9 q\r\n");

	memset(&o, 0, sizeof(o));
	o.mode = 'A';
	n = mc_encode_request(dst, "ms", "x", 1, false, 1048576, &o);
	expect_bytes("ms append", dst, n, "ms x 1048576 MA\r\n");

	memset(&o, 0, sizeof(o));
	o.quiet = true;
	o.has_cas = true;
	o.cas = 7;
	o.invalidate = true;
	o.has_ttl = true;
	o.ttl = 30;
	n = mc_encode_request(dst, "md", "foo", 3, false, -1, &o);
	expect_bytes("md q C I T", dst, n, "md foo T30 C7 I q\r\n");

	/* the batch writer's pipelined forms (batch.c): quiet, matched by O */
	memset(&o, 0, sizeof(o));
	o.quiet = true;
	o.opaque = "12";
	o.opaque_len = 2;
	n = mc_encode_request(dst, "md", "foo", 3, false, -1, &o);
	expect_bytes("md O q", dst, n, "md foo O12 q\r\n");
	o.has_ttl = true;
	o.ttl = 60;
	n = mc_encode_request(dst, "mg", "foo", 3, false, -1, &o);
	expect_bytes("mg T O q (touch)", dst, n, "mg foo T60 O12 q\r\n");
	o.has_client_flags = true;
	o.client_flags = 3;
	n = mc_encode_request(dst, "ms", "foo", 3, false, 5, &o);
	expect_bytes("ms T F O q", dst, n, "ms foo 5 T60 F3 O12 q\r\n");

	memset(&o, 0, sizeof(o));
	o.mode = 'D';
	o.has_delta = true;
	o.delta = 2;
	o.want = MC_F_VALUE;
	n = mc_encode_request(dst, "ma", "c1", 2, false, -1, &o);
	expect_bytes("ma decr", dst, n, "ma c1 MD D2 v\r\n");

	memset(&o, 0, sizeof(o));
	o.has_vivify_ttl = true;
	o.vivify_ttl = 0;
	o.has_initial = true;
	o.initial = 10;
	o.has_delta = true;
	o.delta = UINT64_MAX;
	o.want = MC_F_VALUE | MC_F_CAS | MC_F_TTL;
	n = mc_encode_request(dst, "ma", "nope", 4, false, -1, &o);
	expect_bytes("ma autovivify", dst, n, "ma nope N0 D18446744073709551615 J10 v c t\r\n");

	memset(&o, 0, sizeof(o));
	o.has_ttl = true;
	o.ttl = INT64_MIN;
	n = mc_encode_request(dst, "mg", "t", 1, false, -1, &o);
	expect_bytes("mg T INT64_MIN", dst, n, "mg t T-9223372036854775808\r\n");

	/* a lease: N and R before C, v f c; item metadata: s t h l c f, then u */
	memset(&o, 0, sizeof(o));
	o.want = MC_F_VALUE | MC_F_FLAGS | MC_F_CAS;
	o.has_vivify_ttl = o.has_recache_ttl = true;
	o.vivify_ttl = 30;
	o.recache_ttl = 5;
	n = mc_encode_request(dst, "mg", "lk", 2, false, -1, &o);
	expect_bytes("mg lease", dst, n, "mg lk N30 R5 v f c\r\n");
	memset(&o, 0, sizeof(o));
	o.want = MC_F_SIZE | MC_F_TTL | MC_F_HIT | MC_F_LAST | MC_F_CAS | MC_F_FLAGS;
	o.no_bump = true;
	n = mc_encode_request(dst, "mg", "m", 1, false, -1, &o);
	expect_bytes("mg metadata", dst, n, "mg m f c t s h l u\r\n");

	/* the worst case fits and nothing is written past MC_REQ_HEADER_MAX */
	memset(key, 'K', sizeof(key));
	memset(opq, 'O', sizeof(opq));
	memset(&o, 0, sizeof(o));
	o.want = ~0u;
	o.quiet = o.has_ttl = o.has_cas = o.has_client_flags = true;
	o.has_delta = o.has_initial = o.has_vivify_ttl = o.invalidate = true;
	o.has_recache_ttl = o.no_bump = true;
	o.ttl = INT64_MIN;
	o.vivify_ttl = INT64_MIN;
	o.recache_ttl = INT64_MIN;
	o.cas = o.delta = o.initial = UINT64_MAX;
	o.client_flags = UINT32_MAX;
	o.mode = 'S';
	o.opaque = opq;
	o.opaque_len = 31;
	memset(dst, 0x5a, sizeof(dst));
	n = mc_encode_request(dst, "ms", key, MC_KEY_MAX, true, 2147483647L, &o);
	for (i = MC_REQ_HEADER_MAX; i < sizeof(dst); i++)
		if (dst[i] != 0x5a)
			break;
	tap_ok(n > 0 && n <= MC_REQ_HEADER_MAX && i == sizeof(dst) &&
		   memcmp(dst + n - 2, "\r\n", 2) == 0,
		   "worst-case request is %zu bytes, within MC_REQ_HEADER_MAX", n);

	memset(&o, 0, sizeof(o));
	tap_ok(mc_encode_request(dst, "mget", "foo", 3, false, -1, &o) == 0 &&
		   mc_encode_request(dst, "", "foo", 3, false, -1, &o) == 0 &&
		   mc_encode_request(dst, "mg", key, MC_KEY_MAX + 1, false, -1, &o) == 0,
		   "encoder refuses a long command or key");
	o.opaque = opq;
	o.opaque_len = 32;
	tap_ok(mc_encode_request(dst, "mg", "foo", 3, false, -1, &o) == 0,
		   "encoder refuses a 32-byte opaque");
	o.opaque = NULL;
	o.mode = ' ';
	tap_ok(mc_encode_request(dst, "ms", "foo", 3, false, 1, &o) == 0,
		   "encoder refuses a non-printable mode");
}

/* ---------------------------------------------------------------------
 * Keys and base64
 * --------------------------------------------------------------------- */

/* Bit-by-bit reference: slow and obviously right. */
static size_t
ref_b64(const unsigned char *src, size_t len, char *dst)
{
	static const char a[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t		bits = len * 8;
	size_t		i;
	size_t		n = 0;

	for (i = 0; i < bits; i += 6)
	{
		int			v = 0;
		int			j;

		for (j = 0; j < 6; j++)
		{
			size_t		bit = i + (size_t) j;

			v <<= 1;
			if (bit < bits && (src[bit / 8] >> (7 - bit % 8)) & 1)
				v |= 1;
		}
		dst[n++] = a[v];
	}
	while (n % 4 != 0)
		dst[n++] = '=';
	return n;
}

static void
test_base64(void)
{
	static const char *vec[][2] = {
		{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
		{"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
		{"foo bar", "Zm9vIGJhcg=="}, {"caf\xc3\xa9", "Y2Fmw6k="},
	};
	char		enc[600];
	unsigned char src[400];
	size_t		i;
	size_t		n;
	int			bad = 0;

	for (i = 0; i < sizeof(vec) / sizeof(vec[0]); i++)
	{
		n = mc_b64_encode((const unsigned char *) vec[i][0], strlen(vec[i][0]), enc);
		tap_ok(n == strlen(vec[i][1]) && memcmp(enc, vec[i][1], n) == 0,
			   "base64 encode \"%s\" = \"%s\"", vec[i][0], vec[i][1]);
	}

	for (i = 0; i < 3000; i++)
	{
		size_t		len = rnd_below(sizeof(src));
		size_t		j;
		char		ref[600];
		size_t		rn;

		for (j = 0; j < len; j++)
			src[j] = (unsigned char) rnd();
		n = mc_b64_encode(src, len, enc);
		rn = ref_b64(src, len, ref);
		if (n != rn || memcmp(enc, ref, n) != 0)
			bad++;
	}
	tap_ok(bad == 0, "base64: 3000 random inputs agree with a bitwise reference");
}

/*
 * Which keys go raw and which base64, and where each kind becomes too long
 * (250 bytes on the wire, so 186 raw bytes once base64).
 */
static void
test_keys(void)
{
	char		key[400];
	char		wire[MC_KEY_MAX];
	bool		b64;
	McKeyStatus st;
	int			c;
	int			bad = 0;

	st = mc_key_check("", 0, &b64);
	tap_ok(st == MC_KEY_EMPTY && !b64, "empty key is MC_KEY_EMPTY");

	memset(key, 'a', sizeof(key));
	st = mc_key_check(key, 250, &b64);
	tap_ok(st == MC_KEY_OK && !b64, "250 printable bytes go raw");
	st = mc_key_check(key, 251, &b64);
	tap_ok(st == MC_KEY_TOO_LONG, "251 printable bytes: too long");

	memset(key, '\xe9', sizeof(key));
	st = mc_key_check(key, 186, &b64);
	tap_ok(st == MC_KEY_OK && b64 &&
		   mc_b64_encode((const unsigned char *) key, 186, wire) == 248,
		   "186 binary bytes: base64, 248 on the wire");
	st = mc_key_check(key, 187, &b64);
	tap_ok(st == MC_KEY_TOO_LONG, "187 binary bytes: too long");

	memset(key, 'a', sizeof(key));
	key[100] = ' ';
	st = mc_key_check(key, 186, &b64);
	tap_ok(st == MC_KEY_OK && b64, "186 bytes with one space: base64");
	st = mc_key_check(key, 200, &b64);
	tap_ok(st == MC_KEY_TOO_LONG, "200 printable bytes with one space: too long (needs base64)");

	/* every byte value in the middle of a key, and alone */
	for (c = 0; c < 256; c++)
	{
		bool		printable = (c >= 0x21 && c <= 0x7e);

		key[0] = 'a';
		key[1] = (char) c;
		key[2] = 'b';
		st = mc_key_check(key, 3, &b64);
		if (st != MC_KEY_OK || b64 == printable)
			bad++;
		st = mc_key_check(key + 1, 1, &b64);
		if (st != MC_KEY_OK || b64 == printable)
			bad++;
	}
	tap_ok(bad == 0, "every byte: 0x21..0x7e raw; controls, space, DEL, >= 0x80 base64");

	/* random keys of all lengths against the rule spelled out */
	bad = 0;
	for (int i = 0; i < 3000; i++)
	{
		size_t		len = (size_t) rnd_below(300);
		bool		need = false;
		McKeyStatus want;

		for (size_t j = 0; j < len; j++)
		{
			key[j] = (char) (rnd_below(10) ? 0x21 + rnd_below(94) : rnd_below(256));
			if ((unsigned char) key[j] <= 0x20 || (unsigned char) key[j] >= 0x7f)
				need = true;
		}
		want = len == 0 ? MC_KEY_EMPTY :
			len > (need ? MC_KEY_MAX_B64 : MC_KEY_MAX) ? MC_KEY_TOO_LONG : MC_KEY_OK;
		st = mc_key_check(key, len, &b64);
		if (st != want || (st == MC_KEY_OK && b64 != need))
			bad++;
	}
	tap_ok(bad == 0, "mc_key_check follows the raw/base64 rule on 3000 random keys");
}

/*
 * The replies the gets ask for ("VA <n> f<d> O<pos>", "VA <n> O<seq>") in the sizes and
 * widths that take the different branches of mc_parse_reply_z: 1..4-digit
 * sizes (one word) and longer ones (loop), one and many flag digits, an
 * opaque token that fits the eight-byte scan and one that does not, and
 * every truncation (each must be NEED_MORE, never a wrong VA).
 */
static void
test_opaque_shape(void)
{
	static const struct
	{
		const char *hdr;
		size_t		vlen;
		uint32_t	flags;
		const char *opaque;
	}			cases[] =
	{
		{"VA 0 f0 O0\r\n", 0, 0, "0"},
		{"VA 5 f0 O123\r\n", 5, 0, "123"},
		{"VA 100 f16 O99999\r\n", 100, 16, "99999"},
		{"VA 1024 f4294967295 O1234567\r\n", 1024, 4294967295u, "1234567"},
		{"VA 12345 f7 O12345678\r\n", 12345, 7, "12345678"},
		{"VA 10 f0 Oabc\r\n", 10, 0, "abc"},
		/* the single-key get's reply: no f */
		{"VA 3 O1\r\n", 3, 0, "1"},
		{"VA 100 O4294967295\r\n", 100, 0, "4294967295"},
		{"VA 12345 O1234567\r\n", 12345, 0, "1234567"},
		{"VA 0 O\r\n", 0, 0, ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		size_t		hl = strlen(cases[i].hdr);
		size_t		total = hl + cases[i].vlen + 2;
		char	   *buf = malloc(total + 1);
		McReply		r;
		McReply		z;
		bool		ok;
		bool		partial_ok = true;

		memcpy(buf, cases[i].hdr, hl);
		memset(buf + hl, 'v', cases[i].vlen);
		memcpy(buf + hl + cases[i].vlen, "\r\n", 2);
		buf[total] = '\0';
		ok = parse_exact(buf, total, &r) == MC_REPLY_VA &&
			mc_parse_reply_z(buf, total, &z) == MC_REPLY_VA &&
			z.consumed == total && z.value_len == cases[i].vlen &&
			z.value_off == hl && z.client_flags == cases[i].flags &&
			z.present == (strstr(cases[i].hdr, " f") ? MC_F_FLAGS | MC_F_OPAQUE : MC_F_OPAQUE) &&
			span_is(buf, z.opaque_off, z.opaque_len, cases[i].opaque,
					strlen(cases[i].opaque));
		for (size_t cut = 0; cut < total; cut++)
		{
			char		save = buf[cut];

			buf[cut] = '\0';
			if (mc_parse_reply_z(buf, cut, &z) != MC_REPLY_NEED_MORE)
				partial_ok = false;
			buf[cut] = save;
			(void) parse_exact(buf, cut, &r);
		}
		tap_ok(ok && partial_ok, "opaque shape %zu: \"%.*s\" parses, every prefix needs more",
			   i, (int) (hl - 2), cases[i].hdr);
		free(buf);
	}
}

/* The multi-get's request line, byte for byte. */
static void
test_encode_get_opaque(void)
{
	char		dst[MC_REQ_HEADER_MAX];
	char		want[64];
	size_t		n;
	McTag		tag;
	McTag		big;

	mc_tag_make(&tag, 52);		/* "ab" */
	n = mc_encode_get_opaque(dst, "user:1", 6, false, true, &tag, 0);
	tap_ok(n == 22 && memcmp(dst, "mg user:1 v f Oab0 q\r\n", n) == 0,
		   "encode_get_opaque: plain key, flags, position 0");
	n = mc_encode_get_opaque(dst, "YSBi", 4, true, true, &tag, 4294967295u);
	tap_ok(n == 31 && memcmp(dst, "mg YSBi b v f Oab4294967295 q\r\n", n) == 0,
		   "encode_get_opaque: base64 key, largest position");
	n = mc_encode_get_opaque(dst, "k", 1, false, false, &tag, 12345);
	tap_ok(n == 19 && memcmp(dst, "mg k v Oab12345 q\r\n", n) == 0,
		   "encode_get_opaque: without flags");
	n = mc_encode_get_opaque(dst, "k", 1, false, true, &tag, 42);
	tap_ok(n == 18 && memcmp(dst, "mg k v f Oab42 q\r\n", n) == 0,
		   "encode_get_opaque: two-digit position");
	mc_tag_make(&big, UINT32_MAX);
	n = mc_encode_get_opaque(dst, "k", 1, false, true, &big, 7);
	snprintf(want, sizeof(want), "mg k v f O%s7 q\r\n", big.text);
	tap_ok(n == strlen(want) && memcmp(dst, want, n) == 0,
		   "encode_get_opaque: the longest tag (%s)", big.text);
	tap_ok(mc_encode_get_opaque(dst, "k", MC_KEY_MAX + 1, false, true, &tag, 1) == 0,
		   "encode_get_opaque: refuses an over-long key");
}

/* mc_tag_make, mc_tag_token: letters only, distinct, short. */
static void
test_tag(void)
{
	static const struct
	{
		uint32_t	seq;
		const char *text;
	}			cases[] = {
		{0, "a"}, {1, "b"}, {25, "z"}, {26, "A"}, {51, "Z"}, {52, "ab"},
		{53, "bb"}, {52 * 52, "aab"}, {380204031u, "ZZZZZ"}, {380204032u, "aaaaab"},
	};
	McTag		tag;
	char		tok[MC_TAG_MAX + 10];
	size_t		n;
	bool		letters = true;
	bool		distinct = true;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		mc_tag_make(&tag, cases[i].seq);
		tap_ok(tag.len == strlen(cases[i].text) && strcmp(tag.text, cases[i].text) == 0,
			   "tag of %u: %s (%s)", cases[i].seq, cases[i].text, tag.text);
	}
	mc_tag_make(&tag, UINT32_MAX);
	tap_ok(tag.len == MC_TAG_MAX, "the largest sequence number's tag has MC_TAG_MAX letters");
	/* every tag of a range is letters, and no two are alike */
	for (uint32_t seq = 0; seq < 3000; seq++)
	{
		McTag		other;

		mc_tag_make(&tag, seq);
		mc_tag_make(&other, seq + 1);
		for (uint32_t i = 0; i < tag.len; i++)
			letters &= (tag.text[i] >= 'a' && tag.text[i] <= 'z') ||
				(tag.text[i] >= 'A' && tag.text[i] <= 'Z');
		distinct &= !(tag.len == other.len && memcmp(tag.text, other.text, tag.len) == 0);
	}
	tap_ok(letters, "tags are letters only (never read as a single-key call's decimal token)");
	tap_ok(distinct, "consecutive sequence numbers give distinct tags");
	mc_tag_make(&tag, 52);
	n = mc_tag_token(&tag, 0, tok);
	tap_ok(n == 3 && memcmp(tok, "ab0", 3) == 0, "tag_token: ab0");
	n = mc_tag_token(&tag, 4294967295u, tok);
	tap_ok(n == 12 && memcmp(tok, "ab4294967295", 12) == 0, "tag_token: largest position");
}

/* The plain get's fast encoder writes what the generic one writes. */
static void
test_encode_get_value(void)
{
	char		a[MC_REQ_HEADER_MAX];
	char		b[MC_REQ_HEADER_MAX];
	McReqOpts	o = {0};
	int			bad = 0;

	o.want = MC_F_VALUE;
	for (int i = 0; i < 500; i++)
	{
		char		key[MC_KEY_MAX];
		size_t		len = 1 + (size_t) rnd_below(MC_KEY_MAX);
		bool		b64 = (i % 3) == 0;
		size_t		na;
		size_t		nb;

		for (size_t j = 0; j < len; j++)
			key[j] = (char) (0x21 + rnd_below(94));
		uint32_t	opq = (uint32_t) rnd_below(1000000) * (uint32_t) (i + 1);
		char		otxt[16];

		o.opaque_len = (size_t) snprintf(otxt, sizeof(otxt), "%u", (unsigned) opq);
		o.opaque = otxt;
		na = mc_encode_get_value(a, key, len, b64, opq);
		nb = mc_encode_request(b, "mg", key, len, b64, -1, &o);
		if (na != nb || memcmp(a, b, na) != 0)
			bad++;
	}
	tap_ok(bad == 0, "encode_get_value equals mc_encode_request(\"mg\", v, O) on 500 keys");
	tap_ok(mc_encode_get_value(a, "k", MC_KEY_MAX + 1, false, 1) == 0,
		   "encode_get_value: refuses an over-long key");
}

/*
 * The decimal rule: digits only, at least one, bounded by max with no wrap;
 * the signed form over the whole int64 range.  Random values are checked
 * against snprintf's rendering of them, and every bound is tried at
 * max - 1, max and max + 1.
 */
static void
test_decimal(void)
{
	static const struct
	{
		const char *in;
		uint64_t	max;
		bool		ok;
		uint64_t	v;
	}			u[] = {
		{"0", UINT64_MAX, true, 0},
		{"007", UINT64_MAX, true, 7},
		{"18446744073709551615", UINT64_MAX, true, UINT64_MAX},
		{"18446744073709551616", UINT64_MAX, false, 0},
		{"99999999999999999999", UINT64_MAX, false, 0},
		{"184467440737095516150", UINT64_MAX, false, 0},
		{"", UINT64_MAX, false, 0},
		{"-1", UINT64_MAX, false, 0},
		{"+1", UINT64_MAX, false, 0},
		{" 1", UINT64_MAX, false, 0},
		{"1 ", UINT64_MAX, false, 0},
		{"12x", UINT64_MAX, false, 0},
		{"1.5", UINT64_MAX, false, 0},
		{"0x10", UINT64_MAX, false, 0},
		{"65535", 65535, true, 65535},
		{"65536", 65535, false, 0},
		{"0", 0, true, 0},
		{"1", 0, false, 0},
		{"9", 8, false, 0},
		{"8", 8, true, 8},
		{"255", 255, true, 255},
		{"256", 255, false, 0},
		{"2550", 255, false, 0},
	};
	static const struct
	{
		const char *in;
		bool		ok;
		int64_t		v;
	}			sg[] = {
		{"0", true, 0},
		{"-0", true, 0},
		{"42", true, 42},
		{"-42", true, -42},
		{"9223372036854775807", true, INT64_MAX},
		{"9223372036854775808", false, 0},
		{"-9223372036854775808", true, INT64_MIN},
		{"-9223372036854775809", false, 0},
		{"18446744073709551615", false, 0},
		{"-", false, 0},
		{"", false, 0},
		{"--1", false, 0},
		{"+1", false, 0},
		{"-1x", false, 0},
		{"1-", false, 0},
	};
	size_t		i;
	int			bad = 0;

	for (i = 0; i < sizeof(u) / sizeof(u[0]); i++)
	{
		uint64_t	v = 12345;
		bool		got = mc_parse_u64(u[i].in, strlen(u[i].in), u[i].max, &v);

		tap_ok(got == u[i].ok && v == (got ? u[i].v : 12345),
			   "mc_parse_u64(\"%s\", max %llu): %s", u[i].in,
			   (unsigned long long) u[i].max, u[i].ok ? "accepted" : "refused, out untouched");
	}
	for (i = 0; i < sizeof(sg) / sizeof(sg[0]); i++)
	{
		int64_t		v = 12345;
		bool		got = mc_parse_i64(sg[i].in, strlen(sg[i].in), &v);

		tap_ok(got == sg[i].ok && v == (got ? sg[i].v : 12345),
			   "mc_parse_i64(\"%s\"): %s", sg[i].in, sg[i].ok ? "accepted" : "refused");
	}
	/* the length is what counts, not a NUL: "12" of "123" */
	{
		uint64_t	v = 0;

		tap_ok(mc_parse_u64("123", 2, UINT64_MAX, &v) && v == 12,
			   "mc_parse_u64 reads exactly len bytes");
	}
	for (i = 0; i < 3000; i++)
	{
		uint64_t	x = rnd() >> rnd_below(64);
		uint64_t	max = rnd_below(4) == 0 ? x : rnd() >> rnd_below(64);
		char		buf[32];
		int			n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long) x);
		uint64_t	v = 0;
		bool		got = mc_parse_u64(buf, (size_t) n, max, &v);
		int64_t		sx = (int64_t) rnd();
		int64_t		sv = 0;

		if (got != (x <= max) || (got && v != x))
			bad++;
		if (max > 0 && max < UINT64_MAX &&
			(!mc_parse_u64(buf, (size_t) snprintf(buf, sizeof(buf), "%llu",
												  (unsigned long long) max), max, &v) ||
			 v != max ||
			 mc_parse_u64(buf, (size_t) snprintf(buf, sizeof(buf), "%llu",
												 (unsigned long long) (max + 1)), max, &v) ||
			 !mc_parse_u64(buf, (size_t) snprintf(buf, sizeof(buf), "%llu",
												  (unsigned long long) (max - 1)), max, &v) ||
			 v != max - 1))
			bad++;
		n = snprintf(buf, sizeof(buf), "%lld", (long long) sx);
		if (!mc_parse_i64(buf, (size_t) n, &sv) || sv != sx)
			bad++;
	}
	tap_ok(bad == 0, "decimal: 3000 random values and bounds agree with snprintf");
}

/* mc_reply_flag_u64: the flags the parser skips (h, l), read on demand. */
static void
test_reply_flag(void)
{
	static const struct
	{
		const char *reply;
		char		flag;
		bool		found;
		uint64_t	value;
	}			cases[] = {
		{"HD s3 t10 l7 h1 c7 f0\r\n", 'l', true, 7},
		{"HD s3 t10 l7 h1 c7 f0\r\n", 'h', true, 1},
		{"HD s3 t10 l7 h0 c7 f0 Z\r\n", 'h', true, 0},
		{"VA 2 h1 l99\r\nh5\r\n", 'l', true, 99},
		{"VA 2 l99\r\nh5\r\n", 'h', false, 0},	/* not in the value */
		{"HD l1 l2\r\n", 'l', true, 1},	/* the first counts */
		{"HD lx\r\n", 'l', false, 0},
		{"HD l\r\n", 'l', false, 0},
		{"HD l18446744073709551616\r\n", 'l', false, 0},
		{"HD  h1 \r\n", 'h', true, 1},
		{"HD\r\n", 'h', false, 0},
		{"EN\r\n", 'h', false, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		McReply		r;
		uint64_t	v = 12345;
		bool		found;

		mc_parse_reply(cases[i].reply, strlen(cases[i].reply), &r);
		found = mc_reply_flag_u64(cases[i].reply, &r, cases[i].flag, &v);
		tap_ok(found == cases[i].found && (!found || v == cases[i].value),
			   "flag %c of %.*s", cases[i].flag,
			   (int) strcspn(cases[i].reply, "\r"), cases[i].reply);
	}
}

/*
 * mc_reply_position: the opaque as the part's tag and a pipeline position
 * inside [lo, hi), read from the general parser's reply and the hot one's
 * (whose VA shapes take the one-word compare of the tag).
 */
static void
test_reply_position(void)
{
	static const struct
	{
		const char *reply;
		uint32_t	lo,
					hi;
		int			pos;
	}			cases[] = {
		{"HD Oab7\r\n", 0, 10, 7},
		{"VA 2 f0 Oab0\r\nab\r\n", 0, 1, 0},
		{"VA 2 Oab1\r\nab\r\n", 0, 2, 1},
		{"VA 0 f0 Oab5\r\n\r\n", 0, 9, 5},
		{"HD Oab7\r\n", 7, 8, 7},
		{"HD Oab7\r\n", 8, 10, -1},	/* already passed */
		{"HD Oab10\r\n", 0, 10, -1},	/* never sent */
		{"VA 1 f0 Oab3\r\nx\r\n", 0, 3, -1},	/* never sent */
		{"HD\r\n", 0, 10, -1},	/* no opaque */
		{"HD O\r\n", 0, 10, -1},	/* empty */
		{"HD Oab\r\n", 0, 10, -1},	/* the tag alone */
		{"HD O7\r\n", 0, 10, -1},	/* a single-key call's token */
		{"VA 2 f0 O0\r\nab\r\n", 0, 10, -1},	/* ... or an untagged position */
		{"VA 2 f0 O12\r\nab\r\n", 0, 100, -1},
		{"HD Oac7\r\n", 0, 10, -1},	/* another part's tag */
		{"VA 2 f0 Oac0\r\nab\r\n", 0, 10, -1},
		{"VA 2 f0 Oba0\r\nab\r\n", 0, 10, -1},
		{"HD Oa7\r\n", 0, 10, -1},	/* a shorter tag */
		{"VA 2 f0 Ob0\r\nab\r\n", 0, 10, -1},
		{"HD Oabb7\r\n", 0, 10, -1},	/* a longer one starting with ours */
		{"VA 2 f0 Oabb0\r\nab\r\n", 0, 10, -1},
		{"VA 2 f0 OAB0\r\nab\r\n", 0, 10, -1},	/* case matters */
		{"HD Oab1x\r\n", 0, 10, -1},
		{"VA 2 f0 Oab1x\r\nab\r\n", 0, 10, -1},
		{"HD Oab-1\r\n", 0, 10, -1},
		{"HD Oab999999999\r\n", 0, 1000000000, 999999999},
		{"HD Oab1000000000\r\n", 0, 4000000000u, -1},	/* more than 9 digits */
		{"NF Oab3 k\r\n", 0, 4, 3},
		{"EN Oab3\r\n", 0, 4, 3},
		{"EN\r\n", 0, 4, -1},
		{"MN\r\n", 0, 4, -1},
	};
	McTag		tag;

	mc_tag_make(&tag, 52);		/* "ab" */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		McReply		r;
		McReply		rz;
		int			pos;
		int			posz;
		size_t		len = strlen(cases[i].reply);

		mc_parse_reply(cases[i].reply, len, &r);
		pos = mc_reply_position(cases[i].reply, &r, &tag, cases[i].lo, cases[i].hi);
		/* (a string literal ends in the NUL mc_parse_reply_z needs) */
		mc_parse_reply_z(cases[i].reply, len, &rz);
		posz = mc_reply_position(cases[i].reply, &rz, &tag, cases[i].lo, cases[i].hi);
		tap_ok(pos == cases[i].pos && posz == cases[i].pos,
			   "position of %.*s in [%u, %u): %d, %d",
			   (int) strcspn(cases[i].reply, "\r"), cases[i].reply,
			   cases[i].lo, cases[i].hi, pos, posz);
	}
	/* a reply to any other tag's request never matches */
	{
		bool		none = true;

		for (uint32_t seq = 0; seq < 3000; seq++)
		{
			McTag		other;
			char		buf[64];
			McReply		r;
			int			n;

			if (seq == 52)
				continue;
			mc_tag_make(&other, seq);
			n = snprintf(buf, sizeof(buf), "VA 2 f0 O%s3\r\nab\r\n", other.text);
			mc_parse_reply_z(buf, (size_t) n, &r);
			none &= mc_reply_position(buf, &r, &tag, 0, 10) < 0;
			n = snprintf(buf, sizeof(buf), "HD O%s3\r\n", other.text);
			mc_parse_reply_z(buf, (size_t) n, &r);
			none &= mc_reply_position(buf, &r, &tag, 0, 10) < 0;
		}
		tap_ok(none, "no reply carrying another tag's token matches the part");
	}
	/* every tag length and position width: the hot parser's one- and two-word token scan */
	{
		static const uint32_t seqs[] = {1, 52, 2704, 140608, 7311616, UINT32_MAX};
		static const uint32_t poss[] = {0, 42, 999, 12345, 999999999};
		bool		all = true;

		for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
			for (size_t j = 0; j < sizeof(poss) / sizeof(poss[0]); j++)
			{
				McTag		tg;
				char		buf[64];
				McReply		r;
				McReply		rz;
				int			n;

				mc_tag_make(&tg, seqs[i]);
				n = snprintf(buf, sizeof(buf), "VA 2 f3 O%s%u\r\nab\r\n", tg.text, poss[j]);
				mc_parse_reply(buf, (size_t) n, &r);
				mc_parse_reply_z(buf, (size_t) n, &rz);
				all &= mc_reply_position(buf, &r, &tg, 0, 1000000000) == (int) poss[j] &&
					mc_reply_position(buf, &rz, &tg, 0, 1000000000) == (int) poss[j] &&
					rz.opaque_len == r.opaque_len && rz.consumed == r.consumed &&
					rz.client_flags == 3;
				{
					McReply	exact;

					parse_exact(buf, (size_t) n, &exact);
				}
			}
		tap_ok(all, "tags of 1 to %d letters with positions of 1 to 9 digits: found by both parsers",
			   MC_TAG_MAX);
		/* tokens past the hot parser's first word, up to and past its 64-byte header */
		for (int tl = 7; tl <= 80; tl++)
		{
			char		buf[160];
			McReply		exact;
			int			n = snprintf(buf, sizeof(buf), "VA 2 f3 O%.*s\r\nab\r\n", tl,
									 "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz");

			parse_exact(buf, (size_t) n, &exact);
		}
	}
}

int
main(void)
{
	size_t		i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		check_shape(&shapes[i]);
	test_junk_after_digits();
	test_key_bytes();
	test_line_limit();
	test_va_size_limit();
	test_round_trip(6000);
	test_garbage(20000);
	test_encoders();
	test_reply_flag();
	test_reply_position();
	test_tag();
	test_base64();
	test_keys();
	test_decimal();
	test_opaque_shape();
	test_encode_get_opaque();
	test_encode_get_value();
	tap_ok(z_mismatch == 0,
		   "mc_parse_reply_z agrees with mc_parse_reply on all %ld inputs (%ld differ)",
		   z_checked, z_mismatch);
	return tap_done();
}
