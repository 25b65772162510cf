/*
 * protocol.h — memcached meta protocol: key checking and request encoding
 * (request.c), the in-place reply parser and the decimal-number rule
 * (protocol.c).
 *
 * Owns: everything that turns a request into bytes and bytes into a reply
 * description.  Must not: include PostgreSQL headers, allocate memory, do
 * I/O, or keep state between calls.  Every function works on caller-owned
 * buffers, and the parser only returns offsets into the buffer it was given,
 * so it can be unit-tested and fuzzed on its own.
 */
#ifndef MCFDW_PROTOCOL_H
#define MCFDW_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* memcached's key limit, counted on the wire (after base64). */
#define MC_KEY_MAX			250
/* Longest raw key that still fits once base64-encoded: 4*ceil(186/3) = 248. */
#define MC_KEY_MAX_B64		186
/* Room any single request header encoded here needs (key + all options). */
#define MC_REQ_HEADER_MAX	512
/* A reply header line longer than this is treated as garbage. */
#define MC_REPLY_LINE_MAX	2048

/* Outcome of checking/encoding a key. */
typedef enum McKeyStatus
{
	MC_KEY_OK = 0,
	MC_KEY_EMPTY,
	MC_KEY_TOO_LONG				/* > MC_KEY_MAX, or > MC_KEY_MAX_B64 when it needs base64 */
} McKeyStatus;

/*
 * Bits naming meta flags: used both for the flags a request asks to be
 * returned ("want") and for the flags a reply carried ("present").
 */
#define MC_F_VALUE		(1u << 0)	/* v */
#define MC_F_FLAGS		(1u << 1)	/* f: client flags */
#define MC_F_KEY		(1u << 2)	/* k: echo key */
#define MC_F_CAS		(1u << 3)	/* c */
#define MC_F_TTL		(1u << 4)	/* t: remaining ttl */
#define MC_F_SIZE		(1u << 5)	/* s */
#define MC_F_B64		(1u << 6)	/* b: key is base64 */
#define MC_F_OPAQUE		(1u << 7)	/* O */
#define MC_F_WIN		(1u << 8)	/* W (reply only) */
#define MC_F_STALE		(1u << 9)	/* X (reply only) */
#define MC_F_WON		(1u << 10)	/* Z (reply only) */
#define MC_F_HIT		(1u << 11)	/* h: hit before (request only: see mc_reply_flag_u64) */
#define MC_F_LAST		(1u << 12)	/* l: seconds since last access (request only) */

/*
 * Everything a request can carry besides the command and key.  Zero-init
 * (memset or {0}) means "plain request, nothing extra".
 */
typedef struct McReqOpts
{
	unsigned	want;			/* MC_F_VALUE | MC_F_FLAGS | ... to be returned */
	bool		quiet;			/* q */
	bool		has_ttl;		/* T<ttl> (mg: touch; ms: expiry) */
	int64_t		ttl;
	bool		has_cas;		/* C<cas> compare-and-swap */
	uint64_t	cas;
	bool		has_client_flags;	/* F<flags> on ms */
	uint32_t	client_flags;
	char		mode;			/* M<mode>: ms S/E/A/P/R, ma I/D; 0 = server default */
	bool		has_delta;		/* ma D<delta> */
	uint64_t	delta;
	bool		has_initial;	/* ma J<initial>, needs has_vivify_ttl */
	uint64_t	initial;
	bool		has_vivify_ttl; /* ma/mg N<ttl>: auto-create on miss */
	int64_t		vivify_ttl;
	bool		has_recache_ttl;	/* mg R<ttl>: win a recache below this ttl */
	int64_t		recache_ttl;
	bool		no_bump;		/* mg u: leave the LRU and the hit state alone */
	bool		invalidate;		/* I */
	const char *opaque;			/* O<opaque>, at most 31 bytes, no spaces */
	size_t		opaque_len;
} McReqOpts;

