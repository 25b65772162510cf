/*
 * conn.c — one socket per memcached instance, and everything done on it.
 *
 * Owns: non-blocking connects (started and finished separately, so a batch
 * connects to all its instances at once; host names are looked up without
 * blocking), one WaitEventSet per connection
 * (the multi-get's, one per server, and its non-blocking slices are in
 * conn_multi.c), interruptible sends and reads with deadlines, the read
 * buffer (always NUL-terminated, for mc_parse_reply_z, capped by
 * max_reply_size), retrying a pooled socket the server closed while idle,
 * closing a connection whose reply was not read to the end, and the
 * backend's open sockets as a whole: the file-descriptor budget they share
 * (the least recently used give theirs back) and idle_timeout.  A failing instance is reported, not judged: the
 * cause is kept in the connection and the call returns failure.  Must not:
 * choose instances, count failures or decide that an instance is dead
 * (pool.c does all three, and calls down into this file, never the other
 * way), or know what commands mean.
 *
 * Lifetime: buffers and wait sets live in "mcfdw connections", a child of
 * TopMemoryContext, for the life of the backend.
 */
#include "postgres.h"

#include <netdb.h>				/* getaddrinfo_a: _GNU_SOURCE, set by PGXS */
#include <netinet/in.h>
#include <netinet/tcp.h>
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

#include "mcfdw.h"

#include "conn_int.h"

#define RBUF_INITIAL	16384
#define RBUF_KEEP		(256 * 1024)	/* shrink back after replies bigger than this */
#define STATS_MAX_BYTES	(4 * 1024 * 1024)	/* a stats reply past this is not memcached's */

/*
 * Every open socket of the backend, the most recently used first: when the
 * backend runs short of file descriptors, the least recently used idle ones
 * give theirs back (conn_fd_room), and idle_timeout is enforced over it.
 */
static dlist_head open_conns = DLIST_STATIC_INIT(open_conns);
static int64 last_idle_sweep = 0;

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

/*
 * Name of an instance ("host:port", "[v6]:port") for messages and views.
 * Only called on error and reporting paths, so the allocation does not
 * matter.
 */
const char *
McInstanceName(McServer *srv, int index)
{
	McEndpoint *ep = &srv->cfg.endpoints[index];

	if (strchr(ep->host, ':'))
		return psprintf("[%s]:%d", ep->host, ep->port);
	return psprintf("%s:%d", ep->host, ep->port);
}

/* Name of a connection's instance, for messages. */
const char *
McConnName(McConn *conn)
{
	return McInstanceName(conn->server, conn->index);
}

/* The connection to instance index of a server. */
McConn *
McConnOf(McServer *srv, int index)
{
	return &srv->conns[index];
}

/* What the mc_servers view shows of a connection. */
void
McConnGetStats(McConn *conn, McConnStats *out)
{
	out->open = (conn->sock != PGINVALID_SOCKET);
	out->connects = conn->connects;
	out->requests = conn->total_requests;
}

/* Release a connection's buffers and socket for good (config change). */
static void
conn_discard(McConn *conn)
{
	McConnClose(conn);
	if (conn->rbuf)
		pfree(conn->rbuf);
	if (conn->wbuf)
		pfree(conn->wbuf);
	conn->rbuf = conn->wbuf = NULL;
	conn->rcap = conn->wcap = 0;
}

/*
 * Room for a rebuilt server's n connections, allocated before the rebuild
 * commits (McConnCarryOver then cannot fail).
 */
McConn *
McConnArrayNew(MemoryContext cxt, int n)
{
	return MemoryContextAllocZero(cxt, sizeof(McConn) * n);
}

/*
 * Fill a rebuilt server's connections, while srv still has its old ones:
 * new instance i continues old connection from[i] (the same host and port,
 * so a GRANT or a timeout change does not cost a reconnect), or starts
 * unused when from[i] is -1.  Old connections nobody continues are closed
 * and freed.  The caller installs conns as srv->conns afterwards.
 */
