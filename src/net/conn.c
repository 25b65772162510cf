/*
 * conn.c — requests on a connection: one at a time, or pipelined.
 *
 * Owns: a request's life on its connection (McConn's req: prepared, with
 * a long-idle socket probed and a socket an interrupted request left out
 * of step closed; busy until it ends; its tally for mc_client_stats),
 * retrying a pooled socket the server closed while idle, tying each reply
 * to its request (one request, one reply, at most once), the replies that
 * say the peer is not a memcached this can use (a login it requires, no
 * meta protocol, not memcached at all: McConnForeignReply, for every
 * reader), and the multi-get's non-blocking slices with the write buffer
 * a batch refills (McConn's out).  The bytes and waits are conn_io.c's,
 * the connect conn_connect.c's, the socket and closing it conn_fd.c's, the
 * failure record conn_fail.c's, the server's set of connections net.c's.
 * Must not: wait outside conn_io.c's waits (pipeline.c waits for the
 * slices), choose instances, count failures or decide that an instance is
 * dead (health.c does all three, and calls down into this file, never the
 * other way), or know what commands mean.
 *
 * Lifetime: buffers and wait sets live in "mcfdw connections"
 * (conn_io_memory), a child of TopMemoryContext, for the life of the
 * backend.
 */
#include "postgres.h"

#include <sys/socket.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "net.h"

#include "conn_int.h"
#include "conn_io.h"

/* What the mc_servers and mc_connections views show of a connection. */
void
McConnGetStats(McConn *conn, McConnStats *out)
{
	out->open = (conn->fd.sock != PGINVALID_SOCKET);
	out->connects = conn->count.connects;
	out->requests = conn->count.total;
	out->in_use = conn->req.busy || conn->connect.active;
	out->tls = (conn->fd.xfer != NULL && conn->fd.xfer->tls);
	out->socket_requests = conn->count.requests;
	out->idle_usec = Max(mono_usec() - conn->req.last_used, 0);
}

/* The connection's instance: its index in the server's configuration. */
int
McConnIndex(McConn *conn)
{
	return conn->index;
}

/*
 * An idle socket may have been closed by the server (restart, idle timeout)
 * since its last use.  Probing costs a system call, so it is done only for
 * sockets idle for over a second; a hot loop never pays for it.
 */
static bool
conn_still_open(McConn *conn)
{
	return conn->fd.xfer->still_open(conn);
}

/*
 * A request begins: its tally starts (client_stats.h), to be recorded when
 * it ends unless mcfdw.client_stats is off; its latency is measured from
 * conn->req.last_used.
 */
static inline void
conn_tally_begin(McConn *conn)
{
	conn->req.live = mc_client_stats_on;
	if (likely(conn->req.live))
		memset(&conn->req.tally.sent, 0, sizeof(McCsReq) - offsetof(McCsReq, sent));
}

/* When conn_prepare probes a pooled socket. */
typedef enum McProbeWhen
{
	MC_PROBE_IF_IDLE,			/* when it sat idle for more than a second */
	MC_PROBE_ALWAYS,
	MC_PROBE_DONE				/* never: McNetProbeIdle probed it just now */
} McProbeWhen;

/* What a reply of each type says of its key: there (a value, HD) or not (EN, NF). */
static const McCsFound cs_found_of[MC_REPLY_BAD + 1] = {
	[MC_REPLY_VA] = {1, 0},
	[MC_REPLY_HD] = {1, 0},
	[MC_REPLY_EN] = {0, 1},
	[MC_REPLY_NF] = {0, 1},
};

/*
 * Get a connection ready for a request without waiting: close the socket if
 * an interrupted request left it out of step, probe a long-idle socket, and
 * start a connect if there is no socket.  The connection is marked busy
 * until McConnEnd.  Returns false when the connect could not even start.
 * Whether the instance may be tried at all is health.c's to say, before.
 */
