/*
 * compress.c — zlib streams for values compressed by memcached clients
 * (see compress.h for the contract).
 *
 * Owns: the process's one libdeflate decompressor, ISA-L deflate state and
 * zlib inflate stream.  Dalli, pylibmc and pymemcache all write the
 * zlib format (RFC 1950: header, deflate data, Adler-32), so that is the
 * only format read or written here; a raw deflate or gzip stream is
 * corrupt.  Must not: include PostgreSQL headers or decide how large a
 * value may grow (the caller does, between steps).
 *
 * libdeflate inflates about twice as fast as zlib (docs/benchmarks.md) but
 * only in one shot, into a buffer that must hold the whole value, and it
 * tells neither how far it got nor a truncated stream from a corrupt one.
 * So a value's first step tries libdeflate into the caller's buffer; when
 * that does not end cleanly (the buffer is too small, or the stream is
 * bad) the value starts over in zlib's inflate, which then goes on in
 * steps and says exactly why a stream is bad: a value the first buffer
 * holds costs one libdeflate call, and every other outcome (a value larger
 * than the first guess, a zip bomb, a truncated or corrupt stream) is what
 * zlib alone said, at most one libdeflate attempt later.
 *
 * Writes use ISA-L's deflate (igzip) at its level 1: on 8 KB values it is
 * 2.6x (hex digests) to 4.5x (JSON) faster than libdeflate's level 6, for
 * streams 2 % and 16 % larger (docs/benchmarks.md); its level 3 is no
 * faster on digests and leaves a zip bomb's zeros three times larger.  The
 * header says level 6 ("78 9c", as Dalli, pylibmc and pymemcache write it):
 * the level bits of a zlib header only hint whether recompressing would
 * pay (RFC 1950), no reader looks at them, and a value keeps the shape the
 * clients give it.
 */
#include "compress.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <zlib.h>

static struct libdeflate_decompressor *ld_inf;
static const unsigned char *inf_src;	/* the value being inflated */
static size_t inf_len;
static bool inf_zlib;			/* this value went over to zlib */

static z_stream inf;
static bool inf_ready;
static const unsigned char *inf_next;	/* input not yet handed to zlib */
static size_t inf_left;

static struct isal_zstream def;
static unsigned char *def_level_buf;	/* ISA-L's hash tables for level 1 */

#define DEFLATE_LEVEL 1
#define DEFLATE_LEVEL_BUF ISAL_DEF_LVL1_DEFAULT

McZStatus
mc_inflate_start(const void *src, size_t len)
{
	if (ld_inf == NULL && (ld_inf = libdeflate_alloc_decompressor()) == NULL)
		return MC_Z_NOMEM;
	inf_src = src;
	inf_len = len;
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
		McZStatus	st;

		/*
		 * One shot into the rest of the buffer: done only when the stream
		 * ended exactly at the value's last byte (anything after it is
		 * CORRUPT, which zlib below says).
		 */
		if (base < cap &&
			libdeflate_zlib_decompress_ex(ld_inf, inf_src, inf_len, dst + base,
										  cap - base, &in_used, &out) == LIBDEFLATE_SUCCESS &&
			in_used == inf_len)
		{
			*produced = base + out;
			return MC_Z_DONE;
		}
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
	/*
	 * libdeflate's bound for any level: stored blocks with their headers,
	 * the most ISA-L's one shot writes too (it falls back to stored blocks)
	 */
	return libdeflate_zlib_compress_bound(NULL, len);
}

McZStatus
mc_deflate(const void *src, size_t len, char *dst, size_t cap, size_t *outlen)
{
	int			rc;

	/* ISA-L counts in 32 bits; values are far smaller (MaxAllocSize) */
	if (len > UINT32_MAX || cap < 2)
		return MC_Z_FULL;
	if (def_level_buf == NULL && (def_level_buf = malloc(DEFLATE_LEVEL_BUF)) == NULL)
		return MC_Z_NOMEM;
	isal_deflate_stateless_init(&def);
	def.level = DEFLATE_LEVEL;
	def.level_buf = def_level_buf;
	def.level_buf_size = DEFLATE_LEVEL_BUF;
	def.gzip_flag = IGZIP_ZLIB;
	def.flush = NO_FLUSH;
	def.end_of_stream = 1;
	def.next_in = (uint8_t *) src;
	def.avail_in = (uint32_t) len;
	def.next_out = (uint8_t *) dst;
	def.avail_out = cap > UINT32_MAX ? UINT32_MAX : (uint32_t) cap;
	rc = isal_deflate_stateless(&def);
	/* STATELESS_OVERFLOW: the stream did not fit in cap */
	if (rc != COMP_OK)
		return MC_Z_FULL;
	/*
	 * ISA-L's header says "fastest" (78 01); write the clients' (78 9c):
	 * the same method and window, FLEVEL 2 and its check bits, no
	 * dictionary.  Only the hint changes (see the top of the file).
	 */
	if ((unsigned char) dst[0] == 0x78 && (unsigned char) dst[1] == 0x01)
		dst[1] = (char) 0x9c;
	*outlen = def.total_out;
	return MC_Z_DONE;
}

void
mc_compress_release(void)
{
	libdeflate_free_decompressor(ld_inf);
	ld_inf = NULL;
	free(def_level_buf);
	def_level_buf = NULL;
	if (inf_ready)
		inflateEnd(&inf);
	inf_ready = false;
	inf_zlib = false;
}
