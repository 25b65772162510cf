/*
 * conn_tls.c — the TLS transport: a connection's bytes through the
 * system's OpenSSL.
 *
 * Owns: the SSL_CTX of a server entry (McNet's tls_ctx: made at its first
 * TLS connect from the tls* options, freed with the entry's configuration,
 * forgotten when net.c rebuilds that), a connection's
 * TLS part (McConn's tls: its SSL object, the session kept for the next
 * connect), the handshake step, and the transport (McTransport,
 * conn_int.h) the connection then uses: a read, a write, a whole request
 * gathered into one record when small, a peek that tells a live idle
 * socket from a closed one, whether OpenSSL holds bytes epoll cannot see,
 * the session kept for resumption.  Each step returns at once with what it
 * needs next (the socket readable or writable); only the whole-request
 * write waits, on the connection's own wait set (conn_io_wait), so
 * connect_timeout, io_timeout, cancel and statement_timeout work as in
 * plain TCP.  Must not: touch the socket itself (conn_fd.c hands it the
 * socket's bytes, conn_fd_transport), or record failures: it describes
 * them (tls_why) and conn_io.c's conn_io_xfer_failed reports them.
 *
 * The backend may use OpenSSL itself (ssl = on): this file keeps OpenSSL's
 * per-thread error queue empty around each of its calls, so neither side
 * reads the other's errors.  On the per-request path the queue is only
 * looked at (clear_queue): clearing it costs as much as a third of a
 * record's decryption.
 */
#include "postgres.h"

#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "utils/memutils.h"

#include "conn_int.h"

#define TLS_GATHER_MAX	16384	/* one TLS record: a request up to this size is
								 * gathered and written at once */

/* The cause of the last failed step, for the caller's message. */
static char tls_why[256];

/* OpenSSL's reason for the error at the head of its queue, then clear it. */
static const char *
ssl_reason(void)
{
	unsigned long e = ERR_get_error();
	const char *r;

	ERR_clear_error();
	if (e == 0)
		return "no TLS error reported";
#ifdef ERR_SYSTEM_ERROR
	/* a file that cannot be opened: OpenSSL 3 keeps the errno */
	if (ERR_SYSTEM_ERROR(e))
		return strerror(ERR_GET_REASON(e));
#endif
	r = ERR_reason_error_string(e);
	return r ? r : "unknown TLS error";
}

/* The description of the last failure of a step of this file. */
const char *
conn_tls_why(void)
{
	return tls_why;
}

/*
 * Empty OpenSSL's error queue before a call whose failure SSL_get_error
 * must judge.  It is almost always empty already (every failure here
 * clears it, and the backend's own TLS clears before its calls): peeking
 * costs a tenth of ERR_clear_error, which walks every slot of the queue.
 */
static inline void
clear_queue(void)
{
	if (unlikely(ERR_peek_error() != 0))
		ERR_clear_error();
}

/* SSL_CTX_free for the reset of the entry's configuration context. */
static void
free_ctx(void *arg)
{
	SSL_CTX_free((SSL_CTX *) arg);
}

/*
 * A configuration error: the server's TLS files cannot be used.  The half
 * made context is freed, then the error raised at once: every instance
 * would fail alike, and no instance is to blame.
 */
static void
config_error(McNet *net, SSL_CTX *ctx, const char *what, const char *file)
{
	char		reason[256];

	strlcpy(reason, ssl_reason(), sizeof(reason));
	SSL_CTX_free(ctx);
	ereport(ERROR,
			(errcode(ERRCODE_CONFIG_FILE_ERROR),
			 errmsg("could not load %s \"%s\" for memcached server \"%s\"",
					what, file, net->name),
			 errdetail("%s", reason)));
}

/*
 * The server entry's SSL_CTX, made at the first TLS connect: the mode's
 * verification, the root CAs (the file given, else the system's), the
 * client certificate.  It lives as long as the configuration it was made
 * from: the reset of the entry's context frees it, so a changed option
 * takes effect with the rebuild.  SSL objects hold their own reference, so
 * connections carried over a rebuild stay valid.
 */
