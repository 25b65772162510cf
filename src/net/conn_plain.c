/*
 * conn_plain.c — the plaintext transport: a connection's bytes straight on
 * its socket.
 *
 * Owns: non-blocking reads and writes on a plaintext socket in the
 * transport's terms (McTransport, conn_int.h), a whole request written with
 * one sendmsg in the common case, and the idle probe (a peek: open, and
 * nothing unasked to read).  TLS is the other transport (conn_tls.c); the
 * rest of net/ goes through conn->fd.xfer and does not ask which.  Must
 * not: record failures (conn_io.c words them from the status returned),
 * or write a part of the connection.
 */
#include "postgres.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include "conn_int.h"

/* Read what the socket has, up to len bytes, without waiting. */
static ssize_t
plain_read(McConn *conn, char *buf, size_t len, McXferStatus *st)
{
	for (;;)
	{
		ssize_t		n = recv(conn->fd.sock, buf, len, 0);

		if (n > 0)
			return n;
		if (n == 0)
		{
			*st = MC_XFER_EOF;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
		{
			*st = MC_XFER_WANT_READ;
			return 0;
		}
		*st = MC_XFER_SYSERR;
		return -1;
	}
}

/* Write what the socket takes of len bytes, without waiting. */
static ssize_t
plain_write(McConn *conn, const char *buf, size_t len, McXferStatus *st)
{
	for (;;)
	{
		ssize_t		n = send(conn->fd.sock, buf, len, MSG_NOSIGNAL);

		if (n >= 0)
		{
			if (n == 0)
				*st = MC_XFER_WANT_WRITE;
			return n;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
		{
			*st = MC_XFER_WANT_WRITE;
			return 0;
		}
		*st = MC_XFER_SYSERR;
		return -1;
	}
}

/*
 * Write a whole request on a plaintext socket (header, then optional data
 * block and its CRLF) with one sendmsg in the common case, waiting for
 * writability when the socket buffer is full: plain_write_request's part
 * past a first send that did not take a data-less request whole (sent: what
 * that send returned, or -1 when data follows and nothing was sent yet).
 */
static pg_noinline McIoStatus
plain_write_rest(McConn *conn, const char *hdr, size_t hlen,
				 const char *data, size_t dlen, ssize_t sent)
{
	struct iovec iov[3];
	struct msghdr msg;
	int			niov = 0;
	static char crlf[] = "\r\n";

	if (data == NULL)
	{
		if (sent > 0)
		{
			hdr += sent;
			hlen -= sent;
		}
		else if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
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
		ssize_t		n = sendmsg(conn->fd.sock, &msg, MSG_NOSIGNAL);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
			{
				if (!conn_io_wait(conn, WL_SOCKET_WRITEABLE, conn->net->cfg->io_timeout,
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
	return MC_IO_OK;
}

/*
 * Write a whole request: a request without data usually goes in one plain
 * send, with nothing else in this frame; the rest is plain_write_rest's.
 */
static McIoStatus
plain_write_request(McConn *conn, const char *hdr, size_t hlen,
					const char *data, size_t dlen)
{
	ssize_t		n = -1;

	if (likely(data == NULL))
	{
		n = send(conn->fd.sock, hdr, hlen, MSG_NOSIGNAL);
		if (likely(n == (ssize_t) hlen))
			return MC_IO_OK;
	}
	return plain_write_rest(conn, hdr, hlen, data, dlen, n);
}

/*
 * The idle probe: a pooled socket is usable when nothing is readable on it;
 * EOF, an error or bytes nobody asked for mean it is not.
 */
static bool
plain_still_open(McConn *conn)
{
	char		b;
	ssize_t		n = recv(conn->fd.sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

/* Nothing to free: the socket is the caller's. */
static void
plain_close(McConn *conn)
{
}

/* Never asked: a plaintext transfer fails with an errno or an EOF. */
static const char *
plain_why(void)
{
	return "";
}

const McTransport mc_plain_transport = {
	.read = plain_read,
	.write = plain_write,
	.write_request = plain_write_request,
	.still_open = plain_still_open,
	.pending = NULL,			/* the kernel holds every byte: epoll sees them */
	.idle = NULL,
	.close = plain_close,
	.why = plain_why,
	.records = false,
	.tls = false,
};
