/*
 * conn_io.c — the bytes of one connection: sends and reads with deadlines.
 *
 * Owns: the memory context of connection buffers and wait sets; the
 * connection's own WaitEventSet and the interruptible waits on it
 * (McConn's wait: deadlines from the timeouts and the request's bound,
 * cancel and statement_timeout serviced); sending a whole request and
 * counting it (McConn's count, shown by mc_servers); reading reply bytes
 * into the read buffer (McConn's io: always NUL-terminated, capped by
 * max_reply_size); and telling a pooled socket the server closed while
 * idle (retried once) from a failing instance (recorded through
 * conn_fail.c).  Must not: parse replies, tie them to requests (conn.c
 * does), or judge instances.
 */
#include "postgres.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "conn_int.h"

/* The context of connection buffers and wait sets, made on first use. */
MemoryContext
conn_io_memory(void)
{
	static MemoryContext cxt = NULL;

	if (cxt == NULL)
		cxt = AllocSetContextCreate(TopMemoryContext, "mcfdw connections",
									ALLOCSET_DEFAULT_SIZES);
	return cxt;
}

/* The connection's own wait set, made at its first wait. */
static void
make_wes(McConn *conn, uint32 events)
{
	if (!conn_fd_room(conn))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("out of file descriptors for memcached server \"%s\"",
						conn->net->name),
				 errdetail("Every connection this session holds is in use."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	conn->wait.wes = McCreateWaitEventSet(conn_io_memory(), 3);
	AddWaitEventToSet(conn->wait.wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	/* a single-user backend has no postmaster to watch */
	if (IsUnderPostmaster)
		AddWaitEventToSet(conn->wait.wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	conn->wait.sock_pos = AddWaitEventToSet(conn->wait.wes, events, conn->fd.sock, NULL, NULL);
	conn->wait.events = events;
	conn->wait.latch = MyLatch;
}

/*
 * Wait until the socket is ready for events, the latch is set (interrupts
 * are serviced, so cancel and statement_timeout work) or timeout_ms of
 * inactivity pass, counted from since (0: from now).  One WaitEventSet per
 * connection avoids building an epoll set per wait, and the clock is read
 * only when a wait ends without the socket being ready.  Returns false on a
 * timeout (a failure of the instance, kept in conn).
 */
static bool
wait_since(McConn *conn, uint32 events, int timeout_ms, const char *action,
		   int64 since)
{
	int64		deadline = 0;
	long		timeout = -1;

	if (timeout_ms > 0)
	{
		/*
		 * The clock was read when the request began; until a reply byte
		 * arrives, that is when this wait began too, near enough.
		 */
		int64		start = since != 0 ? since :
			conn->io.stamp_fresh ? conn->req.last_used : mono_usec();

		deadline = start + (int64) timeout_ms * 1000;
		timeout = timeout_ms;
		/* a quiet time that began before this wait may be over already */
		if (since != 0 && (timeout = mono_ms_left(deadline)) <= 0)
			return conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
							 "timed out after %d ms", timeout_ms);
	}
	/* a bound on the whole request (the stats commands) */
	if (conn->io.deadline != 0 && (deadline == 0 || conn->io.deadline < deadline))
	{
		deadline = conn->io.deadline;
		timeout_ms = conn->io.deadline_ms;
		timeout = mono_ms_left(deadline);
	}
	if (conn->wait.wes == NULL)
		make_wes(conn, events);
	if (conn->wait.latch != MyLatch)
	{
		ModifyWaitEvent(conn->wait.wes, LATCH_POS, WL_LATCH_SET, MyLatch);
		conn->wait.latch = MyLatch;
	}
	if (conn->wait.events != events)
	{
		ModifyWaitEvent(conn->wait.wes, conn->wait.sock_pos, events, NULL);
		conn->wait.events = events;
	}
	for (;;)
	{
		WaitEvent	ev;
		int			rc;

		CHECK_FOR_INTERRUPTS();
		rc = WaitEventSetWait(conn->wait.wes, timeout, &ev, 1, McWaitEvent(false));
		if (rc > 0 && (ev.events & events))
			return true;
		if (rc > 0 && (ev.events & WL_LATCH_SET))
			ResetLatch(MyLatch);
		/* woken early, or timed out: what is left of the timeout? */
		if (deadline)
		{
			timeout = mono_ms_left(deadline);
			if (timeout <= 0)
			{
				conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
						  "timed out after %d ms", timeout_ms);
				conn_fail_own_limit(conn, deadline == conn->io.own_deadline);
				return false;
			}
		}
	}
}

/* wait_since from the start of this wait (or of the request). */
bool
conn_io_wait(McConn *conn, uint32 events, int timeout_ms, const char *action)
{
	return wait_since(conn, events, timeout_ms, action, 0);
}

/*
 * A pooled socket that the server closed while it sat idle (a restart, an
 * idle timeout) fails on first use with EPIPE/ECONNRESET or an EOF before any
 * reply byte.  That says nothing about the server's health, so instead of
 * raising an error the socket is closed and the caller retries once on a
 * fresh one (see McConnRoundtrip).  The same signs also follow a request
 * that ran and lost its reply (a proxy reset, a crash after the write), so
 * only requests that may run twice are retryable (McConnRoundtrip clears
 * the flag for the others, which probe the socket before writing instead).
 * The rule is this one alone: a socket opened since the request began is
 * never retryable (conn_prepare: no request sent on it yet), so whoever
 * resends after MC_IO_RETRY or -2 does so once.  The resend stays with
 * the caller: McConnRoundtrip and conn_stat.c hold their one request, a
 * pipeline's requests are the engine's to queue again (McPipelineRestart),
 * since conn.c keeps only their unsent bytes.
 */
static bool
closed_while_idle(McConn *conn, int err)
{
	if (!conn->req.retryable || conn->io.rgot != 0)
		return false;
	if (err != 0 && err != EPIPE && err != ECONNRESET)
		return false;
	conn_tally_drop(conn);		/* not a call: the retry is */
	conn_fd_close(conn);
	return true;
}

/*
 * A socket error (err; 0 for an EOF) ended a send or a read: either a
 * pooled socket was closed while idle (retry), or the instance failed (the
 * cause is kept for the caller).  One place for the ladder every I/O step
 * would otherwise repeat.
 */
McIoStatus
conn_io_failed(McConn *conn, int err, const char *action)
{
	if (closed_while_idle(conn, err))
		return MC_IO_RETRY;
	errno = err;
	if ((err == 0 || err == ECONNRESET || err == EPIPE) && !conn->io.replied &&
		conn->io.rgot == 0 && !conn->connect.active)
	{
		/*
		 * A fresh socket closed at the first meta commands, unanswered: what
		 * a proxy without the meta protocol does (twemproxy closes the
		 * client's connection at any command it does not know; a reset
		 * when more requests were still unread, seen by a read or a send).
		 */
		conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
				  "the server %s the connection before answering its first request: twemproxy (nutcracker) and other proxies that do not speak memcached's meta protocol do this, and are not supported",
				  err == 0 ? "closed" : "reset");
		conn_fail_hint(conn, conn->net->cfg->tls == MC_TLS_DISABLE ?
					   "Connect to memcached directly, not through such a proxy.  If the server expects TLS (memcached -Z), set the server option \"tls\"." :
					   "Connect to memcached directly, not through such a proxy.");
		return MC_IO_FAILED;
	}
	if (err == 0)
		conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
				  "the server closed the connection");
	else
		conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action, "%m");

	/*
	 * memcached -Z resets a plaintext client at its first bytes: a fresh
	 * plaintext socket dropped before any reply byte may be talking to a
	 * TLS server.
	 */
	if (conn->net->cfg->tls == MC_TLS_DISABLE && conn->count.requests <= 1 &&
		conn->io.rgot == 0 && (err == 0 || err == ECONNRESET || err == EPIPE))
		conn_fail_hint(conn, "If the server expects TLS (memcached -Z), set the server option \"tls\".");
	return MC_IO_FAILED;
}

