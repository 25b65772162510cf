"""slab_calcification: mc_slab_calcification's thresholds at their exact
edges, against a fake memcached whose "stats", "stats slabs", "stats items"
and "stats settings" replies the test writes.

A class is starved when its evictions reach 10 times its chunks; the
instance is calcified when, besides, another class's oldest item is at
least twice as old as (and a second older than) the items the starved
class evicts, or the global page pool holds free pages.  Each rule is
checked one step below and at its threshold; the starved class shown when
several evict; the automover counters as sent, under memcached's names;
fields a server leaves out (NULL) and nonsense values (no signal, no error).
The real slab_automove=0 / slab_automove=2 experiment is slab_experiments.py's.
"""

import threading

import hostile
import mcdb
import mcrig

t = mcrig.TAP()


class FakeStats(hostile.LineServer):
    """Answers the four stats commands from self.groups (group -> lines)."""

    def __init__(self):
        super().__init__()
        self.groups = {}
        self.lock = threading.Lock()

    def _answer(self, c, line, lines):
        words = line.decode().split()
        if words[:1] != ["stats"]:
            c.sendall(b"ERROR\r\n")
            return True
        group = words[1] if len(words) > 1 else ""
        with self.lock:
            lines = list(self.groups.get(group, []))
        c.sendall(b"".join(b"STAT %s %s\r\n" % (n.encode(), str(v).encode())
                           for n, v in lines) + b"END\r\n")
        return True


