/*
 * pipeline.c — the request engine's wait (engine.c): many instances of
 * one server in flight at once, one wait serving whichever is ready.
 *
 * Owns: the loop that arms each waiting instance's socket in the server's
 * multi-get wait set (net.c), bounds the wait by io_timeout of
 * inactivity per instance and by the call's deadline, services interrupts,
 * and hands ready sockets back to the engine; the connects of a call's
 * cold instances, advanced together on that same wait (each a step
 * machine of conn_connect.c, with its own bounds); the start of an instance
 * (its health asked first; the pooled sockets of a call probed together,
 * in one system call) and its restart when the server closed that socket
 * while idle.  The engine
 * (engine.c) owns each instance's state and lends it through McPipeline's
 * callbacks.  Must not: read or write sockets itself, parse replies, or
 * decide what an instance's failure means for its requests (the engine's
 * expired and pump do).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "pipeline.h"
#include "health.h"
#include "server.h"

/*
 * Advance instance s's connect as far as it goes without waiting: once it
 * is done the engine is told and its pipeline written; a failure is the
 * engine's to count and act on, as any failure of the instance.
 */
static void
connect_step(const McPipeline *p, int s, McConn *conn, TimestampTz now)
{
	switch (McConnConnectStep(conn))
	{
		case MC_CONNECT_DONE:
			p->connected(p->arg, s, true, now);
			p->pump(p->arg, s, false, now);
			break;
		case MC_CONNECT_FAILED:
			p->connected(p->arg, s, false, now);
			break;
		case MC_CONNECT_WAIT:
			break;
	}
}

/*
 * The call's deadline for instance s: true when it passed (the instance
 * handed to expired), else *left is what remains (untouched: no deadline).
 */
static bool
deadline_passed(const McPipeline *p, int s, TimestampTz now, long *left)
{
	if (p->deadline == 0)
		return false;
	*left = TimestampDifferenceMilliseconds(now, p->deadline);
	if (*left > 0)
		return false;
	p->expired(p->arg, s, true);
	return true;
}

/*
 * Connect to the instances that have no socket yet and write every
 * instance's pipeline, then serve whichever socket is ready until no
 * instance waits any more.  Connects proceed together: each is a step
 * machine (conn_connect.c) advanced when its socket is ready, bounded by
 * its own connect_timeout and io_timeout per wait, so N cold instances
 * cost one handshake's time, not N, and a stalled one delays no other.
 * Waits are interruptible (cancel and statement_timeout are serviced on
 * every wake-up) and end at the nearest io_timeout, connect bound or
 * deadline; an instance past io_timeout or the deadline is handed to
 * expired.
 */
void
McPipelineRun(const McPipeline *p)
{
	McServer   *srv = p->srv;
	int			n = srv->cfg.nendpoints;
	int			io_timeout = srv->cfg.io_timeout;
	WaitEvent  *events = palloc(sizeof(WaitEvent) * (n + 2));
	TimestampTz now = GetCurrentTimestamp();

	for (int s = 0; s < n; s++)
	{
		TimestampTz last;
		McConn	   *conn = p->waiting(p->arg, s, &last);

		if (conn != NULL && McConnConnecting(conn))
			connect_step(p, s, conn, now);
		else
			p->pump(p->arg, s, false, now);
	}

	for (;;)
	{
		WaitEventSet *wes;
		long		timeout = -1;
		int			nev;
		int			pending = 0;

		now = GetCurrentTimestamp();
		wes = McNetWaitSet(&srv->net);
		for (int s = 0; s < n; s++)
		{
			TimestampTz last;
			McConn	   *conn = p->waiting(p->arg, s, &last);
			long		left = -1;

			if (conn == NULL)
				continue;
			if (McConnConnecting(conn))
			{
				uint32		want;
				long		connect_left = McConnConnectWait(conn, &want);

				if (connect_left == 0)
				{
					McConnConnectExpired(conn);
					p->connected(p->arg, s, false, now);
					continue;
				}
				if (deadline_passed(p, s, now, &left))
					continue;
				if (connect_left > 0 && (left < 0 || connect_left < left))
					left = connect_left;
				if (left >= 0 && (timeout < 0 || left < timeout))
					timeout = left;
				McNetArm(conn, want);
				pending++;
				continue;
			}
			if (deadline_passed(p, s, now, &left))
				continue;
			if (io_timeout > 0)
			{
				long		io_left = TimestampDifferenceMilliseconds(now,
																	  TimestampTzPlusMilliseconds(last, io_timeout));

				if (io_left <= 0)
				{
					p->expired(p->arg, s, false);
					continue;
				}
				if (left < 0 || io_left < left)
					left = io_left;
			}
			if (left >= 0 && (timeout < 0 || left < timeout))
				timeout = left;
			/* bytes inside OpenSSL are readable, though epoll cannot see them */
			if (McConnHasPending(conn))
			{
				p->pump(p->arg, s, true, now);
				if ((conn = p->waiting(p->arg, s, &last)) == NULL)
					continue;
			}
			McNetArm(conn, WL_SOCKET_READABLE |
					 (McConnUnsent(conn) > 0 ? WL_SOCKET_WRITEABLE : 0));
			pending++;
		}
		if (pending == 0)
			break;
		/* a socket opened or closed above: arm the rebuilt set first */
		if (unlikely(!McNetWaitSetCurrent(&srv->net)))
			continue;

		CHECK_FOR_INTERRUPTS();
		nev = WaitEventSetWait(wes, timeout, events, n + 2, McWaitEvent(false));
		now = GetCurrentTimestamp();
		for (int e = 0; e < nev; e++)
		{
			McConn	   *conn = (McConn *) events[e].user_data;
			TimestampTz last;
			int			s;

			if (events[e].events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
				continue;
			}
			if (conn == NULL)
				continue;
			s = McConnIndex(conn);
			if (p->waiting(p->arg, s, &last) != conn)
			{
				/* an idle socket became readable: the server closed it */
				McConnDropIdle(conn);
				continue;
			}
			if (McConnConnecting(conn))
				connect_step(p, s, conn, now);
			else
				p->pump(p->arg, s, (events[e].events & WL_SOCKET_READABLE) != 0, now);
		}
	}
	pfree(events);
}

