"""fullscan_probe: what a full scan's planning and dump do to instance health.

Planning a full scan asks every instance for its item count within its own
short bound (250 ms); an instance slower than that, but answering within
io_timeout, is not failing: the probe giving up is not counted towards
failure_limit, not shown in mc_servers, and the instance keeps serving.  A
probe that io_timeout ends is a failure like any other.  A dump sent on a
pooled socket the server closed while idle (a restart, an idle timeout)
restarts once on a fresh connection, as every other read does.  The dumps
of a server's instances run at the same time."""

import time

import faultproxy
import hostile
import mcdb
import mcrig

t = mcrig.TAP()
m = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_fullscan_probe")
c = db.connect()


def store(n):
    for i in range(n):
        v = "v%d" % i
        mcrig.mc_command(m.port, "set t:%d 0 0 %d\r\n%s" % (i, len(v), v), end=(b"STORED\r\n",))


store(20)


def health(server):
    return db.sql(c, "SELECT state, failures, last_error FROM mc_servers WHERE server = %s",
                  (server,))[0]


def value(sql):
    """The first column of the first row, or the error's first line."""
    try:
        return db.value(c, sql)
    except Exception as e:  # noqa: BLE001
        return str(e).splitlines()[0]


def explain(table):
    return db.value(c, "EXPLAIN SELECT * FROM %s" % table)


# every reply 400 ms late: past the planner's bound, well within io_timeout
px = faultproxy.FaultProxy(m.port, mode="delay").start()
px.delay = 0.4
db.server(c, "slow", px.addr, io_timeout="5s", failure_limit="1", retry_delay="60",
          allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE slowt (key text, value text) SERVER slow "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
t0 = time.monotonic()
plan = explain("slowt")
t.ok(time.monotonic() - t0 < 2.0 and "rows=1000" in plan,
     "a slow instance's item count is given up on: the default estimate (%.2f s)"
     % (time.monotonic() - t0), plan)
state, failures, last_error = health("slow")
t.ok(state != "dead" and failures == 0 and last_error is None,
     "the planner giving up is not the instance's failure (failure_limit 1)",
     repr((state, failures, last_error)))
t.is_(value("SELECT mc_get('t:3', server => 'slow')"), "v3",
      "a get on the slow instance works after planning")
t.is_(value("SELECT count(*) FROM slowt"), 20, "and so does its full scan")

# io_timeout shorter than the planner's bound: that timeout is a failure
db.server(c, "slower", px.addr, io_timeout="100ms", failure_limit="1", retry_delay="60",
          allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE slowert (key text, value text) SERVER slower "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
explain("slowert")
state, failures, last_error = health("slower")
t.ok(state == "dead" and failures == 1 and "timed out after 100 ms" in (last_error or ""),
     "a probe io_timeout ends counts as a failure", repr((state, failures, last_error)))
px.stop()

# a dump on a pooled socket the server closed while idle restarts once
hp = hostile.HostileProxy(m.port).start()
db.server(c, "idle", hp.addr, io_timeout="5s", failure_limit="1", retry_delay="60",
          allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE idlet (key text, value text) SERVER idle "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
t.is_(value("SELECT count(*) FROM idlet"), 20, "a full scan through the proxy")
for n in range(2):
    accepted = hp.accepted
    hp.drop_all()            # the server side closes the idle pooled socket
    time.sleep(0.2)          # well under the 1 s after which a socket is probed
    got = value("SELECT count(*) FROM idlet WHERE value = 'v' || key")
    t.ok(got == 20 and hp.accepted == accepted + 1,
         "a scan after the pooled socket was closed while idle (%d): right rows, "
         "on one fresh connection" % (n + 1), repr((got, hp.accepted - accepted)))
state, failures, last_error = health("idle")
t.ok(state != "dead" and failures == 0, "and nothing counted against the instance",
     repr((state, failures, last_error)))
hp.stop()

# memcached restarted under a pooled socket: the same, with the keys stored anew
db.server(c, "direct", m.addr, io_timeout="5s", failure_limit="1", retry_delay="60",
          allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE directt (key text, value text) SERVER direct "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
t.is_(value("SELECT count(*) FROM directt"), 20, "a full scan of the memcached itself")
m.restart()
store(5)
got = value("SELECT count(*) FROM directt WHERE value = 'v' || key")
state, failures, last_error = health("direct")
t.ok(got == 5 and state != "dead" and failures == 0,
     "after a restart of memcached, the next scan lists what it holds now",
     repr((got, state, failures, last_error)))

# the dumps of all instances run together: each instance is sent its dump
# before the first stalled one's io_timeout ends the scan
stalls = [hostile.HostileServer("dump_stall").start() for _ in range(2)]
db.server(c, "two", ",".join(h.addr for h in stalls), io_timeout="1s", allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE twot (key text) SERVER two OPTIONS (allow_full_scan 'true')")
t0 = time.monotonic()
got = value("SELECT count(*) FROM twot")
elapsed = time.monotonic() - t0
dumps = [sum(r.startswith(b"lru_crawler metadump") for r in h.requests) for h in stalls]
t.ok(dumps == [1, 1] and "could not read from" in str(got) and elapsed < 5,
     "two stalled instances: both dumps were sent before io_timeout ended the scan (%.2f s)"
     % elapsed, repr((got, dumps)))
for h in stalls:
    h.stop()

# an instance marked dead (failure_limit) is not passed over in silence: the
# scan fails as a read of its keys would, or under on_failure 'miss' lists
# nothing from it and counts the call degraded; with failover on its keys
# belong to the others, so it is passed over
both = "%s,127.0.0.1:%d" % (m.addr, mcrig.free_port())     # the second refuses


def degraded(server):
    return db.value(c, "SELECT sum(degraded)::int FROM mc_servers WHERE server = %s", (server,))


for name, opts in (("deaderr", {}), ("deadmiss", {"on_failure": "miss"}),
                   ("deadfo", {"failover": "on", "on_failure": "miss"})):
    db.server(c, name, both, failure_limit="1", retry_delay="60", allow_full_scan="true", **opts)
    db.sql(c, "CREATE FOREIGN TABLE %st (key text, value text) SERVER %s "
              "OPTIONS (key_prefix 'd:', allow_full_scan 'true')" % (name, name))
    value("SELECT count(*) FROM %st" % name)     # the refusing instance fails: dead
# keep only keys the ring routes to the live instance, so that reading them
# back never meets the dead one: what the scan does with the dead instance's
# dump is all that is left to see
live = []
for i in range(40):
    k = "d:%d" % i
    mcrig.mc_command(m.port, "set %s 0 0 1\r\nx" % k, end=(b"STORED\r\n",))
    if value("SELECT mc_get('%s', server => 'deadmiss')" % k) == "x":
        live.append(k)
    else:
        mcrig.mc_command(m.port, "delete %s" % k, end=(b"DELETED\r\n",))
first = value("SELECT count(*) FROM deaderrt")
t.ok("is unavailable" in str(first),
     "on_failure 'error': a scan with an instance marked dead fails", repr(first))
before = degraded("deadmiss")
got = value("SELECT count(*) FROM deadmisst")
t.ok(0 < got == len(live) and degraded("deadmiss") == before + 1,
     "on_failure 'miss': the live instance's rows, and the call counted degraded",
     repr((got, len(live), before, degraded("deadmiss"))))
before = degraded("deadfo")
got = value("SELECT count(*) FROM deadfot")
t.ok(got == len(live) and degraded("deadfo") == before,
     "failover on: the dead instance is passed over, nothing counted",
     repr((got, len(live), before, degraded("deadfo"))))

c.close()
t.done()
