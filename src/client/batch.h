/*
 * batch.h — writing many keys of one server in one call.
 *
 * Owns: the interface between callers that hold many writes for one server
 * and the code that puts them on the wire.  The writes are the engine's
 * operations (McOp, engine.h), the one type of a request; callers hand over keys already
 * checked and routed (McKeyRoute's routed form, prefix included) and values
 * already converted (ttl as memcached reads it), so nothing here touches
 * the catalog or SQL types.
 *
 * batch.c hands them to the runner (run.h), which puts them on the wire
 * as one quiet pipeline per instance
 * ("md <key> O<pos> q", "ms <key> <len> ... O<pos> q", "mg <key> T<ttl>
 * O<pos> q" for a touch, "md <key> I O<pos> q" to mark stale, then "mn"),
 * written to all instances before any reply is read.  Callers: xact.c (writes at commit), batch_sql.c
 * (mc_set_multi, mc_delete_multi, mc_touch_multi), wal_worker.c (the WAL
 * worker's deletes and marks) and fdw_modify.c (a foreign table's INSERT,
 * COPY and DELETE).
 */
#ifndef MCFDW_BATCH_H
#define MCFDW_BATCH_H

#include "engine.h"
#include "server.h"

/*
 * Send ops (all of server srv) and read their replies; fills each op's
 * result and returns how many failed.  The ops (engine.h) are sets and
 * adds (MC_OP_STORE, mode 0, S or E: an existing key is a miss for an
 * add), deletes and marks stale (MC_OP_DELETE, invalidate) and touches
 * (MC_OP_GET with has_ttl, nothing wanted), on routed keys; once and home
 * as McOp says.  timeout_ms > 0 bounds the whole
 * call, whatever the server's own timeouts (0 among them): ops not sent by
 * then fail.  With soft set an instance failure, a server error reply or a
 * timeout never raises: the op fails, and errbuf (errlen bytes, may be 0)
 * gets the first failure's message.  A cancel is still raised; with
 * interrupts held (after commit) a pending terminate or cancel gives the
 * send up instead, its ops failed (McEngineHeldInterrupt, engine.h).  Without
 * soft the first failure is raised, as the single-key functions raise it.
 */
extern int	McBatchWrite(McServer *srv, McOp *ops, int nops, int timeout_ms,
						 bool soft, char *errbuf, size_t errlen);

#endif							/* MCFDW_BATCH_H */
