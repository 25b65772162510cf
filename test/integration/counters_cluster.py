"""counters_cluster: with mcfdw in shared_preload_libraries, mc_counters is
cluster-wide: a dashboard's session sees the writes another session lost at
commit and the calls it answered as misses.

The rig's cluster does not preload mcfdw (pg_regress covers the session
scope there, sql/alert_counters.sql), so this test starts a private cluster
that does, the way test/rig/lib.sh starts the rig's (initdb and pg_ctl as
the postgres OS user when run as root), and stops it at exit.  It checks:
counts across sessions, per database, rows only for usable servers, the
reset revoked from PUBLIC and counting after a reset, and the overflow row
once every slot is taken.
"""

import atexit
import os
import shutil
import subprocess
import tempfile

import psycopg2

import mcrig

t = mcrig.TAP()
PG_CONFIG = os.environ.get("PG_CONFIG", "pg_config")
BINDIR = subprocess.check_output([PG_CONFIG, "--bindir"], text=True).strip()
SLOTS = 256                     # MC_COUNTER_SLOTS in src/client/counters.c
IS_ROOT = os.geteuid() == 0


def as_pg(cmd, **kw):
    if IS_ROOT:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)


# ---- a private cluster with mcfdw preloaded ---------------------------------
rig = os.environ.get("MCFDW_RIG")
base = tempfile.mkdtemp(prefix="counters-cluster-",
                        dir=os.path.join(rig, "tmp") if rig else None)
os.chmod(base, 0o755)
if IS_ROOT:
    shutil.chown(base, "postgres", "postgres")
pgdata = os.path.join(base, "pgdata")
pglog = os.path.join(base, "postgres.log")
port = mcrig.free_port()


def stop_cluster():
    if os.path.exists(os.path.join(pgdata, "postmaster.pid")):
        as_pg([os.path.join(BINDIR, "pg_ctl"), "-D", pgdata, "-m", "immediate",
               "-w", "-t", "30", "stop"], cwd=base)
    for f in pidfiles:
        try:
            os.unlink(f)
        except OSError:
            pass
    shutil.rmtree(base, ignore_errors=True)


pidfiles = []
atexit.register(stop_cluster)

r = as_pg([os.path.join(BINDIR, "initdb"), "-D", pgdata, "-U", "postgres", "-E", "UTF8",
           "--locale=C.UTF-8", "--auth=trust", "--no-sync"], cwd=base)
if r.returncode != 0:
    t.ok(False, "initdb", r.stdout)
    t.done()
with open(os.path.join(pgdata, "postgresql.conf"), "a") as f:
    f.write("\nlisten_addresses = '127.0.0.1'\nport = %d\n"
            "unix_socket_directories = '%s'\nshared_preload_libraries = 'mcfdw'\n"
            "fsync = off\nshared_buffers = 16MB\nmax_connections = 20\n"
            "log_min_messages = log\n" % (port, base))
r = as_pg([os.path.join(BINDIR, "pg_ctl"), "-D", pgdata, "-l", pglog, "-w", "-t", "60",
           "start"], cwd=base)
if not t.ok(r.returncode == 0, "a cluster with shared_preload_libraries = 'mcfdw' starts",
            r.stdout, open(pglog).read() if os.path.exists(pglog) else ""):
    t.done()
with open(os.path.join(pgdata, "postmaster.pid")) as f:
    postmaster = int(f.readline())
if rig and os.path.isdir(os.path.join(rig, "pids")):
    # the rig kills it if this test dies before its atexit runs
    pidfiles.append(os.path.join(rig, "pids", "counters-cluster-%d.pid" % postmaster))
    with open(pidfiles[-1], "w") as f:
        f.write("%d\n" % postmaster)


def connect(dbname="postgres", user="postgres"):
    return mcrig.pg_connect(host="127.0.0.1", port=port, user=user, dbname=dbname)


def q(conn, sql, args=None):
    cur = conn.cursor()
    cur.execute(sql, args)
    return cur.fetchall() if cur.description else None


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
with open(pglog, errors="replace") as f:
    t.ok("mcfdw counters are full" in f.read(), "the overflow is LOGged")
q(admin, "GRANT pg_read_all_stats TO cc_user")
t.is_(q(user, "SELECT degraded FROM mc_counters WHERE server IS NULL"), [(4,)],
      "... shown to members of pg_read_all_stats")

for c in (a, dash, user, other, admin):
    c.close()
t.done()
