/*
 * engine.h — the pipelined request engine (engine.c): one runner for the
 * requests of one server that go out many at a time.
 *
 * A client of the engine (multi_get.c's reads, batch.c's writes, and the
 * key dumps run here for fdw_fullscan.c) says which instances have work,
 * queues its requests on an instance's connection when asked (fill), and
 * reads its replies (read): it owns its requests, the meaning of their
 * replies and what an instance's failure does to them (dropped).  The
 * engine owns everything else: each instance's start (its pooled socket
 * probed, or a connect finished on the shared wait), sending and reading
 * without waiting, the one restart of an instance whose pooled socket the
 * server closed while idle (never once a reply came), at-most-once marking,
 * io_timeout and the call's deadline, interrupts, a held terminate or
 * cancel, and the health of every instance it ends or fails.  The one
 * place where an instance's part of a call ends, so the place to count
 * what the call did.
 */
#ifndef MCFDW_ENGINE_H
#define MCFDW_ENGINE_H

#include "server.h"

#include "utils/elog.h"
#include "utils/timestamp.h"

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

/* How an instance's part of a run ended. */
typedef enum McEngOutcome
{
	MC_ENG_OUT_DONE,			/* every reply read */
	MC_ENG_OUT_ERROR,			/* the server answered with an error */
	MC_ENG_OUT_FAILED,			/* the instance failed (health counted it) */
	MC_ENG_OUT_GIVEN_UP			/* a held interrupt ended it */
} McEngOutcome;

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
	bool		dropped;		/* it failed in this run */
	size_t		need;			/* bytes the buffered partial reply still lacks */
	TimestampTz last_progress;
} McEngInst;

typedef struct McEngine
{
	McServer   *srv;
	void	   *arg;			/* the client's, passed back */
	bool		soft;			/* an instance's failure does not raise */
	bool		at_most_once;	/* requests that may have run are not sent again */
	bool		give_up_held;	/* a terminate or cancel held (after commit)
								 * gives the instance up (McEngineHeldInterrupt) */
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
 * The key dumps of a full scan: for each instance with todo[s] set, cmd is
 * sent and its reply read a line at a time to line, every instance's dump
 * running on one wait.  An instance that fails is, under on_failure 'miss',
 * passed over (its call counted degraded); otherwise its failure is raised.
 */
typedef McLineVerdict (*McDumpLineFn) (void *arg, int s, const char *line, size_t len);
extern void McEngineDump(McServer *srv, const bool *todo,
						 const char *(*cmd) (void *arg, int s),
						 McDumpLineFn line, size_t line_max, void *arg);

/*
 * Routed keys a run keeps when they lie in a stack buffer (a prefixed or
 * digested key): packed into blocks of the current memory context, not
 * allocated one by one.  Zeroed to start.
 */
typedef struct McKeyArena
{
	char	   *next;
	size_t		left;
} McKeyArena;

extern const char *McKeyArenaKeep(McKeyArena *a, const char *raw, size_t len);

/*
 * fn(arg) with its error caught for a caller that must not fail (after
 * commit): the interrupt hold-off counts the caller relies on are put back
 * (raising resets them) and the error is returned, copied into the
 * caller's memory context and flushed; NULL when none.  A cancel is raised
 * on unless keep_cancel.
 */
extern ErrorData *McEngineCatch(void (*fn) (void *arg), void *arg, bool keep_cancel);

#endif							/* MCFDW_ENGINE_H */
