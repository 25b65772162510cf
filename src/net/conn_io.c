/*
 * conn_io.c — the bytes of one connection: sends and reads with deadlines.
 *
 * Owns: the connection's own WaitEventSet and the interruptible waits on
 * it (deadlines from the timeouts; cancel and statement_timeout serviced),
 * sending a whole request, reading reply bytes into the read buffer
 * (always NUL-terminated, capped by max_reply_size), and the failure
 * record: a failing instance is reported (the cause kept in the
 * connection, the socket closed), raised by health.c through McConnRaise;
 * and, for every reader of replies, the replies that say the peer is not a
 * memcached this can use (a login it requires, no meta protocol, not
 * memcached at all: McConnForeignReply).  Must not: parse replies
 * otherwise, tie them to requests (conn.c does), or judge instances.
 */
#include "postgres.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "conn_int.h"

/* The context of connection buffers and wait sets, made on first use. */
MemoryContext
conn_memory(void)
{
	static MemoryContext cxt = NULL;

	if (cxt == NULL)
		cxt = AllocSetContextCreate(TopMemoryContext, "mcfdw connections",
									ALLOCSET_DEFAULT_SIZES);
	return cxt;
}

/* Name of a connection's instance, for messages. */
const char *
McConnName(McConn *conn)
{
	return McInstanceName(conn->net, conn->index);
}

/*
 * Which errors_* column of mc_client_stats a failure counts in: every
 * timeout of the connection layer says "timed out", the rest is told by
 * the errcode.
 */
static McCsError
fail_class(int sqlerrcode, const char *fmt)
{
	if (sqlerrcode == ERRCODE_INVALID_PASSWORD ||
		sqlerrcode == ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION)
		return MC_CSE_AUTH;
	if (strncmp(fmt, "timed out", 9) == 0)
		return MC_CSE_TIMEOUT;
	if (sqlerrcode == ERRCODE_PROTOCOL_VIOLATION ||
		sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED)
		return MC_CSE_PROTOCOL;
	if (sqlerrcode == ERRCODE_FDW_ERROR)
		return MC_CSE_SERVER;
	return MC_CSE_CONNECT;
}

/*
 * The instance misbehaved or went away: close the socket and keep the cause
 * for the caller.  Used for connect errors, timeouts, resets, EOF and
 * unparseable replies — everything that says the instance is unhealthy.
 * Nothing is held against the instance or raised here (mc_client_stats
 * counts the request's error): the caller hands the connection to
 * health.c (McInstanceCountFailure), which counts the failure against the
 * instance's health and raises it with McConnRaise unless the call is soft
 * (a multi-get with failover drops the instance and goes on).  "hard"
 * failures are raised even then.  Always returns false.
 */
static bool pg_attribute_printf(5, 0)
fail_v(McConn *conn, bool hard, int sqlerrcode, const char *action,
	   const char *fmt, va_list ap)
{
	int			save_errno = errno;

	conn_cs_end(conn, fail_class(sqlerrcode, fmt));
	McConnClose(conn);
	errno = save_errno;			/* for %m */
	vsnprintf(conn->fail_why, sizeof(conn->fail_why), fmt, ap);
	conn->fail_code = sqlerrcode;
	conn->fail_action = action;
	conn->fail_hard = hard;
	conn->fail_nocount = false;
	conn->fail_own_limit = false;
	conn->fail_hint = NULL;
	return false;
}

/* fail_v for the conn_*.c files. */
bool
conn_fail(McConn *conn, bool hard, int sqlerrcode, const char *action,
		  const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fail_v(conn, hard, sqlerrcode, action, fmt, ap);
	va_end(ap);
	return false;
}

/* fail_v for a caller that found the instance misbehaving (a bad reply). */
bool
McConnFailedV(McConn *conn, int sqlerrcode, const char *action,
			  const char *fmt, va_list ap)
{
	return fail_v(conn, false, sqlerrcode, action, fmt, ap);
}

/* The cause of the connection's last failure, and whether it must be raised. */
const char *
McConnFailure(McConn *conn, bool *hard)
{
	if (hard)
		*hard = conn->fail_hard;
	return conn->fail_why;
}

/* The errcode of the connection's last failure. */
int
McConnFailureCode(McConn *conn)
{
	return conn->fail_code;
}

/*
 * Does the last failure count against the instance's health?  Not a
 * rejected login: the instance is fine, and every role using it would
 * otherwise see it marked dead for one role's wrong password.
 */
bool
McConnFailureCounts(McConn *conn)
{
	return !conn->fail_nocount;
}

