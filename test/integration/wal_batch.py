"""wal_batch: the write-ahead log worker's mark-stale batches and its
delivery with failover, with a private cluster that preloads mcfdw with
wal_level = logical (mcrig.private_cluster) and real memcacheds
behind fault proxies.

It checks: the worker's settings in postgresql.conf take effect; action
'mark_stale' marks 2,000 keys stale through the batch engine (one quiet pipeline per instance: "md <key> I ... q", then "mn"),
fast enough that one round trip per key could not be it (each reply of one
instance is held 50 ms); with failover, an instance down while rows change:
the keys of that instance are deleted on the instance readers fail over to,
the position is held (the down instance's own copy is not counted as
delivered by the failover instance's ack), and once the instance is back
its own copies are deleted too, none skipped; under a steady write load
the slot's restart position keeps up with the confirmed one; the worker
holds the slot while a large transaction runs (its changes are decoded
before the commit), delivers all its keys after the commit, and releases
the slot when nothing is in progress; with failover, a delivery to a hung
instance fails within one mcfdw.wal_timeout, is retried without spinning
while the instance stays hung, and its keys are deleted there once it
answers; an instance cut in the middle of a batch's pipeline (500 of its
deletes through): the batch is held, and once the instance is back every
key is deleted, none skipped.  While
idle the worker reads mc_watches again only after a commit
that changed it: not at each poll, and not after a commit whose write of
mc_watches rolled back with its subtransaction.
"""

import threading
import time

import psycopg2

import mcrig
from faultproxy import FaultProxy

t = mcrig.TAP()
pg = mcrig.logical_cluster("walb-cluster")
if not pg.started(t, "a cluster with mcfdw preloaded and wal_level = logical starts"):
    t.done()


def q(conn, sql, args=None):
    cur = conn.cursor()
    cur.execute(sql, args)
    return cur.fetchall() if cur.description else None


def meta(where, keys):
    """{key: flags of its "mg <key> v" reply} for the keys memcached holds,
    asked directly, one pipeline per 500 keys."""
    got = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        s = mcrig.connect(where)
        try:
            s.sendall("".join("mg %s v k\r\n" % k for k in chunk).encode() + b"mn\r\n")
            buf = b""
            while not buf.endswith(b"MN\r\n"):
                data = s.recv(65536)
                if not data:
                    break
                buf += data
        finally:
            s.close()
        lines = buf.split(b"\r\n")
        j = 0
        while j < len(lines):
            line = lines[j]
            if line.startswith(b"VA "):
                words = line.decode().split()
                flags = words[2:]
                key = [w[1:] for w in flags if w.startswith("k")][0]
                got[key] = set(w for w in flags if not w.startswith("k"))
                j += 2
                continue
            j += 1
    return got


def present(where, keys):
    return set(meta(where, keys))


db = pg.connect()
q(db, "CREATE EXTENSION mcfdw")
t.is_((q(db, "SHOW mcfdw.wal_poll_interval")[0][0], q(db, "SHOW mcfdw.wal_timeout")[0][0]),
      ("50ms", "20s"), "the worker's settings in postgresql.conf take effect (defined before "
      "mcfdw's prefix is reserved)")

# ---- mark_stale goes through the batch engine ------------------------------------------
a = mcrig.start_memcached()
b = mcrig.start_memcached()
px = FaultProxy(b.port).start()
q(db, "CREATE SERVER ws FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s, connect_timeout '1000', io_timeout '5000')",
  ("%s,%s" % (a.addr, px.addr),))
q(db, "CREATE USER MAPPING FOR PUBLIC SERVER ws")
N = 2000
q(db, "CREATE TABLE leased (id int PRIMARY KEY, v text)")
q(db, "INSERT INTO leased SELECT i, 'a' FROM generate_series(1, %s) i", (N,))
q(db, "SELECT mc_watch('leased', ARRAY['lease:{id}'], 'ws', action => 'mark_stale')")
keys = ["lease:%d" % i for i in range(1, N + 1)]
q(db, "SELECT mc_set_multi(%s, %s, NULL, NULL, 'ws')", (keys, ["v"] * N))
onb = q(db, "SELECT count(*) FROM mc_route(%s, 'ws') WHERE port = %s", (keys, px.port))[0][0]
t.ok(0 < onb < N, "the keys are spread over both instances (%d on the proxied one)" % onb)