void
McConnCarryOver(McServer *srv, McConn *conns, int n, const int *from)
{
	for (int i = 0; i < n; i++)
	{
		McConn	   *nc = &conns[i];

		nc->sock = PGINVALID_SOCKET;
		if (from[i] >= 0)
		{
			McConn	   *oc = &srv->conns[from[i]];

			if (oc->busy)
				McConnClose(oc);
			*nc = *oc;
			if (oc->sock != PGINVALID_SOCKET)
			{
				/* the list links the old struct: put the new one in its place */
				dlist_insert_after(&oc->open_node, &nc->open_node);
				dlist_delete(&oc->open_node);
			}
			oc->index = -1;		/* moved */
		}
		nc->index = i;
		nc->server = srv;
	}
	for (int j = 0; srv->conns && j < srv->cfg.nendpoints; j++)
		if (srv->conns[j].index >= 0)
			conn_discard(&srv->conns[j]);
}

/*
 * Close every connection of srv an error or a cancel left in the middle of
 * a request (pool.c's (sub)transaction abort callbacks).
 */
void
McConnCloseBusy(McServer *srv)
{
	for (int i = 0; srv->conns && i < srv->cfg.nendpoints; i++)
		if (srv->conns[i].busy)
			McConnClose(&srv->conns[i]);
}

/* Close and free every connection of a dropped server, and its wait set. */
void
McConnDiscardAll(McServer *srv)
{
	for (int i = 0; srv->conns && i < srv->cfg.nendpoints; i++)
		conn_discard(&srv->conns[i]);
	if (srv->mwes)
		FreeWaitEventSet(srv->mwes);
	srv->mwes = NULL;
}

/* Close the socket (the buffers stay for the next connection). */
void
McConnClose(McConn *conn)
{
	if (conn->wes)
	{
		FreeWaitEventSet(conn->wes);
		conn->wes = NULL;
	}
	if (conn->sock != PGINVALID_SOCKET)
	{
		closesocket(conn->sock);
		ReleaseExternalFD();
		conn->sock = PGINVALID_SOCKET;
		conn->server->sock_gen++;
		dlist_delete(&conn->open_node);
	}
	conn->connecting = false;
	conn->busy = false;
	conn_reset_rbuf(conn);
	conn->wlen = conn->woff = 0;
	conn->cur_events = 0;
}

/*
 * The instance misbehaved or went away: close the socket and keep the cause
 * for the caller.  Used for connect errors, timeouts, resets, EOF and
 * unparseable replies — everything that says the instance is unhealthy.
 * Nothing is counted or raised here: the caller hands the connection to
 * pool.c (McInstanceFailed), which counts the failure against the
 * instance's health and raises it with McConnRaise unless the call is soft
 * (a multi-get with failover drops the instance and goes on).  "hard"
 * failures are raised even then.  Always returns false.
 */
static bool
conn_fail_v(McConn *conn, bool hard, int sqlerrcode, const char *action,
			const char *fmt, va_list ap)
{
	int			save_errno = errno;

	McConnClose(conn);
	errno = save_errno;			/* for %m */
	vsnprintf(conn->fail_why, sizeof(conn->fail_why), fmt, ap);
	conn->fail_code = sqlerrcode;
	conn->fail_action = action;
	conn->fail_hard = hard;
	return false;
}

/* conn_fail_v for the callers of this file. */
static bool
conn_fail(McConn *conn, bool hard, int sqlerrcode, const char *action,
		  const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	conn_fail_v(conn, hard, sqlerrcode, action, fmt, ap);
	va_end(ap);
	return false;
}

