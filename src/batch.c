/*
 * batch.c — McBatchWrite as a loop of single-key round trips.
 *
 * Owns: nothing lasting.  This is the placeholder the pipelined batch
 * engine replaces (see batch.h): each op is one request and one reply
 * through McRoundtripKey, so routing, failover and failure accounting are
 * exactly the single-key functions'.  Must not: touch sockets or the
 * catalog, or keep state between calls.
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"

#include "batch.h"

/* Milliseconds on the monotonic clock. */
static int64
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One op, one round trip; raises on any failure. */
static McBatchResult
write_one(McServer *srv, const McBatchOp *op)
{
	char		wire[MC_KEY_MAX];
	size_t		wlen;
	bool		b64;
	char		hdr[MC_REQ_HEADER_MAX];
	size_t		hlen;
	McReqOpts	opts = {0};
	McConn	   *conn;
	McReply		r;
	const char *base;
	McBatchResult res;
	McRequest	req;
	bool		set = (op->kind == MC_BATCH_SET);

	/* the caller routed and checked the key: it fits */
	if (mc_key_check(op->key, op->keylen, &b64) != MC_KEY_OK)
		elog(ERROR, "queued memcached key of %zu bytes does not fit", op->keylen);
	if (b64)
		wlen = mc_b64_encode((const unsigned char *) op->key, op->keylen, wire);
	else
	{
		memcpy(wire, op->key, op->keylen);
		wlen = op->keylen;
	}
	if (set)
	{
		opts.mode = 'S';
		opts.has_ttl = op->has_ttl;
		opts.ttl = op->ttl;
		opts.has_client_flags = op->has_flags;
		opts.client_flags = op->flags;
	}
	hlen = mc_encode_request(hdr, set ? "ms" : "md", wire, wlen, b64,
							 set ? (long) op->valuelen : -1, &opts);
	req.hdr = hdr;
	req.hlen = hlen;
	req.data = set ? op->value : NULL;
	req.dlen = set ? op->valuelen : 0;
	req.opaque = 0;
	req.idempotent = set;
	base = McRoundtripKey(srv, op->key, op->keylen, &req, &r, &conn);
	if (r.type == MC_REPLY_HD)
		res = MC_BATCH_DONE;
	else if (r.type == MC_REPLY_NF || r.type == MC_REPLY_NS)
		res = MC_BATCH_MISS;
	else
		McConnReplyError(conn, base, &r);
	McConnConsume(conn, r.consumed);
	McInstanceEnd(srv, conn);
	return res;
}

/*
 * write_one that turns an error into MC_BATCH_FAILED and its message into
 * errbuf (when still empty).  No subtransaction: the connection code closes
 * a connection before it raises, so nothing is left to clean up.  The
 * commit-time caller runs with interrupts held, and raising an error
 * resets the hold-off counts, so they are put back.  A cancel is raised on.
 */
static McBatchResult
write_one_soft(McServer *srv, const McBatchOp *op, char *errbuf, size_t errlen)
{
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	volatile McBatchResult res = MC_BATCH_FAILED;

	PG_TRY();
	{
		res = write_one(srv, op);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		if (ed->sqlerrcode == ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
		if (errlen > 0 && errbuf[0] == '\0')
			snprintf(errbuf, errlen, "%s%s%s", ed->message,
					 ed->detail ? ": " : "", ed->detail ? ed->detail : "");
		FreeErrorData(ed);
		res = MC_BATCH_FAILED;
	}
	PG_END_TRY();
	return res;
}

/* One op under the timeouts McBatchWrite set; puts the server's own back. */
static McBatchResult
run_op(McServer *srv, const McBatchOp *op, bool soft, char *errbuf,
	   size_t errlen, int save_connect, int save_io)
{
	volatile McBatchResult res = MC_BATCH_FAILED;

	PG_TRY();
	{
		res = soft ? write_one_soft(srv, op, errbuf, errlen) : write_one(srv, op);
	}
	PG_FINALLY();
	{
		srv->cfg.connect_timeout = save_connect;
		srv->cfg.io_timeout = save_io;
	}
	PG_END_TRY();
	return res;
}

int
McBatchWrite(McServer *srv, McBatchOp *ops, int nops, int timeout_ms,
			 bool soft, char *errbuf, size_t errlen)
{
	int64		deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
	int			save_connect = srv->cfg.connect_timeout;
	int			save_io = srv->cfg.io_timeout;
	int			failed = 0;

	if (errlen > 0)
		errbuf[0] = '\0';
	for (int i = 0; i < nops; i++)
	{
		McBatchOp  *op = &ops[i];

		op->result = MC_BATCH_FAILED;
		if (deadline)
		{
			int64		left = deadline - now_ms();

			if (left <= 0)
			{
				if (errlen > 0 && errbuf[0] == '\0')
					snprintf(errbuf, errlen, "the %d ms allowed ran out", timeout_ms);
				failed++;
				continue;
			}

			/*
			 * The connection code takes its waits from the configuration:
			 * no wait may outlast what is left of the call (0 = forever
			 * must not reach it either).
			 */
			if (save_connect <= 0 || save_connect > left)
				srv->cfg.connect_timeout = (int) left;
			if (save_io <= 0 || save_io > left)
				srv->cfg.io_timeout = (int) left;
		}
		op->result = run_op(srv, op, soft, errbuf, errlen, save_connect, save_io);
		if (op->result == MC_BATCH_FAILED)
			failed++;
	}
	return failed;
}
