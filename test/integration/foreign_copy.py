"""foreign_copy: COPY FROM into a foreign table, and rows routed into a
foreign partition, on the wire.

- COPY into a foreign table, and COPY into a partitioned table with a
  foreign partition, go in pipelined batches of batch_size rows: with every
  reply held back 0.3 s, 300 rows take a few batches' time, not 300 round
  trips (90 s).  memcached executed each row once.
- A COPY whose reply is lost after the server got the rows: an error saying
  they may or may not have been written, each row executed once (not
  resent); the same for a row an INSERT routes into a foreign partition,
  and for an INSERT ... ON CONFLICT DO NOTHING (an add).
- After each: the session writes in step.
"""

import io
import time

import mcdb
import mcrig
from faultproxy import FaultProxy
from hostile import HostileProxy

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_foreign_copy")
c = db.connect()


def copy(conn, table, rows):
    data = "".join("%s\t%s\n" % r for r in rows)
    conn.cursor().copy_expert("COPY %s FROM STDIN" % table, io.StringIO(data))


def attempt(fn):
    """("ok", result) or ("error", sqlstate, message, detail)."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001
        diag = getattr(e, "diag", None)
        return ("error", getattr(e, "pgcode", None), (str(e).splitlines() or [""])[0],
                getattr(diag, "message_detail", None))


def sets():
    return int(mc.stats()["cmd_set"])


# ---- pipelined batches --------------------------------------------------------
fp = FaultProxy(mc.port).start()
db.server(c, "slow", fp.addr, io_timeout="10s")
db.sql(c, "CREATE FOREIGN TABLE fslow (key text, value text) SERVER slow "
          "OPTIONS (key_prefix 'cp:', batch_size '100')")
db.sql(c, "CREATE TABLE parted (key text, value text) PARTITION BY LIST (substr(key, 1, 1))")
db.sql(c, "CREATE TABLE parted_l PARTITION OF parted FOR VALUES IN ('l')")
db.sql(c, "CREATE FOREIGN TABLE parted_f PARTITION OF parted FOR VALUES IN ('f') SERVER slow "
          "OPTIONS (key_prefix 'pp:', batch_size '100')")
db.sql(c, "SELECT count(*) FROM fslow WHERE key = 'warm'")    # a pooled socket
fp.mode = "delay"
fp.delay = 0.3
for label, table, rows, prefix in (
        ("COPY into a foreign table", "fslow",
         [("k%d" % i, "v%d" % i) for i in range(300)], "cp:"),
        ("COPY into a partitioned table", "parted",
         [("f%d" % i, "v%d" % i) for i in range(300)] + [("l%d" % i, "v") for i in range(20)],
         "pp:")):
    before = sets()
    start = time.monotonic()
    r = attempt(lambda: copy(c, table, rows))
    elapsed = time.monotonic() - start
    t.ok(r[0] == "ok" and elapsed < 20,
         "%s: 300 rows in pipelined batches (%.1f s with 0.3 s per reply)" % (label, elapsed),
         repr(r))
    t.is_(sets() - before, 300, "%s: each row executed once" % label)
    t.is_([mcrig.mc_raw_get(mc.port, prefix + k) for k in (rows[0][0], rows[299][0])],
          [rows[0][1], rows[299][1]], "%s: the rows are stored" % label)
fp.mode = "pass"
fp.stop()

# ---- a lost reply: an error, never a second send ----------------------------
px = HostileProxy(mc.port).start()
db.server(c, "px", px.addr, io_timeout="2s")
db.sql(c, "CREATE FOREIGN TABLE fpx (key text, value text) SERVER px OPTIONS (key_prefix 'lost:')")
db.sql(c, "CREATE TABLE parted2 (key text, value text) PARTITION BY LIST (substr(key, 1, 1))")
db.sql(c, "CREATE FOREIGN TABLE parted2_f PARTITION OF parted2 FOR VALUES IN ('f') SERVER px "
          "OPTIONS (key_prefix 'lost:')")
cases = (
    ("COPY", lambda: copy(c, "fpx", [("c1", "one"), ("c2", "two"), ("c3", "three")]),
     {"c1": "one", "c2": "two", "c3": "three"}),
    ("routed INSERT", lambda: db.sql(c, "INSERT INTO parted2 VALUES ('f1', 'routed')"),
     {"f1": "routed"}),
    ("INSERT ... ON CONFLICT DO NOTHING",
     lambda: db.sql(c, "INSERT INTO fpx VALUES ('a1', 'added') ON CONFLICT DO NOTHING"),
     {"a1": "added"}),
)
for label, fn, stored in cases:
    db.sql(c, "SELECT count(*) FROM fpx WHERE key = 'warm'")   # a pooled socket
    before = sets()
    drops = px.drops_done
    px.drop_match = b"ms "
    px.drop_next = 1
    r = attempt(fn)
    px.drop_next = 0
    px.drop_match = None
    t.ok(px.drops_done == drops + 1, "%s: the proxy executed it and dropped the reply" % label)
    t.ok(r[0] == "error" and r[1] == "08006" and "may or may not" in (r[3] or ""),
         "%s whose reply is lost: an error saying it may or may not have run" % label, repr(r))
    t.is_((sets() - before, {k: mcrig.mc_raw_get(mc.port, "lost:" + k) for k in stored}),
          (len(stored), stored), "%s whose reply is lost: executed once, not resent" % label)
    t.is_(attempt(lambda: db.sql(c, "INSERT INTO fpx VALUES ('after', %s) RETURNING key",
                                 (label,))),
          ("ok", [("after",)]), "%s: the session writes in step afterwards" % label)
px.stop()
t.done()
