/*
 * run_reads.c — a run's reads: each key's "mg" queued on its instance's
 * pipeline and each reply matched to its key, the per-key path of a
 * multi-get, in one file.
 *
 * Owns: a read run (run_reads_exec: the fields its requests ask, whether
 * an instance's failure is raised, the engine's fill and read for it);
 * its requests encoded a slice at a time into the connection's write
 * buffer as "mg <key> v f O<tag><pos> q" (the short get encoders of
 * core/request.c), or with the fields wanted (the engine's encoder); its
 * replies parsed in place, matched to their keys by the opaque token and
 * each hit handed to the caller; a failing instance's keys are misses
 * when the run may fail softly (as Dalli and libmemcached treat keys of a
 * failing server in a multi-get; the engine counts the instance degraded
 * under 'miss'), and a reply that answers nothing asked fails the
 * instance as out of step.  The fill, the encoders it calls per key and
 * the reply loop are static here, so a key's way to the wire and back
 * crosses no file of the runner; no allocation per key or reply.  Must
 * not: route keys (run_route.c did, once each), wait, or keep state
 * between runs.
 */
#include "postgres.h"

#include "keys.h"
#include "run_int.h"

/*
 * The request of a read that asks for other fields than v and f (the
 * foreign-table scan asks only for what its query reads): the engine's
 * encoder, out of mc_get_multi's way.
 */
static pg_noinline size_t
encode_wanted(RunState *r, const McTag *tag, const RunKey *k, uint32 pos, char *dst)
{
	McOp		op;
	McKey		wk;
	char		token[MC_TAG_MAX + 10];

	wk.raw = k->src;
	wk.raw_len = k->len;
	wk.wire_len = McKeyWire(r->srv, k->src, k->len, k->form, k->b64, wk.wirebuf, &wk.wire);
	wk.b64 = k->b64;
	McOpInit(&op, MC_OP_GET, &wk);
	op.want = r->want;
	return McEngineOpEncode(&op, token, mc_tag_token(tag, pos, token), true, dst);
}

/*
 * Queue more of a read's requests, up to one slice of unsent text: room is
 * taken once for the slice (and for the one request that may overshoot
 * it), so a key costs its encoding alone.
 */
static void
fill_reads(RunState *r, RunInst *ri, McConn *conn)
{
	size_t		unsent = McConnUnsent(conn);
	char	   *start;
	char	   *dst;
	const char *limit;
	char		wirebuf[MC_KEY_MAX];

	/*
	 * What the loop reads is kept in locals: every byte it writes through
	 * dst may alias r and ri as far as the compiler knows, which would
	 * reload them for each key.
	 */
	const RunKey *keys = r->keys;
	const int  *items = ri->items;
	int			nitems = ri->nitems;
	int			next = ri->next_send;
	unsigned	want = r->want;
	bool		with_flags = (want == 0);
	const McTag *tag = &ri->tag;

	if (next >= nitems || unsent >= RUN_WRITE_SLICE)
		return;
	start = dst = McConnWriteSpace(conn, RUN_WRITE_SLICE - unsent + MC_REQ_HEADER_MAX);
	limit = start + (RUN_WRITE_SLICE - unsent);
	while (next < nitems && dst < limit)
	{
		const RunKey *k = &keys[items[next]];
		size_t		n;

		/*
		 * A key routed as given goes out as it is; others as run_route_reads
		 * routed them.  "v f" (want 0) and "v" alone have their own
		 * encoder; other fields the generic one.
		 */
		if (unlikely(want != 0 && want != MC_F_VALUE))
			n = encode_wanted(r, tag, k, (uint32) next, dst);
		else if (k->form == MC_KEY_GIVEN && !k->b64)
			n = mc_encode_get_opaque(dst, k->src, k->len, false, with_flags,
									 tag, (uint32) next);
		else
		{
			const char *wire;
			size_t		wlen = McKeyWire(r->srv, k->src, k->len, k->form,
										 k->b64, wirebuf, &wire);

			n = mc_encode_get_opaque(dst, wire, wlen, k->b64, with_flags,
									 tag, (uint32) next);
		}
		/* run_route_reads checked every key: a refusal here is a bug, not a miss */
		if (n == 0)
			elog(ERROR, "could not encode a get request for a checked key");
		dst += n;
		next++;
	}
	ri->next_send = next;
	McConnWritten(conn, dst - start);
}

/*
 * One reply to a read that is not a hit or "MN": a stray miss, a foreign
 * or invalid reply, or an error reply.  MC_ENG_MORE when the run goes on
 * past it (a soft run whose instance could not be failed: never), else
 * MC_ENG_FAILED.
 */
