/*
 * batch.c — McBatchWrite: many writes of one server, one pipeline per
 * instance.
 *
 * Owns: the writes of the request engine (engine.c): runs of its
 * operations (McOp, encoded by McEngineOpEncode as a run of one's are)
 * that store, delete, mark stale or touch.  Ops are routed
 * (health.c's ring and alive map, as mc_get_multi routes keys) and grouped
 * per instance; each instance gets one pipeline of quiet meta commands,
 * each carrying its position as opaque (O<pos>), then "mn", which the
 * engine writes with every other before any reply is awaited.  Quiet mode
 * leaves only the exceptions on the wire (NS, NF, errors for ms/md; HD for
 * a touch, whose misses are the quiet ones), so what "MN" closes without a
 * word took the default outcome.  Requests are encoded in slices, so the
 * write buffer stays small however many ops a batch has.  An instance that
 * failed has its unanswered ops failed over to the others in another round
 * (failover), unless they may have run or are bound to their own instance
 * (home).
 *
 * A SQL caller's deletes are at most once (sent again, what the first send
 * deleted would be NF), and so are sets marked once (an INSERT's rows:
 * sent again, one could overwrite another client's newer value): the
 * engine marks their connections so.  Must not: open, read or write
 * sockets, wait, or restart or time out an instance (the engine does),
 * touch the catalog or SQL types, or keep state between calls.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "engine.h"
#include "health.h"
#include "server.h"

/* Keep at most this much encoded request text (values included) queued per instance. */
#define BW_WRITE_SLICE		(32 * 1024)

/*
 * memcached 1.6.18 over TLS stops reading once a set's value runs past the
 * 16 kB its buffer reads at a time: whatever follows the value sits
 * decrypted inside its OpenSSL buffer, where its event loop never looks,
 * and the batch times out (plain TCP, deletes and touches are not
 * affected).  Over TLS a batch with sets is therefore sent in segments of
 * at most this many bytes, each closed by "mn" and answered before the
 * next is sent, so no value crosses the server's buffer; a larger set goes
 * alone, not quiet, with nothing after it until its reply is in.
 */
#define BW_TLS_SEGMENT		(8 * 1024)

/*
 * One instance's share of a round: its requests and replies (its
 * connection and progress are the engine's, engine.c).
 */
typedef struct BwInstance
{
	int		   *ops;			/* indexes into the op array, request order */
	int			nops;
	int			next_send;		/* ops encoded so far */
	int			next_match;		/* replies come in order: positions below are passed */
	bool		mn_queued;		/* the last "mn" is queued */
	bool		segmented;		/* TLS with sets: see BW_TLS_SEGMENT */
	int			seg_end;		/* ops before this are in sent segments */
	bool		seg_waiting;	/* the segment sent is not answered yet */
	bool		seg_single;		/* ... and it is one large set, not quiet */
} BwInstance;

typedef struct BwBatch
{
	McServer   *srv;
	McOp	   *ops;
	int			nops;
	bool		soft;			/* the caller's: nothing but a cancel raises */
	bool		miss;			/* on_failure 'miss': a failed instance's ops
								 * fail, the call goes on */
	char	   *errbuf;
	size_t		errlen;
	BwInstance *inst;			/* one per configured instance */
	bool	   *excluded;		/* instances that failed in this call */
	int		   *slots;
	bool		reroute;		/* a failed instance left ops to fail over */
	bool	   *degraded;		/* under miss: instances whose ops failed */
	bool		segmented;		/* TLS and some sets: see BW_TLS_SEGMENT */
	McEngine	engine;			/* runs the instances' pipelines: soft when
								 * instance failures do not raise (soft,
								 * failover or on_failure 'miss'),
								 * at_most_once for the deletes and once
								 * sets of a SQL call, and the deadline */
} BwBatch;

/* Keep the first failure's message for a soft caller. */
static void
note_error(BwBatch *b, const char *fmt,...) pg_attribute_printf(2, 3);

