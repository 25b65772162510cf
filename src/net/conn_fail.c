/*
 * conn_fail.c — the failure record of a connection.
 *
 * Owns: what the last failure of an instance was (McConn's fail: errcode,
 * action, cause, hint, whether it is raised in a soft call and whether it
 * counts against the instance), recording it (the socket closed, the
 * running request's tally ended with the failure's class), reading it,
 * and raising it.  A failing instance is reported, never judged: health.c
 * counts the failure and raises it with McConnFailRaise unless the call
 * is soft.  Must not: count failures, decide that an instance is dead, or
 * know what a request meant.
 */
#include "postgres.h"

#include "conn_int.h"

/*
 * Which errors_* column of mc_client_stats a failure counts in: every
 * timeout of the connection layer says "timed out", the rest is told by
 * the errcode.
 */
static McCsError
fail_class(int sqlerrcode, const char *fmt)
{
	if (sqlerrcode == ERRCODE_INVALID_PASSWORD ||
		sqlerrcode == ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION)
		return MC_CSE_AUTH;
	if (strncmp(fmt, "timed out", 9) == 0)
		return MC_CSE_TIMEOUT;
	if (sqlerrcode == ERRCODE_PROTOCOL_VIOLATION ||
		sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED)
		return MC_CSE_PROTOCOL;
	if (sqlerrcode == ERRCODE_FDW_ERROR)
		return MC_CSE_SERVER;
	return MC_CSE_CONNECT;
}

/*
 * The instance misbehaved or went away: close the socket and keep the cause
 * for the caller.  Used for connect errors, timeouts, resets, EOF and
 * unparseable replies — everything that says the instance is unhealthy.
 * Nothing is held against the instance or raised here (mc_client_stats
 * counts the request's error): the caller hands the connection to
 * health.c (McInstanceCountFailure), which counts the failure against the
 * instance's health and raises it with McConnFailRaise unless the call is soft
 * (a multi-get with failover drops the instance and goes on).  "hard"
 * failures are raised even then.  Always returns false.
 */
static bool pg_attribute_printf(5, 0)
fail_v(McConn *conn, bool hard, int sqlerrcode, const char *action,
	   const char *fmt, va_list ap)
{
	int			save_errno = errno;

	conn_tally_end(conn, fail_class(sqlerrcode, fmt));
	conn_fd_close(conn);
	errno = save_errno;			/* for %m */
	vsnprintf(conn->fail.why, sizeof(conn->fail.why), fmt, ap);
	conn->fail.code = sqlerrcode;
	conn->fail.action = action;
	conn->fail.hard = hard;
	conn->fail.nocount = false;
	conn->fail.own_limit = false;
	conn->fail.hint = NULL;
	return false;
}

/* fail_v for the conn_*.c files. */
bool
conn_fail(McConn *conn, bool hard, int sqlerrcode, const char *action,
		  const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fail_v(conn, hard, sqlerrcode, action, fmt, ap);
	va_end(ap);
	return false;
}

/* fail_v for a caller that found the instance misbehaving (a bad reply). */
bool
McConnFailedV(McConn *conn, int sqlerrcode, const char *action,
			  const char *fmt, va_list ap)
{
	return fail_v(conn, false, sqlerrcode, action, fmt, ap);
}

/* The cause of the connection's last failure, and whether it must be raised. */
const char *
McConnFailure(McConn *conn, bool *hard)
{
	if (hard)
		*hard = conn->fail.hard;
	return conn->fail.why;
}

/* The errcode of the connection's last failure. */
int
McConnFailureCode(McConn *conn)
{
	return conn->fail.code;
}

/*
 * Does the last failure count against the instance's health?  Not a
 * rejected login: the instance is fine, and every role using it would
 * otherwise see it marked dead for one role's wrong password.
 */
bool
McConnFailureCounts(McConn *conn)
{
	return !conn->fail.nocount;
}

/*
 * Was the last failure the caller's own bound passing (own_deadline), not
 * the instance missing one of its timeouts?  Only the caller can say
 * whether that is the instance's failure (see engine.c's McEngineStatLines).
 */
bool
McConnFailureOwnLimit(McConn *conn)
{
	return conn->fail.own_limit;
}

/*
 * Raise the connection's last failure.  The primary message names the
 * foreign server; the detail names the instance and the cause.
 */
void
McConnFailRaise(McConn *conn)
{
	const char *name = McInstanceName(conn->net, conn->index);

	ereport(ERROR,
			(errcode(conn->fail.code),
			 errmsg("could not %s memcached server \"%s\"", conn->fail.action,
					conn->net->name),
			 conn->req.in_doubt ?
			 errdetail("Instance %s: %s.  The request may or may not have been executed.",
					   name, conn->fail.why) :
			 errdetail("Instance %s: %s.", name, conn->fail.why),
			 conn->fail.hint ? errhint("%s", conn->fail.hint) : 0));
	pg_unreachable();
}

/* The failure is raised with this hint (a constant string). */
void
conn_fail_hint(McConn *conn, const char *hint)
{
	conn->fail.hint = hint;
}

/* The failure is not the instance's fault (a rejected login): not counted. */
void
conn_fail_nocount(McConn *conn)
{
	conn->fail.nocount = true;
}

/* Whether the failure is the caller's own bound passing (own_deadline). */
void
conn_fail_own_limit(McConn *conn, bool own)
{
	conn->fail.own_limit = own;
}

/*
 * A connect's wait ran out (conn_connect.c): the failure is the connect's
 * (code), and what the step was doing adds to its cause (why, or NULL).
 */
void
conn_fail_amend(McConn *conn, int code, const char *why)
{
	conn->fail.code = code;
	if (why != NULL)
		strlcat(conn->fail.why, why, sizeof(conn->fail.why));
}