/*
 * mc_key_check: the status of a raw key, and in *b64 whether it must go
 * base64: keys with bytes <= 0x20, 0x7f or >= 0x80 are sent base64-encoded
 * (with mc_b64_encode and the b flag) so they can never inject protocol.
 */
extern McKeyStatus mc_key_check(const char *key, size_t len, bool *b64);

/*
 * mc_parse_u64: the decimal number in s[0..len) (not NUL-terminated) into
 * *out, if it is at most max.  Digits only: no sign, no spaces, no "0x".
 * False, leaving *out alone, for an empty run, any other byte, or a value
 * above max (overflow included).  Leading zeros are allowed.
 * mc_parse_i64: the same with an optional leading '-', over the whole
 * int64 range.
 */
extern bool mc_parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out);
extern bool mc_parse_i64(const char *s, size_t len, int64_t *out);

/* Standard base64 (RFC 4648, with padding).  Returns bytes written. */
extern size_t mc_b64_encode(const unsigned char *src, size_t len, char *dst);

/*
 * Request encoders.  Each writes a complete header line ending in "\r\n" into
 * dst (capacity >= MC_REQ_HEADER_MAX) and returns its length.  wkey/wlen is
 * the key's wire form (raw, or mc_b64_encode of it); b64 adds the b flag.
 *
 * mc_encode_request: generic; cmd is "mg", "ms", "md", "ma".  For "ms",
 * datalen is the value length (the caller sends the data and "\r\n" after the
 * header); pass -1 for commands without data.  opts may be NULL.  Flags are
 * always written in this order:
 *     <cmd> <key> [<datalen>] [b] [T<ttl>] [N<ttl>] [R<ttl>] [C<cas>]
 *     [F<flags>] [M<mode>] [D<delta>] [J<initial>] [I] [v] [f] [k] [c] [t]
 *     [s] [h] [l] [u] [O<opaque>] [q]
 * (T before t matters: memcached applies flags left to right, so "T99 t"
 * returns the new TTL and "t T99" the old one.)  Numbers are decimal; T, N
 * and R may be negative.  Returns 0, writing nothing useful, if cmd is longer
 * than 2 bytes, wlen > MC_KEY_MAX, opaque_len > 31 or mode is not a
 * printable character: those are the only inputs that could overflow
 * MC_REQ_HEADER_MAX.
 */
extern size_t mc_encode_request(char *dst, const char *cmd,
								const char *wkey, size_t wlen, bool b64,
								long datalen, const McReqOpts *opts);

/*
 * A pipelined part's tag: the letters every opaque token of the part starts
 * with, the op's position in decimal after them ("O<tag><pos>").  Letters
 * only, so a token of a part never reads as another part's (the letters end
 * where the digits start) nor as a single-key call's all-decimal token.
 * Made from a number the caller never repeats (mc_tag_make: base 52, least
 * significant letter first, 1 to MC_TAG_MAX letters), so a reply to
 * anything sent earlier on a connection names no op of the part.  word and
 * mask are text as a little-endian word and its used bytes, for
 * mc_reply_position's one-word compare.
 */
#define MC_TAG_MAX			6
typedef struct McTag
{
	char		text[8];		/* the letters, then NULs */
	uint64_t	word;
	uint64_t	mask;
	uint32_t	len;
} McTag;

extern void mc_tag_make(McTag *tag, uint32_t seq);

/*
 * The opaque token of position pos of tag's part, "<tag><pos>", at dst
 * (room for MC_TAG_MAX + 10 bytes); returns its length.
 */
extern size_t mc_tag_token(const McTag *tag, uint32_t pos, char *dst);

/*
 * The multi-get's pipelined request: "mg <key> [b] v [f] O<tag><pos> q\r\n".
 * Replies are matched by the echoed opaque (the part's tag and the key's
 * position: mc_reply_position), not k.
 */
