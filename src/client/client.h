/*
 * client.h — the client layer's public header (src/client/).
 *
 * Owns: the per-backend server entry (McServer: a record of parts, each
 * written by its owner alone: server_cache.c's identity, cache and privilege
 * checks, the parsed options, health.c's health and live ring, the
 * connection layer's McNet), an instance's health record, the foreign
 * table and column options, and the entry points of the client files for
 * the layers above (the SQL surface, the foreign-data wrapper).  The
 * connection layer's types are net.h's; the pure-C modules (protocol.h,
 * ring.h, hash.h, compress.h) know nothing of these.
 */
#ifndef MCFDW_CLIENT_H
#define MCFDW_CLIENT_H

#include "postgres.h"

#include "fmgr.h"

#include "compress.h"
#include "net.h"

/*
 * The health of one memcached instance, kept by health.c alone: the
 * connection layer reports failures, health.c counts them and decides when
 * an instance is dead.  Others read it through McInstanceHealthOf.
 */
typedef struct McInstanceHealth
{
	int			failures;		/* consecutive */
	TimestampTz dead_until;		/* 0 = not dead */
	char		last_error[256];
	uint64		degraded;		/* calls answered as misses (on_failure 'miss') */
} McInstanceHealth;

/* A foreign server of the mcfdw wrapper, as this backend knows it. */
typedef struct McServer
{
	/* server_cache.c's: the entry, its configuration, the privilege checks' cache */
	Oid			serverid;		/* hash key: the server ... */
	Oid			umid;			/* ... and the user mapping whose credentials
								 * its connections logged in with, InvalidOid
								 * when none has credentials */
	bool		valid;			/* config matches the catalog */
	uint32		hashvalue;		/* syscache hash of serverid */
	char		name[NAMEDATALEN];
	MemoryContext cxt;			/* config, ring; reset on rebuild */
	McServerConfig cfg;			/* options.c parses it; read-only elsewhere */
	McRing	   *ring;
	Oid			acl_ok_user;	/* last role that passed the USAGE check */
	Oid			owner;			/* the server's owner: always a writer */
	Oid			write_ok_user;	/* last role that passed McServerCheckWrite */

	/* health.c's: instance health, the live ring, degraded-call warnings */
	McInstanceHealth *health;	/* cfg.nendpoints of them */
	int			ndead;			/* instances with dead_until set */
	MemoryContext live_cxt;		/* the live-instances ring (ketama failover) */
	McRing	   *live;
	bool	   *live_alive;		/* the health map live was built for */
	TimestampTz warned_stmt;	/* the statement last warned about a */
	LocalTransactionId warned_lxid; /* degraded call */

	/* the connection layer's (the conn_*.c files, through net.h) */
	McNet		net;
} McServer;

/*
 * The empty item memcached creates for a lease (mg N): zero bytes, a win
 * flag (W to the winner, Z to the others), not stale.  Every read treats
 * it as a miss; memcached sends W and Z whether or not they were asked.
 */
static inline bool
McReplyIsPlaceholder(const McReply *r)
{
	return unlikely(r->value_len == 0) &&
		(r->present & (MC_F_WIN | MC_F_WON)) != 0 &&
		!(r->present & MC_F_STALE);
}

/* values.c: compressed and serialized values, as the client flags say; text */
extern bool McTextValid(const char *p, size_t len);
static inline bool
McValueCompressed(const McServerConfig *cfg, uint32 flags)
{
	return cfg->compression && (flags & cfg->compressed_flag) == cfg->compressed_flag;
}
extern struct varlena *McValueDecode(McServer *srv, const char *data, size_t len,
									 bool has_flags, uint32 flags, McZStatus *status);
extern char *McValueInflateInto(McServer *srv, const char *data, size_t len,
								char **buf, size_t *cap, size_t *outlen,
								const char *key, size_t keylen);
extern void McValueRaise(McServer *srv, McZStatus status, const char *key,
						 size_t keylen) McNoReturn();
extern void McValueCheckText(McServer *srv, bool has_flags, uint32 flags,
							 const char *key, size_t keylen, const char *bytes_hint);
