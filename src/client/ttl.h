/*
 * ttl.h — expiry times as memcached reads them (ttl.c).
 */
#ifndef MCFDW_TTL_H
#define MCFDW_TTL_H

#include "postgres.h"

#include "datatype/timestamp.h"

#define MC_RELATIVE_TTL_MAX		(30 * SECS_PER_DAY)
extern int64 McTtlFromInterval(Interval *iv);
extern int64 McTtlFromExpiry(TimestampTz ts);

#endif							/* MCFDW_TTL_H */
