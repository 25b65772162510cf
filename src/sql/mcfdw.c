/*
 * mcfdw.c — module entry point.
 *
 * Owns: PG_MODULE_MAGIC and _PG_init, which wires up the GUCs (options.c),
 * the per-backend server cache (server_cache.c) and, when preloaded, the shared counters
 * (counters.c), the batched join's planner hook (fdw_join.c) the
 * prefetching planner hook (prefetch.c) and the write-ahead log worker
 * (wal_worker.c).  Nothing
 * else belongs here.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "client_stats.h"
#include "counters.h"
#include "fdw.h"
#include "prefetch.h"
#include "wal.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Called once per backend when the library is loaded (at the first mcfdw
 * call, or at start-up when preloaded).
 */
void
_PG_init(void)
{
	McOptionsInit();
	McServerCacheInit();
	McCountersInit();
	McCsInit();
	McFdwJoinInit();
	McPrefetchInit();
	McWalWorkerInit();
	/*
	 * Last, once every file defined its settings: reserving the prefix
	 * removes the placeholders of the settings not defined yet, so a
	 * postgresql.conf line for one defined after it would be dropped.
	 */
	MarkGUCPrefixReserved("mcfdw");
}
