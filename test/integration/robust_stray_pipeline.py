"""robust_stray_pipeline: a late reply to an earlier run never lands in the
next pipelined one.

A proxy (hostile.py's stray_prepend) leads the reply to a pipeline with a
stray: a reply carrying the opaque token the connection's previous
pipeline gave its second request (what a late reply to that run carries),
or a bare "MN".  The pooled connection is the one the earlier run used,
so on a runner whose tokens restart at 0 in every run the stray's token
names an op of the new run.  Victims: mc_get_multi, mc_set_multi,
mc_delete_multi, a foreign-table scan on key = ANY, the batched join and
the full scan.  Each must return only its own keys' true values (true
counts for writes) or raise; never the planted value, never a key
reported a miss, or a write done or not done, that the server did not
say.  The keys the stray names are chosen so that the real reply stream
has nothing for them (reads of absent keys, quiet writes that succeed),
so only the token can tell the stray from an answer.  A server with
on_failure 'miss' raises too (a reply out of step is a protocol error,
not unavailability)."""

import mcdb
import mcrig
from hostile import HostileProxy

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = HostileProxy(mc.port).start()
db = mcdb.Database("mcfdw_it_robust_stray_pipeline")
admin = db.connect()
db.server(admin, "direct", mc.addr, allow_full_scan="true")
db.server(admin, "px", px.addr, io_timeout="1s", allow_full_scan="true")
db.server(admin, "pxmiss", px.addr, io_timeout="1s", on_failure="miss")
db.sql(admin, "CREATE FOREIGN TABLE spt (key text, value text) SERVER px "
              "OPTIONS (allow_full_scan 'true')")
db.sql(admin, "CREATE FOREIGN TABLE spd (key text, value text) SERVER direct "
              "OPTIONS (allow_full_scan 'true')")
db.sql(admin, "CREATE TABLE outer_k (k text)")

PRESENT = ["sp:%d" % i for i in range(1, 7)]
ABSENT = ["sp:none%d" % i for i in range(1, 7)]
PLANT = b"PLANT"
STRAY_VA = b"VA 5 O%s\r\nPLANT\r\n"         # % the earlier run's token of position 1


def reset():
    db.sql(admin, "SELECT mc_flush_all('direct')")
    for k in PRESENT:
        db.sql(admin, "SELECT mc_set(%s, %s, server => 'direct')", (k, "V" + k))


def set_outer(keys):
    db.sql(admin, "TRUNCATE outer_k")
    rows = list(keys) + ["filler%d" % i for i in range(40)]
    admin.cursor().executemany("INSERT INTO outer_k VALUES (%s)", [(k,) for k in rows])
    db.sql(admin, "ANALYZE outer_k")


def call(c, sql, args=None):
    try:
        rows = db.sql(c, sql, args)
        return ("ok", [tuple(bytes(x) if isinstance(x, memoryview) else x for x in r)
                       for r in rows])
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0])


def truth_rows(keys):
    """(key, value) of the keys that exist, read through the direct server."""
    rows = db.sql(admin, "SELECT key, value FROM mc_get_multi(%s::text[], 'direct') ORDER BY key",
                  (list(keys),))
    return [tuple(r) for r in rows]


def armed(c, warm, victim, stray, match=b"mg ", label=""):
    """On backend c: run warm (the earlier run, on the pooled connection),
    then victim with the stray leading the reply to its first request
    chunk holding match; the victim's result."""
    call(c, *warm)
    px.stray = stray
    px.stray_token = 1 if b"%s" in stray else None
    px.stray_match = match
    sent = px.prepends_sent
    px.stray_prepend = 1
    r = call(c, *victim)
    px.stray_prepend = 0
    delivered = px.prepends_sent > sent
    t.ok(delivered, "%s: the stray was delivered into its reply stream" % label)
    return r


def check_reads(r, want, label):
    planted = r[0] == "ok" and any(PLANT in (v.encode() if isinstance(v, str) else (v or b""))
                                   for row in r[1] for v in row[1:])
    t.ok(not planted, "%s: the planted value is never returned" % label, repr(r))
    t.ok(r[0] == "error" or sorted(r[1]) == sorted(want),
         "%s: its own keys' true values, or an error" % label, repr(r), "want %r" % (want,))


def after(c, label):
    """The next call on the backend is in step (a new connection, true values)."""
    accepted = px.accepted
    r = call(c, "SELECT key, value FROM mc_get_multi(%s::text[], 'px') ORDER BY key",
             (PRESENT[:3],))
    t.is_(r, ("ok", truth_rows(PRESENT[:3])), "%s: the call after is in step" % label)
    t.ok(px.accepted > accepted, "%s: the connection that carried the stray is not used again" % label,
         "accepted %d -> %d" % (accepted, px.accepted))


reset()
MULTI = "SELECT key, value FROM mc_get_multi(%s::text[], %s) ORDER BY key"

