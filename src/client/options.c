/*
 * options.c — what a user can configure, and the checks on it.
 *
 * Owns: the option table (every option's name, the catalog it is valid in,
 * its default and its parse function), which drives the
 * foreign-data-wrapper validator, the parsing of a foreign server's options
 * into an McServerConfig and the "valid options" hint; and the mcfdw.*
 * GUCs.  Must not: open connections or read pool state; its one call into
 * the pool is mcfdw.server's assign hook, which tells the pool to forget
 * the default server it cached.  Everything that chooses a host lives in
 * foreign-server options, which only roles allowed to create or alter
 * servers can set; no GUC lets an ordinary user point mcfdw at a host.
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_user_mapping.h"
#include "catalog/pg_foreign_table.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/varlena.h"

#include "options.h"
#include "client_stats.h"
#include "compress.h"

PG_FUNCTION_INFO_V1(mcfdw_validator);

/* GUC: foreign server used by calls that name none. */
char	   *mc_default_server = NULL;

/* GUC: bound on each instance of a statistics view or function, ms (0 = none). */
int			mc_stats_timeout = 5000;
/* GUC: warn (once per statement and server) when a call degrades to a miss. */
bool		mc_warn_on_miss = true;

/* GUC: may the planner join foreign tables in batches (fdw_join.c). */
bool		mc_enable_batched_join = true;
bool		mc_prefetch = true;
int			mc_prefetch_batch_size = 1000;

/* GUC, for the tests: check every hand-laid row against PostgreSQL's. */
bool		mc_debug_check_rows = false;

/*
 * Bumped whenever mcfdw.server changes (SET, RESET, a rollback, a reload).
 * server_cache.c caches the default server's OID with the generation it was
 * resolved in; a counter keeps this file from calling into the pool.
 */
uint64		mc_default_server_gen = 1;

static void
default_server_assign(const char *newval, void *extra)
{
	mc_default_server_gen++;
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
	DefineCustomIntVariable("mcfdw.stats_timeout",
							"Longest time a statistics view or function spends on one memcached instance.",
							"Covers the connect and the whole reply; a server's smaller io_timeout "
							"bounds the reply too.  0 means no bound but io_timeout.",
							&mc_stats_timeout,
							5000, 0, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("mcfdw.debug_check_rows",
							 "Checks every row mc_get_multi lays out itself against PostgreSQL's own layout.",
							 "A row that differs byte for byte is an error.  For the tests: "
							 "it forms each row twice.",
							 &mc_debug_check_rows,
							 false,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mcfdw.warn_on_miss",
							 "Warns when a server with on_failure \"miss\" answers a call with a miss because an instance is unreachable.",
							 "At most one warning per statement and server; the degraded column of mc_servers counts every such call.",
							 &mc_warn_on_miss,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mcfdw.prefetch",
							 "Lets a query that calls mc_get or mc_get_bytea once per row read the keys of a batch of rows in one round.",
							 "Each call then takes its answer from the batch; when off, every call is a round trip of its own.",
							 &mc_prefetch,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("mcfdw.prefetch_batch_size",
							"Most rows whose keys mc_get prefetching reads in one round.",
							"Batches start small and double up to this; rows and values "
							"read ahead are also kept within work_mem.",
							&mc_prefetch_batch_size,
							1000, 1, 100000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("mcfdw.enable_batched_join",
							 "Lets the planner join a foreign table on its key in batches of outer rows.",
							 "Each batch of outer rows is one pipelined multi-get; when off, such "
							 "a join runs as a nested loop with one round trip per outer row.",
							 &mc_enable_batched_join,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	/* superuser: a session must not hide its calls from the cluster's counts */
	DefineCustomBoolVariable("mcfdw.client_stats",
							 "Counts what mcfdw does in mc_client_stats.",
							 "When off, requests are not counted: the view's counts stay as they are.",
							 &mc_client_stats_on,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	/* a size of shared memory: only when preloaded (else the session's own) */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("mcfdw.client_stats_max",
								"Rows of mc_client_stats kept in shared memory when mcfdw is preloaded.",
								"One row per database, server, instance and kind of operation; "
								"counts beyond it go to the overflow rows.",
								&mc_client_stats_max,
								1000, 16, 100000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
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
						   unitflags == GUC_UNIT_S ? " seconds" :
						   unitflags == GUC_UNIT_BYTE ? " bytes" : "")));
	return result;
}

/* "Valid values are "a", "b" and "c".": the hint of a bad choice. */
static char *
valid_values_hint(const char *const *names, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s\"%s\"",
						 i == 0 ? "" : i == n - 1 ? " and " : ", ", names[i]);
	return psprintf("Valid values are %s.", buf.data);
}

/* Reject a value that is not one of names[0..n-1]. */
static void
bad_choice(const char *name, const char *value, const char *const *names, int n)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid value for option \"%s\": \"%s\"", name, value),
			 errhint("%s", valid_values_hint(names, n))));
}

