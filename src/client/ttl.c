/*
 * ttl.c — expiry times as memcached reads them.
 *
 * Owns: turning a SQL interval (every ttl argument, a foreign table's ttl
 * column) or an absolute timestamptz (the *_until functions) into
 * memcached's exptime: seconds from now up to 30 days, a unix time beyond,
 * with the errors for what memcached cannot represent.  Must not: know
 * which function or column the value came from.
 */
#include "postgres.h"

#include <time.h>

#include "common/int.h"
#include "datatype/timestamp.h"
#include "utils/timestamp.h"

#include "ttl.h"

/*
 * Convert a ttl interval to what memcached expects.  Months count as 30
 * days and days as 24 hours (as EXTRACT(EPOCH) does); fractions round up so
 * a short ttl never becomes "no expiry".  Beyond 30 days memcached wants an
 * absolute unix time, so the conversion is done here and users can keep
 * thinking in intervals.
 */
int64
McTtlFromInterval(Interval *iv)
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
int64
McTtlFromExpiry(TimestampTz ts)
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