/*
 * Probe the pooled sockets of the instances probe[] names before any
 * pipeline is written: each is replaced if the server closed it or sent
 * it anything unasked.  A pipeline's replies are tied to its requests by
 * position only, and quiet requests leave gaps: a stray "MN" waiting on
 * the socket would end the pipeline before its replies came, and those
 * replies would then be read by the next pipeline as its own.  One system
 * call for all of them (McNetProbeIdle), not one per instance.
 */
void
McPipelineProbe(McServer *srv, const bool *probe)
{
	McNetProbeIdle(&srv->net, probe, srv->cfg.nendpoints);
}

/*
 * The connection to instance s, ready for a request (McConnPrepare):
 * NULL (soft) when the instance is dead or the connect could not start
 * (counted).  probed: its pooled socket was probed just now
 * (McPipelineProbe).
 */
static McConn *
pipe_begin(McServer *srv, int s, bool soft, bool probed, int cap_ms)
{
	McConn	   *conn = McNetConn(&srv->net, s);

	if (!McInstanceUsable(srv, s, soft))
		return NULL;
	if (!McConnPrepare(conn, probed, cap_ms))
	{
		McInstanceCountFailure(srv, conn, soft);
		return NULL;
	}
	return conn;
}

/*
 * An instance's start in a pipeline, on a socket McPipelineProbe just
 * probed (not probed again, however long it sat idle before); a connect it
 * starts gets at most cap_ms (the run's budget left; 0 = connect_timeout
 * alone).
 */
McConn *
McPipelineBegin(McServer *srv, int s, bool soft, int cap_ms)
{
	return pipe_begin(srv, s, soft, true, cap_ms);
}

/*
 * A pooled socket of instance s turned out closed while idle before any
 * reply came (the requests never ran): the instance starts over once, on a
 * fresh socket.  Once it has retried, or once a reply came (answered: the
 * requests did run), that is a failure of the instance, counted (and
 * raised unless soft).  Returns the fresh connection, ready for the
 * engine to queue its pipeline again, or NULL.
 */
McConn *
McPipelineRestart(McServer *srv, int s, bool soft, bool *retried, bool answered,
				  int cap_ms)
{
	McConn	   *conn;

	if (*retried || answered)
	{
		McInstanceMisbehaved(srv, McNetConn(&srv->net, s), soft, ERRCODE_CONNECTION_FAILURE,
					   "read from", "the server closed the connection");
		return NULL;
	}
	*retried = true;
	conn = pipe_begin(srv, s, soft, false, cap_ms);
	if (conn == NULL)
		return NULL;
	if (!McConnConnectFinish(conn))
	{
		McInstanceCountFailure(srv, conn, soft);
		return NULL;
	}
	return conn;
}
