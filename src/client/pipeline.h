/*
 * pipeline.h — the request engine's wait (pipeline.c): the start
 * of an instance (the pooled sockets of a call probed together), the wait
 * on a server's multi-get wait set for the instances of one call (their
 * connects included), and the restart of an instance whose pooled socket
 * the server closed while idle.
 * Used by engine.c alone, which keeps each instance's state and lends it
 * through callbacks.
 */
#ifndef MCFDW_PIPELINE_H
#define MCFDW_PIPELINE_H

#include "server.h"

#include "utils/timestamp.h"

typedef struct McPipeline
{
	McServer   *srv;
	void	   *arg;			/* the engine's own batch, passed back */

	/*
	 * Instance s's connection while it still waits for its reply (and the
	 * time it last made progress), else NULL.
	 */
	McConn	   *(*waiting) (void *arg, int s, TimestampTz *last_progress);

	/*
	 * Instance s's connect finished (ok), or failed (the cause kept in its
	 * connection, for the engine to count and drop the instance as any
	 * failure of it).  Called for a connection McPipelineBegin left
	 * connecting.
	 */
	void		(*connected) (void *arg, int s, bool ok, TimestampTz now);

	/* Send and read what instance s can without waiting (connected). */
	void		(*pump) (void *arg, int s, bool readable, TimestampTz now);

	/*
	 * Instance s ran out of time: io_timeout of inactivity, or (overall)
	 * the call's deadline.  The engine fails it; it must stop waiting.
	 */
	void		(*expired) (void *arg, int s, bool overall);

	TimestampTz deadline;		/* 0: none */
} McPipeline;

extern void McPipelineProbe(McServer *srv, const bool *probe);
extern McConn *McPipelineBegin(McServer *srv, int s, bool soft, int cap_ms);
extern void McPipelineRun(const McPipeline *p);
extern McConn *McPipelineRestart(McServer *srv, int s, bool soft, bool *retried,
								 bool answered, int cap_ms);

#endif							/* MCFDW_PIPELINE_H */
