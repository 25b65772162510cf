/*
 * conn_fd.c — a connection's socket, and the backend's sockets as a whole.
 *
 * Owns: the socket (McConn's fd: its descriptor, the transport its bytes
 * go through, its place in the list), told by conn_connect.c when it
 * opens and by conn_tls.c when TLS takes it over; closing it, each part of
 * the connection reset by its owner's helper; the list of every open
 * socket, the most recently used first; the file-descriptor budget the
 * sockets and wait sets share (when it runs short, the least recently
 * used give theirs back); and idle_timeout, enforced over that list.
 * Must not: open sockets (conn_connect.c does and tells this file), read
 * or write them, or judge instances.
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

/*
 * Close the socket (the buffers stay for the next connection): each part
 * of the connection is reset by its owner, the transport frees what it
 * holds (no close_notify: the socket may be out of step, and memcached
 * needs none).
 */
void
conn_fd_close(McConn *conn)
{
	conn_tally_end(conn, MC_CSE_NONE);	/* a request abandoned: still a call */
	conn_io_drop_wes(conn);
	if (conn->fd.xfer != NULL)
		conn->fd.xfer->close(conn);
	conn->fd.xfer = NULL;
	if (conn->fd.sock != PGINVALID_SOCKET)
	{
		closesocket(conn->fd.sock);
		ReleaseExternalFD();
		conn->fd.sock = PGINVALID_SOCKET;
		net_sock_changed(conn->net);
		dlist_delete(&conn->fd.node);
	}
	conn_connect_reset(conn);
	conn_req_closed(conn);
	conn_io_reset_rbuf(conn);
	conn_out_clear(conn);
}

/* A connection not yet connected (a server's new instance). */
void
conn_fd_init(McConn *conn)
{
	conn->fd.sock = PGINVALID_SOCKET;
}

/*
 * A socket was opened (conn_connect.c), its bytes going through xfer (the
 * plaintext transport until a TLS handshake begins): it is the most
 * recently used.
 */
void
conn_fd_opened(McConn *conn, pgsocket sock, const McTransport *xfer)
{
	conn->fd.sock = sock;
	conn->fd.xfer = xfer;
	net_sock_changed(conn->net);
	dlist_push_head(&open_conns, &conn->fd.node);
}

/* The socket's bytes go through xfer from now on (conn_tls.c, at its handshake). */
void
conn_fd_transport(McConn *conn, const McTransport *xfer)
{
	conn->fd.xfer = xfer;
}

/*
 * A connection moved to another struct (a server's rebuild, which copied
 * it): an open socket's place in the list goes to the copy.
 */
void
conn_fd_moved(McConn *from, McConn *to)
{
	if (from->fd.sock == PGINVALID_SOCKET)
		return;
	dlist_insert_after(&from->fd.node, &to->fd.node);
	dlist_delete(&from->fd.node);
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
			McConn	   *c = dlist_container(McConn, fd.node, it.cur);

			if (c != self && c->wait.wes != NULL)
			{
				victim = c;
				break;
			}
		}
		if (victim != NULL)
		{
			conn_io_drop_wes(victim);
			continue;
		}
		dlist_reverse_foreach(it, &open_conns)
		{
			McConn	   *c = dlist_container(McConn, fd.node, it.cur);

			if (c != self && !c->req.busy)
			{
				victim = c;
				break;
			}
		}
		if (victim == NULL)
			return false;
		conn_fd_close(victim);
	}
}

/* Has the socket sat idle past its server's idle_timeout? */
static inline bool
idle_expired(McConn *conn, int64 now)
{
	int			idle = conn->net->cfg->idle_timeout;

	return idle > 0 && now - conn->req.last_used > (int64) idle * USECS_PER_SEC;
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
		McConn	   *c = dlist_container(McConn, fd.node, it.cur);

		if (!c->req.busy && idle_expired(c, now))
			conn_fd_close(c);
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
	if (conn->fd.sock != PGINVALID_SOCKET && idle_expired(conn, now))
		conn_fd_close(conn);
}

/* conn's socket carries a request now: the most recently used. */
void
conn_fd_touch(McConn *conn)
{
	dlist_move_head(&open_conns, &conn->fd.node);
}
