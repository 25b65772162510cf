"""slab_experiments: the slab-allocator harness's three experiments, read
through mcfdw's views (mc_slab_ladder, mc_slab_stats, mc_slab_summary,
mc_server_stats) on private memcacheds started with the flags each needs.

1. Rounding waste: the same number of items at a value size just over a
   chunk boundary vs one that fills the chunk snugly, same class: ~20 % of
   the class's memory wasted vs 0 %.
2. Growth factor: that worst-case size under -f 1.25 vs -f 1.08: ~20 % vs
   a few %, and the number of classes each factor creates.
3. Calcification: a 64 MB cache filled with small items, then a large
   working set written in rounds: with slab_automove=0 the large class keeps
   its one page and evicts nearly every write; with slab_automove=2 pages
   move to it until a round evicts little.
   mc_slab_calcification calls the first instance calcified (the large
   class starved, the small one holding older items) and not the second,
   nor either one after the fill alone.

Boundaries come from the view's own ladder (mc_slab_ladder), never from
constants; the per-item overhead from a probe item measured through
mc_slab_stats.  Items are written with a pipelined raw-socket writer (quiet
"ms" commands, one "mn" per batch).  MCFDW_SLAB_ITEMS sets the item count of
experiments 1 and 2 (default 200000; the seed used 400000, the shape is the
same).  Prints the figures as TAP diagnostics.
"""

import os
import socket
import time

import mcdb
import mcrig

N = int(os.environ.get("MCFDW_SLAB_ITEMS", "200000"))
KEYLEN = 10                     # every key: 2-byte prefix + 8 digits
MB = 1048576

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_slabs")
c = db.connect()


def load(mc, prefix, n, value_size, start=0, batch=500):
    """Write n items prefix+%08d of value_size bytes; return error replies."""
    assert len(prefix) + 8 == KEYLEN
    val = b"v" * value_size
    errors = 0
    with socket.create_connection(("127.0.0.1", mc.port), timeout=30) as s:
        for b0 in range(start, start + n, batch):
            s.sendall(b"".join(b"ms %s%08d %d q\r\n%s\r\n" % (prefix, i, value_size, val)
                               for i in range(b0, min(b0 + batch, start + n))) + b"mn\r\n")
            got = b""
            while not got.endswith(b"MN\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("memcached closed the connection")
                got += chunk
            errors += got.count(b"\r\n") - 1
    return errors


def start(name, *flags):
    mc = mcrig.start_memcached(*flags)
    db.server(c, name, mc.addr, io_timeout="5s")
    return mc


def ladder(server):
    """[chunk size of class 1, class 2, ...] as mc_slab_ladder reports them."""
    rows = db.sql(c, "SELECT class_id, chunk_size FROM mc_slab_ladder(%s) ORDER BY class_id", (server,))
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), rows
    return [r[1] for r in rows]


def slab_class(server, class_id, items=None):
    """The class's row; with items, read again (up to 20 times, 50 ms apart)
    until it counts that many: memcached's LRU maintainer moves items between
    its sub-LRUs, and "stats items" sums them under one lock each, so an item
    in transit is missed by one reading."""
    cur = c.cursor()
    for _ in range(20):
        cur.execute("SELECT * FROM mc_slab_stats(%s) WHERE class_id = %s", (server, class_id))
        row = cur.fetchone()
        row = dict(zip([d[0] for d in cur.description], row)) if row else None
        if items is None or (row and row["items"] == items):
            return row
        time.sleep(0.05)
    return row


def summary(server):
    cur = c.cursor()
    cur.execute("SELECT * FROM mc_slab_summary(%s)", (server,))
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def calcification(server):
    cur = c.cursor()
    cur.execute("SELECT * FROM mc_slab_calcification(%s)", (server,))
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return dict(zip([d[0] for d in cur.description], rows[0]))


def first_class(lad, at_least):
    """Class id of the smallest chunk >= at_least."""
    return next(i + 1 for i, size in enumerate(lad) if size >= at_least)


# ---- the per-item overhead, measured --------------------------------------
probe = start("probe", "-m", "8")
load(probe, b"p:", 1, 100)
p = db.sql(c, "SELECT items, mem_requested FROM mc_slab_stats('probe') WHERE items > 0")
t.is_(len(p), 1, "probe: one class holds the probe item")
overhead = p[0][1] - 100
t.ok(0 < overhead < 200, "probe: per-item overhead for a %d-byte key is %d bytes" % (KEYLEN, overhead))
probe.stop()