def stale_keys():
    got = meta(a.port, keys)
    got.update(meta(b.port, keys))
    return set(k for k, f in got.items() if "X" in f)


t.is_(len(stale_keys()), 0, "no key is stale before the UPDATE")
px.delay = 0.05                 # every reply chunk of the proxied instance held 50 ms
px.mode = "delay"
px.requests = bytearray()
px.record = True
t0 = time.time()
q(db, "UPDATE leased SET v = 'b'")
try:
    mcrig.wait_for(lambda: len(stale_keys()) == N, 20, interval=0.1, what="stale")
except TimeoutError:
    pass
took = time.time() - t0
px.record = False
px.mode = "pass"
left = N - len(stale_keys())
t.ok(left == 0, "action 'mark_stale': every one of %d keys is marked stale (mg shows X)" % N,
     "%d not stale" % left)
t.ok(took < 5, "... within 5 s while each reply of one instance is held 50 ms: one pipeline per "
     "instance, not a round trip per key (%.2f s)" % took)
reqs = bytes(px.requests).split(b"\r\n")
md = [r for r in reqs if r.startswith(b"md ")]
t.ok(len(md) >= onb and all(b"I" in r.split() and b"q" in r.split() for r in md)
     and reqs.count(b"mn") <= 3,
     "the proxied instance got its keys as quiet \"md <key> I\" closed by a few \"mn\"",
     "md %d (on it %d), mn %d, first %r" % (len(md), onb, reqs.count(b"mn"), md[:2]))
t.diag("2,000 keys marked stale %.2f s after COMMIT" % took)


def leased_row():
    return q(db, "SELECT pending, sent FROM mc_wal_watches WHERE \"table\" = 'leased'::regclass")[0]


try:
    # the counts follow the batch's last acknowledgement
    mcrig.wait_for(lambda: leased_row() == (0, N), 5, what="counts")
except TimeoutError:
    pass
t.is_(leased_row(), (0, N), "mc_wal_watches: nothing pending, %d sent" % N)
# a key no instance holds (NF) counts as delivered
q(db, "INSERT INTO leased VALUES (%s, 'c')", (N + 1,))
mcrig.wait_for(lambda: q(db, "SELECT pending = 0 AND sent = %s FROM mc_wal_watches "
                             "WHERE \"table\" = 'leased'::regclass", (N + 1,))[0][0], 10,
               what="sent")
t.ok(True, "marking a key no instance holds (NF) counts as delivered")


def wal_counts():
    return q(db, "SELECT coalesce(sum(keys), 0), coalesce(sum(misses), 0), count(*) FILTER (WHERE op <> 'wal')"
                 " FROM mc_client_stats WHERE server = 'ws' AND op IN ('wal', 'other', 'delete')")[0]


try:
    mcrig.wait_for(lambda: wal_counts()[0] >= N + 1, 10, what="the worker's counts")
except TimeoutError:
    pass
wk, wm, other = wal_counts()
t.ok(wk >= N + 1 and wm >= 1 and other == 0,
     "mc_client_stats: the worker's marks counted as op 'wal' (%d keys, %d not found), none as 'other'"
     % (wk, wm), repr((wk, wm, other)))

# ---- failover: an instance down while rows change -----------------------------------------
def watched_pair(server, table, template, n, options=""):
    """Two fresh memcacheds, the second behind a fault proxy, as server;
    table of n rows watched on it with template.  Returns (first, second,
    proxy)."""
    a = mcrig.start_memcached()
    b = mcrig.start_memcached()
    pb = FaultProxy(b.port).start()
    q(db, "CREATE SERVER %s FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %%s, %s"
          "connect_timeout '1000', io_timeout '2000', retry_delay '1')" % (server, options),
      ("%s,%s" % (a.addr, pb.addr),))
    q(db, "CREATE USER MAPPING FOR PUBLIC SERVER %s" % server)
    q(db, "CREATE TABLE %s (id int PRIMARY KEY, v text)" % table)
    q(db, "INSERT INTO %s SELECT i, 'a' FROM generate_series(1, %%s) i" % table, (n,))
    q(db, "SELECT mc_watch(%s, ARRAY[%s], %s)", (table, template, server))
    time.sleep(0.5)
    return a, b, pb


