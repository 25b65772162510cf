/*
 * conn.c — one socket per memcached instance, and the requests on it.
 *
 * Owns: a connection's life (prepared for a request, probed when it sat
 * idle, closed when an interrupted request left it out of step or when
 * asked while no request uses it, discarded with its server), retrying a
 * pooled socket the server closed while idle, and tying each reply to its
 * request (one request, one reply, at most once).  The bytes are conn_io.c's (sends, reads, waits, failures), the
 * connect conn_connect.c's, the backend's sockets as a whole (closing one,
 * the file-descriptor budget, idle_timeout) conn_fd.c's, the stats
 * commands conn_stats.c's, and the multi-get's non-blocking slices
 * conn_multi.c's.  A failing instance is reported, not judged: the cause
 * is kept in the connection and the call returns failure.  Must not:
 * choose instances, count failures or decide that an instance is dead
 * (health.c does all three, and calls down into this file, never the other
 * way), or know what commands mean.
 *
 * Lifetime: buffers and wait sets live in "mcfdw connections", a child of
 * TopMemoryContext, for the life of the backend.
 */
#include "postgres.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "net.h"

#include "conn_int.h"

#define RBUF_KEEP		(256 * 1024)	/* shrink back after replies bigger than this */

/* The connection to instance index of a server. */
McConn *
McConnOf(McNet *net, int index)
{
	return &net->conns[index];
}

/* What the mc_servers and mc_connections views show of a connection. */
void
McConnGetStats(McConn *conn, McConnStats *out)
{
	out->open = (conn->sock != PGINVALID_SOCKET);
	out->connects = conn->connects;
	out->requests = conn->total_requests;
	out->in_use = conn->busy || conn->connecting;
	out->tls = (conn->xfer != NULL && conn->xfer->tls);
	out->socket_requests = conn->requests;
	out->idle_usec = Max(mono_usec() - conn->last_used, 0);
}

/* Release a connection's buffers and socket for good (config change). */
static void
conn_discard(McConn *conn)
{
	McConnClose(conn);
	conn_tls_forget(conn);
	if (conn->rbuf)
		pfree(conn->rbuf);
	if (conn->wbuf)
		pfree(conn->wbuf);
	conn->rbuf = conn->wbuf = NULL;
	conn->rcap = conn->wcap = 0;
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
McConnArrayNew(MemoryContext cxt, int n)
{
	return MemoryContextAllocZero(cxt, sizeof(McConn) * n);
}

/*
 * Install a rebuilt server's connections conns (McConnArrayNew, in the new
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

		nc->sock = PGINVALID_SOCKET;
		if (from[i] >= 0)
		{
			McConn	   *oc = &net->conns[from[i]];

			if (oc->busy)
				McConnClose(oc);
			*nc = *oc;
			if (oc->sock != PGINVALID_SOCKET)
			{
				/* the list links the old struct: put the new one in its place */
				conn_fd_moved(oc, nc);
			}
			oc->index = -1;		/* moved */
		}
		nc->index = i;
		nc->net = net;
	}
	for (int j = 0; net->conns && j < net->nconns; j++)
		if (net->conns[j].index >= 0)
			conn_discard(&net->conns[j]);
	net->conns = conns;
	net->nconns = n;
	net->cxt = cxt;
	net->tls_ctx = NULL;
	net->sock_gen++;			/* the multi-get wait set points at old conns */
}

/*
 * Close every connection of net an error or a cancel left in the middle of
 * a request (server_cache.c's (sub)transaction abort callbacks).
 */
