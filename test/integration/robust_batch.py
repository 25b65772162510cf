"""robust_batch: batch writes and the on-commit send against hostile servers.

mc_set_multi, mc_delete_multi, mc_touch_multi (batch_sql.c over batch.c)
and the on-commit queue (xact.c: mc_delete_on_commit, mc_set_on_commit, the
mc_invalidate trigger) driven through test/lib/hostile.py:

- stray replies on a pooled socket (a foreign value, a miss, "MN", and
  replies that look like the batch's own: "NF O0", "NS O0", "HD O0"): no
  reply is ever matched to a request it does not answer; a call returns
  the right count or an error, and the call after it is in step;
- a reply dropped after memcached executed the pipeline: a set or a touch
  may go again once, on a fresh socket, and never a third time; a delete
  whose count a second send would falsify is an error that says it may have
  run;
- a trickling server, statement_timeout and pg_cancel_backend mid-batch:
  the backend recovers, the next call works, and a socket abandoned
  mid-reply is never used again;
- endless "EN" lines, a 1 GB value announced, STAT lines and binary junk:
  an error at once, memory bounded;
- the on-commit send against each of them: the commit succeeds, a write not
  sent gives a WARNING (never an ERROR) and is counted as lost in
  mc_counters and mc_invalidation_stats, and the commit's wait is bounded.
"""

import time

import mcdb
import mcrig
from hostile import STRAY, HostileProxy, HostileServer, backend_rss_kb, run_bounded

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = HostileProxy(mc.port).start()
db = mcdb.Database("mcfdw_it_robust_batch")
admin = db.connect()
db.server(admin, "direct", mc.addr)
db.server(admin, "px", px.addr, io_timeout="1s", failure_limit=1000)
MB = 1024

KEYS = ["rb:%d" % i for i in range(20)]
HALF = KEYS[::2]


def mc_has(key):
    r = mcrig.mc_command(mc.port, "get " + key)
    return r.startswith(b"VALUE")


def mc_value(key):
    r = mcrig.mc_command(mc.port, "get " + key)
    lines = r.split(b"\r\n")
    return lines[1].decode() if lines[0].startswith(b"VALUE") else None


def mc_set(key, value):
    mcrig.mc_command(mc.port, b"set %s 0 0 %d\r\n%s" % (key.encode(), len(value), value.encode()),
                     end=(b"STORED\r\n",))


def mc_del(key):
    mcrig.mc_command(mc.port, "delete " + key, end=(b"DELETED\r\n", b"NOT_FOUND\r\n"))


def attempt(c, sql, args=None):
    try:
        return ("ok", db.value(c, sql, args), None)
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0], getattr(e, "pgcode", None), str(e))


# Each batch function: how to set memcached up, the call, the count it must
# return, and whether memcached holds what it must afterwards.
class SetMulti:
    name = "mc_set_multi"

    def __init__(self, tag="v"):
        self.tag = tag

    def prepare(self):
        for k in KEYS:
            mc_del(k)

    def sql(self, server):
        vals = ["%s-%s" % (self.tag, k) for k in KEYS]
        return ("SELECT mc_set_multi(%s::text[], %s::text[], server => '" + server + "')",
                (KEYS, vals))

    expected = len(KEYS)

    def state_ok(self):
        return all(mc_value(k) == "%s-%s" % (self.tag, k) for k in KEYS)


class DeleteMulti:
    name = "mc_delete_multi"

    def prepare(self):
        for k in KEYS:
            mc_del(k)
        for k in HALF:
            mc_set(k, "x")

    def sql(self, server):
        return "SELECT mc_delete_multi(%s::text[], '" + server + "')", (KEYS,)

    expected = len(HALF)

    def state_ok(self):
        return not any(mc_has(k) for k in KEYS)


class TouchMulti(DeleteMulti):
    """Half the keys exist, as for mc_delete_multi."""
    name = "mc_touch_multi"

    def sql(self, server):
        return "SELECT mc_touch_multi(%s::text[], '1 hour', '" + server + "')", (KEYS,)

    expected = len(HALF)

    def state_ok(self):
        return all(mc_has(k) == (k in HALF) for k in KEYS)


BATCHES = [SetMulti(), DeleteMulti(), TouchMulti()]


def run(c, b, server="px"):
    sql, args = b.sql(server)
    return attempt(c, sql, args)


