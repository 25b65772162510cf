/*
 * dalli_key.c — Dalli's key transformation: the namespace, and the digest
 * that replaces a key over 250 characters, counted as Ruby counts them.
 *
 * Owns: reproducing, byte for byte, the key Dalli 3.x sends and routes by
 * (KeyManager#validate_key).  Must not: include PostgreSQL headers, do I/O
 * or allocate.  Checked against the installed Dalli by
 * test/integration/ring_compat.py; declared in ring.h with the rest of
 * routing.
 */
#include "ring.h"

#include "hash.h"

#include <string.h>

/*
 * Length in bytes of the character at p as Ruby's String#length counts a
 * UTF-8 string: a well-formed UTF-8 sequence (no overlongs, surrogates or
 * code points above U+10FFFF) is one character; any other byte, including
 * the start of a sequence cut short, is a character of its own.
 */
static size_t
utf8_char_len(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	size_t		need,
				k;
	unsigned char lo = 0x80,
				hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		need = 2;
	else if (c >= 0xe0 && c <= 0xef)
	{
		need = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	}
	else if (c >= 0xf0 && c <= 0xf4)
	{
		need = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	}
	else
		return 1;

	if (avail < need)
		return 1;
	if (p[1] < lo || p[1] > hi)
		return 1;
	for (k = 2; k < need; k++)
		if (p[k] < 0x80 || p[k] > 0xbf)
			return 1;
	return need;
}

/* Characters in a byte run, by Ruby's counting rule for the encoding. */
static size_t
count_chars(const char *s, size_t len, bool utf8)
{
	size_t		n = 0,
				off = 0;

	if (!utf8)
		return len;
	while (off < len)
	{
		off += utf8_char_len((const unsigned char *) s + off, len - off);
		n++;
	}
	return n;
}

/*
 * Copy up to *chars characters of s to out, decrementing *chars; returns
 * bytes copied.  Segments are copied one after another so the namespaced
 * key never has to exist as one string; ":" between them is ASCII, so no
 * character spans two segments.
 */
static size_t
copy_chars(const char *s, size_t len, bool utf8, size_t *chars, char *out)
{
	size_t		off = 0;

	while (off < len && *chars > 0)
	{
		off += utf8 ? utf8_char_len((const unsigned char *) s + off, len - off) : 1;
		(*chars)--;
	}
	memcpy(out, s, off);
	return off;
}

/*
 * Dalli 3.x KeyManager#validate_key: namespace, then, over 250 characters,
 * key[0, 212 or 213] + ":md5:" + md5hex(namespaced key).  The prefix is 212
 * characters without a namespace and 213 with one (Dalli's "historical
 * reasons": 249 vs 250 total).
 */
size_t
mc_dalli_route_key(const char *ns, size_t nslen, const char *key,
				   size_t keylen, bool utf8, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t		chars = count_chars(key, keylen, utf8);
	size_t		o = 0;
	size_t		keep;
	McMd5Ctx	c;
	unsigned char d[MC_MD5_DIGEST_LEN];
	int			i;

	if (ns != NULL)
		chars += count_chars(ns, nslen, utf8) + 1;

	if (chars <= MC_DALLI_MAX_KEY_CHARS)
	{
		if (ns != NULL)
		{
			memcpy(out, ns, nslen);
			out[nslen] = ':';
			o = nslen + 1;
		}
		memcpy(out + o, key, keylen);
		return o + keylen;
	}

	keep = ns != NULL ? 213 : 212;
	mc_md5_init(&c);
	if (ns != NULL)
	{
		o += copy_chars(ns, nslen, utf8, &keep, out + o);
		if (keep > 0)
		{
			out[o++] = ':';
			keep--;
		}
		mc_md5_update(&c, ns, nslen);
		mc_md5_update(&c, ":", 1);
	}
	o += copy_chars(key, keylen, utf8, &keep, out + o);
	mc_md5_update(&c, key, keylen);
	mc_md5_final(&c, d);

	memcpy(out + o, ":md5:", 5);
	o += 5;
	for (i = 0; i < MC_MD5_DIGEST_LEN; i++)
	{
		out[o++] = hex[d[i] >> 4];
		out[o++] = hex[d[i] & 15];
	}
	return o;
}