/* ---- the option table -------------------------------------------------- */

typedef struct McOption McOption;

/*
 * Parse value (the option's own or its default) into cfg, raising an error
 * that names the option when it is invalid.  cfg is the struct of the
 * option's catalog: McServerConfig for servers and user mappings,
 * McTableOptions for foreign tables, McColumnOptions for their columns.
 */
typedef void (*McOptionParse) (const McOption *opt, const char *value,
							   void *cfg);

struct McOption
{
	const char *name;
	Oid			context;		/* catalog it is valid in (ForeignServerRelationId,
								 * UserMappingRelationId, ...) */
	const char *default_value;	/* parsed when the option is absent; NULL: none */
	McOptionParse parse;
	size_t		field;			/* offset of the field it sets in cfg */
	int			min;			/* whole-number options: range and unit */
	int			max;
	int			unit;			/* GUC_UNIT_MS, GUC_UNIT_S or 0 */
	bool		superuser_only; /* names a file the backend reads: only a
								 * superuser may set it */
};

#define CFG_FIELD(f) offsetof(McServerConfig, f)
#define TABLE_FIELD(f) offsetof(McTableOptions, f)

static void
opt_servers(const McOption *opt, const char *value, void *cfg)
{
	McEndpointsParse(value, cfg);
}

static void
opt_int(const McOption *opt, const char *value, void *cfg)
{
	*(int *) ((char *) cfg + opt->field) =
		parse_int_option(opt->name, value, opt->unit, opt->min, opt->max);
}

static void
opt_bool(const McOption *opt, const char *value, void *cfg)
{
	if (!parse_bool(value, (bool *) ((char *) cfg + opt->field)))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" requires a Boolean value", opt->name)));
}

/* The names are ring.c's; the hint lists them in McDist order. */
static void
opt_distribution(const McOption *opt, const char *value, void *arg)
{
	McServerConfig *cfg = arg;
	const char *names[MC_NDIST];

	if (mc_dist_from_name(value, &cfg->distribution))
		return;
	for (int i = 0; i < MC_NDIST; i++)
		names[i] = mc_dist_name((McDist) i);
	bad_choice(opt->name, value, names, MC_NDIST);
}

static void
opt_long_keys(const McOption *opt, const char *value, void *arg)
{
	McServerConfig *cfg = arg;
	static const char *const names[] = {"error", "dalli"};

	if (strcmp(value, "dalli") == 0)
		cfg->long_keys_dalli = true;
	else if (strcmp(value, "error") == 0)
		cfg->long_keys_dalli = false;
	else
		bad_choice(opt->name, value, names, lengthof(names));
}

static void
opt_on_failure(const McOption *opt, const char *value, void *arg)
{
	McServerConfig *cfg = arg;
	static const char *const names[] = {"error", "miss"};

	if (strcmp(value, "miss") == 0)
		cfg->on_failure_miss = true;
	else if (strcmp(value, "error") == 0)
		cfg->on_failure_miss = false;
	else
		bad_choice(opt->name, value, names, lengthof(names));
}

static void
opt_compression(const McOption *opt, const char *value, void *arg)
{
	static const char *const names[] = {"none", "zlib"};
	McServerConfig *cfg = arg;

	if (strcmp(value, "zlib") == 0)
		cfg->compression = true;
	else if (strcmp(value, "none") == 0)
		cfg->compression = false;
	else
		bad_choice(opt->name, value, names, lengthof(names));
}

