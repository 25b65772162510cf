/*
 * conn_int.h — what the net/ files share about a connection's insides:
 * the McConn struct as a record of parts, each with its owner file, and
 * the owners' inline helpers through which the other files change a part;
 * buffer sizes, the wait-set slot of the latch, the outcome of a socket
 * step, the transport under the socket (plaintext or TLS: McTransport),
 * and the functions the files call of each other.  Not for any other
 * folder: the rest of the extension sees McConn as an opaque pointer and
 * goes through the functions declared in net.h.
 */
#ifndef MCFDW_CONN_INT_H
#define MCFDW_CONN_INT_H

#include <time.h>

#include "datatype/timestamp.h"
#include "lib/ilist.h"

#include "client_stats.h"
#include "net.h"

#define RBUF_INITIAL	16384
#define WBUF_INITIAL	16384
#define RBUF_BATCH_READ	65536	/* a multi-get reads up to this much per recv */
#define RBUF_KEEP		(256 * 1024)	/* shrink back after replies bigger than this */
#define LATCH_POS		0		/* the latch's slot in every wait set */

typedef struct McTransport McTransport;

/*
 * A connection is a record of parts, each created, reset and written by
 * one file alone (its owner, named at the member below); every other file
 * reads a part, or asks its owner: a function of the owner's file, or one
 * of the inline helpers further down, named with the owner's prefix (the
 * file's name: conn_fd_ for conn_fd.c, conn_ for conn.c).
 * test/unit/structure.py checks that no other file writes a part.
 */

/* The socket (conn_fd.c). */
typedef struct McConnFd
{
	pgsocket	sock;
	const McTransport *xfer;	/* plaintext or TLS, set when the socket
								 * opens; NULL while it is closed */
	dlist_node	node;			/* in conn_fd.c's list of open sockets, last used first */
} McConnFd;

/* The connection's own wait set (conn_io.c, which waits on it). */
typedef struct McConnWait
{
	WaitEventSet *wes;			/* latch + postmaster death + this socket; made
								 * at the first wait, freed when fds run short */
	int			sock_pos;		/* position of the socket event in wes */
	uint32		events;			/* socket events wes is armed for */
	Latch	   *latch;			/* latch wes was built with */
} McConnWait;

/* A connect in progress: lookup, TCP, TLS handshake, login (conn_connect.c). */
typedef struct McConnConnect
{
	bool		active;			/* connect, TLS handshake or login in progress */
	bool		tcp_pending;	/* ... and the TCP connect is not complete */
	uint8		step;			/* McConnectStep in conn_connect.c */
	uint32		events;			/* socket events the step waits for */
	int			ms;				/* the connect's bound: connect_timeout, or a
								 * run's shorter budget (0 = none) */
	int			cap;			/* that budget, for the next connect only
								 * (conn_connect_cap; 0 = none) */
	int64		started;		/* mono_usec() the connect began */
	int64		wait_started;	/* mono_usec() the step began waiting */
	size_t		login_sent;		/* bytes of the login request sent */
} McConnConnect;

/*
 * The running request (conn.c): whether one is outstanding, how it may be
 * retried, and its tally for mc_client_stats (client_stats.h).  "busy" is
 * set while a request is outstanding: a connection found busy at its next
 * use (an error or a cancel interrupted the read) is out of step and gets
 * closed.
 */
typedef struct McConnReq
{
	int64		last_used;		/* McCsNow() at the start of the current request
								 * (also its latency's start) */
	bool		retryable;		/* socket was pooled: see closed_while_idle in conn_io.c */
	bool		in_doubt;		/* a non-idempotent request was (maybe) sent */
	bool		busy;
	bool		live;			/* tally is a running request's, not yet recorded
								 * (next to busy: McConnEnd clears both at once) */
	McCsReq		tally;
} McConnReq;

