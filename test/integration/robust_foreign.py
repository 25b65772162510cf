"""robust_foreign: foreign-table scans and the batched join against hostile
servers, interrupts, real clients' values, hostile keys and roles.

- Hostile servers (hostile.py) under a scan (key = ANY) and the batched
  join: an endless EN stream, a value length past max_reply_size, a reply
  trickled a byte at a time, binary junk, replies whose opaque names
  another key (reversed) or no key: no wrong row, an end within a bound,
  and the connection discarded (the next statement connects anew).  A
  proxy that drops the connection after a read request, or sends a stray
  reply after a correct one: own rows or an error, the next statement in
  step.
- A cancel and a statement_timeout while replies are held back (mid-scan,
  mid-join): the next scan or join in the same session runs at once with
  its own rows, although the held-back replies reach the old socket later.
- Values written by real Dalli (Marshal, zlib over its threshold) and
  pylibmc (pickle, zlib), read through a foreign table by the plain scan,
  = ANY, the batched join, the nested loop and the full scan: text as the
  client wrote it, serialized objects refused as text (42804) and read as
  their bytes by a bytea column.
- Keys with spaces, CR, LF, control characters or over 250 bytes in
  key = / = ANY / the join's outer side / INSERT: the same outcome as
  mc_get / mc_set with that key, and a second key stays untouched.
- A role without USAGE on the server or SELECT on the table: 42501, and
  the error names no address and no password.
- INSERT and DELETE whose connection drops after the server got the
  request: an error, and the request executed once (not resent).
"""

import pickle
import subprocess
import threading
import time
import os

import pylibmc

import mcdb
import mcrig
from faultproxy import FaultProxy
from hostile import HostileProxy, HostileServer, run_bounded

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_robust_foreign")
admin = db.connect()
db.server(admin, "good", mc.addr)
KEYS = ["a", "b", "c"]
HERE = os.path.dirname(os.path.abspath(__file__))
DALLI = os.path.join(HERE, "..", "compat", "dalli_values.rb")

# the batched join's outer side: 40 rows, among them the keys asked for
db.sql(admin, "CREATE TABLE outer_k (k text)")


def set_outer(keys):
    db.sql(admin, "TRUNCATE outer_k")
    rows = list(keys) + ["filler%d" % i for i in range(40)]
    admin.cursor().executemany("INSERT INTO outer_k VALUES (%s)", [(k,) for k in rows])
    db.sql(admin, "ANALYZE outer_k")


def plan(c, q):
    return "\n".join(r[0] for r in db.sql(c, "EXPLAIN (COSTS OFF) " + q))


def attempt(c, q, args=None):
    """("ok", rows) or ("error", sqlstate, message)."""
    try:
        return ("ok", db.sql(c, q, args))
    except Exception as e:  # noqa: BLE001
        return ("error", getattr(e, "pgcode", None), (str(e).splitlines() or [""])[0])


def bytes_of(v):
    return bytes(v) if isinstance(v, memoryview) else v


set_outer(KEYS)

# ---- hostile servers under the scan and the batched join -------------------
SCAN = "SELECT key, value FROM fh WHERE key = ANY (ARRAY['a', 'b', 'c'])"
JOIN = "SELECT f.key, f.value FROM outer_k o JOIN fh f ON f.key = o.k"
for behaviour in ("endless_en", "huge_va", "trickle_hd", "garbage", "reorder", "wrong_opaque",
                  "hd_hits"):
    hs = HostileServer(behaviour).start()
    db.sql(admin, "DROP FOREIGN TABLE IF EXISTS fh")
    db.server(admin, "h", hs.addr, io_timeout="1s", connect_timeout="1s")
    db.sql(admin, "CREATE FOREIGN TABLE fh (key text, value text) SERVER h")
    if behaviour == "endless_en":
        t.ok("MemcachedBatchedJoin" in plan(admin, JOIN), "the join runs as the batched join",
             plan(admin, JOIN))
    for label, q in (("scan", SCAN), ("batched join", JOIN)):
        c = db.connect()
        o = run_bounded(c, q, bound=10, way_out=hs.stop, admin=admin)
        # the hostile servers' values are their keys; a row without its value is wrong too
        wrong = [r for r in (o.rows or []) if r[0] != r[1]]
        t.ok(not o.overran and o.elapsed < 5 and not wrong and (o.rows or o.pgcode),
             "%s, %s: no wrong row, ended in %.1f s (%s)"
             % (behaviour, label, o.elapsed, o.pgcode or "rows"), repr(o))
        accepted = hs.accepted
        o2 = run_bounded(c, q, bound=10, way_out=hs.stop, admin=admin)
        t.ok(hs.accepted > accepted and not o2.overran,
             "%s, %s: the connection is discarded (the next statement connects anew)"
             % (behaviour, label), "accepted %d -> %d" % (accepted, hs.accepted), repr(o2))
        c.close()
    hs.stop()