static bool
conn_prepare(McConn *conn, McProbeWhen probe)
{
	int64		now;

	if (conn->req.busy)
		conn_fd_close(conn);
	/*
	 * The fine clock, not mono_usec's coarse one: the request's latency is
	 * measured from here.  The two differ by less than a clock tick.
	 */
	now = McCsNow();
	conn_tally_begin(conn);
	conn_fd_use(conn, now);
	if (conn->fd.sock != PGINVALID_SOCKET && probe != MC_PROBE_DONE &&
		(probe == MC_PROBE_ALWAYS || now - conn->req.last_used > USECS_PER_SEC) &&
		!conn_still_open(conn))
		conn_fd_close(conn);
	conn->req.in_doubt = false;
	if (conn->fd.sock == PGINVALID_SOCKET && !conn_connect_start(conn))
		return false;
	conn_out_clear(conn);		/* a request starts with nothing queued */
	conn->req.last_used = now;
	conn_io_begin(conn);
	conn_fd_touch(conn);
	conn->req.busy = true;
	conn->req.retryable = (conn->count.requests > 0);
	return true;
}

/*
 * Close a pooled socket the server closed, or one holding bytes nobody
 * asked for, before a pipeline of writes goes out on it.  A quiet pipeline
 * is answered only by its exceptions and "mn": a stray "MN" or "NF O0"
 * waiting on the socket would pass for the pipeline's own replies, however
 * briefly the socket sat idle.  One system call; McNetProbeIdle probes the
 * sockets of a call together.
 */
void
McConnProbeIdle(McConn *conn)
{
	if (conn->fd.sock != PGINVALID_SOCKET && !conn->req.busy && !conn->connect.active &&
		!conn_still_open(conn))
		conn_fd_close(conn);
}

/*
 * The pipeline about to be written must not run twice (deletes whose count
 * a second send would falsify, as mc_delete's): a lost reply is not retried
 * on a fresh socket, and its error says the requests may or may not have
 * run.  Call it once the connect finished, on a socket just probed.
 */
void
McConnAtMostOnce(McConn *conn)
{
	conn->req.retryable = false;
	conn->req.in_doubt = true;
}

/*
 * conn_prepare, probing the socket only when it sat idle for long, or not
 * at all when the caller's McNetProbeIdle just did (probed).  A connect it
 * starts is bounded by connect_timeout, or by cap_ms when shorter (a run's
 * remaining budget; 0 = none).
 */
bool
McConnPrepare(McConn *conn, bool probed, int cap_ms)
{
	bool		ok;

	/* the single-key path leaves it 0 (none) */
	conn_connect_cap(conn, cap_ms);
	ok = conn_prepare(conn, probed ? MC_PROBE_DONE : MC_PROBE_IF_IDLE);
	conn_connect_cap(conn, 0);
	return ok;
}

/*
 * Close the socket (the buffers stay for the next connection): a request
 * an error left unread, or one the caller abandons.
 */
void
McConnClose(McConn *conn)
{
	conn_fd_close(conn);
}

/*
 * Return the next complete reply, reading as much as needed.  The reply is
 * described in place: offsets in *reply are relative to the returned
 * pointer, which stays valid until the next read on this connection.
 * Returns NULL with *st set when the instance failed or the socket turned
 * out to be closed while idle (retry).
 */
static const char *
conn_read_reply(McConn *conn, McReply *reply, McIoStatus *st)
{
	/* nothing read yet (the usual case right after a request): read first */
	if (conn->io.rend == conn->io.rstart &&
		(*st = conn_io_fill(conn, 1)) != MC_IO_OK)
		return NULL;
	for (;;)
	{
		const char *base = conn->io.rbuf + conn->io.rstart;
		McReplyType t = mc_parse_reply_z(base, conn->io.rend - conn->io.rstart, reply);

		if (t == MC_REPLY_BAD)
		{
			if (!McConnForeignReply(conn, base, conn->io.rend - conn->io.rstart,
									MC_FOREIGN_META | MC_FOREIGN_UNPARSED))
				conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
						  "the reply is not valid meta protocol");
			*st = MC_IO_FAILED;
			return NULL;
		}
		if (t != MC_REPLY_NEED_MORE)
			return base;
		if ((*st = conn_io_fill(conn, reply->need)) != MC_IO_OK)
			return NULL;
	}
}

