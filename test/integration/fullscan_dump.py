"""fullscan_dump: a full scan of a foreign table (allow_full_scan) over a
real 100,000-item cache lists every key of the table's prefix exactly once,
in bounded memory, skips the items that cannot be keys of the table, and
can be cancelled (statement_timeout, pg_cancel_backend) mid-way; against
hostile servers, a dump that never ends or trickles is ended by
statement_timeout or a cancel, a stalled one by io_timeout, a BUSY reply
(another crawl running, real or faked) is a clear error; after each, the
backend's next call works and the interrupted connection is not reused."""

import base64
import socket
import threading
import time

import hostile
import mcdb
import mcrig

t = mcrig.TAP()
ms = [mcrig.start_memcached("-m", "256") for _ in range(2)]
db = mcdb.Database("mcfdw_it_fullscan_dump")
c = db.connect()
admin = db.connect()
db.server(c, "big", ",".join(m.addr for m in ms), io_timeout="10s", key_prefix="app:",
          allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE t (key text, value text) SERVER big "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
N = 100000

for lo in range(1, N + 1, 10000):
    db.sql(c, "SELECT mc_set_multi(ARRAY(SELECT 't:' || i FROM generate_series(%d, %d) i), "
              "ARRAY(SELECT 'v' || i FROM generate_series(%d, %d) i), server => 'big')"
           % (lo, lo + 9999, lo, lo + 9999))
# another table's prefix on the same server, and keys outside the server's
db.sql(c, "SELECT mc_set_multi(ARRAY(SELECT 'u:' || i FROM generate_series(1, 1000) i), "
          "ARRAY(SELECT 'x' FROM generate_series(1, 1000)), server => 'big')")
for m in ms:
    mcrig.mc_command(m.port, "set t:outside 0 0 1\r\nx", end=(b"STORED\r\n",))


def ms_b64(port, raw):
    """Store raw (bytes) as a key, through the meta protocol's base64 form."""
    cmd = b"ms " + base64.b64encode(raw) + b" 1 b\r\nz"
    return mcrig.mc_command(port, cmd, end=(b"HD\r\n",))


# under the prefix, but no key of the table: a NUL byte, bytes that are not UTF-8
ms_b64(ms[0].port, b"app:t:nul\x00key")
ms_b64(ms[0].port, b"app:t:bad\xff\xfeutf8")
# and one that is: a space and UTF-8 (written where the ring routes it)
db.sql(c, "SELECT mc_set('t:spaced é', 'z', server => 'big')")
items = sum(int(m.stats()["curr_items"]) for m in ms)
t.is_(items, N + 1000 + 2 + 3, "100,000 items of the table and 1,005 others stored over 2 instances")

pid = db.value(c, "SELECT pg_backend_pid()")


def vm(field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])   # kB
    return None


db.sql(c, "SET work_mem = '1MB'")
hwm0 = vm("VmHWM")
t0 = time.monotonic()
row = db.sql(c, "SELECT count(*), count(DISTINCT key), "
                "count(*) FILTER (WHERE value = 'v' || key), "
                "count(*) FILTER (WHERE key = 'spaced é') FROM t")[0]
elapsed = time.monotonic() - t0
t.is_(tuple(row), (N + 1, N + 1, N, 1),
      "every key of the table listed exactly once, values right, the UTF-8 key too (%.2f s)" % elapsed)
growth = vm("VmHWM") - hwm0
t.ok(growth < 6 * 1024,
     "peak backend memory grew by %d kB for 100,000 keys (< 6 MB: keys and rows spill past work_mem)"
     % growth)