/* Reply bytes, and the bounds of the waits for them (conn_io.c). */
typedef struct McConnIo
{
	bool		expect_wait;	/* a request was sent: wait before reading */
	bool		want_write;		/* ... for writability (TLS asked for it) */
	bool		replied;		/* a reply was consumed on this socket: the
								 * peer spoke memcached (McConnForeignReply) */
	bool		stamp_fresh;	/* req.last_used is the request's start, and
								 * nothing has arrived since */
	int			deadline_ms;	/* the bound deadline stands for, for messages */
	int64		deadline;		/* mono_usec() no wait of this request passes; 0 = none */
	int64		own_deadline;	/* the caller's own bound on the request (a
								 * stats command's limit_ms), mono_usec(); 0 = none */
	size_t		rgot;			/* reply bytes received for this request */

	/* unread reply bytes are rbuf[rstart, rend) */
	char	   *rbuf;
	size_t		rcap;
	size_t		rstart;
	size_t		rend;
} McConnIo;

/* Bookkeeping shown by mc_servers (conn_io.c, which sends). */
typedef struct McConnCount
{
	uint64		requests;		/* requests sent on the current socket */
	uint64		connects;		/* sockets opened in this backend */
	uint64		total;			/* requests sent in this backend */
} McConnCount;

/* Pipelined request bytes not yet sent are buf[off, len) (conn.c). */
typedef struct McConnOut
{
	char	   *buf;
	size_t		cap;
	size_t		len;
	size_t		off;
} McConnOut;

/* The connection's entry in its server's multi-get wait set (net.c). */
typedef struct McConnMset
{
	int			pos;			/* position in the server's mwes, -1 if absent */
	uint32		events;			/* socket events mwes is armed for */
} McConnMset;

/* TLS (conn_tls.c): ssl is NULL on a plaintext socket. */
typedef struct McConnTls
{
	struct ssl_st *ssl;
	struct ssl_session_st *session;	/* offered at the next connect */
	bool		kept;			/* this socket's session was kept */
	bool		starved;		/* the last TLS read wanted the socket: what
								 * OpenSSL holds is part of a record */
} McConnTls;

/* The last failure, for the caller to count and (maybe) raise (conn_fail.c). */
typedef struct McConnFail
{
	int			code;			/* SQLSTATE */
	const char *action;			/* "connect to", "read from", ... */
	bool		hard;			/* raise even when the caller is soft */
	bool		nocount;		/* not the instance's fault (a rejected login) */
	bool		own_limit;		/* own_deadline passed: the caller gave up */
	const char *hint;			/* a constant errhint, or NULL */
	char		why[200];
} McConnFail;

/*
 * One socket to one memcached instance.  Lives as long as the backend (or
 * until its server's configuration changes).
 */
struct McConn
{
	McNet	   *net;			/* net.c: the server's network part */
	int			index;			/* net.c: instance index in net->cfg->endpoints */
	McConnReq	req;			/* conn.c */
	McConnIo	io;				/* conn_io.c */
	McConnFd	fd;				/* conn_fd.c */
	McConnWait	wait;			/* conn_io.c */
	McConnConnect connect;		/* conn_connect.c */
	McConnOut	out;			/* conn.c */
	McConnCount count;			/* conn_io.c */
	McConnMset	mset;			/* net.c */
	McConnTls	tls;			/* conn_tls.c */
	McConnFail	fail;			/* conn_fail.c */
};

/* Outcome of a socket operation that may fail softly. */
typedef enum McIoStatus
{
	MC_IO_OK,
	MC_IO_RETRY,				/* pooled socket was closed while idle: retry */
	MC_IO_FAILED				/* the instance failed: cause kept in the connection */
} McIoStatus;

/*
 * Microseconds on the coarse monotonic clock: what the per-request
 * bookkeeping (idle probe, wait deadlines) needs.  It is read from the vDSO
 * without touching the hardware clock, a few nanoseconds, where
 * GetCurrentTimestamp costs a full clock read; its millisecond-scale
 * resolution is far finer than any timeout here.
 */
