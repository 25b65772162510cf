/*
 * test_compress.c — src/core/compress.c: zlib streams in, zlib streams out.
 *
 * Owns: proving that what mc_deflate writes inflates back byte for byte at
 * every size class, that mc_inflate_more can be driven into a buffer that
 * grows (and moves) between steps, that a stream much larger than its
 * input stops at the caller's bound (a zip bomb costs the bound, not the
 * bomb), and that every prefix of a stream is TRUNCATED and every damaged
 * stream (flipped bits, trailing bytes, gzip or raw deflate framing) is
 * reported, never inflated to other bytes; and that every compression
 * level writes a stream zlib itself reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "compress.h"
#include "tap.h"

/* zlib.compress(b"hello") in Python: what pylibmc and Dalli would store. */
static const unsigned char HELLO_Z[] = {
	0x78, 0x9c, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x06, 0x2c, 0x02, 0x15
};

/* Inflate src into a buffer that starts at cap0 and doubles (realloc) up to limit. */
static McZStatus
inflate_grow(const void *src, size_t len, size_t cap0, size_t limit,
			 char **out, size_t *outlen)
{
	size_t		cap = cap0;
	size_t		produced = 0;
	char	   *buf = malloc(cap);
	McZStatus	st = mc_inflate_start(src, len, limit);

	if (st != MC_Z_DONE)
		return st;
	while ((st = mc_inflate_more(buf, cap, &produced)) == MC_Z_FULL && cap < limit)
	{
		cap = cap * 2 > limit ? limit : cap * 2;
		buf = realloc(buf, cap);
	}
	*out = buf;
	*outlen = produced;
	return st;
}

static void
fill(unsigned char *p, size_t n, unsigned seed, int kind)
{
	for (size_t i = 0; i < n; i++)
	{
		seed = seed * 1103515245u + 12345u;
		p[i] = kind == 0 ? 'a' + (seed >> 16) % 4 :	/* compressible text */
			kind == 1 ? (unsigned char) (seed >> 16) :	/* incompressible */
			(unsigned char) (i / 97);	/* runs */
	}
}

