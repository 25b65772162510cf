"""robust_at_most_once: a write whose reply was lost is not sent again.

A proxy forwards the request, lets memcached execute it, then resets the
client connection instead of forwarding the reply.  mc_incr, mc_decr,
mc_append, mc_prepend, mc_add and mc_cas must each have been applied exactly
once (checked in memcached directly) and the call must report an error.  A
pooled socket that memcached closed while idle (a restart) is still retried
transparently."""

import mcdb
import mcrig
from hostile import HostileProxy

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = HostileProxy(mc.port).start()
db = mcdb.Database("mcfdw_it_robust_amo")
c = db.connect()
db.server(c, "direct", mc.addr)
db.server(c, "px", px.addr, io_timeout="2s")


def raw_get(key):
    return mcrig.mc_raw_get(mc.port, key)


def attempt(sql, args=None):
    try:
        return ("ok", db.value(c, sql, args))
    except Exception as e:  # noqa: BLE001
        return ("error", (str(e).splitlines() or [""])[0])


cases = [
    # name, setup value (None: absent), call, value expected after one execution
    ("mc_incr", "10", "SELECT mc_incr('amo:k', 1, server => 'px')", "11"),
    ("mc_decr", "10", "SELECT mc_decr('amo:k', 1, server => 'px')", "9"),
    ("mc_append", "x", "SELECT mc_append('amo:k', 'y', server => 'px')", "xy"),
    ("mc_prepend", "x", "SELECT mc_prepend('amo:k', 'y', server => 'px')", "yx"),
    ("mc_add", None, "SELECT mc_add('amo:k', 'added', server => 'px')", "added"),
    ("mc_incr with initial", None, "SELECT mc_incr('amo:k', 5, 100, server => 'px')", "100"),
]
for name, setup, sql, want in cases:
    db.sql(c, "SELECT mc_delete('amo:k', server => 'direct')")
    if setup is not None:
        db.sql(c, "SELECT mc_set('amo:k', %s, server => 'direct')", (setup,))
    db.value(c, "SELECT mc_get('amo:warm', server => 'px')")     # a pooled socket
    drops = px.drops_done
    px.drop_next = 1
    r = attempt(sql)
    px.drop_next = 0
    t.ok(px.drops_done == drops + 1, "%s: the proxy executed it and dropped the reply" % name)
    t.is_(raw_get("amo:k"), want, "%s: applied exactly once" % name)
    t.ok(r[0] == "error", "%s: a lost reply is reported as an error" % name, repr(r))

# mc_cas: executed once, the reply lost; a resend would fail on the new cas
# and report false, hiding that the write happened
db.sql(c, "SELECT mc_set('amo:c', 'old', server => 'direct')")
cas = db.value(c, "SELECT cas FROM mc_gets('amo:c', server => 'direct')")
db.value(c, "SELECT mc_get('amo:warm', server => 'px')")
px.drop_next = 1
r = attempt("SELECT mc_cas('amo:c', 'new', %s, server => 'px')", (cas,))
px.drop_next = 0
t.is_(raw_get("amo:c"), "new", "mc_cas: applied once")
t.ok(r[0] == "error", "mc_cas: a lost reply is reported as an error, not as a cas mismatch", repr(r))

# a pooled socket memcached closed while idle is still retried for reads
# (and for idempotent writes): restart memcached under the pool
db.server(c, "dm", mc.addr)
db.sql(c, "SELECT mc_set('amo:r', 'before', server => 'dm')")
t.is_(db.value(c, "SELECT mc_get('amo:r', server => 'dm')"), "before", "read before the restart")
mc.restart()
mcrig.mc_command(mc.port, b"set amo:r 0 0 5\r\nafter", end=(b"STORED\r\n",))
t.is_(attempt("SELECT mc_get('amo:r', server => 'dm')"), ("ok", "after"),
      "mc_get on a socket closed by a restart is retried transparently")
mc.restart()
t.is_(attempt("SELECT mc_set('amo:r', 'again', server => 'dm')"), ("ok", True),
      "mc_set on a socket closed by a restart is retried transparently")
mc.restart()
mcrig.mc_command(mc.port, b"set amo:r 0 0 5\r\nthird", end=(b"STORED\r\n",))
t.is_(attempt("SELECT value FROM mc_get_multi(ARRAY['amo:r'], 'dm')"), ("ok", "third"),
      "mc_get_multi on a socket closed by a restart is retried transparently")
mc.restart()
mcrig.mc_command(mc.port, b"set amo:n 0 0 1\r\n5", end=(b"STORED\r\n",))
t.is_(attempt("SELECT mc_incr('amo:n', 1, server => 'dm')"), ("ok", 6),
      "mc_incr on a socket found closed before the write still works (not executed twice)")
t.is_(raw_get("amo:n"), "6", "and was applied once")

c.close()
px.stop()
t.done()
