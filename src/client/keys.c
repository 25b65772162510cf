/*
 * keys.c — the key rules: what goes on the wire for a key, and the routed
 * form its instance is chosen by.
 *
 * Owns: checking a key (empty, too long, which keys need base64), the
 * server's key prefix, Dalli's rule for over-long keys (long_keys 'dalli';
 * the digest itself is dalli_key.c's pure mc_dalli_route_key), and the wire form
 * (raw, or base64 with the b flag, so no key can inject protocol).  Every
 * SQL function that takes keys comes here once per key.  Must not: choose
 * the instance (health.c maps the routed form to one, given health), touch
 * connections, or allocate: the forms live in the caller's buffers.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "keys.h"
#include "server.h"

/*
 * A key too long for memcached, on a server with long_keys 'dalli': Dalli's
 * rule, so a Rails cache key Dalli digested is found under the same name,
 * on the same instance.  The key prefix is Dalli's namespace plus its colon
 * (the validator made sure); characters are counted as Ruby counts a UTF-8
 * string when the database encoding is UTF-8, else as bytes.  Writes the
 * routed key to buf and returns its length; a key that is still too long
 * (few but wide characters) is an error, as memcached would refuse it.
 * Out of line: the hot path never comes here.
 */
static pg_noinline size_t
route_long_key(McServer *srv, const char *data, size_t len, char *buf)
{
	char		out[MC_DALLI_ROUTE_KEY_MAX];
	size_t		plen = srv->cfg.key_prefix_len;
	size_t		n;

	n = mc_dalli_route_key(plen ? srv->cfg.key_prefix : NULL, plen ? plen - 1 : 0,
						   data, len, GetDatabaseEncoding() == PG_UTF8, out);
	if (n > MC_KEY_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("memcached key is too long"),
				 errdetail("Routed the Dalli way, the key is still %zu bytes; the limit is %d bytes.",
						   n, MC_KEY_MAX)));
	memcpy(buf, out, n);
	return n;
}

/*
 * Check a key and give its routed form in *raw, *rawlen (the data itself
 * when the key is routed as given, else assembled in buf, which must hold
 * MC_MAX_KEY_PREFIX + MC_KEY_MAX bytes) and whether it must go base64.
 * Keys with spaces, control characters or non-ASCII bytes go base64 with
 * the b flag; lengths are checked here so the server never sees a request
 * it would reject.  Over-long keys are digested when the server says so
 * (route_long_key), else refused.  Returns how the routed form was made.
 */
McKeyForm
McKeyRoute(McServer *srv, const char *data, size_t len, char *buf,
		   const char **raw, size_t *rawlen, bool *b64)
{
	size_t		plen = srv->cfg.key_prefix_len;
	McKeyForm	form = MC_KEY_GIVEN;

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("memcached key cannot be empty")));
	*raw = data;
	if (unlikely(len + plen > MC_KEY_MAX))
	{
		if (!srv->cfg.long_keys_dalli)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("memcached key is too long"),
					 errdetail("The key is %zu bytes%s; the limit is %d bytes, or %d bytes for keys that contain spaces, control characters or non-ASCII bytes.",
							   len + plen, plen ? " with the server's key prefix" : "",
							   MC_KEY_MAX, MC_KEY_MAX_B64),
					 errhint("Set the server option \"long_keys\" to \"dalli\" to store longer keys under an MD5 digest, as Dalli does.")));
		*rawlen = route_long_key(srv, data, len, buf);
		*raw = buf;
		form = MC_KEY_DIGESTED;
	}
	else
	{
		if (plen > 0)
		{
			memcpy(buf, srv->cfg.key_prefix, plen);
			memcpy(buf + plen, data, len);
			*raw = buf;
			form = MC_KEY_PREFIXED;
		}
		*rawlen = plen + len;
	}
	if (mc_key_check(*raw, *rawlen, b64) != MC_KEY_OK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("memcached key is too long"),
				 errdetail("The key is %zu bytes%s and contains spaces, control characters or non-ASCII bytes, so it is sent base64-encoded; such keys are limited to %d bytes.",
						   *rawlen, form == MC_KEY_DIGESTED ? " routed the Dalli way" :
						   plen ? " with the server's key prefix" : "",
						   MC_KEY_MAX_B64)));
	return form;
}

/* The wire form of a routed form: itself, or its base64 in buf. */
static inline size_t
wire_of(const char *raw, size_t rawlen, bool b64, char *buf, const char **wire)
{
	if (!b64)
	{
		*wire = raw;
		return rawlen;
	}
	*wire = buf;
	return mc_b64_encode((const unsigned char *) raw, rawlen, buf);
}

/*
 * The wire form of a key McKeyRoute accepted, from what the caller kept:
 * src is the key as given, or for MC_KEY_DIGESTED the routed form itself
 * (a digest is not worth computing twice).  Nothing is checked again.  buf
 * must hold MC_KEY_MAX bytes; *wire points into src or buf.
 */
size_t
McKeyWire(McServer *srv, const char *src, size_t srclen, McKeyForm form,
		  bool b64, char *buf, const char **wire)
{
	char		rawbuf[MC_KEY_MAX];
	size_t		plen = srv->cfg.key_prefix_len;

	if (form != MC_KEY_PREFIXED)
		return wire_of(src, srclen, b64, buf, wire);
	/* prefix + key fit in MC_KEY_MAX, or McKeyRoute would have digested them */
	Assert(plen + srclen <= MC_KEY_MAX);
	if (!b64)
	{
		memcpy(buf, srv->cfg.key_prefix, plen);
		memcpy(buf + plen, src, srclen);
		*wire = buf;
		return plen + srclen;
	}
	memcpy(rawbuf, srv->cfg.key_prefix, plen);
	memcpy(rawbuf + plen, src, srclen);
	return wire_of(rawbuf, plen + srclen, true, buf, wire);
}

/*
 * The wire form of a key a caller routed earlier (McKeyRoute's raw form,
 * kept with many others), into k for one operation (engine.h).  The routed
 * form points into the caller's buffer, so k must not outlive it.
 */
void
McKeyFromRouted(const char *raw, size_t rawlen, McKey *k)
{
	if (mc_key_check(raw, rawlen, &k->b64) != MC_KEY_OK)
		elog(ERROR, "routed memcached key of %zu bytes does not fit", rawlen);
	k->raw = raw;
	k->raw_len = rawlen;
	k->wire_len = wire_of(raw, rawlen, k->b64, k->wirebuf, &k->wire);
}

/*
 * Both forms of a key, for the single-key functions.  The forms point into
 * the argument when they can (no prefix, printable key), so k must not
 * outlive it.
 */
void
McKeyPrepare(McServer *srv, const char *data, size_t len, McKey *k)
{
	McKeyRoute(srv, data, len, k->rawbuf, &k->raw, &k->raw_len, &k->b64);
	k->wire_len = wire_of(k->raw, k->raw_len, k->b64, k->wirebuf, &k->wire);
}