int
main(void)
{
	static const size_t sizes[] = {0, 1, 2, 100, 4095, 4096, 8192, 65536, 1000003};
	char	   *out;
	size_t		outlen;
	McZStatus	st;

	/* a known stream */
	st = inflate_grow(HELLO_Z, sizeof(HELLO_Z), 1, 64, &out, &outlen);
	tap_ok(st == MC_Z_DONE && outlen == 5 && memcmp(out, "hello", 5) == 0,
		   "zlib.compress(b'hello') inflates to hello through a 1-byte start");
	free(out);

	/* round trips, buffers starting small, exact-size and one-short bounds */
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (int kind = 0; kind < 3; kind++)
		{
			size_t		n = sizes[s];
			unsigned char *src = malloc(n + 1);
			size_t		cap = mc_deflate_bound(n);
			char	   *z = malloc(cap);
			size_t		zlen = 0;
			bool		ok;

			fill(src, n, (unsigned) (n * 7 + kind), kind);
			st = mc_deflate(src, n, MC_DEFLATE_DEFAULT_LEVEL, z, cap, &zlen);
			ok = tap_ok(st == MC_Z_DONE && zlen >= 2 && (unsigned char) z[0] == 0x78 &&
						(unsigned char) z[1] == 0x9c,
						"deflate %zu bytes (kind %d): %zu bytes, zlib header 78 9c", n, kind, zlen);
			if (!ok)
				continue;
			st = inflate_grow(z, zlen, 16, n + 1, &out, &outlen);
			tap_ok(st == MC_Z_DONE && outlen == n && memcmp(out, src, n) == 0,
				   "inflate %zu bytes (kind %d) through a growing buffer", n, kind);
			free(out);
			/* a buffer of exactly n: the stream's end fits */
			if (n > 0)
			{
				st = inflate_grow(z, zlen, n, n, &out, &outlen);
				tap_ok(st == MC_Z_DONE && outlen == n, "inflate %zu bytes into exactly %zu", n, n);
				free(out);
				st = inflate_grow(z, zlen, n - 1 ? n - 1 : 1, n - 1 ? n - 1 : 1, &out, &outlen);
				tap_ok(n == 1 ? st == MC_Z_DONE || st == MC_Z_FULL : st == MC_Z_FULL,
					   "inflate %zu bytes into %zu: FULL", n, n - 1);
				free(out);
			}
			/* every prefix is truncated (sampled for the big ones) */
			if (n <= 8192)
			{
				bool		all = true;

				for (size_t cut = 0; cut < zlen; cut++)
				{
					st = inflate_grow(z, cut, 64, n + 64, &out, &outlen);
					all &= (st == MC_Z_TRUNCATED);
					free(out);
				}
				tap_ok(all, "every prefix of the %zu-byte stream is TRUNCATED", zlen);
			}
			free(src);
			free(z);
		}

	/*
	 * Damaged streams: a flip in the header or the Adler-32 is always
	 * caught; inside the data Adler-32 is weak (zlib itself accepts a few
	 * flips with other bytes of the same length), so only most are.
	 */
	{
		unsigned char src[5000];
		char		z[6000];
		size_t		zlen;
		bool		frame_caught = true;
		int			wrong = 0;
		int			flips = 0;

		fill(src, sizeof(src), 42, 0);
		mc_deflate(src, sizeof(src), MC_DEFLATE_DEFAULT_LEVEL, z, sizeof(z), &zlen);
		for (size_t i = 0; i < zlen; i++)
			for (int bit = 0; bit < 8; bit += 3)
			{
				bool		bad;

				z[i] ^= (char) (1 << bit);
				st = inflate_grow(z, zlen, 64, 100000, &out, &outlen);
				/* padding bits after the last block are ignored by design */
				bad = st == MC_Z_DONE &&
					!(outlen == sizeof(src) && memcmp(out, src, outlen) == 0);
				wrong += bad;
				flips++;
				if (i < 2 || i >= zlen - 4)
					frame_caught &= (st == MC_Z_CORRUPT);
				free(out);
				z[i] ^= (char) (1 << bit);
			}
		tap_ok(frame_caught, "every flipped bit of the header and the Adler-32 is CORRUPT");
		tap_ok(wrong * 100 < flips, "%d of %d flipped bits inflate to other bytes (under 1%%)",
			   wrong, flips);

		z[zlen] = 'x';
		st = inflate_grow(z, zlen + 1, 64, 100000, &out, &outlen);
		tap_ok(st == MC_Z_CORRUPT, "a byte after the stream's end is CORRUPT");
		free(out);
		st = inflate_grow(z + 2, zlen - 2, 64, 100000, &out, &outlen);
		tap_ok(st == MC_Z_CORRUPT, "raw deflate (no zlib header) is CORRUPT");
		free(out);
	}
	{
		static const unsigned char gz[] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 0x03,
		0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00};

		st = inflate_grow(gz, sizeof(gz), 64, 1000, &out, &outlen);
		tap_ok(st == MC_Z_CORRUPT, "a gzip stream is CORRUPT");
		free(out);
		st = inflate_grow("", 0, 64, 1000, &out, &outlen);
		tap_ok(st == MC_Z_TRUNCATED, "an empty value is TRUNCATED");
		free(out);
		st = inflate_grow("plain text value", 16, 64, 1000, &out, &outlen);
		tap_ok(st == MC_Z_CORRUPT, "plain text is CORRUPT");
		free(out);
	}

	/* a zip bomb: 256 MB of zeros in a few hundred kB stops at the bound */
	{
		size_t		n = 256u << 20;
		unsigned char *zeros = calloc(n, 1);
		size_t		cap = mc_deflate_bound(n);
		char	   *z = malloc(cap);
		size_t		zlen = 0;

		st = mc_deflate(zeros, n, MC_DEFLATE_DEFAULT_LEVEL, z, cap, &zlen);
		free(zeros);
		tap_ok(st == MC_Z_DONE && zlen < n / 500, "256 MB of zeros deflate to %zu bytes", zlen);
		st = inflate_grow(z, zlen, 4096, (1u << 20) + 1, &out, &outlen);
		tap_ok(st == MC_Z_FULL && outlen == (1u << 20) + 1,
			   "the bomb inflates no further than the 1 MB + 1 bound (%zu)", outlen);
		free(out);
		/* the stream is reset for the next value */
		st = inflate_grow(HELLO_Z, sizeof(HELLO_Z), 64, 64, &out, &outlen);
		tap_ok(st == MC_Z_DONE && outlen == 5, "the next value inflates after an abandoned one");
		free(out);
		free(z);
	}

	/*
	 * The bound at its exact edges, the way values.c applies
	 * max_value_size: it inflates into at most max + 1 bytes and refuses
	 * when all of them were produced.  A value of exactly max passes, one
	 * byte more is refused, whether the first buffer holds the whole value
	 * (libdeflate's one shot) or not (zlib goes on from a small buffer).
	 */
	{
		size_t		max = 1u << 20;
		static const size_t firsts[] = {4096, (1u << 20) + 1};

		for (size_t f = 0; f < 2; f++)
			for (size_t extra = 0; extra <= 2; extra++)
			{
				size_t		n = max + extra;
				unsigned char *src = malloc(n);
				size_t		cap = mc_deflate_bound(n);
				char	   *z = malloc(cap);
				size_t		zlen = 0;
				bool		refused;

				fill(src, n, (unsigned) (extra + 1), 0);
				mc_deflate(src, n, MC_DEFLATE_DEFAULT_LEVEL, z, cap, &zlen);
				st = inflate_grow(z, zlen, firsts[f], max + 1, &out, &outlen);
				refused = st == MC_Z_FULL || (st == MC_Z_DONE && outlen >= max + 1);
				if (extra == 0)
					tap_ok(st == MC_Z_DONE && outlen == max && memcmp(out, src, max) == 0 && !refused,
						   "a value of exactly max_value_size inflates (first buffer %zu)", firsts[f]);
				else
					tap_ok(refused && outlen == max + 1,
						   "a value of max_value_size + %zu is refused at max + 1 bytes (first buffer %zu)",
						   extra, firsts[f]);
				free(out);
				free(src);
				free(z);
			}
	}

	/*
	 * The first buffer too small: libdeflate's one shot fails, zlib starts
	 * over and goes on through a buffer that grows and moves; the bytes are
	 * the value's, every first size around the value's own.
	 */
	{
		size_t		n = 8192;
		unsigned char src[8192];
		char		z[9000];
		size_t		zlen;
		bool		all = true;

		fill(src, n, 7, 0);
		mc_deflate(src, n, MC_DEFLATE_DEFAULT_LEVEL, z, sizeof(z), &zlen);
		for (size_t first = 1; first <= n + 2; first += (first < n - 2 ? 997 : 1))
		{
			st = inflate_grow(z, zlen, first, n + 1, &out, &outlen);
			all &= st == MC_Z_DONE && outlen == n && memcmp(out, src, n) == 0;
			free(out);
		}
		tap_ok(all, "first buffers from 1 to %zu bytes all inflate the %zu-byte value", n + 2, n);

		/* a truncated stream into a buffer that would hold the value: TRUNCATED */
		st = inflate_grow(z, zlen / 2, n, n, &out, &outlen);
		tap_ok(st == MC_Z_TRUNCATED, "half a stream into a buffer of the whole value is TRUNCATED");
		free(out);
		/* and a stream after a failed one goes back to the one shot */
		st = inflate_grow(z, zlen, n, n, &out, &outlen);
		tap_ok(st == MC_Z_DONE && outlen == n && memcmp(out, src, n) == 0,
			   "the next value inflates whole after a truncated one");
		free(out);
	}
	/*
	 * Under the caller's bound, too small a buffer keeps nothing: the next,
	 * larger one starts the value over in one shot.  At the bound, FULL is
	 * zlib's word, with the bound's bytes produced.
	 */
	{
		size_t		n = 8192;
		unsigned char src[8192];
		char		z[9000];
		char		dst[8193];
		size_t		zlen;
		size_t		produced = 0;

		fill(src, n, 11, 0);
		mc_deflate(src, n, MC_DEFLATE_DEFAULT_LEVEL, z, sizeof(z), &zlen);
		mc_inflate_start(z, zlen, n + 1);
		st = mc_inflate_more(dst, 100, &produced);
		tap_ok(st == MC_Z_FULL && produced == 0,
			   "under the bound, a 100-byte buffer is FULL and keeps nothing (%zu)", produced);
		st = mc_inflate_more(dst, n + 1, &produced);
		tap_ok(st == MC_Z_DONE && produced == n && memcmp(dst, src, n) == 0,
			   "the larger buffer then holds the whole value");
		produced = 0;
		mc_inflate_start(z, zlen, 100);
		st = mc_inflate_more(dst, 100, &produced);
		tap_ok(st == MC_Z_FULL && produced == 100 && memcmp(dst, src, 100) == 0,
			   "at a bound of 100, FULL with the first 100 bytes produced (%zu)", produced);
	}
	/*
	 * Every level (the server option compression_level) writes a zlib
	 * stream with a valid header that zlib's own uncompress() reads back,
	 * and that inflates here; an out-of-range level writes the default's.
	 */
	for (int level = MC_DEFLATE_MIN_LEVEL - 1; level <= MC_DEFLATE_MAX_LEVEL + 1; level++)
	{
		size_t		n = 20000;
		unsigned char *src = malloc(n);
		size_t		cap = mc_deflate_bound(n);
		char	   *z = malloc(cap);
		unsigned char *back = malloc(n);
		uLongf		backlen = n;
		size_t		zlen = 0;
		unsigned	hdr;

		fill(src, n, (unsigned) level, 0);
		st = mc_deflate(src, n, level, z, cap, &zlen);
		hdr = ((unsigned char) z[0] << 8) | (unsigned char) z[1];
		tap_ok(st == MC_Z_DONE && zlen < n && (unsigned char) z[0] == 0x78 && hdr % 31 == 0,
			   "level %d: %zu bytes deflate to %zu, header %04x", level, n, zlen, hdr);
		tap_ok(uncompress(back, &backlen, (unsigned char *) z, zlen) == Z_OK &&
			   backlen == n && memcmp(back, src, n) == 0,
			   "level %d: zlib's uncompress reads the stream back", level);
		st = inflate_grow(z, zlen, 1024, n + 1, &out, &outlen);
		tap_ok(st == MC_Z_DONE && outlen == n && memcmp(out, src, n) == 0,
			   "level %d: the stream inflates here", level);
		if (level == MC_DEFLATE_MIN_LEVEL || level == MC_DEFLATE_DEFAULT_LEVEL)
			tap_ok(hdr == (level == MC_DEFLATE_MIN_LEVEL ? 0x7801u : 0x789cu),
				   "level %d writes zlib's header for it (%04x)", level, hdr);
		free(out);
		free(src);
		free(z);
		free(back);
	}
	mc_compress_release();
	return tap_done();
}
