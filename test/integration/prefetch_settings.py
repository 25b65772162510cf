"""prefetch_settings: the prefetch's own multi-get runs without failover
and without on_failure 'miss' (prefetch_exec.c's run_softly), but it must
not change the server's settings to do so: a statement canceled in the
middle of that run (statement_timeout, an instance that never answers)
leaves the server failing over, or degrading to a miss, for the next
statement of the same session, as it does without the prefetch."""

import psycopg2

import mcdb
import mcrig
from faultproxy import FaultProxy

t = mcrig.TAP()
mc1 = mcrig.start_memcached()
mc2 = mcrig.start_memcached()
px = FaultProxy(mc1.port).start()
db = mcdb.Database("mcfdw_it_prefetch_settings")
c = db.connect()
# io_timeout well past the statement_timeout: the cancel ends the run
servers = "%s,%s" % (px.addr, mc2.addr)
db.server(c, "pfs_fo", servers, failover="true", io_timeout="20000", connect_timeout="2000")
db.server(c, "pfs_miss", servers, on_failure="miss", io_timeout="20000", connect_timeout="2000")
db.sql(c, "CREATE TABLE users (id int PRIMARY KEY)")
db.sql(c, "INSERT INTO users SELECT generate_series(1, 100)")
db.sql(c, "ANALYZE users")
db.sql(c, "SELECT mc_set_multi(array_agg('u:' || id), array_agg('v' || id), server => 'pfs_fo') "
          "FROM users")
# a key whose instance is the proxy's (the first of servers: instance 1)
on_px = db.value(c, "SELECT key FROM mc_route(ARRAY(SELECT 'u:' || id FROM users), 'pfs_fo') "
                    "WHERE instance = 1 ORDER BY key LIMIT 1")
t.ok(on_px is not None, "a key routed to the proxied instance", on_px)
c.close()

QUERY = "SELECT u.id, mc_get('u:' || u.id, %s) FROM users u ORDER BY u.id"


def canceled_then(server, prefetch):
    """Cancel QUERY in the middle of its multi-get (the proxied instance
    swallows replies), then read on_px again in the same session with that
    instance closing every connection: the value, or the error."""
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("LOAD 'mcfdw'")
    cur.execute("SET mcfdw.prefetch = %s" % ("on" if prefetch else "off"))
    cur.execute("SET mcfdw.warn_on_miss = off")
    cur.execute("EXPLAIN (COSTS OFF) " + QUERY, (server,))
    plan = "\n".join(r[0] for r in cur.fetchall())
    px.mode = "hang"
    cur.execute("SET statement_timeout = '700ms'")
    try:
        cur.execute(QUERY, (server,))
        first = "rows"
    except psycopg2.Error as e:
        first = e.pgcode
    cur.execute("SET statement_timeout = 0")
    px.mode = "close"
    try:
        cur.execute("SELECT mc_get(%s, %s)", (on_px, server))
        then = ("value", cur.fetchone()[0])
    except psycopg2.Error as e:
        then = ("error", e.pgcode, str(e).splitlines()[0])
    px.mode = "pass"
    conn.close()
    return ("MemcachedPrefetch" in plan), first, then


for server, want, what in (("pfs_fo", ("value", None), "fails over (the other instance: a miss)"),
                           ("pfs_miss", ("value", None), "degrades to a miss")):
    planned, first, then = canceled_then(server, True)
    t.ok(planned and first == "57014",
         "%s: a statement_timeout in the middle of the prefetch's multi-get cancels it" % server,
         "prefetch planned: %r, error: %r" % (planned, first))
    t.is_(then, want, "%s: the next statement of the session still %s" % (server, what))
    t.is_(canceled_then(server, False)[1:], (first, then),
          "%s: ... as it does without the prefetch" % server)

px.stop()
t.done()