static inline int64
mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
}

/* Milliseconds from now until deadline (mono_usec), rounded up; <= 0 when past. */
static inline long
mono_ms_left(int64 deadline)
{
	int64		left = deadline - mono_usec();

	return left <= 0 ? 0 : (long) ((left + 999) / 1000);
}

/* Outcome of a transfer or a TLS handshake step. */
typedef enum McXferStatus
{
	MC_XFER_DONE,
	MC_XFER_WANT_READ,			/* wait for the socket to be readable, retry */
	MC_XFER_WANT_WRITE,			/* ... writable */
	MC_XFER_EOF,				/* the peer closed */
	MC_XFER_SYSERR,				/* a socket error, in errno */
	MC_XFER_ERROR				/* a TLS failure, described by conn_tls_why() */
} McXferStatus;

/*
 * The transport under a connection's socket: plaintext (conn_plain.c) or
 * TLS (conn_tls.c), chosen when the socket opens (conn->fd.xfer), so the rest
 * of net/ reads and writes without asking which.  read and write never
 * wait: the bytes moved, 0 when the socket must be waited for (*st says
 * which way), -1 with *st saying why (conn_io_xfer_failed words it).
 */
struct McTransport
{
	ssize_t		(*read) (McConn *conn, char *buf, size_t len, McXferStatus *st);
	ssize_t		(*write) (McConn *conn, const char *buf, size_t len, McXferStatus *st);
	/* a whole request (header, data block and its CRLF), waiting as needed */
	McIoStatus	(*write_request) (McConn *conn, const char *hdr, size_t hlen,
								  const char *data, size_t dlen);
	/* the idle probe: open, and nothing unasked to read */
	bool		(*still_open) (McConn *conn);
	/* bytes it holds that epoll cannot see (McConnHasPending) */
	bool		(*pending) (McConn *conn);
	/* a request finished with its reply read whole (TLS: keep the session) */
	void		(*idle) (McConn *conn);
	/* the socket is about to close: free what the transport holds */
	void		(*close) (McConn *conn);
	/* why the last transfer failed with MC_XFER_ERROR */
	const char *(*why) (void);
	/*
	 * Bytes come in records: one read may return less than the socket
	 * holds, so a short read does not mean drained, and io_timeout runs
	 * from the last byte delivered (a server trickling a record a byte at
	 * a time wakes every wait and delivers nothing).
	 */
	bool		records;
	bool		tls;			/* for mc_connections */
};

extern const McTransport mc_plain_transport;	/* conn_plain.c */

/* McConnHasPending, inline for the read loop: plaintext holds nothing. */
static inline bool
conn_has_pending(McConn *conn)
{
	return conn->fd.xfer != NULL && conn->fd.xfer->pending != NULL &&
		conn->fd.xfer->pending(conn);
}
extern const McTransport mc_tls_transport;	/* conn_tls.c */

/* conn_fail.c */
extern bool conn_fail(McConn *conn, bool hard, int sqlerrcode, const char *action,
					  const char *fmt,...) pg_attribute_printf(5, 6);
extern void conn_fail_hint(McConn *conn, const char *hint);
extern void conn_fail_nocount(McConn *conn);
extern void conn_fail_own_limit(McConn *conn, bool own);
extern void conn_fail_amend(McConn *conn, int code, const char *why);

/* conn_io.c */
extern MemoryContext conn_io_memory(void);
extern void conn_io_opened(McConn *conn);
extern void conn_io_shrink(McConn *conn);
extern void conn_io_free(McConn *conn);
extern bool conn_io_reserve(McConn *conn, size_t need);
extern McIoStatus conn_io_failed(McConn *conn, int err, const char *action);
extern bool conn_io_wait(McConn *conn, uint32 events, int timeout_ms, const char *action);
extern McIoStatus conn_io_send(McConn *conn, const char *hdr, size_t hlen,
							   const char *data, size_t dlen);
