"""robust_update_stray: a foreign table's UPDATE is tied to its own reply.

A proxy sends a stray "NS" (no opaque token) right after the scan that
finds an UPDATE's row, so it waits on the socket when the row's replace
goes out.  The replace carries an opaque token like every single-key
request, so the stray cannot pass for its answer ("not stored": the row
skipped, although memcached replaced the item): the row is updated and
counted, and the item holds the new value.  The same with the table's cas
column (a compare-and-swap, never sent twice): updated, or an error; never
a silent skip of a row that was written.  And the key of a replace is
still encoded as keys.c encodes it (a key with a space goes base64)."""

import mcdb
import mcrig
from hostile import HostileProxy

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = HostileProxy(mc.port).start()
px.stray_delay = 0.0
# the stray follows the scan's whole reply (its pipeline's MN), not a part of it
px.stray_after = b"MN\r\n"
db = mcdb.Database("mcfdw_it_robust_update_stray")
admin = db.connect()
db.server(admin, "direct", mc.addr)
db.server(admin, "px", px.addr, io_timeout="2s")
db.sql(admin, "CREATE FOREIGN TABLE t (key text, value text) SERVER px")
db.sql(admin, "CREATE FOREIGN TABLE tc (key text, value text, cas bigint) SERVER px")


def attempt(c, q, args=None):
    cur = c.cursor()
    try:
        cur.execute(q, args)
        return ("ok", cur.rowcount)
    except Exception as e:  # noqa: BLE001
        c.rollback()
        return ("error", (str(e).splitlines() or [""])[0])


def direct(key):
    return db.value(admin, "SELECT mc_get(%s, server => 'direct')", (key,))


def stray_update(table, key, value, rounds=5):
    """UPDATE table's row key to value `rounds` times, each on a new
    backend whose scan reply is followed at once by a stray "NS"."""
    out = []
    for i in range(rounds):
        db.sql(admin, "SELECT mc_set(%s, 'old', server => 'direct')", (key,))
        c = db.connect()
        c.autocommit = True
        attempt(c, "SELECT count(*) FROM %s WHERE key = 'warm'" % table)  # pooled, in step
        px.stray = b"NS\r\n"
        px.stray_next = 1
        r = attempt(c, "UPDATE %s SET value = %%s WHERE key = %%s" % table, ("%s%d" % (value, i), key))
        px.stray_next = 0
        out.append((r, direct(key), "%s%d" % (value, i)))
        c.close()
    return out


res = stray_update("t", "u1", "new")
skipped = [r for r in res if r[0] == ("ok", 0)]
t.ok(not skipped, "UPDATE after a stray NS: the row is not skipped", repr(res))
t.ok(all(r[0] == ("ok", 1) and r[1] == r[2] for r in res),
     "UPDATE after a stray NS: the row is updated, counted once, the item holds the new value", repr(res))

res = stray_update("tc", "u2", "cas")
t.ok(all(r[0] == ("ok", 1) and r[1] == r[2] or r[0][0] == "error" for r in res),
     "compare-and-swap UPDATE after a stray NS: updated, or an error; never a skipped row that was written",
     repr(res))

c = db.connect()
c.autocommit = True
db.sql(c, "SELECT mc_set('a key', 'old', server => 'direct')")
t.is_(attempt(c, "UPDATE t SET value = 'spaced' WHERE key = 'a key'"), ("ok", 1),
      "UPDATE of a key with a space: one row")
t.is_(direct("a key"), "spaced", "... written under the key mc_get reads")
c.close()
px.stop()
t.done()
