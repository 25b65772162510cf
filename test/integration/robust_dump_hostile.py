"""robust_dump_hostile: a full scan's key dump against a server that lies.

A fake memcached answers "lru_crawler metadump" with a scripted reply
(then keeps the connection, closes it, goes silent, or streams lines
forever), "stats" with an item count, and the multi-get that fetches the
listed keys from a little store of its own.  Each case runs a full scan
(and ANALYZE, which lists keys the same way) of a foreign table on it and
checks: the backend survives; no row comes from a line that is not an item
of the dump; a reply that is not a dump (a meta reply line, a line past
the line bound, a control or NUL byte, a key= field badly URL-encoded or
over 250 bytes, an error in the middle) is a protocol violation (08P01)
whose detail quotes the line,
raised even under on_failure 'miss'; a dump cut short (closed mid-line or
before its END, stalled) is an error, and under on_failure 'miss' lists
nothing from that instance (a degraded call), never the keys before the
cut; a stall ends by io_timeout or a cancel; a dump that never ends stays
in bounded memory and ends by a cancel, unless it lists more keys than
the instance can hold (twice what its stats say, plus 10,000): then it is
a protocol violation, ended within seconds with bounded temporary files,
and an honest memcached written to while it is scanned never trips that
bound; bytes after END never reach the next call; and a connection whose
dump went wrong is never used again."""

import threading
import time

import hostile
import mcdb
import mcrig

t = mcrig.TAP()

item = hostile.item

srv = hostile.DumpServer().start()
db = mcdb.Database("mcfdw_it_robust_dump_hostile")
c = db.connect()
admin = db.connect()
for name, opts in (("h", {}), ("hmiss", {"on_failure": "miss"})):
    # every case's failure counts; none may mark the instance dead for the next
    db.server(c, name, srv.addr, io_timeout="1s", allow_full_scan="true",
              failure_limit="1000", **opts)
    db.sql(c, "CREATE FOREIGN TABLE %st (key text, value text) SERVER %s "
              "OPTIONS (key_prefix 't:', allow_full_scan 'true')" % (name, name))
pid = db.value(c, "SELECT pg_backend_pid()")


def run(sql, bound=10.0, during=None, way_out=None):
    return hostile.run_bounded(c, sql, bound=bound, admin=admin, during=during,
                               way_out=way_out)


def quoted(line):
    """A server's line as a message quotes it: 40 bytes at most, the
    unprintable ones as '?'."""
    text = "".join(chr(b) if 0x20 <= b < 0x7f else "?" for b in line[:40])
    return text + ("..." if len(line) > 40 else "")


def rows_of(out):
    return sorted(tuple(r) for r in (out.rows or []))


def degraded(server):
    return db.value(c, "SELECT coalesce(sum(degraded), 0)::int FROM mc_servers "
                           "WHERE server = %s", (server,))


def dumps_then_more():
    """Connections that were sent anything after a dump's command."""
    bad = []
    for i, lines in enumerate(srv.conns):
        for j, line in enumerate(lines):
            if line.startswith(b"lru_crawler") and j + 1 < len(lines):
                bad.append((i, lines[j + 1:][:3]))
    return bad


def fresh_start():
    """Forget the connections of earlier cases (closed by the server)."""
    srv.drop_all()
    srv.conns = []
    srv.late = None
    time.sleep(0.05)


# sanity: an honest dump
fresh_start()
srv.script = (item(b"t:a") + item(b"t:b") + item(b"other") + b"END\r\n", "keep")
out = run("SELECT key, value FROM ht ORDER BY key")
t.is_(rows_of(out), [("a", "A"), ("b", "B")], "an honest dump: the table's rows")

