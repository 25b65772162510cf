"""robust_connect: the ways a connect fails are connection failures, with
codes that match their messages (issue 9, items 5a, 5c, 5d).

- memcached at its connection limit (-c) answers "ERROR Too many open
  connections" and closes: a refused connect (08001), counted in
  mc_servers, marked dead after failure_limit, failed over with failover on
  (never HV000 "reported an error").
- A connect that times out says "could not connect" and has the SQLSTATE of
  the other connect failures (08001), as a refused connect does.
- Host names are looked up without blocking the backend: a name resolves
  (localhost), an unknown one is a connect failure (08001) that says so, a
  numeric address needs no lookup."""

import socket

import mcdb
import mcrig
from hostile import HostileServer, SynBlackhole

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_robust_connect")
c = db.connect()


def attempt(sql, args=None, conn=None):
    try:
        return ("ok", db.value(conn or c, sql, args), None)
    except Exception as e:  # noqa: BLE001
        return ("error", " ".join(str(e).splitlines()), getattr(e, "pgcode", None))


# ---- memcached at its connection limit ------------------------------------
lim = mcrig.start_memcached("-c", "32", "-t", "1")
ok_mc = mcrig.start_memcached()
hogs = []
r = b""
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", lim.port), timeout=2)
    s.sendall(b"version\r\n")
    r = s.recv(100)
    hogs.append(s)
    if r.startswith(b"ERROR Too many open connections"):
        break
t.ok(r.startswith(b"ERROR Too many open connections"),
     "memcached -c 32 reaches its limit after %d connections" % len(hogs), repr(r))

for fn, sql in (("mc_get", "SELECT mc_get('x', server => 'lim')"),
                ("mc_incr", "SELECT mc_incr('x', 1, server => 'lim')")):
    db.server(c, "lim", lim.addr, failure_limit=2, retry_delay="60s")
    r1 = attempt(sql)
    t.is_((r1[0], r1[2]), ("error", "08001"),
          "%s: a connection refused at the limit is a failed connect (08001)" % fn)
    t.ok("could not connect" in r1[1] and "too many open connections" in r1[1],
         "%s: and says so" % fn, repr(r1))
    t.ok("may or may not" not in r1[1], "%s: the request was certainly not executed" % fn, repr(r1))
    row = db.sql(c, "SELECT failures, last_error FROM mc_servers WHERE server = 'lim'")
    t.ok(row and row[0][0] == 1 and "too many open connections" in (row[0][1] or ""),
         "%s: the failure is counted in mc_servers" % fn, repr(row))
    attempt(sql)
    row = db.sql(c, "SELECT state FROM mc_servers WHERE server = 'lim'")
    t.is_(row[0][0] if row else None, "dead", "%s: after failure_limit such failures the instance is dead" % fn)


# a fake server that always refuses: every connect is refused the same way
ref = HostileServer("conn_limit").start()
db.server(c, "ref", ref.addr, failure_limit=100)
r1 = attempt("SELECT mc_set('k', 'v', server => 'ref')")
t.is_((r1[0], r1[2]), ("error", "08001"), "a refusing fake server: mc_set fails with 08001")

db.server(c, "limfo", "%s,%s" % (ref.addr, ok_mc.addr), failover="on", failure_limit=1,
          retry_delay="60s")
keys = ["lim:%d" % i for i in range(40)]
res = [attempt("SELECT mc_set(%s, %s, server => 'limfo')", (k, "v" + k)) for k in keys]
bad = [(k, r) for k, r in zip(keys, res) if r[:2] != ("ok", True)]
t.ok(not bad, "failover on: keys of the instance at its limit fail over (every set works)",
     "%d of %d failed, e.g. %r" % (len(bad), len(keys), bad[:2]))
got = db.sql(c, "SELECT count(*) FROM unnest(%s::text[]) k WHERE mc_get(k, server => 'limfo') = 'v' || k",
             (keys,))
t.is_(got[0][0], len(keys), "failover on: and they read back")
row = db.sql(c, "SELECT state FROM mc_servers WHERE server = 'limfo' AND port = %s", (ref.port,))
t.is_(row[0][0] if row else None, "dead", "failover on: the refusing instance is marked dead")
for s in hogs:
    s.close()
ref.stop()

# ---- connect timeout: message and SQLSTATE agree ----------------------------
bh = SynBlackhole()
if not bh.blocks():
    t.skip("connect timeout", "connects to a full accept queue do not hang here")
else:
    db.server(c, "bh", bh.addr, connect_timeout="300ms", failure_limit=100)
    db.server(c, "refused", "127.0.0.1:%d" % mcrig.free_port(), failure_limit=100)
    rt = attempt("SELECT mc_get('x', server => 'bh')")
    rr = attempt("SELECT mc_get('x', server => 'refused')")
    t.is_((rt[0], rt[2]), ("error", "08001"), "a connect timeout is 08001")
    t.ok("could not connect" in rt[1] and "timed out after 300 ms" in rt[1],
         "a connect timeout says it could not connect and timed out", repr(rt))
    t.is_((rr[0], rr[2]), ("error", "08001"), "a refused connect is 08001 too")
    # the multi-get connects through the same code
    rm = attempt("SELECT count(*) FROM mc_get_multi(ARRAY['a','b'], 'bh')")
    t.is_((rm[0], rm[2]), ("error", "08001"), "a multi-get's connect timeout is 08001 too")
bh.stop()

# ---- host names ----------------------------------------------------------------
db.server(c, "byname", "localhost:%d" % ok_mc.port)
t.is_(attempt("SELECT mc_set('n', 'named', server => 'byname')")[:2], ("ok", True),
      "a host name is looked up (localhost)")
t.is_(attempt("SELECT mc_get('n', server => 'byname')")[:2], ("ok", "named"),
      "and the socket is reused")
db.server(c, "noname", "no-such-host.invalid:11211", failure_limit=100)
r1 = attempt("SELECT mc_get('n', server => 'noname')")
t.is_((r1[0], r1[2]), ("error", "08001"), "an unknown host name is a failed connect (08001)")
t.ok("could not resolve host name" in r1[1], "and says so", repr(r1))
# many lookups in a row leave nothing behind (the backend keeps working)
for _ in range(20):
    attempt("SELECT mc_get('n', server => 'noname')")
t.is_(attempt("SELECT mc_get('n', server => 'byname')")[:2], ("ok", "named"),
      "after 20 failed lookups the backend still resolves and connects")
db.server(c, "v6", "[::1]:%d" % mcrig.free_port(), failure_limit=100)
r1 = attempt("SELECT mc_get('n', server => 'v6')")
t.ok(r1[0] == "error" and r1[2] == "08001" and "resolve" not in r1[1],
     "a numeric address needs no lookup", repr(r1))

c.close()
t.done()
