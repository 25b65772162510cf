/*
 * batch.h — writing many keys of one server in one call.
 *
 * Owns: the interface between callers that hold many writes for one server
 * (the commit-time queue in xact.c; later mc_set_multi/mc_delete_multi) and
 * the code that puts them on the wire.  Callers hand over keys already
 * checked and routed (McKeyRoute's routed form, prefix included) and values
 * already converted (ttl as memcached reads it), so nothing here touches
 * the catalog or SQL types.
 *
 * batch.c puts them on the wire (through the request engine, engine.h)
 * as one quiet pipeline per instance
 * ("md <key> O<pos> q", "ms <key> <len> ... O<pos> q", "mg <key> T<ttl>
 * O<pos> q" for a touch, "md <key> I O<pos> q" to mark stale, then "mn"), written to all instances before any
 * reply is read.  Callers: xact.c (writes at commit) and batch_sql.c
 * (mc_set_multi, mc_delete_multi, mc_touch_multi).
 */
#ifndef MCFDW_BATCH_H
#define MCFDW_BATCH_H

#include "server.h"

typedef enum McBatchKind
{
	MC_BATCH_DELETE,			/* md */
	MC_BATCH_SET,				/* ms (set) */
	MC_BATCH_TOUCH,				/* mg T<ttl>: has_ttl is required */
	MC_BATCH_MARK_STALE			/* md I: mark stale (NF: missing, a miss) */
} McBatchKind;

/* What became of one op. */
typedef enum McBatchResult
{
	MC_BATCH_FAILED = 0,		/* not delivered (or no reply): counted */
	MC_BATCH_DONE,				/* HD: deleted / stored */
	MC_BATCH_MISS,				/* delivered, condition not met: NF / NS / EN */
	MC_BATCH_PENDING			/* batch.c's own: not answered yet */
} McBatchResult;

typedef struct McBatchOp
{
	McBatchKind kind;
	const char *key;			/* routed key, as McKeyRoute gives it */
	size_t		keylen;
	const char *value;			/* SET: value bytes */
	size_t		valuelen;
	bool		has_ttl;		/* SET, TOUCH: T<ttl> (McTtlFromInterval's value) */
	int64		ttl;
	bool		has_flags;		/* SET: F<flags> */
	uint32		flags;
	bool		once;			/* SET: never sent twice (a SQL caller's rows) */
	bool		add;			/* SET: only if the key is absent (mode E, "add");
								 * an existing key is MC_BATCH_MISS */
	bool		home;			/* routed to the key's own instance whatever
								 * the health map, never failed over: fails
								 * when that instance does (the write-ahead
								 * log worker's proof of delivery there) */
	McBatchResult result;		/* out */
} McBatchOp;

/*
 * Send ops (all of server srv) and read their replies; fills each op's
 * result and returns how many failed.  timeout_ms > 0 bounds the whole
 * call, whatever the server's own timeouts (0 among them): ops not sent by
 * then fail.  With soft set an instance failure, a server error reply or a
 * timeout never raises: the op fails, and errbuf (errlen bytes, may be 0)
 * gets the first failure's message.  A cancel is still raised; with
 * interrupts held (after commit) a pending terminate or cancel gives the
 * send up instead, its ops failed (McEngineHeldInterrupt, engine.h).  Without
 * soft the first failure is raised, as the single-key functions raise it.
 */
extern int	McBatchWrite(McServer *srv, McBatchOp *ops, int nops, int timeout_ms,
						 bool soft, char *errbuf, size_t errlen);

/*
 * Provided by other files for batch.c and xact.c (declared here until the
 * lead places them in mcfdw.h):
 *   McServerPeek (server_cache.c): the pool entry of a server this backend has used
 *     with a given user mapping's login, with no catalog access and no
 *     privilege check; NULL when there is none.
 *     For work whose server was resolved and checked earlier in the
 *     transaction and that runs after its commit, when the catalog is off
 *     limits.
 */
extern McServer *McServerPeek(Oid serverid, Oid umid);

#endif							/* MCFDW_BATCH_H */