def right_or_error(r, b):
    """A call's outcome is acceptable: an error, or the right count."""
    return r[0] == "error" or r[1] == b.expected


# ---- 1. stray replies on a pooled socket ----------------------------------------
strays_seen = [0]


def stray_case(b, stray, label):
    c = db.connect()
    b.prepare()
    run(c, b)                                   # a pooled socket, in step
    px.stray = stray
    px.stray_next = 1
    b.prepare()
    r1 = run(c, b)                              # a stray follows its reply
    mcrig.wait_for(lambda: px.stray_next == 0 and px.strays_sent > strays_seen[0], 5, what="stray")
    strays_seen[0] = px.strays_sent
    time.sleep(0.1)                             # the stray sits on the idle socket
    b.prepare()
    accepted = px.accepted
    r2 = run(c, b)
    state2 = b.state_ok()
    fresh = px.accepted - accepted
    b.prepare()
    r3 = run(c, b)
    t.ok(right_or_error(r2, b) and (r2[0] == "error" or state2),
         "%s, stray %s on the pooled socket: the right count or an error, never a count "
         "made of the stray" % (b.name, label), "first: %r" % (r1,), "next: %r" % (r2,),
         "memcached as expected: %r" % state2)
    t.ok(fresh >= 1 or r2[0] == "error",
         "%s, stray %s: the socket holding it is not used for the batch" % (b.name, label),
         "new connections: %d, result %r" % (fresh, r2))
    t.is_(r3[:2], ("ok", b.expected), "%s, stray %s: the call after is in step" % (b.name, label))
    c.close()


for b in BATCHES:
    own = {"mc_set_multi": b"NS O0\r\n", "mc_delete_multi": b"NF O0\r\n",
           "mc_touch_multi": b"HD O1\r\n"}[b.name]
    for stray, label in ((STRAY, "VA"), (b"EN\r\n", "EN"), (b"MN\r\n", "MN"),
                         (own, own.decode().strip())):
        stray_case(b, stray, label)
px.stray = STRAY

# ---- 2. a reply dropped after memcached executed the pipeline -----------------
for b in BATCHES:
    c = db.connect()
    b.prepare()
    run(c, b)                                   # pooled
    b.prepare()
    drops = px.drops_done
    px.drop_next = 1
    r = run(c, b)
    px.drop_next = 0
    t.ok(px.drops_done == drops + 1, "%s, reply dropped: the proxy executed it and reset" % b.name)
    t.ok(b.state_ok(), "%s, reply dropped: memcached holds what the call asked" % b.name)
    if b.name == "mc_delete_multi":
        # a second send would answer NF for every key the first one deleted
        t.ok(r[0] == "error" and "may or may not have been executed" in r[3],
             "mc_delete_multi, reply dropped: an error that says the deletes may have run, "
             "not a count of 0", repr(r))
    else:
        t.is_(r[:2], ("ok", b.expected),
              "%s, reply dropped on a pooled socket: sent again once on a fresh one, "
              "the right count" % b.name)
    # both the send and the one retry dropped: an error, never a third send
    b.prepare()
    drops = px.drops_done
    accepted = px.accepted
    px.drop_next = 2
    r = run(c, b)
    sent = px.drops_done - drops
    px.drop_next = 0
    t.ok(r[0] == "error" and sent <= 2 and px.accepted - accepted <= 1,
         "%s, every reply dropped: an error after at most one resend" % b.name,
         repr(r), "drops %d, new connections %d" % (sent, px.accepted - accepted))
    b.prepare()
    t.is_(run(c, b)[:2], ("ok", b.expected), "%s, reply dropped: the next call works" % b.name)
    c.close()

# failover on: a delete that may have run is not sent to another instance
mc2 = mcrig.start_memcached()
db.server(admin, "pxfo", "%s,%s" % (px.addr, mc2.addr), failover="on", io_timeout="1s",
          failure_limit=100)
c = db.connect()
b = DeleteMulti()
b.prepare()
run(c, b, "pxfo")
b.prepare()
px.drop_next = 1
r = run(c, b, "pxfo")
px.drop_next = 0
t.ok(r[0] == "error" or right_or_error(r, b) and r[1] <= b.expected,
     "mc_delete_multi with failover, reply dropped: not a count from another instance", repr(r))
c.close()

