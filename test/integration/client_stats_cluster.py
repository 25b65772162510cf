"""client_stats_cluster: with mcfdw in shared_preload_libraries,
mc_client_stats and mc_cluster_health are the cluster's: a dashboard's
session sees what every other backend did.

Like counters_cluster.py, this starts a private cluster
(mcrig.private_cluster) that preloads mcfdw (the rig's does not; sql/client_stats.sql covers the session scope) with a
small mcfdw.client_stats_max, and stops it at exit.  It checks: exact counts
of a known workload summed over two backends; each error class provoked by
a misbehaving peer (a closed port, a proxy that swallows replies, a server
sending garbage, a server requiring a login, memcached's SERVER_ERROR);
degraded calls, equal to mc_counters'; the latency histogram's p50 against
a proxy delaying every reply by a known time, and against memcached direct;
an instance one backend marked dead seen by another; rows only for usable
servers; the reset revoked from PUBLIC; the overflow rows once every slot is
taken.
"""

import psycopg2

import faultproxy
import hostile
import mcdb
import mcrig
from tlsrig import path, start, write_file

t = mcrig.TAP()
SLOTS = 16                      # mcfdw.client_stats_max of this cluster

# ---- a private cluster with mcfdw preloaded ---------------------------------
pg = mcrig.private_cluster(["shared_preload_libraries = 'mcfdw'",
                            "mcfdw.client_stats_max = %d" % SLOTS], "client-stats-cluster")
if not pg.started(t, "a cluster with shared_preload_libraries = 'mcfdw' starts"):
    t.done()
connect = pg.connect
q = mcdb.Database.sql


def fails(conn, sql):
    """The SQLSTATE of sql's error, or None when it succeeds."""
    try:
        q(conn, sql)
        return None
    except psycopg2.Error as e:
        return e.pgcode


def stats(conn, server, op):
    """calls, keys, hits, misses, errors by class, degraded of server's op."""
    rows = q(conn, "SELECT sum(calls)::int, sum(keys)::int, sum(hits)::int, sum(misses)::int, "
             "sum(errors_connect)::int, sum(errors_timeout)::int, sum(errors_protocol)::int, "
             "sum(errors_server)::int, sum(errors_auth)::int, sum(degraded)::int "
             "FROM mc_client_stats WHERE server = %s AND op = %s", (server, op))
    return rows[0]


live_port = mcrig.rig_ports()[0]
live = "127.0.0.1:%d" % live_port
closed = "127.0.0.1:%d" % mcrig.free_port()
delayed = faultproxy.FaultProxy(live_port, mode="delay").start()
delayed.delay = 0.040
hang = faultproxy.FaultProxy(live_port, mode="hang").start()
garbage = hostile.HostileServer("garbage").start()
write_file("cs_authfile", "alice:pw-alice\n")
auth = start(["-Y", path("cs_authfile")], tls=False)

admin = connect()
q(admin, "CREATE EXTENSION mcfdw")
for name, addr, extra in (("cs_live", live, ""), ("cs_delay", delayed.addr, ""),
                          ("cs_down", closed, ", failure_limit '1', retry_delay '600'"),
                          ("cs_miss", closed, ", on_failure 'miss'"),
                          ("cs_hang", hang.addr, ", io_timeout '300'"),
                          ("cs_garbage", garbage.addr, ""),
                          ("cs_auth", auth.addr, "")):
    q(admin, "CREATE SERVER %s FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '%s'%s)"
          % (name, addr, extra))
q(admin, "SELECT mc_delete_multi(ARRAY(SELECT 'cs:' || i FROM generate_series(1, 10) i), 'cs_live')")
q(admin, "SELECT mc_set('cs:' || i, 'v', server => 'cs_live') FROM generate_series(1, 3) i")
q(admin, "SELECT mc_client_stats_reset()")

# ---- counts across backends ---------------------------------------------------
dash = connect()
t.is_(q(dash, "SELECT count(*)::int, count(DISTINCT scope)::int, min(scope) FROM mc_client_stats"),
      [(0, 0, None)], "after a reset: no rows")