/*
 * Was the last failure the caller's own bound passing (own_deadline), not
 * the instance missing one of its timeouts?  Only the caller can say
 * whether that is the instance's failure (see engine.c's McEngineStatLines).
 */
bool
McConnFailureOwnLimit(McConn *conn)
{
	return conn->fail_own_limit;
}

/*
 * Raise the connection's last failure.  The primary message names the
 * foreign server; the detail names the instance and the cause.
 */
void
McConnRaise(McConn *conn)
{
	ereport(ERROR,
			(errcode(conn->fail_code),
			 errmsg("could not %s memcached server \"%s\"", conn->fail_action,
					conn->net->name),
			 conn->in_doubt ?
			 errdetail("Instance %s: %s.  The request may or may not have been executed.",
					   McConnName(conn), conn->fail_why) :
			 errdetail("Instance %s: %s.", McConnName(conn), conn->fail_why),
			 conn->fail_hint ? errhint("%s", conn->fail_hint) : 0));
	pg_unreachable();
}

/*
 * The first line of a reply, for a message: at most 40 bytes, up to its
 * line end, anything unprintable as '?'.  Empty when it holds any part of
 * the password of 6 bytes or more (a peer echoing the login, whole or cut),
 * which no message may show.
 */
static void
quote_line(McConn *conn, const char *base, size_t len, char *out, size_t outlen)
{
	const char *pw = conn->net->cfg->password;
	size_t		n = 0;

	if (pw != NULL)
	{
		size_t		plen = strlen(pw);
		size_t		win = Min(plen, 6);

		for (size_t i = 0; win > 0 && i + win <= plen; i++)
			if (memmem(base, Min(len, 44), pw + i, win) != NULL)
			{
				out[0] = '\0';
				return;
			}
	}

	while (n < len && n < 40 && n < outlen - 4 && base[n] != '\r' && base[n] != '\n')
	{
		unsigned char ch = (unsigned char) base[n];

		out[n++] = (ch < 0x20 || ch >= 0x7f) ? '?' : (char) ch;
	}
	if (n == 40 && len > 40 && base[n] != '\r' && base[n] != '\n')
	{
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/* Does the reply's first line begin with word, followed by nothing or a line end? */
static bool
line_is(const char *base, size_t len, const char *word)
{
	size_t		w = strlen(word);

	return len >= w && memcmp(base, word, w) == 0 &&
		(len == w || base[w] == '\r' || base[w] == '\n');
}

/*
 * A reply that says the peer is not a memcached this can use, whatever
 * request it answers (single-key, pipelined, stats, dump): recognised
 * here, once, for every reader.  Returns true with the failure kept in
 * the connection (closed), for the caller to hand to health.c as any
 * failure of the instance; false when the reply is none of these.
 *
 *  - "CLIENT_ERROR unauthenticated": memcached -Y, and no login was sent
 *    (the user mapping gives no username and password).  28000, raised
 *    even in a soft call, and not the instance's fault (not counted).
 *  - "ERROR" to a meta command (how): the server does not know the meta
 *    commands, a memcached before 1.6 or something else.  "ERROR Too many
 *    open connections" is memcached's refusal at its -c limit, left to
 *    the caller.
 *  - a reply the caller could not parse (how), when it is the first bytes
 *    the socket received: what answered is not memcached at all (an HTTP
 *    or redis server on the port).  Later, the stream is merely out of
 *    step, the caller's own message.
 */
bool
McConnForeignReply(McConn *conn, const char *base, size_t len, int how)
{
	const McServerConfig *cfg = conn->net->cfg;
	char		quoted[48];

	if (line_is(base, len, "CLIENT_ERROR unauthenticated"))
	{
		/* the catalog is off limits after commit (the on-commit writes) */
		char	   *role = IsTransactionState() ?
			GetUserNameFromId(GetUserId(), true) : NULL;

		if (cfg->username == NULL && role != NULL)
			conn_fail(conn, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION, "log in to",
					  "the server requires a login (memcached -Y), and no user mapping of role \"%s\" gives a username and password for it",
					  role);
		else if (cfg->username == NULL)
			conn_fail(conn, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION, "log in to",
					  "the server requires a login (memcached -Y), and no user mapping of the role gives a username and password for it");
		else
			conn_fail(conn, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION, "log in to",
					  "the server answered \"CLIENT_ERROR unauthenticated\" after the login of user \"%s\"",
					  cfg->username);
		conn->fail_nocount = true;
		conn->in_doubt = false;	/* refused unread */
		conn->fail_hint = cfg->username == NULL ?
			"Create a user mapping for the role and the server with the options username and password: CREATE USER MAPPING ... OPTIONS (username '...', password '...')." :
			"Check the username and password options of the user mapping.";
		return true;
	}
	if ((how & MC_FOREIGN_META) &&
		(line_is(base, len, "ERROR") || (len > 6 && memcmp(base, "ERROR ", 6) == 0)) &&
		!(len >= 31 && memcmp(base, "ERROR Too many open connections", 31) == 0))
	{
		quote_line(conn, base, len, quoted, sizeof(quoted));
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
				  "the server does not know the meta protocol's commands (it answered \"%s\"): memcached 1.6 or later is required",
				  quoted);
		conn->in_doubt = false;	/* an unknown command runs nothing */
		conn->fail_hint = "Check that the option \"servers\" names memcached's port, and that memcached is version 1.6 or later.";
		return true;
	}
	if ((how & MC_FOREIGN_UNPARSED) && !conn->replied &&
		base == conn->rbuf + conn->rstart)
	{
		quote_line(conn, base, len, quoted, sizeof(quoted));
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
				  "what answered is not memcached 1.6 or later (its first reply%s%s%s is not meta protocol)",
				  quoted[0] ? ", \"" : "", quoted, quoted[0] ? "\"," : "");
		conn->fail_hint = "Check that the option \"servers\" names memcached's port, and that memcached is version 1.6 or later.";
		return true;
	}
	return false;
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
	conn->wes = McCreateWaitEventSet(conn_memory(), 3);
	AddWaitEventToSet(conn->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	/* a single-user backend has no postmaster to watch */
	if (IsUnderPostmaster)
		AddWaitEventToSet(conn->wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	conn->sock_pos = AddWaitEventToSet(conn->wes, events, conn->sock, NULL, NULL);
	conn->cur_events = events;
	conn->latch = MyLatch;
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
			conn->stamp_fresh ? conn->last_used : mono_usec();

		deadline = start + (int64) timeout_ms * 1000;
		timeout = timeout_ms;
		/* a quiet time that began before this wait may be over already */
		if (since != 0 && (timeout = mono_ms_left(deadline)) <= 0)
			return conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
							 "timed out after %d ms", timeout_ms);
	}
	/* a bound on the whole request (the stats commands) */
	if (conn->deadline != 0 && (deadline == 0 || conn->deadline < deadline))
	{
		deadline = conn->deadline;
		timeout_ms = conn->deadline_ms;
		timeout = mono_ms_left(deadline);
	}
	if (conn->wes == NULL)
		make_wes(conn, events);
	if (conn->latch != MyLatch)
	{
		ModifyWaitEvent(conn->wes, LATCH_POS, WL_LATCH_SET, MyLatch);
		conn->latch = MyLatch;
	}
	if (conn->cur_events != events)
	{
		ModifyWaitEvent(conn->wes, conn->sock_pos, events, NULL);
		conn->cur_events = events;
	}
	for (;;)
	{
		WaitEvent	ev;
		int			rc;

		CHECK_FOR_INTERRUPTS();
		rc = WaitEventSetWait(conn->wes, timeout, &ev, 1, McWaitEvent(false));
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
				conn->fail_own_limit = (deadline == conn->own_deadline);
				return false;
			}
		}
	}
}

