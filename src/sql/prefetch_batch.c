/*
 * prefetch_batch.c — per-row reads prefetched: a batch's answers.
 *
 * Owns: the keys a prefetching node (prefetch_exec.c) read for a batch of
 * rows, per server, and what memcached answered for each (a miss, or the
 * value as the reply carried it); the batch whose row is being projected
 * (McPrefetchCurrent), which reads.c asks through McPrefetchLookup.  After
 * a write this session started (server_cache.h's McServerWritesStarted), a
 * batch's answers are not used.
 * Memory: the keys and values of one batch, in its context, within its
 * budget: a value past it is left to its call.  Must not: read memcached
 * (prefetch_exec.c does, through run.h) or decode values (reads.c).
 */
#include "postgres.h"

#include "common/hashfn.h"

#include "prefetch.h"
#include "protocol.h"

McPfAnswers *McPrefetchCurrent = NULL;

/* One distinct key of a batch, and what memcached said of it. */
struct McPfEntry
{
	McPfEntry  *next;			/* same hash slot */
	uint32		hash;
	uint8		answer;			/* McPrefetchAnswer */
	bool		has_flags;
	uint32		flags;
	char	   *value;
	size_t		vlen;
	/* the key as a text datum (4-byte header), for McRunGets */
	char		key[FLEXIBLE_ARRAY_MEMBER];
};

/* A new batch: empty tables for up to nkeys keys per server, in a->cxt. */
void
McPrefetchBatchStart(McPfAnswers *a, int nkeys)
{
	uint32		cap = 16;

	a->used = 0;
	while (cap < (uint32) nkeys * 2)
		cap <<= 1;
	for (int g = 0; g < a->ngroups; g++)
	{
		McPfGroup  *grp = &a->groups[g];

		grp->slots = MemoryContextAllocZero(a->cxt, sizeof(McPfEntry *) * cap);
		grp->mask = cap - 1;
		grp->keys = MemoryContextAlloc(a->cxt, sizeof(Datum) * Max(nkeys, 1));
		grp->nkeys = 0;
		grp->usable = false;
		grp->srv = NULL;
	}
}

/*
 * Add a key to its server's batch, unless the call is better left to ask
 * itself: one the key rules refuse (the call raises the error) or one
 * digested as too long (rare; it asks alone).  g->srv is set.
 */
void
McPrefetchBatchAdd(McPfAnswers *a, McPfGroup *g, Datum d)
{
	text	   *t = (text *) PG_DETOAST_DATUM_PACKED(d);
	const char *data = VARDATA_ANY(t);
	size_t		len = VARSIZE_ANY_EXHDR(t);
	size_t		plen = g->srv->cfg.key_prefix_len;
	char		raw[MC_MAX_KEY_PREFIX + MC_KEY_MAX];
	bool		b64;
	uint32		h;
	McPfEntry  *e;

	if (len == 0 || len + plen > MC_KEY_MAX)
		return;
	memcpy(raw, g->srv->cfg.key_prefix, plen);
	memcpy(raw + plen, data, len);
	if (mc_key_check(raw, plen + len, &b64) != MC_KEY_OK)
		return;
	h = hash_bytes((const unsigned char *) data, len);
	for (e = g->slots[h & g->mask]; e; e = e->next)
		if (e->hash == h && VARSIZE(e->key) - VARHDRSZ == len &&
			memcmp(VARDATA(e->key), data, len) == 0)
			return;
	e = MemoryContextAlloc(a->cxt, offsetof(McPfEntry, key) + VARHDRSZ + len);
	e->hash = h;
	e->answer = MC_PF_MISS;
	e->value = NULL;
	SET_VARSIZE(e->key, VARHDRSZ + len);
	memcpy(VARDATA(e->key), data, len);
	e->next = g->slots[h & g->mask];
	g->slots[h & g->mask] = e;
	g->keys[g->nkeys++] = PointerGetDatum(e->key);
	a->used += offsetof(McPfEntry, key) + VARHDRSZ + len;
}

/* McRunGets' hit (arg: the McPfAnswers): the value as the reply has it. */
void
McPrefetchBatchOnHit(void *arg, Datum key, char *base, const McReply *r)
{
	McPfAnswers *a = arg;
	McPfEntry  *e = (McPfEntry *) (DatumGetPointer(key) - offsetof(McPfEntry, key));

	if (a->used + r->value_len > a->budget)
	{
		e->answer = MC_PF_UNKNOWN;	/* over work_mem: its call asks itself */
		return;
	}
	e->value = MemoryContextAllocHuge(a->cxt, Max(r->value_len, 1));
	memcpy(e->value, base + r->value_off, r->value_len);
	e->vlen = r->value_len;
	e->has_flags = (r->present & MC_F_FLAGS) != 0;
	e->flags = e->has_flags ? r->client_flags : 0;
	e->answer = MC_PF_HIT;
	a->used += r->value_len;
}

/*
 * The answer of the current batch for a key of srv.  UNKNOWN unless the
 * batch asked it of srv, every instance answered, and this session wrote
 * nothing since.
 */
McPrefetchAnswer
McPrefetchBatchFind(McServer *srv, const char *key, size_t len, McPrefetchHit *hit)
{
	McPfAnswers *a = McPrefetchCurrent;
	uint32		h = 0;
	bool		hashed = false;

	for (int gi = 0; gi < a->ngroups; gi++)
	{
		McPfGroup  *g = &a->groups[gi];

		if (g->srv != srv || !g->usable || g->writes != McServerWritesStarted)
			continue;
		if (!hashed)
		{
			h = hash_bytes((const unsigned char *) key, len);
			hashed = true;
		}
		for (McPfEntry *e = g->slots[h & g->mask]; e; e = e->next)
		{
			if (e->hash != h || VARSIZE(e->key) - VARHDRSZ != len ||
				memcmp(VARDATA(e->key), key, len) != 0)
				continue;
			if (e->answer == MC_PF_HIT)
			{
				hit->data = e->value;
				hit->len = e->vlen;
				hit->has_flags = e->has_flags;
				hit->flags = e->flags;
			}
			return (McPrefetchAnswer) e->answer;
		}
	}
	return MC_PF_UNKNOWN;
}
