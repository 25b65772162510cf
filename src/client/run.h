/*
 * run.h — the runner (run.c): n operations of one server, pipelined.
 *
 * Owns: the interface of the one runner of many requests.  A run is given
 * the ops of one server and what to do with their outcomes: writes (the
 * engine's McOp: store, delete or mark stale, touch), each settled with a
 * result code; reads (get with wanted fields), each hit handed to a
 * callback with the reply parsed in place; key dumps (MC_OP_DUMP, one per
 * instance), each line handed to a callback; flushes (MC_OP_FLUSH, one per
 * instance), each answered OK; stats commands (MC_OP_STATS, McRunStats),
 * one instance at a time, each line handed to a callback.  Reads come as
 * the keys themselves (text datums), not as McOps: a multi-get holds tens of
 * thousands, and the runner keeps a 24-byte record per distinct key
 * where an McOp is 80.  The runner routes them (health, failover, a
 * write's home instance), asks each distinct key of a read once, encodes
 * every request with the engine's encoders, pipelines them per instance in
 * slices, matches replies by their opaque token, and leaves the rules of
 * an instance's part (its start, restart, at most once, timeouts,
 * interrupts, health) to the engine (engine.h).  A single-key call is a
 * run of one (McRunOne), routed and failed over by the same failover rule
 * as the rounds of a run of many (run_route.c), its one request sent
 * alone by the engine (McEngineSendOne) rather than pipelined: a pipelined
 * run of one key costs more instructions than a whole mc_get.
 */
#ifndef MCFDW_RUN_H
#define MCFDW_RUN_H

#include "engine.h"
#include "run_route.h"
#include "server.h"

/*
 * One hit of a read: key is the caller's datum for the key, base and r the
 * reply parsed in place (VA with the value at base + r->value_off, or HD
 * when no value was asked); valid only during the call, and the bytes
 * before the value (its reply header) may be overwritten.
 */
typedef void (*McRunHitFn) (void *arg, Datum key, char *base, const McReply *r);

/* One line of instance s's dump. */
typedef McLineVerdict (*McRunLineFn) (void *arg, int s, const char *line, size_t len);

/* McRun's flags. */
#define MC_RUN_STRICT		0x01	/* reads: no failover, no on_failure 'miss':
									 * a failing instance raises whatever the
									 * server's settings */
#define MC_RUN_SOFT			0x02	/* writes: nothing but a cancel raises; a
									 * held terminate or cancel gives the run
									 * up; errbuf gets the first failure */

/* A run: one kind of op at a time, as below. */
typedef struct McRun
{
	/* writes, dumps and flushes: the ops, each one's result set by the run */
	McOp	   *ops;
	int			nops;
	/* reads: n text datums (NULLs skipped, duplicates asked once) */
	const Datum *keys;
	const bool *nulls;
	int			nkeys;
	unsigned	want;			/* reads: MC_F_* the hits carry; 0: existence */
	McRunHitFn	hit;			/* reads: each hit */
	McRunLineFn line;			/* dumps: each line of a reply */
	size_t		line_max;		/* dumps: the longest line read */
	void	   *arg;			/* passed to hit and line */
	unsigned	flags;			/* MC_RUN_* */
	int			timeout_ms;		/* writes: > 0 bounds the whole run */
	char	   *errbuf;			/* MC_RUN_SOFT: the first failure's message */
	size_t		errlen;
	size_t		mem_used;		/* out: the run's work memory, in bytes */
} McRun;

/*
 * Run it on srv, in a memory context of its own (hits and lines are handed
 * over there: what must outlive the run goes elsewhere).  Reads return
 * the number of distinct keys asked, writes the number of ops that failed
 * (McBatchWrite, batch.h, says what each outcome means), dumps 0, flushes
 * the number of instances flushed (a flush's failure, or an error reply,
 * is raised whatever the server's failover and on_failure).  What an
 * instance's failure does: a read's keys there are misses when the server
 * fails over or has on_failure 'miss' (the instance counted degraded under
 * 'miss'), else it raises; a write's unanswered ops fail over unless they
 * may have run there or are bound home; a dump raises unless on_failure
 * 'miss' (no lines, counted degraded).
 */