static SSL_CTX *
server_ctx(McNet *net)
{
	static bool initialized = false;
	const McServerConfig *cfg = net->cfg;
	SSL_CTX    *ctx;
	MemoryContextCallback *cb;

	if (net->tls_ctx != NULL)
		return net->tls_ctx;
	if (!initialized)
	{
		/* harmless when the backend's own TLS initialized OpenSSL before */
		if (OPENSSL_init_ssl(0, NULL) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not initialize OpenSSL: %s", ssl_reason())));
		initialized = true;
	}
	/* allocated first: nothing can fail between the context and its callback */
	cb = MemoryContextAllocZero(net->cxt, sizeof(MemoryContextCallback));
	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a TLS context: %s", ssl_reason())));
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* partial writes and a buffer that moves: see McConnWriteSpace */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

	/*
	 * Read ahead: one read() takes a whole record (and whatever follows),
	 * where OpenSSL would otherwise read its 5-byte header and its body
	 * with two.  The bytes it holds beyond a record are what
	 * McConnHasPending reports, tls.starved telling a partial record.
	 */
	SSL_CTX_set_read_ahead(ctx, 1);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	/* a close without close_notify is an EOF, as on plain TCP */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
	if (cfg->tls >= MC_TLS_VERIFY_CA)
	{
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		if (cfg->tls_ca_file != NULL)
		{
			if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_file, NULL) != 1)
				config_error(net, ctx, "TLS root certificate file", cfg->tls_ca_file);
		}
		else if (SSL_CTX_set_default_verify_paths(ctx) != 1)
			config_error(net, ctx, "the system's TLS root certificates", "");
	}
	else
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	if (cfg->tls_cert_file != NULL)
	{
		if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1)
			config_error(net, ctx, "TLS client certificate file", cfg->tls_cert_file);
		if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1 ||
			SSL_CTX_check_private_key(ctx) != 1)
			config_error(net, ctx, "TLS client key file", cfg->tls_key_file);
	}
	ERR_clear_error();
	cb->func = free_ctx;
	cb->arg = ctx;
	MemoryContextRegisterResetCallback(net->cxt, cb);
	net->tls_ctx = ctx;
	return ctx;
}

/* The name the certificate must carry: tls_server_name, else the host. */
static const char *
expected_name(McConn *conn)
{
	const McServerConfig *cfg = conn->net->cfg;

	return cfg->tls_server_name ? cfg->tls_server_name :
		cfg->endpoints[conn->index].host;
}

/*
 * Put a new SSL object on the connection's (connected) socket, with SNI
 * and, for verify-full, the name or address the certificate must match.
 * False (tls_why set) when OpenSSL cannot make one.
 */
bool
conn_tls_begin(McConn *conn)
{
	SSL_CTX    *ctx = server_ctx(conn->net);
	const char *name = expected_name(conn);
	unsigned char addr[16];
	bool		is_ip = inet_pton(AF_INET, name, addr) == 1 ||
		inet_pton(AF_INET6, name, addr) == 1;
	SSL		   *ssl;

	ERR_clear_error();
	ssl = SSL_new(ctx);
	if (ssl == NULL || SSL_set_fd(ssl, conn->fd.sock) != 1)
	{
		snprintf(tls_why, sizeof(tls_why), "could not set up TLS: %s", ssl_reason());
		if (ssl)
			SSL_free(ssl);
		return false;
	}
	conn->tls.ssl = ssl;
	conn->tls.starved = false;
	conn_fd_transport(conn, &mc_tls_transport);
	/* SNI is for names only (RFC 6066) */
	if (!is_ip)
		(void) SSL_set_tlsext_host_name(ssl, name);
	if (conn->net->cfg->tls == MC_TLS_VERIFY_FULL)
	{
		X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
		int			ok;

		X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name) :
			X509_VERIFY_PARAM_set1_host(param, name, 0);
		if (ok != 1)
		{
			snprintf(tls_why, sizeof(tls_why), "could not set up TLS: %s", ssl_reason());
			return false;
		}
	}
	if (conn->tls.session != NULL)
		(void) SSL_set_session(ssl, conn->tls.session);
	ERR_clear_error();
	return true;
}

/*
 * The outcome of a failed SSL_* call (ret), as the caller acts on it; for
 * MC_XFER_ERROR, tls_why says why.  Clears OpenSSL's error queue.
 */
