"""pool_reuse: one connection per memcached instance per backend, kept across
statements and transactions, reconnected when the server went away, and no
memory growth over many calls."""

import time

import mcdb
import mcrig

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_pool_reuse")
setup = db.connect()
db.server(setup, "mc", mc.addr)


class StatsConn:
    """One socket kept open for `stats`, so reading the counters does not
    itself open connections."""

    def __init__(self, port):
        self.port = port
        self.sock = None

    def get(self, name):
        if self.sock is None:
            self.sock = mcrig.connect(self.port, timeout=None)
        self.sock.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            buf += self.sock.recv(65536)
        for line in buf.decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == name:
                return int(parts[2])
        raise KeyError(name)

    def reset(self):
        """After a server restart: reconnect."""
        self.sock = None


st = StatsConn(mc.port)


def total_connections():
    return st.get("total_connections")


# 10,000 calls in one backend open exactly one connection
c = db.connect()
before = total_connections()
db.sql(c, "SELECT count(*) FILTER (WHERE mc_set('k' || i, 'v' || i, server => 'mc')) "
          "FROM generate_series(1, 5000) i")
db.sql(c, "SELECT count(*) FILTER (WHERE mc_get('k' || i, server => 'mc') IS NOT NULL) "
          "FROM generate_series(1, 5000) i")
t.is_(total_connections() - before, 1, "10,000 calls in one statement open one connection")

# ... and it is kept across statements and transactions
before = total_connections()
for i in range(50):
    db.sql(c, "SELECT mc_get('k1', server => 'mc')")
c.autocommit = False
for i in range(20):
    db.sql(c, "SELECT mc_set('tx', %s, server => 'mc')", (str(i),))
    c.commit() if i % 2 else c.rollback()
c.autocommit = True
t.is_(total_connections() - before, 0, "statements and transactions reuse the connection")
t.ok(st.get("curr_connections") >= 2, "the connection stays open between calls (ours and the stats one)")

# a second backend has its own connection
c2 = db.connect()
before = total_connections()
db.sql(c2, "SELECT mc_get('k1', server => 'mc')")
db.sql(c2, "SELECT mc_get('k2', server => 'mc')")
t.is_(total_connections() - before, 1, "another backend opens its own, once")
c2.close()

# the server restarts while the pooled connection sits idle: the next call
# finds it closed and retries once on a new socket, without an error
for pause, what in ((1.2, "after a second idle (probed)"), (0.0, "right away (not probed)")):
    mc.restart()
    st.reset()
    time.sleep(pause)
    before = total_connections()
    try:
        got = db.value(c, "SELECT mc_set('after', 'restart', server => 'mc') "
                          "AND mc_get('after', server => 'mc') = 'restart'")
        t.ok(got is True, "a call %s after a server restart reconnects by itself" % what)
    except Exception as e:  # noqa: BLE001 - report whatever went wrong
        t.ok(False, "a call %s after a server restart reconnects by itself" % what, str(e))
    t.is_(total_connections() - before, 1, "... using one new connection")

# memory: no growth across many calls (memory contexts of this backend)
mem_sql = "SELECT sum(total_bytes) FROM pg_backend_memory_contexts"
db.sql(c, "SELECT count(mc_get('k' || (i % 5000 + 1), server => 'mc')) FROM generate_series(1, 20000) i")
m1 = db.value(c, mem_sql)
db.sql(c, "SELECT count(mc_get('k' || (i % 5000 + 1), server => 'mc')) FROM generate_series(1, 200000) i")
db.sql(c, "SELECT count(mc_set('m' || (i % 100), repeat('x', 500), server => 'mc')) FROM generate_series(1, 50000) i")
m2 = db.value(c, mem_sql)
t.ok(m2 - m1 < 64 * 1024, "backend memory after 250,000 more calls grew by %d bytes (< 64 kB)" % (m2 - m1))

c.close()
setup.close()
t.done()
