/*
 * keyop.c — one operation on one key, run alone: the single-key request
 * path of every single-key SQL function (writes.c, reads.c) and of a
 * foreign table's UPDATE (fdw_modify.c); and flush_all, one text command
 * to every instance in turn (McFlushAll).
 *
 * Owns: the opaque token sequence, building the operation's one meta
 * command (mg, ms, md, ma) from its kind, key and options (a plain get
 * takes the short encoder the multi-get uses), and handing it to health.c,
 * which routes it to the key's instance (failover, on_failure, at most
 * once) and counts the outcome.  Must not: apply key rules (keys.c did,
 * once, before), choose the instance (health.c), touch sockets (conn.c,
 * through health.c), or know what the reply means (the callers read it).
 */
#include "postgres.h"

#include "keyop.h"

/* The command of each kind. */
static const char *const op_command[] = {
	[MC_OP_GET] = "mg",
	[MC_OP_STORE] = "ms",
	[MC_OP_DELETE] = "md",
	[MC_OP_ARITH] = "ma",
};

/*
 * The opaque token of the next request: a backend-wide sequence (never 0,
 * which means "no token"), so a reply left over from any earlier request,
 * or sent unasked, cannot pass for this one's (conn.c checks the echo).
 */
static inline uint32
next_opaque(void)
{
	static uint32 seq = 0;

	if (unlikely(++seq == 0))
		seq = 1;
	return seq;
}

/*
 * The request of op, with a fresh opaque token: its header in hdr (of
 * MC_REQ_HEADER_MAX bytes).
 */
static void
build_request(McKeyOp *op, char *hdr, McRequest *req)
{
	const McKey *k = op->key;
	bool		store = (op->kind == MC_OP_STORE);

	req->opaque = next_opaque();
	req->hdr = hdr;
	/* a get of the value alone, nothing else sent: the short encoder's */
	if (op->kind == MC_OP_GET && op->want == MC_F_VALUE && op->opts == NULL)
		req->hlen = mc_encode_get_value(hdr, k->wire, k->wire_len, k->b64,
										req->opaque);
	else
	{
		McReqOpts	o = {0};
		char		otxt[12];
		char		digits[10];
		int			nd = 0;

		if (op->opts != NULL)
			o = *op->opts;
		o.want = op->want;
		/* the token in decimal, as mc_encode_get_value writes it */
		for (uint32 v = req->opaque; v != 0; v /= 10)
			digits[nd++] = (char) ('0' + v % 10);
		for (int i = 0; i < nd; i++)
			otxt[i] = digits[nd - 1 - i];
		o.opaque = otxt;
		o.opaque_len = nd;
		req->hlen = mc_encode_request(hdr, op_command[op->kind], k->wire,
									  k->wire_len, k->b64,
									  store ? (long) op->datalen : -1, &o);
	}
	req->data = store ? op->data : NULL;
	req->dlen = store ? op->datalen : 0;
	req->idempotent = !op->once;
}

bool
McKeyOpRun(McServer *srv, McKeyOp *op)
{
	char		hdr[MC_REQ_HEADER_MAX];
	McRequest	req;

	build_request(op, hdr, &req);
	op->srv = srv;
	op->base = McRoundtripRouted(srv, op->key->raw, op->key->raw_len, &req,
								 &op->reply, &op->conn);
	return op->base != NULL;
}

/*
 * Invalidate every item on every instance of srv (mc_flush_all); returns
 * the number of instances flushed.  The text command: the meta protocol
 * has no flush.  An instance that fails is raised, as every write's is.
 */
int
McFlushAll(McServer *srv)
{
	static const char cmd[] = "flush_all\r\n";

	/* a text command: its reply has no opaque; flushing twice is harmless */
	static const McRequest req = {cmd, sizeof(cmd) - 1, NULL, 0, 0, true};
	int			n = 0;

	for (int i = 0; i < srv->cfg.nendpoints; i++)
	{
		McConn	   *conn;
		McReply		r;
		const char *base;

		base = McRoundtrip(srv, i, &req, &r, &conn, false);
		if (r.type != MC_REPLY_HD)
			McConnReplyError(conn, base, &r);
		McConnConsume(conn, r.consumed);
		McInstanceEnd(srv, conn);
		n++;
	}
	return n;
}