plan = "\n".join(r[0] for r in db.sql(
    c, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT key FROM t"))
t.ok("Memcached Items Listed: %d" % items in plan and "Memcached Keys Kept: %d" % (N + 1) in plan
     and "Memcached Keys Skipped: 2" in plan,
     "EXPLAIN ANALYZE: every item listed, the NUL and non-UTF-8 keys skipped", plan)

# items that vanish between the dump and their fetch give no row: 2,500
# keys are fetched in batches of 1,000, and the first row checked deletes
# them all, so only the first batch's rows come back
db.sql(c, "CREATE FOREIGN TABLE vt (key text, value text) SERVER big "
          "OPTIONS (key_prefix 'v:', allow_full_scan 'true')")
db.sql(c, "INSERT INTO vt SELECT g::text, 'x' FROM generate_series(1, 2500) g")
db.sql(c, """CREATE FUNCTION vanish_once() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('it.vanished', true) IS DISTINCT FROM 'y' THEN
    PERFORM set_config('it.vanished', 'y', false);
    PERFORM mc_delete_multi(ARRAY(SELECT 'v:' || g FROM generate_series(1, 2500) g), 'big');
  END IF;
  RETURN true;
END $$""")
t.is_(db.value(c, "SELECT count(*) FROM vt WHERE vanish_once()"), 1000,
      "keys deleted after the dump give no row (only the batch already fetched comes back)")
t.is_(db.value(c, "SELECT count(*) FROM vt"), 0, "and the next scan lists none of them")

# planning asks for the item count within a short bound: an instance whose
# connect hangs costs it at most that, once
hole = hostile.SynBlackhole()
if hole.blocks():
    db.server(c, "hole", hole.addr, connect_timeout="10s", allow_full_scan="true")
    db.sql(c, "CREATE FOREIGN TABLE holet (key text) SERVER hole OPTIONS (allow_full_scan 'true')")
    t0 = time.monotonic()
    rows = db.sql(c, "EXPLAIN SELECT * FROM holet")
    first = time.monotonic() - t0
    t0 = time.monotonic()
    db.sql(c, "EXPLAIN SELECT * FROM holet")
    second = time.monotonic() - t0
    t.ok(first < 1.0 and second < 0.1 and "rows=1000" in rows[0][0],
         "planning with an instance that never answers: %.2f s, then %.3f s (cached), default estimate"
         % (first, second), repr(rows))
    db.sql(c, "DROP FOREIGN TABLE holet")
    db.sql(c, "DROP SERVER hole")
else:
    t.skip("planning with an instance that never answers", "connects do not hang here")
hole.stop()


def interrupted(sql, way, after, bound=15.0):
    """Run sql on c; interrupt it `after` s in (way: 'cancel', or a
    statement_timeout already set); return (error, elapsed)."""
    if way == "cancel":
        timer = threading.Timer(after, lambda: admin.cursor().execute(
            "SELECT pg_cancel_backend(%s)", (pid,)))
        timer.start()
    out = hostile.run_bounded(c, sql, bound=bound, admin=admin)
    if way == "cancel":
        timer.cancel()
    return out


def reset_timeout():
    for _ in range(20):
        try:
            db.sql(c, "RESET statement_timeout")
            return
        except Exception:  # noqa: BLE001
            time.sleep(0.1)


# cancel and statement_timeout during the big scan
db.sql(c, "SET statement_timeout = '60ms'")
out = hostile.run_bounded(c, "SELECT count(*) FROM t", bound=15, admin=admin)
reset_timeout()
t.ok(out.pgcode == "57014" and "statement timeout" in (out.error or "") and not out.overran,
     "statement_timeout ends a 100,000-key full scan (after %.2f s)" % out.elapsed, repr(out))
out = interrupted("SELECT count(*) FROM t", "cancel", 0.03)
t.ok(out.pgcode == "57014" and "user request" in (out.error or "") and not out.overran,
     "pg_cancel_backend ends it too (after %.2f s)" % out.elapsed, repr(out))
t.is_(db.value(c, "SELECT count(*) FROM t"), N + 1, "the next full scan is complete")
t.is_(db.value(c, "SELECT value FROM t WHERE key = '77'"), "v77", "and so is a keyed read")

# another client's crawl, stalled because that client does not read: memcached
# 1.6.18 does not answer a second dump at all (no BUSY), so io_timeout ends it
db.sql(c, "ALTER SERVER big OPTIONS (SET io_timeout '1s')")
# a small receive buffer, set before the connect: loopback's autotuned one
# can grow to hold a whole 100,000-key dump, and the crawl would then finish
busy = socket.socket()
busy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
busy.connect(("127.0.0.1", ms[0].port))
busy.sendall(b"lru_crawler metadump all\r\n")
busy.recv(1024)       # it started; now nobody reads, and the crawl waits
time.sleep(0.3)
out = hostile.run_bounded(c, "SELECT count(*) FROM t", bound=15, admin=admin)
t.ok(out.pgcode == "08006" and "timed out after 1000 ms" in (out.detail or "") and out.elapsed < 5,
     "another client's stalled crawl: io_timeout ends the scan (after %.2f s)" % out.elapsed, repr(out))
busy.close()
mcrig.wait_for(lambda: mcrig.stats(ms[0].port).get("lru_crawler_running") == "0",
               timeout=10, what="the abandoned crawl to end")
t.is_(db.value(c, "SELECT count(*) FROM t"), N + 1, "once it is over, the full scan works again")


def hostile_case(behaviour, setup, way, after, want_code, want_text, name, **opts):
    h = hostile.HostileServer(behaviour, trickle=0.05).start()
    db.server(c, "h", h.addr, allow_full_scan="true", **opts)
    db.sql(c, "CREATE FOREIGN TABLE IF NOT EXISTS ht (key text, value text) SERVER h "
              "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
    if setup:
        db.sql(c, setup)
    out = interrupted("SELECT count(*) FROM ht", way, after)
    reset_timeout()
    t.ok(out.pgcode == want_code and want_text in ((out.error or "") + " " + (out.detail or ""))
         and not out.overran,
         "%s (after %.2f s)" % (name, out.elapsed), repr(out))
    accepted = h.accepted
    h.stop()
    db.sql(c, "DROP FOREIGN TABLE ht")
    db.sql(c, "DROP SERVER h")
    return accepted


hostile_case("dump_forever", "SET statement_timeout = '500ms'", None, 0, "57014",
             "statement timeout", "a dump that never ends: statement_timeout ends it")
t.is_(db.value(c, "SELECT count(*) FROM t WHERE value = 'v' || key"), N,
      "the next call works")
hostile_case("dump_forever", None, "cancel", 0.5, "57014", "user request",
             "a dump that never ends: a cancel ends it")
hostile_case("dump_trickle", None, "cancel", 0.5, "57014", "user request",
             "a dump trickled a byte at a time (io_timeout never fires): a cancel ends it")
hostile_case("dump_trickle", "SET statement_timeout = '700ms'", None, 0, "57014",
             "statement timeout", "... and statement_timeout")
hostile_case("dump_stall", None, None, 0, "08006", "timed out after 300 ms",
             "a dump that stops: io_timeout ends it", io_timeout="300ms")
hostile_case("dump_busy", None, None, 0, "55006", "BUSY",
             "a faked BUSY reply: the error with its hint")

# the interrupted connection is not reused: the next call opens a new one
# (planning asked for the item count once, on a connection of its own)
h = hostile.HostileServer("dump_forever").start()
db.server(c, "h", h.addr, allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE ht (key text, value text) SERVER h OPTIONS (allow_full_scan 'true')")
db.sql(c, "SET statement_timeout = '300ms'")
accepted = []
for _ in range(3):
    hostile.run_bounded(c, "SELECT count(*) FROM ht", bound=10, admin=admin)
    accepted.append(h.accepted)
reset_timeout()
t.ok(accepted[1] == accepted[0] + 1 and accepted[2] == accepted[1] + 1,
     "each interrupted dump's connection was discarded (a new connection per dump)", repr(accepted))
h.stop()
t.is_(db.value(c, "SELECT count(*) FROM t WHERE key IN ('1', '2', 'nope')"), 2,
      "the backend is still fine")

c.close()
admin.close()
t.done()
