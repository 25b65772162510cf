/*
 * options.c — what a user can configure, and the checks on it.
 *
 * Owns: the foreign-data-wrapper validator, parsing of foreign-server options
 * into an McServerConfig, and the mcfdw.* GUCs.  Must not: open connections
 * or look at the pool.  Everything that chooses a host lives in foreign-server
 * options, which only roles allowed to create or alter servers can set; no
 * GUC lets an ordinary user point mcfdw at a host.
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include "access/reloptions.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_user_mapping.h"
#include "catalog/pg_foreign_table.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "mcfdw.h"

PG_FUNCTION_INFO_V1(mcfdw_validator);

/* GUC: foreign server used by calls that name none. */
char	   *mc_default_server = NULL;

/* GUC, for the tests: check every hand-laid row against PostgreSQL's. */
bool		mc_debug_check_rows = false;

/* The server options, in the order the errhint lists them. */
static const char *const server_options[] = {
	"servers", "connect_timeout", "io_timeout", "distribution",
	"key_prefix", "long_keys", "failure_limit", "retry_delay", "failover", NULL
};

/* mcfdw.server's assign hook: the pool forgets which server it named. */
static void
default_server_assign(const char *newval, void *extra)
{
	McServerForgetDefault();
}

/*
 * Distribution names: each reproduces one client family's routing (see
 * ring.h for which client setting each matches).
 */
static const struct
{
	const char *name;
	McDist		dist;
}			distributions[] =
{
	{"ketama", MC_DIST_KETAMA},
	{"ketama_md5", MC_DIST_KETAMA_MD5},
	{"ketama_weighted", MC_DIST_KETAMA_WEIGHTED},
	{"ketama_weighted_oat", MC_DIST_KETAMA_WEIGHTED_OAT},
	{"dalli", MC_DIST_DALLI},
	{"modula", MC_DIST_MODULA},
	{NULL, MC_DIST_KETAMA}
};

/* Name of a distribution, for the mc_servers view. */
const char *
McDistName(McDist dist)
{
	for (int i = 0; distributions[i].name; i++)
		if (distributions[i].dist == dist)
			return distributions[i].name;
	return "?";
}

