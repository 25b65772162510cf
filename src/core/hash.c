/*
 * hash.c — CRC-32, one-at-a-time, MD5 and SHA-1 for key routing.
 *
 * Owns: the byte-exact hash functions the client families route with,
 * written from their specifications (zlib's CRC-32 polynomial, RFC 1321,
 * FIPS 180-4, libmemcached's one-at-a-time with signed chars).  Must not:
 * include PostgreSQL headers, allocate, do I/O, or keep mutable globals;
 * the only tables are constants.
 */
#include "hash.h"

#include <string.h>

/*
 * Reflected CRC-32 table for polynomial 0xEDB88320: entry n is the CRC of
 * the single byte n.  A constant table keeps the per-key hash at one load
 * and two XORs per byte without any initialisation step (and so without
 * mutable global state).
 */
static const uint32_t crc32_table[256] = {
	0x00000000, 0x77073096, 0xee0e612c, 0x990951ba,
	0x076dc419, 0x706af48f, 0xe963a535, 0x9e6495a3,
	0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988,
	0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91,
	0x1db71064, 0x6ab020f2, 0xf3b97148, 0x84be41de,
	0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
	0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec,
	0x14015c4f, 0x63066cd9, 0xfa0f3d63, 0x8d080df5,
	0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172,
	0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b,
	0x35b5a8fa, 0x42b2986c, 0xdbbbc9d6, 0xacbcf940,
	0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
	0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116,
	0x21b4f4b5, 0x56b3c423, 0xcfba9599, 0xb8bda50f,
	0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924,
	0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d,
	0x76dc4190, 0x01db7106, 0x98d220bc, 0xefd5102a,
	0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
	0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818,
	0x7f6a0dbb, 0x086d3d2d, 0x91646c97, 0xe6635c01,
	0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
	0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457,
	0x65b0d9c6, 0x12b7e950, 0x8bbeb8ea, 0xfcb9887c,
	0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
	0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2,
	0x4adfa541, 0x3dd895d7, 0xa4d1c46d, 0xd3d6f4fb,
	0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0,
	0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9,
	0x5005713c, 0x270241aa, 0xbe0b1010, 0xc90c2086,
	0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
	0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4,
	0x59b33d17, 0x2eb40d81, 0xb7bd5c3b, 0xc0ba6cad,
	0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a,
	0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683,
	0xe3630b12, 0x94643b84, 0x0d6d6a3e, 0x7a6a5aa8,
	0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
	0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe,
	0xf762575d, 0x806567cb, 0x196c3671, 0x6e6b06e7,
	0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc,
	0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5,
	0xd6d6a3e8, 0xa1d1937e, 0x38d8c2c4, 0x4fdff252,
	0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
	0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60,
	0xdf60efc3, 0xa867df55, 0x316e8eef, 0x4669be79,
	0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236,
	0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f,
	0xc5ba3bbe, 0xb2bd0b28, 0x2bb45a92, 0x5cb36a04,
	0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
	0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a,
	0x9c0906a9, 0xeb0e363f, 0x72076785, 0x05005713,
	0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38,
	0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21,
	0x86d3d2d4, 0xf1d4e242, 0x68ddb3f8, 0x1fda836e,
	0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
	0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c,
	0x8f659eff, 0xf862ae69, 0x616bffd3, 0x166ccf45,
	0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2,
	0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db,
	0xaed16a4a, 0xd9d65adc, 0x40df0b66, 0x37d83bf0,
	0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
	0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6,
	0xbad03605, 0xcdd70693, 0x54de5729, 0x23d967bf,
	0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
	0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

/*
 * Chainable CRC-32: zlib's convention (pre- and post-inversion inside the
 * call) lets Dalli's failover hash "<try>" + key be computed by feeding the
 * digits and then the key, without concatenating them in a buffer.
 */
uint32_t
mc_crc32_update(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	crc = ~crc;
	while (len--)
		crc = crc32_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* Dalli's key hash: Zlib.crc32 of the routed key. */
uint32_t
mc_crc32(const void *data, size_t len)
{
	return mc_crc32_update(0, data, len);
}

/*
 * One-at-a-time mixing step.  libmemcached reads the key through a plain
 * (signed, on x86 and in its build) char and converts it to uint32_t, so a
 * byte >= 0x80 contributes 0xffffff00 | byte.  We reproduce that on every
 * platform by sign-extending explicitly instead of relying on char's
 * signedness here.
 */
uint32_t
mc_oat_update(uint32_t state, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--)
	{
		/* libmemcached reads the key as (signed) char: bytes >= 0x80 sign-extend */
		uint32_t	c = (uint32_t) (int32_t) (signed char) *p++;

		state += c;
		state += state << 10;
		state ^= state >> 6;
	}
	return state;
}

/* Final avalanche of one-at-a-time, separate so prefixes can be reused. */
uint32_t
mc_oat_final(uint32_t state)
{
	state += state << 3;
	state ^= state >> 11;
	state += state << 15;
	return state;
}

/* libmemcached's default key hash (MEMCACHED_HASH_DEFAULT). */
uint32_t
mc_oat(const void *data, size_t len)
{
	return mc_oat_final(mc_oat_update(0, data, len));
}

/* ---------------------------------------------------------------- MD5 */

#define ROTL32(x, n) (((x) << (n)) | ((x) >> (32 - (n))))

/* RFC 1321 table T: T[i] = floor(2^32 * |sin(i + 1)|). */
static const uint32_t md5_t[64] = {
	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee,
	0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
	0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be,
	0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
	0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
	0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
	0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
	0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
	0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
	0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
	0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05,
	0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
	0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039,
	0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
	0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
	0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

/* Per-step left rotations, four per round (RFC 1321 section 3.4). */
static const unsigned char md5_s[16] = {
	7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21
};

/*
 * One 64-byte block.  Written as a single loop over the 64 steps, choosing
 * the round function and message word per step: smaller than four unrolled
 * rounds, and speed matters little because MD5 runs only at ring build time
 * and for Dalli keys longer than 250 bytes.
 */
static void
md5_block(uint32_t *state, const unsigned char *blk)
{
	uint32_t	x[16];
	uint32_t	a = state[0],
				b = state[1],
				c = state[2],
				d = state[3];
	int			i;

	for (i = 0; i < 16; i++)
		x[i] = (uint32_t) blk[i * 4] |
			((uint32_t) blk[i * 4 + 1] << 8) |
			((uint32_t) blk[i * 4 + 2] << 16) |
			((uint32_t) blk[i * 4 + 3] << 24);

	for (i = 0; i < 64; i++)
	{
		uint32_t	f;
		int			g;
		uint32_t	tmp;

		if (i < 16)
		{
			f = (b & c) | (~b & d);
			g = i;
		}
		else if (i < 32)
		{
			f = (b & d) | (c & ~d);
			g = (5 * i + 1) & 15;
		}
		else if (i < 48)
		{
			f = b ^ c ^ d;
			g = (3 * i + 5) & 15;
		}
		else
		{
			f = c ^ (b | ~d);
			g = (7 * i) & 15;
		}
		tmp = a + f + md5_t[i] + x[g];
		a = d;
		d = c;
		c = b;
		b = b + ROTL32(tmp, md5_s[(i >> 4) * 4 + (i & 3)]);
	}

	state[0] += a;
	state[1] += b;
	state[2] += c;
	state[3] += d;
}

/* Initial chaining values from RFC 1321 section 3.3. */
void
mc_md5_init(McMd5Ctx *ctx)
{
	ctx->state[0] = 0x67452301;
	ctx->state[1] = 0xefcdab89;
	ctx->state[2] = 0x98badcfe;
	ctx->state[3] = 0x10325476;
	ctx->nbytes = 0;
}

/*
 * Buffer input into whole blocks.  Shared by MD5 and SHA-1 through the
 * block function pointer because both use the same 64-byte framing.
 */
static void
feed_blocks(uint32_t *state, uint64_t *nbytes, unsigned char *block,
			void (*fn) (uint32_t *, const unsigned char *),
			const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t		used = (size_t) (*nbytes & 63);

	*nbytes += len;
	if (used)
	{
		size_t		take = 64 - used;

		if (take > len)
			take = len;
		memcpy(block + used, p, take);
		p += take;
		len -= take;
		if (used + take < 64)
			return;
		fn(state, block);
	}
	while (len >= 64)
	{
		fn(state, p);
		p += 64;
		len -= 64;
	}
	if (len)
		memcpy(block, p, len);
}

void
mc_md5_update(McMd5Ctx *ctx, const void *data, size_t len)
{
	feed_blocks(ctx->state, &ctx->nbytes, ctx->block, md5_block, data, len);
}

/*
 * Pad with 0x80, zeros to 56 mod 64, then the bit length.  big_endian
 * selects SHA-1's length encoding over MD5's.
 */
static void
pad_blocks(uint32_t *state, uint64_t nbytes, unsigned char *block,
		   void (*fn) (uint32_t *, const unsigned char *), int big_endian)
{
	size_t		used = (size_t) (nbytes & 63);
	uint64_t	bits = nbytes * 8;
	int			i;

	block[used++] = 0x80;
	if (used > 56)
	{
		memset(block + used, 0, 64 - used);
		fn(state, block);
		used = 0;
	}
	memset(block + used, 0, 56 - used);
	for (i = 0; i < 8; i++)
	{
		int			shift = big_endian ? (56 - 8 * i) : (8 * i);

		block[56 + i] = (unsigned char) (bits >> shift);
	}
	fn(state, block);
}

void
mc_md5_final(McMd5Ctx *ctx, unsigned char out[MC_MD5_DIGEST_LEN])
{
	int			i;

	pad_blocks(ctx->state, ctx->nbytes, ctx->block, md5_block, 0);
	for (i = 0; i < 16; i++)
		out[i] = (unsigned char) (ctx->state[i >> 2] >> (8 * (i & 3)));
}

void
mc_md5(const void *data, size_t len, unsigned char out[MC_MD5_DIGEST_LEN])
{
	McMd5Ctx	ctx;

	mc_md5_init(&ctx);
	mc_md5_update(&ctx, data, len);
	mc_md5_final(&ctx, out);
}

/* -------------------------------------------------------------- SHA-1 */

/*
 * One 64-byte block (FIPS 180-4 section 6.1.2), with the 16-word rolling
 * message schedule instead of the 80-word array.
 */
static void
sha1_block(uint32_t *state, const unsigned char *blk)
{
	uint32_t	w[16];
	uint32_t	a = state[0],
				b = state[1],
				c = state[2],
				d = state[3],
				e = state[4];
	int			t;

	for (t = 0; t < 16; t++)
		w[t] = ((uint32_t) blk[t * 4] << 24) |
			((uint32_t) blk[t * 4 + 1] << 16) |
			((uint32_t) blk[t * 4 + 2] << 8) |
			(uint32_t) blk[t * 4 + 3];

	for (t = 0; t < 80; t++)
	{
		uint32_t	f,
					k,
					wt,
					tmp;

		if (t < 16)
			wt = w[t];
		else
		{
			wt = w[(t - 3) & 15] ^ w[(t - 8) & 15] ^
				w[(t - 14) & 15] ^ w[t & 15];
			wt = ROTL32(wt, 1);
			w[t & 15] = wt;
		}

		if (t < 20)
		{
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		}
		else if (t < 40)
		{
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		}
		else if (t < 60)
		{
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		}
		else
		{
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		tmp = ROTL32(a, 5) + f + e + k + wt;
		e = d;
		d = c;
		c = ROTL32(b, 30);
		b = a;
		a = tmp;
	}

	state[0] += a;
	state[1] += b;
	state[2] += c;
	state[3] += d;
	state[4] += e;
}

/* Initial hash value from FIPS 180-4 section 5.3.1. */
void
mc_sha1_init(McSha1Ctx *ctx)
{
	ctx->state[0] = 0x67452301;
	ctx->state[1] = 0xefcdab89;
	ctx->state[2] = 0x98badcfe;
	ctx->state[3] = 0x10325476;
	ctx->state[4] = 0xc3d2e1f0;
	ctx->nbytes = 0;
}

void
mc_sha1_update(McSha1Ctx *ctx, const void *data, size_t len)
{
	feed_blocks(ctx->state, &ctx->nbytes, ctx->block, sha1_block, data, len);
}

void
mc_sha1_final(McSha1Ctx *ctx, unsigned char out[MC_SHA1_DIGEST_LEN])
{
	int			i;

	pad_blocks(ctx->state, ctx->nbytes, ctx->block, sha1_block, 1);
	for (i = 0; i < 20; i++)
		out[i] = (unsigned char) (ctx->state[i >> 2] >> (24 - 8 * (i & 3)));
}

void
mc_sha1(const void *data, size_t len, unsigned char out[MC_SHA1_DIGEST_LEN])
{
	McSha1Ctx	ctx;

	mc_sha1_init(&ctx);
	mc_sha1_update(&ctx, data, len);
	mc_sha1_final(&ctx, out);
}
