/*
 * run.c — the runner: n operations of one server, routed, one pipeline
 * per instance, every pipeline in flight at once (McRunExec).
 *
 * Owns: a run from start to end: its state (RunState, run_int.h) set up
 * from the caller's McRun, in a memory context of its own freed when the
 * run returns, and handed to the file of its kind (reads: run_reads.c;
 * writes and flushes: run_writes.c), each of which gives the engine its
 * own fill and read, so that a read's callbacks never ask what kind of
 * run they serve; an instance's part started (again, after a restart on a
 * fresh socket) from its first op with a fresh tag (run_start); and key
 * dumps: one command per instance (encoded by the engine from its op,
 * routed by run_route.c), its reply read a line at a time and each line
 * handed to the caller; stats commands (McRunStats), each on the instance
 * its op names, sent alone by the engine under its own bounds.  The
 * runner's files together are the one client of the engine's pipelined
 * runs (engine.c's McEngineRun); where a key goes, and the run of one
 * (run.h's McRunOne), are run_route.c's.
 *
 * Why O and not k: memcached echoes k as the key was stored, and an item a
 * binary-protocol client (Dalli) stored under a key with spaces comes back
 * as "k<key with spaces>", which no parser can split.  The opaque token is
 * ours, always parseable, and shorter on the wire than most keys: the
 * part's tag (letters, fresh from the engine's token sequence each time an
 * instance's part starts: protocol.h's McTag) then the op's position, so a
 * late reply to anything sent earlier on the connection (an earlier run,
 * a single-key call's all-decimal token) names no op of this one.
 *
 * Must not: open, read or write sockets, wait, or restart or time out an
 * instance (the engine does), touch the catalog or SQL types beyond a
 * key's text datum, or keep state between runs.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "run_int.h"

/* ---- key dumps ----------------------------------------------------------- */

/* An instance's dump command (run_route_instances). */
static inline const char *
dump_text(RunState *r, RunInst *ri)
{
	return r->texts + RUN_TEXT_MAX * (Size) ri->items[0];
}

/* A dump's one command, queued once; its reply is read a line at a time. */
static void
dumps_fill(void *arg, int s, McConn *conn)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	if (!ri->mn_queued)
		McConnLinesQueue(conn, dump_text(r, ri));
	ri->mn_queued = true;
}

/* A dump's command for instance s, and its lines to the caller. */
static const char *
dumps_line_cmd(void *arg, int s)
{
	RunState   *r = arg;

	return dump_text(r, &r->inst[s]);
}

static McLineVerdict
dumps_line(void *arg, int s, const char *line, size_t len)
{
	RunState   *r = arg;

	return r->spec->line(r->spec->arg, s, line, len);
}

/*
 * The instance failed (counted already by health.c; the engine's
 * dropped, under on_failure 'miss' alone): its dump lists nothing.
 */
static void
dumps_dropped(void *arg, int s, McConn *conn, bool may_reroute)
{
	RunState   *r = arg;

	settle_rest(r, &r->inst[s], MC_OP_FAILED);
}

/*
 * A dump run.  An instance's dump fails softly only under on_failure
 * 'miss': an unreachable instance lists nothing (degraded); otherwise its
 * failure is raised.
 */
static void
exec_dumps(RunState *r)
{
	r->engine.soft = r->engine.degrade = r->srv->cfg.on_failure_miss;
	r->engine.fill = dumps_fill;
	r->engine.dropped = dumps_dropped;
	r->engine.line_cmd = dumps_line_cmd;
	r->engine.line = dumps_line;
	r->engine.line_max = r->spec->line_max;
	for (int i = 0; i < r->nops; i++)
		r->ops[i].result = MC_OP_PENDING;
	run_route_instances(r);
	run_round(r);
	for (int i = 0; i < r->nops; i++)
		if (r->ops[i].result == MC_OP_PENDING)
			r->ops[i].result = MC_OP_DONE;
}

/* ---- stats commands ------------------------------------------------------ */

/*
 * A stats command goes to the instance its op names, alone: a view asks
 * one instance after the other and the planner within a bound of its own,
 * neither of which a pipelined run's one deadline (the instance's failure
 * when it passes) and per-wait io_timeout could keep.  Whether the
 * instance may be asked, the command's bounds and what its failure counts
 * for are the engine's (McEngineStatLines).
 */
bool
McRunStats(McServer *srv, const McOp *op, int limit_ms, bool limit_counts,
		   McStatLineFn cb, void *arg)
{
	Assert(op->kind == MC_OP_STATS);
	Assert(op->instance >= 0 && op->instance < srv->cfg.nendpoints);
	return McEngineStatLines(srv, op, limit_ms, limit_counts, cb, arg);
}

/* ---- an instance's part -------------------------------------------------- */

/*
 * The instance starts (again, after a restart on a fresh socket: never for
 * an at-most-once run) from its first op.
 */
static void
run_start(void *arg, int s)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	ri->next_send = 0;
	ri->mn_queued = false;
	/* a tag never used before on any connection of this backend */
	mc_tag_make(&ri->tag, McOpNextOpaque());
	ri->segmented = r->segmented;
	ri->seg_end = 0;
	ri->seg_waiting = ri->seg_single = false;
}

int
McRunExec(McServer *srv, McRun *spec)
{
	RunState	r;
	int			ret = 0;
	MemoryContext work;
	MemoryContext old;

	memset(&r, 0, sizeof(r));
	r.srv = srv;
	r.spec = spec;
	r.ops = spec->ops;
	r.nops = spec->nops;
	r.hit = spec->hit;
	r.arg = spec->arg;
	r.kind = spec->hit != NULL ? RUN_READS :
		spec->line != NULL ? RUN_DUMPS :
		(spec->nops > 0 && spec->ops[0].kind == MC_OP_FLUSH) ? RUN_FLUSHES : RUN_WRITES;
	r.failover = !(spec->flags & MC_RUN_STRICT) && srv->cfg.failover;
	r.miss = !(spec->flags & MC_RUN_STRICT) && srv->cfg.on_failure_miss;
	if (spec->errlen > 0)
		spec->errbuf[0] = '\0';
	spec->mem_used = 0;
	if (r.kind != RUN_READS && r.nops <= 0)
		return 0;
	/* the run's work memory, freed at the end (or with the query on error) */
	work = AllocSetContextCreate(CurrentMemoryContext, "mcfdw run",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);
	McEngineInit(&r.engine, srv, &r);
	r.engine.start = run_start;
	r.inst = palloc(sizeof(RunInst) * srv->cfg.nendpoints);
	switch (r.kind)
	{
		case RUN_READS:
			ret = run_reads_exec(&r);
			break;
		case RUN_WRITES:
			ret = run_writes_exec(&r);
			break;
		case RUN_DUMPS:
			exec_dumps(&r);
			break;
		case RUN_FLUSHES:
			ret = run_writes_flush(&r);
			break;
	}
	MemoryContextSwitchTo(old);
	spec->mem_used = MemoryContextMemAllocated(work, true);
	MemoryContextDelete(work);
	return ret;
}
