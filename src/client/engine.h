/*
 * engine.h — the request engine (engine.c): operations, a request sent
 * alone, and the pipelined runs the runner (run.h) drives.
 *
 * An operation (McOp) is one request on one key, the one type describing
 * a request whether it runs alone or in a run of many: what to do (its
 * kind), to which key (checked and routed by keys.c), which fields the
 * reply is to carry (want), what else is sent with it (a value, ttl,
 * flags, mode; rarer options in McReqOpts), whether it must not run twice
 * and whether it is bound to its key's own instance; a key dump is one on
 * an instance instead.  A single-key call is a run of one, the runner's
 * (McRunOne, run.h, its scratch in an McOpRun): routed, failed over and
 * degraded under on_failure 'miss' by the runner's failover rule (run_route.c),
 * the one its runs of many follow, and sent here (McEngineSendOne) as one
 * meta command with a fresh opaque token on its instance, its one reply
 * read into the operation's result, kept at most once by the engine's
 * rule (eng_in_doubt), which the runs of many share; the caller reads
 * what it needs, then ends it with McOpEnd (or McEngineOpReplyError when
 * the reply does not fit).  The request alone keeps the cheap
 * one-request/one-reply path (conn.c's McConnRoundtrip): the pipeline's
 * per-instance state costs more instructions than a whole mc_get.
 *
 * Text commands are operations too, encoded here alone: a key dump
 * (MC_OP_DUMP, "lru_crawler metadump <what>") and flush_all (MC_OP_FLUSH)
 * are runs of the runner; a stats command (MC_OP_STATS) is the runner's
 * too (run.h's McRunStats), sent alone on its instance (McEngineStatLines),
 * under bounds of its own no pipelined run has.
 *
 * Runs of many requests of one server go out many at a time, one pipeline
 * per instance.  The engine's one client, the runner (run.c: reads,
 * writes and key dumps), says which instances have work, queues its
 * requests on an instance's connection when asked (fill), and reads its
 * replies (read): it owns its requests, the meaning of their replies and
 * what an instance's failure does to them (dropped).  The engine owns
 * everything else: each instance's start (its pooled socket probed, or a
 * connect finished on the shared wait), sending and reading without
 * waiting, the one restart of an instance whose pooled socket the server
 * closed while idle (never once a reply came), at-most-once marking and
 * the rule that requests that may have run are neither resent nor failed
 * over, io_timeout and the call's deadline, interrupts, a held terminate
 * or cancel, and the health of every instance it ends or fails.  The one
 * place where an instance's part of a call ends, so the place to count
 * what the call did.
 */
#ifndef MCFDW_ENGINE_H
#define MCFDW_ENGINE_H

#include "health.h"
#include "keys.h"
#include "server.h"

#include "utils/elog.h"
#include "utils/timestamp.h"

/* What an operation does: its meta command. */
typedef enum McOpKind
{
	MC_OP_GET,					/* mg: read, touch (T), lease (N, R), metadata */
	MC_OP_STORE,				/* ms: set, or the mode's add, replace, append, prepend */
	MC_OP_DELETE,				/* md: delete, or mark stale (invalidate) */
	MC_OP_ARITH,				/* ma: mode I or D */
	MC_OP_DUMP,					/* "lru_crawler metadump <what>" to one
								 * instance (key: what, "hash" or "all";
								 * instance: which), its reply lines (a full
								 * scan's key dump, run.h) */
	MC_OP_STATS,				/* "stats <group>" to one instance (key: the
								 * group, NULL for plain "stats"; instance:
								 * which), its STAT lines until END to a
								 * line callback (run.h's McRunStats) */
	MC_OP_FLUSH					/* "flush_all" to one instance (instance:
								 * which), answered OK (a run, run.h) */
} McOpKind;

/* What became of an operation of a run of many (McRunExec, run.h). */
typedef enum McOpResult
{
	MC_OP_FAILED = 0,			/* not delivered (or no reply): counted */
	MC_OP_DONE,					/* HD: stored, deleted, touched */
	MC_OP_MISS,					/* delivered, its condition not met: NF / NS / EN */
	MC_OP_PENDING				/* the runner's own: not answered yet */
} McOpResult;

/*
 * One operation on one key: the one description of a request, whether it
 * runs alone (McRunOne, run.h) or in a run of many (McRunExec, run.h).  What a
 * batch carries per key is here (a run holds tens of thousands): the key,
 * the value, ttl, flags, mode; the rarer options of a single-key call go
 * in opts.  McOpInit sets nothing wanted, sent, once or home.
 */