def scenario(classes, pool=0, automove=0, general=None):
    """classes: {id: dict(pages, per_page, evicted, evicted_time, age, items)}."""
    g = [("pid", 1), ("uptime", 100), ("pointer_size", 64), ("limit_maxbytes", 64 << 20),
         ("evictions", sum(c.get("evicted", 0) for c in classes.values())),
         ("slab_reassign_rescues", 11), ("slab_reassign_chunk_rescues", 12),
         ("slab_reassign_evictions_nomem", 13), ("slab_reassign_inline_reclaim", 14),
         ("slab_reassign_busy_items", 15), ("slab_reassign_busy_deletes", 16),
         ("slab_reassign_running", 0), ("slabs_moved", 17), ("slab_global_page_pool", pool)]
    if general is not None:
        g = general
    slabs, items = [], []
    for cid, c in sorted(classes.items()):
        per_page = c.get("per_page", 60)
        chunks = c["pages"] * per_page
        n = c.get("items", chunks)
        slabs += [("%d:chunk_size" % cid, 1048576 // per_page), ("%d:chunks_per_page" % cid, per_page),
                  ("%d:total_pages" % cid, c["pages"]), ("%d:total_chunks" % cid, chunks),
                  ("%d:used_chunks" % cid, n), ("%d:free_chunks" % cid, chunks - n),
                  ("%d:free_chunks_end" % cid, 0)]
        if n > 0:
            items += [("items:%d:number" % cid, n), ("items:%d:age" % cid, c.get("age", 0)),
                      ("items:%d:evicted" % cid, c.get("evicted", 0)),
                      ("items:%d:evicted_time" % cid, c.get("evicted_time", 0)),
                      ("items:%d:mem_requested" % cid, n * 100)]
    slabs += [("active_slabs", len(classes)), ("total_malloced", 1048576 * sum(c["pages"] for c in classes.values()))]
    return {"": g, "slabs": slabs, "items": items,
            "settings": [("growth_factor", "1.25"), ("chunk_size", 48), ("slab_chunk_max", 524288),
                         ("slab_automove", automove)]}


fake = FakeStats().start()
db = mcdb.Database("mcfdw_it_calcification")
c = db.connect()
db.server(c, "fake", fake.addr, io_timeout="2s")


def signal(classes, **kw):
    with fake.lock:
        fake.groups = scenario(classes, **kw)
    cur = c.cursor()
    cur.execute("SELECT * FROM mc_slab_calcification('fake')")
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return dict(zip([d[0] for d in cur.description], rows[0]))


# ---- starved: evicted >= 10 * total_chunks ---------------------------------
small = dict(pages=60, per_page=800, age=50, evicted=0)
r = signal({5: small, 20: dict(pages=1, per_page=60, evicted=599, evicted_time=0, age=0)})
t.ok(r["calcified"] is False and r["starved_class"] is None and r["reason"] is None,
     "599 evictions in 60 chunks (below 10x): no starved class, not calcified", repr(r))
r = signal({5: small, 20: dict(pages=1, per_page=60, evicted=600, evicted_time=0, age=0)})
t.ok(r["calcified"] is True and r["reason"] == "old items" and r["starved_class"] == 20
     and r["starved_pages"] == 1 and r["starved_evicted"] == 600 and r["starved_turnover"] == 10.0
     and r["starved_evicted_time"] == 0 and r["oldest_class"] == 5 and r["oldest_pages"] == 60
     and r["oldest_age"] == 50,
     "600 evictions in 60 chunks (10x) while class 5 holds 50 s old items: calcified", repr(r))

# ---- old items: age >= 2 * evicted_time and age > evicted_time -----------
starved = dict(pages=2, per_page=60, evicted=5000, evicted_time=30)
for age, want in ((59, False), (60, True)):
    r = signal({5: dict(small, age=age), 20: starved})
    t.ok(r["calcified"] is want and r["starved_class"] == 20 and r["oldest_age"] == age,
         "evicted_time 30 s, other class's oldest %d s: %s" % (age, "calcified" if want else "not calcified"),
         repr(r))
for age, want in ((0, False), (1, True)):
    r = signal({5: dict(small, age=age), 20: dict(starved, evicted_time=0)})
    t.ok(r["calcified"] is want,
         "evicted_time 0 s, other class's oldest %d s: %s" % (age, "calcified" if want else "not calcified"),
         repr(r))
r = signal({5: dict(small, age=1), 20: dict(starved, evicted_time=1)})
t.ok(r["calcified"] is False, "as old as the evicted items (1 s, 1 s): not calcified", repr(r))
r = signal({5: dict(small, age=10 ** 6, items=0), 20: starved})
t.ok(r["calcified"] is False and r["oldest_class"] is None,
     "a class that holds no items holds no old items", repr(r))

# ---- free pages in the global pool ------------------------------------------
young = dict(small, age=30)
r = signal({5: young, 20: starved}, pool=0)
t.ok(r["calcified"] is False and r["slab_global_page_pool"] == 0, "no old items, no free pages: not calcified", repr(r))
r = signal({5: young, 20: starved}, pool=1)
t.ok(r["calcified"] is True and r["reason"] == "free pages" and r["slab_global_page_pool"] == 1,
     "one free page in the global pool while class 20 starves: calcified", repr(r))
r = signal({5: dict(small, age=100), 20: starved}, pool=3)
t.ok(r["reason"] == "old items, free pages", "both reasons named", repr(r))
r = signal({5: dict(small, age=100)}, pool=3)
t.ok(r["calcified"] is False and r["starved_class"] is None and r["oldest_class"] is None,
     "free pages and old items but no class evicting: not calcified", repr(r))

# ---- which starved class is shown -------------------------------------------
r = signal({5: dict(small, age=40),
            20: dict(pages=1, per_page=60, evicted=60000, evicted_time=30, age=0),
            30: dict(pages=1, per_page=30, evicted=3000, evicted_time=0, age=0)})
t.ok(r["calcified"] is True and r["starved_class"] == 30 and r["starved_turnover"] == 100.0,
     "the starved class with a reason is shown before one with more evictions per chunk and none", repr(r))
r = signal({5: dict(small, age=40),
            20: dict(pages=1, per_page=60, evicted=60000, evicted_time=0, age=0),
            30: dict(pages=1, per_page=30, evicted=3000, evicted_time=0, age=0)})
t.ok(r["starved_class"] == 20 and r["starved_turnover"] == 1000.0,
     "of two starved classes with a reason, the one with more evictions per chunk", repr(r))

# ---- the automover's counters, as memcached names them ----------------------
r = signal({5: small}, automove=2)
want = dict(slab_automove=2, evictions=0, slabs_moved=17, slab_reassign_rescues=11,
            slab_reassign_chunk_rescues=12, slab_reassign_evictions_nomem=13,
            slab_reassign_inline_reclaim=14, slab_reassign_busy_items=15,
            slab_reassign_busy_deletes=16, slab_reassign_running=False, slab_global_page_pool=0)
t.is_({k: r[k] for k in want}, want, "the automover's setting and counters as the server sent them")

# ---- fields left out, nonsense values ---------------------------------------
r = signal({5: dict(small, age=100), 20: starved}, general=[("pid", 1)])
t.ok(r["calcified"] is True and r["reason"] == "old items" and r["slabs_moved"] is None and r["evictions"] is None
     and r["slab_global_page_pool"] is None and r["slab_reassign_running"] is None,
     "a server without the automover's counters: NULLs (and old items alone decide)", repr(r))
r = signal({5: dict(small, age=-5), 20: dict(starved, evicted_time=-1, evicted=-7)})
t.ok(r["calcified"] is False and r["starved_class"] is None, "negative counters: no signal, no error", repr(r))
r = signal({5: dict(small, age=2 ** 62), 20: dict(starved, evicted=2 ** 63 - 1, evicted_time=2 ** 61)})
t.ok(r["calcified"] is True and r["starved_class"] == 20,
     "counters near 2^63: compared without overflow", repr(r))
r = signal({5: dict(small, age=2 ** 62 - 1), 20: dict(starved, evicted=2 ** 63 - 1, evicted_time=2 ** 61)})
t.ok(r["calcified"] is False, "2^62 - 1 is less than twice 2^61: not calcified", repr(r))
r = signal({})
t.ok(r["calcified"] is False and r["starved_class"] is None, "an empty instance: one row, not calcified", repr(r))

# ---- a down instance gives no row; the view works ---------------------------
db.server(c, "fake_down", fake.addr + "," + "127.0.0.1:1", connect_timeout="300ms")
t.is_(db.value(c, "SELECT count(*) FROM mc_slab_calcification('fake_down')"), 1,
      "a server with a down instance: a row for the live one only")
t.ok(db.value(c, "SELECT count(*) FROM mc_slab_calcification WHERE server IN ('fake', 'fake_down')") == 2,
     "the view covers every server")

fake.stop()
c.close()
t.done()
