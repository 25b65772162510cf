/*
 * conn_multi.c — the multi-get side of a connection: the server's shared
 * wait set and the non-blocking slices a pipelined batch is made of.
 *
 * Owns: one WaitEventSet per server (latch, postmaster death and every open
 * socket of the server), arming a socket in it for writing, sending and
 * receiving whatever the socket takes or has without waiting, dropping an
 * idle socket the server closed, and the write buffer a batch refills in
 * slices; over TLS with conn_tls.c's steps.  Must not: wait (pipeline.c
 * waits on the set, so one wait serves every instance of a batch), parse
 * replies, choose instances, or count failures (it reports them, as
 * conn_io.c does).  Errors and the retry of a pooled socket closed while
 * idle go through conn_io.c's conn_io_failed, so
 * both sides of a connection fail the same way.
 */
#include "postgres.h"

#include <sys/socket.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "conn_int.h"

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
	net->mwes = McCreateWaitEventSet(conn_memory(), net->nconns + 2);
	AddWaitEventToSet(net->mwes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	if (IsUnderPostmaster)
		AddWaitEventToSet(net->mwes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	net->mwes_latch = MyLatch;
	for (int i = 0; i < net->nconns; i++)
	{
		McConn	   *conn = &net->conns[i];

		conn->mpos = -1;
		if (conn->sock == PGINVALID_SOCKET)
			continue;
		conn->mpos = AddWaitEventToSet(net->mwes, WL_SOCKET_READABLE, conn->sock,
									   NULL, conn);
		conn->mevents = WL_SOCKET_READABLE;
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
McConnArm(McConn *conn, uint32 events)
{
	if (conn->net->mwes_gen != conn->net->sock_gen)
		return;
	if (conn->mpos >= 0 && conn->mevents != events)
	{
		ModifyWaitEvent(conn->net->mwes, conn->mpos, events, NULL);
		conn->mevents = events;
	}
}

/*
 * Send what is pending in wbuf without waiting.  Returns the bytes sent (0
 * when the socket buffer is full), -1 when the instance failed (the cause
 * kept in conn), -2 when a pooled socket turned out to be closed while idle
 * (closed; the caller may retry).
 */
ssize_t
McConnSendSome(McConn *conn)
{
	ssize_t		total = 0;

	while (conn->woff < conn->wlen)
	{
		McXferStatus st;
		ssize_t		n = conn->xfer->write(conn, conn->wbuf + conn->woff,
										  conn->wlen - conn->woff, &st);

		if (n == 0)
			break;
		if (n < 0)
			return conn_xfer_failed(conn, st, "send to") == MC_IO_RETRY ? -2 : -1;
		conn->woff += n;
		total += n;
	}
	if (conn->woff == conn->wlen)
		conn->woff = conn->wlen = 0;
	return total;
}

/*
 * Receive what the socket has, without waiting, making room for at least
 * "need" more bytes.  Returns bytes read (0 when nothing is there), -1 when
 * the instance failed (the cause kept in conn), -2 for a pooled socket
 * closed while idle.  *drained tells the caller whether the socket was
 * drained (a short read), so it waits rather than tries again.
 */
ssize_t
McConnRecvSome(McConn *conn, size_t need, bool *drained)
{
	ssize_t		total = 0;

	if (!conn_reserve(conn, Max(need, RBUF_BATCH_READ)))
		return -1;
	*drained = false;
	for (;;)
	{
		McXferStatus st;
		size_t		room = conn->rcap - conn->rend - 1;
		ssize_t		n;

		if (room == 0)
			break;
		n = conn->xfer->read(conn, conn->rbuf + conn->rend, room, &st);
		if (n == 0)
		{
			*drained = true;
			break;
		}
		if (n < 0)
			return conn_xfer_failed(conn, st, "read from") == MC_IO_RETRY ? -2 : -1;
		conn->rend += n;
		conn->rbuf[conn->rend] = '\0';
		conn->rgot += n;
		conn->stamp_fresh = false;
		total += n;

		/*
		 * A short read drained the socket, unless bytes come in records
		 * (TLS): then only a want says nothing whole is left.
		 */
		if (!conn->xfer->records && (size_t) n < room)
		{
			*drained = true;
			break;
		}
	}
	conn->expect_wait = *drained;
	return total;
}

/*
 * The unread reply bytes, NUL-terminated (see conn_reset_rbuf), for the
 * caller to parse in place and then McConnConsume.  Until then the bytes
 * are the caller's to overwrite: the multi-get writes a value's varlena
 * header over the reply header it has parsed, so the value is copied once,
 * straight into its tuple.
 */
char *
McConnUnread(McConn *conn, size_t *len)
{
	*len = conn->rend - conn->rstart;
	return conn->rbuf + conn->rstart;
}

/* Request bytes queued and not yet sent. */
size_t
McConnUnsent(McConn *conn)
{
	return conn->wlen - conn->woff;
}

/*
 * An idle pooled socket became readable: the server closed it (or sent
 * something unasked).  Either way it is useless; close it now.  A TLS
 * socket is asked first: a TLS 1.3 server's session tickets make a
 * healthy idle socket readable too.
 */
void
McConnDropIdle(McConn *conn)
{
	if (!conn->busy && (conn->xfer == NULL || !conn->xfer->still_open(conn)))
		McConnClose(conn);
}

/*
 * Make room for n more request bytes in wbuf (sent bytes are slid out
 * first) and return where they go; McConnWritten queues what was written
 * there.  The multi-get refills wbuf in slices, so it stays small however
 * many keys a batch has.
 */
char *
McConnWriteSpace(McConn *conn, size_t n)
{
	if (conn->wbuf == NULL)
	{
		conn->wcap = Max(WBUF_INITIAL, n);
		conn->wbuf = MemoryContextAlloc(conn_memory(), conn->wcap);
	}
	if (conn->wcap - conn->wlen < n && conn->woff > 0)
	{
		memmove(conn->wbuf, conn->wbuf + conn->woff, conn->wlen - conn->woff);
		conn->wlen -= conn->woff;
		conn->woff = 0;
	}
	if (conn->wcap - conn->wlen < n)
	{
		while (conn->wcap - conn->wlen < n)
			conn->wcap *= 2;
		conn->wbuf = repalloc(conn->wbuf, conn->wcap);
	}
	return conn->wbuf + conn->wlen;
}

/* Queue n bytes written where McConnWriteSpace said (at most what it made room for). */
void
McConnWritten(McConn *conn, size_t n)
{
	Assert(conn->wlen + n <= conn->wcap);
	conn->wlen += n;
	conn->cs.sent += n;
}

/*
 * A pipeline of nrequests requests is queued: the socket has carried a
 * request (a later failure on it is no longer "closed while idle"), and the
 * view counts them.
 */
void
McConnPipelined(McConn *conn, int nrequests)
{
	conn->requests++;
	conn->total_requests += nrequests;
	conn->cs.keys += nrequests;
}

/*
 * A quiet multi-get's reply to a key: a hit unless it is a lease's
 * placeholder (the keys without a hit were misses).
 */
void
McConnHit(McConn *conn, const McReply *r)
{
	conn->cs.found.hits += !McReplyIsPlaceholder(r);
}

/*
 * A batch write's verdict on its keys once its pipeline ended: hits (a
 * delete, touch or mark that found its key) and misses (NF, EN).
 */
void
McConnFound(McConn *conn, uint32 hits, uint32 misses)
{
	conn->cs.found.hits += hits;
	conn->cs.found.misses += misses;
}
