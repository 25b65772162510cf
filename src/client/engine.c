/*
 * engine.c — the request engine: every request of the client layer, a
 * single-key call's one request alone, and runs of many requests of one
 * server, one pipeline per instance, every pipeline in flight at once.
 *
 * Owns: the rules of a request on an instance: at most once (a request
 * that must not run twice and may have run on a failing instance is
 * neither resent nor failed over: eng_in_doubt, for a request alone and
 * a pipelined run alike), whether an instance may be tried now and
 * reporting every outcome to health.c.  Where a request goes and where it
 * fails over to, and what on_failure 'miss' makes of a key with no
 * instance left, is the runner's failover rule (run_route.c), for a run of one
 * and the rounds of a run of many alike.  Building any operation's
 * command from its kind, key and fields (McEngineOpEncode: a run of one's
 * and the runner's alike): the meta commands (mg, ms, md, ma), and the
 * text commands that are operations too, "stats <group>", "lru_crawler
 * metadump <what>" and "flush_all".  A run of one's request on the
 * instance the runner chose (McEngineSendOne, the runner's alone; the run
 * of one itself is run.h's McRunOne): the opaque token sequence, one
 * request and one reply on the instance's own connection (conn.c's
 * McConnRoundtrip: its retry of a pooled socket closed while idle, never
 * for a request that must not run twice); a stats operation on the
 * instance the runner names (McEngineStatLines, the runner's alone: run.h's
 * McRunStats, for the views and the planner), its bounds, and which of
 * its failures count against the instance's health.  Runs of many: each
 * instance's part of a run (McEngInst) and its state machine — started on
 * a probed pooled socket or a connect finished on the shared wait
 * (pipeline.c), requests queued by the client as the socket takes them,
 * replies read without waiting and handed to the client (or, for a run
 * whose replies are lines, a full scan's key dumps, read a line at a
 * time), restarted once on a fresh socket when the pooled one turns out
 * closed while idle before any reply came, marked at most once when the
 * client's requests must not run twice, failed on io_timeout, the call's
 * deadline (a connect it starts bounded by what is left of it) or a bad
 * reply, given up on a terminate or cancel held after commit, ended (its
 * health reset) when its last reply came; McEngineCatch, the error trap of
 * the callers that run after commit; McKeyArena, where a run keeps its
 * keys.  Its one client, the runner (run.c), owns its requests, their
 * routing and failover, the meaning of their replies and what a failure
 * does to them; single-key callers (reads.c, writes.c, fdw_modify.c) what
 * a reply means.  Must not: apply key rules (keys.c did, once, before),
 * parse replies, route keys, change an instance's health record (health.c
 * does, told of every outcome), or touch SQL types or the catalog.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "engine.h"
#include "pipeline.h"
#include "health.h"

/* ---- operations: their commands, and a request alone --------------------- */

/* The command of each kind. */
static const char *const op_command[] = {
	[MC_OP_GET] = "mg",
	[MC_OP_STORE] = "ms",
	[MC_OP_DELETE] = "md",
	[MC_OP_ARITH] = "ma",
	[MC_OP_DUMP] = NULL,		/* text commands: eng_text_encode */
	[MC_OP_STATS] = NULL,
	[MC_OP_FLUSH] = NULL,
};

/*
 * A text command's request at dst (capacity MC_REQ_HEADER_MAX): "stats",
 * "stats <group>", "lru_crawler metadump <what>" (a key dump: what is the
 * op's key, "hash" or "all") or "flush_all".  Text replies carry no opaque
 * token and a text command has no quiet mode.  0 when the argument does
 * not fit.
 */