static void
note_error(BwBatch *b, const char *fmt,...)
{
	va_list		ap;

	if (b->errlen == 0 || b->errbuf[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(b->errbuf, b->errlen, fmt, ap);
	va_end(ap);
}

/* Settle every unanswered op of an instance with result r. */
static void
settle_rest(BwBatch *b, BwInstance *bi, McOpResult r)
{
	for (int i = 0; i < bi->nops; i++)
	{
		McOp	   *op = &b->ops[bi->ops[i]];

		if (op->result == MC_OP_PENDING)
			op->result = r;
	}
}

/*
 * The instance failed (counted already by health.c; the engine's
 * dropped): its unanswered ops go to another instance with failover,
 * unless no time is left or they may have run there and must not run
 * twice (the engine's at-most-once rule says so in may_reroute, or raised
 * the failure); else they fail.
 */
static void
bw_dropped(void *arg, int s, McConn *conn, bool may_reroute)
{
	BwBatch    *b = arg;
	BwInstance *bi = &b->inst[s];

	note_error(b, "instance %s: %s", McInstanceName(&b->srv->net, s),
			   McInstanceHealthOf(b->srv, s)->last_error);
	if (may_reroute && b->srv->cfg.failover)
	{
		/* an op bound to its own instance fails with it */
		for (int i = 0; i < bi->nops; i++)
		{
			McOp	   *op = &b->ops[bi->ops[i]];

			if (op->home && op->result == MC_OP_PENDING)
				op->result = MC_OP_FAILED;
		}
		b->excluded[s] = true;
		b->reroute = true;
	}
	else
	{
		settle_rest(b, bi, MC_OP_FAILED);
		if (b->miss)
			b->degraded[s] = true;
	}
}

/*
 * Route the unanswered ops to their instances (skipping those that failed
 * in this call) and group them per instance.  False when none is pending.
 */
static bool
route_round(BwBatch *b)
{
	McServer   *srv = b->srv;
	int			n = srv->cfg.nendpoints;
	bool		alivebuf[MC_MAX_ENDPOINTS];
	const bool *alive = McInstanceAliveMap(srv, alivebuf);
	int			npending = 0;
	int		   *inst_of = b->slots + b->nops;	/* second half of slots */

	if (b->reroute)
	{
		if (alive == NULL)
			for (int s = 0; s < n; s++)
				alivebuf[s] = true;
		for (int s = 0; s < n; s++)
			if (b->excluded[s])
				alivebuf[s] = false;
		alive = alivebuf;
	}
	if (b->miss && alive != NULL)
	{
		bool		any = false;

		for (int s = 0; s < n; s++)
			any |= alive[s];
		if (!any && b->reroute)
		{
			/* failed over to the last instance: what is left fails */
			for (int i = 0; i < b->nops; i++)
				if (b->ops[i].result == MC_OP_PENDING)
					b->ops[i].result = MC_OP_FAILED;
			for (int s = 0; s < n; s++)
				b->degraded[s] |= b->excluded[s];
			b->reroute = false;
			return false;
		}
		if (!any)
			alive = NULL;		/* all dead: each op meets its own dead instance */
	}
	b->reroute = false;
	memset(b->inst, 0, sizeof(BwInstance) * n);
	for (int i = 0; i < b->nops; i++)
	{
		McOp	   *op = &b->ops[i];

		if (op->result != MC_OP_PENDING)
			continue;
		/* raises once no instance is left (failover) or all are dead */
		inst_of[i] = (n == 1 && alive == NULL) ? 0 :
			McInstancePickWith(srv, op->key, op->keylen, op->home ? NULL : alive);
		b->inst[inst_of[i]].nops++;
		npending++;
	}
	if (npending == 0)
		return false;
	for (int s = 0, off = 0; s < n; s++)
	{
		b->inst[s].ops = b->slots + off;
		off += b->inst[s].nops;
		b->inst[s].nops = 0;
	}
	for (int i = 0; i < b->nops; i++)
	{
		BwInstance *bi;

		if (b->ops[i].result != MC_OP_PENDING)
			continue;
		bi = &b->inst[inst_of[i]];
		bi->ops[bi->nops++] = i;
	}
	return true;
}

/* The room encode_op needs for op: its header, and a store's value. */
static inline size_t
op_room(const McOp *op)
{
	return MC_REQ_HEADER_MAX + (op->kind == MC_OP_STORE ? op->datalen + 2 : 0);
}

/* Encode one op at dst; returns its length (header, and data for a set). */
static size_t
encode_op(const McOp *op, int pos, bool quiet, char *dst)
{
	char		opaque[12];
	size_t		olen = (size_t) snprintf(opaque, sizeof(opaque), "%d", pos);
	size_t		n = McEngineOpEncode(op, opaque, olen, quiet, dst);

	/* the caller routed and checked the key: it fits */
	if (n == 0)
		elog(ERROR, "could not encode a write request for a checked key of %zu bytes",
			 op->keylen);
	if (op->kind != MC_OP_STORE)
		return n;
	memcpy(dst + n, op->data, op->datalen);
	n += op->datalen;
	dst[n++] = '\r';
	dst[n++] = '\n';
	return n;
}

/* Encode the next segment of a segmented pipeline, closed by "mn". */
static void
fill_segment(BwBatch *b, BwInstance *bi, McConn *conn)
{
	size_t		bytes = 0;
	int			first = bi->next_send;

	if (bi->seg_waiting || bi->mn_queued)
		return;
	if (bi->next_send < bi->nops)
	{
		McOp	   *op = &b->ops[bi->ops[bi->next_send]];
		size_t		room = op_room(op);

		if (room > BW_TLS_SEGMENT)
		{
			size_t		n = encode_op(op, bi->next_send, false,
									  McConnWriteSpace(conn, room));

			McConnWritten(conn, n);
			McConnPipelined(conn, 1);
			bi->next_send++;
			bi->seg_end = bi->next_send;
			bi->seg_waiting = true;
			bi->seg_single = true;
			return;
		}
	}
	while (bi->next_send < bi->nops)
	{
		McOp	   *op = &b->ops[bi->ops[bi->next_send]];
		size_t		room = op_room(op);
		size_t		n;

		if (room > BW_TLS_SEGMENT ||
			(bi->next_send > first && bytes + room > BW_TLS_SEGMENT))
			break;
		n = encode_op(op, bi->next_send, true, McConnWriteSpace(conn, room));
		McConnWritten(conn, n);
		bytes += n;
		bi->next_send++;
	}
	McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
	McConnPipelined(conn, bi->next_send - first);
	bi->seg_end = bi->next_send;
	bi->seg_waiting = true;
	bi->mn_queued = (bi->next_send == bi->nops);
}

/*
 * Queue more requests for an instance, up to one slice of unsent bytes (a
 * large value may overshoot it by itself), and "mn" once all are queued.
 */
static void
bw_fill(void *arg, int s, McConn *conn)
{
	BwBatch    *b = arg;
	BwInstance *bi = &b->inst[s];

	if (bi->segmented)
	{
		fill_segment(b, bi, conn);
		return;
	}
	while (bi->next_send < bi->nops && McConnUnsent(conn) < BW_WRITE_SLICE)
	{
		McOp	   *op = &b->ops[bi->ops[bi->next_send]];
		size_t		room = op_room(op);
		size_t		n = encode_op(op, bi->next_send, true, McConnWriteSpace(conn, room));

		McConnWritten(conn, n);
		bi->next_send++;
	}
	if (bi->next_send == bi->nops && !bi->mn_queued)
	{
		McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
		bi->mn_queued = true;
		McConnPipelined(conn, bi->nops);
	}
}

/*
 * A set of the instance's pipeline was over the server's item size limit.
 * The error carries no opaque, and the sets that went through said
 * nothing, so the refused one is any unanswered set; but the limit is on
 * the item's size, so the largest of them (key and value) is over it too:
 * that one is named.  The key is the routed one, printable bytes only.
 */
static void
too_large(BwBatch *b, BwInstance *bi, int s, McConn *conn, const char *line)
{
	const McOp *big = NULL;
	char		key[MC_KEY_MAX + 1];
	size_t		n;

	for (int i = bi->next_match; i < bi->next_send; i++)
	{
		const McOp *op = &b->ops[bi->ops[i]];

		if (op->kind == MC_OP_STORE &&
			(big == NULL || op->keylen + op->datalen > big->keylen + big->datalen))
			big = op;
	}
	if (big == NULL)
		return;
	n = Min(big->keylen, MC_KEY_MAX);
	for (size_t i = 0; i < n; i++)
	{
		unsigned char ch = (unsigned char) big->key[i];

		key[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char) ch;
	}
	key[n] = '\0';
	McConnClose(conn);
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("value of key \"%s\" is too large for memcached server \"%s\"",
					key, b->srv->name),
			 errdetail_internal("Instance %s replied: %s (the value is %zu bytes).",
								McInstanceName(&b->srv->net, s), line, big->datalen),
			 errhint("memcached's item size limit is set with its -I option (1 MB by default).")));
}

