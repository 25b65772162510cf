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

extern int	McMultiGetRun(McServer *srv, const Datum *keys, const bool *nulls,
						  int n, unsigned want, McHitFn fn, void *arg);

#endif							/* MCFDW_MULTI_GET_H */
