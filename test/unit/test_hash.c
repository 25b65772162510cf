/*
 * test_hash.c — standard test vectors for src/core/hash.c.
 *
 * Owns: proving CRC-32, one-at-a-time, MD5 and SHA-1 against their
 * published vectors (RFC 1321 appendix A.5, FIPS 180 examples incl. the
 * million-'a' message, the CRC-32 check value, libmemcached's signed-char
 * OAT, the table in docs ring.md) and proving the incremental forms equal
 * the one-shot forms at every split point around block boundaries.
 * Chained digests over 300 message lengths were computed once with
 * Python's hashlib/zlib and are pinned here.
 */
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "tap.h"

static void
to_hex(const unsigned char *d, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t		i;

	for (i = 0; i < n; i++)
	{
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = '\0';
}

static void
check_md5(const char *msg, const char *want)
{
	unsigned char d[MC_MD5_DIGEST_LEN];
	char		got[2 * MC_MD5_DIGEST_LEN + 1];

	mc_md5(msg, strlen(msg), d);
	to_hex(d, sizeof(d), got);
	if (!tap_ok(strcmp(got, want) == 0, "MD5(\"%.20s%s\")", msg,
				strlen(msg) > 20 ? "..." : ""))
		tap_diag("got %s want %s", got, want);
}

static void
check_sha1(const char *msg, const char *want)
{
	unsigned char d[MC_SHA1_DIGEST_LEN];
	char		got[2 * MC_SHA1_DIGEST_LEN + 1];

	mc_sha1(msg, strlen(msg), d);
	to_hex(d, sizeof(d), got);
	if (!tap_ok(strcmp(got, want) == 0, "SHA1(\"%.20s%s\")", msg,
				strlen(msg) > 20 ? "..." : ""))
		tap_diag("got %s want %s", got, want);
}

static void
check_u32(const char *what, uint32_t got, uint32_t want)
{
	if (!tap_ok(got == want, "%s = %08x", what, want))
		tap_diag("got %08x", got);
}

/* The 300-byte pattern the pinned chain digests were computed over. */
static void
pattern(unsigned char *buf, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
		buf[i] = (unsigned char) ((i * 7 + 3) & 0xff);
}

/*
 * Digest of the digests of every prefix length 0..299: covers all padding
 * cases (length mod 64 = 55, 56, 63, 0 ...) in one pinned value.
 */
static void
chains(void)
{
	unsigned char data[300];
	unsigned char mcat[300 * MC_MD5_DIGEST_LEN];
	unsigned char scat[300 * MC_SHA1_DIGEST_LEN];
	unsigned char d[MC_SHA1_DIGEST_LEN];
	char		hex[2 * MC_SHA1_DIGEST_LEN + 1];
	uint32_t	crcx = 0,
				oatc = 0;
	size_t		n;

	pattern(data, sizeof(data));
	for (n = 0; n < 300; n++)
	{
		mc_md5(data, n, mcat + n * MC_MD5_DIGEST_LEN);
		mc_sha1(data, n, scat + n * MC_SHA1_DIGEST_LEN);
		crcx ^= mc_crc32(data, n);
		oatc = oatc * 31 + mc_oat(data, n);
	}
	mc_md5(mcat, sizeof(mcat), d);
	to_hex(d, MC_MD5_DIGEST_LEN, hex);
	tap_ok(strcmp(hex, "7822672476780d31feb48545a90bc2ae") == 0,
		   "MD5 of 300 prefix digests matches hashlib");
	mc_sha1(scat, sizeof(scat), d);
	to_hex(d, MC_SHA1_DIGEST_LEN, hex);
	tap_ok(strcmp(hex, "ca9349a03c700fe25e6c2cde997aa96ac2227d8a") == 0,
		   "SHA1 of 300 prefix digests matches hashlib");
	check_u32("XOR of CRC-32 over 300 prefixes", crcx, 0x8555ac7f);
	check_u32("OAT combination over 300 prefixes (signed bytes)", oatc, 0xdde8d4ad);
}

/* Every split of a 200-byte message, fed in two and three pieces. */
static void
incremental(void)
{
	unsigned char data[200];
	unsigned char whole_m[MC_MD5_DIGEST_LEN],
				whole_s[MC_SHA1_DIGEST_LEN],
				m[MC_MD5_DIGEST_LEN],
				s[MC_SHA1_DIGEST_LEN];
	uint32_t	whole_c,
				whole_o;
	size_t		a,
				b;
	int			bad = 0;

	pattern(data, sizeof(data));
	mc_md5(data, sizeof(data), whole_m);
	mc_sha1(data, sizeof(data), whole_s);
	whole_c = mc_crc32(data, sizeof(data));
	whole_o = mc_oat(data, sizeof(data));

	for (a = 0; a <= sizeof(data); a++)
	{
		for (b = a; b <= sizeof(data); b += 7)
		{
			McMd5Ctx	mc;
			McSha1Ctx	sc;
			uint32_t	o;

			mc_md5_init(&mc);
			mc_md5_update(&mc, data, a);
			mc_md5_update(&mc, data + a, b - a);
			mc_md5_update(&mc, data + b, sizeof(data) - b);
			mc_md5_final(&mc, m);
			mc_sha1_init(&sc);
			mc_sha1_update(&sc, data, a);
			mc_sha1_update(&sc, data + a, b - a);
			mc_sha1_update(&sc, data + b, sizeof(data) - b);
			mc_sha1_final(&sc, s);
			o = mc_oat_update(mc_oat_update(mc_oat_update(0, data, a),
											data + a, b - a),
							  data + b, sizeof(data) - b);
			if (memcmp(m, whole_m, sizeof(m)) != 0 ||
				memcmp(s, whole_s, sizeof(s)) != 0 ||
				mc_crc32_update(mc_crc32_update(mc_crc32(data, a), data + a, b - a),
								data + b, sizeof(data) - b) != whole_c ||
				mc_oat_final(o) != whole_o)
				bad++;
		}
	}
	if (!tap_ok(bad == 0, "incremental MD5/SHA1/CRC/OAT equal one-shot at every split"))
		tap_diag("%d splits differ", bad);
}

int
main(void)
{
	static char million[1000001];
	unsigned char d[MC_SHA1_DIGEST_LEN];
	char		hex[2 * MC_SHA1_DIGEST_LEN + 1];
	McSha1Ctx	sc;
	int			i;

	/* RFC 1321 appendix A.5 */
	check_md5("", "d41d8cd98f00b204e9800998ecf8427e");
	check_md5("a", "0cc175b9c0f1b6a831c399e269772661");
	check_md5("abc", "900150983cd24fb0d6963f7d28e17f72");
	check_md5("message digest", "f96b697d7cb7938d525a2f31aaf161d0");
	check_md5("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b");
	check_md5("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
			  "d174ab98d277d9f5a5611c2c9f419d9f");
	check_md5("12345678901234567890123456789012345678901234567890123456789012345678901234567890",
			  "57edf4a22be3c955ac49da2e2107b67a");

	/* FIPS 180 examples */
	check_sha1("", "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	check_sha1("abc", "a9993e364706816aba3e25717850c26c9cd0d89d");
	check_sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
			   "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	check_sha1("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
			   "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
			   "a49b2446a02c645bf419f995b67091253a04a259");

	memset(million, 'a', 1000000);
	check_sha1(million, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	/* the same million 'a' fed in uneven pieces */
	mc_sha1_init(&sc);
	for (i = 0; i < 1000000; i += 999)
		mc_sha1_update(&sc, million + i, (size_t) (1000000 - i < 999 ? 1000000 - i : 999));
	mc_sha1_final(&sc, d);
	to_hex(d, MC_SHA1_DIGEST_LEN, hex);
	tap_ok(strcmp(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f") == 0,
		   "SHA1 of a million 'a' fed in 999-byte pieces");
	mc_md5(million, 1000000, d);
	to_hex(d, MC_MD5_DIGEST_LEN, hex);
	tap_ok(strcmp(hex, "7707d6ae4e027c70eea2a935c2296f21") == 0,
		   "MD5 of a million 'a'");

	/* CRC-32 (zlib) */
	check_u32("CRC32(\"123456789\") check value", mc_crc32("123456789", 9), 0xcbf43926);
	check_u32("CRC32(\"\")", mc_crc32("", 0), 0);
	check_u32("CRC32(quick brown fox)",
			  mc_crc32("The quick brown fox jumps over the lazy dog", 43), 0x414fa339);
	check_u32("CRC32 chained \"1234\" + \"56789\"",
			  mc_crc32_update(mc_crc32("1234", 4), "56789", 5), 0xcbf43926);

	/* one-at-a-time; ASCII values are Jenkins' published ones */
	check_u32("OAT(\"a\")", mc_oat("a", 1), 0xca2e9442);
	check_u32("OAT(quick brown fox)",
			  mc_oat("The quick brown fox jumps over the lazy dog", 43), 0x519e91f5);
	check_u32("OAT(\"\\xc3\\xa9\") signed-char", mc_oat("\xc3\xa9", 2), 0x019148ae);
	check_u32("OAT(\"\\xff\\x80\\x7f\") signed-char", mc_oat("\xff\x80\x7f", 3), 0xde102744);

	/* the table in docs ring.md */
	check_u32("CRC32(key0)", mc_crc32("key0", 4), 0x5b5b54c6);
	check_u32("CRC32(key1)", mc_crc32("key1", 4), 0x2c5c6450);
	check_u32("CRC32(key7)", mc_crc32("key7", 4), 0xc53fc165);
	check_u32("CRC32(key9)", mc_crc32("key9", 4), 0x2287ec62);
	check_u32("OAT(key0)", mc_oat("key0", 4), 0x74614706);
	check_u32("OAT(key1)", mc_oat("key1", 4), 0xbef4dc2c);
	check_u32("OAT(key7)", mc_oat("key7", 4), 0x2f1ebc7e);
	check_u32("OAT(key9)", mc_oat("key9", 4), 0x49c071c1);
	check_u32("OAT(localhost-0)", mc_oat("localhost-0", 11), 0x5b9d2571);
	mc_sha1("localhost:11211:0", 17, d);
	check_u32("SHA1(localhost:11211:0) first word",
			  ((uint32_t) d[0] << 24) | ((uint32_t) d[1] << 16) |
			  ((uint32_t) d[2] << 8) | d[3], 0x5cc05708);

	chains();
	incremental();

	return tap_done();
}