/*
 * An error reply ends the instance's part: the failing op cannot be told
 * (errors carry no opaque), so every unanswered op of it fails.  The server
 * did answer: nothing is failed over, and only a soft caller goes on (the
 * engine closes the socket).
 */
static McEngRead
error_reply(BwBatch *b, BwInstance *bi, int s, McConn *conn, const char *base,
			const McReply *r)
{
	size_t		len = r->header_len >= 2 ? Min(r->header_len - 2, 200) : 0;
	char		line[201];

	memcpy(line, base, len);
	line[len] = '\0';
	for (char *p = line; *p; p++)
		if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
			*p = '?';
	if (!b->soft && r->type == MC_REPLY_SERVER_ERROR &&
		strstr(line, "object too large") != NULL)
		too_large(b, bi, s, conn, line);
	if (!b->soft)
		McConnReplyError(conn, base, r);
	note_error(b, "instance %s replied: %s", McInstanceName(&b->srv->net, s), line);
	settle_rest(b, bi, MC_OP_FAILED);
	return MC_ENG_CLOSE;
}

/*
 * Handle every complete reply buffered for an instance (the engine's
 * read); a segment answered lets the next be queued.
 */
static McEngRead
bw_read(void *arg, int s, McConn *conn, char *buf, size_t len,
		size_t *consumed, size_t *need)
{
	BwBatch    *b = arg;
	BwInstance *bi = &b->inst[s];
	size_t		off = 0;

	for (;;)
	{
		char	   *base = buf + off;
		McReply		r;
		McReplyType t = mc_parse_reply_z(base, len - off, &r);
		int			j;

		if (t == MC_REPLY_NEED_MORE)
		{
			*need = r.need;
			break;
		}
		switch (t)
		{
			case MC_REPLY_HD:
			case MC_REPLY_NS:
			case MC_REPLY_NF:
			case MC_REPLY_EN:
			case MC_REPLY_EX:
				j = mc_reply_position(base, &r, (uint32) bi->next_match,
										  (uint32) bi->next_send);
				if (j < 0)
				{
					McInstanceMisbehaved(b->srv, conn, b->engine.soft, ERRCODE_PROTOCOL_VIOLATION,
								   "read from", "a reply does not match any outstanding request");
					return MC_ENG_FAILED;
				}
				b->ops[bi->ops[j]].result =
					(t == MC_REPLY_HD ? MC_OP_DONE : MC_OP_MISS);
				bi->next_match = j + 1;
				if (bi->seg_single && j == bi->seg_end - 1)
					bi->seg_single = bi->seg_waiting = false;
				break;
			case MC_REPLY_MN:
				if (bi->segmented && bi->seg_end < bi->nops)
				{
					/* a segment is done: its unnamed ops took the quiet outcome */
					for (int i = bi->next_match; i < bi->seg_end; i++)
					{
						McOp	   *op = &b->ops[bi->ops[i]];

						if (op->result == MC_OP_PENDING)
							op->result = (op->kind == MC_OP_GET ?
										  MC_OP_MISS : MC_OP_DONE);
					}
					bi->next_match = bi->seg_end;
					bi->seg_waiting = false;
					break;
				}
				/* what no reply named took the quiet outcome */
				{
					uint32		done = 0,
								missed = 0;

					for (int i = 0; i < bi->nops; i++)
					{
						McOp	   *op = &b->ops[bi->ops[i]];

						if (op->result == MC_OP_PENDING)
							op->result = (op->kind == MC_OP_GET ?
										  MC_OP_MISS : MC_OP_DONE);
						done += (op->result == MC_OP_DONE);
						missed += (op->result == MC_OP_MISS);
					}
					b->engine.inst[s].hits += done;
					/* the client statistics' hits and misses (a store's are not shown) */
					McConnFound(conn, done, missed);
				}
				bi->next_match = bi->nops;
				*consumed = off + r.consumed;
				return MC_ENG_DONE;
			case MC_REPLY_ERROR:
			case MC_REPLY_CLIENT_ERROR:
				/* a server that needs a login, or knows no meta command */
				if (McConnForeignReply(conn, base, r.header_len, MC_FOREIGN_META))
				{
					McInstanceCountFailure(b->srv, conn, b->engine.soft);
					return MC_ENG_FAILED;
				}
				/* FALLTHROUGH */
			case MC_REPLY_SERVER_ERROR:
				*consumed = off;
				return error_reply(b, bi, s, conn, base, &r);
			default:
				if (McConnForeignReply(conn, base, len - off, MC_FOREIGN_UNPARSED))
				{
					McInstanceCountFailure(b->srv, conn, b->engine.soft);
					return MC_ENG_FAILED;
				}
				McInstanceMisbehaved(b->srv, conn, b->engine.soft, ERRCODE_PROTOCOL_VIOLATION,
							   "read from", "the reply is not valid meta protocol");
				return MC_ENG_FAILED;
		}
		off += r.consumed;
	}
	*consumed = off;
	return (bi->segmented && !bi->seg_waiting) ? MC_ENG_REFILL : MC_ENG_MORE;
}

