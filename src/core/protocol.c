/*
 * protocol.c — memcached meta protocol, the reply side: the in-place reply
 * parser (request.c encodes requests).
 *
 * Owns: the byte-level reply format, and the one decimal-number rule every
 * number read from untrusted text goes through (server replies here, option
 * values and STAT lines in the backend files).  Must not: include
 * PostgreSQL headers, allocate, do I/O, or keep mutable state between calls.
 * Every entry point works on caller-owned buffers, so this file can be unit
 * tested, fuzzed and benchmarked on its own and linked into the extension
 * unchanged.
 *
 * Parser rules (see mc_parse_reply):
 *	- a reply is one header line ending in "\r\n" (a lone "\n" is BAD), at
 *	  most MC_REPLY_LINE_MAX bytes including the CRLF, then for VA the data
 *	  block and "\r\n";
 *	- flag letters the parser knows must be well-formed: c f s t need a
 *	  decimal number in range (t may be negative) that ends at a space or the
 *	  CR, and b W X Z must stand alone.  "f12x", "f", "c-1", "bq" or a number
 *	  too big for its field make the whole reply BAD, because memcached never
 *	  sends them and the stream can no longer be trusted;
 *	- k and O take any token (possibly empty); tokens starting with any
 *	  other letter are skipped, so new server flags do not break us;
 *	- when a flag repeats, the first occurrence wins (later ones are still
 *	  checked for well-formedness).
 *
 * Parser layout: mc_parse_reply (parse_general) is the reference for every
 * reply: memchr for the LF, then one pass over the line with its CR as a
 * sentinel.  mc_parse_reply_z parses the two VA shapes mcfdw requests
 * straight through from a NUL-terminated buffer, answers a bare "MN" (the
 * end of every pipeline) without a search, and hands every other shape,
 * unchanged, to mc_parse_reply.
 */
#include "protocol.h"

#include <string.h>

/* Largest value size a VA header may announce. */
#define MC_VA_SIZE_MAX	(UINT64_C(1) << 31)

/* ---------------------------------------------------------------------
 * Decimal numbers
 * --------------------------------------------------------------------- */

/*
 * One rule for every decimal number read from untrusted text, whether a
 * server's reply or an option value: digits only, at least one, and a value
 * above max (overflow included) is an error, never a wrap.  10 * v + d <= max
 * is tested as v <= (max - d) / 10, which cannot overflow.
 */
