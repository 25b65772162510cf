/*
 * conn_lines.c — a text command answered by a stream of lines, read a line
 * at a time without waiting.
 *
 * Owns: queueing such a command ("lru_crawler metadump ...") on a
 * connection, and reading its reply in non-blocking slices, handing each
 * complete line to a callback as it arrives, with the bounds that keep a
 * reply of any length in constant memory: a line longer than the caller's
 * limit is a protocol violation, and the read buffer holds at most one
 * read's worth of lines.  Unlike conn_stat.c's bounded replies, the reply
 * may be as long as the server's cache.  Must not: wait (the caller's
 * pipeline does, so one wait serves the dumps of every instance, with
 * io_timeout bounding each wait for more bytes, not the whole reply, and
 * cancel and statement_timeout ending it at any line), interpret the lines
 * (the caller's callback does) or judge instances.
 *
 * A reply not read to its end leaves the connection busy, so it is closed
 * at the end of the (sub)transaction or at its next use, never reused.
 */
#include "postgres.h"

#include "conn_int.h"

/* Queue cmd (with its "\r\n") on a prepared connection, for McConnSendSome. */
void
McConnLinesQueue(McConn *conn, const char *cmd)
{
	size_t		len = strlen(cmd);

	memcpy(McConnWriteSpace(conn, len), cmd, len);
	McConnWritten(conn, len);
	/* one request for the views; a listing names no key for the tally */
	conn_io_count_pipeline(conn, 1);
}

/*
 * One read of what the socket has (at most one batch's worth, so a dump
 * that never pauses cannot keep the caller from the other instances'
 * sockets), each complete line of it (without its "\n" or "\r\n") handed
 * to cb.  MC_LINES_DONE when cb said the reply is complete; MC_LINES_FAILED
 * when the instance failed (cause kept in conn, as for every call of the
 * connection layer): a closed socket, a line longer than max_line, or a
 * line cb found out of place (quoted in the cause, as conn.c quotes a
 * server's bytes); MC_LINES_RETRY when a pooled socket turned
 * out closed while idle before any byte came (closed; nothing ran).  cmd
 * names the command in messages.
 */
McLinesStatus
McConnLinesRead(McConn *conn, const char *cmd, size_t max_line,
				McLineFn cb, void *arg)
{
	bool		drained;
	ssize_t		n = McConnRecvSome(conn, 1, &drained);
	char	   *base;
	size_t		have;
	char		quoted[48];

	if (n == -2)
		return MC_LINES_RETRY;
	if (n < 0)
		return MC_LINES_FAILED;
	if (n == 0)
		return MC_LINES_WAIT;
	for (;;)
	{
		char	   *nl;
		size_t		linelen;
		McLineVerdict v;

		base = McConnUnread(conn, &have);
		nl = memchr(base, '\n', Min(have, max_line + 2));
		if (nl == NULL)
			break;
		linelen = nl - base;
		if (linelen > 0 && base[linelen - 1] == '\r')
			linelen--;
		/* a server that needs a login answers every command so */
		if (base[0] == 'C' && McConnForeignReply(conn, base, have, 0))
			return MC_LINES_FAILED;
		v = cb(arg, base, linelen);
		/* the server's line, for the message, before its bytes are consumed */
		if (v == MC_LINE_BAD)
			conn_quote_line(conn, base, linelen, quoted, sizeof(quoted));
		McConnConsume(conn, nl + 1 - base);
		if (v == MC_LINE_DONE)
			return MC_LINES_DONE;
		if (v == MC_LINE_BAD)
		{
			conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
					  "unexpected line in the reply to \"%.*s\"%s%s%s",
					  (int) Min(strlen(cmd) - 2, 40), cmd,
					  quoted[0] ? ": \"" : "", quoted, quoted[0] ? "\"" : "");
			return MC_LINES_FAILED;
		}
	}
	if (have > max_line + 1)
	{
		conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
				  "a line of the reply exceeds %zu bytes", max_line);
		return MC_LINES_FAILED;
	}
	return MC_LINES_MORE;
}
