/*
 * run_writes.c — a run's writes and flushes: their requests queued, their
 * replies settling each op, the failover rounds, and the error a SQL
 * caller gets once every pipeline is settled.
 *
 * Owns: a write run (run_writes_exec): at most once when a SQL caller's
 * deletes or once sets are among its ops, bounded by timeout_ms, soft as
 * the caller says; its rounds, one more while an instance that failed
 * left ops to fail over by the failover rule (run_route.c), unless they
 * may have run there (the engine's at-most-once rule) or are bound home;
 * its ops sent quiet, so only exceptions come back (NS, NF, errors for
 * ms/md; HD for a touch, whose misses are the quiet ones) and what "mn"
 * closes without a word took the default outcome; over TLS a batch with
 * sets in segments (RUN_TLS_SEGMENT).  A SQL caller's write that is going
 * to raise (an instance failed without failover, or answered with an
 * error) first stops: nothing new is sent, and what is out on the other
 * instances is closed by "mn" and answered (stop_run), so nothing it sent
 * runs after its error unless its connection failed; the error is raised
 * then, its detail saying what became of the call's requests.  A soft
 * caller gets the first failure's message instead.  Flushes
 * (run_writes_flush): flush_all on the instances their ops name, each
 * answered OK; any failure or error reply is raised.  Every request is
 * encoded by the engine's encoder (McEngineOpEncode), a slice at a time,
 * so memory stays bounded however many ops a run has; no allocation per
 * op or reply.  Must not: route ops (run_route.c does), wait, or keep
 * state between runs.
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "run_int.h"

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
#define RUN_TLS_SEGMENT		(8 * 1024)

/* The room encode_op needs for op: its header, and a store's value. */
static inline size_t
op_room(const McOp *op)
{
	return MC_REQ_HEADER_MAX + (op->kind == MC_OP_STORE ? op->datalen + 2 : 0);
}

