/*
 * inflate_bench.c — zlib against libdeflate on the values memcached clients
 * compress: inflate and deflate, side by side in one run.
 *
 * Owns: nothing but the benchmark.  The values are 8 KB: JSON-ish records
 * (what an application caches) and the hex digests of make bench's
 * workload 12.  They are deflated with zlib at level 6 (Z_DEFAULT_COMPRESSION:
 * what Dalli's Zlib::Deflate.deflate, pylibmc's and pymemcache's
 * zlib.compress write), then each library inflates all of them: zlib with
 * one z_stream reset per value (compress.c's old path), libdeflate with one
 * decompressor into a buffer of exactly the value, into one of 4x the
 * compressed size doubling on LIBDEFLATE_INSUFFICIENT_SPACE, and
 * src/core/compress.c as values.c drives it: a first buffer of 8x the compressed
 * size (values.c's guess: one libdeflate call) and of 2x (too small: one
 * libdeflate attempt, then zlib from the start).  Deflate: zlib's and
 * libdeflate's level 6.  Prints the median of many rounds in ns per value,
 * and the ratios to zlib.
 *
 * Build: cc -O2 -Isrc/core -o inflate_bench test/bench/inflate_bench.c src/core/compress.c -lz -ldeflate
 * Usage: inflate_bench [values] [rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libdeflate.h>
#include <zlib.h>

#include "compress.h"

#define VLEN 8192

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp_d(const void *a, const void *b)
{
	double		x = *(const double *) a, y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_d);
	return v[n / 2];
}

static unsigned seed = 12345;

static unsigned
rnd(void)
{
	seed = seed * 1103515245u + 12345u;
	return seed >> 8;
}

/* An 8 KB JSON-ish record: repeated field names, varied numbers and words. */
static void
make_json(char *p, size_t n)
{
	static const char *words[] = {"alpha", "bravo", "charlie", "delta", "echo",
		"foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike",
	"november", "oscar", "papa"};
	size_t		off = 0;

	off += snprintf(p, n, "{\"user\":%u,\"items\":[", rnd() % 1000000);
	while (off < n - 200)
	{
		unsigned	r[9];

		/*
		 * Drawn before the call, in a fixed order (the sku first, the id
		 * last), so every compiler makes the same values as bench.py's
		 * json_values; a call's argument order is unspecified in C.
		 */
		for (int i = 0; i < 9; i++)
			r[i] = rnd();
		off += snprintf(p + off, n - off,
						"{\"id\":%u,\"name\":\"%s %s\",\"price\":%u.%02u,\"qty\":%u,"
						"\"tags\":[\"%s\",\"%s\"],\"sku\":\"%08x\"},",
						r[8] % 100000, words[r[7] % 16], words[r[6] % 16],
						r[5] % 1000, r[4] % 100, r[3] % 20,
						words[r[2] % 16], words[r[1] % 16], r[0]);
	}
	while (off < n)
		p[off++] = ' ';
}

/* make bench's workload 12: 256 md5 hex digests (compressible about 2:1). */
static void
make_hex(char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = "0123456789abcdef"[(rnd() >> 16) & 15];
}

typedef struct
{
	unsigned char *z;
	size_t		zlen;
} Blob;

