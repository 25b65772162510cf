"""robust_stray_instances: a multi-get probes every pooled socket it is
about to write on, whichever of a server's instances holds the stray.

Four memcacheds, each behind a proxy: a multi-get whose keys reach all four
keeps one pooled socket per instance.  A stray then arrives on the idle
socket of one of them (the 3rd, then the 1st and the 4th): a bare "MN",
which would end that instance's pipeline before its replies came (its keys
would read as misses, and its replies would be taken by the next
multi-get), or a value without a token.  The next multi-get must notice it
before it writes there: that socket alone is discarded (its proxy sees a
new connection, the others none), and every key comes back with its own
value, as it does in the multi-get after.  So does a socket whose proxy
closed it while idle, and a stray found after more than a second idle
(when the probe of a long-idle socket is not made a second time)."""

import time

import mcdb
import mcrig
from hostile import STRAY, HostileProxy

t = mcrig.TAP()
mcs = [mcrig.start_memcached() for _ in range(4)]
pxs = [HostileProxy(m.port).start() for m in mcs]
db = mcdb.Database("mcfdw_it_robust_stray_instances")
c = db.connect()
db.server(c, "px4", ",".join(p.addr for p in pxs), distribution="modula", io_timeout="1s")
keys = ["k%d" % i for i in range(1, 41)]
for k in keys:
    db.sql(c, "SELECT mc_set(%s, %s, server => 'px4')", (k, "V" + k))
inst = {k: i for k, i in db.sql(c, "SELECT key, instance FROM mc_route(%s, 'px4')", (keys,))}
t.is_(sorted(set(inst.values())), [1, 2, 3, 4], "the keys reach all four instances")

WANT = ",".join("%s=V%s" % (k, k) for k in sorted(keys))
MULTI = ("SELECT string_agg(key || '=' || value, ',' ORDER BY key COLLATE \"C\") "
         "FROM mc_get_multi(%s::text[], 'px4')")


def multi(c):
    try:
        return ("ok", db.sql(c, MULTI, (keys,))[0][0])
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0])


def mismatch(got):
    """The keys whose value is missing or not their own."""
    if got[0] != "ok" or got[1] is None:
        return got
    have = dict(kv.split("=", 1) for kv in got[1].split(","))
    return sorted(k for k in keys if have.get(k) != "V" + k)


def case(n, label, arm, idle=0.1):
    """On a new backend: pool all four sockets, make instance n's (1-based)
    idle socket hold a stray or close, then two multi-gets."""
    c = db.connect()
    t.is_(multi(c), ("ok", WANT), "%s on instance %d: the multi-get before, in step" % (label, n))
    arm(pxs[n - 1], c)
    time.sleep(idle)                        # the stray's bytes reach the socket
    before = [p.accepted for p in pxs]
    got = multi(c)
    opened = [p.accepted - b for p, b in zip(pxs, before)]
    t.ok(got == ("ok", WANT), "%s on instance %d: every key has its own value" % (label, n),
         "wrong or missing: %r" % (mismatch(got),))
    t.ok(opened[n - 1] >= 1, "%s on instance %d: its socket is discarded before the write" % (label, n),
         "new connections per instance: %r" % (opened,))
    t.is_([o for i, o in enumerate(opened) if i != n - 1], [0, 0, 0],
          "%s on instance %d: the other instances keep their sockets" % (label, n))
    got = multi(c)
    t.ok(got == ("ok", WANT), "%s on instance %d: the multi-get after is in step" % (label, n),
         "wrong or missing: %r" % (mismatch(got),))
    c.close()


def stray(data):
    def arm(px, c):
        sent = px.strays_sent
        px.stray = data
        px.stray_after = b"MN\r\n"          # after a whole pipeline's reply
        px.stray_next = 1
        db.sql(c, MULTI, (keys,))
        mcrig.wait_for(lambda: px.stray_next == 0 and px.strays_sent > sent, 5, what="stray")
        px.stray_after = None
    return arm


def closed(px, c):
    px.drop_all()


for n in (3, 1, 4):
    case(n, "stray MN", stray(b"MN\r\n"))
case(3, "stray value", stray(STRAY))
case(2, "closed while idle", closed)
case(3, "stray MN, 1.5s idle", stray(b"MN\r\n"), idle=1.5)
for p in pxs:
    p.stop()
t.done()