extern int	McRunExec(McServer *srv, McRun *run);

/*
 * A read of n keys, each hit to fn: the number of distinct keys asked.
 * want is the fields the hits carry (MC_F_VALUE, MC_F_FLAGS, MC_F_CAS,
 * MC_F_TTL; none: existence only), flags MC_RUN_STRICT or 0.
 */
static inline int
McRunGets(McServer *srv, const Datum *keys, const bool *nulls, int n,
		  unsigned want, unsigned flags, McRunHitFn fn, void *arg)
{
	McRun		run = {.keys = keys,.nulls = nulls,.nkeys = n,.want = want,
	.hit = fn,.arg = arg,.flags = flags};

	return McRunExec(srv, &run);
}

/*
 * Run run->op on server srv, a run of one: true with the reply in
 * run->reply and run->base; false when on_failure 'miss' answered it (the
 * instance counted degraded, nothing to end).  An instance that fails
 * otherwise is raised.  The request, with a fresh opaque token, goes into
 * run->req and run->hdr; a plain get (the value alone, nothing else sent)
 * takes the short encoder the multi-get uses.  With no instance dead the
 * key goes to its own (McRunRoutePick with every instance allowed), and
 * only a failure there takes the failover rule further (McRunRouteFailed);
 * with one dead the rule routes it from the start (McRunRouteOne).  Soft
 * (failing over, or 'miss') only where the instance's failure is not the
 * call's error: one instance alone has nowhere to fail over to.  Always
 * inline (a file with several callers would get a copy called instead):
 * every single-key call runs one, and a call more shows in its count.
 */
static pg_attribute_always_inline bool
McRunOne(McServer *srv, McOpRun *run)
{
	McRequest  *req = &run->req;
	const McOp *op = &run->op;
	const McKey *k = op->prepared;
	bool		store = (op->kind == MC_OP_STORE);

	req->opaque = McOpNextOpaque();
	req->hdr = run->hdr;
	if (likely(op->kind == MC_OP_GET && op->want == MC_F_VALUE &&
			   op->opts == NULL && !op->has_ttl))
		req->hlen = mc_encode_get_value(run->hdr, k->wire, k->wire_len, k->b64,
										req->opaque);
	else
		req->hlen = McEngineOpEncodeOne(run, req->opaque);
	req->data = store ? op->data : NULL;
	req->dlen = store ? op->datalen : 0;
	req->idempotent = !op->once;
	run->srv = srv;
	if (likely(srv->ndead == 0))
	{
		int			index = McRunRoutePick(srv, op->key, op->keylen, NULL, false);
		McEngOne	sent = McEngineSendOne(srv, index, run, srv->cfg.on_failure_miss ||
										   (srv->cfg.failover && srv->cfg.nendpoints > 1));

		return likely(sent == MC_ENG_ONE_REPLY) || McRunRouteFailed(srv, run, index, sent);
	}
	return McRunRouteOne(srv, run, -1);
}

/*
 * A stats operation (MC_OP_STATS, engine.h's McOpText) on the instance it
 * names, softly, each "STAT" line to cb: false when the instance is dead
 * (not contacted) or failed.  Run alone, not pipelined: its bounds are its
 * own (engine.c's McEngineStatLines says them and which failures count
 * against the instance's health).  limit_ms bounds connect and reply
 * together; limit_counts says whether that limit passing is the
 * instance's failure (a view's mcfdw.stats_timeout) or only the caller
 * giving up (the planner's item count: nothing recorded).
 */
extern bool McRunStats(McServer *srv, const McOp *op, int limit_ms,
					   bool limit_counts, McStatLineFn cb, void *arg);

#endif							/* MCFDW_RUN_H */
