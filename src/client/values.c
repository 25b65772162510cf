/*
 * values.c — what a value's client flags say, read and written the way the
 * application's client does.
 *
 * Owns: the server options compression, compressed_flag,
 * compress_threshold, compression_level, max_value_size and
 * serialized_flag at work:
 * inflating a value whose flags carry compressed_flag (straight into the
 * buffer the caller returns: no copy of the inflated bytes), deflating a
 * value written at or over compress_threshold and marking it, and refusing
 * a serialized object (Ruby Marshal, Python pickle) as text, and whether
 * bytes are valid text in the database encoding (McValueTextValid, for every
 * read that returns text).  Inflation is
 * bounded by max_value_size, so a zip bomb costs at most that much memory
 * and time.  Must not: touch connections or replies (callers hand over the
 * bytes and flags), or change a value whose flags already carry
 * compressed_flag on write (it is compressed already: mc_get_raw's bytes
 * go back as they came).
 */
#include "postgres.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "compress.h"
#include "server.h"
#include "values.h"

/*
 * First size of a buffer for an inflated value: JSON and text gain 3-5x
 * under zlib (docs/benchmarks.md's JSON-ish records 4.06x, so a 4x guess
 * would redo nearly every one).  A value that fits is inflated in one
 * libdeflate call; a larger one starts over in a buffer twice as large,
 * so a buffer is at most this guess or twice its value, never past
 * max_value_size + 1, and the work at most about twice the inflating.
 */
#define INFLATE_FIRST_GUESS(len)	Max((size_t) (len) * 6, (size_t) 1024)

/*
 * Inflate src[0..len) into *buf (VARHDRSZ bytes of room, then *cap bytes
 * of data), growing it (repalloc) up to max_value_size + 1 bytes, the one
 * extra byte telling "exactly the limit" from "more".  *buf may be NULL.
 * Returns the status; on MC_Z_DONE *outlen is the inflated length.
 */
static McZStatus
inflate_into(McServer *srv, const char *src, size_t len, char **buf, size_t *cap,
			 size_t *outlen)
{
	size_t		limit = (size_t) srv->cfg.max_value_size + 1;
	size_t		produced = 0;
	McZStatus	st;

	if (*buf == NULL || *cap == 0)
	{
		*cap = Min(INFLATE_FIRST_GUESS(len), limit);
		*buf = *buf ? repalloc(*buf, VARHDRSZ + *cap) : palloc(VARHDRSZ + *cap);
	}
	st = mc_inflate_start(src, len, limit);
	if (st != MC_Z_DONE)
		return st;
	while ((st = mc_inflate_more(*buf + VARHDRSZ, Min(*cap, limit), &produced)) == MC_Z_FULL)
	{
		if (*cap >= limit)
			break;
		CHECK_FOR_INTERRUPTS();
		*cap = Min(*cap * 2, limit);
		*buf = repalloc(*buf, VARHDRSZ + *cap);
	}
	if (st == MC_Z_DONE && produced >= limit)
		st = MC_Z_FULL;
	*outlen = produced;
	return st;
}

/*
 * The value of a reply as a new varlena: inflated when its flags say it is
 * compressed (and the server reads compression), else copied once.  On a
 * stream that cannot be inflated, returns NULL with the reason in *status,
 * for McValueRaise once the reply is consumed.
 */
struct varlena *
McValueDecode(McServer *srv, const char *data, size_t len, bool has_flags,
			  uint32 flags, McZStatus *status)
{
	struct varlena *v;

	*status = MC_Z_DONE;
	if (has_flags && McValueCompressed(&srv->cfg, flags))
	{
		char	   *buf = NULL;
		size_t		cap = 0;
		size_t		n = 0;

		*status = inflate_into(srv, data, len, &buf, &cap, &n);
		if (*status != MC_Z_DONE)
		{
			if (buf)
				pfree(buf);
			return NULL;
		}
		/* a value that gained less than the guess gives the slack back */
		if (cap / 2 > n)
			buf = repalloc(buf, VARHDRSZ + n);
		v = (struct varlena *) buf;
		SET_VARSIZE(v, n + VARHDRSZ);
		return v;
	}
	if (len > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("memcached value of %zu bytes is too large", len)));
	v = (struct varlena *) palloc(len + VARHDRSZ);
	SET_VARSIZE(v, len + VARHDRSZ);
	memcpy(VARDATA(v), data, len);
	return v;
}

/*
 * Inflate into a buffer the caller keeps for many values (the multi-get's):
 * *buf holds VARHDRSZ bytes of room (for a varlena header written in
 * place), then *cap bytes.  Returns the inflated bytes (*buf + VARHDRSZ),
 * their length in *outlen; raises on a bad stream (key names it).
 */
char *
McValueInflateInto(McServer *srv, const char *data, size_t len, char **buf,
				   size_t *cap, size_t *outlen, const char *key, size_t keylen)
{
	McZStatus	st = inflate_into(srv, data, len, buf, cap, outlen);

	if (st != MC_Z_DONE)
		McValueRaise(srv, st, key, keylen);
	return *buf + VARHDRSZ;
}