/*
 * A bit mask of a value's 32-bit client flags, in decimal (as the clients'
 * documentation gives them: 2 for Dalli, 8 for pylibmc).  min is 1 for a
 * mask that must name some bit, 0 where 0 means "none".
 */
static void
opt_flag_mask(const McOption *opt, const char *value, void *cfg)
{
	uint64_t	v;

	if (!mc_parse_u64(value, strlen(value), UINT32_MAX, &v) || v < (uint64_t) opt->min)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", opt->name, value),
				 errdetail("The value must be a decimal bit mask between %d and 4294967295.",
						   opt->min)));
	*(uint32 *) ((char *) cfg + opt->field) = (uint32) v;
}

static void
check_key_prefix(const McOption *opt, const char *value)
{
	if (strlen(value) > MC_MAX_KEY_PREFIX)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("value for option \"%s\" is too long", opt->name),
				 errdetail("The limit is %d bytes.", MC_MAX_KEY_PREFIX)));
}

static void
opt_key_prefix(const McOption *opt, const char *value, void *cfg)
{
	McServerConfig *c = cfg;

	check_key_prefix(opt, value);
	c->key_prefix = pstrdup(value);
	c->key_prefix_len = (int) strlen(value);
}

/* A foreign table's key prefix: goes after the server's (see fdw.h). */
static void
opt_table_key_prefix(const McOption *opt, const char *value, void *cfg)
{
	McTableOptions *t = cfg;

	check_key_prefix(opt, value);
	t->key_prefix = pstrdup(value);
	t->key_prefix_len = (int) strlen(value);
}

/* A column's "field" option: which item field the column holds. */
static void
opt_field(const McOption *opt, const char *value, void *cfg)
{
	McField		f = McFieldFromName(value);

	if (f == MC_FIELD_NONE)
	{
		const char *names[MC_NFIELDS];

		for (int i = 0; i < MC_NFIELDS; i++)
			names[i] = McFieldName((McField) i);
		bad_choice(opt->name, value, names, MC_NFIELDS);
	}
	((McColumnOptions *) cfg)->field = f;
}

static const char *const tls_names[] = {"disable", "require", "verify-ca", "verify-full"};

static void
opt_tls(const McOption *opt, const char *value, void *arg)
{
	McServerConfig *cfg = arg;
	for (int i = 0; i < (int) lengthof(tls_names); i++)
		if (strcmp(value, tls_names[i]) == 0)
		{
			cfg->tls = (McTlsMode) i;
			return;
		}
	bad_choice(opt->name, value, tls_names, lengthof(tls_names));
}

/*
 * A string kept as given (a file name, a host name, a credential): NULL
 * stays NULL, so "not given" can be told apart.  No CR, LF or NUL: each
 * ends up in a file name or on the wire.
 */
static void
opt_string(const McOption *opt, const char *value, void *cfg)
{
	if (value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not be empty", opt->name)));
	for (const char *p = value; *p; p++)
		if (*p == '\r' || *p == '\n')
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"%s\" must not contain line breaks", opt->name)));
	*(char **) ((char *) cfg + opt->field) = pstrdup(value);
}

/*
 * The user name of ASCII authentication: memcached splits "user password"
 * at the first space, and its auth file at the colon.
 */
static void
opt_username(const McOption *opt, const char *value, void *cfg)
{
	for (const char *p = value; *p; p++)
		if ((unsigned char) *p <= ' ' || *p == ':' || (unsigned char) *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"%s\" must not contain spaces, control characters or colons",
							opt->name)));
	if (strlen(value) > MC_AUTH_FIELD_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("value for option \"%s\" is too long", opt->name),
				 errdetail("The limit is %d bytes.", MC_AUTH_FIELD_MAX)));
	opt_string(opt, value, cfg);
}

/*
 * The host name sent as SNI and checked against the certificate: no
 * spaces or control characters, which no host name has and which would
 * otherwise reach messages as they are.
 */