/*
 * Is the opaque token of a reply (len bytes at p) the decimal want?  Exact
 * digits only: no sign, no leading zero, so no other token can match.
 */
static inline bool
opaque_is(const char *p, size_t len, uint32 want)
{
	uint64		v = 0;

	if (len == 0 || len > 10 || (p[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++)
	{
		unsigned	d = (unsigned) (unsigned char) p[i] - '0';

		if (d > 9)
			return false;
		v = v * 10 + d;
	}
	return v == want;
}

/*
 * Does the reply belong to the request?  memcached at its connection limit
 * (-c) greets a new socket with "ERROR Too many open connections" and closes
 * it: that is a refused connection, a failure of the instance like any
 * other, not an error about the request.  Every meta reply but an error line
 * echoes the request's opaque token; one that does not (a stray reply a
 * proxy or a server sent unasked, or one left from an abandoned request)
 * means the stream is out of step: the socket is closed, and the request
 * retried on a fresh one if it may run twice (retry set), else failed.
 * Error lines carry no token; they close the socket where they are raised.
 */
static McIoStatus
conn_check_reply(McConn *conn, const McRequest *req, const char *base,
				 const McReply *r, bool retry)
{
	switch (r->type)
	{
		case MC_REPLY_ERROR:
			if (r->msg_len > 0 &&
				memmem(base + r->msg_off, r->msg_len, "Too many open connections", 25))
			{
				conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						  "connect to", "the server refused the connection: too many open connections");
				conn->req.in_doubt = false; /* refused before reading the request */
				return MC_IO_FAILED;
			}
			/* FALLTHROUGH */
		case MC_REPLY_CLIENT_ERROR:
			/* a server that needs a login, or knows no meta command */
			if (McConnForeignReply(conn, base, r->header_len, MC_FOREIGN_META))
				return MC_IO_FAILED;
			return MC_IO_OK;
		case MC_REPLY_SERVER_ERROR:
			return MC_IO_OK;
		case MC_REPLY_EN:

			/*
			 * memcached echoes the token on a miss only from 1.6.18 on.
			 * legacy_misses takes a token-less EN as the miss it says: a
			 * stray one can then turn a hit into a miss (never into a
			 * wrong value: the reply it displaced carries a token the next
			 * request refuses).
			 */
			if (!(r->present & MC_F_OPAQUE))
			{
				if (conn->net->cfg->legacy_misses)
					return MC_IO_OK;
				conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
						  "a miss (EN) came without the request's opaque token: either the connection is out of step, or the server is older than memcached 1.6.18 (set the server option legacy_misses for such servers)");
				return retry ? MC_IO_RETRY : MC_IO_FAILED;
			}
			/* FALLTHROUGH */
		default:
			if (req->opaque == 0 ||
				((r->present & MC_F_OPAQUE) &&
				 opaque_is(base + r->opaque_off, r->opaque_len, req->opaque)))
				return MC_IO_OK;
			conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
					  "the reply does not answer the request (it does not echo the request's opaque token), so the connection is out of step");
			return retry ? MC_IO_RETRY : MC_IO_FAILED;
	}
}

/*
 * One request, one reply, tied together by the request's opaque token.
 *
 * At most once: a request that may run twice (req->idempotent) is retried
 * once, on a fresh socket, when a pooled one turns out to have been closed
 * by the server or holds a reply that is not its own.  Any other request is
 * written only on a socket just probed (one recv, MSG_PEEK|MSG_DONTWAIT):
 * one the server closed, or one holding unasked bytes, is replaced before
 * anything is written, so the retry is certain not to repeat it; once
 * written, a lost reply is a failure that says the request may or may not
 * have run (McConnInDoubt), never a second send.
 *
 * On success the connection is busy and the reply is described by *reply
 * (offsets relative to the returned pointer); finish with McConnConsume and
 * health.c's McInstanceEnd.  A failing instance gives NULL, the cause kept
 * in conn.
 */