# ---- 3. trickle, statement_timeout and cancel mid-batch -------------------------
tr = HostileServer("trickle_hd", trickle=0.05).start()
db.server(admin, "tr", tr.addr, io_timeout="1s")
big = ["rbt:%d" % i for i in range(200)]
for name, sql, args in (
        ("mc_set_multi", "SELECT mc_set_multi(%s::text[], %s::text[], server => 'tr')", (big, big)),
        ("mc_delete_multi", "SELECT mc_delete_multi(%s::text[], 'tr')", (big,)),
        ("mc_touch_multi", "SELECT mc_touch_multi(%s::text[], '1 hour', 'tr')", (big,))):
    c = db.connect()
    db.sql(c, "SET statement_timeout = '1s'")
    o = run_bounded(c, sql, args, bound=10, way_out=tr.drop_all, admin=admin)
    t.ok(not o.overran and o.pgcode == "57014" and o.elapsed < 3,
         "%s on a trickling server (a byte per 50 ms): statement_timeout ends it" % name, repr(o))
    accepted = tr.accepted
    o = run_bounded(c, sql, args, bound=10, way_out=tr.drop_all, admin=admin)
    t.ok(tr.accepted > accepted and o.pgcode == "57014",
         "%s: the socket left mid-reply is not used again" % name,
         "new connections %d" % (tr.accepted - accepted), repr(o))
    db.sql(c, "RESET statement_timeout")
    b = BATCHES[[x.name for x in BATCHES].index(name)]
    b.prepare()
    t.is_(run(c, b, "direct")[:2], ("ok", b.expected), "%s: the backend works after" % name)
    c.close()
tr.stop()

# cancel and terminate reach a batch waiting on an instance that never answers
db.server(admin, "silent", mcrig.hang_addr(), io_timeout="0")
for how in ("cancel", "terminate"):
    c = db.connect()
    pid = c.get_backend_pid()
    fired = []

    def fire(elapsed):
        if elapsed > 0.5 and not fired:
            fired.append(elapsed)
            admin.cursor().execute("SELECT pg_%s_backend(%%s)" % how, (pid,))
        return False

    o = run_bounded(c, "SELECT mc_set_multi(%s::text[], %s::text[], server => 'silent')",
                    (big, big), bound=10, admin=admin, during=fire)
    t.ok(fired and not o.overran and o.elapsed < 3,
         "mc_set_multi on a silent instance, io_timeout 0: pg_%s_backend ends it" % how, repr(o))
    if how == "cancel":
        t.is_(o.pgcode, "57014", "and the cancel is reported as such")
        b = SetMulti("after-cancel")
        b.prepare()
        t.is_(run(c, b, "direct")[:2], ("ok", b.expected), "the backend works after the cancel")
    c.close()

# a reply held back past a cancel arrives on the abandoned socket later: the
# next batch on that server must not read it as its own
c = db.connect()
b = DeleteMulti()
b.prepare()
run(c, b)                                       # pooled
b.prepare()
px.p_delay, px.delay = 1.0, 1.5
db.sql(c, "SET statement_timeout = '300ms'")
r = run(c, b)
db.sql(c, "RESET statement_timeout")
px.p_delay = 0.0
t.is_(r[2], "57014", "a batch whose reply is held back 1.5 s: statement_timeout ends it")
time.sleep(1.7)                                 # the late reply reaches the old socket
b.prepare()
accepted = px.accepted
r = run(c, b)
t.ok(r[:2] == ("ok", b.expected) and px.accepted > accepted,
     "the next batch uses a new socket and gets its own count", repr(r),
     "new connections %d" % (px.accepted - accepted))
c.close()

