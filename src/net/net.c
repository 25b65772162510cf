/*
 * net.c — a server's network part: its connections as a set.
 *
 * Owns: McNet (net.h) but its TLS context (conn_tls.c's), and each
 * connection's place in it (McConn's net and index): binding it to its server, installing a rebuilt server's
 * connections (one continued from the old configuration keeps its socket),
 * discarding them with their server, closing the busy ones at an abort or
 * the idle ones when asked, probing the idle ones of a call together; and
 * the server's multi-get wait set (latch, postmaster death and every open
 * socket of the server), with each connection's entry in it (McConn's
 * mset).  Must not: open, read or write a socket (the conn_*.c files do),
 * or judge instances.
 */
#include "postgres.h"

#include <poll.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "conn_int.h"

/* The connection to instance index of a server. */
McConn *
McNetConn(McNet *net, int index)
{
	return &net->conns[index];
}

/* Release a connection's buffers and socket for good (config change). */
static void
discard_conn(McConn *conn)
{
	conn_fd_close(conn);
	conn_tls_forget(conn);
	conn_io_free(conn);
	conn_out_free(conn);
}

/*
 * Tie a server's network part to its name and options, once, when its entry
 * is made: both live as long as the entry.
 */
void
McNetBind(McNet *net, Oid serverid, const char *name, const McServerConfig *cfg)
{
	net->serverid = serverid;
	net->name = name;
	net->cfg = cfg;
}

/*
 * Room for a rebuilt server's n connections, allocated before the rebuild
 * commits (McNetRebuild then cannot fail).
 */
McConn *
McNetConnArray(MemoryContext cxt, int n)
{
	return MemoryContextAllocZero(cxt, sizeof(McConn) * n);
}

/*
 * Install a rebuilt server's connections conns (McNetConnArray, in the new
 * configuration's context cxt), while net still has its old ones: new
 * instance i continues old connection from[i] (the same host and port, so
 * a GRANT or a timeout change does not cost a reconnect), or starts unused
 * when from[i] is -1.  Old connections nobody continues are closed and
 * freed.  The TLS context was made from the old configuration and is freed
 * with its context; the next TLS connect makes one from the new.
 */
void
McNetRebuild(McNet *net, McConn *conns, int n, const int *from,
			 MemoryContext cxt)
{
	for (int i = 0; i < n; i++)
	{
		McConn	   *nc = &conns[i];

		if (from[i] >= 0)
		{
			McConn	   *oc = &net->conns[from[i]];

			if (oc->req.busy)
				conn_fd_close(oc);
			/* every part moves: the socket's list links the old struct */
			*nc = *oc;
			conn_fd_moved(oc, nc);
			oc->index = -1;		/* moved */
		}
		else
			conn_fd_init(nc);
		nc->index = i;
		nc->net = net;
	}
	for (int j = 0; net->conns && j < net->nconns; j++)
		if (net->conns[j].index >= 0)
			discard_conn(&net->conns[j]);
	net->conns = conns;
	net->nconns = n;
	net->cxt = cxt;
	conn_tls_rebound(net);
	net->sock_gen++;			/* the multi-get wait set points at old conns */
}

/*
 * Close every connection of net an error or a cancel left in the middle of
 * a request (server_cache.c's (sub)transaction abort callbacks).
 */
void
McNetCloseBusy(McNet *net)
{
	for (int i = 0; net->conns && i < net->nconns; i++)
		if (net->conns[i].req.busy)
			conn_fd_close(&net->conns[i]);
}

/*
 * Close every socket of net that no request is using (mc_disconnect), and
 * the server's multi-get wait set once none is: the descriptors go back to
 * the budget, and the next call reconnects.  A socket in use (a scan whose
 * replies are being read called this, from a column type's input function,
 * say) stays open: closing it would pull the reply from under its reader.
 * Returns how many were closed; *in_use counts those left open.
 */
int
McNetCloseIdle(McNet *net, int *in_use)
{
	int			closed = 0;

	*in_use = 0;
	for (int i = 0; net->conns && i < net->nconns; i++)
	{
		McConn	   *conn = &net->conns[i];

		if (conn->fd.sock == PGINVALID_SOCKET)
			continue;
		if (conn->req.busy || conn->connect.active)
		{
			(*in_use)++;
			continue;
		}
		conn_fd_close(conn);
		closed++;
	}
	if (*in_use == 0 && net->mwes)
	{
		FreeWaitEventSet(net->mwes);
		net->mwes = NULL;
		net->sock_gen++;		/* whoever held the set makes a new one */
	}
	return closed;
}

