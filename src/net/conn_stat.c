/*
 * conn_stat.c — the text-protocol stats commands on a connection.
 *
 * Owns: running a command answered by "STAT name value" lines and "END",
 * with the bounds that keep any server from holding a view.  Must not:
 * interpret the lines (stats.c, slabs.c do), write a part of the
 * connection (it asks conn_io.c for the request's bound), or judge
 * instances.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "conn_int.h"

#define STATS_MAX_BYTES	(4 * 1024 * 1024)	/* a stats reply past this is not memcached's */

/*
 * Run a text-protocol command answered by "STAT <name> <value>" lines and
 * "END" ("stats", "stats slabs", "stats items", "stats settings"), handing
 * each line to cb.  A failing instance, or one that answers something else,
 * gives false with the cause kept in conn (McConnFailure), so a stats view
 * can show one row per unreachable instance instead of failing as a whole.
 * Cancels and timeouts of the statement are never swallowed.
 *
 * Bounds, so that no server can hold a view: limit_ms (the caller's own
 * bound, 0 = none) covers the whole command, connect included, and its
 * passing is told apart (McConnFailureOwnLimit); io_timeout
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

	for (;;)					/* at most twice: see closed_while_idle in conn_io.c */
	{
		McIoStatus	st;
		int			io_timeout = conn->net->cfg->io_timeout;

		if (!McConnPrepare(conn, false, 0))
			return false;
		conn_io_bound(conn, view_deadline, limit_ms);
		conn_io_own_bound(conn, view_deadline);
		if (conn->connect.active && !McConnConnectFinish(conn))
			return false;
		if (io_timeout > 0)
		{
			int64		d = mono_usec() + (int64) io_timeout * 1000;

			if (conn->io.deadline == 0 || d < conn->io.deadline)
				conn_io_bound(conn, d, io_timeout);
		}
		st = conn_io_send(conn, cmd, len, NULL, 0);
		while (st == MC_IO_OK)
		{
			McReply		r;
			char	   *base = conn->io.rbuf + conn->io.rstart;
			McReplyType t = mc_parse_reply_z(base, conn->io.rend - conn->io.rstart, &r);

			/* a reply that never drains never waits: check here too */
			CHECK_FOR_INTERRUPTS();
			if (conn->io.deadline != 0 && mono_usec() >= conn->io.deadline)
			{
				bool		own = (conn->io.deadline == conn->io.own_deadline);

				conn_fail(conn, false, ERRCODE_CONNECTION_FAILURE, "read from",
						  "timed out after %d ms", conn->io.deadline_ms);
				conn_fail_own_limit(conn, own);
				return false;
			}
			if (conn->io.rgot > STATS_MAX_BYTES)
				return conn_fail(conn, false, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "read from",
								 "the stats reply exceeds %d bytes", STATS_MAX_BYTES);
			if (t == MC_REPLY_NEED_MORE)
				st = conn_io_fill(conn, r.need);
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
			else if (McConnForeignReply(conn, base, t == MC_REPLY_BAD ?
										conn->io.rend - conn->io.rstart : r.header_len,
										t == MC_REPLY_BAD ? MC_FOREIGN_UNPARSED : 0))
				return false;	/* needs a login, or is not memcached */
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

