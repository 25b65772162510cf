/*
 * stats.h — what the statistics SRFs (stats.c, slabs.c) share.
 *
 * Owns: the per-instance loop and the typed parsing of STAT values.  Only
 * the two statistics files include it.
 */
#ifndef MCFDW_STATS_H
#define MCFDW_STATS_H

#include "funcapi.h"
#include "utils/tuplestore.h"

#include "client.h"

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

extern void McStatForEachInstance(FunctionCallInfo fcinfo, InstanceFn fn, void *arg);
extern bool McStatLines(McServer *srv, int index, const char *group,
						McStatLineFn cb, void *arg, char **err);
extern bool McStatParseInt64(const char *s, size_t len, int64 *out);
extern bool McStatParseDouble(const char *s, size_t len, double *out);

/* Does the counted string s equal the C string lit? */
static inline bool
McStatNameIs(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* One row of a statistics SRF into its tuplestore. */
static inline void
McStatPutRow(StatsCall *call, Datum *values, bool *nulls)
{
	tuplestore_putvalues(call->rsinfo->setResult, call->rsinfo->setDesc,
						 values, nulls);
}

#endif							/* MCFDW_STATS_H */
