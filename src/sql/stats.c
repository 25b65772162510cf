/*
 * stats.c — the server statistics views, mc_stats and mc_server_stats, and
 * what every statistics SRF shares (slabs.c has the slab views).
 *
 * Owns: asking every memcached instance of the servers the user may use for
 * its "stats" groups, one instance after the other, each command a stats
 * operation (McOp) the runner runs (McRunStats), and typing the STAT lines
 * (int64, double, text).  Must not: call the engine or a connection (the
 * runner and the engine send the command, bound it and tell health),
 * raise because an instance is down or misbehaves (a dashboard has to keep
 * working when a node dies: every command is sent softly, and such an
 * instance contributes no rows, or one row with its error in
 * mc_server_stats), nor swallow a cancel or a statement timeout, nor keep
 * any state between calls.
 *
 * Memory: the STAT values arrive as pointers into the connection's read
 * buffer; the callbacks parse numbers in place and copy only what becomes a
 * tuple (text values) or a slab class record.  Everything an instance needs
 * lives in a context that is reset before the next instance.
 */
#include "postgres.h"

#include <math.h>

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "engine.h"
#include "run.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(mc_stats);
PG_FUNCTION_INFO_V1(mc_server_stats);

/* ---- typed values ---------------------------------------------------- */

/*
 * A decimal integer as memcached prints it (%u, %llu, %jd).  Counters are
 * unsigned 64-bit on the server; one that does not fit int64 is reported as
 * NULL rather than wrapped.
 */
bool
McStatParseInt64(const char *s, size_t len, int64 *out)
{
	int64_t		v;

	if (!mc_parse_i64(s, len, &v))
		return false;
	*out = v;
	return true;
}

/*
 * A fractional value ("rusage_user 0.123456", "growth_factor 1.25").  The
 * value is not NUL-terminated in the read buffer, so it is copied to the
 * stack first; the backend runs with LC_NUMERIC=C, so strtod reads '.'.
 */
bool
McStatParseDouble(const char *s, size_t len, double *out)
{
	char		buf[64];
	char	   *end;
	double		d;

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	d = strtod(buf, &end);
	if (end != buf + len || errno != 0 || !isfinite(d))
		return false;
	*out = d;
	return true;
}


/* ---- which servers, which instance ----------------------------------- */

/*
 * The servers a stats function covers: the one named (checked for USAGE,
 * so naming a server you may not use is an error, as for mc_get), or with
 * NULL every mcfdw server the user has USAGE on (the others are left out,
 * not reported: the views are granted to PUBLIC, like mc_servers).
 */
static List *
target_servers(FunctionCallInfo fcinfo)
{
	if (PG_NARGS() > 0 && !PG_ARGISNULL(0))
		return list_make1_oid(McServerLookup(NameStr(*PG_GETARG_NAME(0)))->serverid);
	return McServerUsableList();
}

/*
 * Run one stats command ("stats <group>", NULL for plain "stats") through
 * the runner (run.h's McRunStats), softly, bounded by mcfdw.stats_timeout,
 * that limit passing counted as the instance's failure.  On failure *err
 * says why, in words a dashboard can show: an instance already marked dead
 * is not contacted at all (the run returns at once), so its last recorded
 * error is given with that fact; otherwise the failure just recorded.
 */
bool
McStatLines(McServer *srv, int index, const char *group, McStatLineFn cb,
		   void *arg, char **err)
{
	McOp		op;
	const McInstanceHealth *h = McInstanceHealthOf(srv, index);
	bool		was_dead = h->dead_until != 0 &&
		GetCurrentTimestamp() < h->dead_until;

	McOpText(&op, MC_OP_STATS, index, group);
	if (McRunStats(srv, &op, mc_stats_timeout, true, cb, arg))
		return true;
	if (was_dead)
		*err = psprintf("instance is marked dead after %d failures in a row, most recently: %s",
						h->failures, h->last_error);
	else
		*err = pstrdup(h->last_error[0] ? h->last_error : "unknown failure");
	return false;
}

/*
 * The loop every stats SRF shares: each instance of each server the call
 * covers, one after the other, in a context reset before each so that a
 * server with many instances does not pile up what each one needed (rows
 * are copied into the tuplestore as they are put).
 */
void
McStatForEachInstance(FunctionCallInfo fcinfo, InstanceFn fn, void *arg)
{
	List	   *servers = target_servers(fcinfo);
	StatsCall	call;
	MemoryContext cxt;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	call.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	call.arg = arg;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "mcfdw stats instance",
								ALLOCSET_DEFAULT_SIZES);
	foreach(lc, servers)
	{
		McServer   *srv = McServerGet(lfirst_oid(lc));

		namestrcpy(&call.srvname, srv->name);
		call.server = NameGetDatum(&call.srvname);
		for (int i = 0; i < srv->cfg.nendpoints; i++)
		{
			MemoryContext old;

			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(cxt);
			old = MemoryContextSwitchTo(cxt);
			call.instance = CStringGetTextDatum(McInstanceName(&srv->net, i));
			fn(&call, srv, i);
			MemoryContextSwitchTo(old);
		}
	}
	MemoryContextDelete(cxt);
}