db.sql(admin, "DROP FOREIGN TABLE fh")
db.sql(admin, "DROP SERVER h")

# ---- a proxy that drops after a read request, or sends a stray reply -------
px = HostileProxy(mc.port).start()
db.server(admin, "px", px.addr, io_timeout="2s")
db.sql(admin, "CREATE FOREIGN TABLE fpx (key text, value text) SERVER px")
ALL = ["k%d" % i for i in range(1, 10)]
for k in ALL:
    db.sql(admin, "SELECT mc_set(%s, %s, server => 'good')", (k, "V" + k))
set_outer(ALL)


def scan_q(keys):
    return ("SELECT key, value FROM fpx WHERE key = ANY (ARRAY[%s]) ORDER BY key"
            % ",".join("'%s'" % k for k in keys))


def join_q(keys):
    return ("SELECT f.key, f.value FROM outer_k o JOIN fpx f ON f.key = o.k "
            "WHERE o.k IN (%s) ORDER BY f.key" % ",".join("'%s'" % k for k in keys))


def own(keys):
    return [(k, "V" + k) for k in sorted(keys)]


def good_or_error(r, keys):
    return r[0] == "error" or r[1] == own(keys)


t.ok("MemcachedBatchedJoin" in plan(admin, join_q(["k1", "k2", "k3"])),
     "the proxied join is batched", plan(admin, join_q(["k1", "k2", "k3"])))
for label, q in (("scan", scan_q), ("batched join", join_q)):
    c = db.connect()
    attempt(c, q(["k1", "k2", "k3"]))                 # a pooled socket
    px.drop_next = 1
    t0 = time.monotonic()
    r = attempt(c, q(["k1", "k2", "k3"]))
    px.drop_next = 0
    t.ok(good_or_error(r, ["k1", "k2", "k3"]) and time.monotonic() - t0 < 5,
         "%s, connection dropped after the request: its own rows or an error" % label, repr(r))
    t.is_(attempt(c, q(["k4", "k5"])), ("ok", own(["k4", "k5"])),
          "%s, after the drop: the next statement has its own rows" % label)
    # a stray that looks like the next statement's first hit
    px.stray = b"VA 3 O0\r\nVk9\r\n"
    px.stray_next = 1
    sent = px.strays_sent
    attempt(c, q(["k1", "k2", "k3"]))
    mcrig.wait_for(lambda: px.strays_sent > sent, 5, what="stray")
    time.sleep(0.1)
    accepted = px.accepted
    r = attempt(c, q(["k6", "k7"]))
    t.ok(good_or_error(r, ["k6", "k7"]), "%s, after a stray reply: own rows or an error" % label,
         repr(r))
    t.ok(px.accepted > accepted, "%s: the socket that held the stray is discarded" % label)
    t.is_(attempt(c, q(["k8"])), ("ok", own(["k8"])), "%s, after the stray: in step" % label)
    c.close()

# ---- INSERT and DELETE whose reply is lost ---------------------------------
c = db.connect()
db.sql(c, "SELECT count(*) FROM fpx WHERE key = 'k1'")       # a pooled socket
sets = int(mc.stats()["cmd_set"])
px.drop_match = b"ms "
px.drop_next = 1
r = attempt(c, "INSERT INTO fpx VALUES ('ins:1', 'inserted')")
px.drop_next = 0
t.ok(r[0] == "error", "INSERT whose reply is lost: an error, not success", repr(r))
t.is_((mcrig.mc_raw_get(mc.port, "ins:1"), int(mc.stats()["cmd_set"]) - sets),
      ("inserted", 1), "INSERT whose reply is lost: executed once, not resent")