/* Encode one write op at dst; returns its length (header, and data for a set). */
static size_t
encode_op(const McOp *op, const McTag *tag, int pos, bool quiet, char *dst)
{
	char		opaque[MC_TAG_MAX + 10];
	size_t		olen = mc_tag_token(tag, (uint32) pos, opaque);
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

/* Queue one write op at the end of conn's unsent requests. */
static void
queue_op(RunState *r, RunInst *ri, McConn *conn, bool quiet)
{
	McOp	   *op = &r->ops[ri->items[ri->next_send]];

	McConnWritten(conn, encode_op(op, &ri->tag, ri->next_send, quiet,
								  McConnWriteSpace(conn, op_room(op))));
	ri->next_send++;
}

/* Encode the next segment of a segmented pipeline, closed by "mn". */
static void
fill_segment(RunState *r, RunInst *ri, McConn *conn)
{
	size_t		bytes = 0;
	int			first = ri->next_send;

	if (ri->seg_waiting || ri->mn_queued)
		return;
	if (ri->next_send < ri->nitems &&
		op_room(&r->ops[ri->items[ri->next_send]]) > RUN_TLS_SEGMENT)
	{
		queue_op(r, ri, conn, false);
		McConnPipelined(conn, 1);
		ri->seg_end = ri->next_send;
		ri->seg_waiting = true;
		ri->seg_single = true;
		return;
	}
	while (ri->next_send < ri->nitems)
	{
		size_t		room = op_room(&r->ops[ri->items[ri->next_send]]);
		size_t		before = McConnUnsent(conn);

		if (room > RUN_TLS_SEGMENT ||
			(ri->next_send > first && bytes + room > RUN_TLS_SEGMENT))
			break;
		queue_op(r, ri, conn, true);
		bytes += McConnUnsent(conn) - before;
	}
	McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
	McConnPipelined(conn, ri->next_send - first);
	ri->seg_end = ri->next_send;
	ri->seg_waiting = true;
	ri->mn_queued = (ri->next_send == ri->nitems);
}

/* The length of op's request at pos as queue_op queued it (quiet). */
static size_t
queued_len(const McOp *op, const McTag *tag, int pos)
{
	char		hdr[MC_REQ_HEADER_MAX];
	char		opaque[MC_TAG_MAX + 10];
	size_t		olen = mc_tag_token(tag, (uint32) pos, opaque);

	return McEngineOpEncode(op, opaque, olen, true, hdr) +
		(op->kind == MC_OP_STORE ? op->datalen + 2 : 0);
}

/*
 * The run stops (stop_run): of an instance's queued requests, those that
 * have not started to go out are taken back, so next_send counts what the
 * server may have received.  Over TLS nothing can be taken back: what is
 * queued (a slice at most) goes.
 */
static void
unqueue(RunState *r, RunInst *ri, McConn *conn)
{
	size_t		tail = McConnUnsent(conn);
	char		mn[8];
	size_t		mnlen = mc_encode_noop(mn);
	int			next = ri->next_send;

	if (tail == 0)
		return;
	if (ri->mn_queued)
	{
		if (tail <= mnlen)
			return;				/* every request is out: its "mn" ends them */
		tail -= mnlen;
	}
	/* the unsent bytes are the last ops' requests; one may be partly out */
	while (tail > 0 && next > ri->next_match)
	{
		size_t		len = queued_len(&r->ops[ri->items[next - 1]], &ri->tag, next - 1);

		if (len > tail)
			break;				/* started: it goes whole */
		tail -= len;
		next--;
	}
	if (!McConnUnqueue(conn, tail))
		return;
	ri->next_send = next;
	ri->mn_queued = false;
}

/*
 * Fill an instance once the run stops: nothing new, and what the server
 * may have received closed by "mn", whose reply ends the part (the ops not
 * sent stay unsettled: they fail).  A TLS segment out already ends so.
 */
static void
fill_stopped(RunState *r, RunInst *ri, McConn *conn)
{
	if (ri->segmented)
	{
		if (ri->seg_waiting || ri->mn_queued)
			return;
	}
	else
		unqueue(r, ri, conn);
	if (ri->mn_queued)
		return;
	McConnWritten(conn, mc_encode_noop(McConnWriteSpace(conn, 8)));
	McConnPipelined(conn, ri->next_send);
	ri->mn_queued = true;
}

/*
 * An error will be raised (r->raise): the instances still running send
 * nothing new, and their requests already out are answered (or their
 * instance fails in its turn, within io_timeout and the run's deadline)
 * before it is, so nothing the call sent runs after the caller has its
 * error.  An instance still connecting is filled so when it is ready;
 * failed, the one whose part is ending now.
 */
static void
stop_run(RunState *r, int failed)
{
	if (r->stopping)
		return;
	r->stopping = true;
	for (int s = 0; s < r->srv->cfg.nendpoints; s++)
	{
		McConn	   *conn = r->engine.inst[s].conn;

		if (s != failed && r->engine.inst[s].active && conn != NULL &&
			!McConnConnecting(conn))
			fill_stopped(r, &r->inst[s], conn);
	}
}

/*
 * Queue more of a write's requests (the engine's fill), up to one slice of
 * unsent bytes (a large value may overshoot it by itself), and "mn" once
 * all are queued.
 */
static void
writes_fill(void *arg, int s, McConn *conn)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	if (unlikely(r->stopping))
	{
		fill_stopped(r, ri, conn);
		return;
	}
	if (ri->segmented)
	{
		fill_segment(r, ri, conn);
		return;
	}
	while (ri->next_send < ri->nitems && McConnUnsent(conn) < RUN_WRITE_SLICE)
		queue_op(r, ri, conn, true);
	queue_last_mn(ri, conn);
}

/*
 * A flush's one command, queued once: a text command, with no opaque and
 * no "mn"; its one reply ends the part.
 */
static void
flush_fill(void *arg, int s, McConn *conn)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	if (!ri->mn_queued)
	{
		queue_op(r, ri, conn, false);
		McConnPipelined(conn, 1);
	}
	ri->mn_queued = true;
}

/* ---- replies ------------------------------------------------------------- */

/* Keep the first failure's message for a soft caller. */
static void
note_error(RunState *r, const char *fmt,...) pg_attribute_printf(2, 3);