void
McConnCloseBusy(McNet *net)
{
	for (int i = 0; net->conns && i < net->nconns; i++)
		if (net->conns[i].busy)
			McConnClose(&net->conns[i]);
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
McConnCloseIdle(McNet *net, int *in_use)
{
	int			closed = 0;

	*in_use = 0;
	for (int i = 0; net->conns && i < net->nconns; i++)
	{
		McConn	   *conn = &net->conns[i];

		if (conn->sock == PGINVALID_SOCKET)
			continue;
		if (conn->busy || conn->connecting)
		{
			(*in_use)++;
			continue;
		}
		McConnClose(conn);
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
		conn_discard(&net->conns[i]);
	if (net->mwes)
		FreeWaitEventSet(net->mwes);
	net->mwes = NULL;
	net->conns = NULL;
	net->nconns = 0;
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
	return conn->xfer->still_open(conn);
}

/*
 * A request begins: its tally starts (client_stats.h), to be recorded when
 * it ends unless mcfdw.client_stats is off; its latency is measured from
 * conn->last_used.
 */
static inline void
conn_cs_begin(McConn *conn)
{
	conn->cs_live = mc_client_stats_on;
	if (likely(conn->cs_live))
		memset(&conn->cs.sent, 0, sizeof(McCsReq) - offsetof(McCsReq, sent));
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

	if (conn->busy)
		McConnClose(conn);
	/*
	 * The fine clock, not mono_usec's coarse one: the request's latency is
	 * measured from here.  The two differ by less than a clock tick.
	 */
	now = McCsNow();
	conn_cs_begin(conn);
	conn_fd_use(conn, now);
	if (conn->sock != PGINVALID_SOCKET && probe != MC_PROBE_DONE &&
		(probe == MC_PROBE_ALWAYS || now - conn->last_used > USECS_PER_SEC) &&
		!conn_still_open(conn))
		McConnClose(conn);
	conn->in_doubt = false;
	if (conn->sock == PGINVALID_SOCKET && !conn_connect_start(conn))
		return false;
	conn->wlen = conn->woff = 0;	/* a request starts with nothing queued */
	conn->last_used = now;
	conn->stamp_fresh = true;
	conn->deadline = 0;
	conn->own_deadline = 0;
	conn_fd_touch(conn);
	conn->busy = true;
	conn->expect_wait = false;
	conn->retryable = (conn->requests > 0);
	conn->rgot = 0;
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
	if (conn->sock != PGINVALID_SOCKET && !conn->busy && !conn->connecting &&
		!conn_still_open(conn))
		McConnClose(conn);
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

		if (!probe[s] || conn->sock == PGINVALID_SOCKET || conn->busy ||
			conn->connecting)
			continue;
		if (k == MC_MAX_ENDPOINTS || conn_has_pending(conn))
		{
			McConnProbeIdle(conn);
			continue;
		}
		fds[k].fd = conn->sock;
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
 * The pipeline about to be written must not run twice (deletes whose count
 * a second send would falsify, as mc_delete's): a lost reply is not retried
 * on a fresh socket, and its error says the requests may or may not have
 * run.  Call it once the connect finished, on a socket just probed.
 */
void
McConnAtMostOnce(McConn *conn)
{
	conn->retryable = false;
	conn->in_doubt = true;
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

	/* read by conn_connect_start; the single-key path leaves it 0 */
	conn->connect_cap = cap_ms;
	ok = conn_prepare(conn, probed ? MC_PROBE_DONE : MC_PROBE_IF_IDLE);
	conn->connect_cap = 0;
	return ok;
}

/* Complete a connect McConnPrepare started; false if it failed. */
bool
McConnFinishConnect(McConn *conn)
{
	return conn_connect_finish(conn);
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
	if (conn->rend == conn->rstart &&
		(*st = conn_fill(conn, 1)) != MC_IO_OK)
		return NULL;
	for (;;)
	{
		const char *base = conn->rbuf + conn->rstart;
		McReplyType t = mc_parse_reply_z(base, conn->rend - conn->rstart, reply);

		if (t == MC_REPLY_BAD)
		{
			if (!McConnForeignReply(conn, base, conn->rend - conn->rstart,
									MC_FOREIGN_META | MC_FOREIGN_UNPARSED))
				conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
						  "the reply is not valid meta protocol");
			*st = MC_IO_FAILED;
			return NULL;
		}
		if (t != MC_REPLY_NEED_MORE)
			return base;
		if ((*st = conn_fill(conn, reply->need)) != MC_IO_OK)
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
				conn->in_doubt = false; /* refused before reading the request */
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
			(conn->connecting && !conn_connect_finish(conn)))
			return NULL;
		conn->cs.keys = 1;		/* sent: counted whatever the reply */
		conn->retryable = conn->retryable && req->idempotent && !retried;
		conn->in_doubt = !req->idempotent;
		st = conn_send(conn, req->hdr, req->hlen, req->data, req->dlen);
		if (st == MC_IO_OK)
			base = conn_read_reply(conn, reply, &st);
		if (base != NULL)
		{
			st = conn_check_reply(conn, req, base, reply,
								  req->idempotent && !retried);
			if (st == MC_IO_OK)
			{
				/* the key was there (a value, HD) or not (EN, NF, a lease's placeholder) */
				if (conn->cs_live)
				{
					conn->cs.found = cs_found_of[reply->type];
					if (unlikely(reply->value_len == 0) && McReplyIsPlaceholder(reply))
						conn->cs.found = cs_found_of[MC_REPLY_EN];
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
	return conn->in_doubt;
}

/* Mark n reply bytes as used. */
void
McConnConsume(McConn *conn, size_t n)
{
	Assert(n <= conn->rend - conn->rstart);
	conn->cs.recv += n;
	conn->replied |= (n > 0);
	conn->rstart += n;
	if (conn->rstart == conn->rend)
		conn_reset_rbuf(conn);
}

/*
 * The request is complete.  Bytes left unread mean the stream is out of
 * step, so the socket is closed rather than trusted; a buffer that grew for a
 * big value is given back so an idle backend stays small.
 */
void
McConnEnd(McConn *conn)
{
	bool		live = conn->cs_live;

	conn->busy = false;
	conn->cs_live = false;
	conn_cs_end_ok(conn, live);
	if (conn->rstart != conn->rend)
		McConnClose(conn);
	else if (conn->xfer != NULL && conn->xfer->idle != NULL)
		conn->xfer->idle(conn);
	if (conn->rcap > RBUF_KEEP)
	{
		pfree(conn->rbuf);
		conn->rbuf = MemoryContextAlloc(conn_memory(), RBUF_INITIAL);
		conn->rcap = RBUF_INITIAL;
	}
	conn_reset_rbuf(conn);
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
	conn_cs_end(conn, reply->type == MC_REPLY_SERVER_ERROR ||
				reply->type == MC_REPLY_CLIENT_ERROR ||
				reply->type == MC_REPLY_ERROR ? MC_CSE_SERVER : MC_CSE_PROTOCOL);
	McConnClose(conn);
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
