/*
 * mcfdw.h — declarations shared by the backend-side files of mcfdw.
 *
 * Owns: the plain types the backend files share (the parsed foreign-server
 * options, the per-backend server entry, an instance's health record; the
 * connection is only named here, its insides are conn_int.h's) and the
 * entry points each backend file exposes to the others.  The pure-C modules
 * (protocol.h, ring.h, hash.h) know nothing of these.
 */
#ifndef MCFDW_H
#define MCFDW_H

#include "postgres.h"

#include "pg_compat.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/latch.h"

#include "client_stats.h"
#include "compress.h"
#include "protocol.h"
#include "ring.h"

/* Defaults and limits of the foreign-server options (see options.c). */
#define MC_DEFAULT_PORT				11211
#define MC_DEFAULT_CONNECT_TIMEOUT	1000	/* ms */
#define MC_DEFAULT_IO_TIMEOUT		1000	/* ms */
#define MC_DEFAULT_FAILURE_LIMIT	2
#define MC_DEFAULT_RETRY_DELAY		30	/* s */
#define MC_MIN_MAX_REPLY_SIZE		(1024 * 1024)
#define MC_MAX_ENDPOINTS			256
#define MC_MAX_KEY_PREFIX			128
#define MC_HOST_MAX					255
#define MC_SOCKET_PATH_MAX			107	/* a sockaddr_un's sun_path, less its NUL */
#define MC_AUTH_FIELD_MAX			250	/* bytes of a user name or a password */
#define MC_MIN_MAX_VALUE_SIZE		1024

/* One memcached instance named in the "servers" option. */
typedef struct McEndpoint
{
	char		host[MC_HOST_MAX + 1];	/* or a Unix socket's path ('/'...) */
	int			port;			/* 0 for a Unix socket */
	uint32		weight;
} McEndpoint;

/* The server option "tls", in libpq's sslmode terms. */
typedef enum McTlsMode
{
	MC_TLS_DISABLE,				/* plaintext */
	MC_TLS_REQUIRE,				/* encrypted, the certificate not checked */
	MC_TLS_VERIFY_CA,			/* ... signed by a trusted CA */
	MC_TLS_VERIFY_FULL			/* ... and naming the host */
} McTlsMode;

/*
 * A foreign server's options, parsed and checked, plus the credentials of
 * the user mapping its entry was built for (NULL when none).
 */
typedef struct McServerConfig
{
	int			nendpoints;
	McEndpoint *endpoints;
	int			connect_timeout;	/* ms, 0 = wait forever */
	int			io_timeout;		/* ms, 0 = wait forever */
	McDist		distribution;
	char	   *key_prefix;		/* "" when none */
	int			key_prefix_len;
	int			failure_limit;	/* consecutive failures before "dead" */
	int			retry_delay;	/* s a dead instance is left alone */
	bool		failover;
	bool		legacy_misses;	/* accept a miss without the opaque token */
	bool		long_keys_dalli;	/* long_keys 'dalli': digest long keys */
	int			idle_timeout;	/* s a pooled socket may sit idle, 0 = forever */
	int			max_reply_size; /* bytes one reply may take in memory */
	bool		on_failure_miss;	/* on_failure 'miss': unreachable = miss */
	McTlsMode	tls;
	char	   *tls_ca_file;	/* NULL: the system's trusted CAs */
	char	   *tls_server_name;	/* NULL: the instance's host */
	char	   *tls_cert_file;	/* client certificate, NULL when none */
	char	   *tls_key_file;
	char	   *username;		/* ASCII authentication (memcached -Y) */
	char	   *password;
	/* what the application's client writes in a value's flags (values.c) */
	bool		compression;	/* compression 'zlib' */
	uint32		compressed_flag;	/* the bits marking a zlib value; 0 = none */
	int			compress_threshold; /* deflate writes of this many bytes; 0 = never */
	int			max_value_size; /* bytes a value may inflate to */
	uint32		serialized_flag;	/* the bits marking a serialized object; 0 = none */
	/* what the server's owner lets roles with USAGE do (pool.c checks) */
	bool		writers_set;	/* option writers given: writes restricted */
	List	   *writers;		/* ... to these role names (and the owner) */
	bool		allow_full_scan;	/* tables may list the server's keys */
} McServerConfig;

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
 * One socket to one memcached instance: opaque outside the conn_*.c
 * files (the struct is in conn_int.h).
 */