static void
note_error(RunState *r, const char *fmt,...)
{
	va_list		ap;

	if (r->spec->errlen == 0 || r->spec->errbuf[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(r->spec->errbuf, r->spec->errlen, fmt, ap);
	va_end(ap);
}

/*
 * Keep the error raise(arg) raises for instance s, to raise once the run
 * is settled (stop_run); the first one wins.  False when it raised nothing.
 */
static bool
defer_error(RunState *r, int s, void (*raise) (void *arg), void *arg)
{
	ErrorData  *ed = McEngineCatch(raise, arg, true);

	if (ed == NULL)
		return false;
	if (r->raise == NULL)
		r->raise = ed;
	else
		FreeErrorData(ed);
	stop_run(r, s);
	return true;
}

/* defer_error's raiser of a failed instance's error */
static void
raise_failure(void *arg)
{
	McConnFailRaise((McConn *) arg);
}

/*
 * The instance's part ends unanswered: the ops it sent may or may not have
 * run (counted for the error's detail), those it did not send did not.
 */
static void
count_unsure(RunState *r, RunInst *ri)
{
	for (int i = 0; i < ri->next_send; i++)
		r->unsure += (r->ops[ri->items[i]].result == MC_OP_PENDING);
}

/*
 * Raise the error kept (defer_error) now that every pipeline is settled,
 * its detail saying what became of the call's requests.
 */
static void
raise_settled(RunState *r)
{
	ErrorData  *ed = r->raise;
	int			executed = 0;
	char	   *what;

	for (int i = 0; i < r->nops; i++)
		executed += (r->ops[i].result == MC_OP_DONE || r->ops[i].result == MC_OP_MISS);
	if (r->unsure > 0)
		what = psprintf("Of the %d requests, %d were executed, %d may or may not have been and %d were not sent.",
						r->nops, executed, r->unsure, r->nops - executed - r->unsure);
	else
		what = psprintf("Of the %d requests, %d were executed and %d were not sent.",
						r->nops, executed, r->nops - executed);
	/* (an error reply's detail ends with the server's line, not a sentence) */
	if (ed->detail != NULL)
		what = psprintf("%s%s%s", ed->detail,
						ed->detail[0] && ed->detail[strlen(ed->detail) - 1] == '.' ? "  " : "\n",
						what);
	ed->detail = what;
	ReThrowError(ed);
}

/*
 * A set of the instance's pipeline was over the server's item size limit.
 * The error carries no opaque, and the sets that went through said
 * nothing, so the refused one is any unanswered set; but the limit is on
 * the item's size, so the largest of them (key and value) is over it too:
 * that one is named.  The key is the routed one, printable bytes only.
 * Returns when no set is unanswered: there is none to name.
 */
static void
too_large(RunState *r, RunInst *ri, int s, McConn *conn, const char *line)
{
	const McOp *big = NULL;
	char		key[MC_KEY_MAX + 1];
	size_t		n;

	for (int i = ri->next_match; i < ri->next_send; i++)
	{
		const McOp *op = &r->ops[ri->items[i]];

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
					key, r->srv->name),
			 errdetail_internal("Instance %s replied: %s (the value is %zu bytes).",
								McInstanceName(&r->srv->net, s), line, big->datalen),
			 errhint("memcached's item size limit is set with its -I option (1 MB by default).")));
}

/* An error reply to a write, for defer_error's raiser (error_reply). */
typedef struct RunReplyError
{
	RunState   *r;
	RunInst    *ri;
	int			s;
	McConn	   *conn;
	const char *base;
	const McReply *rep;
	const char *line;
} RunReplyError;

/*
 * defer_error's raiser of an error reply: the server's "object too large"
 * names the set over the limit (too_large); any other error reply, or that
 * one with no set unanswered, is raised as the server gave it.
 */
static void
raise_reply_error(void *arg)
{
	RunReplyError *e = arg;

	if (e->rep->type == MC_REPLY_SERVER_ERROR && strstr(e->line, "object too large") != NULL)
		too_large(e->r, e->ri, e->s, e->conn, e->line);
	McConnReplyError(e->conn, e->base, e->rep);
}

/*
 * An error reply to a write ends the instance's part: the failing op
 * cannot be told (errors carry no opaque), so every unanswered op of it
 * fails.  The server did answer: nothing is failed over, and only a soft
 * caller goes on (the engine closes the socket).
 */
static McEngRead
error_reply(RunState *r, RunInst *ri, int s, McConn *conn, const char *base,
			const McReply *rep)
{
	size_t		len = rep->header_len >= 2 ? Min(rep->header_len - 2, 200) : 0;
	char		line[201];

	memcpy(line, base, len);
	line[len] = '\0';
	for (char *p = line; *p; p++)
		if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
			*p = '?';
	count_unsure(r, ri);
	if (r->defer)
	{
		RunReplyError e = {r, ri, s, conn, base, rep, line};

		defer_error(r, s, raise_reply_error, &e);
	}
	note_error(r, "instance %s replied: %s", McInstanceName(&r->srv->net, s), line);
	settle_rest(r, ri, MC_OP_FAILED);
	return MC_ENG_CLOSE;
}

