/*
 * conn_connect.c — opening a connection's socket.
 *
 * Owns: resolving host names without blocking the backend (glibc's
 * getaddrinfo_a, abandoned lookups reaped later), starting a non-blocking
 * TCP connect and finishing it, the TLS handshake (conn_tls.c's steps) and
 * the ASCII login (memcached -Y) with the user mapping's credentials, all
 * within connect_timeout.  Must not: send requests, or judge instances (a
 * failure is kept in the connection as conn_io.c does).
 */
#include "postgres.h"

#include <netdb.h>				/* getaddrinfo_a: _GNU_SOURCE, set by PGXS */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
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
bool
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
	conn_fd_opened(conn);
	(void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = connect(sock, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (rc < 0 && errno != EINPROGRESS)
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "%m");

	conn->tcp_pending = (rc < 0);
	conn->connecting = conn->tcp_pending || srv->cfg.tls != MC_TLS_DISABLE ||
		srv->cfg.username != NULL;
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
 * TCP connect begun by conn_connect_start, and check its outcome.
 */
static bool
tcp_finish(McConn *conn)
{
	int			soerr = 0;
	socklen_t	slen = sizeof(soerr);
	int			timeout = conn->server->cfg.connect_timeout;
	int64		saved = conn->deadline;
	int			saved_ms = conn->deadline_ms;
	bool		ok;

	/*
	 * The connect's own deadline, counted from its start (the lookup
	 * included), as a bound on the whole wait: a timeout then names
	 * connect_timeout, not what was left of it.
	 */
	if (timeout > 0)
	{
		int64		d = conn->connect_started + (int64) timeout * 1000;

		if (saved == 0 || d < saved)
		{
			conn->deadline = d;
			conn->deadline_ms = timeout;
		}
		timeout = 0;
	}
	ok = conn_wait(conn, WL_SOCKET_WRITEABLE, timeout, "connect to");
	conn->deadline = saved;
	conn->deadline_ms = saved_ms;
	if (!ok)
	{
		/* a connect that timed out is a connect that failed: 08001 */
		conn->fail_code = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		return false;
	}
	if (getsockopt(conn->sock, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0)
		soerr = errno;
	conn->tcp_pending = false;
	if (soerr != 0)
	{
		errno = soerr;
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "%m");
	}
	return true;
}

/*
 * The TLS handshake, step by step: OpenSSL says which way the socket must
 * be ready, the connection's wait set waits for it (io_timeout per wait,
 * the connect deadline over all of it, interrupts serviced).  A server
 * that accepts and never answers is a timeout here, like a plaintext one
 * that swallows the hello waiting for a line end.
 */
static bool
tls_handshake(McConn *conn)
{
	if (!conn_tls_begin(conn))
		return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 "connect to", "%s", conn_tls_why());
	for (;;)
	{
		McTlsStatus st = conn_tls_handshake(conn);

		if (st == MC_TLS_DONE)
			return true;
		if (st == MC_TLS_ERROR)
			return conn_fail(conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							 "connect to", "%s", conn_tls_why());
		if (!conn_wait(conn, st == MC_TLS_WANT_READ ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
					   conn->server->cfg.io_timeout, "connect to"))
		{
			conn->fail_code = ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
			strlcat(conn->fail_why,
					" in the TLS handshake: the server did not answer it (is it plaintext?)",
					sizeof(conn->fail_why));
			return false;
		}
	}
}

/*
 * A login answered with what is neither STORED nor a rejected password.
 * Only the answer's first word is quoted ("ERROR", "CLIENT_ERROR"): the
 * rest may echo the request, password included (a proxy, a server without
 * -Y quoting a bad data chunk), and its bytes may not be text.  Not even
 * that word when it holds the password.
 */
static bool
login_refused(McConn *conn, const char *line)
{
	const char *pw = conn->server->cfg.password;
	char		word[33];
	size_t		n = 0;

	while (n < sizeof(word) - 1 && line[n] > ' ' && line[n] < 0x7f)
	{
		word[n] = line[n];
		n++;
	}
	word[n] = '\0';
	if (n == 0 || memmem(word, n, pw, strlen(pw)) != NULL)
		return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "log in to",
						 "the server did not accept the login (its answer is not a memcached reply)");
	return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "log in to",
					 "the server did not accept the login (it answered \"%s\")", word);
}

