/*
 * test_metadump.c — src/core/metadump.c against the lines memcached 1.6.18
 * writes and against everything a broken or hostile server could send:
 * every truncation of good lines, bad % escapes, keys past MC_KEY_MAX,
 * over-long lines, control bytes, and random bytes (no read outside the
 * line, the decoded key never past MC_KEY_MAX).
 */
#include <stdlib.h>
#include <string.h>

#include "metadump.h"
#include "tap.h"

static McMdLine
parse(const char *line, char *key, size_t *keylen)
{
	return mc_metadump_line(line, strlen(line), key, keylen);
}

/* A good item line gives exactly this key. */
static void
item(const char *line, const char *want, size_t wantlen)
{
	char		key[MC_KEY_MAX];
	size_t		kl;
	McMdLine	t = parse(line, key, &kl);

	tap_ok(t == MC_MD_ITEM && kl == wantlen && memcmp(key, want, wantlen) == 0,
		   "item: %.60s", line);
}

static void
kind(const char *line, McMdLine want, const char *what)
{
	char		key[MC_KEY_MAX];
	size_t		kl;

	tap_ok(parse(line, key, &kl) == want, "%s: \"%.60s\"", what, line);
}

int
main(void)
{
	static const char good[] =
		"key=user%3Ahello%2520w exp=1796110960 la=1796110860 cas=2 fetch=no cls=1 size=78";
	char		buf[4096];
	char		key[MC_KEY_MAX];
	size_t		kl;
	int			bad;

	/* what memcached 1.6.18 writes (lines from the rig's memcached) */
	item("key=a exp=-1 la=1796110860 cas=1 fetch=no cls=1 size=65", "a", 1);
	item(good, "user:hello%20w", 14);
	item("key=bin%00%20k exp=-1 la=1796110861 cas=3 fetch=no cls=1 size=67", "bin\0 k", 6);
	item("key=%C3%A9t%C3%A9 exp=-1 la=1 cas=1 fetch=yes cls=1 size=1", "\xc3\xa9t\xc3\xa9", 5);
	item("key=x", "x", 1);		/* no other fields: only the key is needed */
	item("key=x exp=1 flags=7 new=field", "x", 1);	/* later fields are skipped */
	item("key=%7e%7E", "~~", 2);	/* either hex case */

	kind("END", MC_MD_END, "end");
	kind("BUSY currently processing crawler request", MC_MD_BUSY, "busy");
	kind("NOTSTARTED no items to crawl", MC_MD_NOTSTARTED, "notstarted");
	kind("ERROR", MC_MD_REFUSED, "refused");
	kind("ERROR metadump not allowed", MC_MD_REFUSED, "refused");
	kind("CLIENT_ERROR lru crawler disabled", MC_MD_REFUSED, "refused");
	kind("SERVER_ERROR out of memory", MC_MD_REFUSED, "refused");
	kind("BADCLASS invalid class id", MC_MD_REFUSED, "refused");

	/* not a dump */
	kind("", MC_MD_BAD, "empty line");
	kind("ENDX", MC_MD_BAD, "END with more");
	kind("END ", MC_MD_BAD, "END and a space");
	kind("STAT pid 1", MC_MD_BAD, "stats line");
	kind("VA 2 f0", MC_MD_BAD, "meta reply");
	kind("BUSYX", MC_MD_BAD, "BUSY glued");
	kind("key= exp=1", MC_MD_BAD, "empty key");
	kind("key=", MC_MD_BAD, "empty key, nothing else");
	kind("key=a  exp=1", MC_MD_BAD, "double space");
	kind("key=a exp=1 ", MC_MD_BAD, "trailing space");
	kind("kez=a exp=1", MC_MD_BAD, "no key field");
	kind("key=a\texp=1", MC_MD_BAD, "tab");
	kind("key=a exp=1\r", MC_MD_BAD, "stray CR");

	/* bad escapes */
	kind("key=%", MC_MD_BAD, "lone %");
	kind("key=%4", MC_MD_BAD, "one hex digit at the end");
	kind("key=%4 exp=1", MC_MD_BAD, "one hex digit then space");
	kind("key=%G0 exp=1", MC_MD_BAD, "not hex");
	kind("key=%0g exp=1", MC_MD_BAD, "second not hex");
	kind("key=a%-1 exp=1", MC_MD_BAD, "sign");
	kind("key=a% 1", MC_MD_BAD, "space after %");

	/* control and high bytes, and NUL inside the line */
	tap_ok(mc_metadump_line("key=a\0b exp=1", 13, key, &kl) == MC_MD_BAD, "NUL in the line");
	kind("key=\x01 exp=1", MC_MD_BAD, "control byte");
	kind("key=\xc3\xa9 exp=1", MC_MD_BAD, "raw UTF-8 byte");
	kind("key=\x7f exp=1", MC_MD_BAD, "DEL");

	/* key lengths: 250 decoded bytes fit, 251 do not, whatever the encoding */
	memcpy(buf, "key=", 4);
	memset(buf + 4, 'k', 250);
	strcpy(buf + 254, " exp=-1");
	item(buf, buf + 4, 250);
	memset(buf + 4, 'k', 251);
	strcpy(buf + 255, " exp=-1");
	kind(buf, MC_MD_BAD, "251-byte key");
	memcpy(buf, "key=", 4);
	for (int i = 0; i < 250; i++)
		memcpy(buf + 4 + 3 * i, "%41", 3);
	strcpy(buf + 4 + 750, " exp=-1");
	tap_ok(parse(buf, key, &kl) == MC_MD_ITEM && kl == 250 && key[249] == 'A',
		   "250 escaped bytes");
	for (int i = 0; i < 251; i++)
		memcpy(buf + 4 + 3 * i, "%41", 3);
	strcpy(buf + 4 + 753, " exp=-1");
	kind(buf, MC_MD_BAD, "251 escaped bytes");
	/* a huge line is refused before it is scanned */
	memcpy(buf, "key=a exp=", 10);
	memset(buf + 10, '1', MC_METADUMP_LINE_MAX);
	buf[10 + MC_METADUMP_LINE_MAX] = '\0';
	tap_ok(mc_metadump_line(buf, strlen(buf), key, &kl) == MC_MD_BAD, "line past MC_METADUMP_LINE_MAX");
	tap_ok(mc_metadump_line(buf, (size_t) -1, key, &kl) == MC_MD_BAD, "length SIZE_MAX");

	/* every truncation of a good line: an item, or BAD; never a longer key */
	bad = 0;
	for (size_t cut = 0; cut < sizeof(good) - 1; cut++)
	{
		McMdLine	t = mc_metadump_line(good, cut, key, &kl);

		if (t == MC_MD_ITEM ? (kl == 0 || kl > 14 || memcmp(key, "user:hello%20w", kl) != 0)
			: t != MC_MD_BAD)
			bad++;
		/* a cut inside an escape or in the key's first byte must be BAD */
		if ((cut <= 4 || cut == 9 || cut == 10 || cut == 17 || cut == 18) && t != MC_MD_BAD)
			bad++;
	}
	tap_ok(bad == 0, "every truncation of an item line is a shorter key or BAD");
	kind("EN", MC_MD_BAD, "truncated END");

	/* random lines: never a key past MC_KEY_MAX, never a key without "key=" */
	bad = 0;
	srand(14);
	for (int run = 0; run < 200000; run++)
	{
		static const char alphabet[] = "key=%0aF9gG \x01\x7f\xc3" "ENDBUSY";
		size_t		len = (size_t) (rand() % 900);

		memcpy(buf, "key=", 4);
		for (size_t i = (run & 1) ? 4 : 0; i < len; i++)
			buf[i] = (rand() % 4) ? alphabet[rand() % (sizeof(alphabet) - 1)] : (char) rand();
		if (len < 4 && (run & 1))
			len = 4;
		{
			McMdLine	t = mc_metadump_line(buf, len, key, &kl);

			if (t == MC_MD_ITEM && (kl == 0 || kl > MC_KEY_MAX || memcmp(buf, "key=", 4) != 0))
				bad++;
			if (t != MC_MD_ITEM && kl != 0)
				bad++;
		}
	}
	tap_ok(bad == 0, "200,000 random lines keep the key within bounds");

	/* Dalli digests */
	memset(buf, 'a', 212);
	strcpy(buf + 212, ":md5:0123456789abcdef0123456789abcdef");
	tap_ok(mc_metadump_is_digest(buf, 249), "a 249-byte digest");
	tap_ok(!mc_metadump_is_digest(buf + 1, 248), "248 bytes: not a digest");
	buf[248] = 'F';
	tap_ok(!mc_metadump_is_digest(buf, 249), "uppercase hex: not a digest");
	tap_ok(!mc_metadump_is_digest("k:md5:0123456789abcdef0123456789abcdef", 38), "short key");
	return tap_done();
}
