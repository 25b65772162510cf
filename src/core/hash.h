/*
 * hash.h — the hash functions the client families route with: CRC-32
 * (Dalli's key hash), one-at-a-time (libmemcached's default), MD5
 * (libmemcached's weighted ketama points, Dalli's long-key digest) and SHA-1
 * (Dalli's continuum points).
 *
 * Owns: byte-exact implementations of those four functions, each with an
 * incremental form so callers can hash "prefix + suffix" without building
 * the string.  Must not: include PostgreSQL headers, allocate, do I/O, or
 * keep global mutable state.  These are routing hashes, not security
 * primitives.
 */
#ifndef MCFDW_HASH_H
#define MCFDW_HASH_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC-32 (IEEE 802.3, reflected, as zlib's crc32()).  Chaining follows
 * zlib: mc_crc32_update(mc_crc32(a), b) == mc_crc32(a || b), and
 * mc_crc32_update(0, x) == mc_crc32(x).
 */
extern uint32_t mc_crc32(const void *data, size_t len);
extern uint32_t mc_crc32_update(uint32_t crc, const void *data, size_t len);

/*
 * Bob Jenkins' one-at-a-time hash as libmemcached computes it: each byte is
 * read through a signed char, so bytes >= 0x80 are sign-extended before
 * being added (OAT("\xc3\xa9") == 0x019148ae).  Incremental form: start
 * from 0, feed with mc_oat_update, finish with mc_oat_final.
 */
extern uint32_t mc_oat(const void *data, size_t len);
extern uint32_t mc_oat_update(uint32_t state, const void *data, size_t len);
extern uint32_t mc_oat_final(uint32_t state);

/* MD5 (RFC 1321). */
#define MC_MD5_DIGEST_LEN 16

typedef struct McMd5Ctx
{
	uint32_t	state[4];
	uint64_t	nbytes;			/* message length so far */
	unsigned char block[64];	/* partial block, nbytes % 64 bytes used */
} McMd5Ctx;

extern void mc_md5_init(McMd5Ctx *ctx);
extern void mc_md5_update(McMd5Ctx *ctx, const void *data, size_t len);
extern void mc_md5_final(McMd5Ctx *ctx, unsigned char out[MC_MD5_DIGEST_LEN]);
extern void mc_md5(const void *data, size_t len,
				   unsigned char out[MC_MD5_DIGEST_LEN]);

/* SHA-1 (FIPS 180-4). */
#define MC_SHA1_DIGEST_LEN 20

typedef struct McSha1Ctx
{
	uint32_t	state[5];
	uint64_t	nbytes;
	unsigned char block[64];
} McSha1Ctx;

extern void mc_sha1_init(McSha1Ctx *ctx);
extern void mc_sha1_update(McSha1Ctx *ctx, const void *data, size_t len);
extern void mc_sha1_final(McSha1Ctx *ctx, unsigned char out[MC_SHA1_DIGEST_LEN]);
extern void mc_sha1(const void *data, size_t len,
					unsigned char out[MC_SHA1_DIGEST_LEN]);

#endif							/* MCFDW_HASH_H */