# ---- 4. garbage and endless streams ---------------------------------------------
for behaviour, codes in (("endless_en", ("08P01",)), ("huge_va", ("08P01", "54000")),
                         ("stats_forever", ("08P01",)), ("garbage", ("08P01",))):
    hs = HostileServer(behaviour).start()
    db.server(admin, "hs", hs.addr, io_timeout="5s")
    for name, sql, args in (
            ("mc_set_multi", "SELECT mc_set_multi(%s::text[], %s::text[], server => 'hs')",
             (KEYS, KEYS)),
            ("mc_delete_multi", "SELECT mc_delete_multi(%s::text[], 'hs')", (KEYS,)),
            ("mc_touch_multi", "SELECT mc_touch_multi(%s::text[], '1 hour', 'hs')", (KEYS,))):
        c = db.connect()
        pid = c.get_backend_pid()
        base = backend_rss_kb(pid)
        peak = [base]

        def watch(elapsed):
            peak[0] = max(peak[0], backend_rss_kb(pid))
            return peak[0] - base > 200 * MB

        o = run_bounded(c, sql, args, bound=10, way_out=hs.drop_all, admin=admin, during=watch)
        grew = (peak[0] - base) // MB
        t.ok(not o.overran and o.elapsed < 3 and o.pgcode in codes and grew < 100,
             "%s against %s: an error (%s) at once, memory bounded (grew %d MB)"
             % (name, behaviour, "/".join(codes), grew), repr(o))
        c.close()
    hs.stop()
    db.sql(admin, "DROP SERVER hs")


# ---- 5. the on-commit send ---------------------------------------------------------
def counts(c, server):
    rows = db.sql(c, "SELECT sent, lost FROM mc_counters WHERE server = %s", (server,))
    inv = db.sql(c, "SELECT sent, lost FROM mc_invalidation_stats WHERE server = %s", (server,))
    return (rows[0] if rows else (0, 0)), (inv[0] if inv else (0, 0))


def commit_case(server, label, want_lost, bound=8.0, trigger=False, check=None):
    c = db.connect()
    (s0, l0), _ = counts(c, server)
    c.autocommit = False
    cur = c.cursor()
    if trigger:
        cur.execute("UPDATE rb_users SET name = name || 'x' WHERE id IN (1, 2)")
    else:
        cur.execute("SELECT mc_delete_on_commit('rbc:1', %s)", (server,))
        cur.execute("SELECT mc_set_on_commit('rbc:2', 'committed', server => %s)", (server,))
    del c.notices[:]
    t0 = time.monotonic()
    try:
        c.commit()
        err = None
    except Exception as e:  # noqa: BLE001
        err = str(e)
    elapsed = time.monotonic() - t0
    c.autocommit = True
    (s1, l1), (is1, il1) = counts(c, server)
    warned = any("WARNING" in n and "after commit" in n for n in c.notices)
    t.ok(err is None and elapsed < bound,
         "on-commit, %s: the commit succeeds within %.0f s" % (label, bound),
         "error: %r, %.2f s" % (err, elapsed))
    if want_lost is None:
        # either sent or lost, but a lost write is warned about and counted
        t.ok((l1 - l0 == 0 and s1 - s0 == 2 and not warned) or (l1 - l0 + s1 - s0 == 2 and warned),
             "on-commit, %s: both writes are sent, or the lost ones give a WARNING and count" % label,
             "sent +%d, lost +%d, warned %r" % (s1 - s0, l1 - l0, warned), *c.notices)
    elif want_lost:
        t.ok(warned and l1 - l0 == 2 and il1 >= 2,
             "on-commit, %s: a WARNING, and both writes counted lost in mc_counters and "
             "mc_invalidation_stats" % label,
             "sent +%d, lost +%d, session lost %d" % (s1 - s0, l1 - l0, il1), *c.notices)
    else:
        t.ok(not warned and s1 - s0 == 2 and l1 == l0,
             "on-commit, %s: both writes sent, no WARNING" % label,
             "sent +%d, lost +%d" % (s1 - s0, l1 - l0), *c.notices)
    if check is not None:
        t.ok(check(), "on-commit, %s: memcached holds what was committed" % label)
    c.close()


db.sql(admin, "CREATE TABLE rb_users (id int PRIMARY KEY, name text)")
db.sql(admin, "INSERT INTO rb_users VALUES (1, 'a'), (2, 'b')")

for behaviour in ("endless_en", "huge_va", "garbage", "stats_forever", "trickle_hd"):
    # trickled: one reply takes 3.5 s, past the commit's budget of 2 s
    hs = HostileServer(behaviour, trickle=0.5).start()
    db.server(admin, "oc", hs.addr, io_timeout="1s", connect_timeout="1s")
    commit_case("oc", behaviour, True)
    hs.stop()
    db.sql(admin, "DROP SERVER oc")