/* What no reply named took the quiet outcome: ops first to before end. */
static void
settle_quiet(RunState *r, RunInst *ri, int first, int end, uint32 *done, uint32 *missed)
{
	for (int i = first; i < end; i++)
	{
		McOp	   *op = &r->ops[ri->items[i]];

		if (op->result == MC_OP_PENDING)
			op->result = (op->kind == MC_OP_GET ? MC_OP_MISS : MC_OP_DONE);
		*done += (op->result == MC_OP_DONE);
		*missed += (op->result == MC_OP_MISS);
	}
}

/*
 * One reply to a write (not NEED_MORE, not an error reply): its op's
 * outcome, or the end of the instance's part ("MN").  MC_ENG_MORE to go
 * on, else what the part came to; *ended when "MN" closed it.
 */
static McEngRead
write_reply(RunState *r, int s, McConn *conn, char *base, McReplyType t,
			const McReply *rep, bool more, bool *ended)
{
	RunInst    *ri = &r->inst[s];
	uint32		done = 0,
				missed = 0;
	int			j;

	if (t == MC_REPLY_MN)
	{
		if (!mn_due(ri, conn, more))
			return run_mn_stray(r, conn, r->engine.soft);
		if (ri->segmented && ri->seg_end < ri->nitems && !r->stopping)
		{
			/* a segment is done: its unnamed ops took the quiet outcome */
			settle_quiet(r, ri, ri->next_match, ri->seg_end, &done, &missed);
			ri->next_match = ri->seg_end;
			ri->seg_waiting = false;
			return MC_ENG_MORE;
		}
		/* (a run that stops sent fewer: the rest fail) */
		settle_quiet(r, ri, 0, ri->next_send, &done, &missed);
		r->engine.inst[s].hits += done;
		/* the client statistics' hits and misses (a store's are not shown) */
		McConnFound(conn, done, missed);
		ri->next_match = ri->nitems;
		*ended = true;
		return MC_ENG_DONE;
	}
	j = mc_reply_position(base, rep, &ri->tag, (uint32) ri->next_match,
						  (uint32) ri->next_send);
	if (j < 0)
	{
		McInstanceMisbehaved(r->srv, conn, r->engine.soft, ERRCODE_PROTOCOL_VIOLATION,
							 "read from", "a reply does not match any outstanding request");
		return MC_ENG_FAILED;
	}
	r->ops[ri->items[j]].result = (t == MC_REPLY_HD ? MC_OP_DONE : MC_OP_MISS);
	ri->next_match = j + 1;
	if (ri->seg_single && j == ri->seg_end - 1)
		ri->seg_single = ri->seg_waiting = false;
	return MC_ENG_MORE;
}

/*
 * A write's replies: each op's outcome, "MN" ends the part (or a TLS
 * segment, letting the next be queued), an error reply ends it too.
 */
static McEngRead
read_writes(void *arg, int s, McConn *conn, char *buf, size_t len,
			size_t *consumed, size_t *need)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];
	size_t		off = 0;

	for (;;)
	{
		char	   *base = buf + off;
		McReply		rep;
		McReplyType t = mc_parse_reply_z(base, len - off, &rep);
		McEngRead	res;
		bool		ended = false;

		if (t == MC_REPLY_NEED_MORE)
		{
			*need = rep.need;
			break;
		}
		switch (t)
		{
			case MC_REPLY_HD:
			case MC_REPLY_NS:
			case MC_REPLY_NF:
			case MC_REPLY_EN:
			case MC_REPLY_EX:
			case MC_REPLY_MN:
				res = write_reply(r, s, conn, base, t, &rep,
								  off + rep.consumed < len, &ended);
				if (ended)
					*consumed = off + rep.consumed;
				if (res != MC_ENG_MORE)
					return res;
				break;
			case MC_REPLY_ERROR:
			case MC_REPLY_CLIENT_ERROR:
				/* a server that needs a login, or knows no meta command */
				if (McConnForeignReply(conn, base, rep.header_len, MC_FOREIGN_META))
				{
					McInstanceCountFailure(r->srv, conn, r->engine.soft);
					return MC_ENG_FAILED;
				}
				/* FALLTHROUGH */
			case MC_REPLY_SERVER_ERROR:
				*consumed = off;
				return error_reply(r, ri, s, conn, base, &rep);
			default:
				if (McConnForeignReply(conn, base, len - off, MC_FOREIGN_UNPARSED))
				{
					McInstanceCountFailure(r->srv, conn, r->engine.soft);
					return MC_ENG_FAILED;
				}
				McInstanceMisbehaved(r->srv, conn, r->engine.soft, ERRCODE_PROTOCOL_VIOLATION,
									 "read from", "the reply is not valid meta protocol");
				return MC_ENG_FAILED;
		}
		off += rep.consumed;
	}
	*consumed = off;
	return (ri->segmented && !ri->seg_waiting) ? MC_ENG_REFILL : MC_ENG_MORE;
}

