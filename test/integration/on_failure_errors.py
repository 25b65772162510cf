"""on_failure_errors: on_failure 'miss' hides an unreachable or stalled
instance, not a broken one: a reply out of step with the protocol and a
server's error reply stay errors, and the connection is replaced."""

import mcdb
import mcrig
from faultproxy import FaultProxy

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = FaultProxy(mc.port).start()
db = mcdb.Database("mcfdw_it_on_failure_errors")
c = db.connect()
db.server(c, "direct", mc.addr, on_failure="miss")
db.server(c, "px", px.addr, io_timeout="300ms", on_failure="miss", failure_limit="100")
db.sql(c, "SELECT mc_set('a', 'A', server => 'direct')")


def expect_error(sql, fragment, name):
    try:
        db.sql(c, sql)
        t.ok(False, name, "no error")
    except Exception as e:  # noqa: BLE001
        t.ok(fragment in str(e), name, str(e))


t.is_(db.value(c, "SELECT mc_get('a', server => 'px')"), "A", "through the proxy")

# unavailability is a miss
for mode in ("close", "hang"):
    px.mode = mode
    t.is_(db.value(c, "SELECT mc_get('a', server => 'px') IS NULL"), True,
          "mode %s: a miss" % mode)
    if mode == "close":         # under "hang" the write reaches memcached
        t.is_(db.value(c, "SELECT mc_set('a', 'B', server => 'px')"), False,
              "mode %s: a write that did not happen" % mode)
    px.mode = "pass"
    t.is_(db.value(c, "SELECT mc_get('a', server => 'px')"), "A", "mode %s: then in step" % mode)

# garbage instead of a reply is an error, for reads and multi-gets alike
px.mode = "garble"
expect_error("SELECT mc_get('a', server => 'px')", "memcached server",
             "a garbled reply is an error despite on_failure 'miss'")
expect_error("SELECT count(*) FROM mc_get_multi(ARRAY['a', 'b'], 'px')", "memcached server",
             "a garbled multi-get reply is an error despite on_failure 'miss'")
px.mode = "pass"
t.is_(db.value(c, "SELECT mc_get('a', server => 'px')"), "A", "and the next call works")

# a server error reply (item too large) is an error
expect_error("SELECT mc_set('huge', repeat('x', 2 * 1024 * 1024), server => 'direct')",
             "memcached", "a server error reply is an error despite on_failure 'miss'")
t.is_(db.value(c, "SELECT mc_get('a', server => 'direct')"), "A", "and the next call works")

c.close()
px.stop()
t.done()
