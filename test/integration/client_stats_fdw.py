"""client_stats_fdw: the foreign-table paths counted exactly in
mc_client_stats, each under its own operation, per instance.

Two private memcacheds (so nothing else's items are listed by the full
scan) form one server; N keys of which M are present.  mc_route says which
instance each key goes to, and from that the test predicts every row: the
scan on the key (one pipeline per instance), the batched join (one
pipeline per instance and batch, join_batch_size 5; a parameterized scan
per outer row when the statement locks rows), INSERT and COPY (one batch
per instance), UPDATE and DELETE (the scan that finds the rows, then one
request per row), the full scan and ANALYZE (the key listing, then the
listed keys' pipeline), and a scan answered as a miss.  calls, keys, hits,
misses, errors and degraded calls are exact; the bytes of the scans and the
join too, from the pipelined multi-get's request ("mg <key> v O<pos> q",
"mn") and reply ("VA <len> O<pos>", "MN").  The rig does not preload
mcfdw: the counts are this session's, read by the session that made them
(client_stats_cluster.py covers the cluster).
"""

import io

import mcdb
import mcrig

t = mcrig.TAP()
m1 = mcrig.start_memcached()
m2 = mcrig.start_memcached()
INST = [m1.addr, m2.addr]       # mc_route's instance 1 and 2
db = mcdb.Database("mcfdw_it_client_stats_fdw")
c = db.connect()
db.server(c, "csf", "%s,%s" % tuple(INST), allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE csf_t (key text, value text) SERVER csf OPTIONS (join_batch_size '5')")
db.sql(c, "CREATE FOREIGN TABLE csf_all (key text, value text) SERVER csf "
          "OPTIONS (allow_full_scan 'true')")
N, M = 12, 7
KEYS = ["csf:%d" % i for i in range(1, N + 1)]
PRESENT = set(KEYS[:M])
VALUE = "v"


def route(keys):
    """key -> instance address, as mcfdw sends it."""
    rows = db.sql(c, "SELECT key, instance FROM mc_route(%s, 'csf')", (keys,))
    return {k: INST[i - 1] for k, i in rows}


WHERE = route(KEYS)
t.ok(set(WHERE.values()) == set(INST), "the keys go to both instances", repr(WHERE))


def fill():
    db.sql(c, "SELECT mc_flush_all('csf')")
    for k in sorted(PRESENT):
        db.sql(c, "SELECT mc_set(%s, %s, server => 'csf')", (k, VALUE))


def counted(sql, args=None, copy=None):
    """Run sql (COPY ... FROM STDIN with copy's text) after a reset;
    {(op, instance): (calls, keys, hits, misses, errors, degraded)} and
    {(op, instance): (bytes_sent, bytes_received)}."""
    db.sql(c, "SELECT mc_client_stats_reset()")
    if copy is None:
        db.sql(c, sql, args)
    else:
        c.cursor().copy_expert(sql, io.StringIO(copy))
    rows = db.sql(c, "SELECT op, instance, calls, keys, hits, misses, "
                     "errors_connect + errors_timeout + errors_protocol + errors_server + errors_auth, "
                     "degraded, bytes_sent, bytes_received "
                     "FROM mc_client_stats WHERE server = 'csf' AND calls > 0")
    return ({(r[0], r[1]): tuple(int(x) for x in r[2:8]) for r in rows},
            {(r[0], r[1]): (int(r[8]), int(r[9])) for r in rows})


TAG_MAX = 6    # protocol.h's MC_TAG_MAX


def pipelines(op, batches, present=PRESENT):
    """What the pipelined multi-get of each batch of keys counts, per
    instance: counts, and the set of exact bytes (sent, received) it may
    come to.  Each pipeline's tokens start with its tag, whose length (1
    to TAG_MAX letters) depends on how many requests the backend sent
    before; it never shrinks from one pipeline to the next."""
    cnt, byt = {}, {}
    for batch in batches:
        for inst in INST:
            mine = [k for k in batch if WHERE[k] == inst]
            if not mine:
                continue
            hits = [k for k in mine if k in present]
            a = cnt.get((op, inst), (0, 0, 0, 0, 0, 0))
            cnt[(op, inst)] = (a[0] + 1, a[1] + len(mine), a[2] + len(hits),
                               a[3] + len(mine) - len(hits), 0, 0)
            states = byt.get((op, inst), {(1, 0, 0)})
            nxt = set()
            for tl in range(1, TAG_MAX + 1):
                tag = "t" * tl
                sent = 4 + sum(len("mg %s v O%s%d q\r\n" % (k, tag, pos)) for pos, k in enumerate(mine))
                recv = 4 + sum(len("VA %d O%s%d\r\n%s\r\n" % (len(VALUE), tag, pos, VALUE))
                               for pos, k in enumerate(mine) if k in present)
                nxt |= {(tl, s + sent, r + recv) for (last, s, r) in states if tl >= last}
            byt[(op, inst)] = nxt
    return cnt, byt


def bytes_ok(byt, wbyt, label):
    """byt (counted) is one of the byte counts pipelines() allows."""
    ok = (set(byt) == set(wbyt) and
          all(byt[k] in {(s, r) for (_, s, r) in wbyt[k]} for k in byt))
    t.ok(ok, label, "counted %r" % (byt,),
         "allowed (first few): %r" % ({k: sorted(v)[:4] for k, v in wbyt.items()},))


def per_row(op, keys):
    """One request per row (UPDATE's replace, DELETE's delete): stores and
    deletes through a table count no hit or miss."""
    cnt = {}
    for k in keys:
        a = cnt.get((op, WHERE[k]), (0, 0, 0, 0, 0, 0))
        cnt[(op, WHERE[k])] = (a[0] + 1, a[1] + 1, 0, 0, 0, 0)
    return cnt


def bytes_flowed(byt, op):
    return all(s > 0 and r > 0 for (o, _), (s, r) in byt.items() if o == op)


# ---- the scan on the key ------------------------------------------------------
fill()
got, byt = counted("SELECT count(value) FROM csf_t WHERE key = ANY(%s)", (KEYS,))
want, wbyt = pipelines("scan", [KEYS])
t.is_(got, want, "scan of %d keys (%d present): one pipeline per instance, its keys, hits and misses" % (N, M))
bytes_ok(byt, wbyt, "scan: the exact bytes sent and received")
got, byt = counted("SELECT count(value) FROM csf_t WHERE key = %s", (KEYS[0],))
t.is_(got, pipelines("scan", [KEYS[:1]])[0], "scan of one key: one call, one key, one hit")
got, _ = counted("SELECT count(value) FROM csf_t WHERE key = %s", ("csf:none",))
t.is_(got, {("scan", route(["csf:none"])["csf:none"]): (1, 1, 0, 1, 0, 0)},
      "scan of one absent key: one call, one miss")

# ---- the batched join -------------------------------------------------------------
db.sql(c, "CREATE TEMP TABLE csf_o (k text)")
db.sql(c, "INSERT INTO csf_o SELECT unnest(%s::text[])", (KEYS,))
db.sql(c, "ANALYZE csf_o")
JOIN = "SELECT count(f.value) FROM csf_o o JOIN csf_t f ON f.key = o.k"
plan = "\n".join(r[0] for r in db.sql(c, "EXPLAIN " + JOIN))
t.ok("MemcachedBatchedJoin" in plan, "the join runs as the batched join", plan)
got, byt = counted(JOIN)
want, wbyt = pipelines("join", [KEYS[0:5], KEYS[5:10], KEYS[10:]])
t.is_(got, want, "batched join in batches of 5, 5 and 2 rows: one pipeline per instance and batch")
bytes_ok(byt, wbyt, "batched join: the exact bytes sent and received")

# a statement that locks rows joins by a parameterized scan: one per outer row
NL = "SELECT f.value FROM csf_o o JOIN csf_t f ON f.key = o.k FOR UPDATE OF o"
plan = "\n".join(r[0] for r in db.sql(c, "EXPLAIN " + NL))
t.ok("MemcachedBatchedJoin" not in plan and "Nested Loop" in plan,
     "with FOR UPDATE the join is a nested loop of parameterized scans", plan)
got, byt = counted(NL)
want, wbyt = pipelines("scan", [[k] for k in KEYS])
t.is_(got, want, "nested-loop join: one scan per outer row, counted as scans")
bytes_ok(byt, wbyt, "nested-loop join: the exact bytes sent and received")

# ---- INSERT, UPDATE, DELETE ---------------------------------------------------------
INS = ["csf:ins%d" % i for i in range(1, 7)]
WHERE.update(route(INS))
got, byt = counted("INSERT INTO csf_t SELECT 'csf:ins' || i, 'v' FROM generate_series(1, 6) i")
want = {}
for inst in INST:
    n = sum(1 for k in INS if WHERE[k] == inst)
    if n:
        want[("modify", inst)] = (1, n, 0, 0, 0, 0)
t.is_(got, want, "INSERT of 6 rows: one batch per instance under modify, its keys")
t.ok(bytes_flowed(byt, "modify"), "INSERT: bytes sent and received", repr(byt))
got, _ = counted("COPY csf_t (key, value) FROM STDIN", copy="".join("%s\tc\n" % k for k in INS))
t.is_(got, want, "COPY of the same 6 rows: counted as the INSERT")

fill()
got, byt = counted("UPDATE csf_t SET value = 'u' WHERE key = ANY(%s)", (KEYS,))
want = pipelines("scan", [KEYS])[0]
want.update(per_row("modify", sorted(PRESENT)))
t.is_(got, want, "UPDATE of %d keys (%d present): the scan finds them, one modify per row" % (N, M))
t.ok(bytes_flowed(byt, "modify"), "UPDATE: bytes sent and received", repr(byt))

got, byt = counted("DELETE FROM csf_t WHERE key = ANY(%s)", (KEYS,))
want = pipelines("scan", [KEYS])[0]
want.update(per_row("modify", sorted(PRESENT)))
t.is_(got, want, "DELETE of %d keys (%d present): the scan finds them, one modify per row" % (N, M))
t.is_(db.value(c, "SELECT count(*)::int FROM csf_t WHERE key = ANY(%s)", (KEYS,)), 0,
      "... and they are gone")

# ---- the full scan ---------------------------------------------------------------------
fill()
t.is_(db.value(c, "SELECT count(*)::int FROM csf_all"), M, "the full scan finds the %d items" % M)
# an mc_get first, so the listing is counted as a full scan only if it says so
got, byt = counted("SELECT mc_get('csf:1', 'csf'); SELECT count(*) FROM csf_all")
want = {("get", WHERE["csf:1"]): (1, 1, 1, 0, 0, 0)}
for inst in INST:
    n = sum(1 for k in PRESENT if WHERE[k] == inst)
    # the listing, then a pipeline only where keys were listed: the ring
    # follows the rig's ports, so all the keys may sit on one instance
    want[("full_scan", inst)] = (1 + (n > 0), n, n, 0, 0, 0)
    # the planner's item count, unless a recent one is cached
    if got.get(("stats", inst)) == (1, 0, 0, 0, 0, 0):
        want[("stats", inst)] = got[("stats", inst)]
t.is_(got, want, "full scan: per instance the key listing and one pipeline of the listed keys (none where none was listed), all hits")
t.ok(bytes_flowed(byt, "full_scan"), "full scan: bytes sent and received", repr(byt))
got, _ = counted("ANALYZE csf_all")
want = {k: v for k, v in want.items() if k[0] == "full_scan"}
t.is_(got, want,
      "ANALYZE's sample of every key: counted as a full scan, the same")

# ---- a degraded scan ------------------------------------------------------------------
db.server(c, "csf_miss", mcrig.refused_addr(), on_failure="miss")
db.sql(c, "CREATE FOREIGN TABLE csf_m (key text, value text) SERVER csf_miss")
db.sql(c, "SET mcfdw.warn_on_miss = off")
db.sql(c, "SELECT mc_client_stats_reset()")
db.sql(c, "SELECT count(value) FROM csf_m WHERE key = ANY(%s)", (KEYS,))
t.is_(db.sql(c, "SELECT op, calls::int, errors_connect::int, degraded::int FROM mc_client_stats "
                "WHERE server = 'csf_miss'"), [("scan", 1, 1, 1)],
      "a scan of a refused instance with on_failure 'miss': one call, a connect error, degraded, under scan")

c.close()
t.done()
