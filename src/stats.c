/*
 * stats.c — the statistics views: mc_stats, mc_server_stats, mc_slab_stats,
 * mc_slab_summary and mc_slab_ladder.
 *
 * Owns: asking every memcached instance of the servers the user may use for
 * its "stats" groups, typing the STAT lines (int64, double, text), merging
 * "stats slabs" with "stats items" by slab class, and deriving the slab
 * class ladder from "stats settings".  Must not: raise because an instance
 * is down or misbehaves (a dashboard has to keep working when a node dies:
 * every command is sent softly, and such an instance contributes no rows, or
 * one row with its error in mc_server_stats), nor swallow a cancel or a
 * statement timeout, nor keep any state between calls.
 *
 * Memory: the STAT values arrive as pointers into the connection's read
 * buffer; the callbacks parse numbers in place and copy only what becomes a
 * tuple (text values) or a slab class record.  Everything an instance needs
 * lives in a context that is reset before the next instance.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_foreign_server.h"
#include "common/int.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "mcfdw.h"

PG_FUNCTION_INFO_V1(mc_stats);
PG_FUNCTION_INFO_V1(mc_server_stats);
PG_FUNCTION_INFO_V1(mc_slab_stats);
PG_FUNCTION_INFO_V1(mc_slab_summary);
PG_FUNCTION_INFO_V1(mc_slab_ladder);

/*
 * Slab class ids a server may report.  memcached 1.6 has at most 63 classes
 * (MAX_NUMBER_OF_SLAB_CLASSES - 1); older servers went up to 200.
 */
#define MC_SLAB_CLASS_MAX	255

/*
 * How memcached 1.6 builds its ladder (slabs_init): the first chunk is the
 * item header plus settings.chunk_size, each next one the previous times
 * the growth factor, rounded up to 8 bytes, until the next would reach
 * slab_chunk_max / factor or 62 classes exist; the last class is
 * slab_chunk_max itself.  Pages are 1 MB.  The item header is 48 bytes on
 * 64-bit builds.
 */
#define MC_LADDER_MAX		63
#define MC_CHUNK_ALIGN		8
#define MC_PAGE_SIZE		1048576
#define MC_ITEM_HEADER_64	48

/* ---- typed values ---------------------------------------------------- */

/*
 * A decimal integer as memcached prints it (%u, %llu, %jd).  Counters are
 * unsigned 64-bit on the server; one that does not fit int64 is reported as
 * NULL rather than wrapped.
 */