/* Set up the GUCs; called once from _PG_init. */
void
McOptionsInit(void)
{
	DefineCustomStringVariable("mcfdw.server",
							   "Foreign server used by mcfdw calls that name none.",
							   "The server must use the mcfdw foreign-data wrapper, and the "
							   "current user needs USAGE on it.",
							   &mc_default_server,
							   "memcached",
							   PGC_USERSET,
							   0,
							   NULL, default_server_assign, NULL);
	DefineCustomBoolVariable("mcfdw.debug_check_rows",
							 "Checks every row mc_get_multi lays out itself against PostgreSQL's own layout.",
							 "A row that differs byte for byte is an error.  For the tests: "
							 "it forms each row twice.",
							 &mc_debug_check_rows,
							 false,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("mcfdw");
}

/*
 * Build the errhint list of valid options: the user mistyped something and
 * needs to see what is accepted, as postgres_fdw does.
 */
static char *
valid_options_hint(Oid catalog)
{
	StringInfoData buf;

	if (catalog != ForeignServerRelationId)
		return psprintf("There are no valid options in this context.");
	initStringInfo(&buf);
	for (int i = 0; server_options[i]; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", server_options[i]);
	return psprintf("Valid options in this context are: %s.", buf.data);
}

/*
 * Parse a whole number with an optional time unit ("500", "2s", "1min"):
 * timeouts are easier to read with units, and GUC parsing already knows them.
 */
static int
parse_int_option(const char *name, const char *value, int unitflags,
				 int min, int max)
{
	int			result;
	const char *hint = NULL;

	if (!parse_int(value, &result, unitflags, &hint))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", name, value),
				 hint ? errhint("%s", _(hint)) : 0));
	if (result < min || result > max)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("value for option \"%s\" is out of range: \"%s\"", name, value),
				 errdetail("Valid values are between %d and %d%s.", min, max,
						   unitflags == GUC_UNIT_MS ? " milliseconds" :
						   unitflags == GUC_UNIT_S ? " seconds" : "")));
	return result;
}

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
static void
parse_servers(const char *value, McServerConfig *cfg)
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
			if (eps[i].port == eps[n].port &&
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

/*
 * Turn a foreign server's option list into a config, raising an error for
 * anything invalid.  Used by the validator (so bad options never reach the
 * catalog) and by the pool (so the config it runs with is the one that was
 * validated).  All memory comes from cxt.
 */
void
McParseServerOptions(List *options, McServerConfig *cfg, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	ListCell   *lc;
	bool		have_servers = false;

	memset(cfg, 0, sizeof(*cfg));
	cfg->connect_timeout = MC_DEFAULT_CONNECT_TIMEOUT;
	cfg->io_timeout = MC_DEFAULT_IO_TIMEOUT;
	cfg->distribution = MC_DIST_KETAMA;
	cfg->key_prefix = "";
	cfg->failure_limit = MC_DEFAULT_FAILURE_LIMIT;
	cfg->retry_delay = MC_DEFAULT_RETRY_DELAY;
	cfg->failover = false;

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		const char *name = def->defname;
		char	   *value = defGetString(def);

		if (strcmp(name, "servers") == 0)
		{
			parse_servers(value, cfg);
			have_servers = true;
		}
		else if (strcmp(name, "connect_timeout") == 0)
			cfg->connect_timeout = parse_int_option(name, value, GUC_UNIT_MS, 0, 3600000);
		else if (strcmp(name, "io_timeout") == 0)
			cfg->io_timeout = parse_int_option(name, value, GUC_UNIT_MS, 0, 3600000);
		else if (strcmp(name, "failure_limit") == 0)
			cfg->failure_limit = parse_int_option(name, value, 0, 1, 1000);
		else if (strcmp(name, "retry_delay") == 0)
			cfg->retry_delay = parse_int_option(name, value, GUC_UNIT_S, 0, 86400);
		else if (strcmp(name, "failover") == 0)
		{
			if (!parse_bool(value, &cfg->failover))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("option \"%s\" requires a Boolean value", name)));
		}
		else if (strcmp(name, "distribution") == 0)
		{
			int			i;

			for (i = 0; distributions[i].name; i++)
				if (strcmp(value, distributions[i].name) == 0)
					break;
			if (distributions[i].name == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"distribution\": \"%s\"", value),
						 errhint("Valid values are \"ketama\", \"ketama_md5\", \"ketama_weighted\", \"ketama_weighted_oat\", \"dalli\" and \"modula\".")));
			cfg->distribution = distributions[i].dist;
		}
		else if (strcmp(name, "long_keys") == 0)
		{
			if (strcmp(value, "dalli") == 0)
				cfg->long_keys_dalli = true;
			else if (strcmp(value, "error") == 0)
				cfg->long_keys_dalli = false;
			else
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"long_keys\": \"%s\"", value),
						 errhint("Valid values are \"error\" and \"dalli\".")));
		}
		else if (strcmp(name, "key_prefix") == 0)
		{
			if (strlen(value) > MC_MAX_KEY_PREFIX)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("value for option \"key_prefix\" is too long"),
						 errdetail("The limit is %d bytes.", MC_MAX_KEY_PREFIX)));
			cfg->key_prefix = pstrdup(value);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", name),
					 errhint("%s", valid_options_hint(ForeignServerRelationId))));
	}
	if (!have_servers)
		parse_servers("127.0.0.1:11211", cfg);
	cfg->key_prefix_len = (int) strlen(cfg->key_prefix);

	/*
	 * Dalli digests the namespaced key "ns:key", so with long_keys "dalli" a
	 * prefix must be a Dalli namespace plus its colon, or no Dalli client
	 * could share the keys.
	 */
	if (cfg->long_keys_dalli && cfg->key_prefix_len > 0 &&
		(cfg->key_prefix_len == 1 || cfg->key_prefix[cfg->key_prefix_len - 1] != ':'))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"long_keys\" set to \"dalli\" requires a \"key_prefix\" that ends with a colon"),
				 errdetail("Dalli digests long keys with their namespace; the key prefix \"%s\" is not a Dalli namespace.",
						   cfg->key_prefix),
				 errhint("Dalli's namespace \"app\" is key_prefix \"app:\".")));
	MemoryContextSwitchTo(old);
}

/*
 * Validator of the mcfdw wrapper: runs on CREATE/ALTER of the wrapper,
 * servers, user mappings and foreign tables with the complete new option
 * list.  Only servers take options.
 */
Datum
mcfdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);

	if (catalog == ForeignServerRelationId)
	{
		McServerConfig cfg;
		MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "mcfdw validator",
												  ALLOCSET_SMALL_SIZES);

		McParseServerOptions(options, &cfg, cxt);
		MemoryContextDelete(cxt);
	}
	else if (options != NIL)
	{
		DefElem    *def = linitial_node(DefElem, options);

		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("invalid option \"%s\"", def->defname),
				 errhint("%s", valid_options_hint(catalog))));
	}
	PG_RETURN_VOID();
}