static size_t
eng_text_encode(const McOp *op, char *dst)
{
	static const char flush[] = "flush_all\r\n";
	static const char stats[] = "stats";
	static const char dump[] = "lru_crawler metadump";
	const char *cmd = op->kind == MC_OP_DUMP ? dump : stats;
	size_t		n = op->kind == MC_OP_DUMP ? sizeof(dump) - 1 : sizeof(stats) - 1;

	if (op->kind == MC_OP_FLUSH)
	{
		memcpy(dst, flush, sizeof(flush) - 1);
		return sizeof(flush) - 1;
	}
	Assert(op->kind == MC_OP_STATS || op->kind == MC_OP_DUMP);
	Assert(op->kind == MC_OP_STATS || op->keylen > 0);
	if (op->keylen + n + 3 > MC_REQ_HEADER_MAX)
		return 0;
	memcpy(dst, cmd, n);
	if (op->keylen > 0)
	{
		dst[n++] = ' ';
		memcpy(dst + n, op->key, op->keylen);
		n += op->keylen;
	}
	dst[n++] = '\r';
	dst[n++] = '\n';
	return n;
}

/* The opaque token sequence (McOpNextOpaque): never 0 once used. */
uint32		mc_op_seq = 0;

/*
 * The header of op's request at dst (capacity MC_REQ_HEADER_MAX): its
 * command, key (the prepared wire form, or made here from the routed key),
 * the op's fields over its opts, opaque and quiet as given.  0 when it
 * cannot be encoded (a key no check let through).  A store's value goes
 * after it, as the caller sends it.
 */
size_t
McEngineOpEncode(const McOp *op, const char *opaque, size_t opaque_len,
				 bool quiet, char *dst)
{
	McReqOpts	o = {0};
	char		wire[MC_KEY_MAX];
	const char *wkey;
	size_t		wlen;
	bool		b64;

	if (op->kind == MC_OP_STATS || op->kind == MC_OP_FLUSH || op->kind == MC_OP_DUMP)
		return eng_text_encode(op, dst);
	if (op->prepared != NULL)
	{
		wkey = op->prepared->wire;
		wlen = op->prepared->wire_len;
		b64 = op->prepared->b64;
	}
	else
	{
		/* a routed key: checked when it was routed, so it fits */
		if (mc_key_check(op->key, op->keylen, &b64) != MC_KEY_OK)
			return 0;
		wkey = op->key;
		wlen = op->keylen;
		if (b64)
		{
			wlen = mc_b64_encode((const unsigned char *) op->key, op->keylen, wire);
			wkey = wire;
		}
	}
	if (op->opts != NULL)
		o = *op->opts;
	o.want = op->want;
	o.quiet = quiet;
	o.opaque = opaque;
	o.opaque_len = opaque_len;
	if (op->has_ttl)
	{
		o.has_ttl = true;
		o.ttl = op->ttl;
	}
	if (op->has_flags)
	{
		o.has_client_flags = true;
		o.client_flags = op->flags;
	}
	if (op->mode != 0)
		o.mode = op->mode;
	o.invalidate |= op->invalidate;
	return mc_encode_request(dst, op_command[op->kind], wkey, wlen, b64,
							 op->kind == MC_OP_STORE ? (long) op->datalen : -1, &o);
}

/*
 * The header of a run of one's request but a plain get (McRunOne's rare
 * part), the opaque token in decimal.
 */
size_t
McEngineOpEncodeOne(McOpRun *run, uint32 opaque)
{
	char		otxt[12];
	char		digits[10];
	int			nd = 0;

	/* the token in decimal, as mc_encode_get_value writes it */
	for (uint32 v = opaque; v != 0; v /= 10)
		digits[nd++] = (char) ('0' + v % 10);
	for (int i = 0; i < nd; i++)
		otxt[i] = digits[nd - 1 - i];
	return McEngineOpEncode(&run->op, otxt, nd, false, run->hdr);
}

/*
 * At most once: requests that must not run twice failed on conn's instance
 * after they may have run there (McConnInDoubt).  They are neither resent
 * nor failed over: the failure is raised, or under on_failure 'miss' they
 * stay failed (the caller counts the instance degraded).  True when so.
 * Both kinds of run apply it: the run of one (McEngineSendOne) and a
 * pipelined run whose requests are at most once (eng_drop).
 */