extern size_t mc_encode_get_opaque(char *dst, const char *wkey, size_t wlen,
								   bool b64, bool want_flags, const McTag *tag,
								   uint32_t pos);

/*
 * The single-key get: "mg <key> [b] v O<opaque>\r\n" (what
 * mc_encode_request writes for it, with the opaque in decimal).
 */
extern size_t mc_encode_get_value(char *dst, const char *wkey, size_t wlen,
								  bool b64, uint32_t opaque);

/* "mn\r\n": end-of-pipeline marker, answered by "MN\r\n". */
extern size_t mc_encode_noop(char *dst);

/* Reply classification. */
typedef enum McReplyType
{
	MC_REPLY_NEED_MORE = 0,		/* incomplete; McReply.need says how much more */
	MC_REPLY_VA,				/* value follows */
	MC_REPLY_HD,				/* success, no value (also old servers' "OK") */
	MC_REPLY_EN,				/* miss */
	MC_REPLY_NS,				/* not stored */
	MC_REPLY_EX,				/* cas mismatch / exists */
	MC_REPLY_NF,				/* not found */
	MC_REPLY_MN,				/* end of pipeline */
	MC_REPLY_STAT,				/* "STAT <name> <value>" (stats commands) */
	MC_REPLY_END,				/* "END" (stats commands) */
	MC_REPLY_ERROR,				/* "ERROR" */
	MC_REPLY_CLIENT_ERROR,		/* "CLIENT_ERROR <msg>" */
	MC_REPLY_SERVER_ERROR,		/* "SERVER_ERROR <msg>" */
	MC_REPLY_BAD				/* unparseable: the stream is out of step */
} McReplyType;

/*
 * One parsed reply.  All *_off fields are offsets into the buffer given to
 * mc_parse_reply; nothing is copied.
 */
typedef struct McReply
{
	McReplyType type;
	size_t		consumed;		/* whole reply: header line + value + CRLF */
	size_t		need;			/* NEED_MORE: at least this many more bytes */
	size_t		header_len;		/* header line including its CRLF */

	size_t		value_off;		/* VA: value bytes */
	size_t		value_len;

	unsigned	present;		/* MC_F_* bits of the flags the reply carried */
	uint32_t	client_flags;	/* f */
	uint64_t	cas;			/* c */
	int64_t		ttl;			/* t (-1 = never expires) */
	uint64_t	size;			/* s */
	size_t		key_off;		/* k: key as on the wire (base64 if MC_F_B64) */
	size_t		key_len;
	size_t		opaque_off;		/* O */
	size_t		opaque_len;

	/* ERROR/CLIENT_ERROR/SERVER_ERROR message; STAT name */
	size_t		msg_off;
	size_t		msg_len;
	/* STAT value */
	size_t		stat_value_off;
	size_t		stat_value_len;
} McReply;

/*
 * mc_parse_reply: parse the reply that starts at buf[0].  Never reads past
 * buf[len-1], never allocates.  Returns r->type.  For NEED_MORE, r->need >= 1
 * is the minimum number of further bytes before a retry can succeed.
 *
 * Details of the contract (test/unit/test_protocol.c checks each):
 *  - Fields a reply does not set are 0: flag values whose MC_F_* bit is not
 *    in present, msg_* except for errors and STAT, and so on.  BAD leaves
 *    everything 0 but type.
 *  - NEED_MORE with header_len == 0: the header line is incomplete; need is
 *    1 if buf ends in CR, else 2.  NEED_MORE with header_len != 0: a VA
 *    header is complete and all its fields are filled (value_off/value_len
 *    included), and need is exactly the number of bytes still missing, so
 *    the caller can read straight to the end of the value.
 *  - The header line, CRLF included, must fit in MC_REPLY_LINE_MAX bytes;
 *    a lone "\n" or a line starting with anything but a known reply code is
 *    BAD at once.
 *  - Known flags must be well-formed: c f s t need a decimal number that
 *    fits (f: uint32, c s: uint64, t: int64, may be negative) followed by a
 *    space or the CR; b W X Z must stand alone.  Anything else after those
 *    letters ("f12x", "f", "c-1", "bx", an overflow) makes the reply BAD.
 *    k and O take any token, possibly empty.  Tokens starting with other
 *    letters are skipped (new server flags, h, l), and so are empty tokens
 *    from doubled or trailing spaces.  A repeated flag: the first wins.
 *  - VA size: decimal, at most 2^31; the data block must be followed by
 *    CRLF.  "OK" (servers before 1.6.10) is HD.  STAT's value and the error
 *    message are the rest of the line and may contain spaces.
 */