a = connect()
b = connect()
for conn in (a, b):
    # 5 gets, 3 of them hits; one multi-get of 10 keys, 3 of them hits
    q(conn, "SELECT count(mc_get('cs:' || i, 'cs_live')) FROM generate_series(1, 5) i")
    q(conn, "SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'cs:' || i FROM generate_series(1, 10) i), 'cs_live')")
t.is_(stats(dash, "cs_live", "get"), (10, 10, 6, 4, 0, 0, 0, 0, 0, 0),
      "the dashboard's session sees both backends' gets: 10 calls, 6 hits, 4 misses")
t.is_(stats(dash, "cs_live", "get_multi"), (2, 20, 6, 14, 0, 0, 0, 0, 0, 0),
      "... and their multi-gets: 20 keys, 6 hits, 14 misses")
t.is_(q(dash, "SELECT DISTINCT scope, instance FROM mc_client_stats"), [("cluster", live)],
      "scope 'cluster', one row per instance")
t.is_(q(connect(), "SELECT sum(calls)::int FROM mc_client_stats WHERE server = 'cs_live'"), [(12,)],
      "a new session sees them too")

# ---- errors by class ---------------------------------------------------------------
t.is_(fails(a, "SELECT mc_get('k', 'cs_down')"), "08001", "a refused connect")
t.is_(fails(a, "SELECT mc_get('k', 'cs_hang')"), "08006", "a timeout")
t.is_(fails(a, "SELECT mc_get('k', 'cs_garbage')"), "08P01", "garbage for a reply")
t.is_(fails(a, "SELECT mc_get('k', 'cs_auth')"), "28000", "a server requiring a login")
t.is_(fails(a, "SELECT mc_set('cs:big', repeat('x', 2 * 1024 * 1024), server => 'cs_live')"),
      "54000", "a value over memcached's item size: SERVER_ERROR")
q(a, "SET mcfdw.warn_on_miss = off")
t.is_(q(a, "SELECT mc_get('k', 'cs_miss') IS NULL"), [(True,)], "on_failure 'miss': a miss")
t.is_(stats(dash, "cs_down", "get"), (1, 0, 0, 0, 1, 0, 0, 0, 0, 0),
      "counted: errors_connect (no key sent)")
t.is_(stats(dash, "cs_hang", "get"), (1, 1, 0, 0, 0, 1, 0, 0, 0, 0),
      "counted: errors_timeout (the key was sent)")
t.is_(stats(dash, "cs_garbage", "get"), (1, 1, 0, 0, 0, 0, 1, 0, 0, 0), "counted: errors_protocol")
t.is_(stats(dash, "cs_auth", "get"), (1, 1, 0, 0, 0, 0, 0, 0, 1, 0), "counted: errors_auth")
t.is_(stats(dash, "cs_live", "set"), (1, 1, 0, 0, 0, 0, 0, 1, 0, 0), "counted: errors_server")
t.is_(stats(dash, "cs_miss", "get"), (1, 0, 0, 0, 1, 0, 0, 0, 0, 1),
      "counted: the degraded call, and the connect error behind it")
t.is_(q(dash, "SELECT degraded::int FROM mc_counters WHERE server = 'cs_miss'"), [(1,)],
      "mc_counters counts the same degraded call")

# ---- cluster health ------------------------------------------------------------------
rows = q(dash, "SELECT server, instance, dead, failures, dead_until > marked_dead_at + interval '590 s', "
         "last_error <> '', scope FROM mc_cluster_health ORDER BY server")
t.is_(rows, [("cs_down", closed, True, 1, True, True, "cluster")],
      "the instance backend A marked dead (failure_limit 1) is seen by the dashboard")
t.is_(q(dash, "SELECT dead_until IS NULL FROM mc_servers WHERE server = 'cs_down'"), [(True,)],
      "... while the dashboard's own session has not marked it (mc_servers is per session)")