static bool
eng_in_doubt(McServer *srv, McConn *conn)
{
	if (!McConnInDoubt(conn))
		return false;
	if (!srv->cfg.on_failure_miss)
		McConnFailRaise(conn);
	return true;
}

/*
 * A run of one's request on instance index (the runner's McRunOne routed
 * it there): one request, one reply (McConnRoundtrip: its retry of a
 * pooled socket closed while idle, never for a request that must not run
 * twice), with the instance's health checked before and counted after.  A
 * failure after the request may have run is not for another instance
 * (eng_in_doubt).
 */
McEngOne
McEngineSendOne(McServer *srv, int index, McOpRun *run, bool soft)
{
	McConn	   *conn = McNetConn(&srv->net, index);

	run->conn = conn;
	run->base = NULL;
	if (!McInstanceUsable(srv, index, soft))
		return MC_ENG_ONE_FAILED;	/* not contacted */
	run->base = McConnRoundtrip(conn, &run->req, &run->reply);
	if (likely(run->base != NULL))
		return MC_ENG_ONE_REPLY;
	McInstanceCountFailure(srv, conn, soft);
	return eng_in_doubt(srv, conn) ? MC_ENG_ONE_IN_DOUBT : MC_ENG_ONE_FAILED;
}

/*
 * A stats operation on its instance, softly: false when the instance is
 * dead (not contacted) or failed (counted); see McConnStatLines.  The
 * runner's McRunStats (run.c) asks for it, and it is sent alone, not
 * pipelined in a run of many: its bounds are its own (the caller's limit
 * covering connect and reply and told apart from the instance's failure,
 * io_timeout over the whole reply rather than each wait, a cap on the
 * reply's size), where a pipelined run's are one
 * deadline that is the instance's failure and io_timeout per wait.  A
 * rejected login is not counted, and not raised either: the views show it
 * as they show any failing instance (its cause, never the password, in
 * last_error), so one server's wrong password cannot break a dashboard.
 *
 * limit_counts says whether limit_ms passing is the instance's failure: a
 * view's mcfdw.stats_timeout is, and the view shows it as the instance's
 * error; the planner's bound on an item count is not: it only gives up
 * asking, and an instance slower than that but within its own timeouts
 * must not be marked dead for it.  Then nothing is recorded at all.
 */
bool
McEngineStatLines(McServer *srv, const McOp *op,
				  int limit_ms, bool limit_counts, McStatLineFn cb, void *arg)
{
	int			index = op->instance;
	McConn	   *conn = McNetConn(&srv->net, index);
	char		cmd[MC_REQ_HEADER_MAX + 1];
	size_t		len = McEngineOpEncode(op, NULL, 0, false, cmd);

	if (len == 0)
		elog(ERROR, "could not encode a stats command");
	cmd[len] = '\0';
	McCsSetOp(MC_CS_STATS);
	if (!McInstanceUsable(srv, index, true))
		return false;
	if (!McConnStatLines(conn, cmd, limit_ms, cb, arg))
	{
		if (!limit_counts && McConnFailureOwnLimit(conn))
			return false;
		if (!McConnFailureCounts(conn))
		{
			McInstanceNoteError(srv, index, McConnFailure(conn, NULL));
			return false;
		}
		return McInstanceCountFailure(srv, conn, true);
	}
	McInstanceAnswered(srv, index);
	return true;
}

/* ---- runs of many: one pipeline per instance ---------------------------- */

/* Instances' parts for a run of srv; the rest of e is the client's to set. */
void
McEngineInit(McEngine *e, McServer *srv, void *arg)
{
	memset(e, 0, sizeof(*e));
	e->srv = srv;
	e->arg = arg;
	e->inst = palloc0(sizeof(McEngInst) * srv->cfg.nendpoints);
}

/*
 * The instance failed (counted already by health.c): the client decides
 * what becomes of its requests (which may go to another instance unless
 * they may have run there and must not run twice), then it leaves the run.
 */