extern McReplyType mc_parse_reply(const char *buf, size_t len, McReply *r);

/*
 * mc_reply_flag_u64: the number of return flag 'flag' (a letter the parser
 * skips, such as h or l) in the header line of a parsed reply at buf; false
 * when the line has no such flag or its token is not a decimal number.
 * The first occurrence counts, as for the flags the parser knows.
 */
extern bool mc_reply_flag_u64(const char *buf, const McReply *r, char flag,
							  uint64_t *out);

/*
 * mc_reply_position: the pipeline position a parsed reply's opaque token
 * names ("<tag><pos>", as mc_tag_token writes it), or -1 when the reply has
 * no opaque, the token is not tag's letters followed by 1 to 9 decimal
 * digits, or the position is outside [lo, hi): one already passed or never
 * sent.  A token of another part (another tag) or of a single-key call (no
 * letters) is -1 whatever its digits.
 */
static inline int
mc_reply_position(const char *buf, const McReply *r, const McTag *tag,
				  uint32_t lo, uint32_t hi)
{
	const char *p = buf + r->opaque_off;
	size_t		n = r->opaque_len;
	uint32_t	pos;

	/* inline: it runs once per hit, and the opaque is a few bytes */
	if (!(r->present & MC_F_OPAQUE) || n <= tag->len || n - tag->len > 9)
		return -1;
	if (r->opaque_off + 8 <= r->consumed)
	{
		/* the reply's own bytes: eight of them can be read at once */
		uint64_t	w;

		memcpy(&w, p, 8);
		if (((w ^ tag->word) & tag->mask) != 0)
			return -1;
	}
	else
	{
		for (uint32_t i = 0; i < tag->len; i++)
			if (p[i] != tag->text[i])
				return -1;
	}
	pos = 0;
	for (size_t i = tag->len; i < n; i++)
	{
		uint32_t	d = (uint32_t) (unsigned char) p[i] - '0';

		if (d > 9)
			return -1;
		pos = pos * 10 + d;
	}
	if (pos < lo || pos >= hi)
		return -1;
	return (int) pos;
}

/*
 * mc_parse_reply_z: mc_parse_reply for a buffer whose byte buf[len] exists
 * and is NUL.  The terminator lets the hot VA shapes be parsed in one pass.
 * The result agrees with mc_parse_reply's on type, consumed, header_len,
 * value_off, value_len, present, and every field whose present bit is set;
 * other fields may be left as they were (its straight-line path does not clear
 * them), so read a flag's field only when its MC_F_* bit is set.  Reads at
 * most up to buf[len].
 */
extern McReplyType mc_parse_reply_z(const char *buf, size_t len, McReply *r);

/*
 * The empty item memcached creates for a lease (mg N): zero bytes, a win
 * flag (W to the winner, Z to the others), not stale.  Every read treats
 * it as a miss; memcached sends W and Z whether or not they were asked.
 */
static inline bool
McReplyIsPlaceholder(const McReply *r)
{
	return r->value_len == 0 &&
		(r->present & (MC_F_WIN | MC_F_WON)) != 0 &&
		!(r->present & MC_F_STALE);
}

#endif							/* MCFDW_PROTOCOL_H */