/*
 * A flush's reply: OK (parsed as HD) settles its op and ends the part.
 * Anything else is raised, as a single-key call's would be: a server that
 * needs a login or is not memcached as the instance's failure (counted),
 * an error reply as the server's (the socket closed, nothing counted).
 */
static McEngRead
read_flush(void *arg, int s, McConn *conn, char *buf, size_t len,
		   size_t *consumed, size_t *need)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];
	McReply		rep;
	McReplyType t = mc_parse_reply_z(buf, len, &rep);

	if (t == MC_REPLY_NEED_MORE)
	{
		*need = rep.need;
		*consumed = 0;
		return MC_ENG_MORE;
	}
	if (t == MC_REPLY_HD)
	{
		r->ops[ri->items[0]].result = MC_OP_DONE;
		r->engine.inst[s].hits++;
		McConnFound(conn, 1, 0);
		*consumed = rep.consumed;
		return MC_ENG_DONE;
	}
	/* memcached at its connection limit (-c) greets a new socket so, and closes it */
	if (t == MC_REPLY_ERROR && rep.msg_len > 0 &&
		memmem(buf + rep.msg_off, rep.msg_len, "Too many open connections", 25))
	{
		McInstanceMisbehaved(r->srv, conn, false, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							 "connect to", "the server refused the connection: too many open connections");
		return MC_ENG_FAILED;
	}
	if (McConnForeignReply(conn, buf, t == MC_REPLY_BAD ? len : rep.header_len,
						   t == MC_REPLY_BAD ? MC_FOREIGN_UNPARSED : MC_FOREIGN_META))
	{
		McInstanceCountFailure(r->srv, conn, false);
		return MC_ENG_FAILED;
	}
	McConnReplyError(conn, buf, &rep);
}

/*
 * The instance failed (counted already by health.c; the engine's
 * dropped).  Its unanswered ops go to another instance with failover,
 * unless no time is left or they may have run there and must not run
 * twice (the engine's at-most-once rule says so in may_reroute, or raised
 * the failure); else they fail.
 */
static void
writes_dropped(void *arg, int s, McConn *conn, bool may_reroute)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	note_error(r, "instance %s: %s", McInstanceName(&r->srv->net, s),
			   McInstanceHealthOf(r->srv, s)->last_error);
	if (may_reroute && r->srv->cfg.failover)
	{
		/* an op bound to its own instance fails with it */
		for (int i = 0; i < ri->nitems; i++)
		{
			McOp	   *op = &r->ops[ri->items[i]];

			if (op->home && op->result == MC_OP_PENDING)
				op->result = MC_OP_FAILED;
		}
		r->excluded[s] = true;
		r->reroute = true;
	}
	else
	{
		count_unsure(r, ri);
		settle_rest(r, ri, MC_OP_FAILED);
		if (r->miss)
			r->degraded[s] = true;
	}
	/*
	 * Raised: any failure without failover or on_failure 'miss'; one after
	 * at-most-once ops may have run there without 'miss' (a connect that
	 * could not start left no connection with the engine)
	 */
	if (r->defer_fail || (r->engine.inst[s].in_doubt && !r->miss))
		defer_error(r, s, raise_failure, conn != NULL ? conn : McNetConn(&r->srv->net, s));
}

/*
 * A soft run gave the instance up on a held interrupt: its unanswered
 * ops fail (nothing is counted against its health).
 */
static void
writes_gave_up(void *arg, int s, const char *why)
{
	RunState   *r = arg;

	note_error(r, "instance %s: the send was given up: %s",
			   McInstanceName(&r->srv->net, s), why);
	settle_rest(r, &r->inst[s], MC_OP_FAILED);
}