/* conn_fail_v for a caller that found the instance misbehaving (a bad reply). */
bool
McConnFailedV(McConn *conn, int sqlerrcode, const char *action,
			  const char *fmt, va_list ap)
{
	return conn_fail_v(conn, false, sqlerrcode, action, fmt, ap);
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
 * Raise the connection's last failure.  The primary message names the
 * foreign server; the detail names the instance and the cause.
 */
void
McConnRaise(McConn *conn)
{
	ereport(ERROR,
			(errcode(conn->fail_code),
			 errmsg("could not %s memcached server \"%s\"", conn->fail_action,
					conn->server->name),
			 conn->in_doubt ?
			 errdetail("Instance %s: %s.  The request may or may not have been executed.",
					   McConnName(conn), conn->fail_why) :
			 errdetail("Instance %s: %s.", McConnName(conn), conn->fail_why)));
	pg_unreachable();
}

/* The connection's instance: its index in the server's configuration. */
int
McConnIndex(McConn *conn)
{
	return conn->index;
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

/* The connection's own wait set, made at its first wait. */
static void
conn_make_wes(McConn *conn, uint32 events)
{
	if (!conn_fd_room(conn))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("out of file descriptors for memcached server \"%s\"",
						conn->server->name),
				 errdetail("Every connection this session holds is in use."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	conn->wes = CreateWaitEventSet(conn_memory(), 3);
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
 * inactivity pass.  One WaitEventSet per connection avoids building an epoll
 * set per wait, and the clock is read only when a wait ends without the
 * socket being ready.  Returns false on a timeout (a failure of the
 * instance, kept in conn).
 */
static bool
conn_wait(McConn *conn, uint32 events, int timeout_ms, const char *action)
{
	int64		deadline = 0;
	long		timeout = -1;

	if (timeout_ms > 0)
	{
		/*
		 * The clock was read when the request began; until a reply byte
		 * arrives, that is when this wait began too, near enough.
		 */
		int64		start = conn->stamp_fresh ? conn->last_used : mono_usec();

		deadline = start + (int64) timeout_ms * 1000;
		timeout = timeout_ms;
	}
	/* a bound on the whole request (the stats commands) */
	if (conn->deadline != 0 && (deadline == 0 || conn->deadline < deadline))
	{
		deadline = conn->deadline;
		timeout_ms = conn->deadline_ms;
		timeout = mono_ms_left(deadline);
	}
	if (conn->wes == NULL)
		conn_make_wes(conn, events);
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
		rc = WaitEventSetWait(conn->wes, timeout, &ev, 1, PG_WAIT_EXTENSION);
		if (rc > 0 && (ev.events & events))
			return true;
		if (rc > 0 && (ev.events & WL_LATCH_SET))
			ResetLatch(MyLatch);
		/* woken early, or timed out: what is left of the timeout? */
		if (deadline)
		{
			timeout = mono_ms_left(deadline);
			if (timeout <= 0)
				return conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
								 "timed out after %d ms", timeout_ms);
		}
	}
}

/*
 * A host-name lookup run by glibc's getaddrinfo_a on a helper thread (which
 * blocks every signal, so PostgreSQL's handlers keep running on the
 * backend's own thread).  The lookup owns its strings and hints until it
 * completes, possibly after the wait for it was abandoned (a cancel, a
 * timeout): such lookups stay on a list and are freed once done.
 */
typedef struct McLookup
{
	struct gaicb cb;
	struct addrinfo hints;
	char		host[MC_HOST_MAX + 1];
	char		port[16];
	struct McLookup *next;
} McLookup;

static McLookup *lookups = NULL;	/* started and not yet freed */

/* Free the lookups that are done; the others stay listed. */
static void
lookups_reap(void)
{
	McLookup  **pp = &lookups;

	while (*pp != NULL)
	{
		McLookup   *l = *pp;

		if (gai_error(&l->cb) == EAI_INPROGRESS)
		{
			pp = &l->next;
			continue;
		}
		if (l->cb.ar_result)
			freeaddrinfo(l->cb.ar_result);
		*pp = l->next;
		pfree(l);
	}
}

/*
 * Resolve host and port for a connect, without blocking the backend: an
 * address needs no lookup (AI_NUMERICHOST); a name is looked up by
 * getaddrinfo_a while this waits in slices of at most 100 ms, servicing
 * interrupts between them (a signal also ends a slice early), until
 * deadline (mono_usec; 0 = none).  Returns 0 with *res set (free with
 * freeaddrinfo), or an EAI_* code; EAI_AGAIN with *timed_out set when the
 * deadline passed.
 */
static int
conn_resolve(const char *host, int port, int64 deadline,
			 struct addrinfo **res, bool *timed_out)
{
	struct addrinfo hints;
	char		portstr[16];
	McLookup   *l;
	struct gaicb *list[1];
	int			rc;

	*timed_out = false;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(host, portstr, &hints, res);
	if (rc != EAI_NONAME)
		return rc;

	lookups_reap();
	l = MemoryContextAllocZero(conn_memory(), sizeof(McLookup));
	strlcpy(l->host, host, sizeof(l->host));
	strlcpy(l->port, portstr, sizeof(l->port));
	l->hints = hints;
	l->hints.ai_flags = AI_NUMERICSERV;
	l->cb.ar_name = l->host;
	l->cb.ar_service = l->port;
	l->cb.ar_request = &l->hints;
	list[0] = &l->cb;
	rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
	if (rc != 0)
	{
		pfree(l);
		return rc;
	}
	/* listed before any wait: an error thrown below leaves it to the reaper */
	l->next = lookups;
	lookups = l;
	while (gai_error(&l->cb) == EAI_INPROGRESS)
	{
		long		ms = 100;
		struct timespec ts;

		CHECK_FOR_INTERRUPTS();
		if (deadline != 0)
		{
			ms = Min(ms, mono_ms_left(deadline));
			if (ms <= 0)
			{
				(void) gai_cancel(&l->cb);
				*timed_out = true;
				return EAI_AGAIN;
			}
		}
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000;
		(void) gai_suspend((const struct gaicb *const *) list, 1, &ts);
	}
	rc = gai_error(&l->cb);
	if (rc == 0)
	{
		*res = l->cb.ar_result;
		l->cb.ar_result = NULL;
	}
	lookups_reap();				/* l is done: this frees it */
	return rc;
}

/*
 * Start a non-blocking TCP connection.  Host names are resolved here, at
 * connect time, so DNS changes are picked up by the next reconnect; the
 * lookup and the connect together get connect_timeout, and both can be
 * cancelled.  The connect itself completes in conn_connect_finish, so a
 * multi-get can have the handshakes with all its instances in flight at
 * once.
 */
static bool
conn_connect_start(McConn *conn)
{
	McServer   *srv = conn->server;
	McEndpoint *ep = &srv->cfg.endpoints[conn->index];
	struct addrinfo *res = NULL;
	int			rc;
	int			one = 1;
	pgsocket	sock;
	int64		start = mono_usec();
	int			timeout = srv->cfg.connect_timeout;
	bool		timed_out;

	rc = conn_resolve(ep->host, ep->port,
					  timeout > 0 ? start + (int64) timeout * 1000 : 0,
					  &res, &timed_out);
	if (timed_out)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "could not resolve host name: timed out after %d ms",
						 timeout);
	if (rc != 0 || res == NULL)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "could not resolve host name: %s",
						 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));

	if (!conn_fd_room(conn) || !AcquireExternalFD())
	{
		freeaddrinfo(res);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not connect to memcached server \"%s\"", srv->name),
				 errdetail("This session has no file descriptor left for another connection, and every connection it holds is in use."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	}
	sock = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sock == PGINVALID_SOCKET)
	{
		int			save = errno;

		ReleaseExternalFD();
		freeaddrinfo(res);
		errno = save;
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "could not create socket: %m");
	}
	conn->sock = sock;
	srv->sock_gen++;
	dlist_push_head(&open_conns, &conn->open_node);
	(void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = connect(sock, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (rc < 0 && errno != EINPROGRESS)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "%m");

	conn->connecting = (rc < 0);
	conn->connect_started = start;	/* connect_timeout covers the lookup */

	if (conn->rbuf == NULL)
	{
		conn->rbuf = MemoryContextAlloc(conn_memory(), RBUF_INITIAL);
		conn->rcap = RBUF_INITIAL;
	}
	conn_reset_rbuf(conn);
	conn->wlen = conn->woff = 0;
	conn->requests = 0;
	conn->connects++;
	return true;
}

