/*
 * options.h — what a user configures (options.c, endpoints.c): the settings, the
 * foreign server, user mapping, table and column options parsed.
 */
#ifndef MCFDW_OPTIONS_H
#define MCFDW_OPTIONS_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "net.h"

/* options.c */
extern char *mc_default_server;
extern uint64 mc_default_server_gen;
extern bool mc_debug_check_rows;
extern int	mc_stats_timeout;
extern bool mc_warn_on_miss;
extern bool mc_prefetch;
extern int	mc_prefetch_batch_size;
extern void McOptionsInit(void);
extern void McOptionsParseServer(List *options, McServerConfig *cfg,
								 MemoryContext cxt);
extern void McOptionsParseUserMapping(List *options, McServerConfig *cfg,
									  MemoryContext cxt);
extern bool McOptionsSameTransport(const McServerConfig *a, const McServerConfig *b);

/* The item fields a column can hold. */
typedef enum McField
{
	MC_FIELD_NONE = -1,
	MC_FIELD_KEY = 0,
	MC_FIELD_VALUE,
	MC_FIELD_FLAGS,
	MC_FIELD_CAS,
	MC_FIELD_TTL,
	MC_NFIELDS
} McField;

static inline const char *
McFieldName(McField f)
{
	static const char *const names[MC_NFIELDS] = {"key", "value", "flags", "cas", "ttl"};

	return names[f];
}

static inline McField
McFieldFromName(const char *name)
{
	for (int i = 0; i < MC_NFIELDS; i++)
		if (strcmp(name, McFieldName((McField) i)) == 0)
			return (McField) i;
	return MC_FIELD_NONE;
}

/* A foreign table's options (options.c parses them). */
typedef struct McTableOptions
{
	char	   *key_prefix;		/* "" when none; after the server's */
	int			key_prefix_len;
	int			ttl;			/* s, for rows written without a ttl; 0 = none */
	int			batch_size;		/* rows per pipelined INSERT batch */
	int			join_batch_size;	/* outer rows per batch of the batched join */
	bool		allow_full_scan;
} McTableOptions;

typedef struct McColumnOptions
{
	McField		field;
} McColumnOptions;


extern void McOptionsParseTable(List *options, McTableOptions *t);
extern void McOptionsParseColumn(List *options, McColumnOptions *c);
extern bool mc_enable_batched_join;

/* endpoints.c: the "servers" option */
extern void McEndpointsParse(const char *value, McServerConfig *cfg);

#endif							/* MCFDW_OPTIONS_H */
