/*
 * conn_io.h — conn_io.c's inline helpers that call back into conn_io.c,
 * for the files above it (conn.c's end of a request, on every get).
 * Owns: nothing of its own; each helper is conn_io.c's and writes its
 * part (McConn's io) only.  Must not: be included by a file conn_io.c
 * calls (conn_fd.c, conn_fail.c): the inlines' calls of conn_io.c would
 * close a circle through it (conn_int.h keeps only helpers that call no
 * net/ file).
 */
#ifndef MCFDW_CONN_IO_H
#define MCFDW_CONN_IO_H

#include "conn_int.h"

/*
 * The request ended with its reply read whole (McConnEnd): a buffer that
 * grew for a big value is given back, so an idle backend stays small.
 */
static inline void
conn_io_end(McConn *conn)
{
	if (conn->io.rcap > RBUF_KEEP)
		conn_io_shrink(conn);
	conn_io_reset_rbuf(conn);
}

#endif							/* MCFDW_CONN_IO_H */
