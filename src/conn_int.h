/*
 * conn_int.h — what conn.c and conn_multi.c share about a connection's
 * insides: buffer sizes, the wait-set slot of the latch, the outcome of a
 * socket step, and the helpers both sides of a connection call.  Not for
 * any other file: the rest of the extension goes through mcfdw.h.
 */
#ifndef MCFDW_CONN_INT_H
#define MCFDW_CONN_INT_H

#include "mcfdw.h"

#define WBUF_INITIAL	16384
#define RBUF_BATCH_READ	65536	/* a multi-get reads up to this much per recv */
#define LATCH_POS		0		/* the latch's slot in every wait set */

/* Outcome of a socket operation that may fail softly. */
typedef enum McIoStatus
{
	MC_IO_OK,
	MC_IO_RETRY,				/* pooled socket was closed while idle: retry */
	MC_IO_FAILED				/* the instance failed: cause kept in the connection */
} McIoStatus;

extern MemoryContext conn_memory(void);
extern bool conn_reserve(McConn *conn, size_t need);
extern McIoStatus conn_io_failed(McConn *conn, int err, const char *action);

#endif							/* MCFDW_CONN_INT_H */
