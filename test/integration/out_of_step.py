"""out_of_step: a connection whose reply was not fully read (cancel, timeout,
error) is never reused; garbage, truncation and closes are clean errors."""

import mcdb
import mcrig
from faultproxy import FaultProxy

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = FaultProxy(mc.port).start()
db = mcdb.Database("mcfdw_it_out_of_step")
c = db.connect()
db.server(c, "direct", mc.addr)
db.server(c, "px", px.addr, io_timeout="2s")
db.sql(c, "SELECT mc_set('a', 'A', server => 'direct'), mc_set('b', 'B', server => 'direct')")

t.is_(db.value(c, "SELECT mc_get('a', server => 'px')"), "A", "through the proxy")


def expect_error(sql, fragment, name):
    try:
        db.sql(c, sql)
        t.ok(False, name, "no error")
    except Exception as e:  # noqa: BLE001
        t.ok(fragment in str(e), name, str(e))


# statement_timeout fires while the reply for 'a' is still on its way; the
# next call must not read that stale reply as its own
px.mode, px.delay = "delay", 0.4
db.sql(c, "SET statement_timeout = '100ms'")
expect_error("SELECT mc_get('a', server => 'px')", "statement timeout",
             "statement_timeout interrupts a slow reply")
db.sql(c, "RESET statement_timeout")
accepted = px.accepted
t.is_(db.value(c, "SELECT mc_get('b', server => 'px')"), "B",
      "the next call gets its own value, not the stale one")
t.is_(px.accepted - accepted, 1, "the interrupted connection was replaced")

# the same when PL/pgSQL catches the cancel and carries on in the same
# transaction (subtransaction abort)
db.sql(c, "SET statement_timeout = '150ms'")
db.sql(c, """
    CREATE OR REPLACE FUNCTION slow_then_fast() RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
      BEGIN
        PERFORM mc_get('a', server => 'px');
      EXCEPTION WHEN query_canceled THEN
        RETURN 'cancelled';
      END;
      RETURN 'not cancelled';
    END $$""")
try:
    r = db.value(c, "SELECT slow_then_fast()")
except Exception as e:  # noqa: BLE001
    r = str(e)
t.is_(r, "cancelled", "PL/pgSQL catches the timeout")
db.sql(c, "RESET statement_timeout")
t.is_(db.value(c, "SELECT mc_get('b', server => 'px')"), "B",
      "after a caught cancel the next call is in step")

# a reply cut short by a closed connection
px.mode, px.limit = "truncate", 4
expect_error("SELECT mc_get('a', server => 'px')", "closed the connection",
             "a truncated reply is an error")
px.mode = "pass"
t.is_(db.value(c, "SELECT mc_get('b', server => 'px')"), "B", "and the next call works")

# garbage instead of a reply
px.mode = "garble"
expect_error("SELECT mc_get('a', server => 'px')", "memcached server",
             "a garbled reply is an error")
px.mode = "pass"
t.is_(db.value(c, "SELECT mc_get('b', server => 'px')"), "B", "and the next call works")

# the server closes as soon as the request arrives
px.mode = "close"
expect_error("SELECT mc_set('z', 'v', server => 'px')", "closed the connection",
             "a close mid-request is an error")
px.mode = "pass"
t.is_(db.value(c, "SELECT mc_get('b', server => 'px')"), "B", "and the next call works")

# io_timeout bounds a stalled server
px.mode = "hang"
expect_error("SELECT mc_get('a', server => 'px')", "could not read from memcached server",
             "a stalled reply ends at io_timeout")
px.mode = "pass"
t.is_(db.value(c, "SELECT mc_get('b', server => 'px')"), "B", "and the next call works")

c.close()
px.stop()
t.done()
