/*
 * conn_int.h — what the conn_*.c files share about a connection's
 * insides: the McConn struct, buffer sizes, the wait-set slot of the latch,
 * the outcome of a socket step, the transport under the socket (plaintext
 * or TLS: McTransport), and the helpers both sides of a connection call.
 * Not for any other file: the rest of the extension sees McConn as an
 * opaque pointer and goes through the functions declared in net.h.
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
#define LATCH_POS		0		/* the latch's slot in every wait set */

/*
 * One socket to one memcached instance.  Lives as long as the backend (or
 * until its server's configuration changes).  "busy" is set while a request
 * is outstanding: a connection found busy at its next use (an error or a
 * cancel interrupted the read) is out of step and gets closed.
 */
typedef struct McTransport McTransport;

struct McConn
{
	McNet	   *net;			/* the server's network part */
	int			index;			/* instance index in net->cfg->endpoints */
	pgsocket	sock;
	bool		connecting;		/* connect, TLS handshake or login in progress */
	bool		tcp_pending;	/* ... and the TCP connect is not complete */
	int64		connect_started;	/* mono_usec() in conn.c */
	int			connect_ms;		/* the connect's bound: connect_timeout, or a
								 * run's shorter budget (0 = none) */
	int			connect_cap;	/* that budget, set by McConnPrepare for
								 * the call (0 = none) */
	uint8		connect_step;	/* McConnectStep in conn_connect.c */
	uint32		connect_events; /* socket events the step waits for */
	int64		connect_wait_started;	/* mono_usec() the step began waiting */
	size_t		login_sent;		/* bytes of the login request sent */
	bool		busy;
	bool		cs_live;		/* cs is a running request's, not yet recorded
								 * (next to busy: McConnEnd clears both at once) */
	bool		expect_wait;	/* a request was sent: wait before reading */
	bool		want_write;		/* ... for writability (TLS asked for it) */
	bool		retryable;		/* socket was pooled: see closed_while_idle in conn_io.c */
	bool		in_doubt;		/* a non-idempotent request was (maybe) sent */
	size_t		rgot;			/* reply bytes received for this request */
	bool		replied;		/* a reply was consumed on this socket: the
								 * peer spoke memcached (McConnForeignReply) */
	int64		last_used;		/* McCsNow() at the start of the current request
								 * (also its latency's start) */
	bool		stamp_fresh;	/* ... and nothing has arrived since */
	int64		deadline;		/* mono_usec() no wait of this request passes; 0 = none */
	int			deadline_ms;	/* the bound deadline stands for, for messages */
	int64		own_deadline;	/* the caller's own bound on the request (a
								 * stats command's limit_ms), mono_usec(); 0 = none */
	dlist_node	open_node;		/* in conn.c's list of open sockets, last used first */
	WaitEventSet *wes;			/* latch + postmaster death + this socket; made
								 * at the first wait, freed when fds run short */
	int			sock_pos;		/* position of the socket event in wes */
	int			mpos;			/* position in the server's mwes, -1 if absent */
	uint32		mevents;		/* socket events mwes is armed for */
	uint32		cur_events;		/* socket events wes is armed for */
	Latch	   *latch;			/* latch wes was built with */

	const McTransport *xfer;	/* plaintext or TLS, set when the socket
								 * opens; NULL while it is closed */

	/* TLS (conn_tls.c): NULL on a plaintext socket */
	struct ssl_st *ssl;
	struct ssl_session_st *tls_session;	/* offered at the next connect */
	bool		tls_kept;		/* this socket's session was kept */
	bool		tls_starved;	/* the last TLS read wanted the socket: what
								 * OpenSSL holds is part of a record */

	/* unread reply bytes are rbuf[rstart, rend) */
	char	   *rbuf;
	size_t		rcap;
	size_t		rstart;
	size_t		rend;

	/* pipelined request bytes not yet sent are wbuf[woff, wlen) */
	char	   *wbuf;
	size_t		wcap;
	size_t		wlen;
	size_t		woff;

	/* the running request's tally for mc_client_stats (client_stats.h) */
	McCsReq		cs;