typedef struct McOp
{
	McOpKind	kind;
	unsigned	want;			/* MC_F_* fields the reply is to carry */
	const char *key;			/* the routed key (McKeyRoute's form, prefix
								 * included): what the ring routes */
	size_t		keylen;
	const McKey *prepared;		/* its wire form (McKeyPrepare); NULL: made
								 * from key when the request is encoded */
	const char *data;			/* STORE: the value's bytes */
	size_t		datalen;
	int64		ttl;			/* with has_ttl: T<ttl> (a store's expiry, a
								 * get's touch, a mark's stale life) */
	uint32		flags;			/* with has_flags: a store's F<flags> */
	char		mode;			/* M<mode>: STORE S/E/A/P/R, ARITH I/D; 0 the
								 * server's default */
	bool		has_ttl;
	bool		has_flags;
	bool		invalidate;		/* DELETE: mark stale (I) instead */
	bool		once;			/* must not run twice: never resent, never
								 * failed over once it may have run */
	bool		home;			/* a run of many: routed to the key's own
								 * instance whatever the health map, never
								 * failed over; fails when that instance
								 * does (the WAL worker's proof of delivery) */
	int16		instance;		/* DUMP: the instance it goes to */
	McOpResult	result;			/* a run of many's outcome */
	const McReqOpts *opts;		/* the rest (cas, delta, initial, lease
								 * ttls, no_bump; its want, opaque and the
								 * fields above are the op's), NULL for none */
} McOp;

/* The operation's key, prepared. */
static inline void
McOpKey(McOp *op, const McKey *k)
{
	op->key = k->raw;
	op->keylen = k->raw_len;
	op->prepared = k;
}

/* An operation of kind on prepared key k (NULL: set later, McOpKey). */
static inline void
McOpInit(McOp *op, McOpKind kind, const McKey *k)
{
	*op = (McOp)
	{
		.kind = kind,
	};
	if (k != NULL)
		McOpKey(op, k);
}

/*
 * An operation run alone, a single-key call: the operation, the request
 * sent (here, not in McRunOne's frame: no copy) and, once run, its
 * reply.  Lives in the caller's frame; a run of many keeps no such part
 * per operation.
 */
typedef struct McOpRun
{
	McOp		op;
	/* its result (McRunOne) */
	McServer   *srv;
	McConn	   *conn;
	const char *base;			/* the reply's bytes; NULL: on_failure 'miss'
								 * answered it (counted degraded) */
	McReply		reply;			/* offsets relative to base */
	McRequest	req;
	char		hdr[MC_REQ_HEADER_MAX];
} McOpRun;

extern MC_HIDDEN uint32 mc_op_seq;
extern MC_HIDDEN size_t McEngineOpEncode(const McOp *op, const char *opaque,
										 size_t opaque_len, bool quiet, char *dst);
extern size_t McEngineOpEncodeOne(McOpRun *run, uint32 opaque);

/*
 * The opaque token of the next request: a backend-wide sequence (never 0,
 * which means "no token"), so a reply left over from any earlier request,
 * or sent unasked, cannot pass for this one's (conn.c checks the echo).
 * A pipelined part takes one too, as the tag of its tokens (run.c's
 * run_start, protocol.h's McTag).
 */
static inline uint32
McOpNextOpaque(void)
{
	if (unlikely(++mc_op_seq == 0))
		mc_op_seq = 1;
	return mc_op_seq;
}

/*
 * The request of a run of one (run->req, encoded), sent to instance index
 * and its one reply read (McEngineSendOne): the engine's single-request
 * function, called by the runner's run of one alone (run.h, run_route.c;
 * engine_layer.py checks), which routes it and fails it over.  With soft
 * set an instance that is dead or fails gives MC_ENG_ONE_FAILED (counted)
 * instead of an error.  What became of it:
 */
typedef enum McEngOne
{
	MC_ENG_ONE_REPLY,			/* answered: the reply in run->reply, run->base */
	MC_ENG_ONE_FAILED,			/* the instance failed or was refused (counted,
								 * or raised when not soft): the request did
								 * not run, and may go to another instance */
	MC_ENG_ONE_IN_DOUBT			/* it failed after a request that must not
								 * run twice may have run there: neither
								 * resent nor failed over (raised unless
								 * on_failure 'miss') */
} McEngOne;

extern MC_HIDDEN McEngOne McEngineSendOne(McServer *srv, int index, McOpRun *run,
										 bool soft);

/* The reply was read: the connection and the instance's run of failures end. */
static inline void
McOpEnd(McOpRun *run)
{
	McConnConsume(run->conn, run->reply.consumed);
	McInstanceEnd(run->srv, run->conn);
}

/* The reply does not fit the operation: the socket is closed, the reply raised. */
static inline void McEngineOpReplyError(McOpRun *run) McNoReturn();
static inline void
McEngineOpReplyError(McOpRun *run)
{
	McConnReplyError(run->conn, run->base, &run->reply);
}

/* An operation of a text command (MC_OP_STATS, MC_OP_FLUSH) on an instance. */
static inline void
McOpText(McOp *op, McOpKind kind, int instance, const char *group)
{
	McOpInit(op, kind, NULL);
	op->instance = (int16) instance;
	op->key = group;
	op->keylen = group != NULL ? strlen(group) : 0;
}

