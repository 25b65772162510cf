/*
 * run_int.h — what the runner's files share: a run's state, for run.c,
 * run_route.c, run_reads.c, run_writes.c and run_mn.c alone.
 *
 * Owns: the types of a run in progress (RunState; RunInst, an instance's
 * share of a round; RunKey, a distinct key of a read), the slice of
 * unsent request text an instance is filled to, the functions the
 * runner's files call of each other, and the helpers more than one kind
 * of run uses (settle_rest; the end of a pipeline: queue_last_mn, mn_due;
 * a round of the engine: run_round), inline so that none is a call from
 * one of the runner's files into another; an "MN" not due fails its
 * instance out of line (run_mn.c's run_mn_stray).  Must not: be
 * included outside the runner's files (the rest of the extension sees
 * run.h).
 */
#ifndef MCFDW_RUN_INT_H
#define MCFDW_RUN_INT_H

#include "engine.h"
#include "health.h"
#include "run.h"
#include "server.h"

/* Keep at most this much encoded request text (values included) queued per instance. */
#define RUN_WRITE_SLICE		(32 * 1024)


/* Room for a text command and its NUL. */
#define RUN_TEXT_MAX		(MC_REQ_HEADER_MAX + 1)

/*
 * One distinct key of a read, routed once (McKeyRoute): what its wire form
 * is made from, and its instance.  Kept small (the work memory per key is
 * budgeted): the key as given is read back from datum when a message
 * needs it.
 */
typedef struct RunKey
{
	Datum		datum;			/* the caller's text datum, passed back */
	const char *src;			/* McKeyWire's src: the key's bytes, or its digest */
	uint32		len;			/* length of src */
	uint16		instance;		/* instance index (< MC_MAX_ENDPOINTS) */
	uint8		form;			/* McKeyForm */
	bool		b64;			/* must go base64 */
} RunKey;

/*
 * One instance's share of a round: its ops and the replies matched so far
 * (its connection and progress are the engine's, engine.c).
 */
typedef struct RunInst
{
	int		   *items;			/* indexes into the keys or ops, request order */
	int			nitems;
	int			next_send;		/* items encoded so far */
	int			next_match;		/* replies come in order: positions below are passed */
	bool		mn_queued;		/* the last "mn" (a dump: its command) is queued */
	bool		segmented;		/* TLS with sets: run_writes.c */
	int			seg_end;		/* items before this are in sent segments */
	bool		seg_waiting;	/* the segment sent is not answered yet */
	bool		seg_single;		/* ... and it is one large set, not quiet */
	McTag		tag;			/* its requests' opaque tokens: run_start */
} RunInst;

typedef enum RunKind
{
	RUN_READS,
	RUN_WRITES,
	RUN_DUMPS,
	RUN_FLUSHES
} RunKind;

typedef struct RunState
{
	McServer   *srv;
	McRun	   *spec;
	RunKind		kind;
	bool		soft;			/* reads: the instance's failure is not raised;
								 * writes: the caller's MC_RUN_SOFT */
	bool		failover;		/* the run's, not read from srv (MC_RUN_STRICT) */
	bool		miss;			/* on_failure 'miss' for the run, likewise */
	RunInst    *inst;			/* one per configured instance */
	/* reads */
	RunKey	   *keys;
	int			nkeys;
	unsigned	want;			/* MC_F_* asked for; 0: v and f */
	McKeyArena	digests;		/* digested keys' routed forms, so the fill
								 * need not digest them again (rare:
								 * long_keys 'dalli' and a key over 250 bytes) */
	/* writes and dumps */
	McOp	   *ops;
	int			nops;
	bool	   *excluded;		/* instances that failed in this call */
	int		   *slots;
	bool		reroute;		/* a failed instance left ops to fail over */
	bool	   *degraded;		/* under miss: instances whose ops failed */
	bool		segmented;		/* TLS and some sets: run_writes.c */
	char	   *texts;			/* dumps: each op's command (NUL-terminated,
								 * RUN_TEXT_MAX apart), encoded once */
	bool		defer;			/* a SQL caller's: an error waits until every
								 * other pipeline is settled (stop_run) */
	bool		defer_fail;		/* ... and so does any instance's failure
								 * (no failover, no on_failure 'miss') */
	bool		stopping;		/* one will be raised: nothing new is sent */
	ErrorData  *raise;			/* the first such error, raised at the end */
	int			unsure;			/* ops sent, then left unanswered by a failure */
	McRunHitFn	hit;			/* the caller's, from spec */
	void	   *arg;
	McEngine	engine;			/* runs the instances' pipelines */
} RunState;

/* Settle every unanswered op of an instance with result res. */
static inline void
settle_rest(RunState *r, RunInst *ri, McOpResult res)
{
	for (int i = 0; i < ri->nitems; i++)
	{
		McOp	   *op = &r->ops[ri->items[i]];

		if (op->result == MC_OP_PENDING)
			op->result = res;
	}
}

/*
 * Is the "MN" of an instance's part (or of its TLS segment) due, given
 * that more bytes follow it in the buffer or not?  "mn" carries no token,
 * so these are its checks: our "mn" is queued and gone whole to the server
 * (it cannot answer one it did not read), and nothing follows its answer
 * (memcached answers a connection's requests in order, and "mn" is the
 * last).  Else the MN is one nobody asked for, and the connection is out
 * of step.
 */
static inline bool
mn_due(const RunInst *ri, McConn *conn, bool more)
{
	if (more || McConnUnsent(conn) != 0)
		return false;
	/* a TLS segment's "mn" (the last one's sets mn_queued too) */
	return ri->mn_queued || (ri->seg_waiting && !ri->seg_single);
}

/*
 * Once every request of an instance's part is queued, the "mn" that closes
 * it (queued once): its "MN" is the end of the part's replies.
 */
static inline void
queue_last_mn(RunInst *ri, McConn *conn)
{
	if (ri->next_send == ri->nitems && !ri->mn_queued)
	{
		McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
		ri->mn_queued = true;
		McConnPipelined(conn, ri->nitems);
	}
}

/* One round of the engine over the instances with work. */
static inline void
run_round(RunState *r)
{
	for (int s = 0; s < r->srv->cfg.nendpoints; s++)
		r->engine.inst[s].work = r->inst[s].nitems;
	McEngineRun(&r->engine);
}

/* run_route.c: a run of many's ops, grouped by the instance each goes to */
extern MC_HIDDEN void run_route_reads(RunState *r, const Datum *elems,
									  const bool *nulls, int n);
extern MC_HIDDEN bool run_route_writes(RunState *r);
extern MC_HIDDEN void run_route_instances(RunState *r);

/* run_mn.c: an "MN" not due (mn_due): the instance fails as out of step */
extern MC_HIDDEN McEngRead run_mn_stray(RunState *r, McConn *conn, bool soft);

/* run_reads.c, run_writes.c: a run of their kind, its result McRunExec's */
extern MC_HIDDEN int run_reads_exec(RunState *r);
extern MC_HIDDEN int run_writes_exec(RunState *r);
extern MC_HIDDEN int run_writes_flush(RunState *r);

#endif							/* MCFDW_RUN_INT_H */