/*
 * Wait (interruptibly, within connect_timeout counted from the start) for a
 * connect begun by conn_connect_start, and check its outcome.
 */
static bool
conn_connect_finish(McConn *conn)
{
	int			soerr = 0;
	socklen_t	slen = sizeof(soerr);
	int			timeout = conn->server->cfg.connect_timeout;

	if (!conn->connecting)
		return true;
	if (timeout > 0)
	{
		long		left = mono_ms_left(conn->connect_started + (int64) timeout * 1000);

		timeout = Max(1, (int) left);
	}
	if (!conn_wait(conn, WL_SOCKET_WRITEABLE, timeout, "connect to"))
	{
		/* a connect that timed out is a connect that failed: 08001 */
		conn->fail_code = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		return false;
	}
	if (getsockopt(conn->sock, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0)
		soerr = errno;
	conn->connecting = false;
	if (soerr != 0)
	{
		errno = soerr;
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "%m");
	}
	return true;
}

/*
 * An idle socket may have been closed by the server (restart, idle timeout)
 * since its last use.  Probing costs a system call, so it is done only for
 * sockets idle for over a second; a hot loop never pays for it.
 */
static bool
conn_still_open(McConn *conn)
{
	char		b;
	ssize_t		n;

	n = recv(conn->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return true;
	return false;				/* EOF, error, or unexpected bytes */
}

/* Has the socket sat idle past its server's idle_timeout? */
static inline bool
conn_idle_expired(McConn *conn, int64 now)
{
	int			idle = conn->server->cfg.idle_timeout;

	return idle > 0 && now - conn->last_used > (int64) idle * USECS_PER_SEC;
}

/*
 * Close every idle socket of the backend past its server's idle_timeout,
 * so that backends x instances stay below memcached's connection limit.
 * Run at most once a second, from the next request of any server: the
 * list is short and nothing is read but the clock.
 */
static void
conn_sweep_idle(int64 now)
{
	dlist_mutable_iter it;

	last_idle_sweep = now;
	dlist_foreach_modify(it, &open_conns)
	{
		McConn	   *c = dlist_container(McConn, open_node, it.cur);

		if (!c->busy && conn_idle_expired(c, now))
			McConnClose(c);
	}
}

/*
 * Get a connection ready for a request without waiting: close the socket if
 * an interrupted request left it out of step, probe a long-idle socket, and
 * start a connect if there is no socket.  The connection is marked busy
 * until McConnEnd.  Returns false when the connect could not even start.
 * Whether the instance may be tried at all is pool.c's to say, before.
 */
static bool
conn_prepare(McConn *conn, bool probe)
{
	int64		now;

	if (conn->busy)
		McConnClose(conn);
	now = mono_usec();
	if (now - last_idle_sweep >= USECS_PER_SEC)
		conn_sweep_idle(now);
	if (conn->sock != PGINVALID_SOCKET && conn_idle_expired(conn, now))
		McConnClose(conn);
	if (conn->sock != PGINVALID_SOCKET &&
		(probe || now - conn->last_used > USECS_PER_SEC) && !conn_still_open(conn))
		McConnClose(conn);
	conn->in_doubt = false;
	if (conn->sock == PGINVALID_SOCKET && !conn_connect_start(conn))
		return false;
	conn->wlen = conn->woff = 0;	/* a request starts with nothing queued */
	conn->last_used = now;
	conn->stamp_fresh = true;
	conn->deadline = 0;
	dlist_move_head(&open_conns, &conn->open_node);
	conn->busy = true;
	conn->expect_wait = false;
	conn->retryable = (conn->requests > 0);
	conn->rgot = 0;
	return true;
}

/* conn_prepare, probing the socket only when it sat idle for long. */
bool
McConnPrepare(McConn *conn)
{
	return conn_prepare(conn, false);
}

/* Complete a connect McConnPrepare started; false if it failed. */
bool
McConnFinishConnect(McConn *conn)
{
	return conn_connect_finish(conn);
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
conn_closed_while_idle(McConn *conn, int err)
{
	if (!conn->retryable || conn->rgot != 0)
		return false;
	if (err != 0 && err != EPIPE && err != ECONNRESET)
		return false;
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
	if (conn_closed_while_idle(conn, err))
		return MC_IO_RETRY;
	errno = err;
	if (err == 0)
		conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action,
				  "the server closed the connection");
	else
		conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, action, "%m");
	return MC_IO_FAILED;
}

