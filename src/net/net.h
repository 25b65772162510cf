/*
 * net.h — the connection layer's public header (src/net/).
 *
 * Owns: the parsed options a connection reads (McServerConfig, filled by
 * the client layer's options.c and endpoints.c, read-only here), a
 * server's network part (McNet: its sockets, their generation, the
 * multi-get wait set, the TLS context; embedded in the client's McServer
 * and changed only by net/'s files), one request as the connection
 * carries it, and the entry points of net/'s files, each file's named with
 * its prefix.  The connection's insides are conn_int.h's.  Nothing here
 * knows servers as SQL sees them, health, routing or what commands mean.
 */
#ifndef MCFDW_NET_H
#define MCFDW_NET_H

#include "postgres.h"

#include "pg_compat.h"

#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/latch.h"

#include "client_stats.h"
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
	int			compression_level;	/* deflate's level, 1 (fastest) to 12 */
	int			max_value_size; /* bytes a value may inflate to */
	uint32		serialized_flag;	/* the bits marking a serialized object; 0 = none */
	/* what the server's owner lets roles with USAGE do (server_cache.c checks) */
	bool		writers_set;	/* option writers given: writes restricted */
	List	   *writers;		/* ... to these role names (and the owner) */
	bool		allow_full_scan;	/* tables may list the server's keys */
} McServerConfig;

/*
 * One socket to one memcached instance: opaque outside net/ (the struct
 * is in conn_int.h).
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

/*
 * A server's network part: its connections (one per instance) and what
 * they share.  Embedded in the client's McServer; McNetBind ties it to the
 * server's name and options once, McNetRebuild installs the connections of
 * a rebuilt configuration.  Only net/'s files change it.
 */
typedef struct McNet
{
	Oid			serverid;		/* net.c: the server's, for mc_client_stats */
	const char *name;			/* net.c: the server's, for messages */
	const McServerConfig *cfg;	/* net.c: the server's options */
	MemoryContext cxt;			/* net.c: the configuration's, where the TLS
								 * context lives */
	McConn	   *conns;			/* net.c: nconns of them (McNetConn) */
	int			nconns;			/* net.c */
	uint64		sock_gen;		/* net.c: bumped whenever a socket opens or
								 * closes (net_sock_changed) */
	WaitEventSet *mwes;			/* net.c: multi-get wait set over all open sockets */
	uint64		mwes_gen;		/* net.c: sock_gen mwes was built for */
	Latch	   *mwes_latch;		/* net.c */
	struct ssl_ctx_st *tls_ctx; /* conn_tls.c: made at the first TLS connect,
								 * freed with cxt */
} McNet;

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

/*
 * The entry points, by file; each file's names share its prefix (McNet for
 * net.c, McConn for conn.c, McConnFail for conn_fail.c, ...).  A failing
 * instance is reported, never judged: the call returns false/NULL/-1 with
 * the cause kept in the connection, and the caller (health.c's
 * McInstance*) counts it and raises.
 */

/* net.c: a server's connections as a set, and its multi-get wait set */
extern void McNetBind(McNet *net, Oid serverid, const char *name,
					  const McServerConfig *cfg);
extern McConn *McNetConnArray(MemoryContext cxt, int n);
extern void McNetRebuild(McNet *net, McConn *conns, int n, const int *from,
						 MemoryContext cxt);
extern void McNetDiscard(McNet *net);
extern McConn *McNetConn(McNet *net, int index);
extern void McNetCloseBusy(McNet *net);
extern int	McNetCloseIdle(McNet *net, int *in_use);
extern void McNetProbeIdle(McNet *net, const bool *probe, int n);
extern WaitEventSet *McNetWaitSet(McNet *net);
/* No socket opened or closed since McNetWaitSet built the set. */
static inline bool
McNetWaitSetCurrent(const McNet *net)
{
	return net->mwes_gen == net->sock_gen;
}
extern void McNetArm(McConn *conn, uint32 events);

/* instance_name.c */
extern const char *McInstanceName(McNet *net, int index);

/* conn.c: requests on a connection, one at a time or pipelined */
extern const char *McConnName(McConn *conn);
extern int	McConnIndex(McConn *conn);
extern void McConnGetStats(McConn *conn, McConnStats *out);
extern bool McConnPrepare(McConn *conn, bool probed, int cap_ms);
extern void McConnProbeIdle(McConn *conn);
extern void McConnAtMostOnce(McConn *conn);
extern const char *McConnRoundtrip(McConn *conn, const McRequest *req,
								   McReply *reply);
extern bool McConnInDoubt(McConn *conn);
extern void McConnConsume(McConn *conn, size_t n);
extern void McConnEnd(McConn *conn);
extern void McConnClose(McConn *conn);
/* What McConnForeignReply may conclude from a reply (flags). */
#define MC_FOREIGN_META		0x1	/* it answers a meta command */
#define MC_FOREIGN_UNPARSED	0x2	/* the caller could not parse it */
extern bool McConnForeignReply(McConn *conn, const char *base, size_t len, int how);
extern void McConnReplyError(McConn *conn, const char *base,
							 const McReply *reply) McNoReturn();
/* ... the multi-get's non-blocking slices */
extern ssize_t McConnSendSome(McConn *conn);
extern ssize_t McConnRecvSome(McConn *conn, size_t need, bool *drained);
extern size_t McConnUnsent(McConn *conn);
extern char *McConnWriteSpace(McConn *conn, size_t n);
extern void McConnWritten(McConn *conn, size_t n);
extern bool McConnUnqueue(McConn *conn, size_t keep);
extern void McConnPipelined(McConn *conn, int nrequests);
extern void McConnHit(McConn *conn, const McReply *r);
extern void McConnFound(McConn *conn, uint32 hits, uint32 misses);
extern char *McConnUnread(McConn *conn, size_t *len);
extern void McConnDropIdle(McConn *conn);
/* ... bytes the transport (TLS) holds are readable though epoll cannot see them */
extern bool McConnHasPending(McConn *conn);

/* conn_fail.c: the connection's last failure */
extern bool McConnFailedV(McConn *conn, int sqlerrcode, const char *action,
						  const char *fmt, va_list ap) pg_attribute_printf(4, 0);
extern const char *McConnFailure(McConn *conn, bool *hard);
extern int	McConnFailureCode(McConn *conn);
extern bool McConnFailureCounts(McConn *conn);
extern bool McConnFailureOwnLimit(McConn *conn);
extern void McConnFailRaise(McConn *conn) McNoReturn();

/*
 * conn_connect.c: a connect McConnPrepare started, advanced a step at a
 * time without waiting, so one wait (pipeline.c's) serves the connects of
 * every instance of a call; or finished by waiting on the connection's own
 * wait set (McConnConnectFinish)
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
extern bool McConnConnectFinish(McConn *conn);

/* conn_stat.c: stats commands ("STAT name value" lines, then END) */
extern bool McConnStatLines(McConn *conn, const char *cmd, int limit_ms,
							McStatLineFn cb, void *arg);

/* conn_lines.c: a command answered by a stream of lines (a metadump) */
extern void McConnLinesQueue(McConn *conn, const char *cmd);
extern McLinesStatus McConnLinesRead(McConn *conn, const char *cmd,
									 size_t max_line, McLineFn cb, void *arg);

#endif							/* MCFDW_NET_H */
