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

/*
 * A foreign server of the mcfdw wrapper, as this backend knows it.  Each
 * member names the one file that writes it (test/unit/structure.py checks
 * this across src/); the others read it or ask the owner.
 */
typedef struct McServer McServer;
struct McServer
{
	/* the entry, its configuration, the privilege checks' cache */
	Oid			serverid;		/* server_cache.c: hash key: the server ... */
	Oid			umid;			/* server_cache.c: ... and the user mapping
								 * whose credentials its connections logged
								 * in with, InvalidOid when none has them */
	bool		valid;			/* server_cache.c: config matches the catalog */
	uint32		hashvalue;		/* server_cache.c: syscache hash of serverid */
	char		name[NAMEDATALEN];	/* server_cache.c */
	MemoryContext cxt;			/* server_cache.c: config, ring; reset on
								 * rebuild */
	McServerConfig cfg;			/* server_cache.c: options.c parses it into
								 * the entry; read-only elsewhere */
	McRing	   *ring;			/* server_cache.c */
	Oid			acl_ok_user;	/* server_cache.c: last role that passed the
								 * USAGE check */
	Oid			owner;			/* server_cache.c: the server's owner, always
								 * a writer */
	Oid			write_ok_user;	/* server_cache.c: last role that passed
								 * McServerCheckWrite */

	/* instance health, the live ring, degraded-call warnings */
	McInstanceHealth *health;	/* health.c: cfg.nendpoints of them (the
								 * array is server_cache.c's allocation) */
	int			ndead;			/* health.c: instances with dead_until set */
	MemoryContext live_cxt;		/* health.c: the live-instances ring (ketama
								 * failover) */
	McRing	   *live;			/* health.c */
	bool	   *live_alive;		/* health.c: the health map live was built
								 * for */
	TimestampTz warned_stmt;	/* health.c: the statement last warned about
								 * a degraded call */
	LocalTransactionId warned_lxid; /* health.c */

	/* the connection layer's, through net.h */
	McNet		net;			/* net/net.c */
};

#endif							/* MCFDW_SERVER_H */