/*
 * Send a whole request (header, then optional data block and its CRLF) with
 * one sendmsg in the common case, waiting for writability when the socket
 * buffer is full.
 */
static McIoStatus
conn_send(McConn *conn, const char *hdr, size_t hlen,
		  const char *data, size_t dlen)
{
	struct iovec iov[3];
	struct msghdr msg;
	int			niov = 0;
	static char crlf[] = "\r\n";

	/* a request without data usually goes in one plain send */
	if (data == NULL)
	{
		ssize_t		n = send(conn->sock, hdr, hlen, MSG_NOSIGNAL);

		if (n == (ssize_t) hlen)
			goto sent;
		if (n > 0)
		{
			hdr += n;
			hlen -= n;
		}
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return conn_io_failed(conn, errno, "send to");
	}
	iov[niov].iov_base = unconstify(char *, hdr);
	iov[niov++].iov_len = hlen;
	if (data != NULL)
	{
		if (dlen > 0)
		{
			iov[niov].iov_base = unconstify(char *, data);
			iov[niov++].iov_len = dlen;
		}
		iov[niov].iov_base = crlf;
		iov[niov++].iov_len = 2;
	}
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = niov;

	while (msg.msg_iovlen > 0)
	{
		ssize_t		n = sendmsg(conn->sock, &msg, MSG_NOSIGNAL);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
			{
				if (!conn_wait(conn, WL_SOCKET_WRITEABLE, conn->server->cfg.io_timeout,
							   "send to"))
					return MC_IO_FAILED;
				continue;
			}
			return conn_io_failed(conn, errno, "send to");
		}
		/* drop what was written from the front of the iovec */
		while (n > 0 && msg.msg_iovlen > 0)
		{
			if ((size_t) n >= msg.msg_iov->iov_len)
			{
				n -= msg.msg_iov->iov_len;
				msg.msg_iov++;
				msg.msg_iovlen--;
			}
			else
			{
				msg.msg_iov->iov_base = (char *) msg.msg_iov->iov_base + n;
				msg.msg_iov->iov_len -= n;
				n = 0;
			}
		}
	}
