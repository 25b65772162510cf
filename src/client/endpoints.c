/*
 * endpoints.c — the "servers" option: "host:port[:weight], ..." and
 * "/socket/path[:weight]" entries parsed into the endpoints of an
 * McServerConfig.
 *
 * Owns: what a server-list entry may look like (host names restricted to
 * the characters DNS names and IP literals use, bracketed IPv6, port and
 * weight ranges, Unix socket paths (port 0), no duplicates, at most
 * MC_MAX_ENDPOINTS).  Must not: resolve
 * names or open connections (conn_connect.c does).  options.c's option
 * table calls it for the "servers" option.
 */
#include "postgres.h"

#include <ctype.h>

#include "options.h"

/* Reject a server-list entry with a message that quotes it. */
static void
bad_endpoint(const char *entry, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid entry \"%s\" in option \"servers\"", entry),
			 errdetail("%s", why),
			 errhint("Entries have the form host:port[:weight], separated by commas; "
					 "IPv6 addresses go in brackets, as in [::1]:11211.")));
}

/* Reject a Unix socket entry with a message that quotes it. */
static void
bad_socket(const char *entry, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid entry \"%s\" in option \"servers\"", entry),
			 errdetail("%s", why),
			 errhint("A Unix socket entry is an absolute path, optionally followed by a colon and a weight, as in /run/memcached/memcached.sock:2.")));
}

/* Parse a decimal field of an endpoint, bounded; -1 if it is not a number. */
static long
parse_endpoint_number(const char *s, long min, long max)
{
	uint64_t	v;

	if (!mc_parse_u64(s, strlen(s), (uint64_t) max, &v) || v < (uint64_t) min)
		return -1;
	return (long) v;
}

/*
 * Parse one "/path[:weight]" entry: a Unix socket (memcached -s), port 0.
 * The path is restricted to letters, digits, dots, hyphens, underscores and
 * slashes (no colon: it separates the weight, as Dalli reads it), and must
 * fit a sockaddr_un.
 */
static void
parse_socket(char *entry, const char *orig, McEndpoint *ep)
{
	char	   *weight = strchr(entry, ':');
	long		v;

	if (weight)
		*weight++ = '\0';
	for (const char *p = entry; *p; p++)
		if (!isalnum((unsigned char) *p) && *p != '.' && *p != '-' &&
			*p != '_' && *p != '/')
			bad_socket(orig, "A socket path may contain only letters, digits, dots, hyphens, underscores and slashes.");
	if (strlen(entry) > MC_SOCKET_PATH_MAX)
		bad_socket(orig, psprintf("A socket path may be at most %d bytes long.",
								  MC_SOCKET_PATH_MAX));
	if (entry[strlen(entry) - 1] == '/')
		bad_socket(orig, "The path names a directory, not a socket.");
	strlcpy(ep->host, entry, sizeof(ep->host));
	ep->port = 0;
	ep->weight = 1;
	if (weight)
	{
		if (strchr(weight, ':'))
			bad_socket(orig, "A Unix socket has no port: only a weight may follow the path.");
		v = parse_endpoint_number(weight, 1, 10000);
		if (v < 0)
			bad_socket(orig, "The weight must be a number between 1 and 10000.");
		ep->weight = (uint32) v;
	}
}

/*
 * Parse one "host[:port[:weight]]" entry.  Host names are restricted to the
 * characters DNS names and IP literals use, so nothing odd reaches the
 * resolver or the ring's point names.
 */