N = 1000
c, d, pd = watched_pair("wf", "fo", "fo:{id}", N, "failover 'true', ")
keys = ["fo:%d" % i for i in range(1, N + 1)]
q(db, "SELECT mc_set_multi(%s, %s, NULL, NULL, 'wf')", (keys, ["v"] * N))
ond = [r[0] for r in q(db, "SELECT key FROM mc_route(%s, 'wf') WHERE port = %s", (keys, pd.port))]
onc = [k for k in keys if k not in set(ond)]
t.ok(len(ond) > 0 and len(present(d.port, ond)) == len(ond) and len(present(c.port, onc)) == len(onc),
     "%d keys on the instance to be stopped, %d on the other" % (len(ond), len(onc)))
pd.mode = "close"
# what readers failing over cached on the other instance meanwhile
for i in range(0, len(ond), 200):
    s = mcrig.connect(c.port)
    s.sendall("".join("ms %s 1 q\r\nv\r\n" % k for k in ond[i:i + 200]).encode() + b"mn\r\n")
    buf = b""
    while not buf.endswith(b"MN\r\n"):
        buf += s.recv(65536)
    s.close()
t.is_(len(present(c.port, ond)), len(ond), "the down instance's keys are cached on the other too")
q(db, "UPDATE fo SET v = 'b'")
try:
    mcrig.wait_for(lambda: not present(c.port, keys), 10, interval=0.1, what="gone from c")
except TimeoutError:
    pass
time.sleep(2)
t.is_(len(present(c.port, keys)), 0,
      "while an instance is down, every key is deleted on the instance readers fail over to")
t.is_(len(present(d.port, ond)), len(ond), "... the down instance still holds its copies")
row = q(db, "SELECT pending, retried, last_error IS NOT NULL FROM mc_wal_watches "
        "WHERE \"table\" = 'fo'::regclass")[0]
t.ok(row[0] > 0 and row[1] > 0 and row[2],
     "... and the batch is held: the failover instance's ack is not delivery for the down "
     "instance's keys", row)
pd.mode = "pass"
try:
    mcrig.wait_for(lambda: not present(d.port, ond), 30, interval=0.2, what="gone from d")
except TimeoutError:
    pass
left = present(d.port, ond)
t.ok(not left, "once the instance is back, every one of its %d keys is deleted there" % len(ond),
     "%d left" % len(left))
mcrig.wait_for(lambda: q(db, "SELECT pending = 0 FROM mc_wal_watches "
                             "WHERE \"table\" = 'fo'::regclass")[0][0], 10, what="pending 0")
t.ok(True, "nothing pending afterwards")

# ---- under a steady write load the restart position keeps up -------------------------------
# PostgreSQL writes a running-transactions record (where a slot's restart
# position can move to) every 15 s at most; the worker writes one when
# the restart position trails the confirmed one, so a poll does not decode
# seconds of the log again
# autovacuum off: its VACUUM of the table this load bloats may take an xid
# (a truncation's lock does), a transaction in progress for the check below
q(db, "CREATE TABLE heavy (id int PRIMARY KEY, v int NOT NULL DEFAULT 0) "
      "WITH (autovacuum_enabled = off)")
q(db, "INSERT INTO heavy (id) SELECT g FROM generate_series(1, 5000) g")
q(db, "SELECT mc_watch('heavy', ARRAY['heavy:{id}'], 'ws')")
seen = []                       # (time, WAL insert position)
good = bad = 0
start = time.time()
last = 0
while time.time() - start < 5:
    q(db, "UPDATE heavy SET v = v + 1")
    now = time.time()
    if now - last < 0.2:
        continue
    last = now
    seen.append((now, q(db, "SELECT pg_current_wal_lsn()")[0][0]))
    older = [lsn for ts, lsn in seen if ts <= now - 1.5]
    if older:
        if q(db, "SELECT restart_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE plugin = 'mcfdw'",
             (older[-1],))[0][0]:
            good += 1
        else:
            bad += 1
