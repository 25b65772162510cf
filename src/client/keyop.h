/*
 * keyop.h — one operation on one key, run alone (keyop.c): what every
 * single-key SQL function and a foreign table's UPDATE send.
 *
 * An operation is what to do (its kind), to which key (checked and encoded
 * by keys.c), which fields the reply is to carry (want), what else is sent
 * with it (McReqOpts: a ttl, flags, a cas, a mode), and whether it must
 * not run twice.  McKeyOpRun routes it (health.c: failover,
 * on_failure, the instance's health), sends it as one meta command with a
 * fresh opaque token and reads its one reply into the operation's result;
 * the caller reads what it needs, then ends it with McKeyOpEnd (or
 * McKeyOpReplyError when the reply does not fit).
 */
#ifndef MCFDW_KEYOP_H
#define MCFDW_KEYOP_H

#include "health.h"
#include "keys.h"

typedef enum McKeyOpKind
{
	MC_OP_GET,					/* mg: read, touch (T), lease (N, R), metadata */
	MC_OP_STORE,				/* ms: opts.mode set, add, replace, append, prepend */
	MC_OP_DELETE,				/* md: delete, or mark stale (opts.invalidate) */
	MC_OP_ARITH					/* ma: opts.mode I or D */
} McKeyOpKind;

typedef struct McKeyOp
{
	/* the operation (McKeyOpInit: nothing wanted, sent or once) */
	McKeyOpKind kind;
	const McKey *key;
	unsigned	want;			/* MC_F_* fields the reply is to carry */
	const McReqOpts *opts;		/* what else is sent (its want and opaque are
								 * keyop.c's), NULL for nothing */
	const char *data;			/* STORE: the value's bytes */
	size_t		datalen;
	bool		once;			/* must not run twice: never resent, never
								 * failed over once it may have run */
	/* its result (McKeyOpRun) */
	McServer   *srv;
	McConn	   *conn;
	const char *base;			/* the reply's bytes; NULL: on_failure 'miss'
								 * answered it (counted degraded) */
	McReply		reply;			/* offsets relative to base */
	/* the request sent (McKeyOpRun's; here, not in its frame: no copy) */
	McRequest	req;
	char		hdr[MC_REQ_HEADER_MAX];
} McKeyOp;

/* An operation of kind on key k, nothing sent or wanted yet. */
static inline void
McKeyOpInit(McKeyOp *op, McKeyOpKind kind, const McKey *k)
{
	op->kind = kind;
	op->key = k;
	op->want = 0;
	op->opts = NULL;
	op->data = NULL;
	op->datalen = 0;
	op->once = false;
}

extern MC_HIDDEN uint32 mc_keyop_seq;
extern size_t McKeyOpEncode(McKeyOp *op, uint32 opaque);

/*
 * The opaque token of the next request: a backend-wide sequence (never 0,
 * which means "no token"), so a reply left over from any earlier request,
 * or sent unasked, cannot pass for this one's (conn.c checks the echo).
 */
static inline uint32
McKeyOpNextOpaque(void)
{
	if (unlikely(++mc_keyop_seq == 0))
		mc_keyop_seq = 1;
	return mc_keyop_seq;
}

/*
 * Run op on server srv: true with the reply in op->reply and op->base;
 * false when on_failure 'miss' answered it (the instance counted degraded,
 * nothing to end).  An instance that fails otherwise is raised.  The
 * request, with a fresh opaque token, goes into op->req and op->hdr; a
 * plain get (the value alone, nothing else sent) takes the short encoder
 * the multi-get uses.  Inline: every single-key call runs one.
 */
static inline bool
McKeyOpRun(McServer *srv, McKeyOp *op)
{
	McRequest  *req = &op->req;
	const McKey *k = op->key;
	bool		store = (op->kind == MC_OP_STORE);

	req->opaque = McKeyOpNextOpaque();
	req->hdr = op->hdr;
	if (likely(op->kind == MC_OP_GET && op->want == MC_F_VALUE && op->opts == NULL))
		req->hlen = mc_encode_get_value(op->hdr, k->wire, k->wire_len, k->b64,
										req->opaque);
	else
		req->hlen = McKeyOpEncode(op, req->opaque);
	req->data = store ? op->data : NULL;
	req->dlen = store ? op->datalen : 0;
	req->idempotent = !op->once;
	op->srv = srv;
	op->base = McRoundtripRouted(srv, k->raw, k->raw_len, req,
								 &op->reply, &op->conn);
	return op->base != NULL;
}

/* flush_all on every instance of srv: the number flushed. */
extern int	McFlushAll(McServer *srv);

/* The reply was read: the connection and the instance's run of failures end. */
static inline void
McKeyOpEnd(McKeyOp *op)
{
	McConnConsume(op->conn, op->reply.consumed);
	McInstanceEnd(op->srv, op->conn);
}

/* The reply does not fit the operation: the socket is closed, the reply raised. */
static inline void McKeyOpReplyError(McKeyOp *op) McNoReturn();
static inline void
McKeyOpReplyError(McKeyOp *op)
{
	McConnReplyError(op->conn, op->base, &op->reply);
}

#endif							/* MCFDW_KEYOP_H */
