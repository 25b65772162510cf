/*
 * slabs.c — the slab views: mc_slab_stats, mc_slab_summary, mc_slab_ladder,
 * mc_slab_calcification.
 *
 * Owns: merging "stats slabs" with "stats items" by slab class (in 1.6,
 * mem_requested and the eviction counters exist only in "stats items"),
 * the used/waste arithmetic, deriving the slab class ladder from
 * "stats settings", and the calcification signal and its thresholds.
 * Must not: raise because an instance is down (it then contributes no
 * rows), nor keep state between calls.  The per-instance
 * loop and the value parsing are stats.c's.
 */
#include "postgres.h"

#include <math.h>

#include "common/int.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "stats.h"

PG_FUNCTION_INFO_V1(mc_slab_stats);
PG_FUNCTION_INFO_V1(mc_slab_summary);
PG_FUNCTION_INFO_V1(mc_slab_ladder);
PG_FUNCTION_INFO_V1(mc_slab_calcification);

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
	GF_SLAB_AUTOMOVE,			/* stats settings */
	/* stats: the eviction and automover counters of mc_slab_calcification */
	GF_EVICTIONS, GF_SLABS_MOVED, GF_GLOBAL_PAGE_POOL,
	GF_REASSIGN_RESCUES, GF_REASSIGN_CHUNK_RESCUES, GF_REASSIGN_EVICTIONS_NOMEM,
	GF_REASSIGN_INLINE_RECLAIM, GF_REASSIGN_BUSY_ITEMS, GF_REASSIGN_BUSY_DELETES,
	GF_REASSIGN_RUNNING,
	GF_COUNT
} GlobalField;

/* The instance-wide fields read from "stats" and from "stats settings". */
typedef struct GlobalName
{
	const char *name;
	GlobalField field;
} GlobalName;

static const GlobalName general_names[] = {
	{"limit_maxbytes", GF_LIMIT_MAXBYTES},
	{"pointer_size", GF_POINTER_SIZE},
	{"evictions", GF_EVICTIONS},
	{"slabs_moved", GF_SLABS_MOVED},
	{"slab_global_page_pool", GF_GLOBAL_PAGE_POOL},
	{"slab_reassign_rescues", GF_REASSIGN_RESCUES},
	{"slab_reassign_chunk_rescues", GF_REASSIGN_CHUNK_RESCUES},
	{"slab_reassign_evictions_nomem", GF_REASSIGN_EVICTIONS_NOMEM},
	{"slab_reassign_inline_reclaim", GF_REASSIGN_INLINE_RECLAIM},
	{"slab_reassign_busy_items", GF_REASSIGN_BUSY_ITEMS},
	{"slab_reassign_busy_deletes", GF_REASSIGN_BUSY_DELETES},
	{"slab_reassign_running", GF_REASSIGN_RUNNING},
};

static const GlobalName settings_names[] = {
	{"chunk_size", GF_CHUNK_SIZE},
	{"slab_chunk_max", GF_SLAB_CHUNK_MAX},
	{"slab_automove", GF_SLAB_AUTOMOVE},
};

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
	s->have[f] = McStatParseInt64(value, valuelen, &s->g[f]);
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
	const char *colon = memchr(name, ':', namelen);
	size_t		p;
	uint64_t	id;
	int			first = items ? SF_I_NUMBER : SF_S_CHUNK_SIZE;
	int			last = items ? SF_COUNT : SF_I_NUMBER;
	SlabClass  *c;

	if (colon == NULL ||
		!mc_parse_u64(name, (size_t) (colon - name), MC_SLAB_CLASS_MAX, &id) || id < 1)
		return;
	p = (size_t) (colon - name) + 1;
	if ((c = s->cls[id]) == NULL)
		c = s->cls[id] = palloc0(sizeof(SlabClass));
	if (items)
		c->in_items = true;
	else
		c->in_slabs = true;
	for (int f = first; f < last; f++)
	{
		if (McStatNameIs(name + p, namelen - p, slab_field_names[f]))
		{
			c->have[f] = McStatParseInt64(value, valuelen, &c->v[f]);
			return;
		}
	}
}

