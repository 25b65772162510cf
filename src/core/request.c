/*
 * request.c — memcached meta protocol, the request side: which keys can be
 * sent and how (raw or base64), and encoding requests.
 *
 * Owns: the bytes mcfdw writes to a server.  Must not: include PostgreSQL
 * headers, allocate, do I/O, or keep mutable state between calls.  Every
 * entry point writes into a caller-owned buffer of at least
 * MC_REQ_HEADER_MAX bytes, so this file is unit-tested on its own and
 * linked into the extension unchanged.  protocol.c is the reply side.
 */
#include "protocol.h"

#include <string.h>

/* Worst-case header mc_encode_request can produce; must fit the contract. */
#define MC_REQ_WORST (2 + 1 + MC_KEY_MAX	/* cmd, space, key */ \
					  + 21				/* " <datalen>" */ \
					  + 2				/* " b" */ \
					  + 2 * 22			/* " T<i64>", " N<i64>" */ \
					  + 3 * 22			/* " C<u64>", " D<u64>", " J<u64>" */ \
					  + 12				/* " F<u32>" */ \
					  + 3 + 2			/* " M<m>", " I" */ \
					  + 6 * 2			/* " v f k c t s" */ \
					  + 2 + 31			/* " O<opaque>" */ \
					  + 2 + 2)			/* " q", CRLF */

/* C99 has no static_assert: a negative array size stops the build instead. */
typedef char mc_req_worst_fits[(MC_REQ_WORST <= MC_REQ_HEADER_MAX) ? 1 : -1];

#define MC_OPAQUE_MAX	31

/* ---------------------------------------------------------------------
 * Base64 and keys
 * --------------------------------------------------------------------- */

static const char b64_alphabet[] =
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/*
 * Plain RFC 4648 with padding: memcached 1.6.18 rejects unpadded keys with
 * "CLIENT_ERROR error decoding key", so padding is not optional here.
 */
size_t
mc_b64_encode(const unsigned char *src, size_t len, char *dst)
{
	char	   *d = dst;
	size_t		i = 0;

	for (; i + 3 <= len; i += 3)
	{
		uint32_t	v = ((uint32_t) src[i] << 16) |
			((uint32_t) src[i + 1] << 8) | src[i + 2];

		d[0] = b64_alphabet[v >> 18];
		d[1] = b64_alphabet[(v >> 12) & 63];
		d[2] = b64_alphabet[(v >> 6) & 63];
		d[3] = b64_alphabet[v & 63];
		d += 4;
	}
	if (len - i == 1)
	{
		uint32_t	v = (uint32_t) src[i] << 16;

		d[0] = b64_alphabet[v >> 18];
		d[1] = b64_alphabet[(v >> 12) & 63];
		d[2] = '=';
		d[3] = '=';
		d += 4;
	}
	else if (len - i == 2)
	{
		uint32_t	v = ((uint32_t) src[i] << 16) | ((uint32_t) src[i + 1] << 8);

		d[0] = b64_alphabet[v >> 18];
		d[1] = b64_alphabet[(v >> 12) & 63];
		d[2] = b64_alphabet[(v >> 6) & 63];
		d[3] = '=';
		d += 4;
	}
	return (size_t) (d - dst);
}

/*
 * Printable keys go raw so they stay readable (and reachable with a plain
 * text-protocol "get"); anything memcached would split or choke on is sent
 * base64 so no key can ever inject protocol.
 */
McKeyStatus
mc_key_check(const char *key, size_t len, bool *b64)
{
	const unsigned char *k = (const unsigned char *) key;
	size_t		i;

	*b64 = false;
	if (len == 0)
		return MC_KEY_EMPTY;
	for (i = 0; i < len; i++)
	{
		if ((unsigned char) (k[i] - 0x21) > (0x7e - 0x21))
			break;
	}
	if (i == len)
		return len > MC_KEY_MAX ? MC_KEY_TOO_LONG : MC_KEY_OK;
	*b64 = true;
	return len > MC_KEY_MAX_B64 ? MC_KEY_TOO_LONG : MC_KEY_OK;
}