# ---- 1. rounding waste -----------------------------------------------------
worst_mc = start("exp1_worst", "-m", "1024")
best_mc = start("exp1_best", "-m", "1024")
lad125 = ladder("exp1_worst")
k = first_class(lad125, 1024)
chunk, boundary = lad125[k - 1], lad125[k - 2]
worst_item, best_item = boundary + 1, chunk
t.is_(ladder("exp1_best"), lad125, "exp1: both servers build the same ladder")
e = load(worst_mc, b"w:", N, worst_item - overhead) + load(best_mc, b"b:", N, best_item - overhead)
t.is_(e, 0, "exp1: %d items stored on each server" % N)
worst = slab_class("exp1_worst", k, N)
best = slab_class("exp1_best", k, N)
for name, row, item in (("worst", worst, worst_item), ("best", best, best_item)):
    t.ok(row and row["items"] == N and row["used_chunks"] == N and row["chunk_size"] == chunk
         and row["mem_requested"] == N * item,
         "exp1 %s: class %d (chunk %d) holds all %d items of %d bytes" % (name, k, chunk, N, item),
         repr(row))
want = 100.0 * (chunk - worst_item) / chunk
t.ok(abs(worst["waste_pct"] - want) < 0.01 and worst["waste_pct"] > 15,
     "exp1: just over the %d-byte boundary wastes %.1f %% of the class (expected %.1f %%)"
     % (boundary, worst["waste_pct"], want))
t.ok(best["waste_pct"] == 0.0 and best["waste_bytes"] == 0, "exp1: a snug fit wastes nothing")
t.diag("exp1 rounding waste, %d items, class %d, chunk %d (boundary %d):" % (N, k, chunk, boundary))
for name, row, item in (("worst", worst, worst_item), ("best", best, best_item)):
    t.diag("  %-5s value %4d B, item %4d B: used %6.1f MB, requested %6.1f MB, waste %5.1f MB = %4.1f %%"
           % (name, item - overhead, item, row["used_bytes"] / MB, row["mem_requested"] / MB,
              row["waste_bytes"] / MB, row["waste_pct"]))

# ---- 2. growth factor ----------------------------------------------------
f108_mc = start("exp2_f108", "-m", "1024", "-f", "1.08")
lad108 = ladder("exp2_f108")
k8 = first_class(lad108, worst_item)
t.is_(load(f108_mc, b"f:", N, worst_item - overhead), 0, "exp2: %d items stored under -f 1.08" % N)
f108 = slab_class("exp2_f108", k8, N)
s125, s108 = summary("exp1_worst"), summary("exp2_f108")
want8 = 100.0 * (lad108[k8 - 1] - worst_item) / lad108[k8 - 1]
t.ok(f108 and f108["items"] == N and abs(f108["waste_pct"] - want8) < 0.01,
     "exp2: -f 1.08 puts the %d-byte item in a %d-byte chunk: %.1f %% waste (expected %.1f %%)"
     % (worst_item, lad108[k8 - 1], f108["waste_pct"] if f108 else -1, want8), repr(f108))
t.ok(f108["waste_pct"] < 100 * (1 - 1 / 1.08) and worst["waste_pct"] - f108["waste_pct"] > 10,
     "exp2: the finer factor wastes less than one 8 % step, the default about one 25 % step")
t.ok(s125["growth_factor"] == 1.25 and s108["growth_factor"] == 1.08, "exp2: growth_factor as started")
t.ok(s125["ladder_size"] == len(lad125) and s108["ladder_size"] == len(lad108)
     and len(lad108) > len(lad125),
     "exp2: -f 1.25 makes %d classes, -f 1.08 makes %d" % (len(lad125), len(lad108)))
t.ok(abs(s125["waste_pct"] - worst["waste_pct"]) < 0.01 and abs(s108["waste_pct"] - f108["waste_pct"]) < 0.01,
     "exp2: the summaries' waste is the one class's waste")
t.diag("exp2 growth factor, worst-case item %d B (value %d B), %d items:" % (worst_item, worst_item - overhead, N))
t.diag("  -f 1.25: %2d classes, chunk %5d, waste %5.1f MB = %4.1f %%"
       % (s125["ladder_size"], chunk, s125["waste_bytes"] / MB, s125["waste_pct"]))
t.diag("  -f 1.08: %2d classes, chunk %5d, waste %5.1f MB = %4.1f %%"
       % (s108["ladder_size"], lad108[k8 - 1], s108["waste_bytes"] / MB, s108["waste_pct"]))
worst_mc.stop()
best_mc.stop()
f108_mc.stop()