/* wait_since from the start of this wait (or of the request). */
bool
conn_wait(McConn *conn, uint32 events, int timeout_ms, const char *action)
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
 */
static bool
closed_while_idle(McConn *conn, int err)
{
	if (!conn->retryable || conn->rgot != 0)
		return false;
	if (err != 0 && err != EPIPE && err != ECONNRESET)
		return false;
	conn->cs_live = false;		/* not a call: the retry is */
	McConnClose(conn);
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
	if ((err == 0 || err == ECONNRESET || err == EPIPE) && !conn->replied &&
		conn->rgot == 0 && !conn->connecting)
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
		conn->fail_hint = conn->net->cfg->tls == MC_TLS_DISABLE ?
			"Connect to memcached directly, not through such a proxy.  If the server expects TLS (memcached -Z), set the server option \"tls\"." :
			"Connect to memcached directly, not through such a proxy.";
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
	if (conn->net->cfg->tls == MC_TLS_DISABLE && conn->requests <= 1 &&
		conn->rgot == 0 && (err == 0 || err == ECONNRESET || err == EPIPE))
		conn->fail_hint = "If the server expects TLS (memcached -Z), set the server option \"tls\".";
	return MC_IO_FAILED;
}

/*
 * A transfer failed (st): as conn_io_failed for an EOF or a socket error
 * (so a pooled socket closed while idle is retried alike, on either
 * transport), else a failure of the instance with OpenSSL's reason.
 */