# ---- replies that are not a dump: 08P01, even under on_failure 'miss' ----
# (what it is, the reply, the line the detail quotes: None where no line is whole)
NOT_A_DUMP = [
    ("a stray VA reply and its value", item(b"t:a") + b"VA 5 f0\r\nPLANT\r\n" + item(b"t:b") + b"END\r\n",
     b"VA 5 f0"),
    ("a stray VA with a key= value", item(b"t:a") + b"VA 45\r\n" + item(b"t:c")[:-1] + b"\r\n" + b"END\r\n",
     b"VA 45"),
    ("a stray HD", item(b"t:a") + b"HD\r\n" + item(b"t:b") + b"END\r\n",
     b"HD"),
    ("a stray EN", item(b"t:a") + b"EN\r\n" + b"END\r\n",
     b"EN"),
    ("a stray MN", b"MN\r\n" + item(b"t:a") + b"END\r\n",
     b"MN"),
    ("a stray NS", item(b"t:a") + b"NS\r\n" + b"END\r\n",
     b"NS"),
    ("a line past the line bound", item(b"t:a") + item(b"t:" + b"x" * 3000) + b"END\r\n",
     None),
    ("an embedded NUL byte", item(b"t:a\x00b") + b"END\r\n",
     item(b"t:a\x00b")[:-1]),
    ("a NUL byte after the key", b"key=t:a exp=-1\x00 la=1 cas=1 fetch=no cls=1 size=1\n" + b"END\r\n",
     b"key=t:a exp=-1\x00 la=1 cas=1 fetch=no cls=1 size=1"),
    ("a control byte in the key", item(b"t:a\x01b") + b"END\r\n",
     item(b"t:a\x01b")[:-1]),
    ("bad URL-encoding (%zz)", item(b"t:a%zzb") + b"END\r\n",
     item(b"t:a%zzb")[:-1]),
    ("bad URL-encoding (cut %4)", b"key=t:a%4\n" + b"END\r\n",
     b"key=t:a%4"),
    ("a key over 250 bytes", item(b"t:" + b"k" * 249) + b"END\r\n",
     item(b"t:" + b"k" * 249)[:-1]),
    ("a key over 250 bytes, URL-encoded", item(b"t:" + b"%41" * 249) + b"END\r\n",
     item(b"t:" + b"%41" * 249)[:-1]),
    ("an empty key", b"key= exp=-1 la=1 cas=1 fetch=no cls=1 size=1\n" + b"END\r\n",
     b"key= exp=-1 la=1 cas=1 fetch=no cls=1 size=1"),
    ("SERVER_ERROR in the middle", item(b"t:a") + b"SERVER_ERROR out of memory\r\n" + item(b"t:b") + b"END\r\n",
     b"SERVER_ERROR out of memory"),
    ("ERROR in the middle", item(b"t:a") + b"ERROR\r\n" + b"END\r\n",
     b"ERROR"),
    ("CLIENT_ERROR in the middle", item(b"t:a") + b"CLIENT_ERROR bad command line format\r\n",
     b"CLIENT_ERROR bad command line format"),
    ("END with junk after it on its line", item(b"t:a") + b"END junk\r\n",
     b"END junk"),
    ("BUSY in the middle", item(b"t:a") + b"BUSY currently processing crawler request\r\n",
     b"BUSY currently processing crawler request"),
    ("NOTSTARTED in the middle", item(b"t:a") + b"NOTSTARTED no items to crawl\r\n",
     b"NOTSTARTED no items to crawl"),
]
for server in ("h", "hmiss"):
    for name, payload, bad in NOT_A_DUMP:
        fresh_start()
        srv.script = (payload, "keep")
        out = run("SELECT key, value FROM %st" % server)
        want = ('unexpected line in the reply to "lru_crawler metadump hash": "%s"' % quoted(bad)
                if bad is not None else "a line of the reply exceeds")
        t.ok(out.pgcode == "08P01" and out.rows is None and not out.overran
             and want in (out.detail or ""),
             "%s: %s is a protocol violation, the detail quoting it (%.2f s)"
             % (server, name, out.elapsed), repr(out))
        # the next call: the fake's own value, on a new connection
        n = len(srv.conns)
        got = run("SELECT mc_get('t:a', server => '%s')" % server)
        after = dumps_then_more()
        t.ok(not after and got.rows == [("A",)] and len(srv.conns) == n + 1,
             "%s: ... its connection is not used again, the next call works on a new one"
             % server, repr((after, got, len(srv.conns) - n)))

# a line past the bound with no newline at all: refused at the bound, not at io_timeout
fresh_start()
srv.script = (item(b"t:a") + b"key=t:" + b"y" * 5000, "stall")
out = run("SELECT count(*) FROM ht")
t.ok(out.pgcode == "08P01" and out.elapsed < 0.9 and not out.overran,
     "a line past the bound without its newline: 08P01 before io_timeout (%.2f s)" % out.elapsed,
     repr(out))

# ANALYZE lists keys through the same dump
fresh_start()
srv.script = (item(b"t:a") + b"VA 5 f0\r\nPLANT\r\n" + b"END\r\n", "keep")
out = run("ANALYZE ht")
t.ok(out.pgcode == "08P01" and not out.overran, "ANALYZE meets a stray VA: 08P01", repr(out))