	/* bookkeeping shown by mc_servers */
	uint64		requests;		/* requests sent on the current socket */
	uint64		connects;		/* sockets opened in this backend */
	uint64		total_requests; /* requests sent in this backend */

	/* the last failure, for the caller to count and (maybe) raise */
	int			fail_code;		/* SQLSTATE */
	const char *fail_action;	/* "connect to", "read from", ... */
	bool		fail_hard;		/* raise even when the caller is soft */
	bool		fail_nocount;	/* not the instance's fault (a rejected login) */
	bool		fail_own_limit; /* own_deadline passed: the caller gave up */
	const char *fail_hint;		/* a constant errhint, or NULL */
	char		fail_why[200];
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

/*
 * Empty the read buffer.  Its invariant: a NUL right after the last unread
 * byte (rbuf[rend]), which lets mc_parse_reply_z parse without bounds
 * checks; every place that moves rend keeps it.
 */
static inline void
conn_reset_rbuf(McConn *conn)
{
	conn->rstart = conn->rend = 0;
	if (conn->rbuf)
		conn->rbuf[0] = '\0';
}

/* conn's entry of client_stats.c's tally, found at its first connect or count. */
extern pg_noinline void conn_cs_find(McConn *conn);

/*
 * The running request ended (err: MC_CSE_NONE, or how it failed): its
 * tally goes to client_stats.c, once.
 */
static inline void
conn_cs_end(McConn *conn, McCsError err)
{
	if (conn->cs_live)
	{
		conn->cs_live = false;
		/* the instance's entry of the tally, found once per connection */
		if (unlikely(conn->cs.inst == NULL))
			conn_cs_find(conn);
		McCsRecord(&conn->cs, conn->last_used, McCsNow(), err);
	}
}

/*
 * conn_cs_end of a request that succeeded, the counting inline: McConnEnd,
 * which cleared cs_live (live: what it was).
 */
static inline void
conn_cs_end_ok(McConn *conn, bool live)
{
	if (live)
	{
		/* found when its socket was connected (conn_connect_start) */
		Assert(conn->cs.inst != NULL);
		McCsRecordInline(&conn->cs, conn->last_used, McCsNow(), MC_CSE_NONE);
	}
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
 * TLS (conn_tls.c), chosen when the socket opens (conn->xfer), so the rest
 * of net/ reads and writes without asking which.  read and write never
 * wait: the bytes moved, 0 when the socket must be waited for (*st says
 * which way), -1 with *st saying why (conn_xfer_failed words it).
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
	return conn->xfer != NULL && conn->xfer->pending != NULL &&
		conn->xfer->pending(conn);
}
extern const McTransport mc_tls_transport;	/* conn_tls.c */

/* conn_io.c */
extern MemoryContext conn_memory(void);
extern bool conn_reserve(McConn *conn, size_t need);
extern McIoStatus conn_io_failed(McConn *conn, int err, const char *action);
extern bool conn_fail(McConn *conn, bool hard, int sqlerrcode, const char *action,
					  const char *fmt,...) pg_attribute_printf(5, 6);
extern bool conn_wait(McConn *conn, uint32 events, int timeout_ms, const char *action);
extern McIoStatus conn_send(McConn *conn, const char *hdr, size_t hlen,
							const char *data, size_t dlen);
extern McIoStatus conn_fill(McConn *conn, size_t need);
extern McIoStatus conn_xfer_failed(McConn *conn, McXferStatus st, const char *action);

/* conn_tls.c */
extern bool conn_tls_begin(McConn *conn);
extern McXferStatus conn_tls_handshake(McConn *conn);
extern void conn_tls_forget(McConn *conn);
extern const char *conn_tls_why(void);

/* conn_connect.c */
extern bool conn_connect_start(McConn *conn);
extern bool conn_connect_finish(McConn *conn);

/* conn_fd.c */
extern bool conn_fd_room(McConn *self);
extern void conn_fd_opened(McConn *conn);
extern void conn_fd_moved(McConn *from, McConn *to);
extern void conn_fd_use(McConn *conn, int64 now);
extern void conn_fd_touch(McConn *conn);

#endif							/* MCFDW_CONN_INT_H */
