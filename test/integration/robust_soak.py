"""robust_soak: at least 100,000 key-checked calls under faults, zero wrong
values.

Three sessions run mc_get (100 keys a statement), mc_get_multi and mc_set
batches on keys of their own through a proxy that, at random, injects stray
replies (PLANTD, another key's value, a miss, a stored), delays replies past
io_timeout, drops connections and drops replies after execution; statements
are cancelled at random by short statement_timeouts, and memcached is
restarted twice.  The load runs until both the count and at least one
stray and one cancel are reached (at most DEADLINE).  Every value returned
must be one written for that key (NULL and errors are allowed): a single
other value fails the test."""

import random
import threading
import time

import mcdb
import mcrig
from hostile import STRAY, HostileProxy

TARGET = 100000
DEADLINE = 80.0          # seconds of load at most
WORKERS = 3
KEYS_PER_WORKER = 300

t = mcrig.TAP()
mc = mcrig.start_memcached()
px = HostileProxy(mc.port).start()
px.rng = random.Random(20261201)
px.p_stray = 0.0008
px.p_delay = 0.0003
px.delay = 0.3
px.p_drop = 0.0005
px.p_drop_after_exec = 0.0005
px.stray_choices = [STRAY, b"VA 12\r\nv|s0:1|9999\r\n", b"EN\r\n", b"HD\r\n",
                    b"VA 12\r\nv|s1:2|9999\r\n"]
db = mcdb.Database("mcfdw_it_robust_soak")
admin = db.connect()
db.server(admin, "px", px.addr, io_timeout="200ms", connect_timeout="500ms",
          failure_limit=1000, retry_delay="1s")

lock = threading.Lock()
stats = {"checked": 0, "wrong": [], "errors": 0, "cancels": 0, "statements": 0}
stop = threading.Event()


def worker(w):
    rng = random.Random(w)
    c = db.connect()
    cur = c.cursor()
    keys = ["s%d:%d" % (w, i) for i in range(KEYS_PER_WORKER)]
    ok_values = {k: set() for k in keys}      # besides NULL
    gen = 0
    timeout_set = False
    while not stop.is_set():
        cancel = rng.random() < 0.05
        if cancel:
            cur.execute("SET statement_timeout = %s", ("%dms" % rng.randint(2, 40),))
            timeout_set = True
        elif timeout_set:
            cur.execute("RESET statement_timeout")
            timeout_set = False
        op = rng.random()
        batch = rng.sample(keys, 100 if op < 0.7 else 50)
        try:
            if op < 0.7:
                cur.execute("SELECT k, mc_get(k, server => 'px') FROM unnest(%s::text[]) k", (batch,))
                rows = cur.fetchall()
            elif op < 0.85:
                cur.execute("SELECT key, value FROM mc_get_multi(%s::text[], 'px')", (batch,))
                rows = cur.fetchall()
            else:
                gen += 1
                vals = ["v|%s|%d" % (k, gen) for k in batch]
                for k, v in zip(batch, vals):
                    ok_values[k].add(v)           # may be applied even if the call fails
                cur.execute("SELECT count(mc_set(k, v, server => 'px')) "
                            "FROM unnest(%s::text[], %s::text[]) u(k, v)", (batch, vals))
                cur.fetchall()
                for k, v in zip(batch, vals):
                    ok_values[k] = {v}
                rows = []
                with lock:
                    stats["checked"] += len(batch)
        except Exception as e:  # noqa: BLE001
            with lock:
                stats["errors"] += 1
                if getattr(e, "pgcode", None) == "57014":
                    stats["cancels"] += 1
            rows = None
        if rows:
            asked = set(batch)
            bad = [(k, v) for k, v in rows
                   if k not in asked or (v is not None and v not in ok_values[k])]
            with lock:
                stats["checked"] += len(rows)
                stats["wrong"].extend(bad)
        with lock:
            stats["statements"] += 1
            # the faults are random: a fast run (Unix sockets) may reach
            # the count before a short statement_timeout met a held reply
            if stats["checked"] >= TARGET and stats["cancels"] > 0 and px.strays_sent > 0:
                stop.set()
    c.close()


threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(WORKERS)]
t0 = time.monotonic()
for th in threads:
    th.start()
restarts = 0
for frac in (0.25, 0.55):
    while not stop.is_set() and time.monotonic() - t0 < DEADLINE * frac and stats["checked"] < TARGET * frac:
        time.sleep(0.05)
    if not stop.is_set():
        mc.restart()
        restarts += 1
while not stop.is_set() and time.monotonic() - t0 < DEADLINE:
    time.sleep(0.1)
stop.set()
for th in threads:
    th.join(30)
elapsed = time.monotonic() - t0

t.diag("%d key-checked calls in %d statements, %.1fs; %d errors (%d cancels); %d strays, %d drops "
       "after execution, %d restarts"
       % (stats["checked"], stats["statements"], elapsed, stats["errors"], stats["cancels"],
          px.strays_sent, px.drops_done, restarts))
t.ok(stats["checked"] >= TARGET, "at least %d key-checked calls (%d)" % (TARGET, stats["checked"]))
t.ok(px.strays_sent > 0 and stats["cancels"] > 0 and restarts == 2,
     "faults were injected: strays, cancels, two restarts")
t.is_(len(stats["wrong"]), 0, "no call returned a value not written for its key")
for k, v in stats["wrong"][:10]:
    t.diag("wrong: %r -> %r" % (k, v))
t.ok(not any(th.is_alive() for th in threads), "every session finished")
px.p_stray = px.p_delay = px.p_drop = px.p_drop_after_exec = 0
db.sql(admin, "SELECT mc_set('soak:end', 'ok', server => 'px')")
t.is_(db.value(admin, "SELECT mc_get('soak:end', server => 'px')"), "ok", "the pool works afterwards")
admin.close()
px.stop()
t.done()