extern McIoStatus conn_io_fill(McConn *conn, size_t need);
extern McIoStatus conn_io_xfer_failed(McConn *conn, McXferStatus st, const char *action);

/* conn_tls.c */
extern bool conn_tls_begin(McConn *conn);
extern McXferStatus conn_tls_handshake(McConn *conn);
extern void conn_tls_forget(McConn *conn);
extern void conn_tls_rebound(McNet *net);
extern const char *conn_tls_why(void);

/* conn_connect.c */
extern bool conn_connect_start(McConn *conn);

/* conn_fd.c */
extern void conn_fd_close(McConn *conn);
extern void conn_fd_init(McConn *conn);
extern bool conn_fd_room(McConn *self);
extern void conn_fd_opened(McConn *conn, pgsocket sock, const McTransport *xfer);
extern void conn_fd_transport(McConn *conn, const McTransport *xfer);
extern void conn_fd_moved(McConn *from, McConn *to);
extern void conn_fd_use(McConn *conn, int64 now);
extern void conn_fd_touch(McConn *conn);

/* conn.c */
extern void conn_out_free(McConn *conn);
extern void conn_quote_line(McConn *conn, const char *base, size_t len,
							char *out, size_t outlen);

/*
 * Free a buffer of a connection's part for good and forget its size (the
 * connection is discarded): for the owner of the part (conn_io.c's read
 * buffer, conn.c's write buffer).
 */
static inline void
conn_buf_free(char **buf, size_t *cap)
{
	if (*buf)
		pfree(*buf);
	*buf = NULL;
	*cap = 0;
}

/*
 * The parts' helpers for the other files, inline because the single-key
 * path runs through them.  Each writes its owner's part only, and calls
 * no conn_*.c file (only client_stats.c and instance_name.c, below them):
 * every conn_*.c file uses this header, so such a call would close a
 * circle (test/unit/structure.py); a helper that must call its owner
 * lives in the owner's own header (conn_io.h).
 */

/*
 * Empty the read buffer (conn_io.c's).  Its invariant: a NUL right after
 * the last unread byte (rbuf[rend]), which lets mc_parse_reply_z parse
 * without bounds checks; every place that moves rend keeps it.
 */
static inline void
conn_io_reset_rbuf(McConn *conn)
{
	conn->io.rstart = conn->io.rend = 0;
	if (conn->io.rbuf)
		conn->io.rbuf[0] = '\0';
}

/* A request begins (conn.c): nothing read, and no bound on its waits yet. */
static inline void
conn_io_begin(McConn *conn)
{
	conn->io.stamp_fresh = true;
	conn->io.deadline = 0;
	conn->io.own_deadline = 0;
	conn->io.expect_wait = false;
	conn->io.rgot = 0;
}

/* n reply bytes were used (McConnConsume). */
static inline void
conn_io_consume(McConn *conn, size_t n)
{
	Assert(n <= conn->io.rend - conn->io.rstart);
	conn->io.replied |= (n > 0);
	conn->io.rstart += n;
	if (conn->io.rstart == conn->io.rend)
		conn_io_reset_rbuf(conn);
}

/* n bytes were read into rbuf at rend. */
static inline void
conn_io_received(McConn *conn, size_t n)
{
	conn->io.rend += n;
	conn->io.rbuf[conn->io.rend] = '\0';
	conn->io.rgot += n;
	conn->io.stamp_fresh = false;
}

/* The bound of the request's waits (mono_usec, 0 = none; ms for messages). */
static inline void
conn_io_bound(McConn *conn, int64 deadline, int ms)
{
	conn->io.deadline = deadline;
	conn->io.deadline_ms = ms;
}

/* A bound the request's waits no longer have, for a step's own (conn_connect.c). */
static inline void
conn_io_stale(McConn *conn)
{
	conn->io.stamp_fresh = false;
}

