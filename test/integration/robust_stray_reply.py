"""robust_stray_reply: an unsolicited reply never becomes a value.

A proxy sends "VA 6 / PLANTD" 50 ms after a correct reply, on a pooled
socket.  The next single-key read (mc_get, mc_gets, mc_get_bytea,
mc_gets_bytea) must return its own key's value or raise, never PLANTD and
never another key's value; and a socket found holding unexpected bytes is
discarded (a new connection), however short or long it sat idle; so is
one a multi-get finds holding bytes before it writes, even a stray "MN"."""

import time

import mcdb
import mcrig
from hostile import STRAY, HostileProxy, HostileServer

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = HostileProxy(mc.port).start()
db = mcdb.Database("mcfdw_it_robust_stray")
c = db.connect()
db.server(c, "direct", mc.addr)
db.server(c, "px", px.addr, io_timeout="1s")
keys = ["k%d" % i for i in range(1, 8)]
for k in keys:
    db.sql(c, "SELECT mc_set(%s, %s, server => 'direct')", (k, "V" + k))


def call(c, sql):
    try:
        v = db.sql(c, sql)[0][0]
        return ("ok", bytes(v) if isinstance(v, memoryview) else v)
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0])


def text(v):
    return v


def bytea(v):
    return None if v is None else bytes(v).decode()


def case(sql, conv, idle, label, stray=STRAY, reads=("k2", "k3"), first="k1"):
    """On a new backend: read `first` (a stray follows its reply), wait
    `idle`, then read each of `reads`; every read gives its own value or an
    error, and the socket that held the stray is not used again."""
    c = db.connect()
    call(c, sql % first)                   # pooled, in step
    px.stray = stray
    px.stray_next = 1
    r = [(first, call(c, sql % first))]
    mcrig.wait_for(lambda: px.stray_next == 0 and px.strays_sent > case.sent, 5, what="stray")
    case.sent = px.strays_sent
    time.sleep(idle)
    accepted = px.accepted
    r.append((reads[0], call(c, sql % reads[0])))
    new_conn = px.accepted - accepted
    for k in reads[1:]:
        r.append((k, call(c, sql % k)))
    wrong = [(k, conv(v)) for k, (kind, v) in r if kind == "ok" and conv(v) != "V" + k]
    t.ok(not wrong, "%s, stray then %.1fs idle: no read returns a value not its own" % (label, idle),
         "wrong: %r" % (wrong,), "replies: %r" % (r,))
    t.ok(new_conn >= 1, "%s, stray then %.1fs idle: the socket holding it is discarded" % (label, idle),
         "new connections for the next read: %d" % new_conn)
    kind, v = call(c, sql % "k4")
    t.is_((kind, conv(v) if kind == "ok" else v), ("ok", "Vk4"),
          "%s, stray then %.1fs idle: the call after is in step" % (label, idle))
    c.close()


case.sent = 0

GET = "SELECT mc_get('%s', server => 'px')"
for idle in (0.1, 0.5, 1.5):
    case(GET, text, idle, "mc_get")
case("SELECT mc_get_bytea('%s', server => 'px')", bytea, 0.1, "mc_get_bytea")
case("SELECT value FROM mc_gets('%s', server => 'px')", text, 0.1, "mc_gets")
case("SELECT value FROM mc_gets_bytea('%s', server => 'px')", bytea, 0.1, "mc_gets_bytea")
# a stray that is a plausible value of another key, and a stray miss
case(GET, text, 0.1, "mc_get, stray is k5's value", stray=b"VA 3\r\nVk5\r\n", reads=("k6", "k7"))
case(GET, text, 0.1, "mc_get, stray is a miss (EN)", stray=b"EN\r\n", reads=("k6", "k7"))
# memcached before 1.6.18: a miss carries no token.  Refused by default (it
# cannot be told from a stray miss), taken as a miss with legacy_misses.
old = HostileServer("old_miss").start()
db.server(c, "old", old.addr, io_timeout="1s")
db.server(c, "old_lenient", old.addr, io_timeout="1s", legacy_misses="true")
kind, v = call(c, "SELECT mc_get('nokey', server => 'old')")
t.is_(kind, "error", "a token-less miss is refused by default")
try:
    db.sql(c, "SELECT mc_get('nokey', server => 'old')")
except Exception as e:  # noqa: BLE001
    t.ok("legacy_misses" in str(e), "... and the error names legacy_misses", str(e))
else:
    t.ok(False, "... and the error names legacy_misses", "no error")
t.is_(call(c, "SELECT mc_get('nokey', server => 'old_lenient')"), ("ok", None),
      "with legacy_misses a token-less miss is a miss")
old.stop()
# with legacy_misses a stray EN may read as a miss, never as a value
db.server(c, "px_lenient", px.addr, io_timeout="1s", legacy_misses="true")
c2 = db.connect()
call(c2, "SELECT mc_get('k1', server => 'px_lenient')")
px.stray = b"EN\r\n"
px.stray_next = 1
call(c2, "SELECT mc_get('k1', server => 'px_lenient')")
mcrig.wait_for(lambda: px.stray_next == 0 and px.strays_sent > case.sent, 5, what="stray")
case.sent = px.strays_sent
time.sleep(0.1)
got = [(k, call(c2, "SELECT mc_get('%s', server => 'px_lenient')" % k)) for k in ("k2", "k3", "k4")]
wrong = [(k, v) for k, (kind, v) in got if kind == "ok" and v is not None and v != "V" + k]
t.ok(not wrong, "legacy_misses, stray EN: no read returns a value not its own", repr(got))
t.is_(got[-1][1], ("ok", "Vk4"), "legacy_misses, stray EN: the stream is back in step")
c2.close()
# mc_get_multi is tied to its replies by opaque: the stray never shows up
MULTI = "SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM mc_get_multi(ARRAY['k1','k2','%s'], 'px')"
c = db.connect()
call(c, MULTI % "k3")
px.stray = STRAY
px.stray_next = 1
call(c, MULTI % "k3")
time.sleep(0.2)
kind, v = call(c, MULTI % "k5")
t.ok(kind == "error" or v == "k1=Vk1,k2=Vk2,k5=Vk5", "mc_get_multi after a stray: its own values or an error",
     repr((kind, v)))
c.close()
# a stray "MN" on the idle socket would end the next multi-get before its
# replies came, and those replies would be read by the one after as its own
c = db.connect()
call(c, MULTI % "k3")
px.stray = b"MN\r\n"
px.stray_next = 1
call(c, MULTI % "k3")
mcrig.wait_for(lambda: px.stray_next == 0, 5, what="stray")
time.sleep(0.2)
first = call(c, MULTI % "k3")
time.sleep(0.2)
second = call(c, "SELECT string_agg(key || '=' || value, ',' ORDER BY key) "
                 "FROM mc_get_multi(ARRAY['k5','k6','k7'], 'px')")
t.ok(first in (("ok", "k1=Vk1,k2=Vk2,k3=Vk3"),) or first[0] == "error",
     "mc_get_multi after a stray MN: its own values or an error, not all misses", repr(first))
t.ok(second in (("ok", "k5=Vk5,k6=Vk6,k7=Vk7"),) or second[0] == "error",
     "the multi-get after it: its own values, never those of the keys before", repr(second))
px.stray = STRAY
c.close()
px.stop()
t.done()
