/*
 * instance_name.c — how an instance is named in messages and views.
 *
 * Owns: an instance's name from its endpoint ("host:port", "[v6]:port",
 * a Unix socket's path), for every layer's messages, the views and the
 * statistics' rows (a connection's entry of client_stats.c's tally is
 * found by it).  Alone in its file so every conn_*.c file can name an
 * instance without depending on conn.c.  Must not: know a connection's
 * insides.
 */
#include "postgres.h"

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
