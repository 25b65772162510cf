/*
 * rowlayout.h — the multi-get's hand-laid rows (rowlayout.c), for
 * mc_get_multi (multi_get.c) and for the foreign-table scan's rows of the same shape
 * (fdw_scan.c).
 */
#ifndef MCFDW_ROWLAYOUT_H
#define MCFDW_ROWLAYOUT_H

#include "access/tupdesc.h"
#include "utils/tuplestore.h"


extern bool McRowLayoutFits(TupleDesc desc);
extern bool McRowPut(Tuplestorestate *ts, TupleDesc desc, char **rowbuf,
					 Datum key, const char *v, size_t len, int32 flags);

#endif							/* MCFDW_ROWLAYOUT_H */