static void
parse_endpoint(char *entry, McEndpoint *ep)
{
	const char *orig = pstrdup(entry);	/* for messages: entry is cut up */
	char	   *host = entry;
	char	   *rest;
	char	   *weight = NULL;
	long		v;

	/* "a:1 b:2" is two entries written with the wrong separator */
	for (const char *p = entry; *p; p++)
		if (isspace((unsigned char) *p))
			(*entry == '/' ? bad_socket : bad_endpoint)
				(orig, "Entries are separated by commas, and this one contains a space.");
	if (*entry == '/')
	{
		parse_socket(entry, orig, ep);
		return;
	}
	if (*entry == '[')
	{
		host = entry + 1;
		rest = strchr(host, ']');
		if (rest == NULL)
			bad_endpoint(orig, "An opening bracket has no closing bracket.");
		*rest++ = '\0';
		if (*rest != '\0' && *rest != ':')
			bad_endpoint(orig, "A closing bracket must be followed by a colon and a port.");
		for (const char *p = host; *p; p++)
			if (!isxdigit((unsigned char) *p) && *p != ':' && *p != '.')
				bad_endpoint(orig, "A bracketed host must be an IPv6 address.");
		if (*rest == ':')
			rest++;
		else
			rest = NULL;
	}
	else
	{
		rest = strchr(entry, ':');
		if (rest)
			*rest++ = '\0';
		for (const char *p = host; *p; p++)
			if (!isalnum((unsigned char) *p) && *p != '.' && *p != '-' && *p != '_')
				bad_endpoint(orig, "A host name may contain only letters, digits, dots, hyphens and underscores.");
	}
	if (*host == '\0')
		bad_endpoint(orig, "The host is empty.");
	if (strlen(host) > MC_HOST_MAX)
		bad_endpoint(orig, "The host name is too long.");
	strlcpy(ep->host, host, sizeof(ep->host));

	ep->port = MC_DEFAULT_PORT;
	ep->weight = 1;
	if (rest)
	{
		weight = strchr(rest, ':');
		if (weight)
			*weight++ = '\0';
		v = parse_endpoint_number(rest, 1, 65535);
		if (v < 0)
			bad_endpoint(orig, "The port must be a number between 1 and 65535.");
		ep->port = (int) v;
	}
	if (weight)
	{
		v = parse_endpoint_number(weight, 1, 10000);
		if (v < 0)
			bad_endpoint(orig, "The weight must be a number between 1 and 10000.");
		ep->weight = (uint32) v;
	}
}

/*
 * Parse the "servers" list.  The whole list is checked even where only part
 * of it is used, so a typo is caught at CREATE/ALTER SERVER time, not at the
 * first cache miss in production.
 */
void
McEndpointsParse(const char *value, McServerConfig *cfg)
{
	char	   *copy = pstrdup(value);
	char	   *next = copy;
	int			n = 0;
	McEndpoint *eps;
	const char *p = value;

	while (isspace((unsigned char) *p))
		p++;
	if (*p == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"servers\" must name at least one server")));
	eps = palloc0(sizeof(McEndpoint) * MC_MAX_ENDPOINTS);

	/* split by hand: strtok would silently skip an empty entry */
	while (next != NULL)
	{
		char	   *tok = next;
		char	   *end;

		next = strchr(tok, ',');
		if (next)
			*next++ = '\0';
		while (isspace((unsigned char) *tok))
			tok++;
		end = tok + strlen(tok);
		while (end > tok && isspace((unsigned char) end[-1]))
			*--end = '\0';
		if (*tok == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"servers\" contains an empty entry")));
		if (n >= MC_MAX_ENDPOINTS)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"servers\" lists more than %d servers",
							MC_MAX_ENDPOINTS)));
		parse_endpoint(tok, &eps[n]);
		for (int i = 0; i < n; i++)
			if (eps[i].port == eps[n].port && eps[n].port == 0 &&
				strcmp(eps[i].host, eps[n].host) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("socket \"%s\" is listed twice in option \"servers\"",
								eps[n].host)));
			else if (eps[i].port == eps[n].port && eps[n].port != 0 &&
					 pg_strcasecmp(eps[i].host, eps[n].host) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("server \"%s:%d\" is listed twice in option \"servers\"",
								eps[n].host, eps[n].port)));
		n++;
	}
	cfg->nendpoints = n;
	cfg->endpoints = repalloc(eps, sizeof(McEndpoint) * n);
	pfree(copy);
}