/* The error of a value that could not be inflated. */
void
McValueRaise(McServer *srv, McZStatus status, const char *key, size_t keylen)
{
	if (status == MC_Z_FULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("value of memcached key \"%.*s\" inflates to more than %d bytes",
						(int) keylen, key, srv->cfg.max_value_size),
				 errdetail("The server option \"max_value_size\" bounds what a compressed value may inflate to."),
				 errhint("Raise \"max_value_size\" if the value is genuine, or read the stored bytes with mc_get_raw().")));
	if (status == MC_Z_NOMEM)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("The decompressor (libdeflate or zlib) could not allocate its state.")));
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("value of memcached key \"%.*s\" is marked compressed but is not a valid zlib stream",
					(int) keylen, key),
			 errdetail("%s", status == MC_Z_TRUNCATED ? "The stream ends early." :
					   "The stream is corrupt, or is followed by other bytes."),
			 errhint("Check that the server option \"compressed_flag\" is the bit the application's client sets; mc_get_raw() returns the stored bytes.")));
}

/*
 * A value read as text (or as any type but bytea) must not be a serialized
 * object: the bytes of Ruby Marshal or Python pickle are no string, and an
 * encoding error would not say why.  Only when the server names the bit
 * (serialized_flag).  bytes_hint: how the caller's user reads the bytes.
 */
void
McValueCheckText(McServer *srv, bool has_flags, uint32 flags,
				 const char *key, size_t keylen, const char *bytes_hint)
{
	uint32		bit = srv->cfg.serialized_flag;

	if (bit != 0 && has_flags && (flags & bit) == bit)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("value of memcached key \"%.*s\" is a serialized object, not text",
						(int) keylen, key),
				 errdetail("Its flags %u carry serialized_flag %u: the client stored a Ruby Marshal or Python pickle dump.",
						   flags, bit),
				 errhint("%s, or have the application store plain strings (Dalli: raw: true; pylibmc, pymemcache: a str).  Dalli sets this flag for serializer: JSON too: for such a cache leave serialized_flag unset and read the values as text or jsonb.",
						 bytes_hint)));
}

/*
 * Deflate a value about to be written when the server compresses writes
 * and it is at least compress_threshold bytes, as the client family would:
 * *data and *len then describe a new buffer and *flags gets
 * compressed_flag.  A value that would not shrink is left alone, and so is
 * one whose flags already say it is compressed.  Returns whether it
 * deflated.
 */
bool
McValueDeflate(McServer *srv, const char **data, size_t *len, uint32 *flags)
{
	const McServerConfig *cfg = &srv->cfg;
	size_t		cap;
	size_t		zlen;
	char	   *z;

	if (!cfg->compression || cfg->compress_threshold == 0 ||
		*len < (size_t) cfg->compress_threshold ||
		McValueCompressed(cfg, *flags))
		return false;
	cap = mc_deflate_bound(*len);
	if (cap > MaxAllocSize)
		return false;
	z = palloc(cap);
	if (mc_deflate(*data, *len, cfg->compression_level, z, cap, &zlen) != MC_Z_DONE || zlen >= *len)
	{
		pfree(z);
		return false;
	}
	*data = z;
	*len = zlen;
	*flags |= cfg->compressed_flag;
	return true;
}

/*
 * Is this value valid text in the database encoding?  Every server encoding
 * is ASCII-compatible, so ASCII without NUL bytes is valid in all of them:
 * check eight bytes at a time for a high bit or a zero byte, and leave the
 * full verification to the rest.
 */
bool
McValueTextValid(const char *p, size_t len)
{
	const char *start = p;
	const char *end = p + len;
	uint64		acc = 0;

#ifdef __SSE2__
	/* sixteen bytes a step: a high bit, or a zero byte (made 0xff by cmpeq) */
	{
		const __m128i zero = _mm_setzero_si128();
		__m128i		vacc = zero;

		if (len >= 16)
		{
			__m128i		v;

			while (end - p > 16)
			{
				v = _mm_loadu_si128((const __m128i *) p);
				vacc = _mm_or_si128(vacc, _mm_or_si128(v, _mm_cmpeq_epi8(v, zero)));
				p += 16;
			}
			/* the last sixteen bytes, overlapping what was already seen */
			v = _mm_loadu_si128((const __m128i *) (end - 16));
			vacc = _mm_or_si128(vacc, _mm_or_si128(v, _mm_cmpeq_epi8(v, zero)));
			return _mm_movemask_epi8(vacc) == 0 ||
				pg_verifymbstr(start, (int) len, true);
		}
	}
#endif
	/* one test at the end: any high bit or zero byte in any word */
	while (end - p >= 8)
	{
		uint64		w;

		memcpy(&w, p, 8);
		acc |= w | ((w - UINT64CONST(0x0101010101010101)) & ~w);
		p += 8;
	}
	if (acc & UINT64CONST(0x8080808080808080))
		return pg_verifymbstr(start, (int) len, true);
	for (; p < end; p++)
		if (*p == '\0' || IS_HIGHBIT_SET(*p))
			return pg_verifymbstr(start, (int) len, true);
	return true;
}