db.sql(admin, "SELECT mc_set('del:1', 'x', server => 'good')")
st = mc.stats()
deletes = int(st["delete_hits"]) + int(st["delete_misses"])
px.drop_match = b"md "
px.drop_next = 1
r = attempt(c, "DELETE FROM fpx WHERE key = 'del:1'")
px.drop_next = 0
px.drop_match = None
st = mc.stats()
t.ok(r[0] == "error", "DELETE whose reply is lost: an error, not DELETE 0 or 1", repr(r))
t.is_((mcrig.mc_raw_get(mc.port, "del:1"), int(st["delete_hits"]) + int(st["delete_misses"]) - deletes),
      (None, 1), "DELETE whose reply is lost: executed once, not resent")
t.is_(attempt(c, scan_q(["k2"])), ("ok", own(["k2"])), "after both: the session reads in step")
c.close()
px.stop()

# ---- cancel and statement_timeout mid-scan and mid-join ---------------------
fp = FaultProxy(mc.port).start()
db.server(admin, "fp", fp.addr, io_timeout="30s")
db.sql(admin, "CREATE FOREIGN TABLE ffp (key text, value text) SERVER fp")
FSCAN = "SELECT key, value FROM ffp WHERE key = ANY (ARRAY[%s]) ORDER BY key"
# the join's keys are those of outer_k, set before each statement (with the fillers)
FJOIN = "SELECT f.key, f.value FROM outer_k o JOIN ffp f ON f.key = o.k ORDER BY f.key -- %s"
t.ok("MemcachedBatchedJoin" in plan(admin, FJOIN % ""), "the held-back join is batched",
     plan(admin, FJOIN % ""))


def keys_for(q, keys):
    """The statement q for keys: the scan names them, the join reads outer_k."""
    if q is FJOIN:
        set_outer(keys)
    return q % ",".join("'%s'" % k for k in keys)


for label, q in (("scan", FSCAN), ("batched join", FJOIN)):
    for how in ("statement_timeout", "cancel"):
        c = db.connect()
        fired = []

        def during(elapsed, c=c, fired=fired, how=how):
            if how == "cancel" and elapsed > 0.5 and not fired:
                fired.append(1)
                c.cancel()
            return False

        attempt(c, keys_for(q, ["k1"]))             # a pooled socket
        if how == "statement_timeout":
            db.sql(c, "SET statement_timeout = '500ms'")
        fp.mode, fp.delay = "delay", 2.0
        o = run_bounded(c, keys_for(q, ["k1", "k2", "k3"]), bound=10, admin=admin, during=during,
                        way_out=lambda: setattr(fp, "mode", "pass"))
        t.ok(o.pgcode == "57014" and o.elapsed < 3,
             "%s, %s while replies are held back: 57014 in %.1f s" % (label, how, o.elapsed), repr(o))
        fp.mode = "pass"
        db.sql(c, "RESET statement_timeout")
        sql = keys_for(q, ["k4", "k5", "k6"])
        t0 = time.monotonic()
        r = attempt(c, sql)
        took = time.monotonic() - t0
        t.ok(r == ("ok", own(["k4", "k5", "k6"])) and took < 1.5,
             "%s, after the %s: the next statement has its own rows at once (%.2f s)"
             % (label, how, took), repr(r))
        time.sleep(2.2)                               # the old replies arrive
        t.is_(attempt(c, keys_for(q, ["k7", "k8"])), ("ok", own(["k7", "k8"])),
              "%s, after the %s: still in step once the held-back replies came" % (label, how))
        c.close()
fp.stop()

# ---- values written by Dalli and pylibmc, through every path --------------
PATHS = ("plain", "any", "batched join", "nested loop", "full scan")


