"""unix_socket: memcacheds on Unix domain sockets (memcached -s) in a
server's "servers" option, as "/path" or "/path:weight".

- One socket server: get, set, multi-get, batch writes and deletes, a
  foreign table's scan (by key and full) and INSERT, on-commit deletes, an ASCII login
  (memcached -Y); mc_servers and mc_server_stats show the path as the host
  (and instance) and a NULL port.
- Pooling: one socket per backend, reused across calls and statements
  (memcached's total_connections), replaced after a restart.
- Rings route keys as the real clients do: two socket instances and one
  TCP instance as Ruby Dalli (which names a socket server by its path,
  weights after a colon), three socket instances as pylibmc on
  libmemcached's ketama (which names one "path:0", and refuses to mix
  sockets with TCP); each side reads every key the other wrote.
- A killed socket memcached: with failover on its keys go to the others,
  with on_failure 'miss' (failover off) reads are misses; mc_servers shows
  it dead.
- A missing socket path and one the PostgreSQL server may not write to
  fail at once, with their own messages and errcodes; a socket peer that
  never answers times out at io_timeout and is cancelled mid-wait.
- TLS over a socket is refused at CREATE SERVER; malformed socket entries
  are refused with the entry quoted.
"""

import os
import socket
import threading
import time

import pylibmc

import clientkeys
import mcdb
import mcrig

t = mcrig.TAP()
sd = mcrig.socket_dir()
a = mcrig.start_memcached("-t", "1", path=os.path.join(sd, "a.sock"))
b = mcrig.start_memcached("-t", "1", path=os.path.join(sd, "b.sock"))
tcp = mcrig.start_memcached("-t", "1")
db = mcdb.Database("mcfdw_it_unix_socket")
c = db.connect()


def attempt(conn, query, args=None):
    """("ok", rows, seconds) or ("error", primary | detail | hint, sqlstate, seconds)."""
    t0 = time.monotonic()
    try:
        rows = db.sql(conn, query, args)
        return ("ok", rows, time.monotonic() - t0)
    except Exception as e:      # psycopg2.Error
        d = getattr(e, "diag", None)
        text = " | ".join(x for x in (d and d.message_primary, d and d.message_detail,
                                      d and d.message_hint) if x)
        return ("error", text or str(e), getattr(e, "pgcode", None), time.monotonic() - t0)


