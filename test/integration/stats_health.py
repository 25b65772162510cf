"""stats_health: what a statistics view's stats command does to instance health.

A stats command has bounds of its own, and they decide what counts against
the instance (failure_limit 1 here, so one counted failure marks it dead):

- mcfdw.stats_timeout passing is the instance's failure: the view shows it
  as the instance's error, mc_servers counts it, and the instance is marked
  dead (the planner's own bound on an item count is not: fullscan_probe.py).
- A rejected login is not counted: the views show the cause (never the
  password), the instance stays alive, and a read still gets the login's
  own error rather than "unavailable".
- An instance marked dead is not asked again until retry_delay has passed:
  the view shows the recorded failure, and no connection is made."""

import os
import tempfile

import faultproxy
import mcdb
import mcrig

t = mcrig.TAP()
m = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_stats_health")
c = db.connect()


def health(server):
    return db.sql(c, "SELECT state, failures, coalesce(last_error, '') FROM mc_servers "
                     "WHERE server = %s", (server,))[0]


def errors(server):
    """Each row's error, or the view's own error (a view must not raise)."""
    try:
        return [r[0] for r in db.sql(c, "SELECT error FROM mc_server_stats(%s)", (server,))]
    except Exception as e:  # noqa: BLE001
        return ("raised", str(e).splitlines()[0])


# every reply 400 ms late: past stats_timeout, well within io_timeout
px = faultproxy.FaultProxy(m.port, mode="delay").start()
px.delay = 0.4
db.server(c, "slowstats", px.addr, io_timeout="5s", failure_limit="1", retry_delay="60")
db.sql(c, "SET mcfdw.stats_timeout = '100ms'")
got = errors("slowstats")
t.ok(len(got) == 1 and "timed out after 100 ms" in (got[0] or ""),
     "stats_timeout passing: the view's row has the instance's timeout", repr(got))
state, failures, last_error = health("slowstats")
t.ok(state == "dead" and failures == 1 and "timed out after 100 ms" in last_error,
     "stats_timeout passing is the instance's failure: counted, and marked dead (failure_limit 1)",
     repr((state, failures, last_error)))

# marked dead: the next view does not connect, and says why
accepted = px.accepted
got = errors("slowstats")
t.ok(len(got) == 1 and (got[0] or "").startswith("instance is marked dead after 1 failures")
     and px.accepted == accepted,
     "an instance marked dead is not asked: no connection, the view shows the recorded failure",
     repr((got, px.accepted - accepted)))
t.is_(db.value(c, "SELECT count(*) FROM mc_stats('slowstats')"), 0,
      "... and mc_stats leaves it out, no error")
db.sql(c, "RESET mcfdw.stats_timeout")
px.stop()

# a login the server rejects: shown, never counted
d = tempfile.mkdtemp(prefix="mcfdw-stats-health-")
os.chmod(d, 0o755)
authfile = os.path.join(d, "authfile")
with open(authfile, "w") as f:
    f.write("alice:pw-alice\n")
os.chmod(authfile, 0o644)
auth = mcrig.start_memcached("-Y", authfile)
db.server(c, "authstats", auth.addr, failure_limit="1", retry_delay="60")
db.sql(c, "CREATE USER MAPPING FOR CURRENT_USER SERVER authstats "
          "OPTIONS (username 'alice', password 'secret-wrong')")
for i in range(3):
    got = errors("authstats")
    t.ok(len(got) == 1 and got[0] and "alice" in got[0] and "secret-wrong" not in got[0],
         "a rejected login (%d): the view's row has the cause, no password" % (i + 1), repr(got))


def count(sql):
    try:
        return db.value(c, sql)
    except Exception as e:  # noqa: BLE001
        return str(e).splitlines()[0]


views = [count("SELECT count(*) FROM %s WHERE server = 'authstats'" % v)
         for v in ("mc_stats", "mc_slab_stats", "mc_slab_summary")]
t.is_(views, [0, 0, 0], "... the other views leave the instance out, no error")
state, failures, last_error = health("authstats")
t.ok(state != "dead" and failures == 0 and "secret-wrong" not in last_error,
     "a rejected login is not the instance's failure: not counted, not marked dead (failure_limit 1)",
     repr((state, failures, last_error)))
try:
    db.value(c, "SELECT mc_get('k', server => 'authstats')")
    code = None
except Exception as e:  # noqa: BLE001
    code = getattr(e, "pgcode", None)
t.is_(code, "28P01", "a read after the views still meets the rejected login, not a dead instance")

c.close()
t.done()
