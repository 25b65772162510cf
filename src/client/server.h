/*
 * server.h — a foreign server as this backend knows it: the record of parts.
 *
 * Owns: the McServer type, whose parts each have one writer: the entry,
 * its configuration and the privilege checks' cache (server_cache.c), the
 * instance health records and the live ring (health.c), the network part
 * (net/, through net.h).  Types only: each part's functions are in its
 * owner's header.
 */
#ifndef MCFDW_SERVER_H
#define MCFDW_SERVER_H

#include "postgres.h"

#include "net.h"

/*
 * The health of one memcached instance, kept by health.c alone: the
 * connection layer reports failures, health.c counts them and decides when
 * an instance is dead.  Others read it through McInstanceHealthOf.
 */
typedef struct McInstanceHealth
{
	int			failures;		/* consecutive */
	TimestampTz dead_until;		/* 0 = not dead */
	char		last_error[256];
	uint64		degraded;		/* calls answered as misses (on_failure 'miss') */
} McInstanceHealth;

/* A foreign server of the mcfdw wrapper, as this backend knows it. */
typedef struct McServer
{
	/* server_cache.c's: the entry, its configuration, the privilege checks' cache */
	Oid			serverid;		/* hash key: the server ... */
	Oid			umid;			/* ... and the user mapping whose credentials
								 * its connections logged in with, InvalidOid
								 * when none has credentials */
	bool		valid;			/* config matches the catalog */
	uint32		hashvalue;		/* syscache hash of serverid */
	char		name[NAMEDATALEN];
	MemoryContext cxt;			/* config, ring; reset on rebuild */
	McServerConfig cfg;			/* options.c parses it; read-only elsewhere */
	McRing	   *ring;
	Oid			acl_ok_user;	/* last role that passed the USAGE check */
	Oid			owner;			/* the server's owner: always a writer */
	Oid			write_ok_user;	/* last role that passed McServerCheckWrite */

	/* health.c's: instance health, the live ring, degraded-call warnings */
	McInstanceHealth *health;	/* cfg.nendpoints of them */
	int			ndead;			/* instances with dead_until set */
	MemoryContext live_cxt;		/* the live-instances ring (ketama failover) */
	McRing	   *live;
	bool	   *live_alive;		/* the health map live was built for */
	TimestampTz warned_stmt;	/* the statement last warned about a */
	LocalTransactionId warned_lxid; /* degraded call */

	/* the connection layer's (the conn_*.c files, through net.h) */
	McNet		net;
} McServer;

#endif							/* MCFDW_SERVER_H */
