/*
 * mcfdw.c — module entry point.
 *
 * Owns: PG_MODULE_MAGIC and _PG_init, which wires up the GUCs (options.c),
 * the per-backend pool (pool.c) and, when preloaded, the shared counters
 * (counters.c) and the batched join's planner hook (fdw_join.c).  Nothing
 * else belongs here.
 */
#include "postgres.h"

#include "fmgr.h"

#include "client_stats.h"
#include "counters.h"
#include "fdw.h"
#include "mcfdw.h"

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
	McPoolInit();
	McCountersInit();
	McCsInit();
	McJoinInit();
}
