/*
 * metadump.h — one line of memcached's "lru_crawler metadump" reply
 * (metadump.c), and the shape of a key Dalli digested.
 *
 * Pure C like protocol.h: no PostgreSQL headers, no allocation, no I/O, no
 * state; the caller finds the line and owns every buffer.
 */
#ifndef MCFDW_METADUMP_H
#define MCFDW_METADUMP_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol.h"

/*
 * A metadump line longer than this is not memcached's: a 250-byte key
 * encoded byte by byte is 750 characters, the other fields about 120.
 */
#define MC_METADUMP_LINE_MAX	2048

/* What one line of a metadump reply is. */
typedef enum McMdLine
{
	MC_MD_ITEM,					/* "key=<url-encoded key> exp=... la=... ..." */
	MC_MD_END,					/* "END": the dump is complete */
	MC_MD_BUSY,					/* "BUSY ...": another crawl is running */
	MC_MD_NOTSTARTED,			/* "NOTSTARTED ...": nothing to crawl */
	MC_MD_REFUSED,				/* "ERROR ...", "CLIENT_ERROR ...",
								 * "SERVER_ERROR ...", "BADCLASS ...": the
								 * server would not dump */
	MC_MD_BAD					/* anything else: the stream is not a dump */
} McMdLine;

/*
 * Classify one line (without its "\n" or "\r\n"; len bytes, not
 * NUL-terminated).  For MC_MD_ITEM the decoded key goes to key (MC_KEY_MAX
 * bytes) and its length to *keylen.
 */
extern McMdLine mc_metadump_line(const char *line, size_t len,
								 char *key, size_t *keylen);

/*
 * Is key the name Dalli gives a key too long for memcached: 249 or more
 * bytes ending in ":md5:" and 32 lowercase hex digits?
 */
extern bool mc_metadump_is_digest(const char *key, size_t len);

#endif							/* MCFDW_METADUMP_H */