typedef struct McConn McConn;

/* What the mc_servers and mc_connections views show of a connection. */
typedef struct McConnStats
{
	bool		open;			/* a socket is open */
	uint64		connects;		/* sockets opened in this backend */
	uint64		requests;		/* requests sent in this backend */
	/* of the open socket (mc_connections) */
	bool		in_use;			/* a request (or its connect) has not finished */
	bool		tls;			/* TLS on it */
	uint64		socket_requests;	/* requests sent on it */
	int64		idle_usec;		/* since its last request began */
} McConnStats;

/* A foreign server of the mcfdw wrapper, as this backend knows it. */
typedef struct McServer
{
	Oid			serverid;		/* hash key: the server ... */
	Oid			umid;			/* ... and the user mapping whose credentials
								 * its connections logged in with, InvalidOid
								 * when none has credentials */
	bool		valid;			/* config matches the catalog */
	uint32		hashvalue;		/* syscache hash of serverid */
	char		name[NAMEDATALEN];
	MemoryContext cxt;			/* config, ring; reset on rebuild */
	McServerConfig cfg;
	McRing	   *ring;
	MemoryContext live_cxt;		/* the live-instances ring (ketama failover) */
	McRing	   *live;
	bool	   *live_alive;		/* the health map live was built for */
	McInstanceHealth *health;	/* cfg.nendpoints of them; health.c's */
	int			ndead;			/* instances with dead_until set */

	/* the connection layer's (the conn_*.c files) */
	McConn	   *conns;			/* cfg.nendpoints of them (McConnOf) */
	uint64		sock_gen;		/* bumped whenever a socket opens or closes */
	WaitEventSet *mwes;			/* multi-get wait set over all open sockets */
	uint64		mwes_gen;		/* sock_gen mwes was built for */
	Latch	   *mwes_latch;
	Oid			acl_ok_user;	/* last role that passed the USAGE check */
	Oid			owner;			/* the server's owner: always a writer */
	Oid			write_ok_user;	/* last role that passed McServerCheckWrite */

	/* the statement last warned about a degraded call (health.c) */
	TimestampTz warned_stmt;
	LocalTransactionId warned_lxid;
	struct ssl_ctx_st *tls_ctx; /* conn_tls.c's, made at the first TLS
								 * connect, freed with cxt */
} McServer;

/* A stats command's callback: one "STAT name value" line. */
/*
 * One single-key request as health.c and conn.c carry it: its bytes, the
 * opaque token they carry (the reply must echo it; 0 for a text command,
 * whose reply has none), and whether sending it twice is harmless, which
 * decides whether a request whose reply was lost may be sent again.
 */
typedef struct McRequest
{
	const char *hdr;
	size_t		hlen;
	const char *data;			/* ms data block (sent with its CRLF), or NULL */
	size_t		dlen;
	uint32		opaque;
	bool		idempotent;
} McRequest;

typedef void (*McStatLineFn) (void *arg, const char *name, size_t namelen,
							  const char *value, size_t valuelen);

/* A line of a reply of many lines (a metadump): its callback's verdict. */
typedef enum McLineVerdict
{
	MC_LINE_MORE,				/* go on reading */
	MC_LINE_DONE,				/* that was the reply's last line */
	MC_LINE_BAD					/* not a line of this reply: a protocol violation */
} McLineVerdict;
typedef McLineVerdict (*McLineFn) (void *arg, const char *line, size_t len);

/* What one read of such a reply came to (McConnLinesRead). */
typedef enum McLinesStatus
{
	MC_LINES_WAIT,				/* nothing to read yet */
	MC_LINES_MORE,				/* lines read, more to come */
	MC_LINES_DONE,				/* the reply is complete */
	MC_LINES_FAILED,			/* the instance failed: cause kept in conn */
	MC_LINES_RETRY				/* pooled socket closed while idle: nothing ran */
} McLinesStatus;

/* reads.c */
extern bool McTextValid(const char *p, size_t len);

/*
 * The empty item memcached creates for a lease (mg N): zero bytes, a win
 * flag (W to the winner, Z to the others), not stale.  Every read treats
 * it as a miss; memcached sends W and Z whether or not they were asked.
 */
static inline bool
McReplyIsPlaceholder(const McReply *r)
{
	return unlikely(r->value_len == 0) &&
		(r->present & (MC_F_WIN | MC_F_WON)) != 0 &&
		!(r->present & MC_F_STALE);
}