# ---- 3. calcification --------------------------------------------------------
am = {n: start("exp3_am%d" % n, "-m", "64", "-o", "slab_automove=%d" % n) for n in (0, 2)}
lad = ladder("exp3_am0")
small_id = first_class(lad, 1024)
large_id = first_class(lad, 16384)
small, large = lad[small_id - 1], lad[large_id - 1]
fill = int(1.3 * 64 * (MB // small))         # more than 64 MB of small items
working = 40 * (MB // large)                  # fits in 40 pages once rebalanced
rounds = 6


def reassign_idle(server):
    """Wait (at most 10 s) until the instance's page mover is idle."""
    mcrig.wait_for(lambda: db.value(c, "SELECT NOT slab_reassign_running FROM mc_slab_calcification(%s)",
                                    (server,)),
                   timeout=10, interval=0.05, what="%s's slab mover to be idle" % server)


# automove=0 writes the working set 6 times.  automove=2 writes it until a
# round evicts under a tenth of its writes (at most 40 rounds), letting the
# page mover finish between rounds: how many pages it moves while a round
# runs depends on the machine's load, where it ends up does not.
result = {}
for n, mc in am.items():
    server = "exp3_am%d" % n
    load(mc, b"s:", fill, small - overhead)
    before = slab_class(server, small_id)
    t.ok(before["total_pages"] >= 60 and slab_class(server, large_id) is None,
         "exp3 automove=%d: small items fill the cache (%d pages in class %d)" % (n, before["total_pages"], small_id))
    filled = calcification(server)
    t.ok(filled["calcified"] is False and filled["starved_class"] is None,
         "exp3 automove=%d: a cache full of one class is not calcified" % n, repr(filled))
    evicted, last, done = 0, None, 0
    while done < (rounds if n == 0 else 40):
        load(mc, b"L:", working, large - overhead)
        done += 1
        if n == 2:
            reassign_idle(server)
        now = slab_class(server, large_id)["evicted"]
        last, evicted = now - evicted, now
        if n == 2 and done >= 2 and last < working / 10:
            break
    result[n] = (before, slab_class(server, large_id), slab_class(server, small_id),
                 db.value(c, "SELECT evictions FROM mc_server_stats(%s)", (server,)), done, last)
_, l0, s0, ev0, done0, last0 = result[0]
_, l2, s2, ev2, done2, last2 = result[2]

# The signal, once the small items are 2 s old on both instances: the
# automove=2 instance has old items too, so what keeps it from being
# calcified is its large class no longer starving.
mcrig.wait_for(lambda: all(slab_class("exp3_am%d" % n, small_id)["age"] >= 2 for n in am),
               interval=0.2, what="the small items to be 2 s old")
calc = {n: calcification("exp3_am%d" % n) for n in am}
k0, k2 = calc[0], calc[2]
t.ok(k0["calcified"] is True and k0["reason"].startswith("old items") and k0["starved_class"] == large_id
     and k0["starved_turnover"] >= 10 and k0["oldest_class"] == small_id and k0["oldest_age"] >= 2
     and k0["slab_automove"] == 0 and k0["slabs_moved"] == 0,
     "exp3 automove=0: calcified, class %s starved (%s evictions per chunk, items evicted %s s after last use),"
     " class %s holding %s s old items" % (k0["starved_class"], k0["starved_turnover"], k0["starved_evicted_time"],
                                         k0["oldest_class"], k0["oldest_age"]), repr(k0))
t.ok(k2["calcified"] is False and k2["starved_class"] is None and k2["reason"] is None
     and k2["slab_automove"] == 2 and k2["slabs_moved"] > 0
     and k2["slabs_moved"] == db.value(c, "SELECT slabs_moved FROM mc_server_stats('exp3_am2')"),
     "exp3 automove=2: not calcified; the automover moved %s pages" % k2["slabs_moved"], repr(k2))
writes = rounds * working
t.ok(l0["total_pages"] <= 2 and l0["evicted"] > 0.8 * (writes - l0["total_chunks"]),
     "exp3 automove=0: the large class is frozen at %d page(s) and evicts %d of %d writes"
     % (l0["total_pages"], l0["evicted"], writes))
t.ok(l2["total_pages"] >= 10 * l0["total_pages"] and s2["total_pages"] < s0["total_pages"],
     "exp3 automove=2: pages move from the small class (%d -> %d) to the large one (%d)"
     % (s0["total_pages"], s2["total_pages"], l2["total_pages"]))
t.ok(last0 > 0.8 * working and last2 < last0 / 4,
     "exp3: a round of %d large writes evicts %d with automove=0 (round %d), %d with automove=2 (round %d)"
     % (working, last0, done0, last2, done2))
t.diag("exp3 calcification, -m 64: %d small items (chunk %d), then rounds of %d large items (chunk %d):"
       % (fill, small, working, large))
for n, (before, lg, sm, ev, done, _) in sorted(result.items()):
    t.diag("  slab_automove=%d: %d rounds; large class %2d page(s), %6d large-class evictions;"
           " small class %2d -> %2d pages; %d evictions in all"
           % (n, done, lg["total_pages"], lg["evicted"], before["total_pages"], sm["total_pages"], ev))
    t.diag("  slab_automove=%d: calcified %s; large class %.1f evictions per chunk"
           % (n, calc[n]["calcified"], lg["evicted"] / lg["total_chunks"]))
t.diag("README's example (mc_slab_calcification):")
for row in db.sql(c, "SELECT server, calcified, reason, starved_class, starved_turnover, starved_evicted_time,"
                     " oldest_class, oldest_age, slab_automove, slabs_moved FROM mc_slab_calcification"
                     " WHERE server IN ('exp3_am0', 'exp3_am2') ORDER BY server"):
    t.diag("  " + " | ".join("" if v is None else str(v) for v in row))

c.close()
t.done()
