/*
 * instance_name.c — how an instance is named in messages and views.
 *
 * Owns: an instance's name from its endpoint ("host:port", "[v6]:port",
 * a Unix socket's path), for every layer's messages, the views and the
 * statistics' rows, and a connection's statistics entry found by that
 * name.  Alone in its file so the connection's insides (conn_int.h,
 * conn_connect.c) can name an instance without depending on conn_io.c or
 * conn.c.
 */
#include "postgres.h"

#include "conn_int.h"
#include "net.h"

/*
 * Name of an instance ("host:port", "[v6]:port", a Unix socket's path) for
 * messages and views.
 * Only called on error and reporting paths, so the allocation does not
 * matter.
 */
const char *
McInstanceName(McNet *net, int index)
{
	McEndpoint *ep = &net->cfg->endpoints[index];

	if (ep->port == 0)
		return pstrdup(ep->host);
	if (strchr(ep->host, ':'))
		return psprintf("[%s]:%d", ep->host, ep->port);
	return psprintf("%s:%d", ep->host, ep->port);
}

/*
 * The connection's entry of client_stats.c's tally, found by the instance's
 * name at its first connect or count (the name is allocated: a cold path).
 */
void
conn_cs_find(McConn *conn)
{
	conn->cs.inst = McCsInstanceOf(conn->net->serverid,
								   McInstanceName(conn->net, conn->index));
}
