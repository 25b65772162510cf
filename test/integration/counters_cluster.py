"""counters_cluster: with mcfdw in shared_preload_libraries, mc_counters is
cluster-wide: a dashboard's session sees the writes another session lost at
commit and the calls it answered as misses.

The rig's cluster does not preload mcfdw (pg_regress covers the session
scope there, sql/alert_counters.sql), so this test starts a private cluster
that does (mcrig.private_cluster), stopped at exit.  It checks:
counts across sessions, per database, rows only for usable servers, the
reset revoked from PUBLIC and counting after a reset, and the overflow row
once every slot is taken.
"""

import psycopg2

import mcdb
import mcrig

t = mcrig.TAP()
SLOTS = 256                     # MC_COUNTER_SLOTS in src/client/counters.c

# ---- a private cluster with mcfdw preloaded ---------------------------------
pg = mcrig.private_cluster(["shared_preload_libraries = 'mcfdw'"], "counters-cluster")
if not pg.started(t, "a cluster with shared_preload_libraries = 'mcfdw' starts"):
    t.done()
connect = pg.connect
q = mcdb.Database.sql


def counts(conn, server):
    rows = q(conn, "SELECT queued, sent, lost, degraded, scope FROM mc_counters "
             "WHERE server = %s", (server,))
    return rows[0] if rows else None


live = "127.0.0.1:%d" % mcrig.rig_ports()[0]
closed = "127.0.0.1:%d" % mcrig.free_port()

admin = connect()
q(admin, "CREATE EXTENSION mcfdw")
q(admin, "CREATE SERVER cc_live FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (live,))
q(admin, "CREATE SERVER cc_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (closed,))
q(admin, "CREATE SERVER cc_miss FOREIGN DATA WRAPPER mcfdw "
         "OPTIONS (servers %s, on_failure 'miss')", (closed,))
q(admin, "CREATE DATABASE cc_other")
other = connect("cc_other")
q(other, "CREATE EXTENSION mcfdw")
q(other, "CREATE SERVER cc_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (closed,))

# ---- counts across sessions ---------------------------------------------------
dash = connect()
t.is_(counts(dash, "cc_down"), (0, 0, 0, 0, "cluster"),
      "preloaded: scope 'cluster', zeros before anything is counted")

a = connect()
a.autocommit = False
q(a, "SELECT mc_delete_on_commit('cc:1', 'cc_down')")
q(a, "SELECT mc_set_on_commit('cc:2', 'v', server => 'cc_down')")
q(a, "SELECT mc_delete_on_commit('cc:3', 'cc_live')")
a.commit()
t.ok(any("could not send 2 of 2 queued writes" in n for n in a.notices),
     "session A: the writes to the down server are lost at commit, with a WARNING",
     *a.notices)
a.autocommit = True
q(a, "SET mcfdw.warn_on_miss = off")
q(a, "SELECT mc_get('cc:' || i, 'cc_miss') FROM generate_series(1, 3) i")
q(a, "SELECT * FROM mc_get_multi(ARRAY['cc:4'], 'cc_miss')")

t.is_(counts(dash, "cc_down"), (2, 0, 2, 0, "cluster"),
      "the dashboard's session sees A's lost writes")
t.is_(counts(dash, "cc_live"), (1, 1, 0, 0, "cluster"),
      "the dashboard's session sees A's sent write")
t.is_(counts(dash, "cc_miss"), (0, 0, 0, 4, "cluster"),
      "the dashboard's session sees A's degraded calls")
t.is_(q(dash, "SELECT count(*) FROM mc_invalidation_stats")[0][0], 0,
      "mc_invalidation_stats stays the session's own")
t.is_(counts(connect(), "cc_miss"), (0, 0, 0, 4, "cluster"),
      "a new session sees them too")
t.is_(counts(other, "cc_down"), (0, 0, 0, 0, "cluster"),
      "another database's server of the same name has counts of its own")

# ---- privileges -----------------------------------------------------------------
q(admin, "CREATE ROLE cc_user LOGIN")
q(admin, "GRANT USAGE ON FOREIGN SERVER cc_miss TO cc_user")
user = connect(user="cc_user")
t.is_(q(user, "SELECT server::text, degraded FROM mc_counters ORDER BY 1"), [("cc_miss", 4)],
      "a role sees rows only for the servers it has USAGE on")
try:
    q(user, "SELECT mc_counters_reset()")
    t.ok(False, "mc_counters_reset is revoked from PUBLIC")
except psycopg2.Error as e:
    t.is_(e.pgcode, "42501", "mc_counters_reset is revoked from PUBLIC")
t.is_(counts(dash, "cc_miss")[3], 4, "the refused reset changed nothing")

# ---- reset --------------------------------------------------------------------------
r0 = q(dash, "SELECT stats_reset FROM mc_counters WHERE server = 'cc_miss'")[0][0]
q(admin, "GRANT EXECUTE ON FUNCTION mc_counters_reset() TO cc_user")
q(user, "SELECT mc_counters_reset()")
t.is_(q(dash, "SELECT sum(queued + sent + lost + degraded)::int, bool_and(stats_reset > %s) "
        "FROM mc_counters", (r0,)), [(0, True)],
      "a granted reset zeroes every count and moves stats_reset")
t.is_(counts(other, "cc_down"), (0, 0, 0, 0, "cluster"), "... in every database")
q(a, "SELECT mc_get('cc:1', 'cc_miss')")
q(a, "BEGIN")
q(a, "SELECT mc_delete_on_commit('cc:1', 'cc_down')")
q(a, "COMMIT")
t.is_((counts(dash, "cc_miss")[3], counts(dash, "cc_down")[:3]), (1, (1, 0, 1)),
      "a session that counted before the reset counts from zero after it")

# ---- overflow -------------------------------------------------------------------
# 2 slots are taken (cc_miss, cc_down); SLOTS + 2 more servers overflow by 4
n = SLOTS + 2
q(admin, "DO $$ BEGIN FOR i IN 1..%d LOOP EXECUTE format("
         "'CREATE SERVER ov_%%s FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %%L, on_failure %%L)',"
         " i, '%s', 'miss'); END LOOP; END $$" % (n, closed))
q(admin, "GRANT USAGE ON FOREIGN SERVER ov_1 TO cc_user")
q(a, "SELECT count(mc_get('k', 'ov_' || i)) FROM generate_series(1, %d) i" % n)
over = q(dash, "SELECT degraded FROM mc_counters WHERE server IS NULL")
t.is_(over, [(4,)], "once every slot is taken, the overflow row counts the rest")
t.is_(q(dash, "SELECT sum(degraded)::int FROM mc_counters"), [(n + 1,)],
      "no count is dropped")
t.is_(q(user, "SELECT count(*) FROM mc_counters WHERE server IS NULL"), [(0,)],
      "the overflow row is only for pg_read_all_stats")
t.ok("mcfdw counters are full" in pg.log_text(), "the overflow is LOGged")
q(admin, "GRANT pg_read_all_stats TO cc_user")
t.is_(q(user, "SELECT degraded FROM mc_counters WHERE server IS NULL"), [(4,)],
      "... shown to members of pg_read_all_stats")

for c in (a, dash, user, other, admin):
    c.close()
t.done()