sent:
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
	if (have + need > (size_t) conn->server->cfg.max_reply_size + 1)
		return conn_fail(conn, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
						 "a reply of over %zu bytes exceeds max_reply_size (%d bytes)",
						 have + need - 1, conn->server->cfg.max_reply_size);
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
static McIoStatus
conn_fill(McConn *conn, size_t need)
{
	size_t		got = 0;

	if (!conn_reserve(conn, need))
		return MC_IO_FAILED;
	while (got < need)
	{
		ssize_t		n;
		size_t		room;

		if (conn->expect_wait)
		{
			if (!conn_wait(conn, WL_SOCKET_READABLE, conn->server->cfg.io_timeout,
						   "read from"))
				return MC_IO_FAILED;
			conn->expect_wait = false;
		}
		room = conn->rcap - conn->rend - 1;
		n = recv(conn->sock, conn->rbuf + conn->rend, room, 0);
		if (n > 0)
		{
			conn->rend += n;
			conn->rbuf[conn->rend] = '\0';
			conn->rgot += n;
			conn->stamp_fresh = false;
			got += n;
			conn->expect_wait = ((size_t) n < room);
			continue;
		}
		if (n == 0)
			return conn_io_failed(conn, 0, "read from");
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
		{
			conn->expect_wait = true;
			continue;
		}
		return conn_io_failed(conn, errno, "read from");
	}
	return MC_IO_OK;
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
			return MC_IO_OK;
		case MC_REPLY_CLIENT_ERROR:
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
				if (conn->server->cfg.legacy_misses)
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
 * pool.c's McInstanceEnd.  A failing instance gives NULL, the cause kept
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

		if (!conn_prepare(conn, !req->idempotent) ||
			(conn->connecting && !conn_connect_finish(conn)))
			return NULL;
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
				return base;
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
	conn->busy = false;
	if (conn->rstart != conn->rend)
		McConnClose(conn);
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
	McConnClose(conn);
	if (reply->type == MC_REPLY_SERVER_ERROR &&
		strstr(line, "object too large") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("value is too large for memcached server \"%s\"", conn->server->name),
				 errdetail_internal("Instance %s replied: %s", name, line),
				 errhint("memcached's item size limit is set with its -I option (1 MB by default).")));
	if (reply->type == MC_REPLY_SERVER_ERROR || reply->type == MC_REPLY_CLIENT_ERROR ||
		reply->type == MC_REPLY_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("memcached server \"%s\" reported an error", conn->server->name),
				 errdetail_internal("Instance %s replied: %s", name, line)));
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("unexpected reply from memcached server \"%s\"", conn->server->name),
			 errdetail_internal("Instance %s replied: %s", name, line)));
}