static void
run(const char *name, void (*make) (char *, size_t), int nvals, int rounds)
{
	Blob	   *b = calloc(nvals, sizeof(Blob));
	char	   *out = malloc(VLEN * 8);
	double	   *t_zlib = calloc(rounds, sizeof(double));
	double	   *t_ld = calloc(rounds, sizeof(double));
	double	   *t_ld4 = calloc(rounds, sizeof(double));
	double	   *t_c8 = calloc(rounds, sizeof(double));
	double	   *t_c2 = calloc(rounds, sizeof(double));
	double	   *t_zdef = calloc(rounds, sizeof(double));
	double	   *t_lddef = calloc(rounds, sizeof(double));
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
	char	  **plains = calloc(nvals, sizeof(char *));
	size_t		ztotal = 0,
				ldtotal = 0;
	z_stream	zs,
				zd;
	volatile size_t sink = 0;

	memset(&zs, 0, sizeof(zs));
	memset(&zd, 0, sizeof(zd));
	inflateInit(&zs);
	deflateInit(&zd, Z_DEFAULT_COMPRESSION);
	for (int i = 0; i < nvals; i++)
	{
		uLongf		zl = compressBound(VLEN);

		plains[i] = malloc(VLEN);
		make(plains[i], VLEN);
		b[i].z = malloc(zl);
		compress2(b[i].z, &zl, (unsigned char *) plains[i], VLEN, Z_DEFAULT_COMPRESSION);
		b[i].zlen = zl;
		ztotal += zl;
	}
	for (int r = 0; r < rounds; r++)
	{
		double		t0;

		/* zlib: one stream, reset per value */
		t0 = now_ns();
		for (int i = 0; i < nvals; i++)
		{
			inflateReset(&zs);
			zs.next_in = b[i].z;
			zs.avail_in = b[i].zlen;
			zs.next_out = (unsigned char *) out;
			zs.avail_out = VLEN * 8;
			if (inflate(&zs, Z_FINISH) != Z_STREAM_END || zs.total_out != VLEN)
				abort();
			sink += out[i % VLEN];
		}
		t_zlib[r] = (now_ns() - t0) / nvals;

		/* libdeflate, a buffer of exactly the value */
		t0 = now_ns();
		for (int i = 0; i < nvals; i++)
		{
			size_t		n;

			if (libdeflate_zlib_decompress(d, b[i].z, b[i].zlen, out, VLEN, &n) != LIBDEFLATE_SUCCESS)
				abort();
			sink += out[i % VLEN];
		}
		t_ld[r] = (now_ns() - t0) / nvals;

		/* libdeflate as values.c drives it: 4x the input (min 1024), doubling */
		t0 = now_ns();
		for (int i = 0; i < nvals; i++)
		{
			size_t		cap = b[i].zlen * 4 < 1024 ? 1024 : b[i].zlen * 4;
			size_t		n;
			enum libdeflate_result rc;

			while ((rc = libdeflate_zlib_decompress(d, b[i].z, b[i].zlen, out, cap, &n)) ==
				   LIBDEFLATE_INSUFFICIENT_SPACE)
				cap *= 2;
			if (rc != LIBDEFLATE_SUCCESS || n != VLEN)
				abort();
			sink += out[i % VLEN];
		}
		t_ld4[r] = (now_ns() - t0) / nvals;

		/* compress.c, first buffer 8x and 2x the compressed size */
		for (int k = 0; k < 2; k++)
		{
			size_t		mult = k == 0 ? 8 : 2;

			t0 = now_ns();
			for (int i = 0; i < nvals; i++)
			{
				size_t		cap = b[i].zlen * mult;
				size_t		n = 0;
				McZStatus	st;

				mc_inflate_start(b[i].z, b[i].zlen, VLEN * 8);
				while ((st = mc_inflate_more(out, cap, &n)) == MC_Z_FULL)
					cap *= 2;
				if (st != MC_Z_DONE || n != VLEN)
					abort();
				sink += out[i % VLEN];
			}
			(k == 0 ? t_c8 : t_c2)[r] = (now_ns() - t0) / nvals;
		}

		/* deflate at level 6: zlib (one stream, reset) and libdeflate */
		t0 = now_ns();
		for (int i = 0; i < nvals; i++)
		{
			deflateReset(&zd);
			zd.next_in = (unsigned char *) plains[i];
			zd.avail_in = VLEN;
			zd.next_out = (unsigned char *) out;
			zd.avail_out = VLEN * 2;
			if (deflate(&zd, Z_FINISH) != Z_STREAM_END)
				abort();
			sink += out[i % 64];
		}
		t_zdef[r] = (now_ns() - t0) / nvals;
		ldtotal = 0;
		t0 = now_ns();
		for (int i = 0; i < nvals; i++)
		{
			size_t		n = libdeflate_zlib_compress(c, plains[i], VLEN, out, VLEN * 2);

			if (n == 0)
				abort();
			ldtotal += n;
			sink += out[i % 64];
		}
		t_lddef[r] = (now_ns() - t0) / nvals;
	}
	{
		double		mz = median(t_zlib, rounds),
					ml = median(t_ld, rounds),
					ml4 = median(t_ld4, rounds),
					mc8 = median(t_c8, rounds),
					mc2 = median(t_c2, rounds),
					mzd = median(t_zdef, rounds),
					mld = median(t_lddef, rounds);

		printf("%s: %d values of %d bytes, zlib level 6 -> %.0f bytes each (libdeflate level 6: %.0f)\n",
			   name, nvals, VLEN, (double) ztotal / nvals, (double) ldtotal / nvals);
		printf("  inflate  zlib %8.0f ns/value | libdeflate exact buffer %8.0f (%.2fx) | "
			   "libdeflate 4x guess+retry %8.0f (%.2fx)\n",
			   mz, ml, mz / ml, ml4, mz / ml4);
		printf("  compress.c first buffer 8x %8.0f ns/value (%.2fx) | 2x, zlib after one attempt %8.0f (%.2fx)\n",
			   mc8, mz / mc8, mc2, mz / mc2);
		printf("  deflate  zlib %8.0f ns/value | libdeflate %8.0f (%.2fx)\n",
			   mzd, mld, mzd / mld);
	}
	(void) sink;
}

int
main(int argc, char **argv)
{
	int			nvals = argc > 1 ? atoi(argv[1]) : 1000;
	int			rounds = argc > 2 ? atoi(argv[2]) : 31;

	printf("zlib %s, libdeflate %s; median of %d rounds\n", zlibVersion(),
		   LIBDEFLATE_VERSION_STRING, rounds);
	run("json-ish", make_json, nvals, rounds);
	run("hex digests (bench workload 12)", make_hex, nvals, rounds);
	return 0;
}
