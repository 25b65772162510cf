/*
 * conn_connect.c — opening a connection's socket.
 *
 * Owns: a connect in progress (McConn's connect); resolving host names
 * without blocking the backend (glibc's getaddrinfo_a, abandoned lookups
 * reaped later), starting a non-blocking TCP or Unix-socket connect (a
 * socket path needs no lookup; ENOENT and EACCES get their own causes),
 * and finishing it in steps that never wait: the TCP connect, the TLS
 * handshake (conn_tls.c's steps) and the ASCII login (memcached -Y) with
 * the user mapping's credentials, each saying which way its socket must
 * be ready and until when (connect_timeout over all of it, io_timeout per
 * wait).  The single-key path waits for the steps on the connection's own
 * wait set (McConnConnectFinish); a pipelined call's connects are
 * advanced together by pipeline.c's one wait.  Must not: send requests,
 * or judge instances (a failure is recorded through conn_fail.c).
 */
#include "postgres.h"

#include <netdb.h>				/* getaddrinfo_a: _GNU_SOURCE, set by PGXS */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "conn_int.h"

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

/*
 * Where a connect stands (McConn's connect.step).  Each step runs until its
 * socket would block and says which way it must be ready; whoever waits
 * (McConnConnectFinish for one connection, pipeline.c for all of a call)
 * comes back when it is.
 */
typedef enum McConnectStep
{
	STEP_TCP,					/* the TCP connect is in progress */
	STEP_TLS,					/* the TLS handshake */
	STEP_LOGIN_SEND,			/* the login request (memcached -Y), being sent */
	STEP_LOGIN_READ,			/* ... and its answer, being read */
	STEP_DONE
} McConnectStep;

/* The step after the TCP connect or the TLS handshake: what the server has. */
static McConnectStep
step_after(McConn *conn, McConnectStep step)
{
	const McServerConfig *cfg = conn->net->cfg;

	if (step == STEP_TCP && cfg->tls != MC_TLS_DISABLE)
		return STEP_TLS;
	if (cfg->username != NULL)
		return STEP_LOGIN_SEND;
	return STEP_DONE;
}

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
	l = MemoryContextAllocZero(conn_io_memory(), sizeof(McLookup));
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
 * The address of a Unix socket entry (port 0): its path, which
 * endpoints.c bounded by sun_path.  An addrinfo like getaddrinfo's, freed
 * by address_free, so the connect below is the same for both.
 */
static struct addrinfo *
unix_address(const char *path)
{
	struct addrinfo *ai = palloc0(sizeof(struct addrinfo) + sizeof(struct sockaddr_un));
	struct sockaddr_un *sun = (struct sockaddr_un *) (ai + 1);

	StaticAssertStmt(MC_SOCKET_PATH_MAX < sizeof(sun->sun_path),
					 "a socket path must fit sun_path");
	sun->sun_family = AF_UNIX;
	strlcpy(sun->sun_path, path, sizeof(sun->sun_path));
	ai->ai_family = AF_UNIX;
	ai->ai_socktype = SOCK_STREAM;
	ai->ai_addr = (struct sockaddr *) sun;
	ai->ai_addrlen = sizeof(struct sockaddr_un);
	return ai;
}

/* Free what conn_resolve or unix_address made. */
static void
address_free(struct addrinfo *res)
{
	if (res->ai_family == AF_UNIX)
		pfree(res);
	else
		freeaddrinfo(res);
}

/*
 * A Unix socket's connect failed (errno): the causes an administrator
 * meets first get words of their own (the instance's name, in every
 * message, is the path).  Returns false.
 */