class StatsConn:
    """One socket kept open for `stats`, so reading the counters does not
    itself open connections."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(5)
        self.s.connect(path)

    def get(self, name):
        self.s.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            buf += self.s.recv(65536)
        for line in buf.decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == name:
                return int(parts[2])
        raise KeyError(name)


# ---------------------------------------------------------------- one socket
r = attempt(c, "CREATE SERVER s1 FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (a.path,))
t.ok(r[0] == "ok", "CREATE SERVER accepts a socket path", r)

r = attempt(c, "SELECT mc_set('u1', 'one', server => 's1'), mc_get('u1', server => 's1')")
t.is_(r[1] if r[0] == "ok" else r, [(True, "one")], "mc_set and mc_get through a socket")
t.is_(mcrig.mc_raw_get(a.path, "u1"), "one", "the value is in the socket's memcached")

r = attempt(c, "SELECT mc_set_multi(ARRAY['m1','m2','m3'], ARRAY['x1','x2','x3'], server => 's1')")
t.is_(r[1] if r[0] == "ok" else r, [(3,)], "mc_set_multi (batch write) through a socket")
r = attempt(c, "SELECT key, value FROM mc_get_multi(ARRAY['m1','m2','m3','nope'], 's1') ORDER BY key")
t.is_(r[1] if r[0] == "ok" else r, [("m1", "x1"), ("m2", "x2"), ("m3", "x3")],
      "mc_get_multi through a socket")
r = attempt(c, "SELECT mc_delete_multi(ARRAY['m1','m2'], server => 's1')")
t.is_(r[1] if r[0] == "ok" else r, [(2,)], "mc_delete_multi through a socket")

r = attempt(c, "CREATE FOREIGN TABLE kv (key text, value text) SERVER s1 OPTIONS (key_prefix 'kv:')")
r = attempt(c, "INSERT INTO kv VALUES ('f1', 'v1'), ('f2', 'v2'), ('f3', 'v3')")
t.ok(r[0] == "ok", "INSERT into a foreign table of a socket server", r)
r = attempt(c, "SELECT key, value FROM kv WHERE key IN ('f1', 'f3', 'f9') ORDER BY key")
t.is_(r[1] if r[0] == "ok" else r, [("f1", "v1"), ("f3", "v3")],
      "a foreign table's scan through a socket")
t.is_(mcrig.mc_raw_get(a.path, "kv:f2"), "v2", "the row is in the socket's memcached")

c.autocommit = False
r = attempt(c, "SELECT mc_delete_on_commit('u1', 's1')")
c.commit()
c.autocommit = True
t.is_(mcrig.mc_raw_get(a.path, "u1"), None, "an on-commit delete through a socket")

rows = db.sql(c, "SELECT host, port, weight, state FROM mc_servers WHERE server = 's1'")
t.is_(rows, [(a.path, None, 1, "connected")], "mc_servers: the host is the path, the port NULL")
rows = db.sql(c, "SELECT instance, host, port, error IS NULL, curr_connections > 0 "
                 "FROM mc_server_stats('s1')")
t.is_(rows, [(a.path, a.path, None, True, True)],
      "mc_server_stats: the instance and host are the path, the port NULL")
rows = db.sql(c, "SELECT instance, count(*) > 10 FROM mc_stats('s1') GROUP BY 1")
t.is_(rows, [(a.path, True)], "mc_stats through a socket")

# ------------------------------------------------------------------ pooling
st = StatsConn(a.path)
c2 = db.connect()
before = st.get("total_connections")
db.sql(c2, "SELECT count(*) FILTER (WHERE mc_set('p' || i, 'v', server => 's1')) "
           "FROM generate_series(1, 300) i")
for _ in range(5):
    db.sql(c2, "SELECT mc_get('p1', server => 's1')")
db.sql(c2, "SELECT count(*) FROM mc_get_multi(ARRAY['p1','p2','p3'], 's1')")
db.sql(c2, "SELECT mc_set_multi(ARRAY['p1','p2'], ARRAY['a','b'], server => 's1')")
t.is_(st.get("total_connections") - before, 1,
      "one socket serves 300 calls, five statements, a multi-get and a batch")
c2.close()

# a pooled socket whose memcached restarted is replaced on first use
db.sql(c, "SELECT mc_get('p1', server => 's1')")
a.restart()
r = attempt(c, "SELECT mc_set('after', 'restart', server => 's1'), mc_get('after', server => 's1')")
t.is_(r[1] if r[0] == "ok" else r, [(True, "restart")],
      "after the socket memcached restarted, the next call reconnects")

# --------------------------------------------------------------- login (-Y)
authfile = os.path.join(sd, "authfile")
with open(authfile, "w") as f:
    f.write("alice:pw-alice\n")
os.chmod(authfile, 0o644)
auth = mcrig.start_memcached("-Y", authfile, path=os.path.join(sd, "auth.sock"))
db.sql(c, "CREATE SERVER sauth FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (auth.path,))
r = attempt(c, "SELECT mc_get('x', server => 'sauth')")
t.ok(r[0] == "error" and r[2] == "28000" and "requires a login" in r[1],
     "a -Y socket memcached without a user mapping: 28000", r)
db.sql(c, "CREATE USER MAPPING FOR CURRENT_USER SERVER sauth "
          "OPTIONS (username 'alice', password 'pw-alice')")
c3 = db.connect()
r = attempt(c3, "SELECT mc_set('au', 'logged', server => 'sauth'), mc_get('au', server => 'sauth')")
t.is_(r[1] if r[0] == "ok" else r, [(True, "logged")], "an ASCII login over a socket")
c3.close()

# ------------------------------------------------------------------- rings
NKEYS = 600
specs = [a.path, b.path, tcp.addr]
keys = clientkeys.gen_keys(7, NKEYS)


def mcfdw_read(name):
    cur = c.cursor()
    cur.execute("SELECT key, value FROM mc_get_multi(%s::text[], %s)",
                ([k.decode() for k in keys], name))
    return {k.encode(): v for k, v in cur.fetchall()}


def mcfdw_write(name, tag):
    return db.value(c, "SELECT count(*) FILTER (WHERE mc_set(k, %s || k, server => %s)) "
                       "FROM unnest(%s::text[]) k", (tag, name, [k.decode() for k in keys]))


def spread(insts):
    """How many keys each instance holds."""
    return [int(mcrig.stats(m.port)["curr_items"]) for m in insts]


def ring_case(label, dist, insts, specs_str, client, behaviors=None):
    behaviors = behaviors if behaviors is not None else {"ketama": True}
    db.server(c, "ring", ",".join(specs_str), distribution=dist)
    clientkeys.flush(insts)
    if client == "dalli":
        stored = int(clientkeys.dalli("write", specs_str, keys))
        want = {k: "dalli:" + k.hex() for k in keys}
    else:
        cl = pylibmc.Client(specs_str, behaviors=behaviors)
        stored = sum(1 for k in keys if cl.set(k, b"py:" + k))
        want = {k: "py:" + k.decode() for k in keys}
    sp = spread(insts)
    got = mcfdw_read("ring")
    bad = [k for k in keys if got.get(k) != want[k]]
    t.ok(stored == NKEYS and min(sp) > 0 and not bad,
         "%s: mcfdw reads all %d keys the client wrote" % (label, NKEYS),
         "stored %d, spread %r, missing or wrong %d, e.g. %r" % (stored, sp, len(bad), bad[:3]))

    clientkeys.flush(insts)
    n = mcfdw_write("ring", "pg:")
    if client == "dalli":
        found = {}
        for line in clientkeys.dalli("read", specs_str, keys).splitlines():
            hx, v = line.split("\t", 1)
            found[bytes.fromhex(hx)] = v
    else:
        cl = pylibmc.Client(specs_str, behaviors=behaviors)
        found = {k: v.decode() for k, v in cl.get_multi(keys).items()}
    bad = [k for k in keys if found.get(k) != "pg:" + k.decode()]
    t.ok(n == NKEYS and not bad, "%s: the client reads all %d keys mcfdw wrote" % (label, NKEYS),
         "stored %d, missing or wrong %d, e.g. %r" % (n, len(bad), bad[:3]))


# libmemcached refuses a list mixing sockets and TCP ("can't mix transport
# types"): its ring is of sockets only, and a Unix socket server has no
# weight in pylibmc's server strings
c3s = mcrig.start_memcached("-t", "1", path=os.path.join(sd, "c.sock"))
for label, dist, insts, sp, client, *beh in [
        ("dalli, 2 sockets + 1 TCP", "dalli", [a, b, tcp], specs, "dalli"),
        ("dalli, sockets weighted 3:1 + TCP", "dalli", [a, b, tcp],
         [a.path + ":3", b.path, tcp.addr], "dalli"),
        ("pylibmc ketama, 3 sockets", "ketama", [a, b, c3s], [a.path, b.path, c3s.path],
         "pylibmc"),
        ("pylibmc ketama_weighted, 3 sockets", "ketama_weighted", [a, b, c3s],
         [a.path, b.path, c3s.path], "pylibmc", {"ketama_weighted": True}),
        ("pylibmc modula (default), 3 sockets", "modula", [a, b, c3s],
         [a.path, b.path, c3s.path], "pylibmc", {})]:
    try:
        ring_case(label, dist, insts, sp, client, *beh)
    except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
        t.ok(False, label, repr(e))
db.sql(c, "DROP SERVER ring")

# ------------------------------------------------------- failover, on_failure
fa = mcrig.start_memcached(path=os.path.join(sd, "fa.sock"))
fb = mcrig.start_memcached(path=os.path.join(sd, "fb.sock"))
db.server(c, "fo", "%s,%s" % (fa.path, fb.path), distribution="dalli", failover="on",
          on_failure="miss", failure_limit=1, retry_delay="60s")
db.server(c, "miss", "%s,%s" % (fa.path, fb.path), distribution="dalli", failover="off",
          on_failure="miss", failure_limit=1, retry_delay="60s")
db.server(c, "fb_only", fb.path)
fkeys = ["fo:%d" % i for i in range(200)]
db.sql(c, "SELECT count(mc_set(k, 'v:' || k, server => 'fo')) FROM unnest(%s::text[]) k", (fkeys,))
on_b = sorted(r[0] for r in db.sql(c, "SELECT key FROM mc_get_multi(%s::text[], 'fb_only')",
                                   (fkeys,)))
t.ok(20 < len(on_b) < 180, "the socket instance fb holds a share of the keys (%d)" % len(on_b))
fb.stop()
kb = on_b[0]
r = attempt(c, "SELECT mc_get(%s, server => 'miss')", (kb,))
t.is_(r[1] if r[0] == "ok" else r, [(None,)],
      "on_failure 'miss': a key of the killed socket memcached is a miss")
r = attempt(c, "SELECT mc_set(%s, 'moved', server => 'fo'), mc_get(%s, server => 'fo')", (kb, kb))
t.is_(r[1] if r[0] == "ok" else r, [(True, "moved")],
      "failover on: a key of the killed socket memcached goes to the other one")
t.is_(mcrig.mc_raw_get(fa.path, kb), "moved", "... which holds it")
r = attempt(c, "SELECT count(*) FROM mc_get_multi(%s::text[], 'fo')", (fkeys,))
t.is_(r[1] if r[0] == "ok" else r, [(len(fkeys) - len(on_b) + 1,)],
      "failover on: a multi-get passes over the killed socket memcached")
rows = db.sql(c, "SELECT host, port, state, last_error FROM mc_servers WHERE server = 'fo' "
                 "ORDER BY instance")
t.ok(rows[1][0] == fb.path and rows[1][1] is None and rows[1][2] == "dead"
     and "nothing listens on the Unix socket" in (rows[1][3] or ""),
     "mc_servers shows the killed socket dead, with its cause", rows)

# ----------------------------------------------- missing, forbidden, silent
missing = os.path.join(sd, "missing.sock")
db.server(c, "nosock", missing)
r = attempt(c, "SELECT mc_get('x', server => 'nosock')")
t.ok(r[0] == "error" and r[2] == "08001" and "does not exist" in r[1] and missing in r[1]
     and r[3] < 1.0, "a missing socket: 08001 at once, naming the path", r)

if os.geteuid() == 0:
    # the PostgreSQL server runs as postgres: a socket only root may write
    closed = os.path.join(sd, "closed")
    os.mkdir(closed, 0o700)
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(os.path.join(closed, "mc.sock"))
    ls.listen(8)
    db.server(c, "denied", os.path.join(closed, "mc.sock"))
    r = attempt(c, "SELECT mc_get('x', server => 'denied')")
    t.ok(r[0] == "error" and r[2] == "42501" and "permission denied" in r[1] and r[3] < 1.0,
         "a socket the server may not reach: 42501 at once, saying what to change", r)
    ls.close()
else:
    t.skip("permission denied on a socket", "the test does not run as root")


class Silent:
    """A Unix socket listener that accepts and never answers."""

    def __init__(self, path):
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(path)
        os.chmod(path, 0o777)
        self.ls.listen(16)
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            self.held.append(s)


silent = Silent(os.path.join(sd, "silent.sock"))
db.server(c, "silent", os.path.join(sd, "silent.sock"), io_timeout="300ms")
r = attempt(c, "SELECT mc_get('x', server => 'silent')")
t.ok(r[0] == "error" and "timed out" in r[1] and 0.25 < r[3] < 2.0,
     "a silent socket peer times out at io_timeout", r)

db.server(c, "silent_long", os.path.join(sd, "silent.sock"), io_timeout="60s")
c4 = db.connect()
pid = db.value(c4, "SELECT pg_backend_pid()")
threading.Timer(0.5, lambda: db.sql(c, "SELECT pg_cancel_backend(%s)", (pid,))).start()
r = attempt(c4, "SELECT mc_get('x', server => 'silent_long')")
t.ok(r[0] == "error" and r[2] == "57014" and r[3] < 3.0,
     "a wait on a silent socket peer is cancelled", r)
r = attempt(c4, "SELECT mc_get('u1', server => 's1') IS NULL")
t.ok(r[0] == "ok", "the backend goes on after the cancel", r)
c4.close()

# ------------------------------------------------------- options refused
r = attempt(c, "CREATE SERVER stls FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s, tls 'require')",
            (a.path,))
t.ok(r[0] == "error" and "cannot be used with a Unix socket" in r[1],
     "TLS over a socket is refused", r)
for bad, why in [(a.path + ":0", "weight"), ("/tmp/a b.sock", "space"),
                 ("/tmp/mc;rm.sock", "letters, digits"), ("/tmp/sockdir/", "directory"),
                 ("/" + "x" * 120, "at most 107"), (a.path + "," + a.path, "listed twice")]:
    r = attempt(c, "CREATE SERVER sbad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (bad,))
    t.ok(r[0] == "error" and r[2] == "HV024" and why in r[1],
         "servers %r refused (%s)" % (bad[:40], why), r)

# a full scan lists the socket memcached's keys (lru_crawler metadump)
db.sql(c, "ALTER SERVER s1 OPTIONS (ADD allow_full_scan 'on')")
db.sql(c, "CREATE FOREIGN TABLE kvall (key text, value text) SERVER s1 "
          "OPTIONS (key_prefix 'kv:', allow_full_scan 'true')")
db.sql(c, "INSERT INTO kvall VALUES ('f1', 'v1'), ('f2', 'v2'), ('f3', 'v3')")   # the rings flushed a
r = attempt(c, "SELECT key, value FROM kvall ORDER BY key")
t.is_(r[1] if r[0] == "ok" else r, [("f1", "v1"), ("f2", "v2"), ("f3", "v3")],
      "a full scan of a foreign table through a socket")

# the socket memcached that served the first calls is still fine
r = attempt(c, "SELECT mc_set('end', 'ok', server => 's1'), mc_get('end', server => 's1')")
t.is_(r[1] if r[0] == "ok" else r, [(True, "ok")], "the socket server still answers")
t.done()