/*
 * A transfer failed (st): as conn_io_failed for an EOF or a socket error
 * (so a pooled socket closed while idle is retried alike, on either
 * transport), else a failure of the instance with OpenSSL's reason.
 */
McIoStatus
conn_io_xfer_failed(McConn *conn, McXferStatus st, const char *action)
{
	if (st == MC_XFER_EOF)
		return conn_io_failed(conn, 0, action);
	if (st == MC_XFER_SYSERR)
		return conn_io_failed(conn, errno, action);
	conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action, "%s", conn->fd.xfer->why());
	return MC_IO_FAILED;
}

/* Send a whole request: written, counted, and its reply awaited. */
McIoStatus
conn_io_send(McConn *conn, const char *hdr, size_t hlen,
		  const char *data, size_t dlen)
{
	McIoStatus	st = conn->fd.xfer->write_request(conn, hdr, hlen, data, dlen);

	if (st != MC_IO_OK)
		return st;
	conn_tally_sent(conn, hlen + dlen);
	conn->count.requests++;
	conn->count.total++;
	conn->io.expect_wait = true;
	return MC_IO_OK;
}

/*
 * A socket was opened (conn_connect.c): its reply bytes start afresh in a
 * read buffer made at the first, and the view counts it.
 */
void
conn_io_opened(McConn *conn)
{
	if (conn->io.rbuf == NULL)
	{
		conn->io.rbuf = MemoryContextAlloc(conn_io_memory(), RBUF_INITIAL);
		conn->io.rcap = RBUF_INITIAL;
	}
	conn_io_reset_rbuf(conn);
	conn->io.replied = false;
	conn->count.requests = 0;
	conn->count.connects++;
}