bool
mc_parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t	v = 0;
	size_t		i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++)
	{
		unsigned	d = (unsigned) (unsigned char) s[i] - '0';

		if (d > 9 || d > max || v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* The same with an optional '-': the whole int64 range, INT64_MIN included. */
bool
mc_parse_i64(const char *s, size_t len, int64_t *out)
{
	bool		neg = len > 0 && s[0] == '-';
	uint64_t	v;

	if (!mc_parse_u64(s + neg, len - neg, (uint64_t) INT64_MAX + neg, &v))
		return false;
	/* two's complement negation; exact for INT64_MIN */
	*out = neg ? (int64_t) (0 - v) : (int64_t) v;
	return true;
}

/* ---------------------------------------------------------------------
 * Reply parser
 * --------------------------------------------------------------------- */

/*
 * The rare paths must stay out of line so they do not cost the hot path
 * registers.
 */
#if defined(__GNUC__)
#define MC_NOINLINE __attribute__((noinline))
#else
#define MC_NOINLINE
#endif

#define SWAR_ONES	UINT64_C(0x0101010101010101)
#define SWAR_HIGH	UINT64_C(0x8080808080808080)

/*
 * Tokens end at the first byte <= 0x20: a space, the line's CR (which the
 * caller has already located, so every scan stops there at the latest), or
 * a control byte that makes the reply BAD.  Keys are the long tokens of a
 * hot reply, so test eight bytes per step while eight bytes remain in the
 * buffer: (w - 0x21..) & ~w & 0x80.. flags exactly the bytes below 0x21,
 * and the lowest flag is the first such byte because borrows only travel
 * upwards.
 */
static inline const unsigned char *
scan_token(const unsigned char *p, const unsigned char *bufend)
{
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && \
	__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (bufend - p >= 8)
	{
		uint64_t	w;
		uint64_t	m;

		memcpy(&w, p, 8);
		m = (w - SWAR_ONES * 0x21) & ~w & SWAR_HIGH;
		if (m != 0)
			return p + (__builtin_ctzll(m) >> 3);
		p += 8;
	}
#else
	(void) bufend;
#endif
	while (*p > ' ')
		p++;
	return p;
}

/*
 * The CR ends every digit run, so no bounds check is needed.  The sum may
 * wrap for 20+ digit runs; callers re-check those with mc_parse_u64, so the
 * common short number costs one multiply-add per digit and nothing else.
 */
static inline const unsigned char *
scan_digits(const unsigned char *p, uint64_t *out)
{
	uint64_t	v = 0;
	unsigned	d;

	while ((d = (unsigned) *p - '0') < 10)
	{
		v = v * 10 + d;
		p++;
	}
	*out = v;
	return p;
}

/*
 * A number is good when it has at least one digit and fits 64 bits; the
 * 20-digit test keeps the exact parse off the hot path.
 */
static inline bool
number_ok(const unsigned char *p, const unsigned char *q, uint64_t *v)
{
	return q != p &&
		(q - p < 20 || mc_parse_u64((const char *) p, (size_t) (q - p), UINT64_MAX, v));
}

/*
 * Meta flags: " <letter>[<token>]" repeated.  Returns where the flag list
 * stopped (the caller requires the CR there: junk after a number or after
 * a bare flag stops the list early and makes the reply BAD), or NULL for a
 * malformed number.  Safe without bounds checks: p only ever moves onto
 * bytes up to the line's CR, which stops every scan.
 */
static const unsigned char *
parse_flags(const unsigned char *p, const unsigned char *b,
			const unsigned char *bufend, McReply *r, unsigned *presentp)
{
	unsigned	present = 0;
	const unsigned char *q;
	uint64_t	v;

	while (*p == ' ')
	{
		unsigned char c = p[1];
		unsigned	bit;

		p += 2;
		switch (c)
		{
			case 'f':
			case 'c':
			case 's':
				q = scan_digits(p, &v);
				if (!number_ok(p, q, &v) || (c == 'f' && v > UINT32_MAX))
					return NULL;
				bit = c == 'f' ? MC_F_FLAGS : c == 'c' ? MC_F_CAS : MC_F_SIZE;
				if (!(present & bit))
				{
					present |= bit;
					if (c == 'f')
						r->client_flags = (uint32_t) v;
					else if (c == 'c')
						r->cas = v;
					else
						r->size = v;
				}
				p = q;
				break;
			case 't':
				{
					bool		neg = (*p == '-');

					p += neg;
					q = scan_digits(p, &v);
					if (!number_ok(p, q, &v) ||
						v > (uint64_t) INT64_MAX + (neg ? 1 : 0))
						return NULL;
					if (!(present & MC_F_TTL))
					{
						present |= MC_F_TTL;
						/* two's complement negation; exact for INT64_MIN */
						r->ttl = neg ? (int64_t) (0 - v) : (int64_t) v;
					}
					p = q;
				}
				break;
			case 'k':
			case 'O':
				q = scan_token(p, bufend);
				bit = c == 'k' ? MC_F_KEY : MC_F_OPAQUE;
				if (!(present & bit))
				{
					present |= bit;
					if (c == 'k')
					{
						r->key_off = (size_t) (p - b);
						r->key_len = (size_t) (q - p);
					}
					else
					{
						r->opaque_off = (size_t) (p - b);
						r->opaque_len = (size_t) (q - p);
					}
				}
				p = q;
				break;
			case 'b':
				present |= MC_F_B64;
				break;
			case 'W':
				present |= MC_F_WIN;
				break;
			case 'X':
				present |= MC_F_STALE;
				break;
			case 'Z':
				present |= MC_F_WON;
				break;
			default:
				/* unknown flag or junk token (or a trailing space): skip */
				p = scan_token(p - 1, bufend);
				break;
		}
	}
	*presentp = present;
	return p;
}

/*
 * A stream that is out of step should be noticed as soon as two bytes
 * arrive, not after MC_REPLY_LINE_MAX bytes of waiting for a CRLF: every
 * reply starts with one of these two-letter codes.
 */
static bool
plausible_start(const unsigned char *b, size_t len)
{
	if (len == 0)
		return true;
	if (len == 1)
		return memchr("VHOENMSC", b[0], 8) != NULL;
	switch ((b[0] << 8) | b[1])
	{
		case ('V' << 8) | 'A':
		case ('H' << 8) | 'D':
		case ('O' << 8) | 'K':
		case ('E' << 8) | 'N':
		case ('N' << 8) | 'S':
		case ('E' << 8) | 'X':
		case ('N' << 8) | 'F':
		case ('M' << 8) | 'N':
		case ('S' << 8) | 'T':
		case ('E' << 8) | 'R':
		case ('C' << 8) | 'L':
		case ('S' << 8) | 'E':
			return true;
		default:
			return false;
	}
}

/*
 * Rare outcomes reset the whole reply, so a NEED_MORE or BAD result never
 * carries half-parsed fields.
 */
static MC_NOINLINE McReplyType
finish_short(const unsigned char *b, size_t len, McReply *r, bool bad)
{
	memset(r, 0, sizeof(*r));
	if (bad)
	{
		r->type = MC_REPLY_BAD;
		return MC_REPLY_BAD;
	}
	/* Nothing succeeds without a CRLF; if the CR is here, one byte may do. */
	r->type = MC_REPLY_NEED_MORE;
	r->need = (len > 0 && b[len - 1] == '\r') ? 1 : 2;
	return MC_REPLY_NEED_MORE;
}

/*
 * Everything but VA: rare next to value replies, so it lives out of line
 * where it cannot cost the hot path registers.  The line [b, cr) is known
 * to end in CRLF and to hold at least two bytes.
 */
static MC_NOINLINE McReplyType
parse_other(const unsigned char *b, size_t len, const unsigned char *cr,
			McReply *r)
{
	const unsigned char *p = b + 2;
	const unsigned char *q;
	McReplyType type;
	unsigned	present = 0;

	switch ((b[0] << 8) | b[1])
	{
		case ('H' << 8) | 'D':
		case ('O' << 8) | 'K':
			type = MC_REPLY_HD;
			break;
		case ('E' << 8) | 'N':
			if (cr - p == 1 && *p == 'D')
			{
				type = MC_REPLY_END;
				p++;
				goto done;
			}
			type = MC_REPLY_EN;
			break;
		case ('N' << 8) | 'S':
			type = MC_REPLY_NS;
			break;
		case ('E' << 8) | 'X':
			type = MC_REPLY_EX;
			break;
		case ('N' << 8) | 'F':
			type = MC_REPLY_NF;
			break;
		case ('M' << 8) | 'N':
			type = MC_REPLY_MN;
			break;
		case ('S' << 8) | 'T':
			if (cr - p < 4 || memcmp(p, "AT ", 3) != 0)
				goto bad;
			p += 3;
			q = scan_token(p, b + len);
			if (q == p)
				goto bad;
			r->msg_off = (size_t) (p - b);
			r->msg_len = (size_t) (q - p);
			if (*q == ' ')
			{
				r->stat_value_off = (size_t) (q + 1 - b);
				r->stat_value_len = (size_t) (cr - q - 1);
				q = cr;
			}
			p = q;
			type = MC_REPLY_STAT;
			goto done;
		case ('E' << 8) | 'R':
			if (cr - p < 3 || memcmp(p, "ROR", 3) != 0)
				goto bad;
			p += 3;
			type = MC_REPLY_ERROR;
			goto message;
		case ('C' << 8) | 'L':
			if (cr - p < 10 || memcmp(p, "IENT_ERROR", 10) != 0)
				goto bad;
			p += 10;
			type = MC_REPLY_CLIENT_ERROR;
			goto message;
		case ('S' << 8) | 'E':
			if (cr - p < 10 || memcmp(p, "RVER_ERROR", 10) != 0)
				goto bad;
			p += 10;
			type = MC_REPLY_SERVER_ERROR;
			goto message;
		default:
			goto bad;
	}

	/* HD EN NS EX NF MN: flags only */
	p = parse_flags(p, b, b + len, r, &present);
	r->present = present;
	goto done;

message:
	/* optional free text after one space, up to the final CRLF */
	if (*p == ' ')
	{
		r->msg_off = (size_t) (p + 1 - b);
		r->msg_len = (size_t) (cr - p - 1);
		p = cr;
	}

done:
	if (p != cr)
		goto bad;
	r->type = type;
	r->consumed = (size_t) (cr + 2 - b);
	return type;

bad:
	return finish_short(b, len, r, true);
}

/*
 * The reference parser for every shape.  It finds the header's end first
 * (memchr is vectorised), then parses the line with its CR as a sentinel:
 * every inner loop stops on it, so none of them needs a bounds check.  VA
 * is parsed right here; everything else goes to parse_other.
 */
static MC_NOINLINE McReplyType
parse_general(const unsigned char *b, size_t len, McReply *r)
{
	const unsigned char *nl;
	const unsigned char *p;
	const unsigned char *q;
	unsigned	present = 0;
	uint64_t	vsize;
	size_t		hl;
	size_t		vend;

	/* every field not set below reads as zero */
	memset(r, 0, sizeof(*r));

	nl = memchr(b, '\n', len < MC_REPLY_LINE_MAX ? len : MC_REPLY_LINE_MAX);
	if (nl == NULL)
		return finish_short(b, len, r, len >= MC_REPLY_LINE_MAX ||
							!plausible_start(b, len));
	/* memcached always sends CRLF; a lone LF means we are out of step */
	if (nl - b < 3 || nl[-1] != '\r')
		return finish_short(b, len, r, true);
	hl = (size_t) (nl + 1 - b);
	r->header_len = hl;

	/* the line holds at least 2 bytes before its CR: b[2] is at most the CR */
	if (b[0] != 'V' || b[1] != 'A' || b[2] != ' ')
		return parse_other(b, len, nl - 1, r);

	p = b + 3;
	q = scan_digits(p, &vsize);
	if (!number_ok(p, q, &vsize) || vsize > MC_VA_SIZE_MAX)
		goto bad;
	p = parse_flags(q, b, b + len, r, &present);
	if (p != nl - 1)
		goto bad;
	r->present = present;
	r->value_off = hl;
	r->value_len = (size_t) vsize;
	/* vsize <= 2^31 and hl <= MC_REPLY_LINE_MAX: this cannot overflow */
	vend = hl + (size_t) vsize;
	if (len < vend + 2)
	{
		if (len > vend && b[vend] != '\r')
			goto bad;
		r->type = MC_REPLY_NEED_MORE;
		r->need = vend + 2 - len;
		r->consumed = 0;
		return MC_REPLY_NEED_MORE;
	}
	if (b[vend] != '\r' || b[vend + 1] != '\n')
		goto bad;
	r->type = MC_REPLY_VA;
	r->consumed = vend + 2;
	return MC_REPLY_VA;

bad:
	return finish_short(b, len, r, true);
}

/*
 * The flags the parser skips are read on demand: scan the header line's
 * tokens (the code, then for VA the size, then flags) for the first one
 * that starts with the letter.
 */
bool
mc_reply_flag_u64(const char *buf, const McReply *r, char flag, uint64_t *out)
{
	const char *p = buf;
	const char *end;

	if (r->header_len < 2)
		return false;
	end = buf + r->header_len - 2;	/* the CRLF */
	while (p < end && *p != ' ')
		p++;					/* the reply code */
	while (p < end)
	{
		const char *tok;

		while (p < end && *p == ' ')
			p++;
		tok = p;
		while (p < end && *p != ' ')
			p++;
		if (p > tok && *tok == flag)
			return mc_parse_u64(tok + 1, (size_t) (p - tok - 1), UINT64_MAX, out);
	}
	return false;
}

/*
 * The public entry is the general parser itself; it stays a separate
 * out-of-line function so mc_parse_reply_z's straight-line path does not
 * pay for its registers when it falls back.
 */
McReplyType
mc_parse_reply(const char *buf, size_t len, McReply *r)
{
	return parse_general((const unsigned char *) buf, len, r);
}

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && \
	__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/*
 * mc_parse_reply_z's shape for a single-key get, "VA <n> O<token>": p is at
 * the space before the O, size already parsed.  Out of line, so the
 * multi-get's shape keeps its registers; anything unexpected goes to the
 * general parser.
 */
static MC_NOINLINE McReplyType
parse_get_opaque_z(const unsigned char *b, size_t len, const unsigned char *p,
				   uint64_t size, McReply *r)
{
	const unsigned char *tok = p + 2;
	size_t		hlen;
	size_t		vend;

	p = tok;
	while (*p > ' ')
		p++;
	hlen = (size_t) (p + 2 - b);
	vend = hlen + (size_t) size;
	if (p[0] != '\r' || p[1] != '\n' || p - b > 64 || len < vend + 2 ||
		b[vend] != '\r' || b[vend + 1] != '\n')
		return mc_parse_reply((const char *) b, len, r);
	r->type = MC_REPLY_VA;
	r->present = MC_F_OPAQUE;
	r->client_flags = 0;
	r->opaque_off = (size_t) (tok - b);
	r->opaque_len = (size_t) (p - tok);
	r->header_len = hlen;
	r->value_off = hlen;
	r->value_len = (size_t) size;
	r->consumed = vend + 2;
	return MC_REPLY_VA;
}
#endif

/*
 * The hot path of the connection read buffers, which keep a NUL right after
 * their last byte.  With that terminator every digit run and token scan
 * stops by itself, so the replies mcfdw asks for, "VA <n> f<flags> O<token>"
 * (a pipelined get) and "VA <n> O<token>" (a single-key get), are parsed
 * straight through: no delimiter search, no flag loop, and no clearing
 * of the fields the reply does not have; so is a bare "MN".  Every other
 * shape, and anything incomplete, goes to mc_parse_reply; the two agree on
 * every field the reply defines (the unit tests and the fuzzer compare
 * them).
 */
McReplyType
mc_parse_reply_z(const char *buf, size_t len, McReply *r)
{
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && \
	__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const unsigned char *b = (const unsigned char *) buf;
	const unsigned char *p;
	const unsigned char *q;
	uint64_t	size;
	uint64_t	flags;
	uint32_t	head;
	uint32_t	w4;
	uint32_t	x4;
	uint32_t	nd4;
	uint16_t	two;
	unsigned	d;
	unsigned	present;
	size_t		hlen;
	size_t		vend;

	/* "VA ", then the size: 1..4 digits in one word, longer ones by loop */
	if (len < 16)
		goto other;
	memcpy(&head, b, 4);
	if ((head & 0xffffff) != ('V' | ('A' << 8) | (' ' << 16)))
		goto other;
	memcpy(&w4, b + 3, 4);
	x4 = w4 - 0x30303030u;
	nd4 = ((x4 + 0x76767676u) | x4) & 0x80808080u;
	if (nd4 != 0)
	{
		unsigned	n = (unsigned) __builtin_ctz(nd4) >> 3;

		if (n == 0)
			goto general;
		/* move the n digits to the top: the missing ones read as zeros */
		x4 <<= 32 - 8 * n;
		x4 = (x4 * 10 + (x4 >> 8)) & 0x00ff00ffu;
		size = (x4 * 100 + (x4 >> 16)) & 0xffffu;
		p = b + 3 + n;
	}
	else
	{
		size = 0;
		p = b + 3;
		while ((d = (unsigned) *p - '0') <= 9)
		{
			size = size * 10 + d;
			p++;
		}
		if (p - b > 13 || size > MC_VA_SIZE_MAX)
			goto general;
	}
	/* a plain get ("mg <key> v") ends here */
	if (p[0] == '\r')
	{
		present = 0;
		goto crlf;
	}
	/* " f<digits>": one digit is the common case */
	memcpy(&two, p, 2);
	if (two != (' ' | ('f' << 8)) || (d = (unsigned) p[2] - '0') > 9)
	{
		if (two == (' ' | ('O' << 8)))
			return parse_get_opaque_z(b, len, p, size, r);
		goto general;
	}
	flags = d;
	q = p + 3;
	if ((d = (unsigned) *q - '0') <= 9)
	{
		do
		{
			flags = flags * 10 + d;
			q++;
		} while ((d = (unsigned) *q - '0') <= 9);
		if (q - p > 12 || flags > UINT32_MAX)
			goto general;
	}
	/* " O<token>" (q may be the terminator itself: test byte by byte) */
	if (q[0] != ' ' || q[1] != 'O')
		goto general;
	p = q + 2;
	if (b + len - p >= 8)
	{
		/* the bytes <= 0x20 of eight at once; the lowest is the token's end */
		uint64_t	w;
		uint64_t	m;

		memcpy(&w, p, 8);
		m = (w - SWAR_ONES * 0x21) & ~w & SWAR_HIGH;
		if (m == 0)
		{
			/* a longer token (a long tag and position): byte by byte, short headers only */
			p += 8;
			while (*p > ' ')
				p++;
			if (p - b > 64)
				goto general;
		}
		else
			p += __builtin_ctzll(m) >> 3;
	}
	else
	{
		while (*p > ' ')
			p++;
	}
	r->client_flags = (uint32_t) flags;
	r->opaque_off = (size_t) (q + 2 - b);
	r->opaque_len = (size_t) (p - q - 2);
	present = MC_F_FLAGS | MC_F_OPAQUE;

	/* CRLF, then the data block and its CRLF */
crlf:
	hlen = (size_t) (p + 2 - b);
	vend = hlen + (size_t) size;
	/* (the header is at most ~40 bytes here, far below MC_REPLY_LINE_MAX) */
	if (p[0] != '\r' || p[1] != '\n' || len < vend + 2 ||
		b[vend] != '\r' || b[vend + 1] != '\n')
		goto general;
	r->type = MC_REPLY_VA;
	r->present = present;
	r->header_len = hlen;
	r->value_off = hlen;
	r->value_len = (size_t) size;
	r->consumed = vend + 2;
	return MC_REPLY_VA;

	/*
	 * "MN" ends every pipeline, once per instance and call: answered here
	 * as the general parser answers it (every field zero but these),
	 * without its line search and flag loop.
	 */
other:
	if (len >= 4 && memcmp(b, "MN\r\n", 4) == 0)
	{
		memset(r, 0, sizeof(*r));
		r->type = MC_REPLY_MN;
		r->header_len = 4;
		r->consumed = 4;
		return MC_REPLY_MN;
	}
general:
#endif
	return mc_parse_reply(buf, len, r);
}