/* ---- mc_stats --------------------------------------------------------- */

typedef struct RawLines
{
	int			n;
	int			cap;
	text	  **names;
	text	  **values;
} RawLines;

static void
raw_line(void *arg, const char *name, size_t namelen,
		 const char *value, size_t valuelen)
{
	RawLines   *r = (RawLines *) arg;

	if (r->n == r->cap)
	{
		r->cap = r->cap ? r->cap * 2 : 128;
		r->names = r->names ? repalloc(r->names, r->cap * sizeof(text *)) :
			palloc(r->cap * sizeof(text *));
		r->values = r->values ? repalloc(r->values, r->cap * sizeof(text *)) :
			palloc(r->cap * sizeof(text *));
	}
	r->names[r->n] = cstring_to_text_with_len(name, namelen);
	r->values[r->n] = cstring_to_text_with_len(value, valuelen);
	r->n++;
}

/*
 * The groups mc_stats may ask for.  A fixed list, because the group is
 * spliced into the command line, and because some "stats" arguments are not
 * reports at all ("stats reset" clears the counters, "stats detail on"
 * changes the server, "stats cachedump" answers in another format).
 */
static const char *const stats_groups[] = {"slabs", "items", "settings", "sizes", "conns"};

/* One instance of mc_stats: its lines, or none if it failed midway. */
static void
stats_instance(StatsCall *call, McServer *srv, int index)
{
	RawLines	r = {0};
	char	   *err;
	Datum		values[4];
	bool		nulls[4] = {0};

	if (!McStatLines(srv, index, (const char *) call->arg, raw_line, &r, &err))
		return;
	values[0] = call->server;
	values[1] = call->instance;
	for (int j = 0; j < r.n; j++)
	{
		values[2] = PointerGetDatum(r.names[j]);
		values[3] = PointerGetDatum(r.values[j]);
		McStatPutRow(call, values, nulls);
	}
}

/*
 * mc_stats(server, stats_group) returns every STAT line of every instance,
 * untyped: the escape hatch for whatever the typed views do not cover, and
 * the raw material the regression tests check the typed views against.
 * Lines are buffered per instance so that one failing halfway adds none.
 */
Datum
mc_stats(PG_FUNCTION_ARGS)
{
	const char *group = NULL;

	if (PG_NARGS() > 1 && !PG_ARGISNULL(1))
	{
		bool		known = false;

		group = text_to_cstring(PG_GETARG_TEXT_PP(1));
		for (int i = 0; i < (int) lengthof(stats_groups); i++)
			known |= strcmp(group, stats_groups[i]) == 0;
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unsupported stats group \"%s\"", group),
					 errhint("Use NULL for plain \"stats\", or one of \"slabs\", \"items\", \"settings\", \"sizes\", \"conns\".")));
	}
	McStatForEachInstance(fcinfo, stats_instance, (void *) group);
	return (Datum) 0;
}

/* ---- mc_server_stats --------------------------------------------------- */

typedef enum StatType
{
	ST_INT4,
	ST_INT8,
	ST_FLOAT8,
	ST_TEXT,
	ST_HIT_RATIO				/* computed: get_hits / (get_hits + get_misses) */
} StatType;

/*
 * The typed columns of mc_server_stats after (server, instance, host,
 * port), in the order of the SQL declaration; "error" follows them.
 */
static const struct
{
	const char *name;
	StatType	type;
}			server_cols[] =
{
	{"uptime", ST_INT8}, {"version", ST_TEXT}, {"pid", ST_INT4},
	{"pointer_size", ST_INT4}, {"threads", ST_INT4},
	{"rusage_user", ST_FLOAT8}, {"rusage_system", ST_FLOAT8},
	{"max_connections", ST_INT8}, {"curr_connections", ST_INT8},
	{"total_connections", ST_INT8}, {"rejected_connections", ST_INT8},
	{"curr_items", ST_INT8}, {"total_items", ST_INT8}, {"bytes", ST_INT8},
	{"limit_maxbytes", ST_INT8}, {"cmd_get", ST_INT8}, {"cmd_set", ST_INT8},
	{"cmd_flush", ST_INT8}, {"cmd_touch", ST_INT8}, {"get_hits", ST_INT8},
	{"get_misses", ST_INT8}, {"get_expired", ST_INT8},
	{"get_flushed", ST_INT8}, {"hit_ratio", ST_HIT_RATIO},
	{"delete_hits", ST_INT8}, {"delete_misses", ST_INT8},
	{"incr_hits", ST_INT8}, {"incr_misses", ST_INT8}, {"decr_hits", ST_INT8},
	{"decr_misses", ST_INT8}, {"cas_hits", ST_INT8}, {"cas_misses", ST_INT8},
	{"cas_badval", ST_INT8}, {"touch_hits", ST_INT8},
	{"touch_misses", ST_INT8}, {"bytes_read", ST_INT8},
	{"bytes_written", ST_INT8}, {"evictions", ST_INT8},
	{"evicted_active", ST_INT8}, {"evicted_unfetched", ST_INT8},
	{"expired_unfetched", ST_INT8}, {"reclaimed", ST_INT8},
	{"slabs_moved", ST_INT8},
};