static void
eng_drop(McEngine *e, int s, bool may_reroute)
{
	McEngInst  *ei = &e->inst[s];

	/*
	 * requests that may have run there must not run elsewhere too: raised,
	 * or left to a client that raises failures itself (in_doubt)
	 */
	if (e->at_most_once && ei->conn != NULL &&
		(e->client_raises ? McConnInDoubt(ei->conn) : eng_in_doubt(e->srv, ei->conn)))
	{
		may_reroute = false;
		ei->in_doubt = true;
	}
	if (e->dropped)
		e->dropped(e->arg, s, ei->conn, may_reroute);
	if (e->degrade)
		McInstanceDegraded(e->srv, s);
	ei->conn = NULL;
	ei->active = false;
}

/*
 * The bound of a connect the run starts now: what is left of its deadline
 * (at least 1 ms), 0 when it has none; the connection takes the shorter of
 * that and connect_timeout.
 */
static int
eng_connect_cap(McEngine *e)
{
	long		left;

	if (e->deadline == 0)
		return 0;
	left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), e->deadline);
	return (int) Max(Min(left, PG_INT32_MAX), 1);
}

/*
 * A pooled socket turned out closed while idle before any reply came:
 * start the instance over once on a fresh socket (pipeline.c).  False if
 * it cannot (counted).
 */
static bool
eng_restart(McEngine *e, int s)
{
	McEngInst  *ei = &e->inst[s];

	ei->conn = McPipelineRestart(e->srv, s, e->soft, &ei->retried, ei->answered,
								 eng_connect_cap(e));
	ei->need = 1;
	e->start(e->arg, s);
	return ei->conn != NULL;
}

/* McConnLinesRead's callback: a line of instance s's reply to the client. */
typedef struct EngLine
{
	McEngine   *e;
	int			s;
} EngLine;

static McLineVerdict
eng_line(void *arg, const char *line, size_t len)
{
	EngLine    *l = arg;

	l->e->inst[l->s].answered = true;
	l->e->inst[l->s].bytes += len;
	return l->e->line(l->e->arg, l->s, line, len);
}

/*
 * Hand the instance's buffered replies to the client and act on what it
 * says.  False when the instance's part is over.
 */
static bool
eng_read(McEngine *e, int s, bool *refill)
{
	McEngInst  *ei = &e->inst[s];
	McConn	   *conn = ei->conn;
	size_t		len;
	char	   *buf = McConnUnread(conn, &len);
	size_t		consumed = 0;

	switch (e->read(e->arg, s, conn, buf, len, &consumed, &ei->need))
	{
		case MC_ENG_REFILL:
			*refill = true;
			/* FALLTHROUGH */
		case MC_ENG_MORE:
			ei->answered |= (consumed > 0);
			McConnConsume(conn, consumed);
			return true;
		case MC_ENG_DONE:
			McConnConsume(conn, consumed);
			McInstanceEnd(e->srv, conn);
			break;
		case MC_ENG_FAILED:
			eng_drop(e, s, false);
			return false;
		case MC_ENG_CLOSE:
			McConnClose(conn);
			break;
	}
	ei->conn = NULL;
	ei->active = false;
	return false;
}

/*
 * One read of a dump's lines; *restarted when the instance started over
 * on a fresh socket (nothing to read there yet).
 */
static void
eng_read_lines(McEngine *e, int s, TimestampTz now, bool *restarted)
{
	McEngInst  *ei = &e->inst[s];
	EngLine		l = {e, s};

	switch (McConnLinesRead(ei->conn, e->line_cmd(e->arg, s), e->line_max, eng_line, &l))
	{
		case MC_LINES_WAIT:
			break;
		case MC_LINES_MORE:
			ei->last_progress = now;
			break;
		case MC_LINES_DONE:
			McInstanceEnd(e->srv, ei->conn);
			ei->conn = NULL;
			ei->active = false;
			break;
		case MC_LINES_FAILED:
			McInstanceCountFailure(e->srv, ei->conn, e->soft);
			eng_drop(e, s, true);
			break;
		case MC_LINES_RETRY:
			if (eng_restart(e, s))
				*restarted = true;
			else
				eng_drop(e, s, true);
			break;
	}
}

