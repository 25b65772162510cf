/*
 * conn_fd.c — the backend's open sockets as a whole, and closing one.
 *
 * Owns: the list of every open socket, the most recently used first;
 * closing a socket (its wait set, its descriptor, its place in the list);
 * the file-descriptor budget the sockets and wait sets share (when it runs
 * short, the least recently used give theirs back); and idle_timeout,
 * enforced over that list.  Must not: open sockets (conn_connect.c does and
 * tells this file), read or write them, or judge instances.
 */
#include "postgres.h"

#include "storage/fd.h"
#include "storage/latch.h"

#include "conn_int.h"

/*
 * Every open socket of the backend, the most recently used first: when the
 * backend runs short of file descriptors, the least recently used idle ones
 * give theirs back (conn_fd_room), and idle_timeout is enforced over it.
 */
static dlist_head open_conns = DLIST_STATIC_INIT(open_conns);
static int64 last_idle_sweep = 0;

/* Close the socket (the buffers stay for the next connection). */
void
McConnClose(McConn *conn)
{
	conn_cs_end(conn, MC_CSE_NONE);	/* a request abandoned: still a call */
	if (conn->wes)
	{
		FreeWaitEventSet(conn->wes);
		conn->wes = NULL;
	}
	/* no close_notify: the socket may be out of step, and memcached needs none */
	if (conn->xfer != NULL)
		conn->xfer->close(conn);
	conn->xfer = NULL;
	if (conn->sock != PGINVALID_SOCKET)
	{
		closesocket(conn->sock);
		ReleaseExternalFD();
		conn->sock = PGINVALID_SOCKET;
		conn->net->sock_gen++;
		dlist_delete(&conn->open_node);
	}
	conn->connecting = false;
	conn->tcp_pending = false;
	conn->tls_kept = false;
	conn->busy = false;
	conn_reset_rbuf(conn);
	conn->wlen = conn->woff = 0;
	conn->cur_events = 0;
}

/* A socket was opened: it is the most recently used. */
void
conn_fd_opened(McConn *conn)
{
	dlist_push_head(&open_conns, &conn->open_node);
}

/* An open connection moved to another struct (a server's rebuild). */
void
conn_fd_moved(McConn *from, McConn *to)
{
	dlist_insert_after(&from->open_node, &to->open_node);
	dlist_delete(&from->open_node);
}

/*
 * Make sure one more external file descriptor (a socket, an epoll set) can
 * be had, within PostgreSQL's budget for them (a third of
 * max_files_per_process, shared with postgres_fdw and the like).  Short of
 * it, the least recently used connections other than self give theirs
 * back: first wait sets (remade at their next wait), then idle sockets
 * (reopened at their next use).  Each socket then costs one descriptor,
 * plus the one wait set in use, so a server's 256 instances fit.  False
 * when nothing is left to give back.
 */
bool
conn_fd_room(McConn *self)
{
	for (;;)
	{
		dlist_iter	it;
		McConn	   *victim = NULL;

		if (AcquireExternalFD())
		{
			ReleaseExternalFD();
			return true;
		}
		dlist_reverse_foreach(it, &open_conns)
		{
			McConn	   *c = dlist_container(McConn, open_node, it.cur);

			if (c != self && c->wes != NULL)
			{
				victim = c;
				break;
			}
		}
		if (victim != NULL)
		{
			FreeWaitEventSet(victim->wes);
			victim->wes = NULL;
			continue;
		}
		dlist_reverse_foreach(it, &open_conns)
		{
			McConn	   *c = dlist_container(McConn, open_node, it.cur);

			if (c != self && !c->busy)
			{
				victim = c;
				break;
			}
		}
		if (victim == NULL)
			return false;
		McConnClose(victim);
	}
}

/* Has the socket sat idle past its server's idle_timeout? */
static inline bool
idle_expired(McConn *conn, int64 now)
{
	int			idle = conn->net->cfg->idle_timeout;

	return idle > 0 && now - conn->last_used > (int64) idle * USECS_PER_SEC;
}

/*
 * Close every idle socket of the backend past its server's idle_timeout,
 * so that backends x instances stay below memcached's connection limit.
 * Run at most once a second, from the next request of any server: the
 * list is short and nothing is read but the clock.
 */
static void
sweep_idle(int64 now)
{
	dlist_mutable_iter it;

	last_idle_sweep = now;
	dlist_foreach_modify(it, &open_conns)
	{
		McConn	   *c = dlist_container(McConn, open_node, it.cur);

		if (!c->busy && idle_expired(c, now))
			McConnClose(c);
	}
}

/*
 * A request is about to use conn's socket (at now, mono_usec): sweep the
 * backend's idle sockets at most once a second, close conn's own if it sat
 * idle too long, and make it the most recently used.  Before the socket is
 * used, so an expired one is never written to.
 */
void
conn_fd_use(McConn *conn, int64 now)
{
	if (now - last_idle_sweep >= USECS_PER_SEC)
		sweep_idle(now);
	if (conn->sock != PGINVALID_SOCKET && idle_expired(conn, now))
		McConnClose(conn);
}

/* conn's socket carries a request now: the most recently used. */
void
conn_fd_touch(McConn *conn)
{
	dlist_move_head(&open_conns, &conn->open_node);
}