static void
opt_server_name(const McOption *opt, const char *value, void *cfg)
{
	for (const char *p = value; *p; p++)
		if ((unsigned char) *p <= ' ' || (unsigned char) *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"%s\" must not contain spaces or control characters",
							opt->name)));
	opt_string(opt, value, cfg);
}

/*
 * The password: never quoted in a message, whatever is wrong with it.
 * memcached (1.6.18) splits the login's "user password" at every run of
 * spaces and takes the second word: a password with a space can never
 * log in, so it is refused here rather than at every connect.
 */
static void
opt_password(const McOption *opt, const char *value, void *cfg)
{
	for (const char *p = value; *p; p++)
		if ((unsigned char) *p < ' ' || (unsigned char) *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"%s\" must not contain control characters",
							opt->name)));
	if (strchr(value, ' ') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not contain spaces", opt->name),
				 errdetail("memcached's login splits the user name and the password at spaces, so it can never accept such a password.")));
	if (strlen(value) > MC_AUTH_FIELD_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("value for option \"%s\" is too long", opt->name),
				 errdetail("The limit is %d bytes.", MC_AUTH_FIELD_MAX)));
	opt_string(opt, value, cfg);
}

/*
 * The roles that may write (server_cache.c's McServerCheckWrite): a list of role
 * names as search_path takes them (unquoted names folded to lower case,
 * "Quoted" kept).  '' is a valid list: only the owner writes.
 */
static void
opt_writers(const McOption *opt, const char *value, void *arg)
{
	McServerConfig *cfg = arg;
	List	   *names;

	if (!SplitIdentifierString(pstrdup(value), ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", opt->name, value),
				 errdetail("The value must be a comma-separated list of role names.")));
	cfg->writers_set = true;
	cfg->writers = names;
}

/*
 * The writers must exist when the option is stored (a typo would lock the
 * role out silently); a role dropped later matches nobody.
 */
static void
check_writers_exist(const McServerConfig *cfg)
{
	ListCell   *lc;

	foreach(lc, cfg->writers)
		if (!OidIsValid(get_role_oid((const char *) lfirst(lc), true)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("role \"%s\" in option \"writers\" does not exist",
							(const char *) lfirst(lc)),
					 strcmp((const char *) lfirst(lc), "public") == 0 ?
					 errhint("Without option \"writers\", every role with USAGE on the server may write.") : 0));
}

/*
 * Every option, in the order the "valid options" hint lists them.  Adding
 * an option is one row here (and a parse function when no existing one
 * fits).  Options of user mappings are rows with UserMappingRelationId;
 * they parse into the same McServerConfig, because what a connection uses
 * is its server's options plus the current user's mapping.
 */