/* Write rounds until every op is settled: the first, then one per failover. */
static void
run_writes(void *arg)
{
	RunState   *r = arg;
	int			n = r->srv->cfg.nendpoints;

	r->excluded = palloc0(sizeof(bool) * n);
	r->degraded = palloc0(sizeof(bool) * n);
	r->slots = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int) * 2 * (Size) r->nops);
	while (run_route_writes(r))
	{
		/*
		 * A dead instance is raised as before anything is sent: the engine
		 * would only pass it over (defer_fail)
		 */
		for (int s = 0; r->defer_fail && s < n; s++)
			if (r->inst[s].nitems > 0)
				(void) McInstanceUsable(r->srv, s, false);
		run_round(r);
		if (r->raise != NULL)
		{
			/* the ops of an instance that failed are not failed over now */
			for (int s = 0; r->reroute && s < n; s++)
				if (r->excluded[s])
					count_unsure(r, &r->inst[s]);
			break;
		}
		if (!r->reroute)
			break;
	}
}

/*
 * A write run: at most once when a SQL caller's deletes or once sets are
 * among its ops, bounded by timeout_ms, soft as the caller says (an error
 * no instance reported, no instance left to route to or out of memory,
 * fails what is unsettled instead of raising: McEngineCatch; a cancel is
 * raised on).
 */
int
run_writes_exec(RunState *r)
{
	McServer   *srv = r->srv;
	McRun	   *spec = r->spec;
	int			failed = 0;

	r->soft = (spec->flags & MC_RUN_SOFT) != 0;
	for (int i = 0; i < r->nops; i++)
	{
		r->ops[i].result = MC_OP_PENDING;
		r->segmented |= (r->ops[i].kind == MC_OP_STORE && srv->cfg.tls != MC_TLS_DISABLE);
		/*
		 * a second send of a delete answers NF for what the first one
		 * deleted; a set marked once (an INSERT's row) may have been
		 * overwritten by another client in between
		 */
		r->engine.at_most_once |= ((r->ops[i].kind == MC_OP_DELETE || r->ops[i].once) &&
								   !r->soft);
	}
	/*
	 * A SQL caller's error waits until every other instance's requests
	 * already out are answered (stop_run): the engine raises none itself.
	 */
	r->defer = !r->soft;
	r->defer_fail = !(r->soft || srv->cfg.failover || r->miss);
	r->engine.soft = true;
	r->engine.client_raises = r->defer;
	r->engine.give_up_held = r->soft;
	r->engine.timeout_ms = spec->timeout_ms;
	r->engine.deadline = spec->timeout_ms > 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), spec->timeout_ms) : 0;
	r->engine.fill = writes_fill;
	r->engine.read = read_writes;
	r->engine.dropped = writes_dropped;
	r->engine.gave_up = writes_gave_up;
	if (r->soft)
	{
		ErrorData  *ed = McEngineCatch(run_writes, r, false);

		if (ed != NULL)
		{
			note_error(r, "%s%s%s", ed->message,
					   ed->detail ? ": " : "", ed->detail ? ed->detail : "");
			FreeErrorData(ed);
		}
	}
	else
		run_writes(r);
	/*
	 * A SQL caller's degraded instances are counted and warned about as the
	 * single-key functions' are; a soft caller (the commit) reports its
	 * failures itself.
	 */
	for (int s = 0; !r->soft && s < srv->cfg.nendpoints; s++)
		if (r->degraded[s])
			McInstanceDegraded(srv, s);
	for (int i = 0; i < r->nops; i++)
	{
		if (r->ops[i].result == MC_OP_PENDING)
			r->ops[i].result = MC_OP_FAILED;
		if (r->ops[i].result == MC_OP_FAILED)
			failed++;
	}
	if (r->raise != NULL)
		raise_settled(r);
	return failed;
}

/*
 * A flush run: every instance named is flushed, or the run raises: a dead
 * or failing instance whatever failover and on_failure say (a flush cannot
 * go elsewhere, nor pass for a miss).  Flushing twice is harmless: a
 * pooled socket found closed is retried.  Returns the number of instances
 * flushed.
 */
int
run_writes_flush(RunState *r)
{
	int			flushed = 0;

	r->engine.fill = flush_fill;
	r->engine.read = read_flush;
	for (int i = 0; i < r->nops; i++)
		r->ops[i].result = MC_OP_PENDING;
	run_route_instances(r);
	run_round(r);
	for (int i = 0; i < r->nops; i++)
		flushed += (r->ops[i].result == MC_OP_DONE);
	return flushed;
}