static pg_noinline McEngRead
read_odd_reply(RunState *r, McConn *conn, char *base, size_t avail,
			   McReplyType t, const McReply *rep)
{
	if (t == MC_REPLY_EN)
	{
		/* q suppresses EN: one that arrives answers nothing we asked */
		if (!McInstanceMisbehaved(r->srv, conn, r->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
								  "a miss reply does not match any outstanding request"))
			return MC_ENG_FAILED;
	}
	else if ((t == MC_REPLY_BAD || t == MC_REPLY_ERROR || t == MC_REPLY_CLIENT_ERROR) &&
			 McConnForeignReply(conn, base, t == MC_REPLY_BAD ? avail : rep->header_len,
								MC_FOREIGN_META | MC_FOREIGN_UNPARSED))
	{
		/* a server that needs a login, knows no meta command, or is not memcached */
		if (!McInstanceCountFailure(r->srv, conn, r->soft))
			return MC_ENG_FAILED;
	}
	else if (t == MC_REPLY_BAD || t == MC_REPLY_HD)
	{
		/* an HD where a value was asked for would be a row without its value */
		if (!McInstanceMisbehaved(r->srv, conn, r->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
								  t == MC_REPLY_HD ? "a hit carries no value although one was asked for" :
								  "the reply is not valid meta protocol"))
			return MC_ENG_FAILED;
	}
	else
	{
		/* on_failure 'miss' hides unavailability, not error replies */
		if (r->soft && !r->miss)
		{
			McInstanceMisbehaved(r->srv, conn, true, ERRCODE_FDW_ERROR, "read from",
								 "unexpected reply");
			return MC_ENG_FAILED;
		}
		McConnReplyError(conn, base, rep);
	}
	return MC_ENG_MORE;
}

/*
 * A read's replies: hits to the caller (counted once per buffer), "MN"
 * ends the part, anything else read_odd_reply.
 */
static inline McEngRead
read_gets(RunState *r, int s, McConn *conn, char *buf, size_t len,
		  size_t *consumed, size_t *need)
{
	RunInst    *ri = &r->inst[s];
	const RunKey *keys = r->keys;
	McRunHitFn	hit = r->hit;
	void	   *arg = r->arg;
	unsigned	want = r->want;
	size_t		off = 0;		/* bytes of buf handled, consumed at the end */
	int			hits = 0;
	McEngRead	res = MC_ENG_MORE;

	for (;;)
	{
		char	   *base = buf + off;
		McReply		rep;
		McReplyType t = mc_parse_reply_z(base, len - off, &rep);

		if (t == MC_REPLY_NEED_MORE)
		{
			*need = rep.need;
			break;
		}
		/* HD is a hit only for a caller that asked for no value (existence) */
		if (t == MC_REPLY_VA ||
			(t == MC_REPLY_HD && want != 0 && !(want & MC_F_VALUE)))
		{
			int			j = mc_reply_position(base, &rep, &ri->tag,
											  (uint32) ri->next_match,
											  (uint32) ri->next_send);

			if (j < 0)
			{
				if (!McInstanceMisbehaved(r->srv, conn, r->soft, ERRCODE_PROTOCOL_VIOLATION, "read from",
										  "a reply does not match any outstanding request"))
				{
					res = MC_ENG_FAILED;
					break;
				}
			}
			/* a lease's empty placeholder is a miss (McReplyIsPlaceholder) */
			if (!McReplyIsPlaceholder(&rep))
			{
				hit(arg, keys[ri->items[j]].datum, base, &rep);
				hits++;
			}
			McConnHit(conn, &rep);
			ri->next_match = j + 1;
		}
		else if (t == MC_REPLY_MN)
		{
			if (!mn_due(ri, conn, off + rep.consumed < len))
			{
				res = run_mn_stray(r, conn, r->soft);
				break;
			}
			ri->next_match = ri->nitems;
			off += rep.consumed;
			res = MC_ENG_DONE;
			break;
		}
		else if (read_odd_reply(r, conn, base, len - off, t, &rep) != MC_ENG_MORE)
		{
			res = MC_ENG_FAILED;
			break;
		}
		off += rep.consumed;
	}
	r->engine.inst[s].hits += hits;
	if (res != MC_ENG_FAILED)
		*consumed = off;
	return res;
}

/* The engine's fill and read of a read run. */
static void
reads_fill(void *arg, int s, McConn *conn)
{
	RunState   *r = arg;
	RunInst    *ri = &r->inst[s];

	fill_reads(r, ri, conn);
	queue_last_mn(ri, conn);
}

static McEngRead
reads_read(void *arg, int s, McConn *conn, char *buf, size_t len,
		   size_t *consumed, size_t *need)
{
	return read_gets(arg, s, conn, buf, len, consumed, need);
}

/*
 * A read run: its keys routed (run_route.c) and asked in one round.
 * Returns the number of distinct keys asked.
 */
int
run_reads_exec(RunState *r)
{
	McRun	   *spec = r->spec;

	/*
	 * "v f" takes mc_get_multi's short encoder; nothing wanted asks for the
	 * key's existence as "O" alone.
	 */
	r->want = spec->want == (MC_F_VALUE | MC_F_FLAGS) ? 0 :
		spec->want != 0 ? spec->want : MC_F_OPAQUE;
	r->soft = r->failover || r->miss;
	r->engine.soft = r->soft;
	r->engine.degrade = r->miss;
	r->engine.fill = reads_fill;
	r->engine.read = reads_read;
	run_route_reads(r, spec->keys, spec->nulls, spec->nkeys);
	if (r->nkeys > 0)
		run_round(r);
	return r->nkeys;
}
