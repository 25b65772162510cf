/*
 * compress.c — zlib streams for values compressed by memcached clients
 * (see compress.h for the contract).
 *
 * Owns: the process's one inflate and one deflate stream.  Dalli, pylibmc
 * and pymemcache all write the zlib format (RFC 1950: header, deflate data,
 * Adler-32), so that is the only format read or written here; a raw
 * deflate or gzip stream is corrupt.  Must not: include PostgreSQL headers
 * or decide how large a value may grow (the caller does, between steps).
 */
#include "compress.h"

#include <limits.h>
#include <string.h>

#include <zlib.h>

static z_stream inf;
static bool inf_ready;
static const unsigned char *inf_next;	/* input not yet handed to zlib */
static size_t inf_left;

static z_stream def;
static bool def_ready;

McZStatus
mc_inflate_start(const void *src, size_t len)
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
	inf_next = src;
	inf_left = len;
	return MC_Z_DONE;
}

McZStatus
mc_inflate_more(char *dst, size_t cap, size_t *produced)
{
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
	return len > UINT_MAX / 2 ? len + len / 1000 + 64 : (size_t) compressBound((uLong) len);
}

McZStatus
mc_deflate(const void *src, size_t len, char *dst, size_t cap, size_t *outlen)
{
	int			rc;

	if (len > UINT_MAX || cap > UINT_MAX)
		return MC_Z_FULL;
	if (!def_ready)
	{
		memset(&def, 0, sizeof(def));
		if (deflateInit(&def, Z_DEFAULT_COMPRESSION) != Z_OK)
			return MC_Z_NOMEM;
		def_ready = true;
	}
	else if (deflateReset(&def) != Z_OK)
		return MC_Z_NOMEM;
	def.next_in = (unsigned char *) src;
	def.avail_in = (uInt) len;
	def.next_out = (unsigned char *) dst;
	def.avail_out = (uInt) cap;
	rc = deflate(&def, Z_FINISH);
	if (rc == Z_MEM_ERROR)
		return MC_Z_NOMEM;
	if (rc != Z_STREAM_END)
		return MC_Z_FULL;
	*outlen = cap - def.avail_out;
	return MC_Z_DONE;
}