static const McOption options_table[] = {
	{.name = "servers", .context = ForeignServerRelationId,
	 .default_value = "127.0.0.1:" CppAsString2(MC_DEFAULT_PORT),
	 .parse = opt_servers},
	{.name = "connect_timeout", .context = ForeignServerRelationId,
	 .default_value = CppAsString2(MC_DEFAULT_CONNECT_TIMEOUT),
	 .parse = opt_int, .field = CFG_FIELD(connect_timeout),
	 .min = 0, .max = 3600000, .unit = GUC_UNIT_MS},
	{.name = "io_timeout", .context = ForeignServerRelationId,
	 .default_value = CppAsString2(MC_DEFAULT_IO_TIMEOUT),
	 .parse = opt_int, .field = CFG_FIELD(io_timeout),
	 .min = 0, .max = 3600000, .unit = GUC_UNIT_MS},
	{.name = "distribution", .context = ForeignServerRelationId,
	 .default_value = "ketama", .parse = opt_distribution},
	{.name = "key_prefix", .context = ForeignServerRelationId,
	 .default_value = "", .parse = opt_key_prefix},
	{.name = "long_keys", .context = ForeignServerRelationId,
	 .default_value = "error", .parse = opt_long_keys},
	{.name = "failure_limit", .context = ForeignServerRelationId,
	 .default_value = CppAsString2(MC_DEFAULT_FAILURE_LIMIT),
	 .parse = opt_int, .field = CFG_FIELD(failure_limit),
	 .min = 1, .max = 1000},
	{.name = "retry_delay", .context = ForeignServerRelationId,
	 .default_value = CppAsString2(MC_DEFAULT_RETRY_DELAY),
	 .parse = opt_int, .field = CFG_FIELD(retry_delay),
	 .min = 0, .max = 86400, .unit = GUC_UNIT_S},
	{.name = "failover", .context = ForeignServerRelationId,
	 .default_value = "false", .parse = opt_bool, .field = CFG_FIELD(failover)},
	{.name = "idle_timeout", .context = ForeignServerRelationId,
	 .default_value = "0", .parse = opt_int, .field = CFG_FIELD(idle_timeout),
	 .min = 0, .max = 7 * 86400, .unit = GUC_UNIT_S},
	{.name = "max_reply_size", .context = ForeignServerRelationId,
	 .default_value = "64MB", .parse = opt_int, .field = CFG_FIELD(max_reply_size),
	 .min = MC_MIN_MAX_REPLY_SIZE, .max = (int) (MaxAllocSize / 2), .unit = GUC_UNIT_BYTE},
	{.name = "legacy_misses", .context = ForeignServerRelationId,
	 .default_value = "false", .parse = opt_bool, .field = CFG_FIELD(legacy_misses)},
	{.name = "on_failure", .context = ForeignServerRelationId,
	 .default_value = "error", .parse = opt_on_failure},
	{.name = "tls", .context = ForeignServerRelationId,
	 .default_value = "disable", .parse = opt_tls},
	{.name = "tls_ca_file", .context = ForeignServerRelationId,
	 .parse = opt_string, .field = CFG_FIELD(tls_ca_file), .superuser_only = true},
	{.name = "tls_server_name", .context = ForeignServerRelationId,
	 .parse = opt_server_name, .field = CFG_FIELD(tls_server_name)},
	{.name = "tls_cert_file", .context = ForeignServerRelationId,
	 .parse = opt_string, .field = CFG_FIELD(tls_cert_file), .superuser_only = true},
	{.name = "tls_key_file", .context = ForeignServerRelationId,
	 .parse = opt_string, .field = CFG_FIELD(tls_key_file), .superuser_only = true},
	{.name = "username", .context = UserMappingRelationId,
	 .parse = opt_username, .field = CFG_FIELD(username)},
	{.name = "password", .context = UserMappingRelationId,
	 .parse = opt_password, .field = CFG_FIELD(password)},
	{.name = "compression", .context = ForeignServerRelationId,
	 .default_value = "none", .parse = opt_compression},
	{.name = "compressed_flag", .context = ForeignServerRelationId,
	 .parse = opt_flag_mask, .field = CFG_FIELD(compressed_flag), .min = 1},
	{.name = "compress_threshold", .context = ForeignServerRelationId,
	 .default_value = "4096", .parse = opt_int, .field = CFG_FIELD(compress_threshold),
	 .min = 0, .max = (int) (MaxAllocSize / 2), .unit = GUC_UNIT_BYTE},
	{.name = "compression_level", .context = ForeignServerRelationId,
	 .default_value = CppAsString2(MC_DEFLATE_DEFAULT_LEVEL), .parse = opt_int,
	 .field = CFG_FIELD(compression_level),
	 .min = MC_DEFLATE_MIN_LEVEL, .max = MC_DEFLATE_MAX_LEVEL},
	{.name = "max_value_size", .context = ForeignServerRelationId,
	 .default_value = "16MB", .parse = opt_int, .field = CFG_FIELD(max_value_size),
	 .min = MC_MIN_MAX_VALUE_SIZE, .max = (int) (MaxAllocSize / 2), .unit = GUC_UNIT_BYTE},
	{.name = "serialized_flag", .context = ForeignServerRelationId,
	 .default_value = "0", .parse = opt_flag_mask, .field = CFG_FIELD(serialized_flag),
	 .min = 0},
	{.name = "writers", .context = ForeignServerRelationId, .parse = opt_writers},
	{.name = "allow_full_scan", .context = ForeignServerRelationId,
	 .default_value = "false", .parse = opt_bool, .field = CFG_FIELD(allow_full_scan)},
	/* foreign tables (fdw.h's McTableOptions) */
	{.name = "key_prefix", .context = ForeignTableRelationId,
	 .default_value = "", .parse = opt_table_key_prefix},
	{.name = "ttl", .context = ForeignTableRelationId,
	 .default_value = "0", .parse = opt_int, .field = TABLE_FIELD(ttl),
	 .min = 0, .max = PG_INT32_MAX, .unit = GUC_UNIT_S},
	{.name = "batch_size", .context = ForeignTableRelationId,
	 .default_value = "1000", .parse = opt_int, .field = TABLE_FIELD(batch_size),
	 .min = 1, .max = 100000},
	{.name = "join_batch_size", .context = ForeignTableRelationId,
	 .default_value = "5000", .parse = opt_int, .field = TABLE_FIELD(join_batch_size),
	 .min = 1, .max = 100000},
	{.name = "allow_full_scan", .context = ForeignTableRelationId,
	 .default_value = "false", .parse = opt_bool, .field = TABLE_FIELD(allow_full_scan)},
	/* their columns (McColumnOptions) */
	{.name = "field", .context = AttributeRelationId, .parse = opt_field},
};