static bool
unix_connect_failed(McConn *conn)
{
	int			err = errno;

	if (err == ENOENT)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "the Unix socket does not exist (is memcached running, with -s and this path?)");
	if (err == EACCES || err == EPERM)
		return conn_fail(conn, false, ERRCODE_INSUFFICIENT_PRIVILEGE,
						 "connect to", "permission denied on the Unix socket: the PostgreSQL server's operating-system user needs write permission on the socket (memcached -a) and search permission on its directories");
	if (err == ECONNREFUSED)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "nothing listens on the Unix socket (a stale socket file?)");
	if (err == EAGAIN)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "the listen queue of the Unix socket is full");
	errno = err;
	return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					 "connect to", "%m");
}

/*
 * Start a non-blocking TCP connection.  Host names are resolved here, at
 * connect time, so DNS changes are picked up by the next reconnect; the
 * lookup and the connect together get connect_timeout, and both can be
 * cancelled.  The connect itself completes in steps (McConnConnectStep),
 * so a pipelined call can have the handshakes with all its instances in
 * flight at once.
 */
bool
conn_connect_start(McConn *conn)
{
	McNet	   *net = conn->net;
	McEndpoint *ep = &net->cfg->endpoints[conn->index];
	struct addrinfo *res = NULL;
	int			rc;
	int			one = 1;
	pgsocket	sock;
	int64		start = mono_usec();
	int			timeout = net->cfg->connect_timeout;
	bool		timed_out;

	/*
	 * A run with a deadline gets no connect that outlasts it.  The cap is
	 * the caller's for this connect only: taken, so an error from here on
	 * cannot leave it to a later one.
	 */
	if (conn->connect.cap > 0 && (timeout <= 0 || conn->connect.cap < timeout))
		timeout = conn->connect.cap;
	conn->connect.cap = 0;

	/*
	 * The connection's entry of the client statistics, before anything can
	 * fail: a request that succeeds was sent on a socket connected here, so
	 * conn.c's McConnEnd counts it without looking.
	 */
	conn_tally_find(conn);
	if (ep->port == 0)
	{
		res = unix_address(ep->host);
		rc = 0;
		timed_out = false;
	}
	else
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
		address_free(res);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not connect to memcached server \"%s\"", net->name),
				 errdetail("This session has no file descriptor left for another connection, and every connection it holds is in use."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	}
	sock = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sock == PGINVALID_SOCKET)
	{
		int			save = errno;

		ReleaseExternalFD();
		address_free(res);
		errno = save;
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "could not create socket: %m");
	}
	conn_fd_opened(conn, sock, &mc_plain_transport);
	if (ep->port != 0)
		(void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = connect(sock, res->ai_addr, res->ai_addrlen);
	address_free(res);
	if (rc < 0 && ep->port == 0)
		return unix_connect_failed(conn);	/* never in progress */
	if (rc < 0 && errno != EINPROGRESS)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "%m");

	conn->connect.tcp_pending = (rc < 0);
	conn->connect.step = conn->connect.tcp_pending ? STEP_TCP : step_after(conn, STEP_TCP);
	conn->connect.active = (conn->connect.step != STEP_DONE);
	conn->connect.started = start;	/* connect_timeout covers the lookup */
	conn->connect.ms = timeout;
	conn->connect.login_sent = 0;
	conn_io_opened(conn);
	conn_out_clear(conn);
	return true;
}

/* What a step was doing, for the message of a wait that ran out. */
static const char *
step_action(McConnectStep step)
{
	return step == STEP_LOGIN_SEND ? "send to" :
		step == STEP_LOGIN_READ ? "read from" : "connect to";
}

/*
 * A wait of the step ran out (the timeout recorded as conn_io_wait records
 * it).  The TCP connect and the handshake are the connect failing: 08001;
 * a handshake the server never answers is probably a plaintext server
 * swallowing the hello while it waits for a line end.  Returns false.
 */
static bool
wait_ran_out(McConn *conn, McConnectStep step)
{
	if (step == STEP_TCP || step == STEP_TLS)
		conn_fail_amend(conn, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						step == STEP_TLS ?
						" in the TLS handshake: the server did not answer it (is it plaintext?)" :
						NULL);
	return false;
}