def read_paths(table, key):
    """The value column of `key` in `table`, per path: ("ok", value or
    None) or ("error", sqlstate)."""
    set_outer([key])
    out = {}
    c = db.connect()
    queries = {
        "plain": ("SELECT value FROM %s WHERE key = %%s" % table, (key,)),
        "any": ("SELECT value FROM %s WHERE key = ANY (%%s::text[])" % table, ([key, "nokey"],)),
        "batched join": ("SELECT f.value FROM outer_k o JOIN %s f ON f.key = o.k" % table, None),
        "nested loop": ("SELECT f.value FROM outer_k o JOIN %s f ON f.key = o.k" % table, None),
        "full scan": ("SELECT value FROM %s WHERE key || '' = %%s" % table, (key,)),
    }
    for p in PATHS:
        q, args = queries[p]
        db.sql(c, "SET mcfdw.enable_batched_join = %s" % ("off" if p == "nested loop" else "on"))
        if p in ("batched join", "nested loop"):
            shown = plan(c, q)
            if ("MemcachedBatchedJoin" in shown) != (p == "batched join"):
                out[p] = ("plan", shown)
                continue
        r = attempt(c, q, args)
        if r[0] == "ok":
            out[p] = ("ok", bytes_of(r[1][0][0]) if r[1] else None)
        else:
            out[p] = ("error", r[1])
    c.close()
    return out


def check_paths(label, table, key, want):
    got = read_paths(table, key)
    bad = {p: v for p, v in got.items() if v != want}
    t.ok(not bad, "%s: every path (%s) gives %s" % (label, ", ".join(PATHS),
                                                   want[0] if want[0] == "ok" else want),
         "differ: %r" % (bad,))


def dalli(mode, pairs, *extra):
    r = subprocess.run(["ruby", DALLI, mode, "--namespace", "app"] + list(extra) + [mc.addr],
                       input="".join("%s %s\n" % (k.encode().hex(), v.hex()) for k, v in pairs),
                       capture_output=True, text=True, timeout=120, check=True)
    return r.stdout


db.server(admin, "dalli", mc.addr, key_prefix="app:", compression="zlib",
          compressed_flag="2", serialized_flag="1", allow_full_scan="true")
db.sql(admin, "CREATE FOREIGN TABLE dz (key text, value text, flags integer) SERVER dalli "
              "OPTIONS (key_prefix 'dz:', allow_full_scan 'true')")
db.sql(admin, "CREATE FOREIGN TABLE dm (key text, value text) SERVER dalli "
              "OPTIONS (key_prefix 'dm:', allow_full_scan 'true')")
db.sql(admin, "CREATE FOREIGN TABLE dmb (key text, value bytea) SERVER dalli "
              "OPTIONS (key_prefix 'dm:', allow_full_scan 'true')")
small = "caf\u00e9 cr\u00e8me"
big = "\u00e9t\u00e9 row cache " * 500
dalli("write", [("dz:small", small.encode()), ("dz:big", big.encode())], "--min", "100")
flags = dict(db.sql(admin, "SELECT k, (mc_get_raw('app:' || k, 'good')).flags FROM "
                           "unnest(ARRAY['dz:small', 'dz:big']) k"))
t.is_(flags, {"dz:small": 0, "dz:big": 2}, "Dalli compressed the big value only")
check_paths("Dalli, small text", "dz", "small", ("ok", small))
check_paths("Dalli, compressed text", "dz", "big", ("ok", big))
dumps = {}
for line in dalli("write_marshal", [("dm:s", small.encode()), ("dm:z", big.encode())]).split("\n"):
    if line:
        k, v = line.split(" ")
        dumps[bytes.fromhex(k).decode()] = bytes.fromhex(v)
flags = dict(db.sql(admin, "SELECT k, (mc_get_raw('app:' || k, 'good')).flags FROM "
                           "unnest(ARRAY['dm:s', 'dm:z']) k"))