# ---- what the dump may hold that is no key of the table: documented, skipped ----
fresh_start()
srv.values[b"t:" + b"k" * 248] = b"LONG"
srv.script = (item(b"t:a") + item(b"t:a%00b") + item(b"t:%ff%fe") + item(b"t:" + b"k" * 248)
              + item(b"t:%62") + b"END\r\n", "keep")
out = run("SELECT key, value FROM ht")
t.is_(rows_of(out), [("a", "A"), ("b", "B"), ("k" * 248, "LONG")],
      "a NUL (%00) or non-UTF-8 key is skipped; a 250-byte key and %62 ('b') are keys")
del srv.values[b"t:" + b"k" * 248]

# ---- refusals: the whole reply, documented ----
fresh_start()
srv.script = (b"NOTSTARTED no items to crawl\r\n", "keep")
out = run("SELECT key FROM ht")
t.ok(out.error is None and out.rows == [], "NOTSTARTED (nothing to crawl): an empty table", repr(out))
for line in (b"SERVER_ERROR out of memory", b"ERROR an unknown error happened"):
    fresh_start()
    srv.script = (line + b"\r\n" + item(b"t:a") + b"END\r\n", "keep")
    out = run("SELECT key FROM ht")
    got = run("SELECT mc_get('t:a', server => 'h')")
    t.ok(out.pgcode == "HV000" and line.decode() in (out.detail or "") and out.rows is None
         and dumps_then_more() == [] and got.rows == [("A",)],
         "%s, then more lines: the server's refusal, with its line; the connection is not "
         "used again" % line.split()[0].decode(), repr((out, dumps_then_more(), got)))

# ---- bytes after END ----
fresh_start()
srv.script = (item(b"t:a") + b"END\r\n" + b"VA 5 f0\r\nPLANT\r\n", "keep")
out = run("SELECT key, value FROM ht")
n = len(srv.conns)
got = run("SELECT mc_get('t:a', server => 'h')")
after = dumps_then_more()
t.ok(rows_of(out) == [("a", "A")] and not after and got.rows == [("A",)] and n == 2,
     "END then more bytes in the same read: the dump is complete, and its connection is closed, "
     "not reused (the keys are fetched on a new one)", repr((out, after, got, n)))
fresh_start()
srv.script = (item(b"t:a") + b"END\r\n", "keep")
srv.late = b"VA 5 f0\r\nPLANT\r\n"
srv.late_delay = 0.1
out = run("SELECT key, value FROM ht")
time.sleep(0.3)
gets = [run("SELECT mc_get('t:%s', server => 'h')" % k) for k in "abc"]
t.ok((rows_of(out) == [("a", "A")] or out.pgcode == "08P01")
     and [g.rows for g in gets] == [[("A",)], [("B",)], [("C",)]],
     "END, then bytes 100 ms later: the scan's fetch may see them (08P01), the next calls never",
     repr((out, gets)))

# ---- dumps cut short: an error; under on_failure 'miss' nothing from it ----
CUT = [
    ("closed mid-line (no newline before close)", item(b"t:a") + item(b"t:b") + b"key=t:c exp=-1", "close"),
    ("closed before END", item(b"t:a") + item(b"t:b"), "close"),
    ("closed after END without its CRLF", item(b"t:a") + b"END", "close"),
    ("stalled mid-line", item(b"t:a") + item(b"t:b") + b"key=t:c ex", "stall"),
]
for name, payload, then in CUT:
    fresh_start()
    srv.script = (payload, then)
    out = run("SELECT key, value FROM ht")
    t.ok(out.pgcode is not None and out.pgcode.startswith("08") and out.rows is None
         and not out.overran and out.elapsed < 3,
         "on_failure 'error', %s: an error (%s, %.2f s)" % (name, out.pgcode, out.elapsed), repr(out))
    got = run("SELECT mc_get('t:a', server => 'h')")
    t.ok(dumps_then_more() == [] and got.rows == [("A",)],
         "... its connection is not used again", repr((dumps_then_more(), got)))
    fresh_start()
    before = degraded("hmiss")
    out = run("SELECT key, value FROM hmisst")
    t.ok(out.error is None and rows_of(out) == [] and degraded("hmiss") == before + 1,
         "on_failure 'miss', %s: no row from the cut dump, the call degraded" % name,
         repr((out, before, degraded("hmiss"))))