#define SERVER_FIXED_COLS	4
#define SERVER_NSTATS		((int) lengthof(server_cols))
#define SERVER_NCOLS		(SERVER_FIXED_COLS + SERVER_NSTATS + 1)

typedef struct ServerRow
{
	Datum		values[SERVER_NCOLS];
	bool		nulls[SERVER_NCOLS];
	int64		get_hits;
	int64		get_misses;
	bool		have_hits;
	bool		have_misses;
} ServerRow;

/*
 * One line of "stats" into its typed column.  A value that does not parse
 * as its type (or does not fit) stays NULL: a view must not fail because
 * one server prints one field oddly.
 */
static void
server_line(void *arg, const char *name, size_t namelen,
			const char *value, size_t valuelen)
{
	ServerRow  *row = (ServerRow *) arg;

	for (int c = 0; c < SERVER_NSTATS; c++)
	{
		int			col = SERVER_FIXED_COLS + c;
		int64		i;
		double		d;

		if (!McStatNameIs(name, namelen, server_cols[c].name))
			continue;
		switch (server_cols[c].type)
		{
			case ST_INT4:
				if (McStatParseInt64(value, valuelen, &i) && i >= PG_INT32_MIN && i <= PG_INT32_MAX)
				{
					row->values[col] = Int32GetDatum((int32) i);
					row->nulls[col] = false;
				}
				break;
			case ST_INT8:
				if (McStatParseInt64(value, valuelen, &i))
				{
					row->values[col] = Int64GetDatum(i);
					row->nulls[col] = false;
					if (McStatNameIs(name, namelen, "get_hits"))
					{
						row->get_hits = i;
						row->have_hits = true;
					}
					else if (McStatNameIs(name, namelen, "get_misses"))
					{
						row->get_misses = i;
						row->have_misses = true;
					}
				}
				break;
			case ST_FLOAT8:
				if (McStatParseDouble(value, valuelen, &d))
				{
					row->values[col] = Float8GetDatum(d);
					row->nulls[col] = false;
				}
				break;
			case ST_TEXT:
				row->values[col] = PointerGetDatum(cstring_to_text_with_len(value, valuelen));
				row->nulls[col] = false;
				break;
			case ST_HIT_RATIO:
				break;
		}
		return;
	}
}

/* One instance of mc_server_stats: always exactly one row. */
static void
server_stats_instance(StatsCall *call, McServer *srv, int index)
{
	ServerRow  *row = palloc0(sizeof(ServerRow));
	char	   *err;

	for (int c = 0; c < SERVER_NCOLS; c++)
		row->nulls[c] = c >= SERVER_FIXED_COLS;
	row->values[0] = call->server;
	row->values[1] = call->instance;
	row->values[2] = CStringGetTextDatum(srv->cfg.endpoints[index].host);
	row->values[3] = Int32GetDatum(srv->cfg.endpoints[index].port);
	row->nulls[3] = (srv->cfg.endpoints[index].port == 0);	/* a Unix socket */

	if (McStatLines(srv, index, NULL, server_line, row, &err))
	{
		for (int c = 0; c < SERVER_NSTATS; c++)
		{
			if (server_cols[c].type == ST_HIT_RATIO && row->have_hits &&
				row->have_misses && row->get_hits + row->get_misses > 0)
			{
				row->values[SERVER_FIXED_COLS + c] =
					Float8GetDatum((double) row->get_hits /
								   ((double) row->get_hits + (double) row->get_misses));
				row->nulls[SERVER_FIXED_COLS + c] = false;
			}
		}
	}
	else
	{
		/* nothing half-read: an instance that failed shows no values */
		for (int c = SERVER_FIXED_COLS; c < SERVER_NCOLS; c++)
			row->nulls[c] = true;
		row->values[SERVER_NCOLS - 1] = CStringGetTextDatum(err);
		row->nulls[SERVER_NCOLS - 1] = false;
	}
	McStatPutRow(call, row->values, row->nulls);
}

/*
 * mc_server_stats(server) returns one row per instance, always: the typed
 * "stats" of an instance that answered, or NULLs and the reason in "error"
 * for one that did not, so a dashboard shows a dead node instead of
 * silently losing it.
 */
Datum
mc_server_stats(PG_FUNCTION_ARGS)
{
	McStatForEachInstance(fcinfo, server_stats_instance, NULL);
	return (Datum) 0;
}