#define NOPTIONS	((int) lengthof(options_table))

/*
 * The errhint listing the options valid in a catalog: the user mistyped
 * something and needs to see what is accepted, as postgres_fdw does.
 */
static char *
valid_options_hint(Oid context)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < NOPTIONS; i++)
		if (options_table[i].context == context)
			appendStringInfo(&buf, "%s%s", buf.len ? ", " : "",
							 options_table[i].name);
	if (buf.len == 0)
		return psprintf("There are no valid options in this context.");
	return psprintf("Valid options in this context are: %s.", buf.data);
}

/*
 * Parse the options given for one catalog object in list order (so the
 * first bad one is the one reported), then the defaults of those not given.
 */
static void
parse_options(List *options, Oid context, void *cfg, bool validating)
{
	bool		given[lengthof(options_table)] = {0};
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		int			i;

		for (i = 0; i < NOPTIONS; i++)
			if (options_table[i].context == context &&
				strcmp(options_table[i].name, def->defname) == 0)
				break;
		if (i == NOPTIONS)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", def->defname),
					 errhint("%s", valid_options_hint(context))));
		/*
		 * A file option makes the backend read that file, as the server's
		 * OS user: a role allowed to create servers must not choose it.
		 * Checked when the option is stored, not when it is used.
		 */
		if (validating && options_table[i].superuser_only && !superuser())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to set option \"%s\"", def->defname),
					 errdetail("Only superusers may set options that name files the server reads.")));
		options_table[i].parse(&options_table[i], defGetString(def), cfg);
		given[i] = true;
	}
	for (int i = 0; i < NOPTIONS; i++)
		if (options_table[i].context == context && !given[i] &&
			options_table[i].default_value != NULL)
			options_table[i].parse(&options_table[i],
								   options_table[i].default_value, cfg);
}

/* Checks across options of a server, which no single row can make. */
static void
check_server_config(McServerConfig *cfg)
{
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

	/* a TLS setting that TLS off would silently ignore is a mistake */
	if (cfg->tls == MC_TLS_DISABLE &&
		(cfg->tls_ca_file || cfg->tls_server_name || cfg->tls_cert_file || cfg->tls_key_file))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"tls_ca_file\", \"tls_server_name\", \"tls_cert_file\" and \"tls_key_file\" require option \"tls\""),
				 errhint("Set option \"tls\" to \"require\", \"verify-ca\" or \"verify-full\".")));
	if ((cfg->tls_cert_file != NULL) != (cfg->tls_key_file != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"tls_cert_file\" and \"tls_key_file\" must be given together")));

	/* memcached encrypts its TCP listeners only (-Z); a socket stays local */
	for (int i = 0; cfg->tls != MC_TLS_DISABLE && i < cfg->nendpoints; i++)
		if (cfg->endpoints[i].port == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"tls\" cannot be used with a Unix socket"),
					 errdetail("Option \"servers\" names the Unix socket \"%s\"; memcached's TLS (-Z) covers its TCP ports only.",
							   cfg->endpoints[i].host),
					 errhint("Set option \"tls\" to \"disable\", or list the server's TCP port instead.")));

	/* the bit is the client family's choice: 2 in Dalli, 8 in pylibmc */
	if (cfg->compression && cfg->compressed_flag == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"compression\" set to \"zlib\" requires option \"compressed_flag\""),
				 errhint("Dalli marks compressed values with flag 2, pylibmc and pymemcache with flag 8.")));
	if (cfg->compressed_flag & cfg->serialized_flag)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"compressed_flag\" and \"serialized_flag\" share bits")));
}

