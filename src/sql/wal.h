/*
 * wal.h — invalidation from the write-ahead log: what the watch
 * configuration (wal_sql.c), the output plugin (wal_decode.c) and the
 * background worker (wal_worker.c) share.
 *
 * The plugin turns each committed change of a watched table into records,
 * written through the worker's decoding context, which reads them as they
 * are written and sends the keys.  Records (integers in network order):
 *   'K' action relid server\0 key   a key to invalidate; action 'D' (md) or
 *                                   'S' (md ... I: mark stale)
 *   'T' action relid server\0       a TRUNCATE; action 'F' (flush_all) or
 *                                   'I' (ignore, reported)
 *   'W' relid server\0 message      a row whose keys could not be built
 *   'C' commit_time                 the end of a transaction that gave
 *                                   records
 */
#ifndef MCFDW_WAL_H
#define MCFDW_WAL_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

#define MC_WAL_TABLE "mc_watches"
#define MC_WAL_STATS 64			/* watches with counts in shared memory */
#define MC_WAL_ERRLEN 256

/* wal_worker.c: settings (GUCs) */
extern char *mc_wal_database;

/* wal_worker.c */
extern void McWalWorkerInit(void);
extern bool McWalWorkerPreloaded(void);
extern void McWalWorkerWatchesChanged(void);

/* wal_decode.c: the oid of mc_watches in the extension's schema, or
 * InvalidOid; the slot's name */
extern Oid	McWalDecodeTableOid(void);
extern void McWalDecodeSlotName(Oid dbid, char *buf, size_t len);

#endif							/* MCFDW_WAL_H */