static void
slabs_line(void *arg, const char *name, size_t namelen,
		   const char *value, size_t valuelen)
{
	InstSlabs  *s = (InstSlabs *) arg;

	if (McStatNameIs(name, namelen, "active_slabs"))
		set_global(s, GF_ACTIVE_SLABS, value, valuelen);
	else if (McStatNameIs(name, namelen, "total_malloced"))
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

/* Store the line if its name is one of names[]; false if it is not. */
static bool
named_global(InstSlabs *s, const GlobalName *names, int n, const char *name,
			 size_t namelen, const char *value, size_t valuelen)
{
	for (int i = 0; i < n; i++)
	{
		if (McStatNameIs(name, namelen, names[i].name))
		{
			set_global(s, names[i].field, value, valuelen);
			return true;
		}
	}
	return false;
}

static void
general_line(void *arg, const char *name, size_t namelen,
			 const char *value, size_t valuelen)
{
	named_global((InstSlabs *) arg, general_names, lengthof(general_names),
				 name, namelen, value, valuelen);
}

static void
settings_line(void *arg, const char *name, size_t namelen,
			  const char *value, size_t valuelen)
{
	InstSlabs  *s = (InstSlabs *) arg;

	if (!named_global(s, settings_names, lengthof(settings_names),
					  name, namelen, value, valuelen) &&
		McStatNameIs(name, namelen, "growth_factor"))
		s->have_factor = McStatParseDouble(value, valuelen, &s->growth_factor);
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
		!McStatLines(srv, index, NULL, general_line, s, &err))
		return NULL;
	if ((need & NEED_SLABS) &&
		!McStatLines(srv, index, "slabs", slabs_line, s, &err))
		return NULL;
	if ((need & NEED_ITEMS) &&
		!McStatLines(srv, index, "items", items_line, s, &err))
		return NULL;
	if ((need & NEED_SETTINGS) &&
		!McStatLines(srv, index, "settings", settings_line, s, &err))
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
		McStatPutRow(call, values, nulls);
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
	McStatForEachInstance(fcinfo, slab_stats_instance, NULL);
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
	McStatPutRow(call, values, nulls);
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
	McStatForEachInstance(fcinfo, slab_summary_instance, NULL);
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
		McStatPutRow(call, values, nulls);
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
	McStatForEachInstance(fcinfo, slab_ladder_instance, NULL);
	return (Datum) 0;
}

/* ---- calcification --------------------------------------------------- */

/*
 * Calcification: memory stuck in slab classes that no longer need it while
 * another class evicts.  Judged from one snapshot of the instance ("stats",
 * "stats slabs", "stats items", "stats settings"), so it needs no history
 * and no second visit.  The thresholds, documented in README:
 *
 * A class is STARVED when its evictions (items:N:evicted, counted since the
 * server started) are at least MC_CALC_TURNOVER times the chunks it owns
 * (total_chunks): it has cycled everything it can hold through eviction
 * many times over.  Filling a cache evicts a fraction of its chunks; a
 * class frozen at a page or two gets there after a few hundred writes; a
 * long-running cache that is simply too small gets there too, which is why
 * starving alone is not calcification (below).  The counters are
 * cumulative: a class that starved and was then given pages (by the
 * automover) stops counting as starved once its chunks reach a tenth of
 * what it evicted.
 *
 * The instance is CALCIFIED when a starved class exists and
 *  - another class holds OLD ITEMS: its oldest item (items:N:age, seconds
 *    since last access) is older than the items the starved class evicts
 *    (items:N:evicted_time, seconds since the last access of the most
 *    recent item it evicted) by at least MC_CALC_AGE_FACTOR times, and by
 *    at least a second (the servers' clock ticks in seconds).  memcached's
 *    own automover (slab_automove=1) moves a page when the ages differ by
 *    more than 1 / slab_automove_ratio (0.8 by default, a factor of 1.25),
 *    so an instance it keeps balanced stays below the factor of 2; or
 *  - the global page pool holds free pages (slab_global_page_pool > 0):
 *    pages no class owns while one evicts.
 */
#define MC_CALC_TURNOVER	10
#define MC_CALC_AGE_FACTOR	2

/* The class evicted >= MC_CALC_TURNOVER times its chunks; *turnover: the ratio */
static bool
class_starved(const SlabClass *c, double *turnover)
{
	int64		limit;

	if (c == NULL || !c->in_slabs || !c->have[SF_S_TOTAL_CHUNKS] ||
		!c->have[SF_I_EVICTED] || c->v[SF_S_TOTAL_CHUNKS] <= 0 ||
		c->v[SF_I_EVICTED] <= 0 ||
		pg_mul_s64_overflow(c->v[SF_S_TOTAL_CHUNKS], MC_CALC_TURNOVER, &limit) ||
		c->v[SF_I_EVICTED] < limit)
		return false;
	*turnover = (double) c->v[SF_I_EVICTED] / (double) c->v[SF_S_TOTAL_CHUNKS];
	return true;
}

/*
 * The oldest item class "other" holds is old next to what class "starved"
 * evicts (see above); false when either age is unknown.
 */
static bool
class_older(const SlabClass *other, const SlabClass *starved)
{
	int64		age = other->v[SF_I_AGE];
	int64		evicted_age = starved->v[SF_I_EVICTED_TIME];

	if (!other->have[SF_I_AGE] || !starved->have[SF_I_EVICTED_TIME] ||
		class_items(other).v <= 0 || evicted_age < 0 || age <= evicted_age)
		return false;
	/* age >= MC_CALC_AGE_FACTOR * evicted_age, without overflow */
	return age / MC_CALC_AGE_FACTOR >= evicted_age;
}

/* The class other than "except" with the oldest items; 0 if none. */
static int
oldest_other(const InstSlabs *s, int except)
{
	int			best = 0;

	for (int id = 1; id <= MC_SLAB_CLASS_MAX; id++)
	{
		const SlabClass *c = s->cls[id];

		if (id == except || c == NULL || !c->have[SF_I_AGE] || class_items(c).v <= 0)
			continue;
		if (best == 0 || c->v[SF_I_AGE] > s->cls[best]->v[SF_I_AGE])
			best = id;
	}
	return best;
}