db.server(admin, "oc", mcrig.hang_addr(), io_timeout="1s", connect_timeout="1s")
commit_case("oc", "a server that never answers", True)
# the trigger's deletes take the same path
db.sql(admin, "CREATE TRIGGER rb_users_cache AFTER UPDATE ON rb_users FOR EACH ROW "
              "EXECUTE FUNCTION mc_invalidate('@oc', 'rbu:{id}')")
commit_case("oc", "mc_invalidate trigger, a server that never answers", True, trigger=True)
db.sql(admin, "DROP TRIGGER rb_users_cache ON rb_users")
db.sql(admin, "DROP SERVER oc")


def committed():
    return mc_value("rbc:2") == "committed" and not mc_has("rbc:1")


def reset_rbc():
    mc_set("rbc:1", "old")
    mc_set("rbc:2", "old")


# through the proxy: first without a fault
db.server(admin, "ocpx", px.addr, io_timeout="1s", connect_timeout="1s", failure_limit=1000)
reset_rbc()
commit_case("ocpx", "through the proxy, no fault", False, check=committed)

# a stray on the very backend that commits
for stray, label in ((STRAY, "VA"), (b"MN\r\n", "MN"), (b"NF O0\r\n", "NF O0")):
    reset_rbc()
    c = db.connect()
    c.autocommit = False
    cur = c.cursor()
    cur.execute("SELECT mc_delete_on_commit('rbc:0', 'ocpx')")
    c.commit()
    px.stray = stray
    px.stray_next = 1
    cur.execute("SELECT mc_delete_on_commit('rbc:0', 'ocpx')")
    c.commit()
    mcrig.wait_for(lambda: px.stray_next == 0, 5, what="stray")
    time.sleep(0.1)
    c.autocommit = True
    (s0, l0), _ = counts(c, "ocpx")
    c.autocommit = False
    cur.execute("SELECT mc_delete_on_commit('rbc:1', 'ocpx')")
    cur.execute("SELECT mc_set_on_commit('rbc:2', 'committed', server => 'ocpx')")
    del c.notices[:]
    c.commit()
    c.autocommit = True
    (s1, l1), _ = counts(c, "ocpx")
    warned = any("after commit" in n for n in c.notices)
    t.ok((s1 - s0, l1 - l0) == (2, 0) and not warned and committed(),
         "on-commit after a stray %s on this backend's socket: the socket is replaced, "
         "both writes sent" % label, "sent +%d lost +%d" % (s1 - s0, l1 - l0), *c.notices)
    c.close()
px.stray = STRAY

# a reply dropped after memcached executed it: sent again once (idempotent)
reset_rbc()
c = db.connect()
c.autocommit = False
cur = c.cursor()
cur.execute("SELECT mc_delete_on_commit('rbc:0', 'ocpx')")
c.commit()
c.autocommit = True
(s0, l0), _ = counts(c, "ocpx")
c.autocommit = False
cur.execute("SELECT mc_delete_on_commit('rbc:1', 'ocpx')")
cur.execute("SELECT mc_set_on_commit('rbc:2', 'committed', server => 'ocpx')")
del c.notices[:]
px.drop_next = 1
c.commit()
px.drop_next = 0
c.autocommit = True
(s1, l1), _ = counts(c, "ocpx")
warned = any("after commit" in n for n in c.notices)
t.ok(committed() and (s1 - s0, l1 - l0) == (2, 0) and not warned,
     "on-commit, reply dropped after execution: sent again once on a fresh socket, "
     "counted sent",
     "sent +%d lost +%d" % (s1 - s0, l1 - l0), *c.notices)
# every attempt dropped: lost, warned, counted
c.autocommit = False
cur.execute("SELECT mc_delete_on_commit('rbc:1', 'ocpx')")
cur.execute("SELECT mc_set_on_commit('rbc:2', 'committed', server => 'ocpx')")
del c.notices[:]
px.drop_next = 5
t0 = time.monotonic()
c.commit()
elapsed = time.monotonic() - t0
px.drop_next = 0
c.autocommit = True
(s2, l2), _ = counts(c, "ocpx")
warned = any("after commit" in n for n in c.notices)
t.ok(warned and l2 - l1 == 2 and elapsed < 8,
     "on-commit, every reply dropped: a WARNING, both counted lost, within the budget",
     "lost +%d, %.2f s" % (l2 - l1, elapsed), *c.notices)
c.close()

admin.close()
px.stop()
t.done()