static McXferStatus
tls_status(McConn *conn, int ret, bool handshake)
{
	int			err = SSL_get_error(conn->tls.ssl, ret);
	int			save_errno = errno;
	long		verify;

	/* a want is reported only when the queue is empty: nothing to clear */
	switch (err)
	{
		case SSL_ERROR_WANT_READ:
			return MC_XFER_WANT_READ;
		case SSL_ERROR_WANT_WRITE:
			return MC_XFER_WANT_WRITE;
		case SSL_ERROR_ZERO_RETURN:
			ERR_clear_error();
			if (handshake)
				break;
			return MC_XFER_EOF;
		case SSL_ERROR_SYSCALL:
			ERR_clear_error();
			errno = save_errno;
			if (handshake)
				break;
			return errno != 0 ? MC_XFER_SYSERR : MC_XFER_EOF;
		default:
			break;
	}
	if (handshake && err == SSL_ERROR_SSL &&
		(verify = SSL_get_verify_result(conn->tls.ssl)) != X509_V_OK)
	{
		ERR_clear_error();
		if (verify == X509_V_ERR_HOSTNAME_MISMATCH ||
			verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
			snprintf(tls_why, sizeof(tls_why),
					 "the server certificate does not match host name \"%s\"",
					 expected_name(conn));
		else
			snprintf(tls_why, sizeof(tls_why), "certificate verify failed: %s",
					 X509_verify_cert_error_string(verify));
		return MC_XFER_ERROR;
	}
	if (handshake)
	{
		/*
		 * No certificate to blame.  A peer that closes, resets or answers
		 * what is not TLS (a plaintext memcached answers ERROR to the
		 * hello: "wrong version number") is probably plaintext; a TLS
		 * server's own refusal (an alert) is reported as it is.
		 */
		int			reason = ERR_GET_REASON(ERR_peek_error());
		bool		not_tls = err != SSL_ERROR_SSL ||
			reason == SSL_R_WRONG_VERSION_NUMBER ||
			reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
			reason == SSL_R_RECORD_LENGTH_MISMATCH ||
			reason == SSL_R_UNEXPECTED_EOF_WHILE_READING;
		const char *text = err == SSL_ERROR_SSL ? ssl_reason() :
			err == SSL_ERROR_SYSCALL && save_errno != 0 ? strerror(save_errno) :
			"the connection was closed";

		snprintf(tls_why, sizeof(tls_why),
				 not_tls ? "the server did not answer the TLS handshake; is it plaintext? (%s)" :
				 "the TLS handshake failed: %s", text);
		return MC_XFER_ERROR;
	}
	snprintf(tls_why, sizeof(tls_why), "TLS error: %s", ssl_reason());
	return MC_XFER_ERROR;
}

/*
 * One step of the handshake: MC_XFER_DONE, a want, or MC_XFER_ERROR.  A
 * session the server handed out before is offered again (resumption saves
 * the certificate exchange); the new one is kept for the next reconnect.
 */
McXferStatus
conn_tls_handshake(McConn *conn)
{
	int			ret;

	ERR_clear_error();
	ret = SSL_connect(conn->tls.ssl);
	if (ret == 1)
	{
		ERR_clear_error();
		return MC_XFER_DONE;
	}
	return tls_status(conn, ret, true);
}

/*
 * Keep the connection's TLS session for its next connect (TLS 1.3 sends
 * tickets after the handshake, so this runs after the first reply).  A
 * copy: the connection is closed without close_notify, and OpenSSL marks
 * the session of a connection freed so as not resumable, which would make
 * the next connect a full handshake again.
 */
static void
tls_keep_session(McConn *conn)
{
	SSL_SESSION *s;

	if (conn->tls.ssl == NULL || SSL_get0_session(conn->tls.ssl) == NULL ||
		!SSL_SESSION_is_resumable(SSL_get0_session(conn->tls.ssl)))
		return;
	s = SSL_SESSION_dup(SSL_get0_session(conn->tls.ssl));
	if (s == NULL)
		return;					/* out of memory: the next connect is a full one */
	if (conn->tls.session != NULL)
		SSL_SESSION_free(conn->tls.session);
	conn->tls.session = s;
}

/*
 * Read up to len decrypted bytes: the count, or 0 with *st a want, or -1
 * with *st MC_XFER_EOF, MC_XFER_SYSERR (errno set) or MC_XFER_ERROR.  After a
 * want for reading, whatever OpenSSL holds is part of a record: until the
 * next successful read, McConnHasPending says nothing is readable.
 */
static ssize_t
tls_read(McConn *conn, char *buf, size_t len, McXferStatus *st)
{
	int			n;

	clear_queue();
	n = SSL_read(conn->tls.ssl, buf, (int) Min(len, (size_t) INT_MAX));
	if (n > 0)
	{
		conn->tls.starved = false;
		return n;
	}
	*st = tls_status(conn, n, false);
	conn->tls.starved = (*st == MC_XFER_WANT_READ);
	return (*st == MC_XFER_WANT_READ || *st == MC_XFER_WANT_WRITE) ? 0 : -1;
}

/*
 * Write up to len bytes (at least one record's worth, or all): the count,
 * or 0 with *st a want, or -1 as conn_tls_read.  After a want, the next
 * call must offer the same bytes again (possibly moved, possibly more).
 */
static ssize_t
tls_write(McConn *conn, const char *buf, size_t len, McXferStatus *st)
{
	int			n;

	clear_queue();
	n = SSL_write(conn->tls.ssl, buf, (int) Min(len, (size_t) INT_MAX));
	if (n > 0)
		return n;
	*st = tls_status(conn, n, false);
	return (*st == MC_XFER_WANT_READ || *st == MC_XFER_WANT_WRITE) ? 0 : -1;
}

/*
 * The idle probe of a TLS socket: true when it is open and holds no data.
 * SSL_peek also consumes what is not data, such as the session tickets a
 * TLS 1.3 server sends after the handshake, which would otherwise make a
 * healthy idle socket look as if the server sent something unasked.
 */
static bool
tls_still_open(McConn *conn)
{
	char		b;
	int			n;

	clear_queue();
	n = SSL_peek(conn->tls.ssl, &b, 1);
	if (n > 0)
		return false;
	conn->tls.starved = (tls_status(conn, n, false) == MC_XFER_WANT_READ);
	return conn->tls.starved;
}

/*
 * Does OpenSSL hold bytes of this connection that epoll cannot see (read
 * from the socket, not yet returned)?  Then the connection is readable
 * whatever the wait set says: a caller must read before it waits.  Not
 * when the last read wanted the socket: the bytes held are part of a
 * record, and reading again before the rest arrives would spin.
 */
static bool
tls_pending(McConn *conn)
{
	return conn->tls.ssl != NULL && !conn->tls.starved && SSL_has_pending(conn->tls.ssl);
}

/*
 * Free the connection's SSL object (the socket is closed by the caller);
 * the next socket keeps its own session.
 */
static void
tls_close(McConn *conn)
{
	if (conn->tls.ssl != NULL)
	{
		SSL_free(conn->tls.ssl);
		conn->tls.ssl = NULL;
	}
	conn->tls.kept = false;
	ERR_clear_error();
}

/*
 * The server's configuration was rebuilt in a new memory context (net.c's
 * McNetRebuild): the TLS context went with the old one (free_ctx), the
 * next TLS connect makes one for the new options.
 */
void
conn_tls_rebound(McNet *net)
{
	net->tls_ctx = NULL;
}

/* Forget the session kept for resumption (the connection is discarded). */
void
conn_tls_forget(McConn *conn)
{
	if (conn->tls.session != NULL)
	{
		SSL_SESSION_free(conn->tls.session);
		conn->tls.session = NULL;
	}
}

/* Write len bytes over TLS, waiting for the socket as OpenSSL asks. */
static McIoStatus
tls_write_all(McConn *conn, const char *buf, size_t len)
{
	while (len > 0)
	{
		McXferStatus st;
		ssize_t		n = tls_write(conn, buf, len, &st);

		if (n > 0)
		{
			buf += n;
			len -= n;
			continue;
		}
		if (n < 0)
			return conn_io_xfer_failed(conn, st, "send to");
		/* the same bytes are offered again after the wait, as OpenSSL requires */
		if (!conn_io_wait(conn, st == MC_XFER_WANT_READ ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
					   conn->net->cfg->io_timeout, "send to"))
			return MC_IO_FAILED;
	}
	return MC_IO_OK;
}

/*
 * Write a whole request over TLS.  A small request is gathered into one
 * record (one packet, one MAC); a large value goes in its own records,
 * where the copy would cost more than the extra record headers.
 */
static McIoStatus
tls_write_request(McConn *conn, const char *hdr, size_t hlen,
		  const char *data, size_t dlen)
{
	char		one[TLS_GATHER_MAX];
	McIoStatus	st;

	if (data == NULL)
		return tls_write_all(conn, hdr, hlen);
	if (hlen + dlen + 2 <= sizeof(one))
	{
		memcpy(one, hdr, hlen);
		memcpy(one + hlen, data, dlen);
		memcpy(one + hlen + dlen, "\r\n", 2);
		return tls_write_all(conn, one, hlen + dlen + 2);
	}
	if ((st = tls_write_all(conn, hdr, hlen)) != MC_IO_OK ||
		(st = tls_write_all(conn, data, dlen)) != MC_IO_OK)
		return st;
	return tls_write_all(conn, "\r\n", 2);
}

/*
 * A request finished with its whole reply read: keep the session now (a
 * TLS 1.3 server sends its tickets after the handshake, so they have come
 * with the first reply), once per socket.
 */
static void
tls_idle(McConn *conn)
{
	if (!conn->tls.kept)
	{
		tls_keep_session(conn);
		conn->tls.kept = true;
	}
}

const McTransport mc_tls_transport = {
	.read = tls_read,
	.write = tls_write,
	.write_request = tls_write_request,
	.still_open = tls_still_open,
	.pending = tls_pending,
	.idle = tls_idle,
	.close = tls_close,
	.why = conn_tls_why,
	.records = true,
	.tls = true,
};
