/*
 * tap.h — the smallest TAP producer the C unit tests need.
 *
 * Every test program under test/ speaks TAP on stdout ("ok N - name",
 * "not ok N - name", a final "1..N") and exits non-zero when anything failed;
 * the rig counts those lines for the "N passed, N failed" summary.
 * Header-only so each test program stays a single file.
 */
#ifndef MCFDW_TAP_H
#define MCFDW_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int	tap_count;
static int	tap_failed;

/* Report one test point; returns cond so callers can stop on failure. */
static int
tap_ok(int cond, const char *fmt,...)
{
	va_list		ap;

	tap_count++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

/* Diagnostic line, shown by TAP consumers but not counted. */
static void
tap_diag(const char *fmt,...)
{
	va_list		ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* Print the plan and return the process exit status. */
static int
tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif							/* MCFDW_TAP_H */