/* values.c: compressed and serialized values, as the client flags say */
static inline bool
McValueCompressed(const McServerConfig *cfg, uint32 flags)
{
	return cfg->compression && (flags & cfg->compressed_flag) == cfg->compressed_flag;
}
extern struct varlena *McValueDecode(McServer *srv, const char *data, size_t len,
									 bool has_flags, uint32 flags, McZStatus *status);
extern char *McValueInflateInto(McServer *srv, const char *data, size_t len,
								char **buf, size_t *cap, size_t *outlen,
								const char *key, size_t keylen);
extern void McValueRaise(McServer *srv, McZStatus status, const char *key,
						 size_t keylen) McNoReturn();
extern void McValueCheckText(McServer *srv, bool has_flags, uint32 flags,
							 const char *key, size_t keylen, const char *bytes_hint);
/* McValueCheckText's hint for the SQL functions */
#define MC_BYTEA_HINT "Read it with the _bytea variant of the function"
extern bool McValueDeflate(McServer *srv, const char **data, size_t *len,
						   uint32 *flags);

/* servers.c */
extern List *McUsableServers(void);

/* options.c */
extern char *mc_default_server;
extern uint64 mc_default_server_gen;
extern bool mc_debug_check_rows;
extern int	mc_stats_timeout;
extern bool mc_warn_on_miss;
extern void McOptionsInit(void);
extern void McParseServerOptions(List *options, McServerConfig *cfg,
								 MemoryContext cxt);
extern void McParseUserMappingOptions(List *options, McServerConfig *cfg,
									  MemoryContext cxt);
extern bool McSameTransport(const McServerConfig *a, const McServerConfig *b);

/* endpoints.c: the "servers" option */
extern void McParseServers(const char *value, McServerConfig *cfg);

/* pool.c: servers */
extern void McPoolInit(void);
extern McServer *McServerLookup(const char *name);
extern McServer *McServerGetSlow(Oid serverid);
extern McServer *mc_last_server;
extern List *McPoolEntries(void);
extern Oid	McServerRoute(Oid serverid);

/*
 * The entry of an existing server, checked for USAGE.  The last one
 * returned is kept (and forgotten by every invalidation), so repeated calls
 * cost a few compares.
 */
static inline McServer *
McServerGet(Oid serverid)
{
	McServer   *srv = mc_last_server;

	if (likely(srv != NULL && srv->serverid == serverid && srv->valid &&
			   srv->acl_ok_user == GetUserId()))
		return srv;
	return McServerGetSlow(serverid);
}

/*
 * pool.c: refuse a role that may read a server but not write to it (the
 * server option writers), before anything is sent or queued.  Every path
 * that stores, deletes, touches, counts or flushes calls it.
 */
extern void McServerCheckWriteSlow(McServer *srv);
static inline void
McServerCheckWrite(McServer *srv)
{
	if (likely(!srv->cfg.writers_set || srv->write_ok_user == GetUserId()))
		return;
	McServerCheckWriteSlow(srv);
}
extern void McServerCheckFullScan(McServer *srv, Oid relid);

/* health.c: instance health, routing */
extern const McInstanceHealth *McInstanceHealthOf(McServer *srv, int index);
extern const bool *McServerAliveMap(McServer *srv, bool *buf);
extern McConn *McInstanceBegin(McServer *srv, int index, bool soft);
extern bool McInstanceFailed(McServer *srv, McConn *conn, bool soft);
extern bool McInstanceFail(McServer *srv, McConn *conn, bool soft,
						   int sqlerrcode, const char *action,
						   const char *fmt,...) pg_attribute_printf(6, 7);
extern void McInstanceEnd(McServer *srv, McConn *conn);
extern void McInstanceDegraded(McServer *srv, int index);
extern const char *McRoundtrip(McServer *srv, int index, const McRequest *req,
							   McReply *reply, McConn **connp, bool soft);
extern bool McInstanceStatLines(McServer *srv, int index, const char *cmd,
								int limit_ms, bool limit_counts,
								McStatLineFn cb, void *arg);
extern int	McServerPickWith(McServer *srv, const char *key, size_t len,
							 const bool *alive);
extern int	McServerPickNow(McServer *srv, const char *key, size_t len,
							const bool *alive);
extern const char *McRoundtripKey(McServer *srv, const char *key, size_t keylen,
								  const McRequest *req, McReply *reply,
								  McConn **connp);