const char *
McConnRoundtrip(McConn *conn, const McRequest *req, McReply *reply)
{
	bool		retried = false;

	for (;;)
	{
		const char *base = NULL;
		McIoStatus	st;

		if (!conn_prepare(conn, req->idempotent ? MC_PROBE_IF_IDLE : MC_PROBE_ALWAYS) ||
			(conn->connect.active && !McConnConnectFinish(conn)))
			return NULL;
		conn->req.tally.keys = 1;		/* sent: counted whatever the reply */
		conn->req.retryable = conn->req.retryable && req->idempotent && !retried;
		conn->req.in_doubt = !req->idempotent;
		st = conn_io_send(conn, req->hdr, req->hlen, req->data, req->dlen);
		if (st == MC_IO_OK)
			base = conn_read_reply(conn, reply, &st);
		if (base != NULL)
		{
			st = conn_check_reply(conn, req, base, reply,
								  req->idempotent && !retried);
			if (st == MC_IO_OK)
			{
				/* the key was there (a value, HD) or not (EN, NF, a lease's placeholder) */
				if (conn->req.live)
				{
					conn->req.tally.found = cs_found_of[reply->type];
					if (unlikely(reply->value_len == 0) && McReplyIsPlaceholder(reply))
						conn->req.tally.found = cs_found_of[MC_REPLY_EN];
				}
				return base;
			}
		}
		if (st == MC_IO_FAILED)
			return NULL;
		/* the retry uses a new socket and is the last */
		retried = true;
	}
}

/*
 * Did the connection's last failure come after a request that must not run
 * twice was (maybe) written?  Then it must be neither retried nor failed
 * over, and the error says so.
 */
bool
McConnInDoubt(McConn *conn)
{
	return conn->req.in_doubt;
}

/* Mark n reply bytes as used. */
void
McConnConsume(McConn *conn, size_t n)
{
	conn->req.tally.recv += n;
	conn_io_consume(conn, n);
}

/*
 * The request is complete.  Bytes left unread mean the stream is out of
 * step, so the socket is closed rather than trusted; a buffer that grew for a
 * big value is given back so an idle backend stays small.
 */
void
McConnEnd(McConn *conn)
{
	bool		live = conn->req.live;

	conn->req.busy = false;
	conn->req.live = false;
	conn_tally_end_ok(conn, live);
	if (conn->io.rstart != conn->io.rend)
		conn_fd_close(conn);
	else if (conn->fd.xfer != NULL && conn->fd.xfer->idle != NULL)
		conn->fd.xfer->idle(conn);
	conn_io_end(conn);
}

/*
 * The server answered with an error of its own, or with a reply that does
 * not fit the request.  The instance is not unhealthy, but the stream can no
 * longer be trusted, so the socket is closed before the error is raised.
 */
void
McConnReplyError(McConn *conn, const char *base, const McReply *reply)
{
	const char *name = McConnName(conn);
	size_t		len = reply->header_len >= 2 ? reply->header_len - 2 : 0;
	char	   *line;

	/* the line is the server's, not ours: keep it short and printable */
	len = Min(len, 200);
	line = pnstrdup(base, len);
	for (char *p = line; *p; p++)
		if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
			*p = '?';
	conn_tally_end(conn, reply->type == MC_REPLY_SERVER_ERROR ||
				reply->type == MC_REPLY_CLIENT_ERROR ||
				reply->type == MC_REPLY_ERROR ? MC_CSE_SERVER : MC_CSE_PROTOCOL);
	conn_fd_close(conn);
	if (reply->type == MC_REPLY_SERVER_ERROR &&
		strstr(line, "object too large") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("value is too large for memcached server \"%s\"", conn->net->name),
				 errdetail_internal("Instance %s replied: %s", name, line),
				 errhint("memcached's item size limit is set with its -I option (1 MB by default).")));
	if (reply->type == MC_REPLY_SERVER_ERROR || reply->type == MC_REPLY_CLIENT_ERROR ||
		reply->type == MC_REPLY_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("memcached server \"%s\" reported an error", conn->net->name),
				 errdetail_internal("Instance %s replied: %s", name, line)));
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("unexpected reply from memcached server \"%s\"", conn->net->name),
			 errdetail_internal("Instance %s replied: %s", name, line)));
}