/* A read buffer grown past RBUF_KEEP by a big reply goes back to its first size. */
void
conn_io_shrink(McConn *conn)
{
	pfree(conn->io.rbuf);
	conn->io.rbuf = MemoryContextAlloc(conn_io_memory(), RBUF_INITIAL);
	conn->io.rcap = RBUF_INITIAL;
}

/* Free the read buffer for good (the connection is discarded). */
void
conn_io_free(McConn *conn)
{
	conn_buf_free(&conn->io.rbuf, &conn->io.rcap);
}

/*
 * Make room for at least need more bytes after rend: slide unread bytes to
 * the front, then grow.  Growth is to a power of two so a stream of large
 * values does not reallocate per reply.  A reply too large to buffer is a
 * hard failure: raised even in a soft call, since failing over would only
 * fetch it again.
 */
bool
conn_io_reserve(McConn *conn, size_t need)
{
	size_t		have = conn->io.rend - conn->io.rstart;

	need++;						/* and the NUL after the data */
	if (conn->io.rcap - conn->io.rend >= need)
		return true;
	if (conn->io.rstart > 0)
	{
		memmove(conn->io.rbuf, conn->io.rbuf + conn->io.rstart, have);
		conn->io.rstart = 0;
		conn->io.rend = have;
		conn->io.rbuf[have] = '\0';
	}
	if (have + need > (size_t) conn->net->cfg->max_reply_size + 1)
		return conn_fail(conn, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
						 "a reply of over %zu bytes exceeds max_reply_size (%d bytes)",
						 have + need - 1, conn->net->cfg->max_reply_size);
	if (conn->io.rcap - conn->io.rend < need)
	{
		size_t		cap = conn->io.rcap;

		while (cap - have < need)
			cap *= 2;
		if (cap > MaxAllocSize)
			return conn_fail(conn, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
							 "reply of %zu bytes is too large", have + need);
		conn->io.rbuf = repalloc(conn->io.rbuf, cap);
		conn->io.rcap = cap;
	}
	return true;
}

/*
 * Read more reply bytes: at least "need", as many as fit.  Right after a
 * request was sent the reply cannot be there yet, so wait first; after a
 * read that filled the buffer there is probably more, so read first.  Either
 * way no system call is spent on a read that is sure to fail.
 */
McIoStatus
conn_io_fill(McConn *conn, size_t need)
{
	size_t		got = 0;

	/*
	 * Over TLS, io_timeout runs from the last decrypted byte, not the last
	 * byte on the socket: a server that trickles one record a byte at a
	 * time wakes every wait and delivers nothing.
	 */
	int64		quiet_since = 0;

	if (!conn_io_reserve(conn, need))
		return MC_IO_FAILED;
	while (got < need)
	{
		ssize_t		n;
		size_t		room;
		McXferStatus st;

		/* bytes OpenSSL already holds are invisible to epoll: read them first */
		if (conn->io.expect_wait && !conn_has_pending(conn))
		{
			if (conn->fd.xfer->records && quiet_since == 0)
				quiet_since = conn->io.stamp_fresh ? conn->req.last_used : mono_usec();
			if (!wait_since(conn, conn->io.want_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE,
							conn->net->cfg->io_timeout, "read from", quiet_since))
				return MC_IO_FAILED;
		}
		conn->io.expect_wait = conn->io.want_write = false;
		room = conn->io.rcap - conn->io.rend - 1;
		n = conn->fd.xfer->read(conn, conn->io.rbuf + conn->io.rend, room, &st);
		if (n == 0)
		{
			conn->io.expect_wait = true;
			conn->io.want_write = (st == MC_XFER_WANT_WRITE);
			continue;
		}
		if (n < 0)
			return conn_io_xfer_failed(conn, st, "read from");
		quiet_since = 0;
		conn_io_received(conn, n);
		got += n;
		conn->io.expect_wait = ((size_t) n < room);
	}
	return MC_IO_OK;
}
