/*
 * metadump.c — parsing one line of memcached's "lru_crawler metadump"
 * reply.
 *
 * Owns: the line format memcached 1.6 writes for each item,
 *     key=<url-encoded key> exp=<n> la=<n> cas=<n> fetch=<yes|no> cls=<n> size=<n>
 * (lines end in a lone "\n"; the closing "END" and the refusals end in
 * "\r\n"), the strict URL decoding of the key, and telling a dump's items
 * from its end and from the server's refusals.  Must not: include
 * PostgreSQL headers, allocate, do I/O or keep state: the lines come from
 * an untrusted server, so this is unit-tested with every truncation and
 * malformed escape on its own.
 *
 * Rules: the line is printable ASCII (a NUL, a control byte or a byte past
 * 0x7e makes it BAD); the key is the first field, at least one byte and at
 * most MC_KEY_MAX once decoded; "%" must be followed by two hex digits;
 * fields after the key are not interpreted (only the key is used, and a
 * later memcached may add fields), but must be separated by single spaces.
 */
#include "metadump.h"

#include <string.h>

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Does line start with word, followed by the end or a space? */
static bool
is_word(const char *line, size_t len, const char *word)
{
	size_t		wl = strlen(word);

	return len >= wl && memcmp(line, word, wl) == 0 &&
		(len == wl || line[wl] == ' ');
}

McMdLine
mc_metadump_line(const char *line, size_t len, char *key, size_t *keylen)
{
	size_t		i;
	size_t		n = 0;

	*keylen = 0;
	if (len > MC_METADUMP_LINE_MAX)
		return MC_MD_BAD;
	for (i = 0; i < len; i++)
		if ((unsigned char) line[i] < 0x20 || (unsigned char) line[i] > 0x7e)
			return MC_MD_BAD;
	if (len < 4 || memcmp(line, "key=", 4) != 0)
	{
		if (len == 3 && memcmp(line, "END", 3) == 0)
			return MC_MD_END;
		if (is_word(line, len, "BUSY"))
			return MC_MD_BUSY;
		if (is_word(line, len, "NOTSTARTED"))
			return MC_MD_NOTSTARTED;
		if (is_word(line, len, "ERROR") || is_word(line, len, "CLIENT_ERROR") ||
			is_word(line, len, "SERVER_ERROR") || is_word(line, len, "BADCLASS"))
			return MC_MD_REFUSED;
		return MC_MD_BAD;
	}
	for (i = 4; i < len && line[i] != ' '; i++)
	{
		char		c = line[i];

		if (n == MC_KEY_MAX)
			return MC_MD_BAD;
		if (c == '%')
		{
			int			hi,
						lo;

			if (len - i < 3 || (hi = hexval(line[i + 1])) < 0 ||
				(lo = hexval(line[i + 2])) < 0)
				return MC_MD_BAD;
			key[n++] = (char) (hi << 4 | lo);
			i += 2;
		}
		else
			key[n++] = c;
	}
	if (n == 0)
		return MC_MD_BAD;
	/* the other fields: single spaces between non-empty tokens */
	for (; i < len; i++)
		if (line[i] == ' ' && (i + 1 == len || line[i + 1] == ' '))
			return MC_MD_BAD;
	*keylen = n;
	return MC_MD_ITEM;
}

bool
mc_metadump_is_digest(const char *key, size_t len)
{
	const char *tail;

	if (len < 249)
		return false;
	tail = key + len - 37;
	if (memcmp(tail, ":md5:", 5) != 0)
		return false;
	for (int i = 5; i < 37; i++)
		if (!((tail[i] >= '0' && tail[i] <= '9') || (tail[i] >= 'a' && tail[i] <= 'f')))
			return false;
	return true;
}