/* Name of a connection's instance, for messages. */
const char *
McConnName(McConn *conn)
{
	return McInstanceName(conn->net, conn->index);
}

/*
 * The first line of a reply, for a message (the server's bytes, quoted by
 * every file of the connection the same way): at most 40 bytes, up to its
 * line end, anything unprintable as '?'.  Empty when it holds any part of
 * the password of 6 bytes or more (a peer echoing the login, whole or cut),
 * which no message may show.
 */
void
conn_quote_line(McConn *conn, const char *base, size_t len, char *out, size_t outlen)
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
		conn_fail_nocount(conn);
		conn->req.in_doubt = false;	/* refused unread */
		conn_fail_hint(conn, cfg->username == NULL ?
					   "Create a user mapping for the role and the server with the options username and password: CREATE USER MAPPING ... OPTIONS (username '...', password '...')." :
					   "Check the username and password options of the user mapping.");
		return true;
	}
	if ((how & MC_FOREIGN_META) &&
		(line_is(base, len, "ERROR") || (len > 6 && memcmp(base, "ERROR ", 6) == 0)) &&
		!(len >= 31 && memcmp(base, "ERROR Too many open connections", 31) == 0))
	{
		conn_quote_line(conn, base, len, quoted, sizeof(quoted));
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
				  "the server does not know the meta protocol's commands (it answered \"%s\"): memcached 1.6 or later is required",
				  quoted);
		conn->req.in_doubt = false;	/* an unknown command runs nothing */
		conn_fail_hint(conn, "Check that the option \"servers\" names memcached's port, and that memcached is version 1.6 or later.");
		return true;
	}
	if ((how & MC_FOREIGN_UNPARSED) && !conn->io.replied &&
		base == conn->io.rbuf + conn->io.rstart)
	{
		conn_quote_line(conn, base, len, quoted, sizeof(quoted));
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
				  "what answered is not memcached 1.6 or later (its first reply%s%s%s is not meta protocol)",
				  quoted[0] ? ", \"" : "", quoted, quoted[0] ? "\"," : "");
		conn_fail_hint(conn, "Check that the option \"servers\" names memcached's port, and that memcached is version 1.6 or later.");
		return true;
	}
	return false;
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

/* Free the write buffer for good (the connection is discarded). */
void
conn_out_free(McConn *conn)
{
	conn_buf_free(&conn->out.buf, &conn->out.cap);
}

/*
 * Send what is pending in the write buffer without waiting.  Returns the bytes sent (0
 * when the socket buffer is full), -1 when the instance failed (the cause
 * kept in conn), -2 when a pooled socket turned out to be closed while idle
 * (closed; the caller may retry).
 */
ssize_t
McConnSendSome(McConn *conn)
{
	ssize_t		total = 0;

	while (conn->out.off < conn->out.len)
	{
		McXferStatus st;
		ssize_t		n = conn->fd.xfer->write(conn, conn->out.buf + conn->out.off,
										  conn->out.len - conn->out.off, &st);

		if (n == 0)
			break;
		if (n < 0)
			return conn_io_xfer_failed(conn, st, "send to") == MC_IO_RETRY ? -2 : -1;
		conn->out.off += n;
		total += n;
	}
	if (conn->out.off == conn->out.len)
		conn->out.off = conn->out.len = 0;
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

	if (!conn_io_reserve(conn, Max(need, RBUF_BATCH_READ)))
		return -1;
	*drained = false;
	for (;;)
	{
		McXferStatus st;
		size_t		room = conn->io.rcap - conn->io.rend - 1;
		ssize_t		n;

		if (room == 0)
			break;
		n = conn->fd.xfer->read(conn, conn->io.rbuf + conn->io.rend, room, &st);
		if (n == 0)
		{
			*drained = true;
			break;
		}
		if (n < 0)
			return conn_io_xfer_failed(conn, st, "read from") == MC_IO_RETRY ? -2 : -1;
		conn_io_received(conn, n);
		total += n;

		/*
		 * A short read drained the socket, unless bytes come in records
		 * (TLS): then only a want says nothing whole is left.
		 */
		if (!conn->fd.xfer->records && (size_t) n < room)
		{
			*drained = true;
			break;
		}
	}
	conn_io_expect_wait(conn, *drained);
	return total;
}