# a stall with a long io_timeout: a cancel ends it
db.server(c, "hslow", srv.addr, io_timeout="60s", allow_full_scan="true", failure_limit="1000")
db.sql(c, "CREATE FOREIGN TABLE hslowt (key text) SERVER hslow OPTIONS (allow_full_scan 'true')")
fresh_start()
srv.script = (item(b"t:a") + b"key=t:c ex", "stall")
timer = threading.Timer(0.5, lambda: admin.cursor().execute("SELECT pg_cancel_backend(%s)", (pid,)))
timer.start()
out = run("SELECT count(*) FROM hslowt", bound=10)
timer.cancel()
t.ok(out.pgcode == "57014" and not out.overran and out.elapsed < 3,
     "stalled mid-line, io_timeout 60 s: a cancel ends it (%.2f s)" % out.elapsed, repr(out))

# ---- a dump that never ends: bounded memory, cancellable ----


def vm_kb(field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def temp_bytes():
    """This database's temporary file bytes, this session's flushed first."""
    db.value(c, "SELECT pg_stat_force_next_flush()")
    return db.value(c, "SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()")


db.sql(c, "SET work_mem = '1MB'")
# an instance that says it holds a billion items: its endless dump runs
# until a cancel (jit off: the planner's billion rows would JIT-compile the
# query, and LLVM's memory is not the scan's)
db.sql(c, "SET jit = off")
srv.stats_items = 10 ** 9
db.server(c, "hbig", srv.addr, io_timeout="1s", allow_full_scan="true", failure_limit="1000")
db.sql(c, "CREATE FOREIGN TABLE hbigt (key text, value text) SERVER hbig "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
for label, key in (("keys of the table", b"t:f%d"), ("keys of no table", b"other%d")):
    fresh_start()
    srv.forever_key = key
    srv.script = (b"", "forever")
    sent0 = srv.sent
    rss0 = vm_kb("VmRSS")
    peak = [rss0]

    def watch(elapsed):
        peak[0] = max(peak[0], vm_kb("VmRSS"))
        return False

    temp0 = temp_bytes()
    timer = threading.Timer(3.0, lambda: admin.cursor().execute(
        "SELECT pg_cancel_backend(%s)", (pid,)))
    timer.start()
    out = run("SELECT count(*) FROM hbigt", bound=15, during=watch)
    timer.cancel()
    mb = (srv.sent - sent0) / 1e6
    temp = temp_bytes() - temp0
    # the keys of the table spill past work_mem: what the bounded cases below measure
    t.ok(out.pgcode == "57014" and not out.overran and peak[0] - rss0 < 16 * 1024 and mb > 1
         and (temp > 1024 * 1024 or key != b"t:f%d"),
         "a dump that never ends (%s), of an instance of a billion items: %.0f MB read, "
         "%d bytes of temporary files, backend memory grew %d kB, a cancel ends it"
         % (label, mb, temp, peak[0] - rss0), repr(out))
srv.stats_items = None

# an instance that holds 3 items (its stats say) lists at most 2 * 3 + 10,000
# keys: past that, a protocol violation, under either on_failure, long
# before any cancel, with the temporary files bounded
for server in ("h", "hmiss"):
    for label, key in (("keys of the table", b"t:f%d"), ("keys of no table", b"other%d")):
        fresh_start()
        srv.forever_key = key
        srv.script = (b"", "forever")
        temp0 = temp_bytes()
        timer = threading.Timer(5.0, lambda: admin.cursor().execute(
            "SELECT pg_cancel_backend(%s)", (pid,)))
        timer.start()
        out = run("SELECT count(*) FROM %st" % server, bound=15)
        timer.cancel()
        temp = temp_bytes() - temp0
        t.ok(out.pgcode == "08P01" and out.rows is None and not out.overran and out.elapsed < 4
             and "listed more keys than it holds: more than 10006," in (out.detail or "")
             and "count 3 items" in (out.detail or "") and temp < 8 * 1024 * 1024,
             "%s: an endless dump (%s) listing more keys than its instance holds: 08P01 in "
             "%.2f s, %d bytes of temporary files" % (server, label, out.elapsed, temp), repr(out))
        n = len(srv.conns)
        srv.script = (item(b"t:a") + b"END\r\n", "keep")
        got = run("SELECT mc_get('t:a', server => '%s')" % server)
        t.ok(got.rows == [("A",)] and len(srv.conns) == n + 1,
             "%s: ... its connection is not used again, the next call works on a new one" % server,
             repr((got, len(srv.conns) - n)))
# at the bound exactly: every key listed; one more: the error
for n, code in ((2 * 3 + 10000, None), (2 * 3 + 10001, "08P01")):
    fresh_start()
    srv.script = (b"".join(item(b"t:n%d" % i) for i in range(n)) + b"END\r\n", "keep")
    out = run("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT key FROM ht")
    plan = "\n".join(r[0] for r in out.rows or [])
    t.ok(out.pgcode == code and (code is not None or "Memcached Keys Kept: %d" % n in plan),
         "a dump of %d keys from an instance of 3 items: %s" % (n, code or "listed whole"),
         repr(out))
# an instance whose stats give no item count: the fallback bound (10,000,000), not 10,006
srv.stats_items = "omitted"
db.server(c, "hnocount", srv.addr, io_timeout="1s", allow_full_scan="true", failure_limit="1000")
db.sql(c, "CREATE FOREIGN TABLE hnocountt (key text, value text) SERVER hnocount "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
fresh_start()
srv.script = (b"".join(item(b"t:n%d" % i) for i in range(2 * 3 + 10001)) + b"END\r\n", "keep")
out = run("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT key FROM hnocountt")
plan = "\n".join(r[0] for r in out.rows or [])
t.ok(out.error is None and "Memcached Keys Kept: 10007" in plan,
     "an instance whose stats give no item count: a dump of 10007 keys is listed whole "
     "(its bound is 10,000,000)", repr(out))
srv.stats_items = None

# the bounds follow the instances, not their places in the list: after ALTER
# SERVER swaps them, an instance of many items is not held to the bound of
# one of 3 (the sizes counted for the old list are asked again)
fresh_start()
big = hostile.DumpServer().start()
big.stats_items = 10 ** 6
big.script = (b"".join(item(b"t:n%d" % i) for i in range(20000)) + b"END\r\n", "keep")
srv.script = (item(b"t:a") + b"END\r\n", "keep")
db.server(c, "hswap", "%s,%s" % (srv.addr, big.addr), io_timeout="1s", allow_full_scan="true",
          failure_limit="1000")
db.sql(c, "CREATE FOREIGN TABLE hswapt (key text, value text) SERVER hswap "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
listed = []
for servers in ("%s,%s" % (srv.addr, big.addr), "%s,%s" % (big.addr, srv.addr)):
    db.sql(c, "ALTER SERVER hswap OPTIONS (SET servers '%s')" % servers)
    out = run("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT key FROM hswapt")
    listed.append((out.pgcode, [r[0].strip() for r in out.rows or [] if "Items Listed" in r[0]]))
t.ok(listed == [(None, ["Memcached Items Listed: 20001"])] * 2,
     "instances of 3 and 1,000,000 items, then their order swapped: both scans list all 20,001 keys",
     repr(listed))
big.stop()
db.sql(c, "RESET jit")
db.sql(c, "RESET work_mem")
fresh_start()
srv.script = (item(b"t:a") + b"END\r\n", "keep")
t.is_(rows_of(run("SELECT key, value FROM ht")), [("a", "A")], "the backend is still fine")

srv.stop()

# ---- an honest memcached written to while it is scanned never trips the bound ----
mc = mcrig.start_memcached("-m", "64")
db.server(c, "honest", mc.addr, allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE honestt (key text, value text) SERVER honest "
          "OPTIONS (key_prefix 't:', allow_full_scan 'true')")
N = 50000
db.sql(c, "INSERT INTO honestt SELECT i::text, 'v' || i FROM generate_series(1, %d) i" % N)
t.is_(db.value(c, "SELECT count(*) FROM honestt"), N, "an honest memcached of 50,000 keys: scanned whole")
written = [0]
stop_writing = threading.Event()


def writer():
    """New keys as fast as one pipelined client writes them, until told to stop."""
    w = mcrig.connect(mc.port)
    i = 0
    while not stop_writing.is_set():
        w.sendall(b"".join(b"ms t:w%d 1 q\r\nx\r\n" % j for j in range(i, i + 2000)) + b"mn\r\n")
        buf = b""
        while not buf.endswith(b"MN\r\n"):
            buf += w.recv(65536)
        i += 2000
        written[0] = i
    w.close()


th = threading.Thread(target=writer, daemon=True)
th.start()
mcrig.wait_for(lambda: written[0] > 0, what="the writer to start")
results = []
for _ in range(3):
    w0 = written[0]
    out = run("SELECT count(*) FROM honestt", bound=60)
    results.append((out.pgcode, out.rows and out.rows[0][0], written[0] - w0))
stop_writing.set()
th.join(10)
t.ok(all(code is None and n >= N for code, n, _ in results) and sum(w for _, _, w in results) > 0,
     "three scans of it while a client writes new keys as fast as it can: every key, no error "
     "(rows, keys written during each: %s)" % ", ".join("%s/%d" % (n, w) for _, n, w in results),
     repr(results))
mc.stop()

c.close()
admin.close()
t.done()
