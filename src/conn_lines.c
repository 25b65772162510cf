/*
 * conn_lines.c — a text command answered by a stream of lines, read a line
 * at a time.
 *
 * Owns: sending such a command ("lru_crawler metadump ...") and handing
 * each line of its reply to a callback as it arrives, with the bounds that
 * keep a reply of any length in constant memory: a line longer than the
 * caller's limit is a protocol violation, and the read buffer holds at
 * most one read's worth of lines.  Unlike conn_stats.c's bounded replies,
 * the reply may be as long as the server's cache: io_timeout bounds each
 * read (each wait for more bytes), not the whole reply, and cancel and
 * statement_timeout end it at any line.  Must not: interpret the lines
 * (the caller's callback does) or judge instances.
 *
 * A reply not read to its end leaves the connection busy, so it is closed
 * at the end of the (sub)transaction or at its next use, never reused.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "conn_int.h"

/*
 * Run cmd (with its "\r\n") and hand each line of the reply (without its
 * "\n" or "\r\n") to cb until cb says the reply is complete.  Returns true
 * then; false when the instance failed (cause kept in conn, as for every
 * call of the connection layer): a timeout, a closed socket, a line longer
 * than max_line, or a line cb found out of place.
 */
bool
McConnLines(McConn *conn, const char *cmd, size_t max_line,
			McLineFn cb, void *arg)
{
	size_t		len = strlen(cmd);

	for (;;)					/* at most twice: see closed_while_idle in conn_io.c */
	{
		McIoStatus	st;

		if (!McConnPrepare(conn))
			return false;
		if (conn->connecting && !conn_connect_finish(conn))
			return false;
		st = conn_send(conn, cmd, len, NULL, 0);
		while (st == MC_IO_OK)
		{
			char	   *base = conn->rbuf + conn->rstart;
			size_t		have = conn->rend - conn->rstart;
			char	   *nl = memchr(base, '\n', Min(have, max_line + 2));
			size_t		linelen;
			McLineVerdict v;

			if (nl == NULL)
			{
				if (have > max_line + 1)
					return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
									 "a line of the reply exceeds %zu bytes", max_line);
				/* read a batch's worth at a time, never more */
				if (!conn_reserve(conn, RBUF_BATCH_READ))
					return false;
				st = conn_fill(conn, 1);
				continue;
			}
			linelen = nl - base;
			if (linelen > 0 && base[linelen - 1] == '\r')
				linelen--;
			v = cb(arg, base, linelen);
			McConnConsume(conn, nl + 1 - base);
			if (v == MC_LINE_DONE)
			{
				McConnEnd(conn);
				return true;
			}
			if (v == MC_LINE_BAD)
				return conn_fail(conn, false, ERRCODE_PROTOCOL_VIOLATION, "read from",
								 "unexpected line in the reply to \"%.*s\"",
								 (int) Min(len - 2, 40), cmd);
			/* a reply that never drains never waits: check here too */
			CHECK_FOR_INTERRUPTS();
		}
		if (st == MC_IO_FAILED)
			return false;
	}
}
