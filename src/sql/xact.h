/*
 * xact.h — the on-commit write queue (xact.c) as the other files see it.
 */
#ifndef MCFDW_XACT_H
#define MCFDW_XACT_H

#include "client.h"

/*
 * Queue a delete of key (as the user wrote it: checked and routed here, so a
 * bad key is an error now) on srv, to be sent once the transaction commits.
 */
extern void McXactQueueDelete(McServer *srv, const char *key, size_t len);

#endif							/* MCFDW_XACT_H */