/*
 * When the step's current wait runs out (mono_usec; 0 = never), and the
 * bound that sets it, for the message: connect_timeout from the start of
 * the connect (the lookup included) over all of it, and io_timeout per
 * wait from the handshake on (the TCP connect has connect_timeout alone).
 */
static int64
wait_expiry(McConn *conn, int *bound_ms)
{
	const McServerConfig *cfg = conn->net->cfg;
	int64		expires = 0;
	int			ms = 0;

	if (conn->connect.step != STEP_TCP && cfg->io_timeout > 0)
	{
		expires = conn->connect.wait_started + (int64) cfg->io_timeout * 1000;
		ms = cfg->io_timeout;
	}
	if (conn->connect.ms > 0)
	{
		int64		d = conn->connect.started + (int64) conn->connect.ms * 1000;

		if (expires == 0 || d < expires)
		{
			expires = d;
			ms = conn->connect.ms;
		}
	}
	if (bound_ms)
		*bound_ms = ms;
	return expires;
}

/* The TCP connect: done, failed, or still in progress (wait to write). */
static McConnectStatus
tcp_step(McConn *conn)
{
	struct pollfd pfd;
	int			soerr = 0;
	socklen_t	slen = sizeof(soerr);
	int			rc;

	pfd.fd = conn->fd.sock;
	pfd.events = POLLOUT;
	pfd.revents = 0;
	do
		rc = poll(&pfd, 1, 0);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
	{
		conn->connect.events = WL_SOCKET_WRITEABLE;
		return MC_CONNECT_WAIT;
	}
	if (rc < 0 || getsockopt(conn->fd.sock, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0)
		soerr = errno;
	conn->connect.tcp_pending = false;
	if (soerr != 0)
	{
		errno = soerr;
		conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
				  "connect to", "%m");
		return MC_CONNECT_FAILED;
	}
	return MC_CONNECT_DONE;
}

/* One step of the TLS handshake (conn_tls.c), which says which way to wait. */
static McConnectStatus
tls_step(McConn *conn)
{
	McXferStatus st;

	if (conn->tls.ssl == NULL && !conn_tls_begin(conn))
	{
		conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
				  "connect to", "%s", conn_tls_why());
		return MC_CONNECT_FAILED;
	}
	st = conn_tls_handshake(conn);
	if (st == MC_XFER_DONE)
		return MC_CONNECT_DONE;
	if (st == MC_XFER_ERROR)
	{
		conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
				  "connect to", "%s", conn_tls_why());
		return MC_CONNECT_FAILED;
	}
	conn->connect.events = st == MC_XFER_WANT_READ ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
	return MC_CONNECT_WAIT;
}

/*
 * A login answered with what is neither STORED nor a rejected password.
 * Only the answer's first word is quoted ("ERROR", "CLIENT_ERROR"): the
 * rest may echo the request, password included (a proxy, a server without
 * -Y quoting a bad data chunk), and its bytes may not be text.  Not even
 * that word when it holds the password.
 */
static void
login_refused(McConn *conn, const char *line)
{
	const char *pw = conn->net->cfg->password;
	char		word[33];
	size_t		n = 0;

	while (n < sizeof(word) - 1 && line[n] > ' ' && line[n] < 0x7f)
	{
		word[n] = line[n];
		n++;
	}
	word[n] = '\0';
	if (n == 0 || memmem(word, n, pw, strlen(pw)) != NULL)
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "log in to",
				  "the server did not accept the login (its answer is not a memcached reply)");
	else
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "log in to",
				  "the server did not accept the login (it answered \"%s\")", word);
}

/*
 * ASCII authentication (memcached -Y): a classic set whose data is "user
 * password", before any other command; STORED means logged in.  The item
 * is sent already expired (exptime -1): a server without -Y stores nothing
 * anyone could read the password from.  The request is built on the stack
 * for each attempt and wiped at once (a send that would block resumes at
 * login_sent, over the same bytes, as OpenSSL requires): no copy of the
 * password outlives the step, and none appears in any message.
 */
