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

/* The opaque token sequence (keyop.h's next_opaque): never 0 once used. */
uint32		mc_keyop_seq = 0;

/*
 * The header of any request but a plain get (McKeyOpRun's rare part): the
 * general encoder, the opaque token in decimal.
 */
size_t
McKeyOpEncode(McKeyOp *op, uint32 opaque)
{
	const McKey *k = op->key;
	McReqOpts	o = {0};
	char		otxt[12];
	char		digits[10];
	int			nd = 0;

	if (op->opts != NULL)
		o = *op->opts;
	o.want = op->want;
	/* the token in decimal, as mc_encode_get_value writes it */
	for (uint32 v = opaque; v != 0; v /= 10)
		digits[nd++] = (char) ('0' + v % 10);
	for (int i = 0; i < nd; i++)
		otxt[i] = digits[nd - 1 - i];
	o.opaque = otxt;
	o.opaque_len = nd;
	return mc_encode_request(op->hdr, op_command[op->kind], k->wire,
							 k->wire_len, k->b64,
							 op->kind == MC_OP_STORE ? (long) op->datalen : -1, &o);
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