/*
 * Send and receive on one instance until it would block (McPipeline's
 * pump).  Interrupts are checked before every read: a server that never
 * stops sending (the socket is never drained) must not keep a backend
 * from its cancel.  After a restart on a fresh socket the requests are
 * queued and sent at once, so the wait arms the new socket for writing
 * too.  A dump reads once per wake-up, so every instance's dump moves on.
 */
static void
eng_pump(void *arg, int s, bool readable, TimestampTz now)
{
	McEngine   *e = arg;
	McEngInst  *ei = &e->inst[s];
	ssize_t		n;
	bool		drained;

again:
	if (!ei->active)
		return;
	e->fill(e->arg, s, ei->conn);
	while (McConnUnsent(ei->conn) > 0)
	{
		n = McConnSendSome(ei->conn);
		if (n == -2 && eng_restart(e, s))
			goto again;
		if (n == -1)
			McInstanceCountFailure(e->srv, ei->conn, e->soft);
		if (n < 0)
		{
			eng_drop(e, s, true);
			return;
		}
		if (n == 0)
			break;
		ei->last_progress = now;
		e->fill(e->arg, s, ei->conn);
	}
	while (readable && ei->active)
	{
		bool		refill = false;

		CHECK_FOR_INTERRUPTS();
		if (e->line != NULL)
		{
			bool		restarted = false;

			eng_read_lines(e, s, now, &restarted);
			if (!restarted)
				return;
			readable = false;	/* the fresh socket has nothing to read yet */
			goto again;
		}
		n = McConnRecvSome(ei->conn, ei->need, &drained);
		if (n == -2 && eng_restart(e, s))
		{
			readable = false;	/* the fresh socket has nothing to read yet */
			goto again;
		}
		if (n == -1)
			McInstanceCountFailure(e->srv, ei->conn, e->soft);
		if (n < 0)
		{
			eng_drop(e, s, true);
			return;
		}
		if (n == 0)
			break;
		ei->last_progress = now;
		ei->bytes += n;
		if (!eng_read(e, s, &refill))
			return;
		if (refill)
			goto again;
		/* a short read means the socket is drained: wait rather than retry */
		if (drained)
			break;
	}
}

/*
 * McPipeline's view of an instance: its connection while its part runs.
 * Asked at every wake-up of the wait, so this is where a run that must
 * give up on a held interrupt does: the client settles the instance's
 * requests (not its fault: nothing is counted against its health) and its
 * socket, left mid-request, is closed.
 */
static McConn *
eng_waiting(void *arg, int s, TimestampTz *last_progress)
{
	McEngine   *e = arg;
	McEngInst  *ei = &e->inst[s];
	const char *why;

	*last_progress = ei->last_progress;
	if (!ei->active)
		return NULL;
	if (e->give_up_held && (why = McEngineHeldInterrupt()) != NULL)
	{
		if (e->gave_up)
			e->gave_up(e->arg, s, why);
		McConnClose(ei->conn);
		ei->conn = NULL;
		ei->active = false;
		return NULL;
	}
	return ei->conn;
}

/*
 * The connect of instance s finished: requests that must not run twice
 * are at most once from here on (a connect that failed sent nothing, and
 * may fail over like any failure of the instance).
 */
static void
eng_connected(void *arg, int s, bool ok, TimestampTz now)
{
	McEngine   *e = arg;
	McEngInst  *ei = &e->inst[s];

	ei->last_progress = now;
	if (ok)
	{
		if (e->at_most_once)
			McConnAtMostOnce(ei->conn);
		return;
	}
	McInstanceCountFailure(e->srv, ei->conn, e->soft);
	eng_drop(e, s, true);
}

/* Out of time: io_timeout of inactivity, or the call's deadline (no failover then). */
static void
eng_expired(void *arg, int s, bool overall)
{
	McEngine   *e = arg;

	McInstanceMisbehaved(e->srv, e->inst[s].conn, e->soft, ERRCODE_CONNECTION_FAILURE, "read from",
				   overall ? "timed out: the %d ms allowed ran out" : "timed out after %d ms",
				   overall ? e->timeout_ms : e->srv->cfg.io_timeout);
	eng_drop(e, s, !overall);
}