/* McValueCheckText's hint for the SQL functions */
#define MC_BYTEA_HINT "Read it with the _bytea variant of the function"
extern bool McValueDeflate(McServer *srv, const char **data, size_t *len,
						   uint32 *flags);

/* options.c */
extern char *mc_default_server;
extern uint64 mc_default_server_gen;
extern bool mc_debug_check_rows;
extern int	mc_stats_timeout;
extern bool mc_warn_on_miss;
extern void McOptionsInit(void);
extern void McParseServerOptions(List *options, McServerConfig *cfg,
								 MemoryContext cxt);
extern void McParseUserMappingOptions(List *options, McServerConfig *cfg,
									  MemoryContext cxt);
extern bool McSameTransport(const McServerConfig *a, const McServerConfig *b);

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

/* ttl.c: expiry times as memcached reads them */
#define MC_RELATIVE_TTL_MAX		(30 * SECS_PER_DAY)
extern int64 McIntervalToTtl(Interval *iv);
extern int64 McExpiryToTtl(TimestampTz ts);

/* options.c: foreign tables' and their columns' */
extern void McParseTableOptions(List *options, McTableOptions *t);
extern void McParseColumnOptions(List *options, McColumnOptions *c);
extern bool mc_enable_batched_join;

/* endpoints.c: the "servers" option */
extern void McParseServers(const char *value, McServerConfig *cfg);

/* server_cache.c: servers */
extern void McPoolInit(void);
extern McServer *McServerLookup(const char *name);
extern McServer *McServerGetSlow(Oid serverid);
extern McServer *mc_last_server;
extern List *McPoolEntries(void);
extern List *McUsableServers(void);
extern Oid	McServerRoute(Oid serverid);

/*
 * The entry of an existing server, checked for USAGE.  The last one
 * returned is kept (and forgotten by every invalidation), so repeated calls
 * cost a few compares.
 */
static inline McServer *
McServerGet(Oid serverid)
{
	McServer   *srv = mc_last_server;

	if (likely(srv != NULL && srv->serverid == serverid && srv->valid &&
			   srv->acl_ok_user == GetUserId()))
		return srv;
	return McServerGetSlow(serverid);
}

/*
 * server_cache.c: refuse a role that may read a server but not write to it (the
 * server option writers), before anything is sent or queued.  Every path
 * that stores, deletes, touches, counts or flushes calls it.
 */
extern void McServerCheckWriteSlow(McServer *srv);
static inline void
McServerCheckWrite(McServer *srv)
{
	if (likely(!srv->cfg.writers_set || srv->write_ok_user == GetUserId()))
		return;
	McServerCheckWriteSlow(srv);
}
extern void McServerCheckFullScan(McServer *srv, Oid relid);

/* health.c: instance health, routing */
extern void McHealthRebuilt(McServer *srv, McInstanceHealth *health);
extern const McInstanceHealth *McInstanceHealthOf(McServer *srv, int index);
extern const bool *McServerAliveMap(McServer *srv, bool *buf);
extern McConn *McInstanceBegin(McServer *srv, int index, bool soft);
extern bool McInstanceFailed(McServer *srv, McConn *conn, bool soft);
extern bool McInstanceFail(McServer *srv, McConn *conn, bool soft,
						   int sqlerrcode, const char *action,
						   const char *fmt,...) pg_attribute_printf(6, 7);
extern void McInstanceEnd(McServer *srv, McConn *conn);
extern void McInstanceDegraded(McServer *srv, int index);
extern const char *McRoundtrip(McServer *srv, int index, const McRequest *req,
							   McReply *reply, McConn **connp, bool soft);
extern bool McInstanceStatLines(McServer *srv, int index, const char *cmd,
								int limit_ms, bool limit_counts,
								McStatLineFn cb, void *arg);
extern int	McServerPickWith(McServer *srv, const char *key, size_t len,
							 const bool *alive);
extern int	McServerPickNow(McServer *srv, const char *key, size_t len,
							const bool *alive);
extern const char *McRoundtripKey(McServer *srv, const char *key, size_t keylen,
								  const McRequest *req, McReply *reply,
								  McConn **connp);

#endif							/* MCFDW_CLIENT_H */