/*
 * conn.c and conn_io.c: one socket per instance.  A failing instance is reported, never
 * judged: the call returns false/NULL/-1 with the cause kept in the
 * connection, and the caller (health.c's McInstance*) counts it and raises.
 */
extern McConn *McConnOf(McServer *srv, int index);
extern McConn *McConnArrayNew(MemoryContext cxt, int n);
extern void McConnCarryOver(McServer *srv, McConn *conns, int n, const int *from);
extern void McConnCloseBusy(McServer *srv);
extern int	McConnCloseIdle(McServer *srv, int *in_use);
extern void McConnDiscardAll(McServer *srv);
extern const char *McInstanceName(McServer *srv, int index);
extern const char *McConnName(McConn *conn);
extern int	McConnIndex(McConn *conn);
extern void McConnGetStats(McConn *conn, McConnStats *out);
extern bool McConnPrepare(McConn *conn);
extern void McConnProbeIdle(McConn *conn);
extern void McConnAtMostOnce(McConn *conn);
extern bool McConnFinishConnect(McConn *conn);
extern const char *McConnRoundtrip(McConn *conn, const McRequest *req,
								   McReply *reply);
extern bool McConnInDoubt(McConn *conn);
extern void McConnConsume(McConn *conn, size_t n);
extern void McConnEnd(McConn *conn);
extern void McConnClose(McConn *conn);
extern bool McConnFailedV(McConn *conn, int sqlerrcode, const char *action,
						  const char *fmt, va_list ap) pg_attribute_printf(4, 0);
extern const char *McConnFailure(McConn *conn, bool *hard);
extern int	McConnFailureCode(McConn *conn);
extern bool McConnFailureCounts(McConn *conn);
extern bool McConnFailureOwnLimit(McConn *conn);
extern void McConnRaise(McConn *conn) McNoReturn();
/* What McConnForeignReply may conclude from a reply (flags). */
#define MC_FOREIGN_META		0x1	/* it answers a meta command */
#define MC_FOREIGN_UNPARSED	0x2	/* the caller could not parse it */
extern bool McConnForeignReply(McConn *conn, const char *base, size_t len, int how);
extern void McConnReplyError(McConn *conn, const char *base,
							 const McReply *reply) McNoReturn();

/*
 * conn_connect.c: a connect McConnPrepare started, advanced a step at a
 * time without waiting, so one wait (pipeline.c's) serves the connects of
 * every instance of a call
 */
typedef enum McConnectStatus
{
	MC_CONNECT_DONE,
	MC_CONNECT_WAIT,			/* for McConnConnectWait's events */
	MC_CONNECT_FAILED			/* the cause kept in the connection */
} McConnectStatus;

extern bool McConnConnecting(McConn *conn);
extern McConnectStatus McConnConnectStep(McConn *conn);
extern long McConnConnectWait(McConn *conn, uint32 *events);
extern void McConnConnectExpired(McConn *conn);

/* conn_multi.c: the multi-get's non-blocking primitives */
extern WaitEventSet *McServerWaitSet(McServer *srv);
extern void McConnArm(McConn *conn, uint32 events);
extern ssize_t McConnSendSome(McConn *conn);
extern ssize_t McConnRecvSome(McConn *conn, size_t need, bool *drained);
extern size_t McConnUnsent(McConn *conn);
extern char *McConnWriteSpace(McConn *conn, size_t n);
extern void McConnWritten(McConn *conn, size_t n);
extern void McConnPipelined(McConn *conn, int nrequests);
extern void McConnHit(McConn *conn, const McReply *r);
extern char *McConnUnread(McConn *conn, size_t *len);
extern void McConnDropIdle(McConn *conn);

/* conn_tls.c: bytes OpenSSL holds are readable though epoll cannot see them */
extern bool McConnHasPending(McConn *conn);

/* conn_stats.c: stats commands ("STAT name value" lines, then END) */
extern bool McConnStatLines(McConn *conn, const char *cmd, int limit_ms,
							McStatLineFn cb, void *arg);

/* conn_lines.c: a command answered by a stream of lines (a metadump) */
extern void McConnLinesQueue(McConn *conn, const char *cmd);
extern McLinesStatus McConnLinesRead(McConn *conn, const char *cmd,
									 size_t max_line, McLineFn cb, void *arg);

#endif							/* MCFDW_H */
