/*
 * sql_args.c — the arguments every SQL surface reads the same way: the
 * single-key functions (writes.c, reads.c), the multi-key ones
 * (batch_sql.c), the on-commit queue (xact.c) and a foreign table's ttl
 * column (fdw_modify.c).
 *
 * Owns: the optional server name argument (NULL: mcfdw.server;
 * sql_args.h, inline), turning a ttl interval or an absolute expiry into what memcached reads (seconds up
 * to 30 days, a unix time beyond), and (sql_args.h) the server and key of
 * a single-key call, looked up, checked for writing and prepared by keys.c
 * in the order every such call does it.  Must not: send anything, or apply key rules
 * itself (keys.c does).
 */
#include "postgres.h"

#include <time.h>

#include "common/int.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "sql_args.h"

/*
 * Convert a ttl interval to what memcached expects.  Months count as 30
 * days and days as 24 hours (as EXTRACT(EPOCH) does); fractions round up so
 * a short ttl never becomes "no expiry".  Beyond 30 days memcached wants an
 * absolute unix time, so the conversion is done here and users can keep
 * thinking in intervals.
 */
static int64
interval_to_ttl(Interval *iv)
{
	int64		usecs;
	int64		secs;

	if (pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH + iv->day,
							USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, iv->time, &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("ttl is out of range")));
	if (usecs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be positive"),
				 errhint("Pass NULL for no expiry, or use mc_delete() to remove a key.")));
	secs = usecs / USECS_PER_SEC + (usecs % USECS_PER_SEC ? 1 : 0);
	if (secs > MC_RELATIVE_TTL_MAX)
	{
		secs += (int64) time(NULL);
		if (secs > PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("ttl is out of range"),
					 errdetail("memcached cannot expire items after January 2038.")));
	}
	return secs;
}

/*
 * Convert an absolute expiry (the *_until functions) to what memcached
 * expects: seconds from now up to 30 days, an absolute unix time beyond.
 * A time already past gives -1, which memcached takes as "expired at
 * once"; -infinity too.  Separate functions rather than timestamptz
 * overloads, because an untyped literal such as '1 hour' would then match
 * both interval and timestamptz and be ambiguous.
 */
static int64
expiry_to_ttl(TimestampTz ts)
{
	int64		usecs;
	int64		secs;

	if (TIMESTAMP_IS_NOBEGIN(ts))
		return -1;
	if (TIMESTAMP_NOT_FINITE(ts) ||
		pg_sub_s64_overflow(ts, GetCurrentTimestamp(), &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("expiry time is out of range"),
				 errhint("Pass NULL for no expiry.")));
	if (usecs <= 0)
		return -1;
	secs = usecs / USECS_PER_SEC + (usecs % USECS_PER_SEC ? 1 : 0);
	if (secs > MC_RELATIVE_TTL_MAX)
	{
		secs = ts / USECS_PER_SEC + (ts % USECS_PER_SEC > 0 ? 1 : 0) +
			(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
		if (secs > PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("expiry time is out of range"),
					 errdetail("memcached cannot expire items after January 2038.")));
	}
	return secs;
}

/* The ttl at argument argno: an interval, or with until a timestamptz. */
int64
McTtlArg(FunctionCallInfo fcinfo, int argno, bool until)
{
	if (until)
		return expiry_to_ttl(PG_GETARG_TIMESTAMPTZ(argno));
	return interval_to_ttl(PG_GETARG_INTERVAL_P(argno));
}

/* interval_to_ttl for the other files. */
int64
McIntervalToTtl(Interval *iv)
{
	return interval_to_ttl(iv);
}