/*
 * The unread reply bytes, NUL-terminated (see conn_io_reset_rbuf), for the
 * caller to parse in place and then McConnConsume.  Until then the bytes
 * are the caller's to overwrite: the multi-get writes a value's varlena
 * header over the reply header it has parsed, so the value is copied once,
 * straight into its tuple.
 */
char *
McConnUnread(McConn *conn, size_t *len)
{
	*len = conn->io.rend - conn->io.rstart;
	return conn->io.rbuf + conn->io.rstart;
}

/* Request bytes queued and not yet sent. */
size_t
McConnUnsent(McConn *conn)
{
	return conn->out.len - conn->out.off;
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
	if (!conn->req.busy && (conn->fd.xfer == NULL || !conn->fd.xfer->still_open(conn)))
		conn_fd_close(conn);
}

/*
 * Make room for n more request bytes in the write buffer (sent bytes are slid out
 * first) and return where they go; McConnWritten queues what was written
 * there.  The multi-get refills the buffer in slices, so it stays small however
 * many keys a batch has.
 */
char *
McConnWriteSpace(McConn *conn, size_t n)
{
	if (conn->out.buf == NULL)
	{
		conn->out.cap = Max(WBUF_INITIAL, n);
		conn->out.buf = MemoryContextAlloc(conn_io_memory(), conn->out.cap);
	}
	if (conn->out.cap - conn->out.len < n && conn->out.off > 0)
	{
		memmove(conn->out.buf, conn->out.buf + conn->out.off, conn->out.len - conn->out.off);
		conn->out.len -= conn->out.off;
		conn->out.off = 0;
	}
	if (conn->out.cap - conn->out.len < n)
	{
		while (conn->out.cap - conn->out.len < n)
			conn->out.cap *= 2;
		conn->out.buf = repalloc(conn->out.buf, conn->out.cap);
	}
	return conn->out.buf + conn->out.len;
}

/* Queue n bytes written where McConnWriteSpace said (at most what it made room for). */
void
McConnWritten(McConn *conn, size_t n)
{
	Assert(conn->out.len + n <= conn->out.cap);
	conn->out.len += n;
	conn->req.tally.sent += n;
}

/*
 * Take back the queued bytes that have not started to go out, past the
 * first keep unsent ones (a pipeline that stops sends nothing new).  False
 * when none is taken back: over TLS a write the socket did not take must
 * be offered again whole.
 */
bool
McConnUnqueue(McConn *conn, size_t keep)
{
	size_t		unsent = conn->out.len - conn->out.off;

	if (keep >= unsent)
		return true;
	if (conn->fd.xfer != NULL && conn->fd.xfer->records)
		return false;
	conn->out.len = conn->out.off + keep;
	conn->req.tally.sent -= unsent - keep;
	if (conn->out.off == conn->out.len)
		conn_out_clear(conn);
	return true;
}

/*
 * A pipeline of nrequests requests is queued: the socket has carried a
 * request (a later failure on it is no longer "closed while idle"), and the
 * view counts them.
 */
void
McConnPipelined(McConn *conn, int nrequests)
{
	conn_io_count_pipeline(conn, nrequests);
	conn->req.tally.keys += nrequests;
}

/*
 * A quiet multi-get's reply to a key: a hit unless it is a lease's
 * placeholder (the keys without a hit were misses).
 */
void
McConnHit(McConn *conn, const McReply *r)
{
	conn->req.tally.found.hits += !McReplyIsPlaceholder(r);
}

/*
 * A batch write's verdict on its keys once its pipeline ended: hits (a
 * delete, touch or mark that found its key) and misses (NF, EN).
 */
void
McConnFound(McConn *conn, uint32 hits, uint32 misses)
{
	conn->req.tally.found.hits += hits;
	conn->req.tally.found.misses += misses;
}