t.is_(flags, {"dm:s": 1, "dm:z": 3}, "Dalli's Marshal dumps: flag 1, and 3 compressed")
t.is_(attempt(admin, "SELECT mc_get('dm:s', 'dalli')")[1], "42804", "mc_get refuses the Marshal dump")
check_paths("Dalli Marshal dump, text column", "dm", "s", ("error", "42804"))
check_paths("Dalli compressed Marshal dump, text column", "dm", "z", ("error", "42804"))
check_paths("Dalli Marshal dump, bytea column", "dmb", "s", ("ok", dumps["dm:s"]))
check_paths("Dalli compressed Marshal dump, bytea column", "dmb", "z", ("ok", dumps["dm:z"]))

db.server(admin, "py", mc.addr, compression="zlib", compressed_flag="8", serialized_flag="1",
          allow_full_scan="true")
db.sql(admin, "CREATE FOREIGN TABLE pz (key text, value text) SERVER py "
              "OPTIONS (key_prefix 'pz:', allow_full_scan 'true')")
db.sql(admin, "CREATE FOREIGN TABLE pmt (key text, value jsonb) SERVER py "
              "OPTIONS (key_prefix 'pm:', allow_full_scan 'true')")
db.sql(admin, "CREATE FOREIGN TABLE pmb (key text, value bytea) SERVER py "
              "OPTIONS (key_prefix 'pm:', allow_full_scan 'true')")
pl = pylibmc.Client([mc.addr])
pl.set("pz:small", small, min_compress_len=100)
pl.set("pz:big", big, min_compress_len=100)
obj_small = {"a": [1, 2]}
obj_big = {"x": "y" * 2000}
pl.set("pm:s", obj_small, min_compress_len=100)
pl.set("pm:z", obj_big, min_compress_len=100)
flags = dict(db.sql(admin, "SELECT k, (mc_get_raw(k, 'good')).flags FROM "
                           "unnest(ARRAY['pz:small', 'pz:big', 'pm:s', 'pm:z']) k"))
t.is_(flags, {"pz:small": 16, "pz:big": 24, "pm:s": 1, "pm:z": 9},
      "pylibmc: str 16, compressed 8, pickle 1")
check_paths("pylibmc, small str", "pz", "small", ("ok", small))
check_paths("pylibmc, compressed str", "pz", "big", ("ok", big))
check_paths("pylibmc pickle, jsonb column", "pmt", "s", ("error", "42804"))
check_paths("pylibmc compressed pickle, jsonb column", "pmt", "z", ("error", "42804"))
for k, obj in (("s", obj_small), ("z", obj_big)):
    got = read_paths("pmb", k)
    bad = {p: v for p, v in got.items()
           if v[0] != "ok" or v[1] is None or pickle.loads(v[1]) != obj}
    t.ok(not bad, "pylibmc pickle %s, bytea column: every path gives the pickle's bytes" % k,
         "differ: %r" % (bad,))

# ---- hostile keys: the same outcome as mc_get / mc_set, no injection -------
db.sql(admin, "CREATE FOREIGN TABLE fk (key text, value text) SERVER good")
db.sql(admin, "SELECT mc_set('victim', 'safe', server => 'good')")
BAD = ["a b", "a\r\nms victim 5 T0\r\nowned", "a\nmd victim q", "a\rmn", "ctl\x01\x7f",
       "tab\there", "x" * 251, "y" * 300 + " \r\n", "\u00e9" * 130]


def outcome(r):
    if r[0] == "error":
        return ("error", r[1])
    return ("ok", r[1][0][0] if r[1] else None)