/* Close and free every connection of a dropped server, and its wait set. */
void
McNetDiscard(McNet *net)
{
	for (int i = 0; net->conns && i < net->nconns; i++)
		discard_conn(&net->conns[i]);
	if (net->mwes)
		FreeWaitEventSet(net->mwes);
	net->mwes = NULL;
	net->conns = NULL;
	net->nconns = 0;
}

/*
 * McConnProbeIdle for the instances of net that probe[] (of n) names, in one
 * system call however many they are: a poll that does not wait, over their
 * idle pooled sockets.  Only a socket it finds readable, hung up or in
 * error, and one whose transport holds bytes the kernel no longer does
 * (TLS), is then classified as McConnProbeIdle does it; any other is open
 * with nothing waiting, the verdict its own probe would give.  If the poll
 * itself fails, each socket is probed on its own.
 */
void
McNetProbeIdle(McNet *net, const bool *probe, int n)
{
	struct pollfd fds[MC_MAX_ENDPOINTS];
	int			idx[MC_MAX_ENDPOINTS];
	int			k = 0;

	for (int s = 0; s < Min(n, net->nconns); s++)
	{
		McConn	   *conn = &net->conns[s];

		if (!probe[s] || conn->fd.sock == PGINVALID_SOCKET || conn->req.busy ||
			conn->connect.active)
			continue;
		if (k == MC_MAX_ENDPOINTS || conn_has_pending(conn))
		{
			McConnProbeIdle(conn);
			continue;
		}
		fds[k].fd = conn->fd.sock;
		fds[k].events = POLLIN;
		fds[k].revents = 0;
		idx[k++] = s;
	}
	if (k == 1)					/* one socket: its own probe is one call too */
	{
		McConnProbeIdle(&net->conns[idx[0]]);
		return;
	}
	if (k > 0 && poll(fds, k, 0) < 0)
	{
		for (int i = 0; i < k; i++)
			McConnProbeIdle(&net->conns[idx[i]]);
		return;
	}
	for (int i = 0; i < k; i++)
		if (fds[i].revents != 0)
			McConnProbeIdle(&net->conns[idx[i]]);
}

/*
 * The multi-get wait set of a server: latch, postmaster death and every
 * open socket of the server (connecting ones too: pipeline.c advances
 * their connects), armed for reading.  It lives as long as the
 * set of open sockets does (sock_gen), so a multi-get pays for no epoll
 * set construction in steady state.  Idle sockets stay in it: one that
 * becomes readable is a socket the server closed, found and dropped by the
 * caller.
 */
WaitEventSet *
McNetWaitSet(McNet *net)
{
	if (net->mwes != NULL && net->mwes_gen == net->sock_gen)
	{
		if (net->mwes_latch != MyLatch)
		{
			ModifyWaitEvent(net->mwes, LATCH_POS, WL_LATCH_SET, MyLatch);
			net->mwes_latch = MyLatch;
		}
		return net->mwes;
	}
	if (net->mwes != NULL)
		FreeWaitEventSet(net->mwes);
	net->mwes = NULL;
	if (!conn_fd_room(NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("out of file descriptors for memcached server \"%s\"", net->name),
				 errdetail("Every connection this session holds is in use."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	net->mwes = McCreateWaitEventSet(conn_io_memory(), net->nconns + 2);
	AddWaitEventToSet(net->mwes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	if (IsUnderPostmaster)
		AddWaitEventToSet(net->mwes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	net->mwes_latch = MyLatch;
	for (int i = 0; i < net->nconns; i++)
	{
		McConn	   *conn = &net->conns[i];

		conn->mset.pos = -1;
		if (conn->fd.sock == PGINVALID_SOCKET)
			continue;
		conn->mset.pos = AddWaitEventToSet(net->mwes, WL_SOCKET_READABLE, conn->fd.sock,
									   NULL, conn);
		conn->mset.events = WL_SOCKET_READABLE;
	}
	net->mwes_gen = net->sock_gen;
	return net->mwes;
}

/*
 * Arm conn's entry in the multi-get wait set for events, if not already.
 * Once a socket of the server was opened or closed (a restart, a dropped
 * instance) the set's entries may name a closed descriptor: nothing is
 * armed then, and the caller rebuilds the set (McNetWaitSet) and arms
 * again before it waits.
 */
void
McNetArm(McConn *conn, uint32 events)
{
	if (conn->net->mwes_gen != conn->net->sock_gen)
		return;
	if (conn->mset.pos >= 0 && conn->mset.events != events)
	{
		ModifyWaitEvent(conn->net->mwes, conn->mset.pos, events, NULL);
		conn->mset.events = events;
	}
}