/* ---------------------------------------------------------------------
 * Request encoders
 * --------------------------------------------------------------------- */

/* snprintf is slow and locale-aware; request headers need neither. */
static char *
put_u64(char *d, uint64_t v)
{
	char		tmp[20];
	int			n = 0;

	do
	{
		tmp[n++] = (char) ('0' + (int) (v % 10));
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*d++ = tmp[--n];
	return d;
}

/* TTLs may be negative (T-1 expires at once), so they need their own sign. */
static char *
put_i64(char *d, int64_t v)
{
	if (v < 0)
	{
		*d++ = '-';
		return put_u64(d, (uint64_t) 0 - (uint64_t) v);
	}
	return put_u64(d, (uint64_t) v);
}

/* Every flag starts with a space and a letter; keeps the encoder readable. */
static char *
put_flag(char *d, char letter)
{
	d[0] = ' ';
	d[1] = letter;
	return d + 2;
}

/*
 * One generic encoder keeps the flag order in one place.  The order is
 * fixed: b, then the modifiers T N R C F M D J I, then the return flags
 * v f k c t s h l, then u, O and q.  T must come before t: memcached 1.6.18
 * processes flags left to right, so "t T99" reports the old TTL while
 * "T99 t" reports the new one.  The only checks are the ones that bound the
 * output to MC_REQ_HEADER_MAX (command, key, opaque and mode sizes); on such
 * a violation nothing useful can be sent, so 0 is returned.
 */
size_t
mc_encode_request(char *dst, const char *cmd, const char *wkey, size_t wlen,
				  bool b64, long datalen, const McReqOpts *opts)
{
	static const McReqOpts none;
	char	   *d = dst;
	size_t		cmdlen = strlen(cmd);
	unsigned	want;

	if (opts == NULL)
		opts = &none;
	if (cmdlen == 0 || cmdlen > 2 || wlen > MC_KEY_MAX ||
		(opts->opaque != NULL && opts->opaque_len > MC_OPAQUE_MAX) ||
		(opts->mode != 0 &&
		 (unsigned char) (opts->mode - 0x21) > (0x7e - 0x21)))
		return 0;

	memcpy(d, cmd, cmdlen);
	d += cmdlen;
	*d++ = ' ';
	memcpy(d, wkey, wlen);
	d += wlen;
	if (datalen >= 0)
	{
		*d++ = ' ';
		d = put_u64(d, (uint64_t) datalen);
	}
	if (b64)
		d = put_flag(d, 'b');
	if (opts->has_ttl)
		d = put_i64(put_flag(d, 'T'), opts->ttl);
	if (opts->has_vivify_ttl)
		d = put_i64(put_flag(d, 'N'), opts->vivify_ttl);
	if (opts->has_recache_ttl)
		d = put_i64(put_flag(d, 'R'), opts->recache_ttl);
	if (opts->has_cas)
		d = put_u64(put_flag(d, 'C'), opts->cas);
	if (opts->has_client_flags)
		d = put_u64(put_flag(d, 'F'), opts->client_flags);
	if (opts->mode != 0)
	{
		d = put_flag(d, 'M');
		*d++ = opts->mode;
	}
	if (opts->has_delta)
		d = put_u64(put_flag(d, 'D'), opts->delta);
	if (opts->has_initial)
		d = put_u64(put_flag(d, 'J'), opts->initial);
	if (opts->invalidate)
		d = put_flag(d, 'I');

	want = opts->want;
	if (want & MC_F_VALUE)
		d = put_flag(d, 'v');
	if (want & MC_F_FLAGS)
		d = put_flag(d, 'f');
	if (want & MC_F_KEY)
		d = put_flag(d, 'k');
	if (want & MC_F_CAS)
		d = put_flag(d, 'c');
	if (want & MC_F_TTL)
		d = put_flag(d, 't');
	if (want & MC_F_SIZE)
		d = put_flag(d, 's');
	if (want & MC_F_HIT)
		d = put_flag(d, 'h');
	if (want & MC_F_LAST)
		d = put_flag(d, 'l');
	if (opts->no_bump)
		d = put_flag(d, 'u');

	if (opts->opaque != NULL)
	{
		d = put_flag(d, 'O');
		memcpy(d, opts->opaque, opts->opaque_len);
		d += opts->opaque_len;
	}
	if (opts->quiet)
		d = put_flag(d, 'q');
	d[0] = '\r';
	d[1] = '\n';
	return (size_t) (d + 2 - dst);
}

/*
 * The pipelined multi-get's request: "mg <key> [b] v [f] O<tag><pos> q\r\n".
 * The opaque token carries the part's tag and the key's position in its
 * instance's pipeline, so a hit is matched to its key without echoing the
 * key (memcached echoes k as the item was stored, which for binary-protocol
 * keys with spaces cannot be parsed) and in fewer bytes, and a reply to an
 * earlier request on the connection matches nothing; q keeps misses
 * silent.
 */
size_t
mc_encode_get_opaque(char *dst, const char *wkey, size_t wlen, bool b64,
					 bool want_flags, const McTag *tag, uint32_t opaque)
{
	char	   *p = dst;

	if (wlen > MC_KEY_MAX)
		return 0;
	memcpy(p, "mg ", 3);
	p += 3;
	memcpy(p, wkey, wlen);
	p += wlen;
	if (b64)
	{
		memcpy(p, " b", 2);
		p += 2;
	}
	/* fixed-size stores: the spare bytes are overwritten next */
	memcpy(p, want_flags ? " v f O\0\0" : " v O\0\0\0\0", 8);
	p += want_flags ? 6 : 4;
	/* the tag's spare bytes too: the position overwrites them */
	memcpy(p, tag->text, 8);
	p += tag->len;
	/* a position is below 100 in all but long pipelines */
	if (opaque < 10)
		*p++ = (char) ('0' + opaque);
	else if (opaque < 100)
	{
		p[0] = (char) ('0' + opaque / 10);
		p[1] = (char) ('0' + opaque % 10);
		p += 2;
	}
	else
		p = put_u64(p, opaque);
	memcpy(p, " q\r\n", 4);
	return (size_t) (p + 4 - dst);
}

/*
 * The plain get, "mg <key> [b] v O<opaque>\r\n": the single-key hot path,
 * without the generic encoder's option walk.  The opaque ties the reply to
 * this request (memcached echoes it on VA and, since 1.6.18, on EN).
 */
size_t
mc_encode_get_value(char *dst, const char *wkey, size_t wlen, bool b64,
					uint32_t opaque)
{
	char	   *p = dst;

	if (wlen > MC_KEY_MAX)
		return 0;
	memcpy(p, "mg ", 3);
	p += 3;
	memcpy(p, wkey, wlen);
	p += wlen;
	if (b64)
	{
		memcpy(p, " b", 2);
		p += 2;
	}
	memcpy(p, " v O", 4);
	p = put_u64(p + 4, opaque);
	p[0] = '\r';
	p[1] = '\n';
	return (size_t) (p + 2 - dst);
}

/* 52 letters: a tag never holds a digit (protocol.h, McTag). */
static const char tag_alphabet[] =
"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

void
mc_tag_make(McTag *tag, uint32_t seq)
{
	unsigned char mask[8] = {0};
	uint32_t	n = 0;

	memset(tag->text, 0, sizeof(tag->text));
	do
	{
		tag->text[n] = tag_alphabet[seq % 52];
		mask[n++] = 0xff;
		seq /= 52;
	} while (seq != 0);
	tag->len = n;
	memcpy(&tag->word, tag->text, 8);
	memcpy(&tag->mask, mask, 8);
}

size_t
mc_tag_token(const McTag *tag, uint32_t pos, char *dst)
{
	memcpy(dst, tag->text, tag->len);
	return (size_t) (put_u64(dst + tag->len, pos) - dst);
}

/* Kept as a function so callers never spell the marker themselves. */
size_t
mc_encode_noop(char *dst)
{
	memcpy(dst, "mn\r\n", 4);
	return 4;
}