static McConnectStatus
login_send(McConn *conn)
{
	const McServerConfig *cfg = conn->net->cfg;
	size_t		ulen = strlen(cfg->username);
	size_t		plen = strlen(cfg->password);
	char		req[64 + 2 * MC_AUTH_FIELD_MAX + 3];
	int			hlen;
	size_t		total;
	McConnectStatus result = MC_CONNECT_DONE;

	hlen = snprintf(req, sizeof(req), "set mcfdw:auth 0 -1 %zu\r\n", ulen + 1 + plen);
	total = hlen + ulen + 1 + plen + 2;
	Assert(total <= sizeof(req));
	memcpy(req + hlen, cfg->username, ulen);
	req[hlen + ulen] = ' ';
	memcpy(req + hlen + ulen + 1, cfg->password, plen);
	memcpy(req + hlen + ulen + 1 + plen, "\r\n", 2);
	while (conn->connect.login_sent < total)
	{
		McXferStatus st;
		ssize_t		n = conn->fd.xfer->write(conn, req + conn->connect.login_sent,
										  total - conn->connect.login_sent, &st);

		if (n == 0)
		{
			conn->connect.events = st == MC_XFER_WANT_READ ?
				WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
			result = MC_CONNECT_WAIT;
			break;
		}
		if (n < 0)
		{
			(void) conn_io_xfer_failed(conn, st, "send to");
			result = MC_CONNECT_FAILED;
			break;
		}
		conn->connect.login_sent += n;
	}
	explicit_bzero(req, sizeof(req));
	return result;
}

/* The answer to the login: one line, read as it comes. */
static McConnectStatus
login_read(McConn *conn)
{
	const McServerConfig *cfg = conn->net->cfg;
	const char *line;
	size_t		len;

	for (;;)
	{
		ssize_t		n;
		size_t		room;
		McXferStatus st;

		line = conn->io.rbuf + conn->io.rstart;
		len = conn->io.rend - conn->io.rstart;
		if (memchr(line, '\n', len) != NULL)
			break;
		if (len > 256)
		{
			conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "log in to",
					  "the reply to the login is not a memcached reply");
			return MC_CONNECT_FAILED;
		}
		if (!conn_io_reserve(conn, 1))
			return MC_CONNECT_FAILED;
		room = conn->io.rcap - conn->io.rend - 1;
		n = conn->fd.xfer->read(conn, conn->io.rbuf + conn->io.rend, room, &st);
		if (n == 0)
		{
			conn->connect.events = st == MC_XFER_WANT_WRITE ?
				WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
			return MC_CONNECT_WAIT;
		}
		if (n < 0)
		{
			(void) conn_io_xfer_failed(conn, st, "read from");
			return MC_CONNECT_FAILED;
		}
		conn_io_received(conn, n);
	}
	if (strncmp(line, "STORED\r\n", 8) == 0)
	{
		conn_io_forget(conn);
		return MC_CONNECT_DONE;
	}
	/* memcached 1.6.18 answers a wrong password with "unauthenticated" */
	if (strncmp(line, "CLIENT_ERROR authentication failure", 35) == 0 ||
		strncmp(line, "CLIENT_ERROR unauthenticated", 28) == 0)
	{
		conn_fail(conn, true, ERRCODE_INVALID_PASSWORD, "log in to",
				  "the server rejected the password of user \"%s\"", cfg->username);
		conn_fail_nocount(conn);
		conn_fail_hint(conn, "Check the username and password options of the user mapping.");
		return MC_CONNECT_FAILED;
	}
	login_refused(conn, line);
	return MC_CONNECT_FAILED;
}