/* The caller's own bound on the request (conn_stat.c's limit_ms). */
static inline void
conn_io_own_bound(McConn *conn, int64 deadline)
{
	conn->io.own_deadline = deadline;
}

/* Whether the next read waits for the socket first (McConnRecvSome). */
static inline void
conn_io_expect_wait(McConn *conn, bool wait)
{
	conn->io.expect_wait = wait;
}

/* What was read so far belongs to no request (the login's answer, used). */
static inline void
conn_io_forget(McConn *conn)
{
	conn_io_reset_rbuf(conn);
	conn->io.rgot = 0;
}

/* Free the wait set (conn_fd.c: the socket closes, or descriptors run short). */
static inline void
conn_io_drop_wes(McConn *conn)
{
	if (conn->wait.wes)
	{
		FreeWaitEventSet(conn->wait.wes);
		conn->wait.wes = NULL;
	}
	conn->wait.events = 0;
}

/* A pipeline of nrequests requests was queued (McConnPipelined). */
static inline void
conn_io_count_pipeline(McConn *conn, int nrequests)
{
	conn->count.requests++;
	conn->count.total += nrequests;
}

/* Nothing queued to send (conn.c's write buffer emptied). */
static inline void
conn_out_clear(McConn *conn)
{
	conn->out.len = conn->out.off = 0;
}

/* The connection's entry of client_stats.c's tally, found once per connection. */
static inline void
conn_tally_find(McConn *conn)
{
	if (unlikely(conn->req.tally.inst == NULL))
		conn->req.tally.inst = McCsInstanceOf(conn->net->serverid,
											  McInstanceName(conn->net, conn->index));
}

/* request bytes sent */
static inline void
conn_tally_sent(McConn *conn, size_t n)
{
	conn->req.tally.sent += n;
}

/*
 * The running request ended (err: MC_CSE_NONE, or how it failed): its
 * tally goes to client_stats.c, once.
 */
static inline void
conn_tally_end(McConn *conn, McCsError err)
{
	if (conn->req.live)
	{
		conn->req.live = false;
		conn_tally_find(conn);
		McCsRecord(&conn->req.tally, conn->req.last_used, McCsNow(), err);
	}
}

/*
 * The running request is not a call of its own (a pooled socket closed
 * while idle: the retry is): its tally is dropped.
 */
static inline void
conn_tally_drop(McConn *conn)
{
	conn->req.live = false;
}

/*
 * conn_tally_end of a request that succeeded, the counting inline:
 * McConnEnd, which cleared live (live: what it was).
 */
static inline void
conn_tally_end_ok(McConn *conn, bool live)
{
	if (live)
	{
		/* found when its socket was connected (conn_connect_start) */
		Assert(conn->req.tally.inst != NULL);
		McCsRecordInline(&conn->req.tally, conn->req.last_used, McCsNow(), MC_CSE_NONE);
	}
}

/* The socket closed: no request runs on it any more. */
static inline void
conn_req_closed(McConn *conn)
{
	conn->req.busy = false;
}

/*
 * A socket of the server opened or closed (conn_fd.c): whoever holds a
 * wait set over its sockets (net.c's mwes) makes a new one.
 */
static inline void
net_sock_changed(McNet *net)
{
	net->sock_gen++;
}

/*
 * The next connect's bound when shorter than connect_timeout (a run's
 * remaining budget, ms; 0 = none), set by McConnPrepare for its call.
 */
static inline void
conn_connect_cap(McConn *conn, int cap_ms)
{
	conn->connect.cap = cap_ms;
}

/* The socket closed: no connect is in progress on it. */
static inline void
conn_connect_reset(McConn *conn)
{
	conn->connect.active = false;
	conn->connect.tcp_pending = false;
}

#endif							/* MCFDW_CONN_INT_H */