/*
 * The instance starts (again, after a restart on a fresh socket: never for
 * an at-most-once batch) from its first op.
 */
static void
bw_start(void *arg, int s)
{
	BwBatch    *b = arg;
	BwInstance *bi = &b->inst[s];

	bi->next_send = 0;
	bi->mn_queued = false;
	bi->segmented = b->segmented;
	bi->seg_end = 0;
	bi->seg_waiting = bi->seg_single = false;
}

/*
 * A soft batch gave the instance up on a held interrupt: its unanswered
 * ops fail (nothing is counted against its health).
 */
static void
bw_gave_up(void *arg, int s, const char *why)
{
	BwBatch    *b = arg;

	note_error(b, "instance %s: the send was given up: %s",
			   McInstanceName(&b->srv->net, s), why);
	settle_rest(b, &b->inst[s], MC_OP_FAILED);
}

/* Rounds until every op is settled: the first, then one per failover. */
static void
run_batch(void *arg)
{
	BwBatch    *b = arg;
	int			n = b->srv->cfg.nendpoints;

	b->inst = palloc(sizeof(BwInstance) * n);
	b->excluded = palloc0(sizeof(bool) * n);
	b->degraded = palloc0(sizeof(bool) * n);
	b->slots = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int) * 2 * (Size) b->nops);
	while (route_round(b))
	{
		for (int s = 0; s < n; s++)
			b->engine.inst[s].work = b->inst[s].nops;
		McEngineRun(&b->engine);
		if (!b->reroute)
			break;
	}
}