t.ok(good + bad >= 5 and good >= 3 * bad,
     "under a steady write load the slot's restart position stays within 1.5 s of the log "
     "(%d of %d samples)" % (good, good + bad))


def trail():
    return q(db, "SELECT confirmed_flush_lsn - restart_lsn FROM pg_replication_slots "
                 "WHERE plugin = 'mcfdw'")[0][0]


try:
    mcrig.wait_for(lambda: trail() < 256 * 1024, 3, interval=0.1, what="restart position")
except TimeoutError:
    pass
t.ok(trail() < 256 * 1024, "... and once the load stops it catches up with the confirmed "
     "position within 3 s (%s bytes behind)" % trail())

# ---- the decoding context: kept while a transaction runs, released when idle ---------------
# the worker decodes a large transaction's WAL while it runs (flushing what
# its backend wrote), holding the slot meanwhile; with nothing in progress
# it lets the slot go, so another session can drop it
def holder():
    return q(db, "SELECT active_pid FROM pg_replication_slots WHERE plugin = 'mcfdw'")[0][0]


worker = q(db, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'mcfdw wal worker'")[0][0]
try:
    mcrig.wait_for(lambda: holder() is None, 5, interval=0.05, what="the slot released")
except TimeoutError:
    pass
held_by = holder()
running = held_by and q(db, "SELECT pid, backend_type, backend_xid, backend_xmin, state, "
                            "left(query, 60) FROM pg_stat_activity WHERE backend_xid IS NOT NULL "
                            "OR backend_xmin IS NOT NULL OR backend_type = 'autovacuum worker'")
t.ok(held_by is None, "with nothing in progress the worker does not hold the slot",
     "holder: %r" % (held_by,), "sessions with an xid or an xmin, and autovacuum: %r" % (running,))

# a record no commit flushes: a non-transactional message (no transaction
# id, so no commit record) from a session that stays in its transaction;
# the WAL writer flushes whole pages only, so the message's last page stays
# unflushed until that transaction ends, and a worker waiting for it would
# hold the slot all that while.  The release counts only while the
# message's end is still unflushed (else the attempt is repeated).
def unflushed_tail():
    ends = []

    def writer():
        c = pg.connect()
        c.autocommit = False
        q(c, "SELECT pg_logical_emit_message(false, 'mcfdw-test', repeat('a', 20000))")
        ends.append(q(c, "SELECT pg_current_wal_insert_lsn()")[0][0])
        q(c, "SELECT pg_sleep(6)")
        c.commit()
        c.close()

    th = threading.Thread(target=writer)
    th.start()
    mcrig.wait_for(lambda: ends, 5, interval=0.05, what="the message written")
    # time for the WAL writer to flush the message's whole pages and for
    # the worker to start reading it (its poll interval here is 50 ms)
    time.sleep(1)
    got = None
    deadline = time.time() + 3
    while time.time() < deadline:
        h = holder()
        unflushed = q(db, "SELECT pg_current_wal_flush_lsn() < %s::pg_lsn", (ends[0],))[0][0]
        if not unflushed:
            got = "flushed before the end of the wait"
            break
        if h is None:
            got = "released"
            break
        time.sleep(0.05)
    th.join()
    return got


for _ in range(3):
    got = unflushed_tail()
    if got != "flushed before the end of the wait":
        break
t.is_(got, "released", "a record whose end no commit flushes (a non-transactional message in a "
      "running transaction): the worker does not wait for it holding the slot")
q(db, "CREATE TABLE bulk (id int PRIMARY KEY)")
q(db, "SELECT mc_watch('bulk', ARRAY['bulk:{id}'], 'ws')")
sent0 = q(db, "SELECT sent FROM mc_wal_watches WHERE \"table\" = 'bulk'::regclass")[0][0]
big = pg.connect()
big.autocommit = False
q(big, "INSERT INTO bulk SELECT g FROM generate_series(1, 60000) g")
held = []
deadline = time.time() + 5
while time.time() < deadline and len(held) < 10:
    held = held + [1] if holder() == worker else []
    time.sleep(0.05)
t.ok(len(held) >= 10, "while a large transaction runs, the worker holds the slot: its changes "
     "are decoded before the commit (held at %d consecutive samples)" % len(held))
q(big, "COMMIT")
try:
    mcrig.wait_for(lambda: q(db, "SELECT sent FROM mc_wal_watches WHERE \"table\" = 'bulk'::regclass")[0][0]
                   >= sent0 + 60000, 20, interval=0.05, what="the bulk keys")
except TimeoutError:
    pass
t.ok(q(db, "SELECT sent FROM mc_wal_watches WHERE \"table\" = 'bulk'::regclass")[0][0] >= sent0 + 60000,
     "... and after its commit all 60,000 keys are delivered")
try:
    mcrig.wait_for(lambda: holder() is None, 5, interval=0.05, what="the slot released")
except TimeoutError:
    pass
t.is_(holder(), None, "... then the worker lets the slot go again")
big.close()

# ---- the worker reads mc_watches again only after a change ----------------------------------
# (its statistics are flushed at most every second; while idle it polls
# every 50 ms, so 2.5 s are some 50 polls)
def scans():
    return q(db, "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables "
                 "WHERE relid = 'mc_watches'::regclass")[0][0]


def commits():
    return q(db, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")[0][0]


q(db, "CREATE TABLE idle_w (id int PRIMARY KEY)")
q(db, "SELECT mc_watch('idle_w', ARRAY['iw:{id}'], 'ws')")
time.sleep(1.5)
# this session's own reads of mc_watches (mc_watch, the view) counted before
q(db, "SELECT pg_stat_force_next_flush()")
s1, c1 = scans(), commits()
time.sleep(2.5)
q(db, "SELECT pg_stat_force_next_flush()")
s2, c2 = scans(), commits()
t.ok(c2 - c1 >= 10, "the worker's statistics are flushed while it polls (%d commits in 2.5 s)"
     % (c2 - c1))
t.is_(s2 - s1, 0, "... and while idle it does not read mc_watches at each poll")
# a write of mc_watches (its statement trigger fires even for no row) whose
# subtransaction rolled back: the commit changed no watch, so no read; the
# same write kept (RELEASE) is read once
ch = pg.connect()
ch.autocommit = True


def change_in_savepoint(end):
    cur = ch.cursor()
    cur.execute("BEGIN")
    cur.execute("SAVEPOINT w")
    cur.execute("DELETE FROM mc_watches WHERE false")
    cur.execute(end)
    cur.execute("SELECT 1")
    cur.execute("COMMIT")


for end, want, label in (("ROLLBACK TO SAVEPOINT w", lambda d: d == 0, "does not read mc_watches again"),
                         ("RELEASE SAVEPOINT w", lambda d: d >= 1, "reads mc_watches again")):
    q(db, "SELECT pg_stat_force_next_flush()")
    s1 = scans()
    change_in_savepoint(end)
    time.sleep(2.5)
    q(db, "SELECT pg_stat_force_next_flush()")
    s2 = scans()
    t.ok(want(s2 - s1), "a write of mc_watches in a subtransaction, then %s and a commit: the worker "
         "%s (%d reads)" % (end.split()[0], label, s2 - s1))
ch.close()
q(db, "SELECT mc_unwatch('idle_w')")
q(db, "DROP TABLE idle_w")

# ---- failover and a hung instance: one delivery waits one mcfdw.wal_timeout -----------------
# the call's deadline does not mark the hung instance dead, so the copies
# for readers who fail over route to it again: they get what is left of
# the same mcfdw.wal_timeout, not another one
e = mcrig.start_memcached()
f = mcrig.start_memcached()
pf = FaultProxy(f.port).start()
q(db, "ALTER SYSTEM SET mcfdw.wal_timeout = '2s'")
q(db, "SELECT pg_reload_conf()")
mcrig.wait_for(lambda: q(db, "SELECT setting FROM pg_settings WHERE name = 'mcfdw.wal_timeout'")[0][0]
               == "2000", 5, what="wal_timeout reloaded")
q(db, "CREATE SERVER wh FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s, failover 'true', "
      "connect_timeout '1000', io_timeout '60000', retry_delay '1')",
  ("%s,%s" % (e.addr, pf.addr),))
q(db, "CREATE USER MAPPING FOR PUBLIC SERVER wh")
q(db, "CREATE TABLE hung (id int PRIMARY KEY, v text)")
q(db, "INSERT INTO hung SELECT i, 'a' FROM generate_series(1, 50) i")
q(db, "SELECT mc_watch('hung', ARRAY['hung:{id}'], 'wh')")
time.sleep(0.5)
keys = ["hung:%d" % i for i in range(1, 51)]
q(db, "SELECT mc_set_multi(%s, %s, NULL, NULL, 'wh')", (keys, ["v"] * 50))
onf = [r[0] for r in q(db, "SELECT key FROM mc_route(%s, 'wh') WHERE port = %s", (keys, pf.port))]
pf.mode = "hang"
q(db, "UPDATE hung SET v = 'b'")
committed = q(db, "SELECT clock_timestamp()")[0][0]


def first_error():
    return q(db, "SELECT last_error_time FROM mc_wal_watches WHERE \"table\" = 'hung'::regclass")[0][0]


try:
    mcrig.wait_for(lambda: first_error() is not None, 15, interval=0.05, what="a failed round")
except TimeoutError:
    pass
err = first_error()
took = (err - committed).total_seconds() if err is not None else None
t.ok(len(onf) > 0 and took is not None and took < 3.0,
     "with failover, a delivery to a hung instance fails within one mcfdw.wal_timeout (2 s), "
     "the copies for failing-over readers included (%s s, %d keys on it)" % (took, len(onf)))
# while it stays hung the batch is tried again, each try bounded by the
# timeout and followed by a longer wait: a few connections, not a spin
acc0 = pf.accepted
r0 = q(db, "SELECT retried FROM mc_wal_watches WHERE \"table\" = 'hung'::regclass")[0][0]
time.sleep(5)
r1 = q(db, "SELECT retried FROM mc_wal_watches WHERE \"table\" = 'hung'::regclass")[0][0]
t.ok(r1 > r0 and pf.accepted - acc0 <= 6,
     "while the instance stays hung the batch is retried without spinning (%d keys retried, "
     "%d connections in 5 s)" % (r1 - r0, pf.accepted - acc0))
pf.mode = "pass"
try:
    mcrig.wait_for(lambda: not present(f.port, onf), 30, interval=0.2, what="gone from f")
except TimeoutError:
    pass
t.is_(len(present(f.port, onf)), 0, "once it answers again, its keys are deleted there")
q(db, "SELECT mc_unwatch('hung')")
q(db, "ALTER SYSTEM RESET mcfdw.wal_timeout")
q(db, "SELECT pg_reload_conf()")

# ---- an instance cut in the middle of a batch's pipeline ---------------------------------
# one UPDATE of 20,000 rows; the connection to one instance is cut once 500
# of its deletes went through (the rest of its pipeline, and its "mn", not
# delivered): the batch is held, and once the instance is back every key is
# deleted, those deleted before the cut included (sent again: none skipped)
class Tripwire(bytearray):
    """FaultProxy.requests that cuts the proxy (mode "close": the next
    request closes the connection) once `after` "md" requests went through."""

    def __init__(self, px, after):
        super().__init__()
        self.px, self.after, self.md_at_cut = px, after, None

    def __iadd__(self, data):
        bytearray.__iadd__(self, data)
        if self.md_at_cut is None and self.count(b"md ") >= self.after:
            self.md_at_cut = self.count(b"md ")
            self.px.mode = "close"
        return self


N = 20000
g, h, ph = watched_pair("wc", "chunked", "ch:{id}", N)


def chunked_row():
    return q(db, "SELECT pending, sent, retried FROM mc_wal_watches WHERE \"table\" = 'chunked'::regclass")


keys = ["ch:%d" % i for i in range(1, N + 1)]
q(db, "SELECT mc_set_multi(%s, %s, NULL, NULL, 'wc')", (keys, ["v"] * N))
onh = [r[0] for r in q(db, "SELECT key FROM mc_route(%s, 'wc') WHERE port = %s", (keys, ph.port))]
t.ok(len(onh) > 4000 and len(present(h.port, onh)) == len(onh),
     "%d of %d keys on the instance to be cut" % (len(onh), N))
wire = Tripwire(ph, 500)
ph.requests = wire
ph.record = True
q(db, "UPDATE chunked SET v = 'b'")
try:
    mcrig.wait_for(lambda: chunked_row()[0][2] > 0, 20, interval=0.05, what="a failed delivery")
except TimeoutError:
    pass
retried = chunked_row()[0][2]
t.ok(wire.md_at_cut is not None and retried > 0 and chunked_row()[0][0] > 0,
     "an instance cut in the middle of its pipeline (%s deletes through) holds the batch "
     "(%d keys retried)" % (wire.md_at_cut, retried), repr(chunked_row()))
time.sleep(1)
ph.record = False
ph.mode = "pass"
try:
    mcrig.wait_for(lambda: not present(h.port, onh) and not present(g.port, keys), 30,
                   interval=0.2, what="every key gone")
except TimeoutError:
    pass
left = len(present(h.port, onh)) + len(present(g.port, keys))
t.ok(left == 0, "once it is back, every one of the %d keys is deleted, on both instances" % N,
     "%d left" % left)
try:
    mcrig.wait_for(lambda: chunked_row()[0][0] == 0, 10, what="pending 0")
except TimeoutError:
    pass
t.is_(chunked_row()[0][0], 0, "... and nothing is pending afterwards")
q(db, "SELECT mc_unwatch('chunked')")

# ---- the worker runs no one else's code -------------------------------------------------------
# it runs as the bootstrap superuser; a role that may create objects in
# public puts there a function and operators its queries (and mc_watch's)
# would pick without qualified names, each recording that it ran
q(db, "CREATE ROLE intruder LOGIN")
q(db, "GRANT CREATE ON SCHEMA public TO intruder")
intr = pg.connect(user="intruder")
q(intr, "CREATE TABLE public.ran (who text, what text)")
q(intr, "CREATE FUNCTION public.pg_create_logical_replication_slot(name, text) RETURNS text "
        "LANGUAGE sql AS $$ INSERT INTO public.ran VALUES (current_user, 'slot') RETURNING 'x' $$")
for right in ("regclass", "oid"):
    q(intr, "CREATE FUNCTION public.ran_eq(regclass, %s) RETURNS boolean LANGUAGE sql AS "
            "$$ INSERT INTO public.ran VALUES (current_user, '=') "
            "RETURNING $1::oid OPERATOR(pg_catalog.=) $2::oid $$" % right)
    q(intr, "CREATE OPERATOR public.= (LEFTARG = regclass, RIGHTARG = %s, FUNCTION = public.ran_eq)"
          % right)
intr.close()


def slot_count():
    return q(db, "SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE plugin = 'mcfdw'")[0][0]


def drop_slot():
    try:
        q(db, "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots "
              "WHERE plugin = 'mcfdw'")
        return True
    except psycopg2.Error:
        return False                    # the worker holds it: again


mcrig.wait_for(drop_slot, 10, interval=0.05, what="the slot dropped by hand")
try:
    mcrig.wait_for(lambda: slot_count() == 1, 10, what="the slot created again")
except TimeoutError:
    pass
t.is_(slot_count(), 1, "the worker creates the slot dropped by hand again")
q(db, "CREATE TABLE guarded (id int PRIMARY KEY, v text)")
q(db, "INSERT INTO guarded VALUES (1, 'a')")
q(db, "SELECT mc_watch('guarded', ARRAY['guarded:{id}'], 'ws')")
q(db, "SELECT mc_unwatch('bulk', 'wf')")
q(db, "SELECT mc_set_multi(%s, %s, NULL, NULL, 'ws')", (["guarded:1"], ["v"]))
q(db, "UPDATE guarded SET v = 'b'")
try:
    mcrig.wait_for(lambda: not present(a.port, ["guarded:1"]) and not present(b.port, ["guarded:1"]),
                   10, interval=0.05, what="guarded:1 gone")
except TimeoutError:
    pass
t.ok(not present(a.port, ["guarded:1"]) and not present(b.port, ["guarded:1"]),
     "with them in place, a watched write is still invalidated")
t.is_(q(db, "SELECT count(*), string_agg(DISTINCT who || ': ' || what, ', ') FROM public.ran")[0],
      (0, None), "neither the worker nor mc_watch, mc_unwatch ran the intruder's function or operators")
db.close()
t.done()
