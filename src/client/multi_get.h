/*
 * multi_get.h — the pipelined multi-get engine (multi_get.c) for C callers:
 * the foreign-table scan and its batched join drive it with keys they
 * gathered and take each hit through a callback.
 */
#ifndef MCFDW_MULTI_GET_H
#define MCFDW_MULTI_GET_H

#include "server.h"

/*
 * One hit: key is the caller's datum for the key, base and r the reply
 * parsed in place (VA with the value at base + r->value_off, or HD when no
 * value was asked); valid only during the call.
 */
typedef void (*McHitFn) (void *arg, Datum key, char *base, const McReply *r);

/*
 * McMultiGetRun's flags.  MC_MG_STRICT: the run is routed without failover
 * and a failing instance raises, as a server with failover off and
 * on_failure 'error' would run it, whatever the server's settings (the
 * prefetch's trial run, prefetch_exec.c).
 */
#define MC_MG_STRICT		0x01

extern int	McMultiGetRun(McServer *srv, const Datum *keys, const bool *nulls,
						  int n, unsigned want, unsigned flags, McHitFn fn, void *arg);

#endif							/* MCFDW_MULTI_GET_H */