McIoStatus
conn_xfer_failed(McConn *conn, McXferStatus st, const char *action)
{
	if (st == MC_XFER_EOF)
		return conn_io_failed(conn, 0, action);
	if (st == MC_XFER_SYSERR)
		return conn_io_failed(conn, errno, action);
	conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action, "%s", conn->xfer->why());
	return MC_IO_FAILED;
}

/*
 * Does the transport hold bytes of this connection that epoll cannot see
 * (TLS: read from the socket, not yet returned)?  Then the connection is
 * readable whatever the wait set says: a caller must read before it waits.
 */
bool
McConnHasPending(McConn *conn)
{
	return conn_has_pending(conn);
}

/* Send a whole request: written, counted, and its reply awaited. */
McIoStatus
conn_send(McConn *conn, const char *hdr, size_t hlen,
		  const char *data, size_t dlen)
{
	McIoStatus	st = conn->xfer->write_request(conn, hdr, hlen, data, dlen);

	if (st != MC_IO_OK)
		return st;
	conn->cs.sent += hlen + dlen;
	conn->requests++;
	conn->total_requests++;
	conn->expect_wait = true;
	return MC_IO_OK;
}

/*
 * Make room for at least need more bytes after rend: slide unread bytes to
 * the front, then grow.  Growth is to a power of two so a stream of large
 * values does not reallocate per reply.  A reply too large to buffer is a
 * hard failure: raised even in a soft call, since failing over would only
 * fetch it again.
 */
bool
conn_reserve(McConn *conn, size_t need)
{
	size_t		have = conn->rend - conn->rstart;

	need++;						/* and the NUL after the data */
	if (conn->rcap - conn->rend >= need)
		return true;
	if (conn->rstart > 0)
	{
		memmove(conn->rbuf, conn->rbuf + conn->rstart, have);
		conn->rstart = 0;
		conn->rend = have;
		conn->rbuf[have] = '\0';
	}
	if (have + need > (size_t) conn->net->cfg->max_reply_size + 1)
		return conn_fail(conn, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
						 "a reply of over %zu bytes exceeds max_reply_size (%d bytes)",
						 have + need - 1, conn->net->cfg->max_reply_size);
	if (conn->rcap - conn->rend < need)
	{
		size_t		cap = conn->rcap;

		while (cap - have < need)
			cap *= 2;
		if (cap > MaxAllocSize)
			return conn_fail(conn, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
							 "reply of %zu bytes is too large", have + need);
		conn->rbuf = repalloc(conn->rbuf, cap);
		conn->rcap = cap;
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
conn_fill(McConn *conn, size_t need)
{
	size_t		got = 0;

	/*
	 * Over TLS, io_timeout runs from the last decrypted byte, not the last
	 * byte on the socket: a server that trickles one record a byte at a
	 * time wakes every wait and delivers nothing.
	 */
	int64		quiet_since = 0;

	if (!conn_reserve(conn, need))
		return MC_IO_FAILED;
	while (got < need)
	{
		ssize_t		n;
		size_t		room;
		McXferStatus st;

		/* bytes OpenSSL already holds are invisible to epoll: read them first */
		if (conn->expect_wait && !conn_has_pending(conn))
		{
			if (conn->xfer->records && quiet_since == 0)
				quiet_since = conn->stamp_fresh ? conn->last_used : mono_usec();
			if (!wait_since(conn, conn->want_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE,
							conn->net->cfg->io_timeout, "read from", quiet_since))
				return MC_IO_FAILED;
		}
		conn->expect_wait = conn->want_write = false;
		room = conn->rcap - conn->rend - 1;
		n = conn->xfer->read(conn, conn->rbuf + conn->rend, room, &st);
		if (n == 0)
		{
			conn->expect_wait = true;
			conn->want_write = (st == MC_XFER_WANT_WRITE);
			continue;
		}
		if (n < 0)
			return conn_xfer_failed(conn, st, "read from");
		quiet_since = 0;
		conn->rend += n;
		conn->rbuf[conn->rend] = '\0';
		conn->rgot += n;
		conn->stamp_fresh = false;
		got += n;
		conn->expect_wait = ((size_t) n < room);
	}
	return MC_IO_OK;
}
