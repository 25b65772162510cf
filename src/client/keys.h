/*
 * keys.h — the key rules (keys.c): what goes on the wire for a key, and the
 * routed form its instance is chosen by.  Included by the files that take
 * keys from SQL (sql_args.c, run_route.c, run_reads.c, batch_sql.c, xact.c, the foreign-table files).
 */
#ifndef MCFDW_KEYS_H
#define MCFDW_KEYS_H

#include "server.h"

/*
 * How a key's routed form (what the ring hashes, and what goes on the wire
 * before any base64) is made from the key as given.  Cheap forms are
 * rebuilt on demand; only a digest is worth keeping.
 */
typedef enum McKeyForm
{
	MC_KEY_GIVEN,				/* the key itself */
	MC_KEY_PREFIXED,			/* the server's key prefix, then the key */
	MC_KEY_DIGESTED				/* too long: Dalli's digested name (long_keys) */
} McKeyForm;

/*
 * A key as it is routed (prefix + key, or a digest) and as it goes on the
 * wire (raw, or base64 of raw).  The forms point into the caller's key when
 * they can, else into the buffers here.  Lives on the stack: preparing a
 * key allocates nothing.
 */
typedef struct McKey
{
	const char *raw;
	size_t		raw_len;
	const char *wire;
	size_t		wire_len;
	bool		b64;
	char		rawbuf[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
	char		wirebuf[MC_KEY_MAX];
} McKey;

extern McKeyForm McKeyRoute(McServer *srv, const char *data, size_t len,
							char *buf, const char **raw, size_t *rawlen,
							bool *b64);
extern size_t McKeyWire(McServer *srv, const char *src, size_t srclen,
						McKeyForm form, bool b64, char *buf,
						const char **wire);
extern void McKeyPrepare(McServer *srv, const char *data, size_t len, McKey *k);
extern void McKeyFromRouted(const char *raw, size_t rawlen, McKey *k);

#endif							/* MCFDW_KEYS_H */