# ---- latency: the histogram against known delays -----------------------------------
P = ("SELECT min(2 ^ (b - 1) / 1000.0) FILTER (WHERE cum >= 0.5 * total)::float8, "
     "min(b) FILTER (WHERE n > 0)::int "
     "FROM (SELECT b, n, sum(n) OVER (ORDER BY b) AS cum, sum(n) OVER () AS total "
     "FROM mc_client_stats, unnest(latency_hist) WITH ORDINALITY AS u(n, b) "
     "WHERE server = %s AND op = 'get') h")
q(a, "SELECT mc_get('cs:1', 'cs_delay')")      # the connect, not measured below
q(admin, "SELECT mc_client_stats_reset()")
q(a, "SELECT count(mc_get('cs:1', 'cs_delay')) FROM generate_series(1, 10)")
q(b, "SELECT count(mc_get('cs:1', 'cs_live')) FROM generate_series(1, 10)")
p50, lowest = q(dash, P, ("cs_delay",))[0]
t.is_(p50, 65.536, "replies delayed 40 ms: p50 in the bucket [32.768, 65.536) ms")
t.is_(lowest, 17, "... and no request counted below 32.768 ms (bucket 17)")
mx = q(dash, "SELECT max_time >= 40, total_time >= 400 FROM mc_client_stats "
       "WHERE server = 'cs_delay' AND op = 'get'")
t.is_(mx, [(True, True)], "max_time and total_time count the delay")
p50, _ = q(dash, P, ("cs_live",))[0]
t.ok(p50 is not None and p50 <= 16.384, "memcached direct: p50 under 16 ms", repr(p50))

# ---- privileges -----------------------------------------------------------------------
q(admin, "CREATE ROLE cs_user LOGIN")
q(admin, "GRANT USAGE ON FOREIGN SERVER cs_live TO cs_user")
user = connect(user="cs_user")
t.is_(q(user, "SELECT DISTINCT server::text FROM mc_client_stats"), [("cs_live",)],
      "a role sees rows only for the servers it has USAGE on")
t.is_(fails(user, "SELECT mc_client_stats_reset()"), "42501",
      "mc_client_stats_reset is revoked from PUBLIC")
t.is_(q(dash, "SELECT sum(calls)::int FROM mc_client_stats"), [(20,)],
      "the refused reset changed nothing")
q(admin, "GRANT EXECUTE ON FUNCTION mc_client_stats_reset() TO cs_user")
q(user, "SELECT mc_client_stats_reset()")
t.is_(q(dash, "SELECT count(*)::int FROM mc_client_stats"), [(0,)], "a granted reset empties the view")
t.is_(q(dash, "SELECT count(*)::int FROM mc_cluster_health"), [(0,)], "... and forgets the marks")
q(a, "SELECT mc_get('cs:1', 'cs_live')")
t.is_(stats(dash, "cs_live", "get")[:3], (1, 1, 1),
      "a backend that counted before the reset counts from zero after it")

# ---- overflow -----------------------------------------------------------------------------
# cs_live's get holds one slot; SLOTS + 3 servers' gets take the other SLOTS - 1
# and overflow by 4
n = SLOTS + 3
q(admin, "DO $$ BEGIN FOR i IN 1..%d LOOP EXECUTE format("
         "'CREATE SERVER ov_%%s FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %%L, on_failure %%L)',"
         " i, '%s', 'miss'); END LOOP; END $$" % (n, closed))
q(a, "SELECT count(mc_get('k', 'ov_' || i)) FROM generate_series(1, %d) i" % n)
t.is_(q(dash, "SELECT op, calls::int, degraded::int FROM mc_client_stats WHERE server IS NULL"),
      [("get", 4, 4)], "once every slot is taken, the overflow row of the operation counts the rest")
t.is_(q(dash, "SELECT sum(calls)::int FROM mc_client_stats WHERE op = 'get'"), [(n + 1,)],
      "no call is dropped")
t.is_(q(user, "SELECT count(*)::int FROM mc_client_stats WHERE server IS NULL"), [(0,)],
      "the overflow row is only for pg_read_all_stats")
t.ok("mcfdw client statistics are full" in pg.log_text(), "the overflow is LOGged")

for c in (a, b, dash, user, admin):
    c.close()
for s in (delayed, hang, garbage):
    s.stop()
t.done()