/*
 * Run a text-protocol command answered by "STAT <name> <value>" lines and
 * "END" ("stats", "stats slabs", "stats items", "stats settings"), handing
 * each line to cb.  A failing instance, or one that answers something else,
 * gives false with the cause kept in conn (McConnFailure), so a stats view
 * can show one row per unreachable instance instead of failing as a whole.
 * Cancels and timeouts of the statement are never swallowed.
 *
 * Bounds, so that no server can hold a view: limit_ms (the views' own
 * bound, 0 = none) covers the whole command, connect included; io_timeout
 * covers the whole reply, not each gap in it, so a trickled reply costs at
 * most one io_timeout; and a reply past STATS_MAX_BYTES is cut off (the
 * callers keep what the lines say: memory grows with them).
 */
bool
McConnStatLines(McConn *conn, const char *cmd, int limit_ms,
				McStatLineFn cb, void *arg)
{
	size_t		len = strlen(cmd);
	int64		view_deadline = limit_ms > 0 ?
		mono_usec() + (int64) limit_ms * 1000 : 0;

	for (;;)					/* at most twice: see conn_closed_while_idle */
	{
		McIoStatus	st;
		int			io_timeout = conn->server->cfg.io_timeout;

		if (!McConnPrepare(conn))
			return false;
		conn->deadline = view_deadline;
		conn->deadline_ms = limit_ms;
		if (conn->connecting && !conn_connect_finish(conn))
			return false;
		if (io_timeout > 0)
		{
			int64		d = mono_usec() + (int64) io_timeout * 1000;

			if (conn->deadline == 0 || d < conn->deadline)
			{
				conn->deadline = d;
				conn->deadline_ms = io_timeout;
			}
		}
		st = conn_send(conn, cmd, len, NULL, 0);
		while (st == MC_IO_OK)
		{
			McReply		r;
			char	   *base = conn->rbuf + conn->rstart;
			McReplyType t = mc_parse_reply_z(base, conn->rend - conn->rstart, &r);

			/* a reply that never drains never waits: check here too */
			CHECK_FOR_INTERRUPTS();
			if (conn->deadline != 0 && mono_usec() >= conn->deadline)
				return conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, "read from",
								 "timed out after %d ms", conn->deadline_ms);
			if (conn->rgot > STATS_MAX_BYTES)
				return conn_fail(conn, false, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
								 "the stats reply exceeds %d bytes", STATS_MAX_BYTES);
			if (t == MC_REPLY_NEED_MORE)
				st = conn_fill(conn, r.need);
			else if (t == MC_REPLY_STAT)
			{
				cb(arg, base + r.msg_off, r.msg_len,
				   base + r.stat_value_off, r.stat_value_len);
				McConnConsume(conn, r.consumed);
			}
			else if (t == MC_REPLY_END)
			{
				McConnConsume(conn, r.consumed);
				McConnEnd(conn);
				return true;
			}
			else if (t == MC_REPLY_BAD)
				return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
								 "the reply is not valid meta protocol");
			else
				return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
								 "unexpected reply to a stats command");
		}
		if (st == MC_IO_FAILED)
			return false;
	}
}