/* Is a connect (TCP, TLS handshake or login) still in progress? */
bool
McConnConnecting(McConn *conn)
{
	return conn->connect.active;
}

/*
 * Advance a connect as far as it goes without waiting: the TCP connect,
 * then the TLS handshake and the login when the server has them.  On
 * MC_CONNECT_WAIT, McConnConnectWait says for what and until when; on
 * MC_CONNECT_FAILED the cause is kept in the connection (closed), to be
 * counted by health.c as any failure of the instance.
 */
McConnectStatus
McConnConnectStep(McConn *conn)
{
	McConnectStatus st = MC_CONNECT_DONE;

	while (conn->connect.active && st == MC_CONNECT_DONE)
	{
		McConnectStep step = (McConnectStep) conn->connect.step;
		McConnectStep next = STEP_DONE;

		/* each wait's io_timeout runs from its own start from here on */
		if (step != STEP_TCP)
			conn_io_stale(conn);
		switch (step)
		{
			case STEP_TCP:
				st = tcp_step(conn);
				next = step_after(conn, STEP_TCP);
				break;
			case STEP_TLS:
				st = tls_step(conn);
				next = step_after(conn, STEP_TLS);
				break;
			case STEP_LOGIN_SEND:
				st = login_send(conn);
				next = STEP_LOGIN_READ;
				break;
			case STEP_LOGIN_READ:
				st = login_read(conn);
				break;
			case STEP_DONE:
				break;
		}
		if (st == MC_CONNECT_DONE)
		{
			conn->connect.step = next;
			conn->connect.active = (next != STEP_DONE);
		}
		else if (st == MC_CONNECT_WAIT)
			conn->connect.wait_started = mono_usec();
	}
	return st;
}

/*
 * The connect waits for the socket events *events, for the returned
 * milliseconds at most (-1: no bound; 0: its time ran out, see
 * McConnConnectExpired).
 */
long
McConnConnectWait(McConn *conn, uint32 *events)
{
	int64		expires = wait_expiry(conn, NULL);

	*events = conn->connect.events;
	return expires == 0 ? -1 : mono_ms_left(expires);
}

/*
 * The connect's wait ran out (McConnConnectWait said 0): a failure of the
 * instance, with the message a wait of the single-key path gives.
 */
void
McConnConnectExpired(McConn *conn)
{
	McConnectStep step = (McConnectStep) conn->connect.step;
	int			ms;

	(void) wait_expiry(conn, &ms);
	conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, step_action(step),
			  "timed out after %d ms", ms);
	wait_ran_out(conn, step);
}

/*
 * Finish what conn_connect_start began, waiting on the connection's own
 * wait set: the single-key path.  connect_timeout bounds all of it from
 * the start of the connect (and a view's own bound, when shorter, stays in
 * force); io_timeout bounds each wait from the handshake on.
 */
bool
McConnConnectFinish(McConn *conn)
{
	const McServerConfig *cfg = conn->net->cfg;
	int64		saved = conn->io.deadline;
	int			saved_ms = conn->io.deadline_ms;
	bool		ok;

	if (!conn->connect.active)
		return true;
	if (conn->connect.ms > 0)
	{
		int64		d = conn->connect.started + (int64) conn->connect.ms * 1000;

		if (saved == 0 || d < saved)
			conn_io_bound(conn, d, conn->connect.ms);
	}
	for (;;)
	{
		McConnectStatus st = McConnConnectStep(conn);
		McConnectStep step = (McConnectStep) conn->connect.step;

		if (st != MC_CONNECT_WAIT)
		{
			ok = (st == MC_CONNECT_DONE);
			break;
		}
		if (!conn_io_wait(conn, conn->connect.events,
					   step == STEP_TCP ? 0 : cfg->io_timeout, step_action(step)))
		{
			ok = wait_ran_out(conn, step);
			break;
		}
	}
	conn_io_bound(conn, saved, saved_ms);
	return ok;
}
