"""robust_restart: the first multi-get after a memcached restart succeeds.

memcached is killed and restarted (on the same port) while the backend holds
pooled connections to it; once the keys are stored again, mc_get_multi must
return all of them at once, with failover off and on, whether the pooled
socket sat idle briefly or for over a second."""

import time

import mcdb
import mcrig

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_robust_restart")
c = db.connect()
db.server(c, "s", mc.addr, io_timeout="2s", failover="off")
db.server(c, "sf", mc.addr, io_timeout="2s", failover="on")
KEYS = ["a", "b", "c"]


def store():
    for k in KEYS:
        mcrig.mc_command(mc.port, ("set %s 0 0 1\r\n%s" % (k, k.upper())).encode(), end=(b"STORED\r\n",))


def multi(server):
    t0 = time.monotonic()
    try:
        n = db.value(c, "SELECT count(*) FROM mc_get_multi(ARRAY['a','b','c'], %s)", (server,))
    except Exception as e:  # noqa: BLE001
        n = (str(e).splitlines() or [""])[0]
    return n, time.monotonic() - t0


store()
for server in ("s", "sf"):
    for idle in (0.0, 1.3):
        t.is_(multi(server)[0], 3, "%s: all keys before the restart" % server)
        mc.restart()
        store()
        time.sleep(idle)
        n, secs = multi(server)
        t.ok(n == 3 and secs < 1.0,
             "%s (failover %s), %.1fs after the restart: the first multi-get returns all 3 keys at once"
             % (server, "on" if server == "sf" else "off", idle),
             "got %r in %.2fs" % (n, secs))
        t.is_(multi(server)[0], 3, "%s: and the next one too" % server)
# mc_get after a restart, for comparison (works on 1.0)
mc.restart()
store()
t.is_(db.value(c, "SELECT mc_get('a', server => 's')"), "A", "mc_get after a restart")
c.close()
t.done()