for i, key in enumerate(BAD):
    name = repr(key if len(key) < 20 else key[:12] + "...(%d)" % len(key))
    value = "val%d" % i
    want_set = outcome(attempt(admin, "SELECT mc_set(%s, %s, server => 'good')", (key, value)))
    want_get = outcome(attempt(admin, "SELECT mc_get(%s, 'good')", (key,)))
    db.sql(admin, "SELECT mc_delete(%s, server => 'good')", (key,)) if want_set[0] == "ok" else None
    ins = attempt(admin, "INSERT INTO fk VALUES (%s, %s)", (key, value))
    ins = ("ok", True) if ins[0] == "ok" else ("error", ins[1])
    after = outcome(attempt(admin, "SELECT mc_get(%s, 'good')", (key,)))
    t.ok(ins == want_set and after == want_get,
         "key %s: INSERT as mc_set (%s), and mc_get reads what it stored" % (name, ins[0]),
         "INSERT %r, mc_set %r; mc_get after INSERT %r, after mc_set %r"
         % (ins, want_set, after, want_get))
    set_outer([key])
    got = {
        "key =": outcome(attempt(admin, "SELECT value FROM fk WHERE key = %s", (key,))),
        "= ANY": outcome(attempt(admin, "SELECT value FROM fk WHERE key = ANY (%s::text[])",
                                 ([key, "nokey"],))),
        "join outer": outcome(attempt(admin, "SELECT f.value FROM outer_k o JOIN fk f ON f.key = o.k")),
    }
    bad = {p: v for p, v in got.items() if v != want_get}
    t.ok(not bad, "key %s: key =, = ANY and the join's outer side as mc_get (%s)"
         % (name, want_get[0] if want_get[0] == "ok" else want_get), "differ: %r" % (bad,))
    db.sql(admin, "SELECT mc_delete(%s, server => 'good')", (key,)) if want_get[0] == "ok" else None
t.is_(mcrig.mc_raw_get(mc.port, "victim"), "safe", "the second key is untouched by every hostile key")
t.ok(mcrig.mc_raw_get(mc.port, "owned") is None and mcrig.mc_raw_get(mc.port, "a") is None,
     "no key was written from inside another")

# ---- roles: USAGE on the server, SELECT on the table ----------------------
hide = HostileServer("reorder").start()          # an address that must not leak
db.server(admin, "sec", hide.addr, allow_full_scan="true")
db.sql(admin, "CREATE USER MAPPING FOR PUBLIC SERVER sec OPTIONS (username 'app', password 'hunter2secret')")
db.sql(admin, "CREATE FOREIGN TABLE fsec (key text, value text) SERVER sec "
              "OPTIONS (allow_full_scan 'true')")
db.sql(admin, "DROP ROLE IF EXISTS rf_nousage")
db.sql(admin, "DROP ROLE IF EXISTS rf_noselect")
db.sql(admin, "CREATE ROLE rf_nousage")
db.sql(admin, "CREATE ROLE rf_noselect")
db.sql(admin, "REVOKE USAGE ON FOREIGN SERVER sec FROM PUBLIC")
db.sql(admin, "GRANT SELECT, INSERT, DELETE ON fsec TO rf_nousage")
db.sql(admin, "GRANT USAGE ON FOREIGN SERVER sec TO rf_noselect")
db.sql(admin, "GRANT SELECT ON outer_k TO rf_nousage, rf_noselect")
set_outer(["a"])
secrets = ("hunter2secret", str(hide.port), "127.0.0.1")
for role, label in (("rf_nousage", "no USAGE on the server"), ("rf_noselect", "no SELECT on the table")):
    for what, q in (("scan", "SELECT * FROM fsec WHERE key = 'a'"),
                    ("= ANY", "SELECT * FROM fsec WHERE key = ANY (ARRAY['a', 'b'])"),
                    ("batched join", "SELECT f.value FROM outer_k o JOIN fsec f ON f.key = o.k"),
                    ("full scan", "SELECT * FROM fsec"),
                    ("INSERT", "INSERT INTO fsec VALUES ('a', 'b')"),
                    ("DELETE", "DELETE FROM fsec WHERE key = 'a'")):
        c = db.connect()
        db.sql(c, "SET ROLE %s" % role)
        accepted = hide.accepted
        try:
            db.sql(c, q)
            err, code = "", None
        except Exception as e:  # noqa: BLE001
            err, code = str(e), getattr(e, "pgcode", None)
        leaked = [s for s in secrets if s in err]
        t.ok(code == "42501" and not leaked and hide.accepted == accepted,
             "%s, %s: 42501 before any connection, naming no address or secret" % (label, what),
             "sqlstate %r, leaked %r, connections %d" % (code, leaked, hide.accepted - accepted),
             err)
        c.close()
hide.stop()

admin.close()
t.done()