/*
 * run_batch for a soft caller: an error no instance reported (no instance
 * left to route to, out of memory) fails what is unsettled instead of
 * raising (McEngineCatch).  A cancel is raised on.
 */
static void
run_batch_soft(BwBatch *b)
{
	ErrorData  *ed = McEngineCatch(run_batch, b, false);

	if (ed == NULL)
		return;
	note_error(b, "%s%s%s", ed->message,
			   ed->detail ? ": " : "", ed->detail ? ed->detail : "");
	FreeErrorData(ed);
}

int
McBatchWrite(McServer *srv, McOp *ops, int nops, int timeout_ms,
			 bool soft, char *errbuf, size_t errlen)
{
	BwBatch		b;
	MemoryContext work;
	MemoryContext old;
	int			failed = 0;

	if (errlen > 0)
		errbuf[0] = '\0';
	if (nops <= 0)
		return 0;
	for (int i = 0; i < nops; i++)
		ops[i].result = MC_OP_PENDING;

	memset(&b, 0, sizeof(b));
	work = AllocSetContextCreate(CurrentMemoryContext, "mcfdw batch write",
								 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);
	McEngineInit(&b.engine, srv, &b);
	b.srv = srv;
	b.ops = ops;
	b.nops = nops;
	b.soft = soft;
	b.miss = srv->cfg.on_failure_miss;
	for (int i = 0; i < nops; i++)
	{
		b.segmented |= (ops[i].kind == MC_OP_STORE && srv->cfg.tls != MC_TLS_DISABLE);
		/*
		 * a second send of a delete answers NF for what the first one
		 * deleted; a set marked once (an INSERT's row) may have been
		 * overwritten by another client in between
		 */
		b.engine.at_most_once |= ((ops[i].kind == MC_OP_DELETE || ops[i].once) &&
								  !soft);
	}
	b.engine.soft = soft || srv->cfg.failover || b.miss;
	b.engine.give_up_held = soft;
	b.engine.timeout_ms = timeout_ms;
	b.engine.deadline = timeout_ms > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms) : 0;
	b.engine.start = bw_start;
	b.engine.fill = bw_fill;
	b.engine.read = bw_read;
	b.engine.dropped = bw_dropped;
	b.engine.gave_up = bw_gave_up;
	b.errbuf = errbuf;
	b.errlen = errlen;

	if (soft)
		run_batch_soft(&b);
	else
		run_batch(&b);
	/*
	 * A SQL caller's degraded instances are counted and warned about as the
	 * single-key functions' are; a soft caller (the commit) reports its
	 * failures itself.
	 */
	for (int s = 0; !soft && s < srv->cfg.nendpoints; s++)
		if (b.degraded[s])
			McInstanceDegraded(srv, s);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(work);

	for (int i = 0; i < nops; i++)
	{
		if (ops[i].result == MC_OP_PENDING)
			ops[i].result = MC_OP_FAILED;
		if (ops[i].result == MC_OP_FAILED)
			failed++;
	}
	return failed;
}