/*
 * A stats operation (MC_OP_STATS) on its instance, softly, its "STAT"
 * lines to cb: false when the instance is dead or failed (engine.c says
 * which failures count against its health).  Called by the runner alone
 * (run.h's McRunStats; engine_layer.py checks), as McEngineSendOne is.
 */
extern bool McEngineStatLines(McServer *srv, const McOp *op,
							  int limit_ms, bool limit_counts,
							  McStatLineFn cb, void *arg);

/* What reading an instance's buffered replies came to (McEngine's read). */
typedef enum McEngRead
{
	MC_ENG_MORE,				/* replies handled, more to come */
	MC_ENG_REFILL,				/* ... and more requests may be queued now */
	MC_ENG_DONE,				/* the last reply ("MN") was read: the part ends */
	MC_ENG_FAILED,				/* the client failed the instance (counted) */
	MC_ENG_CLOSE				/* the server answered with an error: the
								 * client settled its requests, the socket
								 * is closed (not the instance's fault) */
} McEngRead;

/* One instance's part of a run: the engine's alone. */
typedef struct McEngInst
{
	McConn	   *conn;			/* while its part runs, else NULL */
	int			work;			/* its requests in this run (the client's, set
								 * before a run): 0, none */
	int			hits;			/* of which answered as asked (the client counts) */
	uint64		bytes;			/* reply bytes read */
	bool		active;			/* its part runs */
	bool		retried;		/* started over once on a fresh socket */
	bool		answered;		/* a reply came: its requests ran */
	bool		in_doubt;		/* it failed after at-most-once requests may
								 * have run there: not failed over */
	size_t		need;			/* bytes the buffered partial reply still lacks */
	TimestampTz last_progress;
} McEngInst;

/*
 * A pipelined run of one server, as the runner (run.c, its one client:
 * engine_layer.py checks) sets it up: its rules, and the callbacks that
 * fill and read an instance's pipeline.
 */
typedef struct McEngine
{
	McServer   *srv;
	void	   *arg;			/* the client's, passed back */
	bool		soft;			/* an instance's failure does not raise */
	bool		at_most_once;	/* requests that may have run are not sent again */
	bool		degrade;		/* on_failure 'miss': an instance the run
								 * drops is counted degraded */
	bool		give_up_held;	/* a terminate or cancel held (after commit)
								 * gives the instance up (McEngineHeldInterrupt) */
	bool		client_raises;	/* the client raises an instance's failure
								 * itself, once its other pipelines are
								 * settled: with soft, none is raised here,
								 * not even at most once's (in_doubt) */
	TimestampTz deadline;		/* 0: none */
	int			timeout_ms;		/* the deadline's span, for its message */

	/* lines mode (a dump): the reply is read a line at a time, to line */
	const char *(*line_cmd) (void *arg, int s);
	McLineVerdict (*line) (void *arg, int s, const char *line, size_t len);
	size_t		line_max;

	/* the instance starts from its first request (again, after a restart) */
	void		(*start) (void *arg, int s);
	/* queue what fits of the instance's requests on conn */
	void		(*fill) (void *arg, int s, McConn *conn);

	/*
	 * Handle the complete replies in buf (len bytes, NUL-terminated):
	 * *consumed gets the bytes handled, *need what a partial reply lacks.
	 */
	McEngRead	(*read) (void *arg, int s, McConn *conn, char *buf, size_t len,
						 size_t *consumed, size_t *need);
	/*
	 * The instance failed (counted, its conn still set): may_reroute says
	 * whether its requests may go to another instance (they did not run).
	 * May be NULL.
	 */
	void		(*dropped) (void *arg, int s, McConn *conn, bool may_reroute);
	/* a held interrupt gave the instance up (give_up_held); may be NULL */
	void		(*gave_up) (void *arg, int s, const char *why);

	McEngInst  *inst;			/* one per configured instance (McEngineInit) */
} McEngine;

extern void McEngineInit(McEngine *e, McServer *srv, void *arg);
extern void McEngineRun(McEngine *e);
extern const char *McEngineHeldInterrupt(void);

/*
 * Keys a run keeps when they lie in a buffer that is reused (a prefixed or
 * digested key's stack buffer, the WAL decoder's record): packed into
 * blocks of cxt (NULL: the current memory context), not allocated one by
 * one.  Zeroed to start.
 */
typedef struct McKeyArena
{
	char	   *next;
	size_t		left;
	MemoryContext cxt;
} McKeyArena;

extern const char *McEngineKeyArenaKeep(McKeyArena *a, const char *raw, size_t len);

/*
 * fn(arg) with its error caught for a caller that must not fail (after
 * commit): the interrupt hold-off counts the caller relies on are put back
 * (raising resets them) and the error is returned, copied into the
 * caller's memory context and flushed; NULL when none.  A cancel is raised
 * on unless keep_cancel.
 */
extern ErrorData *McEngineCatch(void (*fn) (void *arg), void *arg, bool keep_cancel);

#endif							/* MCFDW_ENGINE_H */
