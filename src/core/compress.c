/*
 * compress.c — zlib streams for values compressed by memcached clients
 * (see compress.h for the contract).
 *
 * Owns: the process's one libdeflate decompressor and compressor, and its
 * one zlib inflate stream.  Dalli, pylibmc and pymemcache all write the
 * zlib format (RFC 1950: header, deflate data, Adler-32), so that is the
 * only format read or written here; a raw deflate or gzip stream is
 * corrupt.  Must not: include PostgreSQL headers or decide how large a
 * value may grow (the caller does, between steps).
 *
 * libdeflate inflates about twice as fast as zlib (docs/benchmarks.md) but
 * only in one shot, into a buffer that must hold the whole value, and it
 * tells neither how far it got nor a truncated stream from a corrupt one.
 * So a value's steps try libdeflate into the caller's buffer, starting
 * over into each larger buffer the caller grows (a buffer that doubles
 * costs at most twice the value's own work, all of it at libdeflate's
 * speed, so the caller may start small); when a step does not end cleanly
 * for another reason (the stream is bad), or the buffer already has the
 * caller's bound, the value starts over in zlib's inflate, which goes on
 * in steps and says exactly why: a value the buffer holds costs one
 * libdeflate call, and every other outcome (a zip bomb, a truncated or
 * corrupt stream: a truncated one may fill a buffer with libdeflate's
 * guesses past its end) is what zlib alone said.  Writes use
 * libdeflate's zlib format at the server's level (6, zlib's default,
 * unless the option says otherwise), readable by every zlib.
 */
#include "compress.h"

#include <limits.h>
#include <string.h>

#include <libdeflate.h>
#include <zlib.h>

static struct libdeflate_decompressor *ld_inf;
static const unsigned char *inf_src;	/* the value being inflated */
static size_t inf_len;
static size_t inf_bound;		/* the largest buffer the caller grows to */
static bool inf_zlib;			/* this value went over to zlib */

static z_stream inf;
static bool inf_ready;
static const unsigned char *inf_next;	/* input not yet handed to zlib */
static size_t inf_left;

/* one compressor per level in use, made on its first value */
static struct libdeflate_compressor *ld_def[MC_DEFLATE_MAX_LEVEL + 1];

McZStatus
mc_inflate_start(const void *src, size_t len, size_t bound)
{
	if (ld_inf == NULL && (ld_inf = libdeflate_alloc_decompressor()) == NULL)
		return MC_Z_NOMEM;
	inf_src = src;
	inf_len = len;
	inf_bound = bound;
	inf_zlib = false;
	return MC_Z_DONE;
}

/* Start the value over in zlib's inflate, from its first byte. */
static McZStatus
zlib_start(void)
{
	if (!inf_ready)
	{
		memset(&inf, 0, sizeof(inf));
		if (inflateInit(&inf) != Z_OK)
			return MC_Z_NOMEM;
		inf_ready = true;
	}
	else if (inflateReset(&inf) != Z_OK)
		return MC_Z_NOMEM;
	inf.next_in = NULL;
	inf.avail_in = 0;
	inf_next = inf_src;
	inf_left = inf_len;
	inf_zlib = true;
	return MC_Z_DONE;
}

McZStatus
mc_inflate_more(char *dst, size_t cap, size_t *produced)
{
	if (!inf_zlib)
	{
		size_t		base = *produced;
		size_t		in_used = 0;
		size_t		out = 0;
		enum libdeflate_result rc = LIBDEFLATE_INSUFFICIENT_SPACE;
		McZStatus	st;

		/*
		 * One shot into the rest of the buffer: done only when the stream
		 * ended exactly at the value's last byte (anything after it is
		 * CORRUPT, which zlib below says).  Too small a buffer under the
		 * bound keeps nothing: the caller grows it and this starts over.
		 */
		if (base < cap)
			rc = libdeflate_zlib_decompress_ex(ld_inf, inf_src, inf_len, dst + base,
											   cap - base, &in_used, &out);
		if (rc == LIBDEFLATE_SUCCESS && in_used == inf_len)
		{
			*produced = base + out;
			return MC_Z_DONE;
		}
		if (rc == LIBDEFLATE_INSUFFICIENT_SPACE && cap < inf_bound)
			return MC_Z_FULL;
		if ((st = zlib_start()) != MC_Z_DONE)
			return st;
	}
	for (;;)
	{
		uInt		out;
		int			rc;

		/* zlib counts in uInt: feed the input in pieces it can count */
		if (inf.avail_in == 0 && inf_left > 0)
		{
			uInt		chunk = inf_left > UINT_MAX ? UINT_MAX : (uInt) inf_left;

			inf.next_in = (unsigned char *) inf_next;
			inf.avail_in = chunk;
			inf_next += chunk;
			inf_left -= chunk;
		}
		if (*produced >= cap)
			return MC_Z_FULL;
		out = cap - *produced > UINT_MAX ? UINT_MAX : (uInt) (cap - *produced);
		inf.next_out = (unsigned char *) dst + *produced;
		inf.avail_out = out;
		rc = inflate(&inf, Z_NO_FLUSH);
		*produced += out - inf.avail_out;
		switch (rc)
		{
			case Z_STREAM_END:
				/* a value is one stream: anything after it is not ours */
				return (inf.avail_in > 0 || inf_left > 0) ? MC_Z_CORRUPT : MC_Z_DONE;
			case Z_OK:
				break;
			case Z_BUF_ERROR:
				/* no progress: either the output is full or the input ended */
				if (inf.avail_out == 0)
					break;
				return MC_Z_TRUNCATED;
			case Z_MEM_ERROR:
				return MC_Z_NOMEM;
			default:			/* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
				return MC_Z_CORRUPT;
		}
	}
}

size_t
mc_deflate_bound(size_t len)
{
	/* NULL: a bound for every compression level */
	return libdeflate_zlib_compress_bound(NULL, len);
}

McZStatus
mc_deflate(const void *src, size_t len, int level, char *dst, size_t cap,
		   size_t *outlen)
{
	struct libdeflate_compressor **c;
	size_t		n;

	if (level < MC_DEFLATE_MIN_LEVEL || level > MC_DEFLATE_MAX_LEVEL)
		level = MC_DEFLATE_DEFAULT_LEVEL;
	c = &ld_def[level];
	if (*c == NULL && (*c = libdeflate_alloc_compressor(level)) == NULL)
		return MC_Z_NOMEM;
	/* 0: the stream did not fit in cap */
	n = libdeflate_zlib_compress(*c, src, len, dst, cap);
	if (n == 0)
		return MC_Z_FULL;
	*outlen = n;
	return MC_Z_DONE;
}

void
mc_compress_release(void)
{
	libdeflate_free_decompressor(ld_inf);
	ld_inf = NULL;
	for (int i = 0; i <= MC_DEFLATE_MAX_LEVEL; i++)
	{
		libdeflate_free_compressor(ld_def[i]);
		ld_def[i] = NULL;
	}
	if (inf_ready)
		inflateEnd(&inf);
	inf_ready = false;
	inf_zlib = false;
}