#define CALC_NCOLS 23

static inline void
put_global(const InstSlabs *s, Datum *values, bool *nulls, int col, GlobalField f)
{
	values[col] = Int64GetDatum(s->g[f]);
	nulls[col] = !s->have[f];
}

/* One instance of mc_slab_calcification: one row, or none if it failed. */
static void
slab_calcification_instance(StatsCall *call, McServer *srv, int index)
{
	static const GlobalField counters[] = {
		GF_EVICTIONS, GF_SLABS_MOVED, GF_REASSIGN_RESCUES,
		GF_REASSIGN_CHUNK_RESCUES, GF_REASSIGN_EVICTIONS_NOMEM,
		GF_REASSIGN_INLINE_RECLAIM, GF_REASSIGN_BUSY_ITEMS,
		GF_REASSIGN_BUSY_DELETES
	};
	InstSlabs  *s = collect_slabs(srv, index,
								  NEED_GENERAL | NEED_SLABS | NEED_ITEMS | NEED_SETTINGS);
	Datum		values[CALC_NCOLS];
	bool		nulls[CALC_NCOLS] = {0};
	bool		free_pages;
	int			starved = 0;
	int			oldest = 0;
	bool		old_items = false;
	bool		best_reason = false;	/* the instance is calcified */
	double		best_turnover = 0;
	int			col = 0;

	if (s == NULL)
		return;
	free_pages = s->have[GF_GLOBAL_PAGE_POOL] && s->g[GF_GLOBAL_PAGE_POOL] > 0;

	/*
	 * The starved class shown: of those with a reason to call the instance
	 * calcified, else of all starved classes, the one with the most
	 * evictions per chunk.
	 */
	for (int id = 1; id <= MC_SLAB_CLASS_MAX; id++)
	{
		double		turnover;
		int			other;
		bool		older;
		bool		reason;

		if (!class_starved(s->cls[id], &turnover))
			continue;
		other = oldest_other(s, id);
		older = other != 0 && class_older(s->cls[other], s->cls[id]);
		reason = older || free_pages;
		if (starved == 0 || (reason && !best_reason) ||
			(reason == best_reason && turnover > best_turnover))
		{
			starved = id;
			oldest = other;
			old_items = older;
			best_reason = reason;
			best_turnover = turnover;
		}
	}

	values[col++] = call->server;
	values[col++] = call->instance;
	values[col++] = BoolGetDatum(best_reason);
	if (best_reason)
		values[col] = CStringGetTextDatum(old_items && free_pages ? "old items, free pages" :
										  old_items ? "old items" : "free pages");
	nulls[col++] = !best_reason;
	if (starved != 0)
	{
		const SlabClass *c = s->cls[starved];

		values[col++] = Int32GetDatum(starved);
		put_opt(values, nulls, col++, field(c, SF_S_TOTAL_PAGES));
		put_opt(values, nulls, col++, field(c, SF_I_EVICTED));
		values[col++] = Float8GetDatum(best_turnover);
		put_opt(values, nulls, col++, field(c, SF_I_EVICTED_TIME));
	}
	else
	{
		for (int k = 0; k < 5; k++)
			nulls[col++] = true;
	}
	if (oldest != 0)
	{
		const SlabClass *c = s->cls[oldest];

		values[col++] = Int32GetDatum(oldest);
		put_opt(values, nulls, col++, field(c, SF_S_TOTAL_PAGES));
		put_opt(values, nulls, col++, field(c, SF_I_AGE));
	}
	else
	{
		for (int k = 0; k < 3; k++)
			nulls[col++] = true;
	}
	put_global(s, values, nulls, col++, GF_GLOBAL_PAGE_POOL);
	values[col] = Int32GetDatum((int32) s->g[GF_SLAB_AUTOMOVE]);
	nulls[col++] = !s->have[GF_SLAB_AUTOMOVE] ||
		s->g[GF_SLAB_AUTOMOVE] < PG_INT32_MIN || s->g[GF_SLAB_AUTOMOVE] > PG_INT32_MAX;
	for (int k = 0; k < (int) lengthof(counters); k++)
		put_global(s, values, nulls, col++, counters[k]);
	values[col] = BoolGetDatum(s->g[GF_REASSIGN_RUNNING] != 0);
	nulls[col++] = !s->have[GF_REASSIGN_RUNNING];
	Assert(col == CALC_NCOLS);
	McStatPutRow(call, values, nulls);
}

/*
 * mc_slab_calcification(server) returns one row per instance: whether a
 * slab class is starved of pages while memory sits elsewhere (see
 * MC_CALC_TURNOVER), the classes that say so, and the automover's setting
 * and counters under memcached's own names.
 */
Datum
mc_slab_calcification(PG_FUNCTION_ARGS)
{
	McStatForEachInstance(fcinfo, slab_calcification_instance, NULL);
	return (Datum) 0;
}
