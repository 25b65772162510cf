"""wait_event: a backend waiting on memcached says so in pg_stat_activity.

Another session sees the waiting backend with wait_event_type 'Extension'
and, from PostgreSQL 17 on, the named event 'Memcached' (before 17 the
type's generic event, 'Extension'): for a single-key get and for a
multi-get, each against a listener that accepts and never answers."""

import threading
import time

import mcdb
import mcrig

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_wait_event")
admin = db.connect()
major = int(db.value(admin, "SHOW server_version_num")) // 10000
expected = "Memcached" if major >= 17 else "Extension"
db.server(admin, "hung", mcrig.hang_addr(), io_timeout="3s",
          connect_timeout="3s")

for what, query in (("mc_get", "SELECT mc_get('k', 'hung')"),
                    ("mc_get_multi", "SELECT * FROM mc_get_multi(ARRAY['a', 'b'], 'hung')")):
    c = db.connect()
    pid = db.value(c, "SELECT pg_backend_pid()")
    failed = []

    def run():
        try:
            db.sql(c, query)
        except Exception as e:          # the io_timeout ends it
            failed.append(e)

    th = threading.Thread(target=run)
    th.start()
    seen = None
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline and seen is None:
        row = db.sql(admin, "SELECT wait_event_type, wait_event FROM pg_stat_activity "
                            "WHERE pid = %s AND state = 'active'", (pid,))
        if row and row[0][0] == "Extension":
            seen = row[0]
        else:
            time.sleep(0.02)
    th.join(10)
    t.ok(seen == ("Extension", expected),
         "%s waiting on a silent server: pg_stat_activity shows Extension / %s (PostgreSQL %d)"
         % (what, expected, major), repr(seen))
    t.ok(not th.is_alive() and len(failed) == 1,
         "%s: the wait ends at io_timeout" % what, repr(failed))
    c.close()

t.done()
