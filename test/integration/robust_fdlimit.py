"""robust_fdlimit: the documented 256 instances work, running short of file
descriptors is recovered from, and idle_timeout closes idle connections.

PostgreSQL lets a backend hold about a third of max_files_per_process (1000
here) as "external" descriptors.  A socket per instance plus one wait set in
use fits 256 instances; a second such server needs the first one's idle
sockets back, which the least recently used give up (and reopen at their
next use) instead of the backend failing with "epoll_create1 failed: Too
many open files" for the rest of the session.

One memcached listens on 256 loopback addresses (127.0.0.0/8 is all
loopback), one instance each, since a server may not list one address
twice."""

import socket
import time

import mcdb
import mcrig

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_robust_fdlimit")
c = db.connect()
N = 256


def attempt(sql, args=None):
    try:
        return ("ok", db.value(c, sql, args), None)
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0], getattr(e, "pgcode", None))


def addrs(block):
    return ["127.%d.%d.%d" % (block, i // 250, i % 250 + 2) for i in range(N)]


many_mc = mcrig.start_memcached("-l", ",".join(addrs(10)), "-c", "4096")
more_mc = mcrig.start_memcached("-l", ",".join(addrs(11)), "-c", "4096")
one = mcrig.start_memcached()
db.server(c, "one", one.addr)
db.server(c, "many", ",".join("%s:%d" % (a, many_mc.port) for a in addrs(10)))
db.server(c, "more", ",".join("%s:%d" % (a, more_mc.port) for a in addrs(11)))
keys = ["fd:%d" % i for i in range(4000)]


def write_read(server):
    w = attempt("SELECT count(*) FILTER (WHERE mc_set(k, k, server => %s)) "
                "FROM unnest(%s::text[]) k", (server, keys))
    r = attempt("SELECT count(*) FROM mc_get_multi(%s::text[], %s)", (keys, server))
    return w, r


def open_sockets(server):
    return db.value(c, "SELECT count(*) FROM mc_servers WHERE server = %s AND state = 'connected'",
                    (server,))


w, r = write_read("many")
t.is_(w[:2], ("ok", len(keys)), "256 instances: every write works")
t.is_(r[:2], ("ok", len(keys)), "256 instances: a multi-get over all of them returns every key")
t.is_(open_sockets("many"), N, "all 256 instances have a pooled connection")

# a second 256-instance server: more sockets than the budget holds at once
w, r = write_read("more")
t.is_(w[:2], ("ok", len(keys)), "a second 256-instance server: every write works "
      "(idle connections of the first give their descriptors back)")
t.is_(r[:2], ("ok", len(keys)), "and its multi-get returns every key")
t.ok(open_sockets("many") < N, "the first server's least recently used sockets were closed",
     "connected: %r" % open_sockets("many"))

# the first server reopens what it gave back
w, r = write_read("many")
t.is_(r[:2], ("ok", len(keys)), "the first server works again afterwards")
t.is_(attempt("SELECT mc_set('after', 'x', server => 'one')")[:2], ("ok", True),
      "the backend is not left broken: another server works too")
t.is_(attempt("SELECT count(*) FROM mc_server_stats WHERE server = 'more' AND error IS NULL")[:2],
      ("ok", N), "the stats views reach all 256 instances of the other one too")
db.sql(c, "DROP SERVER many")
db.sql(c, "DROP SERVER more")

# ---- idle_timeout ---------------------------------------------------------------
mc = mcrig.start_memcached()
db.server(c, "idle", mc.addr, idle_timeout="1s")
db.server(c, "kept", mc.addr)
c2 = db.connect()
for s in ("idle", "kept"):
    db.value(c2, "SELECT mc_set('k', 'v', server => %s)", (s,))


# one stats connection for every reading: a new one per reading would be
# counted while memcached has not yet seen the previous one close
stats_sock = socket.create_connection(("127.0.0.1", mc.port), timeout=5)


def curr_connections():
    stats_sock.sendall(b"stats\r\n")
    buf = b""
    while not buf.endswith(b"END\r\n"):
        chunk = stats_sock.recv(65536)
        if not chunk:
            raise RuntimeError("memcached closed the stats connection")
        buf += chunk
    for line in buf.decode("latin-1").splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[1] == "curr_connections":
            return int(parts[2])
    raise RuntimeError("no curr_connections in stats")


before = curr_connections()
state = lambda s: db.value(c2, "SELECT state FROM mc_servers WHERE server = %s", (s,))  # noqa: E731
t.is_((state("idle"), state("kept")), ("connected", "connected"), "both connections are pooled")
time.sleep(2.2)
# any call of the backend sweeps idle connections (at most once a second)
db.value(c2, "SELECT mc_get('k', server => 'one')")
t.is_((state("idle"), state("kept")), ("idle", "connected"),
      "idle_timeout 1s: after 2 s idle the connection is closed at the backend's next call; "
      "a server without idle_timeout keeps its own")
deadline = time.monotonic() + 5
while curr_connections() != before - 1 and time.monotonic() < deadline:
    time.sleep(0.05)
t.is_(curr_connections(), before - 1, "memcached sees one connection fewer")
t.is_(db.value(c2, "SELECT mc_get('k', server => 'idle')"), "v", "the server reconnects at its next use")
c2.close()
c.close()
t.done()