/*
 * Turn a foreign server's option list into a config, raising an error for
 * anything invalid.  Used by the validator (so bad options never reach the
 * catalog) and by the pool (so the config it runs with is the one that was
 * validated).  All memory comes from cxt.
 */
void
McOptionsParseServer(List *options, McServerConfig *cfg, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);

	memset(cfg, 0, sizeof(*cfg));
	parse_options(options, ForeignServerRelationId, cfg, false);
	check_server_config(cfg);

	MemoryContextSwitchTo(old);
}

/* A user mapping's credentials come as a pair or not at all. */
static void
check_user_mapping(McServerConfig *cfg)
{
	if ((cfg->username != NULL) != (cfg->password != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"username\" and \"password\" must be given together")));
}

/*
 * Parse a user mapping's options into cfg (already holding its server's),
 * as McOptionsParseServer does for the server.
 */
void
McOptionsParseUserMapping(List *options, McServerConfig *cfg, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);

	cfg->username = cfg->password = NULL;
	parse_options(options, UserMappingRelationId, cfg, false);
	check_user_mapping(cfg);
	MemoryContextSwitchTo(old);
}

/* A foreign table's options (fdw.h). */
void
McOptionsParseTable(List *options, McTableOptions *t)
{
	memset(t, 0, sizeof(*t));
	parse_options(options, ForeignTableRelationId, t, false);
}

/* A foreign table column's options (fdw.h); field MC_FIELD_NONE if none. */
void
McOptionsParseColumn(List *options, McColumnOptions *c)
{
	c->field = MC_FIELD_NONE;
	parse_options(options, AttributeRelationId, c, false);
}

static bool
str_eq(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/*
 * Would a connection made under config a serve b as it is?  Only when the
 * transport (TLS and its files) and the login are the same: a socket
 * authenticated or verified under other settings must not be carried over.
 */
bool
McOptionsSameTransport(const McServerConfig *a, const McServerConfig *b)
{
	return a->tls == b->tls &&
		str_eq(a->tls_ca_file, b->tls_ca_file) &&
		str_eq(a->tls_server_name, b->tls_server_name) &&
		str_eq(a->tls_cert_file, b->tls_cert_file) &&
		str_eq(a->tls_key_file, b->tls_key_file) &&
		str_eq(a->username, b->username) &&
		str_eq(a->password, b->password);
}

/*
 * Validator of the mcfdw wrapper: runs on CREATE/ALTER of the wrapper,
 * servers, user mappings and foreign tables with the complete new option
 * list, which is parsed exactly as its users will parse it.
 */
Datum
mcfdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	McServerConfig cfg;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "mcfdw validator",
											  ALLOCSET_SMALL_SIZES);

	MemoryContext old = MemoryContextSwitchTo(cxt);

	if (catalog == ForeignTableRelationId)
	{
		McTableOptions topts;

		memset(&topts, 0, sizeof(topts));
		parse_options(options, catalog, &topts, true);
	}
	else if (catalog == AttributeRelationId)
	{
		McColumnOptions copts;

		copts.field = MC_FIELD_NONE;
		parse_options(options, catalog, &copts, true);
	}
	else
	{
		memset(&cfg, 0, sizeof(cfg));
		parse_options(options, catalog, &cfg, true);
	}
	if (catalog == ForeignServerRelationId)
	{
		check_server_config(&cfg);
		check_writers_exist(&cfg);
	}
	else if (catalog == UserMappingRelationId)
		check_user_mapping(&cfg);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	PG_RETURN_VOID();
}