/*
 * ASCII authentication (memcached -Y): a classic set whose data is "user
 * password", before any other command; STORED means logged in.  The item
 * is sent already expired (exptime -1): a server without -Y stores nothing
 * anyone could read the password from.  The password is wiped from the
 * stack once sent and appears in no message.
 */
static bool
login(McConn *conn)
{
	McServerConfig *cfg = &conn->server->cfg;
	size_t		ulen = strlen(cfg->username);
	size_t		plen = strlen(cfg->password);
	char		req[64 + 2 * MC_AUTH_FIELD_MAX + 3];
	int			hlen;
	McIoStatus	st;
	const char *line;
	size_t		len;

	/* one buffer, written at once: no copy of the password elsewhere */
	hlen = snprintf(req, sizeof(req), "set mcfdw:auth 0 -1 %zu\r\n", ulen + 1 + plen);
	Assert(hlen + ulen + 1 + plen + 2 <= sizeof(req));
	memcpy(req + hlen, cfg->username, ulen);
	req[hlen + ulen] = ' ';
	memcpy(req + hlen + ulen + 1, cfg->password, plen);
	memcpy(req + hlen + ulen + 1 + plen, "\r\n", 2);
	st = conn_write(conn, req, hlen + ulen + 1 + plen + 2, NULL, 0);
	explicit_bzero(req, sizeof(req));
	if (st != MC_IO_OK)
		return false;
	conn->expect_wait = true;
	for (;;)
	{
		line = conn->rbuf + conn->rstart;
		len = conn->rend - conn->rstart;
		if (memchr(line, '\n', len) != NULL)
			break;
		if (len > 256)
			return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "log in to",
							 "the reply to the login is not a memcached reply");
		if (conn_fill(conn, 1) != MC_IO_OK)
			return false;
	}
	if (strncmp(line, "STORED\r\n", 8) == 0)
	{
		conn_reset_rbuf(conn);
		conn->rgot = 0;
		conn->expect_wait = false;
		return true;
	}
	/* memcached 1.6.18 answers a wrong password with "unauthenticated" */
	if (strncmp(line, "CLIENT_ERROR authentication failure", 35) == 0 ||
		strncmp(line, "CLIENT_ERROR unauthenticated", 28) == 0)
	{
		conn_fail(conn, true, ERRCODE_INVALID_PASSWORD, "log in to",
				  "the server rejected the password of user \"%s\"", cfg->username);
		conn->fail_nocount = true;
		conn->fail_hint = "Check the username and password options of the user mapping.";
		return false;
	}
	return login_refused(conn, line);
}

/*
 * Finish what conn_connect_start began: the TCP connect, then the TLS
 * handshake and the login when the server has them.  connect_timeout
 * bounds all of it from the start of the connect (and a view's own bound,
 * when shorter, stays in force); io_timeout bounds each wait.
 */
bool
conn_connect_finish(McConn *conn)
{
	McServerConfig *cfg = &conn->server->cfg;
	int64		saved = conn->deadline;
	int			saved_ms = conn->deadline_ms;

	if (!conn->connecting)
		return true;
	if (conn->tcp_pending && !tcp_finish(conn))
		return false;
	if (cfg->tls != MC_TLS_DISABLE || cfg->username != NULL)
	{
		if (cfg->connect_timeout > 0)
		{
			int64		d = conn->connect_started + (int64) cfg->connect_timeout * 1000;

			if (saved == 0 || d < saved)
			{
				conn->deadline = d;
				conn->deadline_ms = cfg->connect_timeout;
			}
		}
		/* each wait's io_timeout runs from its own start from here on */
		conn->stamp_fresh = false;
		if (cfg->tls != MC_TLS_DISABLE && !tls_handshake(conn))
			return false;
		if (cfg->username != NULL && !login(conn))
			return false;
		conn->deadline = saved;
		conn->deadline_ms = saved_ms;
	}
	conn->connecting = false;
	return true;
}