# ---- mc_get_multi -------------------------------------------------------------
for server in ("px", "pxmiss"):
    label = "mc_get_multi (%s), stray VA with the earlier run's token" % server
    c = db.connect()
    r = armed(c, (MULTI, (PRESENT[:3], server)), (MULTI, (ABSENT[:4], server)), STRAY_VA,
              label=label)
    check_reads(r, [], label)
    if server == "px":
        t.ok(r[0] == "error", "%s: raised as a reply out of step" % label, repr(r))
        after(c, label)
    c.close()

label = "mc_get_multi, stray MN"
c = db.connect()
r = armed(c, (MULTI, (PRESENT[:3], "px")), (MULTI, (PRESENT, "px")), b"MN\r\n", label=label)
check_reads(r, truth_rows(PRESENT), label)
after(c, label)
c.close()

# ---- batch writes -------------------------------------------------------------
SETM = "SELECT mc_set_multi(%s::text[], %s::text[], server => 'px')"
DELM = "SELECT mc_delete_multi(%s::text[], 'px')"


def check_count(r, want, label):
    t.ok(r[0] == "error" or r[1] == [(want,)], "%s: the true count (%d), or an error" % (label, want),
         repr(r))


for stray, what in ((b"NS O%s\r\n", "NS"), (b"HD O%s\r\n", "HD"), (b"MN\r\n", "MN")):
    label = "mc_set_multi, stray %s" % what
    reset()
    c = db.connect()
    r = armed(c, (SETM, (PRESENT[:3], PRESENT[:3])), (SETM, (PRESENT, ["w"] * len(PRESENT))), stray,
              match=b"ms ", label=label)
    check_count(r, len(PRESENT), label)
    after(c, label)
    c.close()

for stray, what in ((b"NF O%s\r\n", "NF"), (b"MN\r\n", "MN")):
    label = "mc_delete_multi, stray %s" % what
    reset()
    c = db.connect()
    # the earlier run deletes absent keys; the victim deletes three that
    # exist (quiet: no reply), and after a stray MN three that do not
    # (an NF each, which the stray would hide)
    keys = PRESENT[:3] if what == "NF" else PRESENT[:3] + ABSENT[:3]
    r = armed(c, (DELM, (ABSENT[3:6],)), (DELM, (keys,)), stray, match=b"md ", label=label)
    check_count(r, 3, label)
    after(c, label)
    c.close()

# ---- the foreign table: scan on key = ANY, batched join, full scan -------------
reset()
SCAN = "SELECT key, value FROM spt WHERE key = ANY(%s::text[]) ORDER BY key"
label = "scan on key = ANY, stray VA with the earlier run's token"
c = db.connect()
r = armed(c, (SCAN, (PRESENT[:3],)), (SCAN, (ABSENT[:4],)), STRAY_VA, label=label)
check_reads(r, [], label)
after(c, label)
c.close()

label = "scan on key = ANY, stray MN"
c = db.connect()
r = armed(c, (SCAN, (PRESENT[:3],)), (SCAN, (PRESENT,)), b"MN\r\n", label=label)
check_reads(r, truth_rows(PRESENT), label)
after(c, label)
c.close()

JOIN = "SELECT f.key, f.value FROM outer_k o JOIN spt f ON f.key = o.k ORDER BY f.key"
set_outer(ABSENT[:4])
plan = "\n".join(r[0] for r in db.sql(admin, "EXPLAIN (COSTS OFF) " + JOIN))
t.ok("MemcachedBatchedJoin" in plan, "the join runs as the batched join", plan)
label = "batched join, stray VA with the earlier run's token"
c = db.connect()
r = armed(c, (SCAN, (PRESENT[:3],)), (JOIN,), STRAY_VA, label=label)
check_reads(r, [], label)
after(c, label)
c.close()

set_outer(PRESENT)
label = "batched join, stray MN"
c = db.connect()
r = armed(c, (SCAN, (PRESENT[:3],)), (JOIN,), b"MN\r\n", label=label)
check_reads(r, truth_rows(PRESENT), label)
after(c, label)
c.close()

FULL = "SELECT key, value FROM spt ORDER BY key"
ALL = [tuple(x) for x in db.sql(admin, "SELECT key, value FROM spd ORDER BY key")]
t.is_(sorted(k for k, _ in ALL), sorted(PRESENT), "the full scan's truth: every key set")
for stray, what in ((STRAY_VA, "VA with the earlier run's token"), (b"MN\r\n", "MN")):
    label = "full scan, stray %s" % what
    c = db.connect()
    r = armed(c, (FULL,), (FULL,), stray, label=label)
    check_reads(r, ALL, label)
    after(c, label)
    c.close()

# the audit's case: a full scan, then a multi-get whose reply a stray of
# the scan's leads
label = "mc_get_multi after a full scan, stray VA with the scan's token"
c = db.connect()
r = armed(c, (FULL,), (MULTI, (ABSENT[:4], "px")), STRAY_VA, label=label)
check_reads(r, [], label)
after(c, label)
c.close()

px.stop()
t.done()
