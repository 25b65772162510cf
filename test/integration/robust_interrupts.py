"""robust_interrupts: hostile streams cannot make a backend unkillable or
unbounded.

- A server answering a multi-get with "EN" lines forever: an EN answers no
  quiet request, so the stream is out of step and the call ends at once
  (an error, or with failover the instance dropped); a VA announcing a value
  past max_reply_size is refused before it is read; cancel and terminate
  reach a multi-get waiting on a silent instance.
- STAT lines forever, with no END: mc_stats and the views end with an error
  while the backend's memory stays bounded.
- A STAT reply trickled a byte per 100 ms ends within about io_timeout, and
  a server with io_timeout '0' cannot hang mc_server_stats.

Every case is bounded: past its bound the test stops the hostile server (so
the backend errors out), then cancels, then terminates; it never leaves a
runaway backend behind."""

import mcdb
import mcrig
from hostile import HostileServer, backend_rss_kb, run_bounded

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_robust_interrupts")
admin = db.connect()
MB = 1024


def fresh(behaviour, name, **options):
    hs = HostileServer(behaviour).start()
    db.server(admin, name, hs.addr, **options)
    return hs


MULTI = "SELECT count(*) FROM mc_get_multi(ARRAY['a','b','c'], 'en')"

# 1. endless "EN" lines: under q a miss is never answered, so the first EN
# says the stream is out of step; the multi-get ends at once, by itself
for failover in ("off", "on"):
    hs = fresh("endless_en", "en", io_timeout="10s", failover=failover, failure_limit="100")
    c = db.connect()
    db.sql(c, "SET statement_timeout = '20s'")
    o = run_bounded(c, MULTI, bound=15, way_out=hs.stop, admin=admin)
    if failover == "off":
        t.ok(not o.overran and o.elapsed < 3 and o.pgcode == "08P01",
             "endless EN stream, failover off: the multi-get ends at once with 08P01", repr(o))
    else:
        last = db.sql(c, "SELECT last_error FROM mc_servers WHERE server = 'en'")
        t.ok(not o.overran and o.elapsed < 3 and o.rows == [(0,)]
             and "does not match" in (last[0][0] or ""),
             "endless EN stream, failover on: the instance is dropped at once (0 rows, "
             "the cause in mc_servers)", repr(o), repr(last))
    hs.stop()
    c.close()
    db.sql(admin, "DROP SERVER en")

# 2. a VA announcing a value past max_reply_size: 54000 before it is read,
# raised even with failover on (failing over would fetch it again)
for failover in ("off", "on"):
    hs = fresh("huge_va", "en", failover=failover)
    c = db.connect()
    pid = c.get_backend_pid()
    base = backend_rss_kb(pid)
    o = run_bounded(c, MULTI, bound=15, way_out=hs.stop, admin=admin)
    grew = (backend_rss_kb(pid) - base) // MB
    t.ok(not o.overran and o.elapsed < 3 and o.pgcode == "54000" and grew < 100,
         "a value of 1 GB announced, failover %s: 54000 at once, memory bounded (grew %d MB)"
         % (failover, grew), repr(o))
    hs.stop()
    c.close()
    db.sql(admin, "DROP SERVER en")

# 3. pg_cancel_backend and pg_terminate_backend reach a multi-get waiting on
# an instance that never answers (io_timeout 0: only they can end it)
SILENT = mcrig.hang_addr()
db.server(admin, "en", SILENT, io_timeout="0")
for how in ("cancel", "terminate"):
    c = db.connect()
    pid = c.get_backend_pid()
    fired = []

    def fire_after_1s(elapsed):
        if elapsed > 1.0 and not fired:
            fired.append(elapsed)
            admin.cursor().execute("SELECT pg_%s_backend(%%s)" % how, (pid,))
        return False

    o = run_bounded(c, MULTI, bound=15, admin=admin, during=fire_after_1s)
    t.ok(fired and not o.overran and o.elapsed < 4,
         "multi-get on a silent instance, io_timeout 0: pg_%s_backend ends it" % how, repr(o))
    if how == "cancel":
        t.is_(o.pgcode, "57014", "and the cancel is reported as such")
    c.close()
    if how == "terminate":
        mcrig.wait_for(lambda: not db.value(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                            (pid,)), 20, what="backend %d gone" % pid)
db.sql(admin, "DROP SERVER en")

# 4. STAT lines forever, no END: bounded memory, and an error
LIMIT_KB = 200 * MB
for name, sql in (("mc_stats('st')", "SELECT count(*) FROM mc_stats('st')"),
                  ("the mc_server_stats view", "SELECT count(*) FROM mc_server_stats"),
                  ("the mc_stats view", "SELECT count(*) FROM mc_stats")):
    hs = fresh("stats_forever", "st", io_timeout="2s")
    c = db.connect()
    db.sql(c, "SET statement_timeout = '30s'")
    pid = c.get_backend_pid()
    base = backend_rss_kb(pid)
    peak = [base]

    def watch(elapsed):
        rss = backend_rss_kb(pid)
        peak[0] = max(peak[0], rss)
        return rss - base > LIMIT_KB    # stop the server before the machine suffers

    o = run_bounded(c, sql, bound=20, way_out=hs.stop, admin=admin, during=watch)
    grew = (peak[0] - base) // MB
    t.ok(grew < 200 and not o.overran,
         "STAT stream without END, %s: memory stays bounded (grew %d MB, %d MB sent)"
         % (name, grew, hs.sent >> 20), repr(o))
    # a view reports an unreachable instance instead of failing: then the
    # cause is in mc_servers
    last = db.sql(c, "SELECT last_error FROM mc_servers WHERE server = 'st'") if not o.stuck else None
    t.ok(not o.overran and ((o.error is not None and o.pgcode != "57014") or (last and last[0][0])),
         "STAT stream without END, %s: ends by itself with an error (raised or in mc_servers)" % name,
         repr(o), "mc_servers.last_error: %r" % (last,))
    hs.stop()
    c.close()
    db.sql(admin, "DROP SERVER st")

# 5. a STAT reply trickled a byte per 100 ms: ends within about io_timeout
hs = fresh("stats_trickle", "tr", io_timeout="1s")
c = db.connect()
db.sql(c, "SET statement_timeout = '10s'")
o = run_bounded(c, "SELECT count(*) FROM mc_stats('tr')", bound=15, way_out=hs.stop, admin=admin)
t.ok(o.elapsed < 3.5 and o.pgcode != "57014",
     "trickled STAT reply (io_timeout 1s): mc_stats ends within about io_timeout, not at statement_timeout",
     repr(o))
hs.stop()
c.close()
db.sql(admin, "DROP SERVER tr")

# 6. io_timeout '0' on a server that never answers: the view still ends
mc = mcrig.start_memcached()
db.server(admin, "good", mc.addr)
db.server(admin, "silent", mcrig.hang_addr(), io_timeout="0")
c = db.connect()
o = run_bounded(c, "SELECT count(*) FROM mc_server_stats", bound=10, way_out=c.cancel, admin=admin)
t.ok(not o.overran, "a server with io_timeout '0' that never answers does not hang mc_server_stats",
     repr(o))
c.close()

admin.close()
t.done()