static bool
parse_int64(const char *s, size_t len, int64 *out)
{
	uint64		v = 0;
	size_t		i = 0;
	bool		neg = false;

	if (len > 0 && s[0] == '-')
	{
		neg = true;
		i = 1;
	}
	if (i == len)
		return false;
	for (; i < len; i++)
	{
		unsigned	d = (unsigned char) s[i] - '0';

		if (d > 9 || v > (PG_UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (!neg && v > (uint64) PG_INT64_MAX)
		return false;
	if (neg && v > (uint64) PG_INT64_MAX + 1)
		return false;
	*out = neg ? (int64) (0 - v) : (int64) v;
	return true;
}

/*
 * A fractional value ("rusage_user 0.123456", "growth_factor 1.25").  The
 * value is not NUL-terminated in the read buffer, so it is copied to the
 * stack first; the backend runs with LC_NUMERIC=C, so strtod reads '.'.
 */
static bool
parse_double(const char *s, size_t len, double *out)
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

/* Does the counted string s equal the C string lit? */
static inline bool
name_is(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && memcmp(s, lit, len) == 0;
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
	Oid			fdwid;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *oids = NIL;

	if (PG_NARGS() > 0 && !PG_ARGISNULL(0))
		return list_make1_oid(McServerLookup(NameStr(*PG_GETARG_NAME(0)))->serverid);

	fdwid = get_foreign_data_wrapper_oid("mcfdw", false);
	rel = table_open(ForeignServerRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_foreign_server f = (Form_pg_foreign_server) GETSTRUCT(tup);

		if (f->srvfdw == fdwid &&
			pg_foreign_server_aclcheck(f->oid, GetUserId(), ACL_USAGE) == ACLCHECK_OK)
			oids = lappend_oid(oids, f->oid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return oids;
}

/*
 * Send one stats command softly.  On failure *err says why, in words a
 * dashboard can show: an instance already marked dead is not contacted at
 * all (McConnStatLines returns at once), so its last recorded error is
 * given with that fact; otherwise the failure just recorded.
 */
static bool
stat_lines(McServer *srv, int index, const char *cmd, McStatLineFn cb,
		   void *arg, char **err)
{
	McConn	   *conn = &srv->conns[index];
	bool		was_dead = conn->dead_until != 0 &&
		GetCurrentTimestamp() < conn->dead_until;

	if (McConnStatLines(srv, index, cmd, cb, arg, true))
		return true;
	if (was_dead)
		*err = psprintf("instance is marked dead after %d failures in a row, most recently: %s",
						conn->failures, conn->last_error);
	else
		*err = pstrdup(conn->last_error[0] ? conn->last_error : "unknown failure");
	return false;
}

/*
 * What a stats SRF's per-instance step gets: where rows go, the instance's
 * names as datums, and the SRF's own argument.
 */
typedef struct StatsCall
{
	ReturnSetInfo *rsinfo;
	NameData	srvname;
	Datum		server;			/* of srvname */
	Datum		instance;		/* "host:port" text */
	void	   *arg;
} StatsCall;

typedef void (*InstanceFn) (StatsCall *call, McServer *srv, int index);

/*
 * The loop every stats SRF shares: each instance of each server the call
 * covers, one after the other, in a context reset before each so that a
 * server with many instances does not pile up what each one needed (rows
 * are copied into the tuplestore as they are put).
 */
static void
for_each_instance(FunctionCallInfo fcinfo, InstanceFn fn, void *arg)
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
			call.instance = CStringGetTextDatum(McConnName(&srv->conns[i]));
			fn(&call, srv, i);
			MemoryContextSwitchTo(old);
		}
	}
	MemoryContextDelete(cxt);
}

static inline void
put_row(StatsCall *call, Datum *values, bool *nulls)
{
	tuplestore_putvalues(call->rsinfo->setResult, call->rsinfo->setDesc,
						 values, nulls);
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

	if (!stat_lines(srv, index, (const char *) call->arg, raw_line, &r, &err))
		return;
	values[0] = call->server;
	values[1] = call->instance;
	for (int j = 0; j < r.n; j++)
	{
		values[2] = PointerGetDatum(r.names[j]);
		values[3] = PointerGetDatum(r.values[j]);
		put_row(call, values, nulls);
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
	const char *cmd = "stats\r\n";

	if (PG_NARGS() > 1 && !PG_ARGISNULL(1))
	{
		char	   *group = text_to_cstring(PG_GETARG_TEXT_PP(1));
		bool		known = false;

		for (int i = 0; i < (int) lengthof(stats_groups); i++)
			known |= strcmp(group, stats_groups[i]) == 0;
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unsupported stats group \"%s\"", group),
					 errhint("Use NULL for plain \"stats\", or one of \"slabs\", \"items\", \"settings\", \"sizes\", \"conns\".")));
		cmd = psprintf("stats %s\r\n", group);
	}
	for_each_instance(fcinfo, stats_instance, (void *) cmd);
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

		if (!name_is(name, namelen, server_cols[c].name))
			continue;
		switch (server_cols[c].type)
		{
			case ST_INT4:
				if (parse_int64(value, valuelen, &i) && i >= PG_INT32_MIN && i <= PG_INT32_MAX)
				{
					row->values[col] = Int32GetDatum((int32) i);
					row->nulls[col] = false;
				}
				break;
			case ST_INT8:
				if (parse_int64(value, valuelen, &i))
				{
					row->values[col] = Int64GetDatum(i);
					row->nulls[col] = false;
					if (name_is(name, namelen, "get_hits"))
					{
						row->get_hits = i;
						row->have_hits = true;
					}
					else if (name_is(name, namelen, "get_misses"))
					{
						row->get_misses = i;
						row->have_misses = true;
					}
				}
				break;
			case ST_FLOAT8:
				if (parse_double(value, valuelen, &d))
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

	if (stat_lines(srv, index, "stats\r\n", server_line, row, &err))
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
	put_row(call, row->values, row->nulls);
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
	for_each_instance(fcinfo, server_stats_instance, NULL);
	return (Datum) 0;
}

/* ---- slab classes -------------------------------------------------------- */

/* Per-class fields, from "stats slabs" (SF_S_*) and "stats items" (SF_I_*). */
typedef enum SlabField
{
	SF_S_CHUNK_SIZE, SF_S_CHUNKS_PER_PAGE, SF_S_TOTAL_PAGES, SF_S_TOTAL_CHUNKS,
	SF_S_USED_CHUNKS, SF_S_FREE_CHUNKS, SF_S_FREE_CHUNKS_END,
	SF_S_MEM_REQUESTED,			/* servers before 1.5.17 */
	SF_S_GET_HITS, SF_S_CMD_SET, SF_S_DELETE_HITS, SF_S_INCR_HITS,
	SF_S_DECR_HITS, SF_S_CAS_HITS, SF_S_TOUCH_HITS,
	SF_I_NUMBER, SF_I_MEM_REQUESTED, SF_I_EVICTED, SF_I_EVICTED_NONZERO,
	SF_I_EVICTED_TIME, SF_I_EVICTED_UNFETCHED, SF_I_EXPIRED_UNFETCHED,
	SF_I_OUTOFMEMORY, SF_I_RECLAIMED, SF_I_CRAWLER_RECLAIMED, SF_I_AGE,
	SF_COUNT
} SlabField;

static const char *const slab_field_names[SF_COUNT] = {
	"chunk_size", "chunks_per_page", "total_pages", "total_chunks",
	"used_chunks", "free_chunks", "free_chunks_end", "mem_requested",
	"get_hits", "cmd_set", "delete_hits", "incr_hits", "decr_hits",
	"cas_hits", "touch_hits",
	"number", "mem_requested", "evicted", "evicted_nonzero", "evicted_time",
	"evicted_unfetched", "expired_unfetched", "outofmemory", "reclaimed",
	"crawler_reclaimed", "age"
};

typedef struct SlabClass
{
	bool		in_slabs;
	bool		in_items;
	bool		have[SF_COUNT];
	int64		v[SF_COUNT];
} SlabClass;

/* Instance-wide values the slab views use. */
typedef enum GlobalField
{
	GF_ACTIVE_SLABS,			/* stats slabs */
	GF_TOTAL_MALLOCED,			/* stats slabs */
	GF_LIMIT_MAXBYTES,			/* stats */
	GF_POINTER_SIZE,			/* stats */
	GF_CHUNK_SIZE,				/* stats settings: -n */
	GF_SLAB_CHUNK_MAX,			/* stats settings */
	GF_COUNT
} GlobalField;

typedef struct InstSlabs
{
	SlabClass  *cls[MC_SLAB_CLASS_MAX + 1];
	bool		have[GF_COUNT];
	int64		g[GF_COUNT];
	bool		have_factor;
	double		growth_factor;	/* stats settings: -f */
} InstSlabs;

static void
set_global(InstSlabs *s, GlobalField f, const char *value, size_t valuelen)
{
	s->have[f] = parse_int64(value, valuelen, &s->g[f]);
}

/*
 * Split "<class>:<field>" (after "items:" for stats items), find the field
 * among those the slab views keep (first..last of SlabField), and store it
 * in the class record, created on its first line.
 */
static void
class_line(InstSlabs *s, const char *name, size_t namelen,
		   const char *value, size_t valuelen, bool items)
{
	size_t		p = 0;
	int			id = 0;
	int			first = items ? SF_I_NUMBER : SF_S_CHUNK_SIZE;
	int			last = items ? SF_COUNT : SF_I_NUMBER;
	SlabClass  *c;

	while (p < namelen && name[p] >= '0' && name[p] <= '9' && id <= MC_SLAB_CLASS_MAX)
		id = id * 10 + (name[p++] - '0');
	if (p == 0 || p >= namelen || name[p] != ':' || id < 1 || id > MC_SLAB_CLASS_MAX)
		return;
	p++;
	if ((c = s->cls[id]) == NULL)
		c = s->cls[id] = palloc0(sizeof(SlabClass));
	if (items)
		c->in_items = true;
	else
		c->in_slabs = true;
	for (int f = first; f < last; f++)
	{
		if (name_is(name + p, namelen - p, slab_field_names[f]))
		{
			c->have[f] = parse_int64(value, valuelen, &c->v[f]);
			return;
		}
	}
}

static void
slabs_line(void *arg, const char *name, size_t namelen,
		   const char *value, size_t valuelen)
{
	InstSlabs  *s = (InstSlabs *) arg;

	if (name_is(name, namelen, "active_slabs"))
		set_global(s, GF_ACTIVE_SLABS, value, valuelen);
	else if (name_is(name, namelen, "total_malloced"))
		set_global(s, GF_TOTAL_MALLOCED, value, valuelen);
	else
		class_line(s, name, namelen, value, valuelen, false);
}

static void
items_line(void *arg, const char *name, size_t namelen,
		   const char *value, size_t valuelen)
{
	if (namelen > 6 && memcmp(name, "items:", 6) == 0)
		class_line((InstSlabs *) arg, name + 6, namelen - 6, value, valuelen, true);
}

static void
general_line(void *arg, const char *name, size_t namelen,
			 const char *value, size_t valuelen)
{
	InstSlabs  *s = (InstSlabs *) arg;

	if (name_is(name, namelen, "limit_maxbytes"))
		set_global(s, GF_LIMIT_MAXBYTES, value, valuelen);
	else if (name_is(name, namelen, "pointer_size"))
		set_global(s, GF_POINTER_SIZE, value, valuelen);
}

static void
settings_line(void *arg, const char *name, size_t namelen,
			  const char *value, size_t valuelen)
{
	InstSlabs  *s = (InstSlabs *) arg;

	if (name_is(name, namelen, "chunk_size"))
		set_global(s, GF_CHUNK_SIZE, value, valuelen);
	else if (name_is(name, namelen, "slab_chunk_max"))
		set_global(s, GF_SLAB_CHUNK_MAX, value, valuelen);
	else if (name_is(name, namelen, "growth_factor"))
		s->have_factor = parse_double(value, valuelen, &s->growth_factor);
}

/* Which stats groups a slab view needs from each instance. */
#define NEED_GENERAL	0x01
#define NEED_SLABS		0x02
#define NEED_ITEMS		0x04
#define NEED_SETTINGS	0x08

/*
 * Collect the groups "need" asks for from one instance into a fresh
 * InstSlabs; NULL if any of them failed, so that the instance contributes
 * no rows at all rather than rows built from half its statistics.
 */
static InstSlabs *
collect_slabs(McServer *srv, int index, int need)
{
	InstSlabs  *s = palloc0(sizeof(InstSlabs));
	char	   *err;

	if ((need & NEED_GENERAL) &&
		!stat_lines(srv, index, "stats\r\n", general_line, s, &err))
		return NULL;
	if ((need & NEED_SLABS) &&
		!stat_lines(srv, index, "stats slabs\r\n", slabs_line, s, &err))
		return NULL;
	if ((need & NEED_ITEMS) &&
		!stat_lines(srv, index, "stats items\r\n", items_line, s, &err))
		return NULL;
	if ((need & NEED_SETTINGS) &&
		!stat_lines(srv, index, "stats settings\r\n", settings_line, s, &err))
		return NULL;
	return s;
}

/* A merged per-class value: present, and its value. */
typedef struct OptInt
{
	bool		ok;
	int64		v;
} OptInt;

static inline OptInt
field(const SlabClass *c, SlabField f)
{
	OptInt		r = {c->have[f], c->v[f]};

	return r;
}

/*
 * The merge rules.  memcached leaves a class that holds no items out of
 * "stats items" entirely, so for a class "stats slabs" shows but "stats
 * items" does not, items and mem_requested are 0 (true) while the eviction
 * counters are unknown (NULL).  mem_requested comes from "stats items"
 * (1.5.17 and later) or else from "stats slabs" (older servers).
 */
static OptInt
class_items(const SlabClass *c)
{
	OptInt		r = field(c, SF_I_NUMBER);

	if (!c->in_items)
	{
		r.ok = true;
		r.v = 0;
	}
	return r;
}

static OptInt
class_requested(const SlabClass *c)
{
	OptInt		r = field(c, SF_I_MEM_REQUESTED);

	if (!r.ok)
		r = field(c, SF_S_MEM_REQUESTED);
	if (!r.ok && !c->in_items)
	{
		r.ok = true;
		r.v = 0;
	}
	return r;
}

/* used_chunks * chunk_size: the memory the class pins for its items. */
static OptInt
class_used_bytes(const SlabClass *c)
{
	OptInt		r = {false, 0};

	if (c->have[SF_S_USED_CHUNKS] && c->have[SF_S_CHUNK_SIZE])
		r.ok = !pg_mul_s64_overflow(c->v[SF_S_USED_CHUNKS], c->v[SF_S_CHUNK_SIZE], &r.v);
	return r;
}

static inline void
put_opt(Datum *values, bool *nulls, int col, OptInt o)
{
	values[col] = Int64GetDatum(o.v);
	nulls[col] = !o.ok;
}

/* Waste as a percentage of what the class pins; NULL when it pins nothing. */
static void
put_waste(Datum *values, bool *nulls, int bytes_col, int pct_col,
		  OptInt used, OptInt requested)
{
	OptInt		waste = {used.ok && requested.ok, 0};

	if (waste.ok)
		waste.ok = !pg_sub_s64_overflow(used.v, requested.v, &waste.v);
	put_opt(values, nulls, bytes_col, waste);
	nulls[pct_col] = !(waste.ok && used.v > 0);
	if (!nulls[pct_col])
		values[pct_col] = Float8GetDatum(100.0 * (double) waste.v / (double) used.v);
}

#define SLAB_NCOLS 31

/* One instance of mc_slab_stats: a row per class, or none if it failed. */
static void
slab_stats_instance(StatsCall *call, McServer *srv, int index)
{
	static const SlabField slab_cols[] = {
		SF_S_CHUNK_SIZE, SF_S_CHUNKS_PER_PAGE, SF_S_TOTAL_PAGES, SF_S_TOTAL_CHUNKS,
		SF_S_USED_CHUNKS, SF_S_FREE_CHUNKS, SF_S_FREE_CHUNKS_END
	};
	static const SlabField tail_cols[] = {
		SF_I_EVICTED, SF_I_EVICTED_NONZERO, SF_I_EVICTED_TIME,
		SF_I_EVICTED_UNFETCHED, SF_I_EXPIRED_UNFETCHED, SF_I_OUTOFMEMORY,
		SF_I_RECLAIMED, SF_I_CRAWLER_RECLAIMED, SF_I_AGE,
		SF_S_GET_HITS, SF_S_CMD_SET, SF_S_DELETE_HITS, SF_S_INCR_HITS,
		SF_S_DECR_HITS, SF_S_CAS_HITS, SF_S_TOUCH_HITS
	};
	InstSlabs  *s = collect_slabs(srv, index, NEED_SLABS | NEED_ITEMS);

	StaticAssertStmt(3 + lengthof(slab_cols) + 5 + lengthof(tail_cols) == SLAB_NCOLS,
					 "mc_slab_stats columns");
	for (int id = 1; s && id <= MC_SLAB_CLASS_MAX; id++)
	{
		SlabClass  *c = s->cls[id];
		Datum		values[SLAB_NCOLS];
		bool		nulls[SLAB_NCOLS] = {0};
		OptInt		used;
		OptInt		req;
		int			col = 0;

		if (c == NULL)
			continue;
		values[col++] = call->server;
		values[col++] = call->instance;
		values[col++] = Int32GetDatum(id);
		for (int k = 0; k < (int) lengthof(slab_cols); k++)
			put_opt(values, nulls, col++, field(c, slab_cols[k]));
		used = class_used_bytes(c);
		req = class_requested(c);
		put_opt(values, nulls, col++, class_items(c));
		put_opt(values, nulls, col++, req);
		put_opt(values, nulls, col++, used);
		put_waste(values, nulls, col, col + 1, used, req);
		col += 2;
		for (int k = 0; k < (int) lengthof(tail_cols); k++)
			put_opt(values, nulls, col++, field(c, tail_cols[k]));
		Assert(col == SLAB_NCOLS);
		put_row(call, values, nulls);
	}
}

/*
 * mc_slab_stats(server) returns one row per instance and slab class with
 * "stats slabs" and "stats items" merged by class id, plus the waste the
 * rounding to chunk sizes costs (used_bytes - mem_requested).
 */
Datum
mc_slab_stats(PG_FUNCTION_ARGS)
{
	for_each_instance(fcinfo, slab_stats_instance, NULL);
	return (Datum) 0;
}

/* ---- the ladder ------------------------------------------------------ */

/*
 * The chunk sizes the instance's settings create, the way memcached 1.6's
 * slabs_init builds them (see MC_LADDER_MAX); returns the number of classes
 * (sizes[0] is class 1), or 0 when the settings do not determine the
 * ladder: a field missing, a 32-bit server (its item header size is not
 * reported), a pre-1.4.29 server without slab_chunk_max, or custom
 * "-o slab_sizes" (which "stats settings" does not show).  The last case
 * is caught by checking the result against every class "stats slabs"
 * reports: a ladder that disagrees with the server is not shown at all.
 */
static int
derive_ladder(const InstSlabs *s, int64 *sizes)
{
	double		factor = s->growth_factor;
	double		size;
	int			n = 0;
	int64		cmax = s->g[GF_SLAB_CHUNK_MAX];

	if (!s->have_factor || !s->have[GF_CHUNK_SIZE] || !s->have[GF_SLAB_CHUNK_MAX] ||
		!s->have[GF_POINTER_SIZE] || s->g[GF_POINTER_SIZE] != 64 ||
		factor <= 1.0 || s->g[GF_CHUNK_SIZE] <= 0 || s->g[GF_CHUNK_SIZE] > MC_PAGE_SIZE ||
		cmax <= 0 || cmax > MC_PAGE_SIZE)
		return 0;

	size = (double) (MC_ITEM_HEADER_64 + s->g[GF_CHUNK_SIZE]);
	while (n < MC_LADDER_MAX - 1 && size < (double) cmax / factor)
	{
		int64		sz = (int64) size;

		if (sz % MC_CHUNK_ALIGN)
			sz += MC_CHUNK_ALIGN - sz % MC_CHUNK_ALIGN;
		sizes[n++] = sz;
		/* memcached keeps the size in an unsigned int: truncate each step */
		size = floor((double) sz * factor);
	}
	sizes[n++] = cmax;

	for (int id = 1; id <= MC_SLAB_CLASS_MAX; id++)
	{
		const SlabClass *c = s->cls[id];

		if (c == NULL || !c->in_slabs)
			continue;
		if (id > n ||
			(c->have[SF_S_CHUNK_SIZE] && c->v[SF_S_CHUNK_SIZE] != sizes[id - 1]) ||
			(c->have[SF_S_CHUNKS_PER_PAGE] &&
			 c->v[SF_S_CHUNKS_PER_PAGE] != MC_PAGE_SIZE / sizes[id - 1]))
			return 0;
	}
	return n;
}

/* Sum of a per-class value over the classes that report it. */
static int64
sum_classes(const InstSlabs *s, OptInt (*get) (const SlabClass *))
{
	int64		total = 0;

	for (int id = 1; id <= MC_SLAB_CLASS_MAX; id++)
	{
		OptInt		o;

		if (s->cls[id] == NULL)
			continue;
		o = get(s->cls[id]);
		if (o.ok && pg_add_s64_overflow(total, o.v, &total))
			total = PG_INT64_MAX;
	}
	return total;
}

static OptInt
class_pages(const SlabClass *c)
{
	return field(c, SF_S_TOTAL_PAGES);
}

#define SUMMARY_NCOLS 13

/* One instance of mc_slab_summary: one row, or none if it failed. */
static void
slab_summary_instance(StatsCall *call, McServer *srv, int index)
{
	InstSlabs  *s = collect_slabs(srv, index,
								  NEED_GENERAL | NEED_SLABS | NEED_ITEMS | NEED_SETTINGS);
	Datum		values[SUMMARY_NCOLS];
	bool		nulls[SUMMARY_NCOLS] = {0};
	int64		ladder[MC_LADDER_MAX];
	int			nladder;
	OptInt		used = {true, 0};
	OptInt		req = {true, 0};

	if (s == NULL)
		return;
	values[0] = call->server;
	values[1] = call->instance;
	values[2] = Int64GetDatum(s->g[GF_ACTIVE_SLABS]);
	nulls[2] = !s->have[GF_ACTIVE_SLABS];
	values[3] = Int64GetDatum(s->g[GF_TOTAL_MALLOCED]);
	nulls[3] = !s->have[GF_TOTAL_MALLOCED];
	values[4] = Int64GetDatum(s->g[GF_LIMIT_MAXBYTES]);
	nulls[4] = !s->have[GF_LIMIT_MAXBYTES];
	values[5] = Int64GetDatum(sum_classes(s, class_pages));
	values[6] = Int64GetDatum(sum_classes(s, class_items));
	used.v = sum_classes(s, class_used_bytes);
	req.v = sum_classes(s, class_requested);
	put_opt(values, nulls, 7, used);
	put_opt(values, nulls, 8, req);
	put_waste(values, nulls, 9, 10, used, req);
	values[11] = Float8GetDatum(s->growth_factor);
	nulls[11] = !s->have_factor;
	nladder = derive_ladder(s, ladder);
	values[12] = Int32GetDatum(nladder);
	nulls[12] = nladder == 0;
	put_row(call, values, nulls);
}

/*
 * mc_slab_summary(server) returns one row per instance: the slab view's
 * totals (sums over the classes of mc_slab_stats, NULLs skipped, 0 for an
 * empty instance), the allocator's own totals, and the ladder the
 * instance's settings create.
 */
Datum
mc_slab_summary(PG_FUNCTION_ARGS)
{
	for_each_instance(fcinfo, slab_summary_instance, NULL);
	return (Datum) 0;
}

/* One instance of mc_slab_ladder: a row per class of its ladder. */
static void
slab_ladder_instance(StatsCall *call, McServer *srv, int index)
{
	InstSlabs  *s = collect_slabs(srv, index, NEED_GENERAL | NEED_SLABS | NEED_SETTINGS);
	int64		ladder[MC_LADDER_MAX];
	int			nladder = s ? derive_ladder(s, ladder) : 0;
	Datum		values[5];
	bool		nulls[5] = {0};

	values[0] = call->server;
	values[1] = call->instance;
	for (int k = 0; k < nladder; k++)
	{
		values[2] = Int32GetDatum(k + 1);
		values[3] = Int64GetDatum(ladder[k]);
		values[4] = Int64GetDatum(MC_PAGE_SIZE / ladder[k]);
		put_row(call, values, nulls);
	}
}

/*
 * mc_slab_ladder(server) returns the slab classes each instance's settings
 * create, including those that hold no page yet, which "stats slabs" never
 * shows: the chunk boundaries a value size is rounded up to.
 */
Datum
mc_slab_ladder(PG_FUNCTION_ARGS)
{
	for_each_instance(fcinfo, slab_ladder_instance, NULL);
	return (Datum) 0;
}
