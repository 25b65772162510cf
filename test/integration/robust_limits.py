"""robust_limits: limits fail cleanly, are counted, and are recovered from.

- memcached at its connection limit (-c) answers "ERROR Too many open
  connections" and closes: that is a connection failure (counted in
  mc_servers, failed over with failover on), not a server error.
- 256 instances (the documented maximum) in one server, each pooled: every
  call works, or fails with a clear limit error (never XX000 "Too many open
  files"), and the backend is not left broken.
- A connect that times out reports a message and an SQLSTATE that agree
  with those of the other connect failures."""

import socket

import mcdb
import mcrig
from hostile import SynBlackhole

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_robust_limits")
c = db.connect()


def attempt(sql, args=None, conn=None):
    try:
        return ("ok", db.value(conn or c, sql, args), None)
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0], getattr(e, "pgcode", None))


# ---- memcached at its connection limit ------------------------------------
lim = mcrig.start_memcached("-c", "32", "-t", "1")
ok_mc = mcrig.start_memcached()
hogs = []
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", lim.port), timeout=2)
    s.sendall(b"version\r\n")
    r = s.recv(100)
    hogs.append(s)
    if r.startswith(b"ERROR Too many open connections"):
        break
t.ok(r.startswith(b"ERROR Too many open connections"),
     "memcached -c 32 reaches its limit after %d connections" % len(hogs), repr(r))

db.server(c, "lim", lim.addr, failure_limit=2, retry_delay="60s")
r1 = attempt("SELECT mc_get('x', server => 'lim')")
t.ok(r1[0] == "error" and (r1[2] or "").startswith("08"),
     "a connection refused for the limit is a connection failure (SQLSTATE class 08)", repr(r1))
row = db.sql(c, "SELECT failures, last_error FROM mc_servers WHERE server = 'lim'")
t.ok(row and row[0][0] >= 1, "the failure is counted in mc_servers", repr(row))
attempt("SELECT mc_get('x', server => 'lim')")
row = db.sql(c, "SELECT state FROM mc_servers WHERE server = 'lim'")
t.ok(row and row[0][0] == "dead", "after failure_limit such failures the instance is marked dead", repr(row))

db.server(c, "limfo", "%s,%s" % (lim.addr, ok_mc.addr), failover="on", failure_limit=1,
          retry_delay="60s")
keys = ["lim:%d" % i for i in range(40)]
res = [attempt("SELECT mc_set(%s, %s, server => 'limfo')", (k, "v" + k)) for k in keys]
bad = [(k, r) for k, r in zip(keys, res) if r[:2] != ("ok", True)]
t.ok(not bad, "failover on: keys of the instance at its limit fail over (every set works)",
     "%d of %d failed, e.g. %r" % (len(bad), len(keys), bad[:2]))
got = db.sql(c, "SELECT key, value FROM mc_get_multi(%s::text[], 'limfo')", (keys,)) \
    if not bad else []
t.is_(len(got), len(keys), "failover on: and they read back")
for s in hogs:
    s.close()

# ---- connect timeout: message and SQLSTATE agree -------------------------------
c2 = db.connect()     # a backend of its own: no pooled sockets
bh = SynBlackhole()
t.ok(bh.blocks(), "a connect to the blackhole port hangs (precondition)")
db.server(c, "bh", bh.addr, connect_timeout="300ms", failure_limit=100)
db.server(c, "refused", "127.0.0.1:%d" % mcrig.free_port(), failure_limit=100)
rt = attempt("SELECT mc_get('x', server => 'bh')", conn=c2)
rr = attempt("SELECT mc_get('x', server => 'refused')", conn=c2)
t.ok(rt[0] == "error" and rr[0] == "error", "a connect timeout and a refusal are errors", repr(rt), repr(rr))
same_msg = rt[1].replace('"bh"', "S") == rr[1].replace('"refused"', "S")
t.ok((same_msg and rt[2] == rr[2]) or (not same_msg and "time" in rt[1]),
     "a connect timeout has the SQLSTATE of its message: the same as a refused connect's "
     "under the same message, or a message of its own that says it timed out",
     "timeout: %r" % (rt,), "refused: %r" % (rr,))
t.diag("connect timeout: %r" % (rt,))
t.diag("connect refused: %r" % (rr,))
bh.stop()
c2.close()


# ---- 256 instances ------------------------------------------------------------
# one memcached listening on 256 loopback addresses, one instance each
addrs = ["127.0.%d.%d" % (i // 250, i % 250 + 2) for i in range(256)]
many = mcrig.start_memcached("-l", ",".join(addrs), "-c", "4096")
servers = ",".join("%s:%d" % (a, many.port) for a in addrs)
one = mcrig.start_memcached()
db.server(c, "one", one.addr)
try:
    db.server(c, "many", servers, connect_timeout="2s")
    created = True
except Exception as e:  # noqa: BLE001
    created = False
    t.ok("256" in str(e) or "limit" in str(e), "256 instances are refused with a clear limit error", str(e))

if created:
    keys = ["many:%d" % i for i in range(4000)]
    r = attempt("SELECT count(mc_set(k, k, server => 'many')) FROM unnest(%s::text[]) k", (keys,))
    touched = db.value(c, "SELECT count(*) FROM mc_servers WHERE server = 'many' AND connections > 0")
    t.ok(r[0] == "ok" or (r[2] != "XX000" and "Too many open files" not in r[1] and "epoll" not in r[1]),
         "256 instances: writes work, or fail with a clear error (not XX000 'Too many open files')",
         repr(r), "instances connected: %r" % touched)
    t.ok(r[:2] == ("ok", len(keys)), "256 instances: all %d writes work (%r instances connected)"
         % (len(keys), touched), repr(r))
    r = attempt("SELECT count(*) FROM mc_get_multi(%s::text[], 'many')", (keys,))
    t.ok(r[0] == "ok" or (r[2] != "XX000" and "epoll" not in r[1]),
         "256 instances: a multi-get over all works or fails clearly", repr(r))
    t.diag("multi-get over 256 instances: %r" % (r,))
    r = attempt("SELECT mc_set('after', 'x', server => 'one')")
    t.is_(r[:2], ("ok", True), "the backend is not left broken: another server still works")
    r = attempt("SELECT count(mc_set(k, k, server => 'many')) FROM unnest(%s::text[]) k", (keys,))
    t.ok(r[0] == "ok" or (r[2] != "XX000" and "Too many open files" not in r[1]),
         "256 instances: the writes again, in the same session: work or fail clearly", repr(r))
    r = attempt("SELECT mc_get('many:1', server => 'many')")
    t.ok(r[0] == "ok" or (r[2] != "XX000" and "epoll" not in r[1]),
         "and the 256-instance server still answers, or fails clearly", repr(r))

c.close()
t.done()