/*
 * Get every instance with work a connection: a pooled socket, or a
 * connect started here and finished by the wait (pipeline.c), where the
 * connects of all instances proceed together.
 */
static void
eng_begin(McEngine *e)
{
	McServer   *srv = e->srv;
	TimestampTz now = GetCurrentTimestamp();
	bool		probe[MC_MAX_ENDPOINTS];

	Assert(srv->cfg.nendpoints <= MC_MAX_ENDPOINTS);
	for (int s = 0; s < srv->cfg.nendpoints; s++)
		probe[s] = (e->inst[s].work != 0);
	McPipelineProbe(srv, probe);
	for (int s = 0; s < srv->cfg.nendpoints; s++)
	{
		McEngInst  *ei = &e->inst[s];

		ei->active = ei->retried = ei->answered = ei->in_doubt = false;
		ei->conn = NULL;
		ei->hits = 0;
		ei->bytes = 0;
		if (!ei->work)
			continue;
		ei->need = 1;
		ei->last_progress = now;
		e->start(e->arg, s);
		ei->conn = McPipelineBegin(srv, s, e->soft, eng_connect_cap(e));
		ei->active = (ei->conn != NULL);
		if (!ei->active)
			eng_drop(e, s, true);
		else if (e->at_most_once && !McConnConnecting(ei->conn))
			McConnAtMostOnce(ei->conn);
	}
}

/*
 * One run: start every instance with work, write every pipeline, then
 * serve whichever socket is ready until each instance's part has ended or
 * failed.  With a deadline no connect may outlast it (eng_connect_cap).
 */
void
McEngineRun(McEngine *e)
{
	McPipeline	p = {.srv = e->srv,.arg = e,.waiting = eng_waiting,
		.connected = eng_connected,.pump = eng_pump,.expired = eng_expired,
	.deadline = e->deadline};

	eng_begin(e);
	McPipelineRun(&p);
}

/*
 * An interrupt the caller holds: a run after commit is inside the
 * commit's HOLD_INTERRUPTS, where CHECK_FOR_INTERRUPTS does nothing and a
 * terminate or a cancel would wait out the whole budget, locks held.
 * Their signal still sets the latch, which ends the pipeline's wait, and
 * the run gives up then (as PostgreSQL's wait for synchronous replication
 * does).  NULL when none is pending, or when CHECK_FOR_INTERRUPTS would
 * act on it itself.
 */
const char *
McEngineHeldInterrupt(void)
{
	bool		held = InterruptHoldoffCount > 0 || CritSectionCount > 0;

	if (ProcDiePending && held)
		return "the session is being terminated";
	if (QueryCancelPending && (held || QueryCancelHoldoffCount > 0))
		return "the statement was canceled";
	return NULL;
}

/*
 * The error trap of the callers that run after commit.  No
 * subtransaction: the connection code closes a connection before it
 * raises, and one left busy is closed at its next use.  Raising an error
 * resets the interrupt hold-off counts the commit relies on, so they are
 * put back.
 */
ErrorData *
McEngineCatch(void (*fn) (void *arg), void *arg, bool keep_cancel)
{
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	ErrorData  *volatile ed = NULL;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		if (!keep_cancel && ed->sqlerrcode == ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
	}
	PG_END_TRY();
	return ed;
}

/* A key kept for the run (McKeyArena). */
const char *
McEngineKeyArenaKeep(McKeyArena *a, const char *raw, size_t len)
{
	char	   *p;

	if (a->left < len)
	{
		a->left = Max(16384, len);
		a->next = MemoryContextAlloc(a->cxt ? a->cxt : CurrentMemoryContext, a->left);
	}
	p = a->next;
	memcpy(p, raw, len);
	a->next += len;
	a->left -= len;
	return p;
}
