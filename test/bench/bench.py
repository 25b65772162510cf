#!/usr/bin/python3
"""bench.py — the workloads of `make bench`, run by test/bench/bench.sh.

Owns: loading the keys, every workload of issue 5 (and 9, batch writes, of
issue 11; 11, foreign tables, of issue 14: scan, join, INSERT ... SELECT;
13, per-row mc_get prefetched, of issue 25; 14, invalidation from
the write-ahead log, of issue 23),
the targets, and the report: one table printed at the end, the same rows as
CSV (test/bench/results/latest.csv) and the printed report with the machine
it ran on (test/bench/results/latest.txt).  A quick (BENCH_QUICK=1) or
partial (BENCH_ONLY=...) run writes results/quick.csv.tmp and quick.txt.tmp
instead, so only a full run replaces the committed figures.

Targets are ratios measured side by side in the same run.  Two kinds of
figure are printed without a target, because no client could meet one on a
shared VM: user CPU from tick accounting (the raw C client, which does
little but its system calls, is charged over half of pgmemcache's user
time; the callgrind instruction ratio, <= 0.5 x pgm, is the target instead)
and mcfdw against pgmemcache on 10,000 keys (the raw client itself is only
~17x faster than pgmemcache there; "added over floor <= 1.5 x raw" is the
target instead).

Contenders alternate inside each round (floor, mcfdw, pgmemcache[, raw]),
so drift of this shared machine hits all of them alike, and the order
rotates from round to round (rotated()), so none is always first; every
figure is a median over rounds.  Ratios are mcfdw / the other contender.
Statements of a few hundred microseconds (workload 2's 100 keys, workload
13's 10 rows) are measured closer still: their contenders share one pgbench
session, a statement at a time in random order (pgbench_mix), over many
short rounds, and each round's ratio is taken before the median.
BENCH_BASELINE (another build's mcfdw.so) makes that build one more
contender in the rounds of every workload that runs mcfdw, swapped in for
its own sessions (BaselineSwap, with_baseline, run_as): each round's ratio,
this build / baseline, is taken before the median and checked against
BENCH_BASELINE_BOUND (base_row), and the report ends with all of them in
one table.  Not workload 6 (the parser, built from src/ into a program of
its own) nor 14 (its cluster preloads mcfdw: the postmaster and every
backend and worker it forks keep the build it started with, so a baseline
would need a second cluster, not a second contender in the same rounds).

Workload 10 starts four private TLS memcacheds (certificates made with the
openssl command) and compares mcfdw over TLS with mcfdw over plain TCP on
the rig's four: added latency of a single get and of a 10,000-key
multi-get, the handshakes 10,000 calls make after warm-up, and a cold
10-key multi-get (each call in a new session, so its connects to the four
instances, TCP and for TLS the handshakes, are part of it).  The raw C
client's single gets over both (rawclient -s, with -S over TLS) run in the
same rounds, so what TLS itself costs a round trip (OpenSSL on both ends,
memcached -Z's own reads) is measured beside what it costs mcfdw; the same
pair is counted in instructions under callgrind.

Runs inside the rig: PGHOST/PGPORT, MCFDW_MC_PORTS (four memcacheds, the
foreign server "memcached" and pgmemcache.default_servers both name them in
that order, distribution modula), MCFDW_PGBIN, MCFDW_SRC, MCFDW_RIG.
"""

import contextlib
import csv
import datetime
import glob
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg2

QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
ROUNDS = int(os.environ.get("BENCH_ROUNDS") or (3 if QUICK else 8))
SECONDS = float(os.environ.get("BENCH_SECONDS") or (1 if QUICK else 2))
ONLY = {int(x) for x in re.split(r"[ ,]+", os.environ.get("BENCH_ONLY", "")) if x}
PGBIN = os.environ.get("MCFDW_PGBIN", "/usr/lib/postgresql/15/bin")
SRC = os.environ.get("MCFDW_SRC", os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))
PORTS = [int(p) for p in os.environ["MCFDW_MC_PORTS"].split(",") if p]
RAWCLIENT = os.path.join(SRC, "test/bench/bin/rawclient")
RESULTS = os.path.join(SRC, "test/bench/results")
KEYS = 100000                   # k0 .. k99999, 100-byte values
LOOP = 10000                    # single gets per statement (workload 4)
CPU_REPEAT = 3                  # statements per contender per round (workload 4)
POOL_CALLS = 200000             # workload 7
CLIENTS = 10                    # workload 8
HZ = os.sysconf("SC_CLK_TCK")

rig_tmp = os.path.join(os.environ.get("MCFDW_RIG", "/tmp"), "tmp")
WORK = tempfile.mkdtemp(prefix="bench.", dir=rig_tmp if os.path.isdir(rig_tmp) else None)

ROWS = []


def say(msg):
    print("bench: " + msg, flush=True)


def connect():
    conn = psycopg2.connect(host=os.environ.get("PGHOST", "127.0.0.1"),
                            port=os.environ.get("PGPORT", "5432"),
                            user=os.environ.get("PGUSER", "postgres"),
                            dbname=os.environ.get("PGDATABASE", "postgres"))
    conn.autocommit = True
    return conn


def value(conn, query, args=None):
    cur = conn.cursor()
    cur.execute(query, args)
    row = cur.fetchone()
    return row[0] if row else None


def backend_pid(conn):
    return value(conn, "SELECT pg_backend_pid()")


def rotated(items, r):
    """The contenders in round r's order: the list rotated by r.  A fixed
    order is a bias, not noise: whoever runs right after another contender
    finds the machine (and, with shared keys, memcached's items and LRU
    state) as that one left it, and measured here the first of two
    statements on the same 10,000 keys ran ~10 % slower than the second,
    whichever extension it was.  Rotating puts every contender in every
    position equally often.

    Rotation keeps neighbours, though: a baseline twin (BASE + name) listed
    after the others always followed another contender than its original
    did, and two identical builds measured 1.06 apart (workload 10's
    statement of 10,000 gets).  So each twin runs right beside its
    original, the original first in even rounds and the twin first in odd
    ones: both follow the same contender, and each goes first equally
    often."""
    items = list(items)

    def name(it):
        return it[0] if isinstance(it, tuple) else it
    twins = {name(it)[len(BASE):]: it for it in items
             if isinstance(name(it), str) and name(it).startswith(BASE)}
    rest = [it for it in items if not (isinstance(name(it), str) and name(it).startswith(BASE))]
    k = r % len(rest) if rest else 0
    out = []
    for it in rest[k:] + rest[:k]:
        twin = twins.pop(name(it), None)
        if twin is None:
            out.append(it)
        else:
            out.extend([twin, it] if r % 2 else [it, twin])
    return out + list(twins.values())


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def ratio(a, b):
    if a is None or b is None or b == 0 or a != a or b != b:
        return None
    return a / b


def row(workload, contender, median, unit, vs_pgm=None, vs_floor=None,
        target="", status="", note="", base=False):
    """base: a comparison with the baseline build (base_row), counted apart
    from the targets."""
    ROWS.append(dict(workload=workload, contender=contender, median=median, unit=unit,
                     vs_pgm=vs_pgm, vs_floor=vs_floor, target=target, status=status,
                     note=note, base=base))


def check(value_, op, limit):
    """'met' / 'missed' for value op limit (op is '<=' or '>=' or '<' or '==')."""
    if value_ is None or value_ != value_:
        return "n/a"
    ok = {"<=": value_ <= limit, ">=": value_ >= limit, "<": value_ < limit,
          "==": value_ == limit}[op]
    return "met" if ok else "missed"


# ---- pgbench ---------------------------------------------------------------
_script_seq = [0]


def pgbench(script, clients=1, seconds=None, log=True, env=None):
    """Run pgbench -n -M prepared on a custom script.  Returns (tps, median
    latency in us or None)."""
    _script_seq[0] += 1
    n = _script_seq[0]
    path = os.path.join(WORK, "script%d.sql" % n)
    with open(path, "w") as f:
        f.write(script)
    logdir = os.path.join(WORK, "log%d" % n)
    os.mkdir(logdir)
    cmd = [os.path.join(PGBIN, "pgbench"), "-n", "-M", "prepared", "-c", str(clients),
           "-j", str(min(clients, 2)), "-T", str(int(round(seconds or SECONDS))), "-f", path]
    if log:
        cmd += ["-l", "--log-prefix", os.path.join(logdir, "pgb")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       cwd=WORK, env=env)
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", p.stdout)
    failed = re.search(r"number of failed transactions: ([0-9]+)", p.stdout)
    if p.returncode != 0 or not m or (failed and int(failed.group(1)) > 0):
        sys.stderr.write(p.stdout)
        raise RuntimeError("pgbench failed on:\n" + script)
    lat = None
    if log:
        lats = []
        for fn in glob.glob(os.path.join(logdir, "pgb*")):
            with open(fn) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3:
                        lats.append(int(parts[2]))
        lat = med(lats)
    shutil.rmtree(logdir, ignore_errors=True)
    return float(m.group(1)), lat


def run_rawclient(nkeys, *args, ports=None, keyspace=KEYS, valgrind=()):
    """Run test/bench/bin/rawclient on the four servers (or ports) over
    k0..k<keyspace - 1>; returns what it printed, or raises with it when it
    failed."""
    out = subprocess.run(list(valgrind) + [RAWCLIENT, "-p", ",".join(map(str, ports or PORTS)),
                                           "-n", str(nkeys), "-k", str(keyspace)] + [str(a) for a in args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        raise RuntimeError("rawclient %s failed: %s" % (" ".join(map(str, args)), out.stdout))
    return out.stdout


def rawclient(nkeys, seconds=None):
    """Median microseconds per batch of the raw C client."""
    out = run_rawclient(nkeys, "-t", seconds or SECONDS)
    return float(re.search(r"median_us=([0-9.]+)", out).group(1))


def pgbench_mix(scripts, seconds, weights=None, optional=()):
    """Run the scripts ({name: text}) in one pgbench session (-c1 -M
    prepared) for the given seconds, each transaction taking one of them at
    random (weights: {name: weight}, 1 unless given), so they interleave a
    statement at a time and whatever the machine does meanwhile hits all of
    them alike.  Returns {name: median latency in us} from the
    per-transaction log (its fourth field is the script's number); a
    script named in optional may not have run (None)."""
    _script_seq[0] += 1
    n = _script_seq[0]
    names = list(scripts)
    cmd = [os.path.join(PGBIN, "pgbench"), "-n", "-M", "prepared", "-c", "1", "-j", "1",
           "-T", str(int(round(seconds)))]
    for i, name in enumerate(names):
        path = os.path.join(WORK, "mix%d_%d.sql" % (n, i))
        with open(path, "w") as f:
            f.write(scripts[name])
        cmd += ["-f", "%s@%d" % (path, (weights or {}).get(name, 1))]
    logdir = os.path.join(WORK, "mixlog%d" % n)
    os.mkdir(logdir)
    cmd += ["-l", "--log-prefix", os.path.join(logdir, "pgb")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=WORK)
    failed = re.search(r"number of failed transactions: ([0-9]+)", p.stdout)
    if p.returncode != 0 or (failed and int(failed.group(1)) > 0):
        sys.stderr.write(p.stdout)
        raise RuntimeError("pgbench failed on the mix of " + ", ".join(names))
    lats = {name: [] for name in names}
    for fn in glob.glob(os.path.join(logdir, "pgb*")):
        with open(fn) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4:
                    lats[names[int(parts[3])]].append(int(parts[2]))
    shutil.rmtree(logdir, ignore_errors=True)
    if any(not v for k, v in lats.items() if k not in optional):
        raise RuntimeError("pgbench mix: a script never ran (%s)"
                           % ", ".join("%s %d" % (k, len(v)) for k, v in lats.items()))
    return {k: med(v) if v else None for k, v in lats.items()}


def quartiles(xs):
    """(p25, p75) of xs, by statistics.quantiles' inclusive method."""
    if len(xs) < 2:
        return (xs[0], xs[0]) if xs else (None, None)
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


# ---- set-up ----------------------------------------------------------------
def load_keys(conn):
    """k0..k49999 through mcfdw's mc_set, k50000..k99999 through pgmemcache's
    memcache_set; then each extension must find all 100,000."""
    say("writing k0..k49999 with mc_set, k50000..k99999 with memcache_set (100-byte values)")
    half = KEYS // 2
    n1 = value(conn, "SELECT count(*) FILTER (WHERE mc_set('k' || i, lpad(i::text, 100, 'v'))) "
                     "FROM generate_series(0, %s) i", (half - 1,))
    n2 = value(conn, "SELECT count(*) FILTER (WHERE memcache_set('k' || i, lpad(i::text, 100, 'v'))) "
                     "FROM generate_series(%s, %s) i", (half, KEYS - 1))
    if n1 != half or n2 != KEYS - half:
        raise RuntimeError("writing the keys failed: %s + %s stored" % (n1, n2))
    found_mc = value(conn, "SELECT count(*) FROM mc_get_multi((SELECT array_agg('k' || i) "
                           "FROM generate_series(0, %s) i))", (KEYS - 1,))
    found_pgm = 0
    for lo in range(0, KEYS, 10000):
        found_pgm += value(conn, "SELECT count(*) FROM memcache_get_multi((SELECT array_agg('k' || i) "
                                 "FROM generate_series(%s, %s) i))", (lo, lo + 9999))
    differ = value(conn, "SELECT count(*) FROM generate_series(0, %s, 97) i "
                         "WHERE mc_get('k' || i) IS DISTINCT FROM memcache_get('k' || i) "
                         "   OR length(mc_get('k' || i)) <> 100", (KEYS - 1,))
    say("mcfdw finds %d keys, pgmemcache %d; %d sampled values differ" % (found_mc, found_pgm, differ))
    if found_mc != KEYS or found_pgm != KEYS or differ != 0:
        raise RuntimeError("the two extensions do not see the same keys: routing differs?")


def machine():
    info = {}
    info["nproc"] = str(os.cpu_count())
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    info["cpu"] = model
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                kb = int(line.split()[1])
                info["memory"] = "%.1f GiB" % (kb / 1048576)
    info["kernel"] = platform.release()
    conn = connect()
    info["postgresql"] = value(conn, "SHOW server_version")
    info["pgmemcache"] = value(conn, "SELECT extversion FROM pg_extension WHERE extname = 'pgmemcache'")
    conn.close()
    try:
        info["memcached"] = subprocess.run([os.environ.get("MCFDW_MEMCACHED", "/usr/bin/memcached"), "-V"],
                                           stdout=subprocess.PIPE, text=True).stdout.strip()
    except OSError:
        info["memcached"] = "?"
    try:
        info["libmemcached"] = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "libmemcached11"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip() or "?"
    except OSError:
        info["libmemcached"] = "?"
    return info


# ---- workload 1: single get, pgbench -c1 -------------------------------------
def w1_single_get():
    say("1. single get, pgbench -c1 -M prepared, random keys: %d rounds x %gs per contender"
        % (ROUNDS, SECONDS))
    scripts = {
        "floor": "SELECT 1;\n",
        "mcfdw": "\\set k random(0, %d)\nSELECT mc_get('k' || :k);\n" % (KEYS - 1),
        "pgmemcache": "\\set k random(0, %d)\nSELECT memcache_get('k' || :k);\n" % (KEYS - 1),
    }
    scripts = with_baseline(scripts, ["mcfdw"])
    lat = {k: [] for k in scripts}
    for r in range(ROUNDS):
        for k, s in rotated(scripts.items(), r):
            lat[k].append(run_as(k, lambda: pgbench(s)[1]))
        say("   round %d: floor %.1f us, mc_get %.1f us, memcache_get %.1f us%s"
            % (r + 1, lat["floor"][-1], lat["mcfdw"][-1], lat["pgmemcache"][-1],
               ", baseline build's mc_get %.1f us" % lat[BASE + "mcfdw"][-1] if SWAP.active else ""))
    fl, mc, pg = med(lat["floor"]), med(lat["mcfdw"]), med(lat["pgmemcache"])
    add_mc = med([m - f for m, f in zip(lat["mcfdw"], lat["floor"])])
    add_pg = med([p - f for p, f in zip(lat["pgmemcache"], lat["floor"])])
    w = "1 single get latency"
    row(w, "floor: SELECT 1", fl, "us")
    row(w, "mcfdw: mc_get", mc, "us", ratio(mc, pg), ratio(mc, fl))
    row(w, "pgmemcache: memcache_get", pg, "us", None, ratio(pg, fl))
    r = ratio(add_mc, add_pg)
    row(w, "mcfdw: added over floor", add_mc, "us", r, None, "<= 1.0 x pgm", check(r, "<=", 1.0))
    row(w, "pgmemcache: added over floor", add_pg, "us")
    if SWAP.active:
        base_added(w, "mcfdw: mc_get", lat, "mcfdw", "floor")


# ---- workloads 2, 3 and 5: multi-get vs the raw client -----------------------
def multi_scripts(n):
    arr = "(SELECT array_agg('k' || g) FROM generate_series(:off, :off + %d) g)" % (n - 1)
    head = "\\set off random(0, %d)\n" % (KEYS - n)
    return {
        "floor": head + "SELECT cardinality(%s);\n" % arr,
        "mcfdw": head + "SELECT count(*) FROM mc_get_multi(%s);\n" % arr,
        "pgmemcache": head + "SELECT count(*) FROM memcache_get_multi(%s);\n" % arr,
    }


def verify_multi(n):
    conn = connect()
    a = value(conn, "SELECT count(*) FROM mc_get_multi((SELECT array_agg('k' || g) "
                    "FROM generate_series(1000, %s) g))", (999 + n,))
    b = value(conn, "SELECT count(*) FROM memcache_get_multi((SELECT array_agg('k' || g) "
                    "FROM generate_series(1000, %s) g))", (999 + n,))
    conn.close()
    if a != n or b != n:
        raise RuntimeError("%d-key multi-get: mcfdw found %s, pgmemcache %s" % (n, a, b))


def w_multi(num, n, target_raw):
    say("%d. %s-key multi-get over %d servers: %d rounds x %gs per contender (floor, "
        "mc_get_multi, memcache_get_multi, raw C client)"
        % (num, format(n, ","), len(PORTS), ROUNDS, SECONDS))
    verify_multi(n)
    scripts = with_baseline(dict(multi_scripts(n), raw=None), ["mcfdw"])
    lat = {k: [] for k in scripts}
    for r in range(ROUNDS):
        for k, s in rotated(list(scripts.items()), r):
            lat[k].append(rawclient(n) if k == "raw" else run_as(k, lambda: pgbench(s)[1]))
        say("   round %d: floor %.0f us, mc_get_multi %.0f us, memcache_get_multi %.0f us, raw %.0f us%s"
            % (r + 1, lat["floor"][-1], lat["mcfdw"][-1], lat["pgmemcache"][-1], lat["raw"][-1],
               ", baseline build's mc_get_multi %.0f us" % lat[BASE + "mcfdw"][-1] if SWAP.active else ""))
    fl, mc, pg, raw = (med(lat[k]) for k in ("floor", "mcfdw", "pgmemcache", "raw"))
    add_mc = med([m - f for m, f in zip(lat["mcfdw"], lat["floor"])])
    add_pg = med([p - f for p, f in zip(lat["pgmemcache"], lat["floor"])])
    w = "%d %s-key get_multi" % (num, format(n, ","))
    row(w, "floor: array-building query", fl, "us")
    row(w, "mcfdw: mc_get_multi", mc, "us", ratio(mc, pg), ratio(mc, raw))
    row(w, "pgmemcache: memcache_get_multi", pg, "us", None, ratio(pg, raw))
    row(w, "raw C client (test/bench/rawclient)", raw, "us")
    r_raw = ratio(add_mc, raw)
    row(w, "mcfdw: added over floor", add_mc, "us", ratio(add_mc, add_pg), r_raw,
        "<= %s x raw" % target_raw, check(r_raw, "<=", target_raw))
    row(w, "pgmemcache: added over floor", add_pg, "us", None, ratio(add_pg, raw))
    if SWAP.active:
        base_added(w, "mcfdw: mc_get_multi", lat, "mcfdw", "floor")


# ---- workload 2: the 100-key multi-get, statement by statement --------------
# Rounds of workload 2 (and of workload 13's 10-row rows): many short ones,
# since what varies on a shared machine is its load from one second to the
# next, and each round is judged on its own.
MIX_ROUNDS = int(os.environ.get("BENCH_MIX_ROUNDS") or (12 if QUICK else 30))
MIX_SECONDS = 2


def raw_in_mix(out, n):
    """A pgbench script (for pgbench_mix) that runs the raw C client for 50
    batches of n keys (after 5 of warm-up) and appends its line to out: the
    raw client's batches then share the seconds of the statements they are
    compared with.  Its own transactions' latencies (a fork and exec) mean
    nothing; raw_medians reads what it measured."""
    return "\\shell %s -p %s -n %d -k %d -b 50 -w 5 >> %s\n" % (
        RAWCLIENT, ",".join(map(str, PORTS)), n, KEYS, out)


def raw_medians(out, n):
    """The median of the raw client's per-run medians appended to out.  A
    session slow enough to draw no run of it (one transaction in 121) gets
    one run right after it instead."""
    text = ""
    if os.path.exists(out):
        with open(out) as f:
            text = f.read()
    meds = [float(m.group(1)) for m in re.finditer(r"median_us=([0-9.]+)", text)]
    if not meds:
        meds = [float(re.search(r"median_us=([0-9.]+)",
                                run_rawclient(n, "-b", 50, "-w", 5)).group(1))]
    return med(meds)


def w2_small_multi(target_raw=1.25):
    """The 100-key multi-get, judged round by round: each round is one
    pgbench session in which the floor, mc_get_multi, memcache_get_multi and
    the raw C client (raw_in_mix: 50 batches a run, about one transaction in
    121) take turns at random (pgbench_mix), so all four share the same
    seconds.  The round's ratio is mcfdw's added time (its median minus the
    floor's) over the raw client's median; the verdict is the median of the
    rounds' ratios, printed with their quartiles and how many rounds met the
    target.  With BENCH_BASELINE (another build's mcfdw.so) every round also
    runs the mix with that build swapped in (BaselineSwap), so before and
    after are measured in the same rounds."""
    n = 100
    say("2. 100-key multi-get over %d servers: %d rounds of a %ds pgbench mix (floor, "
        "mc_get_multi, memcache_get_multi and the raw C client, a statement or a run at a time)%s"
        % (len(PORTS), MIX_ROUNDS, MIX_SECONDS,
           "; the baseline build's mix in every round too" if SWAP.active else ""))
    verify_multi(n)
    scripts = multi_scripts(n)
    weights = {"floor": 40, "mcfdw": 40, "pgmemcache": 40, "raw": 1}
    per = {k: [] for k in ("floor", "mcfdw", "pgmemcache", "raw", "add_mc", "add_pg",
                           "ratio", "b_mcfdw", "b_add", "b_ratio")}
    for r in range(MIX_ROUNDS):
        got = {}
        for step in rotated(["mix", "base"] if SWAP.active else ["mix"], r):
            out = os.path.join(WORK, "raw_%d_%s.out" % (r, step))
            mix = dict(scripts, raw=raw_in_mix(out, n))
            if step == "base":
                del mix["pgmemcache"]
                with SWAP.baseline():
                    got[step] = pgbench_mix(mix, MIX_SECONDS, weights, ("raw",))
            else:
                got[step] = pgbench_mix(mix, MIX_SECONDS, weights, ("raw",))
            got[step]["raw"] = raw_medians(out, n)
        m = got["mix"]
        raw = m["raw"]
        for k in ("floor", "mcfdw", "pgmemcache", "raw"):
            per[k].append(m[k])
        per["add_mc"].append(m["mcfdw"] - m["floor"])
        per["add_pg"].append(m["pgmemcache"] - m["floor"])
        per["ratio"].append(per["add_mc"][-1] / raw)
        line = ("   round %d: floor %.0f us, mc_get_multi %.0f us (added %.0f), memcache_get_multi "
                "%.0f us, raw %.0f us: added / raw %.2f"
                % (r + 1, m["floor"], m["mcfdw"], per["add_mc"][-1], m["pgmemcache"], raw,
                   per["ratio"][-1]))
        if SWAP.active:
            b = got["base"]
            per["b_mcfdw"].append(b["mcfdw"])
            per["b_add"].append(b["mcfdw"] - b["floor"])
            per["b_ratio"].append(per["b_add"][-1] / b["raw"])
            line += "; baseline build: added %.0f us, raw %.0f us, %.2f" % (
                per["b_add"][-1], b["raw"], per["b_ratio"][-1])
        say(line)
    w = "2 100-key get_multi"
    fl, mc, pg, raw = (med(per[k]) for k in ("floor", "mcfdw", "pgmemcache", "raw"))
    add_mc, add_pg = med(per["add_mc"]), med(per["add_pg"])
    row(w, "floor: array-building query", fl, "us")
    row(w, "mcfdw: mc_get_multi", mc, "us", ratio(mc, pg), ratio(mc, raw))
    row(w, "pgmemcache: memcache_get_multi", pg, "us", None, ratio(pg, raw))
    row(w, "raw C client (test/bench/rawclient)", raw, "us")
    r_raw = med(per["ratio"])
    q1, q3 = quartiles(per["ratio"])
    good = sum(1 for x in per["ratio"] if x <= target_raw)
    row(w, "mcfdw: added over floor", add_mc, "us", ratio(add_mc, add_pg), r_raw,
        "<= %s x raw" % target_raw, check(r_raw, "<=", target_raw),
        "/raw is the median of %d rounds' added / raw (quartiles %.2f-%.2f; %d of %d rounds <= %s)"
        % (len(per["ratio"]), q1, q3, good, len(per["ratio"]), target_raw))
    row(w, "pgmemcache: added over floor", add_pg, "us", None, med([a / b for a, b in zip(per["add_pg"], per["raw"])]))
    if SWAP.active:
        b_ratio = med(per["b_ratio"])
        q1, q3 = quartiles(per["b_ratio"])
        better = sum(1 for a, b in zip(per["ratio"], per["b_ratio"]) if a < b)
        row(w, "mcfdw, baseline build: added over floor", med(per["b_add"]), "us", None, b_ratio,
            note="%s; quartiles %.2f-%.2f; this build's ratio lower in %d of %d rounds"
            % (SWAP.path, q1, q3, better, len(per["b_ratio"])))
        base_row(w, "mcfdw: mc_get_multi", per["mcfdw"], per["b_mcfdw"], "us",
                 note="each build's statements in a pgbench mix of their own")
        base_row(w, "mcfdw: mc_get_multi, added over floor", per["add_mc"], per["b_add"], "us")


def w2_callgrind():
    """Instructions of a 100-key multi-get: statements of 100 keys each in a
    single-user backend, (I(30 statements) - I(10)) / 20 per call, over the
    array-building floor; beside it the raw C client's own instructions per
    100-key batch (its whole process: (I(30 batches) - I(10)) / 20), which
    routes, encodes, parses and copies the same keys and values.  Neither
    depends on the machine's load."""
    say("2. user-mode instructions per 100-key call: callgrind (single-user backend, raw C client)")
    w = "2 100-key get_multi"
    if shutil.which("valgrind") is None:
        row(w, "callgrind: instructions per call", None, "instr", note="valgrind not installed")
        return
    su = single_user()
    if su.error:
        row(w, "callgrind: instructions per call", None, "instr", note="single-user backend: " + su.error)
        return
    arr = "(SELECT array_agg('k' || g) FROM generate_series(%d, %d) g)"
    stmts = {"floor": lambda k: ["SELECT cardinality(%s)" % (arr % (i * 100, i * 100 + 99)) for i in range(k)],
             "mcfdw": lambda k: ["SELECT count(*) FROM mc_get_multi(%s)" % (arr % (i * 100, i * 100 + 99))
                                 for i in range(k)]}
    res = {k: su.instructions_of(fn, 10, 30, '= "100"') for k, fn in stmts.items()}
    if SWAP.active:
        with SWAP.baseline():
            res["base"] = su.instructions_of(stmts["mcfdw"], 10, 30, '= "100"')
    raw = []
    for b in (10, 30):
        out = run_rawclient(100, "-b", b, "-t", 600, valgrind=[
            "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"])
        m = re.search(r"Collected : (\d+)", out)
        raw.append(int(m.group(1)) if m else None)
    raw_per = (raw[1] - raw[0]) / 20 if None not in raw else None
    fl = res["floor"][0]
    add = res["mcfdw"][0] - fl if res["mcfdw"][0] is not None and fl is not None else None
    row(w, "floor: instructions per call (callgrind)", fl, "instr", note=res["floor"][1] or "")
    row(w, "mcfdw: instructions per 100-key call over floor (callgrind)", add, "instr", None,
        ratio(add, raw_per), note=res["mcfdw"][1] or "")
    if SWAP.active:
        b_add = res["base"][0] - fl if res["base"][0] is not None and fl is not None else None
        row(w, "mcfdw, baseline build: instructions per call over floor (callgrind)", b_add, "instr",
            None, ratio(b_add, raw_per), note=res["base"][1] or SWAP.path)
        base_row(w, "mcfdw: instructions per 100-key call over floor (callgrind)", add, b_add, "instr")
    row(w, "raw C client: instructions per 100-key batch (callgrind)", raw_per, "instr",
        note="" if raw_per is not None else "rawclient under valgrind failed")


# ---- workload 4: 10,000 single gets in one statement -------------------------
def sched_ns(pid):
    """(on a CPU, runnable but waiting for one) nanoseconds of a process's
    main thread, from /proc/<pid>/schedstat (exact, not tick-sampled); None
    where it cannot be read."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            on, waiting = f.read().split()[:2]
        return int(on), int(waiting)
    except (OSError, ValueError):
        return None


def proc_cpu(pid):
    """(user, system) CPU seconds of a process: /proc/<pid>/stat fields 14, 15."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / HZ, int(fields[12]) / HZ


LOOP_SQL = {
    "floor": "SELECT count('k' || mod(g::bigint * 7919, %d)) FROM generate_series(%%s, %%s) g" % KEYS,
    "mcfdw": "SELECT count(mc_get('k' || mod(g::bigint * 7919, %d))) FROM generate_series(%%s, %%s) g" % KEYS,
    "pgmemcache": "SELECT count(memcache_get('k' || mod(g::bigint * 7919, %d))) FROM generate_series(%%s, %%s) g" % KEYS,
}
SYSCALLS = ["sendto", "sendmsg", "recvfrom", "poll", "epoll_wait", "epoll_ctl",
            "epoll_create1", "close", "read", "write"]


def count_syscalls_perf(conn, pid, sql):
    """Syscalls of one statement, counted in the kernel by perf stat on the
    raw_syscalls tracepoint (no ptrace stop per call).  Returns (total,
    {name: count}) or None when perf cannot count here."""
    events = ["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + s for s in SYSCALLS]
    out = os.path.join(WORK, "perfstat.%d" % pid)
    p = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out, "-e", ",".join(events),
                          "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    conn.cursor().execute(sql, (1, LOOP))
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    p.wait()
    counts = {}
    try:
        with open(out) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[0].isdigit():
                    counts[parts[2]] = int(parts[0])
    except OSError:
        return None
    if "raw_syscalls:sys_enter" not in counts:
        return None
    by = {s: counts.get("syscalls:sys_enter_" + s, 0) for s in SYSCALLS}
    return counts["raw_syscalls:sys_enter"], by


def count_syscalls_strace(conn, pid, sql):
    """The same count by strace -c -f -p (a ptrace stop per call: slower,
    which changes how often an optimistic read finds the reply there)."""
    p = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    conn.cursor().execute(sql, (1, LOOP))
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    err = p.communicate()[1]
    m = re.search(r"^100\.00\s+\S+\s+\S+\s+(\d+)\s+(?:\d+\s+)?total", err, re.M)
    return int(m.group(1)) if m else None


def raw_singles(off):
    """The raw C client's 10,000 round trips (rawclient -s): wall ms, and
    user and system CPU seconds, from getrusage inside the client."""
    out = run_rawclient(LOOP, "-s", off)
    m = re.search(r"wall_ms=([0-9.]+) user_us_per_call=([0-9.]+) sys_us_per_call=([0-9.]+)", out)
    if not m:
        raise RuntimeError("rawclient -s printed: " + out)
    return (float(m.group(1)), float(m.group(2)) * LOOP / 1e6, float(m.group(3)) * LOOP / 1e6)


def w4_loop():
    say("4. %s single gets in one statement: %d rounds x %d statements per contender; "
        "CPU from /proc/<pid>/stat" % (format(LOOP, ","), ROUNDS, CPU_REPEAT))
    # the baseline's session loads its build in its warm-up (run_as) and
    # keeps it for the statements after
    sql = with_baseline(LOOP_SQL, ["mcfdw"])
    conns = {k: connect() for k in sql}
    pids = {k: backend_pid(c) for k, c in conns.items()}
    for k, c in conns.items():       # warm: library loaded, connections open
        n = run_as(k, lambda: value(c, sql[k], (1, LOOP)))
        if n != LOOP:
            raise RuntimeError("%s loop found %s of %d keys" % (k, n, LOOP))
    contenders = list(conns) + ["raw"]     # raw: rawclient -s, its own process
    wall = {k: [] for k in contenders}     # ms per statement
    user = {k: [] for k in contenders}     # CPU seconds per statement
    syst = {k: [] for k in contenders}
    for r in range(ROUNDS):
        for i in range(CPU_REPEAT):        # contenders alternate statement by statement
            # every statement gets keys of its own (a 10,000-key window that
            # moves on each time) and the order rotates, so no contender
            # reads items another one has just touched, nor always goes first
            for j, k in enumerate(rotated(contenders, r * CPU_REPEAT + i)):
                off = ((r * CPU_REPEAT + i) * len(contenders) + j) * LOOP
                if k == "raw":
                    t, u, sy = raw_singles(off)
                    wall[k].append(t)
                    user[k].append(u)
                    syst[k].append(sy)
                    continue
                u0, s0 = proc_cpu(pids[k])
                t0 = time.perf_counter()
                conns[k].cursor().execute(sql[k], (off, off + LOOP - 1))
                t = time.perf_counter() - t0
                u1, s1 = proc_cpu(pids[k])
                wall[k].append(t * 1e3)
                user[k].append(u1 - u0)
                syst[k].append(s1 - s0)
        n = CPU_REPEAT
        shown = ["floor", "mcfdw", "pgmemcache", "raw"]
        say("   round %d: wall ms/statement floor %.1f, mcfdw %.1f, pgmemcache %.1f, raw %.1f; "
            "user us/call %.2f, %.2f, %.2f, %.2f%s"
            % ((r + 1,) + tuple(med(wall[k][-n:]) for k in shown)
               + tuple(sum(user[k][-n:]) / (n * LOOP) * 1e6 for k in shown)
               + ("; baseline build's mcfdw %.1f ms, %.2f us" % (
                   med(wall[BASE + "mcfdw"][-n:]), sum(user[BASE + "mcfdw"][-n:]) / (n * LOOP) * 1e6)
                  if SWAP.active else "",)))

    # syscalls: separate passes, after the timing
    sc = {k: count_syscalls_perf(conns[k], pids[k], LOOP_SQL[k]) for k in LOOP_SQL}
    st = {k: count_syscalls_strace(conns[k], pids[k], LOOP_SQL[k]) for k in LOOP_SQL}
    bsc = None
    if SWAP.active and sc["mcfdw"]:
        bsc = count_syscalls_perf(conns[BASE + "mcfdw"], pids[BASE + "mcfdw"], LOOP_SQL["mcfdw"])
    for c in conns.values():
        c.close()

    w = "4 %s gets in one statement" % format(LOOP, ",")
    wm, wp, wf = med(wall["mcfdw"]), med(wall["pgmemcache"]), med(wall["floor"])
    row(w, "floor: same loop, no get", wf, "ms")
    r = ratio(wm, wp)
    row(w, "mcfdw: wall per statement", wm, "ms", r, ratio(wm, wf), "<= 1.0 x pgm", check(r, "<=", 1.0))
    row(w, "pgmemcache: wall per statement", wp, "ms", None, ratio(wp, wf))
    # CPU: /proc/<pid>/stat counts in 1/HZ s and the kernel splits user from
    # system by sampling at its tick, so per-round figures are coarse: pool
    # all rounds (the contenders still alternate inside each round).
    def per_call(xs):
        return sum(xs) / (len(xs) * LOOP) * 1e6
    um, up, uf = (per_call(user[k]) for k in ("mcfdw", "pgmemcache", "floor"))
    # No target on user CPU: the raw client's row below shows that a loop
    # making only a round trip's three system calls is charged over half of
    # pgmemcache's user time, so "<= 0.5 x pgm" would measure the tick
    # accounting, not the extension.  The callgrind row (w4_callgrind) carries
    # that target instead: instructions counted, nothing sampled.
    note = ("pooled over all statements; the kernel splits user from system time by sampling at its "
            "tick; no target (see the callgrind row)")
    row(w, "mcfdw: user CPU per call", um, "us", ratio(um, up), ratio(um, uf), note=note)
    row(w, "pgmemcache: user CPU per call", up, "us", None, ratio(up, uf))
    row(w, "floor: user CPU per call", uf, "us")
    am, ap = um - uf, up - uf
    row(w, "mcfdw: user CPU per get (over floor)", am, "us", ratio(am, ap))
    row(w, "pgmemcache: user CPU per get (over floor)", ap, "us")
    # the raw client spends next to nothing in user mode but its three
    # system calls per round trip: what it is charged is the floor of the
    # /proc accounting for any client that makes those calls
    ur = per_call(user["raw"])
    row(w, "raw C client (send, epoll_wait, recv): wall per 10,000", med(wall["raw"]), "ms",
        None, ratio(med(wall["raw"]), wf))
    row(w, "raw C client: user CPU per call", ur, "us", None, ratio(ur, uf),
        note="getrusage; the same tick-sampled split as /proc/<pid>/stat")
    r = ratio(um - ur, up - ur)
    row(w, "mcfdw: user CPU per call over the raw client's", um - ur, "us", r)
    row(w, "pgmemcache: user CPU per call over the raw client's", up - ur, "us")
    sm, sp, sf = (per_call(syst[k]) for k in ("mcfdw", "pgmemcache", "floor"))
    row(w, "mcfdw: system CPU per call", sm, "us", ratio(sm, sp), ratio(sm, sf))
    row(w, "pgmemcache: system CPU per call", sp, "us")
    row(w, "raw C client: system CPU per call", per_call(syst["raw"]), "us")
    if all(sc.values()):
        per = {k: sc[k][0] / LOOP for k in sc}
        def detail(k):
            return " ".join("%s %.2f" % (s, n / LOOP) for s, n in sc[k][1].items() if n >= LOOP / 100)
        r = ratio(per["mcfdw"], per["pgmemcache"])
        row(w, "mcfdw: syscalls per call (perf stat)", per["mcfdw"], "calls", r, None,
            "<= 1.0 x pgm", check(r, "<=", 1.0), detail("mcfdw"))
        row(w, "pgmemcache: syscalls per call (perf stat)", per["pgmemcache"], "calls",
            note=detail("pgmemcache"))
        row(w, "floor: syscalls per call (perf stat)", per["floor"], "calls")
    else:
        row(w, "syscalls per call (perf stat)", None, "calls", note="perf stat cannot count syscalls here")
    if all(v is not None for v in st.values()):
        row(w, "mcfdw: syscalls per call (strace -c)", st["mcfdw"] / LOOP, "calls",
            ratio(st["mcfdw"], st["pgmemcache"]), note="ptrace slows the backend")
        row(w, "pgmemcache: syscalls per call (strace -c)", st["pgmemcache"] / LOOP, "calls")
    if SWAP.active:
        lat = {k: per_round(wall[k], CPU_REPEAT) for k in ("floor", "mcfdw", BASE + "mcfdw")}
        base_added(w, "mcfdw: wall per statement", lat, "mcfdw", None, "ms")
        if bsc:
            base_row(w, "mcfdw: syscalls per call (perf stat)", sc["mcfdw"][0] / LOOP, bsc[0] / LOOP,
                     "calls")


# ---- user-mode instructions, callgrind on a single-user backend ------------
class SingleUser:
    """A second, private cluster (same settings, same four servers) whose
    backend runs as `postgres --single` under valgrind --tool=callgrind:
    the instructions a statement executes in user mode, with nothing
    sampled.  Collected inside standard_ExecutorRun only; each figure is the
    difference between two statements of K1 and K2 calls divided by K2-K1,
    so start-up and first-call costs cancel."""

    K1, K2 = 1000, 5000

    def __init__(self):
        self.dir = os.path.join(os.environ.get("MCFDW_RIG", WORK), "callgrind")
        self.pgdata = os.path.join(self.dir, "pgdata")
        self.error = None
        self.asuser = []
        if os.geteuid() == 0:
            self.asuser = ["runuser", "-u", "postgres", "--"]
        # a kept rig (MCFDW_KEEP=1) still holds the last run's cluster
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        p = subprocess.run(self.asuser + [os.path.join(PGBIN, "initdb"), "-D", self.pgdata, "-U", "postgres",
                                          "-E", "UTF8", "--locale=C.UTF-8", "--auth=trust", "--no-sync"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=self.dir)
        if p.returncode != 0:
            self.error = "initdb failed: " + p.stdout[-300:]
            return
        servers = ",".join("127.0.0.1:%d" % port for port in PORTS)
        with open(os.path.join(self.pgdata, "postgresql.conf"), "a") as f:
            f.write("\nshared_preload_libraries = 'pgmemcache'\n"
                    "pgmemcache.default_servers = '%s'\n" % servers)
        out = self.run(["CREATE EXTENSION mcfdw",
                        "CREATE EXTENSION pgmemcache",
                        "CREATE SERVER memcached FOREIGN DATA WRAPPER mcfdw "
                        "OPTIONS (servers '%s', distribution 'modula')" % servers,
                        "SELECT mc_get('k1') = memcache_get('k1') AS same"])
        if "ERROR" in out or 'same = "t"' not in out:
            self.error = self.first_error(out)

    @staticmethod
    def first_error(out):
        m = re.search(r"ERROR:\s+(.*)", out)
        return m.group(1).strip() if m else out.strip()[-200:]

    def run(self, statements, valgrind=None):
        cmd = self.asuser + (valgrind or []) + [os.path.join(PGBIN, "postgres"), "--single", "-D",
                                                self.pgdata, "postgres"]
        p = subprocess.run(cmd, input="\n".join(statements) + "\n", stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=self.dir)
        return p.stdout

    def instructions(self, sql_for_k, expect, pre=()):
        """Instructions per call: sql_for_k(K) must return one row holding
        expect(K); pre: statements run first in the same backend (SET)."""
        got = []
        for k in (self.K1, self.K2):
            out = self.run(list(pre) + [sql_for_k(k)], valgrind=[
                "valgrind", "--tool=callgrind", "--toggle-collect=standard_ExecutorRun",
                "--callgrind-out-file=/dev/null"])
            m = re.search(r"Collected : (\d+)", out)
            if "ERROR" in out or not m or (' = "%s"' % expect(k)) not in out:
                return None, self.first_error(out)
            got.append(int(m.group(1)))
        return (got[1] - got[0]) / (self.K2 - self.K1), None

    def instructions_of(self, stmts_for_k, k1, k2, each):
        """Instructions per statement: stmts_for_k(K) returns K statements,
        each of whose results must print each (e.g. '= "100"')."""
        got = []
        for k in (k1, k2):
            out = self.run(stmts_for_k(k), valgrind=[
                "valgrind", "--tool=callgrind", "--toggle-collect=standard_ExecutorRun",
                "--callgrind-out-file=/dev/null"])
            m = re.search(r"Collected : (\d+)", out)
            if "ERROR" in out or not m or out.count(each) != k:
                return None, self.first_error(out)
            got.append(int(m.group(1)))
        return (got[1] - got[0]) / (k2 - k1), None


class BaselineSwap:
    """BENCH_BASELINE=path: another build of mcfdw.so (the one before a
    change), measured in the same rounds as the installed one.  baseline()
    puts it in place of $pkglibdir/mcfdw.so for the sessions started inside
    the with-block (a session loads the library when it first calls it; one
    that has loaded it keeps its copy), and the installed build back after.
    Each swap is a rename over the file, so a session starting meanwhile
    loads one build or the other, never a half-written file."""

    def __init__(self):
        self.path = os.environ.get("BENCH_BASELINE") or None
        self.active = self.path is not None
        if not self.active:
            return
        if not os.path.isfile(self.path):
            raise RuntimeError("BENCH_BASELINE: no such file: " + self.path)
        pg_config = os.environ.get("PG_CONFIG") or os.path.join(PGBIN, "pg_config")
        libdir = subprocess.run([pg_config, "--pkglibdir"], stdout=subprocess.PIPE,
                                text=True, check=True).stdout.strip()
        self.lib = os.path.join(libdir, "mcfdw.so")
        self.mine = os.path.join(WORK, "mcfdw.installed.so")
        shutil.copy2(self.lib, self.mine)

    def _put(self, src):
        tmp = self.lib + ".bench-swap"
        shutil.copy2(src, tmp)
        os.replace(tmp, self.lib)

    @contextlib.contextmanager
    def baseline(self):
        self._put(self.path)
        try:
            yield
        finally:
            self._put(self.mine)


SWAP = None

# Issue 21's bound on any row of a refactor: this build / the baseline
# build at most this (at least its inverse for throughput).
BASE_BOUND = float(os.environ.get("BENCH_BASELINE_BOUND") or 1.03)
BASE = "baseline "              # the prefix of a contender run under the baseline build
BASE_SUMMARY = []               # the comparisons, for the table at the end of the report


def with_baseline(contenders, keys):
    """The contenders ({name: what}) and, with BENCH_BASELINE, a copy of
    each of keys under the name BASE + key, run under the baseline build
    (run_as): one more contender in the same rounds and the same rotation.
    Without BENCH_BASELINE, the contenders as they are."""
    out = dict(contenders)
    if SWAP.active:
        for k in keys:
            out[BASE + k] = contenders[k]
    return out


def run_as(name, fn):
    """fn() under the build the contender name stands for: the baseline's
    for BASE + ..., in place for the sessions fn starts; else this one."""
    if name.startswith(BASE):
        with SWAP.baseline():
            return fn()
    return fn()


def base_row(workload, what, mine, base, unit, higher=False, note=""):
    """this build / the baseline for one mcfdw row: mine and base are the
    figures of the two builds, one per round (paired: base[i] ran in the
    round of mine[i]), or single counts (callgrind's instructions, the same
    each run).  Each round's ratio is taken before the median; the row
    carries the quartiles of the rounds' ratios and the check against
    BASE_BOUND (higher: a throughput, which may fall to 1 / BASE_BOUND)."""
    if not isinstance(mine, list):
        mine, base = [mine], [base]
    # equal counts (0 connections each) are a ratio of 1
    rs = [1.0 if a == b and a is not None else ratio(a, b) for a, b in zip(mine, base)]
    rs = [x for x in rs if x is not None]
    r = med(rs) if rs else None
    q1, q3 = quartiles(rs) if len(rs) > 1 else (None, None)
    limit = 1 / BASE_BOUND if higher else BASE_BOUND
    op = ">=" if higher else "<="
    status = check(r, op, limit)
    good = sum(1 for x in rs if check(x, op, limit) == "met")
    m = med([x for x in mine if x is not None]) if any(x is not None for x in mine) else None
    b = med([x for x in base if x is not None]) if any(x is not None for x in base) else None
    # McGill, Tukey and Larsen's notch: the median +- 1.57 IQR / sqrt(n)
    # is about a 95 % interval, so resolving the bound's margin needs
    # n >= (1.57 IQR / margin)^2 rounds
    notch = need = None
    if q1 is not None:
        notch = 1.57 * (q3 - q1) / len(rs) ** 0.5
        need = max(len(rs), int(-(-(1.57 * (q3 - q1) / (BASE_BOUND - 1)) ** 2 // 1)))
    spread = ("the median of %d rounds' ratios, quartiles %s-%s (+-%.3f at 95 %%: %d rounds for "
              "+-%.3f), %d of %d rounds %s %.3f"
              % (len(rs), fmt_ratio3(q1), fmt_ratio3(q3), notch, need, BASE_BOUND - 1, good, len(rs),
                 op, limit)
              if q1 is not None else "one count each")
    row(workload, "%s: this build / baseline" % what, r, "x", target="%s %.3f x baseline" % (op, limit),
        status=status, note="this build %s %s, baseline %s %s; %s%s"
        % (fmt_num(m, unit), unit, fmt_num(b, unit), unit, spread, "; " + note if note else ""),
        base=True)
    BASE_SUMMARY.append(dict(row="%s / %s" % (workload, what), mine=m, base=b, unit=unit, ratio=r,
                             q1=q1, q3=q3, notch=notch, need=need, bound="%s %.3f" % (op, limit),
                             status=status))


def base_added(w, what, lat, k, floor, unit="us"):
    """The rows this build / baseline of contender k (lat: per-round
    figures, BASE + k the baseline's): the whole figure and, when floor is
    given, the figure added over the floor of the same round."""
    base_row(w, what, lat[k], lat[BASE + k], unit)
    if floor:
        base_row(w, what + ", added over floor", [a - f for a, f in zip(lat[k], lat[floor])],
                 [a - f for a, f in zip(lat[BASE + k], lat[floor])], unit)


def per_round(xs, n):
    """The median of each run of n consecutive figures: one per round."""
    return [med(xs[i:i + n]) for i in range(0, len(xs), n)]


_single_user = []


def single_user():
    if not _single_user:
        say("   callgrind: a single-user cluster in $MCFDW_RIG/callgrind")
        _single_user.append(SingleUser())
    return _single_user[0]


# Issue 21's bound: with client statistics off, the single get and the
# 10,000-key get_multi cost at most 3 % more than before the layer folders
# (3e4d89a: 1,906 and 1,714 instructions over the floor).
CG_BEFORE = {4: 1906, 3: 1714}
# Issue 24's bound: counting (mc_client_stats) adds at most 3 %.
CG_COUNTING = 1.03


def callgrind_rows(workload, what, unit, sqls, expect, target=None, wno=None):
    """Rows of user-mode instructions per call (or per key): floor, mcfdw,
    pgmemcache; the mcfdw row carries the target on (mcfdw - floor) /
    (pgmemcache - floor).  wno: also mcfdw with mcfdw.client_stats off,
    against CG_BEFORE[wno], and what counting adds."""
    if shutil.which("valgrind") is None:
        row(workload, "callgrind: " + what, None, unit, note="valgrind not installed")
        return
    su = single_user()
    if su.error:
        row(workload, "callgrind: " + what, None, unit, status="n/a" if target else "",
            target=target[0] if target else "", note="single-user backend: " + su.error)
        return
    res = {}
    errs = {}
    for k, fn in sqls.items():
        res[k], errs[k] = su.instructions(fn, expect)
    fl = res["floor"]
    row(workload, "floor: %s (callgrind)" % what, fl, unit, note=errs["floor"] or "")
    add = {k: (res[k] - fl if res[k] is not None and fl is not None else None) for k in ("mcfdw", "pgmemcache")}
    r = ratio(add["mcfdw"], add["pgmemcache"])
    row(workload, "mcfdw: %s over floor (callgrind)" % what, add["mcfdw"], unit, r, None,
        target[0] if target else "", check(r, "<=", target[1]) if target else "",
        ("single-user backend: " + errs["mcfdw"]) if errs["mcfdw"] else "")
    row(workload, "pgmemcache: %s over floor (callgrind)" % what, add["pgmemcache"], unit,
        note=("single-user backend: " + errs["pgmemcache"]) if errs["pgmemcache"] else "")
    if SWAP.active:
        with SWAP.baseline():
            b, err = su.instructions(sqls["mcfdw"], expect)
        base_row(workload, "mcfdw: %s over floor (callgrind)" % what, add["mcfdw"],
                 b - fl if b is not None and fl is not None else None, unit,
                 note=("baseline's single-user backend: " + err) if err else "")
    if wno is None:
        return
    off, err = su.instructions(sqls["mcfdw"], expect, pre=["SET mcfdw.client_stats = off"])
    add_off = off - fl if off is not None and fl is not None else None
    lim = CG_BEFORE[wno] * 1.03
    row(workload, "mcfdw, counting off: %s over floor (callgrind)" % what, add_off, unit,
        target="<= %s (3e4d89a + 3 %%)" % format(int(lim), ","),
        status=check(add_off, "<=", lim),
        note=("single-user backend: " + err) if err else "3e4d89a: %s" % format(CG_BEFORE[wno], ","))
    r = ratio(add["mcfdw"], add_off)
    row(workload, "mcfdw: counting on / off (mc_client_stats) (callgrind)", r, "x",
        target="<= %.2f" % CG_COUNTING, status=check(r, "<=", CG_COUNTING),
        note="instructions over floor, mcfdw.client_stats on / off")


def w4_callgrind():
    say("4. user-mode instructions per get: callgrind on a single-user backend")
    callgrind_rows(
        "4 %s gets in one statement" % format(LOOP, ","), "instructions per get", "instr",
        {"floor": lambda k: "SELECT count('k' || g) FROM generate_series(1, %d) g" % k,
         "mcfdw": lambda k: "SELECT count(mc_get('k' || g)) FROM generate_series(1, %d) g" % k,
         "pgmemcache": lambda k: "SELECT count(memcache_get('k' || g)) FROM generate_series(1, %d) g" % k},
        lambda k: k, ("<= 0.5 x pgm", 0.5), wno=4)


def w3_callgrind():
    say("3. user-mode instructions per key of a multi-get: callgrind on a single-user backend")
    arr = "(SELECT array_agg('k' || g) FROM generate_series(1, %d) g)"
    callgrind_rows(
        "3 10,000-key get_multi", "instructions per key (1,000 vs 5,000 keys)", "instr",
        {"floor": lambda k: "SELECT cardinality(%s)" % (arr % k),
         "mcfdw": lambda k: "SELECT count(*) FROM mc_get_multi(%s)" % (arr % k),
         "pgmemcache": lambda k: "SELECT count(*) FROM memcache_get_multi(%s)" % (arr % k)},
        lambda k: k, wno=3)


# ---- workload 6: the parser under callgrind ----------------------------------
def w6_parser():
    say("6. parser alone: test/unit/parser_budget.sh (callgrind, LD_PRELOAD allocation count)")
    script = os.path.join(SRC, "test/unit/parser_budget.sh")
    if not os.path.exists(script):
        row("6 parser", "mc_parse_reply", None, "instr/header", note="test/unit/parser_budget.sh missing")
        return
    p = subprocess.run(["sh", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # the first figure is the multi-get's hot path (mc_parse_reply_z on
    # "VA 100 f0 O12345"), the second the general parser on a k reply
    m = re.search(r"parser: ([0-9.]+) instructions per VA header, multi-get", p.stdout)
    ins = float(m.group(1)) if m else None
    mg = re.search(r"parser: ([0-9.]+) instructions per VA header, general", p.stdout)
    ins_general = float(mg.group(1)) if mg else None
    a = re.search(r"parser: 0 allocations per VA header", p.stdout)
    g = re.search(r"allocations grow with replies \((\d+) for (\d+), (\d+) for (\d+)\)", p.stdout)
    if a:
        allocs = 0.0
    elif g:
        allocs = (int(g.group(3)) - int(g.group(1))) / (int(g.group(4)) - int(g.group(2)))
    else:
        allocs = None
    w = "6 parser (callgrind)"
    row(w, "mc_parse_reply_z: instructions per VA header", ins, "instr", None, None,
        "<= 100", check(ins, "<=", 100), 'the multi-get reply "VA 100 f0 O12345"')
    row(w, "mc_parse_reply (general): instructions per VA header", ins_general, "instr",
        note='reply "VA 100 f0 kuser:12345"')
    row(w, "mc_parse_reply: allocations per VA header", allocs, "allocs", None, None,
        "== 0", check(allocs, "==", 0))


# ---- workload 7: pool -----------------------------------------------------
class Stats:
    """One persistent socket per memcached for `stats`, so reading the
    counters opens no connection itself."""

    def __init__(self, ports):
        self.socks = [socket.create_connection(("127.0.0.1", p)) for p in ports]

    def total(self, name):
        n = 0
        for s in self.socks:
            s.sendall(b"stats\r\n")
            buf = b""
            while not buf.endswith(b"END\r\n"):
                buf += s.recv(65536)
            for line in buf.decode().splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] == name:
                    n += int(parts[2])
        return n

    def close(self):
        for s in self.socks:
            s.close()


def rss_kb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "RssAnon:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def pool_run(stats, get, multi):
    """Connections opened by 10,000 calls after the first and the RSS
    growth over POOL_CALLS, in a session of its own."""
    conn = connect()
    pid = backend_pid(conn)
    cur = conn.cursor()
    # first calls: every server is reached once
    cur.execute("SELECT count(*) FROM %s((SELECT array_agg('k' || g) FROM generate_series(0, 99) g))" % multi)
    cur.execute("SELECT %s('k1')" % get)
    before = stats.total("total_connections")
    for i in range(100):            # 10,000 calls in 100 statements
        cur.execute("SELECT count(%s('k' || g)) FROM generate_series(%%s, %%s) g" % get,
                    (i * 100, i * 100 + 99))
    conns_per_10k = stats.total("total_connections") - before
    rss0 = rss_kb(pid)
    stmt = "SELECT count(%s('k' || mod(g, %d))) FROM generate_series(%%s, %%s) g" % (get, KEYS)
    for i in range(POOL_CALLS // LOOP):
        cur.execute(stmt, (i * LOOP, (i + 1) * LOOP - 1))
    rss1 = rss_kb(pid)
    conn.close()
    return (conns_per_10k, rss1["VmRSS"] - rss0["VmRSS"], rss1.get("RssAnon", 0) - rss0.get("RssAnon", 0),
            rss0["VmRSS"])


def w7_pool():
    say("7. pool: connections opened per 10,000 calls; backend RSS over %s calls" % format(POOL_CALLS, ","))
    stats = Stats(PORTS)
    fns = with_baseline({"mcfdw": ("mc_get", "mc_get_multi"),
                         "pgmemcache": ("memcache_get", "memcache_get_multi")}, ["mcfdw"])
    res = {}
    for k, (get, multi) in fns.items():
        res[k] = run_as(k, lambda: pool_run(stats, get, multi))
    stats.close()
    w = "7 pool"
    row(w, "mcfdw: connections opened per 10,000 calls", res["mcfdw"][0], "conns", None, None,
        "== 0", check(res["mcfdw"][0], "==", 0), "after the first call; memcached total_connections")
    row(w, "pgmemcache: connections opened per 10,000 calls", res["pgmemcache"][0], "conns")
    row(w, "mcfdw: RSS growth over %s calls" % format(POOL_CALLS, ","), res["mcfdw"][1], "kB", None, None,
        "< 1024 kB", check(res["mcfdw"][1], "<", 1024),
        "VmRSS %d kB before; RssAnon %+d kB" % (res["mcfdw"][3], res["mcfdw"][2]))
    row(w, "pgmemcache: RSS growth over %s calls" % format(POOL_CALLS, ","), res["pgmemcache"][1], "kB",
        note="VmRSS %d kB before; RssAnon %+d kB" % (res["pgmemcache"][3], res["pgmemcache"][2]))
    if SWAP.active:
        b = res[BASE + "mcfdw"]
        base_row(w, "mcfdw: connections opened per 10,000 calls", res["mcfdw"][0], b[0], "conns")
        row(w, "mcfdw, baseline build: RSS growth over %s calls" % format(POOL_CALLS, ","), b[1], "kB",
            note="VmRSS %d kB before; RssAnon %+d kB; one run each and no ratio: the growth is a few "
            "pages or none"
            % (b[3], b[2]))


# ---- workload 8: seed 004 under concurrency ---------------------------------
# 200-key space, 160 populated (i % 5 <> 4); value sizes per key: 5 % large
# (100 KB: i % 20 = 3), the rest 80-250 bytes.
SEED_LEN = "(CASE WHEN mod(%(k)s, 20) = 3 THEN 102400 ELSE 80 + mod(%(k)s * 37, 171) END)"


def seed_populate(conn):
    n = value(conn, ("SELECT count(*) FILTER (WHERE mc_set('s' || i, repeat('x', " + SEED_LEN + "))) "
                     "FROM generate_series(0, 199) i WHERE mod(i, 5) <> 4") % {"k": "i"})
    conn.cursor().execute("SELECT mc_delete('s' || i) FROM generate_series(4, 199, 5) i")
    if n != 160:
        raise RuntimeError("seed 004: populated %s keys, not 160" % n)


def seed_scripts():
    head = "\\set k random(0, 199)\n"
    ln = SEED_LEN % {"k": ":k::int"}
    five = "ARRAY[%s]" % ", ".join("'s' || mod(:k::int + %d, 200)" % i for i in range(5))
    return {
        "SET": {"mcfdw": head + "SELECT mc_set('s' || :k, repeat('x', %s));\n" % ln,
                "pgmemcache": head + "SELECT memcache_set('s' || :k, repeat('x', %s));\n" % ln},
        "GET": {"mcfdw": head + "SELECT mc_get('s' || :k);\n",
                "pgmemcache": head + "SELECT memcache_get('s' || :k);\n"},
        "MULTI_GET(5)": {"mcfdw": head + "SELECT count(*) FROM mc_get_multi(%s);\n" % five,
                         "pgmemcache": head + "SELECT count(*) FROM memcache_get_multi(%s);\n" % five},
        "DELETE": {"mcfdw": head + "SELECT mc_delete('s' || :k);\n",
                   "pgmemcache": head + "SELECT memcache_delete('s' || :k);\n"},
    }


# ---- workload 11: the foreign table (issue 14) -------------------------------
def pgbench_rounds(scripts, mine):
    """ROUNDS rounds of one pgbench run per script ({name: text}), in
    rotated order; with BENCH_BASELINE, the scripts named in mine (those
    that call mcfdw) once more each under the baseline build (BASE + name).
    Returns {name: [median latency per round]}."""
    scripts = with_baseline(scripts, mine)
    lat = {k: [] for k in scripts}
    for r in range(ROUNDS):
        for k, sc in rotated(list(scripts.items()), r):
            lat[k].append(run_as(k, lambda: pgbench(sc)[1]))
    return lat


FT_JOIN_ROWS = 10000
FT_INSERT_ROWS = 10000


def ft_setup():
    """bench_ft over the keys k0..k99999 (no key prefix; the columns of
    mc_get_multi's rows), bench_ft_w for the writes (prefix "ftw:"),
    bench_ids with the 10,000 join rows."""
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP FOREIGN TABLE IF EXISTS bench_ft, bench_ft_w")
    cur.execute("CREATE FOREIGN TABLE bench_ft (key text, value text, flags integer) SERVER memcached")
    cur.execute("CREATE FOREIGN TABLE bench_ft_w (key text, value text) SERVER memcached "
                "OPTIONS (key_prefix 'ftw:', batch_size '1000')")
    cur.execute("DROP TABLE IF EXISTS bench_ids")
    cur.execute("CREATE TABLE bench_ids AS SELECT g AS id FROM generate_series(0, %s) g",
                (FT_JOIN_ROWS - 1,))
    cur.execute("ANALYZE bench_ids")
    n = value(conn, "SELECT count(*) FROM bench_ft WHERE key = ANY(ARRAY(SELECT 'k' || g "
                    "FROM generate_series(0, 9999) g))")
    j = value(conn, "SELECT count(c.value) FROM bench_ids i JOIN bench_ft c ON c.key = 'k' || i.id")
    cur.execute("EXPLAIN SELECT count(c.value) FROM bench_ids i JOIN bench_ft c ON c.key = 'k' || i.id")
    plan = "\n".join(r[0] for r in cur.fetchall())
    conn.close()
    if "MemcachedBatchedJoin" not in plan:
        raise RuntimeError("foreign table: the join is not the batched join:\n" + plan)
    if n != 10000 or j != FT_JOIN_ROWS:
        raise RuntimeError("foreign table: the scan found %s of 10000 keys, the join %s of %d"
                           % (n, j, FT_JOIN_ROWS))


def w11_ft_scan(n):
    """SELECT * FROM t WHERE key = ANY($1) against mc_get_multi on the same keys.
    Like with like: both statements read the same three columns (key, value,
    flags) of every row, so the scan asks memcached for "v f" as mc_get_multi
    does (a bare count(*) would let the planner drop the columns, and the
    scan would ask for existence only), and both aggregate them the same way
    instead of sending the rows to the client, whose cost would be the same
    for both and only dilute the ratio."""
    say("11. foreign-table scan of %s keys: %d rounds x %gs per contender (floor, mc_get_multi, "
        "the foreign table)" % (format(n, ","), ROUNDS, SECONDS))
    arr = "(SELECT array_agg('k' || g) FROM generate_series(:off, :off + %d) g)" % (n - 1)
    head = "\\set off random(0, %d)\n" % (KEYS - n)
    scripts = {
        "floor": head + "SELECT cardinality(%s);\n" % arr,
        "multi": head + "SELECT count(value), count(flags) FROM mc_get_multi(%s);\n" % arr,
        "ft": head + "SELECT count(value), count(flags) FROM (SELECT * FROM bench_ft "
                     "WHERE key = ANY(%s::text[])) t;\n" % arr,
    }
    lat = pgbench_rounds(scripts, ["multi", "ft"])
    add_multi = med([m - f for m, f in zip(lat["multi"], lat["floor"])])
    add_ft = med([t - f for t, f in zip(lat["ft"], lat["floor"])])
    w = "11 foreign table, %s keys" % format(n, ",")
    r = ratio(add_ft, add_multi)
    row(w, "mc_get_multi: added over floor", add_multi, "us")
    row(w, "key = ANY($1): added over floor", add_ft, "us", None, None,
        "<= 1.2 x mc_get_multi", check(r, "<=", 1.2),
        "ratio to mc_get_multi %.2f" % r if r is not None else "")
    if SWAP.active:
        base_added(w, "mc_get_multi", lat, "multi", "floor")
        base_added(w, "key = ANY($1)", lat, "ft", "floor")


def w11_ft_join():
    """A join of 10,000 local rows on the key, as the planner runs it (the
    batched join: one pipelined multi-get per join_batch_size outer rows),
    against mc_get_multi of the same keys, and against the same join with
    mcfdw.enable_batched_join off (a nested loop over the parameterized
    scan: one round trip per outer row).  Each is measured over its floor:
    building the key array for mc_get_multi, reading the local rows and
    computing their keys for the joins.  BENCH_JOIN_SWEEP=1000,5000 also
    times the batched join at those join_batch_size (printed, not in the
    table): how the default, 5000, was chosen."""
    say("11. foreign-table join of %s local rows" % format(FT_JOIN_ROWS, ","))
    keys = "(SELECT array_agg('k' || id) FROM bench_ids)"
    join = "SELECT count(c.value) FROM bench_ids i JOIN bench_ft c ON c.key = 'k' || i.id;\n"
    scripts = {
        "floor": "SELECT cardinality(%s);\n" % keys,
        "multi": "SELECT count(*) FROM mc_get_multi(%s);\n" % keys,
        "join_floor": "SELECT count('k' || i.id) FROM bench_ids i;\n",
        "join": join,
        "per_row": "SET mcfdw.enable_batched_join = off;\n" + join +
                   "RESET mcfdw.enable_batched_join;\n",
    }
    lat = pgbench_rounds(scripts, ["multi", "join", "per_row"])
    add_multi = med([m - f for m, f in zip(lat["multi"], lat["floor"])])
    add_join = med([j - f for j, f in zip(lat["join"], lat["join_floor"])])
    add_per_row = med([j - f for j, f in zip(lat["per_row"], lat["join_floor"])])
    w = "11 foreign-table join, %s rows" % format(FT_JOIN_ROWS, ",")
    for bs in [int(x) for x in os.environ.get("BENCH_JOIN_SWEEP", "").split(",") if x]:
        conn = connect()
        conn.cursor().execute("ALTER FOREIGN TABLE bench_ft OPTIONS (ADD join_batch_size '%d')" % bs)
        conn.close()
        lj = [pgbench(join)[1] for _ in range(ROUNDS)]
        conn = connect()
        conn.cursor().execute("ALTER FOREIGN TABLE bench_ft OPTIONS (DROP join_batch_size)")
        conn.close()
        say("join_batch_size %d: join %.0f us, added over floor %.0f us, ratio to mc_get_multi %.2f"
            % (bs, med(lj), med(lj) - med(lat["join_floor"]),
               (med(lj) - med(lat["join_floor"])) / add_multi))
    row(w, "mc_get_multi of the keys: added over floor", add_multi, "us")
    r = ratio(add_join, add_multi)
    row(w, "batched join: added over floor", add_join, "us", None, None, "<= 2 x mc_get_multi",
        check(r, "<=", 2.0), "ratio to mc_get_multi %.2f" % r if r is not None else "")
    speed = ratio(add_per_row, add_join)
    row(w, "batched join off (a round trip per row): added", add_per_row, "us", None, None,
        ">= 20 x the batched join", check(speed, ">=", 20.0),
        "per-row / batched %.2f" % speed if speed is not None else "")
    if SWAP.active:
        base_added(w, "mc_get_multi of the keys", lat, "multi", "floor")
        base_added(w, "batched join", lat, "join", "join_floor")
        base_added(w, "batched join off (a round trip per row)", lat, "per_row", "join_floor")


def w11_ft_insert():
    """INSERT ... SELECT of 10,000 rows (pipelined batches of batch_size)
    against 10,000 single-row INSERTs (one statement's latency x 10,000)."""
    say("11. foreign-table INSERT ... SELECT of %s rows" % format(FT_INSERT_ROWS, ","))
    scripts = {
        "batch": "INSERT INTO bench_ft_w SELECT g::text, lpad(g::text, 100, 'v') "
                 "FROM generate_series(1, %d) g;\n" % FT_INSERT_ROWS,
        "single": "\\set k random(1, %d)\nINSERT INTO bench_ft_w VALUES (:k, lpad(:k::text, 100, 'v'));\n"
                  % FT_INSERT_ROWS,
    }
    lat = pgbench_rounds(scripts, ["batch", "single"])
    batch = med(lat["batch"])
    singles = med(lat["single"]) * FT_INSERT_ROWS
    w = "11 foreign-table INSERT, %s rows" % format(FT_INSERT_ROWS, ",")
    speed = ratio(singles, batch)
    row(w, "INSERT ... SELECT", batch, "us", None, None, ">= 20 x faster than singles",
        check(speed, ">=", 20.0), "singles / batch %.2f" % speed if speed is not None else "")
    row(w, "10,000 single-row INSERTs", singles, "us")
    if SWAP.active:
        base_added(w, "INSERT ... SELECT", lat, "batch", None)
        base_added(w, "a single-row INSERT", lat, "single", None)


FT_FULL_ROWS = 10000


def w11_ft_fullscan():
    """A full scan (allow_full_scan) of a table whose prefix holds 10,000
    items, against mc_get_multi of the same keys.  The dump lists every item
    of the cache (the 100,000 k-keys too) and keeps the table's: the
    ratio is informational (issue 14 sets no target)."""
    say("11. foreign-table full scan of %s items" % format(FT_FULL_ROWS, ","))
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP FOREIGN TABLE IF EXISTS bench_ft_full")
    # the server owner's consent to full scans (set once per database)
    cur.execute("DO $$ BEGIN ALTER SERVER memcached OPTIONS (ADD allow_full_scan 'true'); "
                "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    cur.execute("CREATE FOREIGN TABLE bench_ft_full (key text, value text) SERVER memcached "
                "OPTIONS (key_prefix 'ftfs:', allow_full_scan 'true')")
    cur.execute("SELECT mc_set_multi(ARRAY(SELECT 'ftfs:' || g FROM generate_series(1, %d) g), "
                "ARRAY(SELECT lpad(g::text, 100, 'v') FROM generate_series(1, %d) g))"
                % (FT_FULL_ROWS, FT_FULL_ROWS))
    n = value(conn, "SELECT count(*) FROM bench_ft_full")
    conn.close()
    if n != FT_FULL_ROWS:
        raise RuntimeError("foreign table: the full scan found %s of %d items" % (n, FT_FULL_ROWS))
    keys = "(SELECT array_agg('ftfs:' || g) FROM generate_series(1, %d) g)" % FT_FULL_ROWS
    scripts = {
        "floor": "SELECT cardinality(%s);\n" % keys,
        "multi": "SELECT count(*) FROM mc_get_multi(%s);\n" % keys,
        "full": "SELECT count(*) FROM (SELECT * FROM bench_ft_full) t;\n",
    }
    lat = pgbench_rounds(scripts, ["multi", "full"])
    add_multi = med([m - f for m, f in zip(lat["multi"], lat["floor"])])
    full = med(lat["full"])
    w = "11 foreign-table full scan, %s items" % format(FT_FULL_ROWS, ",")
    r = ratio(full, add_multi)
    row(w, "mc_get_multi of the keys: added over floor", add_multi, "us")
    row(w, "full scan (metadump of the whole cache)", full, "us", None, None,
        "informational", "", "ratio to mc_get_multi %.2f" % r if r is not None else "")
    if SWAP.active:
        base_added(w, "mc_get_multi of the keys", lat, "multi", "floor")
        base_added(w, "full scan", lat, "full", None)


def w11_ft_callgrind():
    """User-mode instructions per key of the scan and of mc_get_multi, over
    the floor, with the statements of w11_ft_scan (callgrind, as in 3)."""
    say("11. user-mode instructions per key of the scan: callgrind on a single-user backend")
    w = "11 foreign table, 10,000 keys"
    what = "instructions per key (1,000 vs 5,000 keys)"
    if shutil.which("valgrind") is None:
        row(w, "callgrind: " + what, None, "instr", note="valgrind not installed")
        return
    su = single_user()
    out = "" if su.error else su.run(["DROP FOREIGN TABLE IF EXISTS bench_ft",
                                      "CREATE FOREIGN TABLE bench_ft (key text, value text, flags integer) "
                                      "SERVER memcached"])
    if su.error or "ERROR" in out:
        row(w, "callgrind: " + what, None, "instr",
            note="single-user backend: " + (su.error or su.first_error(out)))
        return
    arr = "(SELECT array_agg('k' || g) FROM generate_series(1, %d) g)"
    sqls = {"floor": lambda k: "SELECT cardinality(%s)" % (arr % k),
            "multi": lambda k: "SELECT count(value), count(flags) FROM mc_get_multi(%s)" % (arr % k),
            "ft": lambda k: ("SELECT count(value), count(flags) FROM (SELECT * FROM bench_ft "
                             "WHERE key = ANY(%s::text[])) t" % (arr % k))}
    res, errs = {}, {}
    for k, fn in sqls.items():
        res[k], errs[k] = su.instructions(fn, lambda n: n)
    fl = res["floor"]
    add = {k: (res[k] - fl if res[k] is not None and fl is not None else None) for k in ("multi", "ft")}
    r = ratio(add["ft"], add["multi"])
    row(w, "floor: %s (callgrind)" % what, fl, "instr", note=errs["floor"] or "")
    row(w, "mc_get_multi: %s over floor (callgrind)" % what, add["multi"], "instr",
        note=errs["multi"] or "")
    row(w, "key = ANY($1): %s over floor (callgrind)" % what, add["ft"], "instr",
        note=errs["ft"] or ("ratio to mc_get_multi %.2f" % r if r is not None else ""))
    if SWAP.active:
        for k, label in (("multi", "mc_get_multi"), ("ft", "key = ANY($1)")):
            with SWAP.baseline():
                b, e = su.instructions(sqls[k], lambda n: n)
            base_row(w, "%s: %s over floor (callgrind)" % (label, what), add[k],
                     b - fl if b is not None and fl is not None else None, "instr",
                     note=("baseline's single-user backend: " + e) if e else "")


def w11_foreign_table():
    ft_setup()
    w11_ft_scan(100)
    w11_ft_scan(10000)
    w11_ft_callgrind()
    w11_ft_join()
    w11_ft_insert()
    w11_ft_fullscan()


def w13_prefetch():
    """The query users write first, SELECT i.id, mc_get('k' || i.id) FROM
    bench_ids i, over 10,000 rows: prefetched (mcfdw.prefetch, one
    pipelined round per batch of rows) against the batched join over the
    same keys, and against the same statement with mcfdw.prefetch off (a
    round trip per row); and over 10 rows, prefetched against off.  Each is
    measured over its floor, the same rows with their keys computed.  Every
    script LOADs mcfdw first, so its statements are planned with the
    prefetch's planner hook in place (pgbench's sessions are new).  The
    10-row statements, a few hundred microseconds each, run as workload 2's
    do: MIX_ROUNDS rounds of one pgbench session taking the three scripts in
    turn at random (pgbench_mix), each round judged on its own (prefetched
    added / off added), the verdict the median of the rounds'."""
    say("13. %s mc_get in one statement, prefetched, against the batched join"
        % format(FT_JOIN_ROWS, ","))
    ft_setup()
    get = "SELECT i.id, mc_get('k' || i.id) FROM bench_ids i%s;\n"
    floor = "SELECT i.id, 'k' || i.id FROM bench_ids i%s;\n"

    def script(prefetch, sql):
        # the same statements around each: only the setting differs
        return ("LOAD 'mcfdw';\nSET mcfdw.prefetch = %s;\n%sRESET mcfdw.prefetch;\n"
                % ("on" if prefetch else "off", sql))
    scripts = {
        "floor": script(True, floor % ""),
        "join": script(True, "SELECT i.id, c.value FROM bench_ids i JOIN bench_ft c "
                             "ON c.key = 'k' || i.id;\n"),
        "prefetch": script(True, get % ""),
        "per_row": script(False, get % ""),
    }
    small_scripts = {
        "floor10": script(True, floor % " WHERE i.id < 10"),
        "prefetch10": script(True, get % " WHERE i.id < 10"),
        "per_row10": script(False, get % " WHERE i.id < 10"),
    }
    conn = connect()
    cur = conn.cursor()
    cur.execute("LOAD 'mcfdw'")
    cur.execute("EXPLAIN " + get % "")
    plan = "\n".join(r[0] for r in cur.fetchall())
    n = value(conn, "SELECT count(v) FROM (%s) s(id, v)" % (get % "").rstrip(";\n"))
    conn.close()
    if "MemcachedPrefetch" not in plan:
        raise RuntimeError("prefetch: the statement is not prefetched:\n" + plan)
    if n != FT_JOIN_ROWS:
        raise RuntimeError("prefetch: found %s of %d keys" % (n, FT_JOIN_ROWS))
    lat = pgbench_rounds(scripts, ["join", "prefetch", "per_row"])
    added = {k: med([a - f for a, f in zip(lat[k], lat["floor"])])
             for k in ("join", "prefetch", "per_row")}
    w = "13 %s mc_get in one statement" % format(FT_JOIN_ROWS, ",")
    row(w, "batched join over the same keys: added over floor", added["join"], "us")
    rr = ratio(added["prefetch"], added["join"])
    row(w, "mc_get per row, prefetched: added over floor", added["prefetch"], "us", None, None,
        "<= 2 x the batched join", check(rr, "<=", 2.0),
        "ratio to the batched join %.2f" % rr if rr is not None else "")
    rp = ratio(added["per_row"], added["join"])
    row(w, "mc_get per row, mcfdw.prefetch off: added over floor", added["per_row"], "us",
        note="ratio to the batched join %.2f" % rp if rp is not None else "")
    if SWAP.active:
        base_added(w, "batched join over the same keys", lat, "join", "floor")
        base_added(w, "mc_get per row, prefetched", lat, "prefetch", "floor")
        base_added(w, "mc_get per row, mcfdw.prefetch off", lat, "per_row", "floor")
    say("   10 rows: %d rounds of a %ds pgbench mix (floor, prefetched, prefetch off)"
        % (MIX_ROUNDS, MIX_SECONDS))
    per = {"prefetch10": [], "per_row10": [], "ratio": [], "b_prefetch10": [], "b_ratio": [],
           "b_per_row10": []}
    for r in range(MIX_ROUNDS):
        got = {}
        for step in rotated(["mix", "base"] if SWAP.active else ["mix"], r):
            if step == "mix":
                got[step] = pgbench_mix(small_scripts, MIX_SECONDS)
            else:
                with SWAP.baseline():
                    got[step] = pgbench_mix(small_scripts, MIX_SECONDS)
        m = got["mix"]
        for k in ("prefetch10", "per_row10"):
            per[k].append(m[k] - m["floor10"])
        per["ratio"].append(ratio(per["prefetch10"][-1], per["per_row10"][-1]))
        line = ("   round %d: floor %.0f us, prefetched %.0f us (added %.0f), off %.0f us (added %.0f): %s"
                % (r + 1, m["floor10"], m["prefetch10"], per["prefetch10"][-1], m["per_row10"],
                   per["per_row10"][-1], fmt_ratio(per["ratio"][-1])))
        if SWAP.active:
            b = got["base"]
            per["b_prefetch10"].append(b["prefetch10"] - b["floor10"])
            per["b_per_row10"].append(b["per_row10"] - b["floor10"])
            per["b_ratio"].append(ratio(per["b_prefetch10"][-1], b["per_row10"] - b["floor10"]))
            line += "; baseline build: prefetched added %.0f, %s" % (per["b_prefetch10"][-1],
                                                                   fmt_ratio(per["b_ratio"][-1]))
        say(line)
    rs = [x for x in per["ratio"] if x is not None]
    r10 = med(rs) if rs else None
    q1, q3 = quartiles(rs) if rs else (None, None)
    row(w, "10 rows, prefetched: added over floor", med(per["prefetch10"]), "us", None, None,
        "<= 1 x prefetch off", check(r10, "<=", 1.0),
        "ratio to prefetch off %.2f, the median of %d rounds' (quartiles %.2f-%.2f; %d rounds <= 1)"
        % (r10, len(rs), q1, q3, sum(1 for x in rs if x <= 1.0)) if r10 is not None else "")
    if SWAP.active:
        bs = [x for x in per["b_ratio"] if x is not None]
        row(w, "10 rows, prefetched, baseline build: added over floor", med(per["b_prefetch10"]), "us",
            note="ratio to prefetch off %s, the median of %d rounds'; %s"
            % (fmt_ratio(med(bs) if bs else None), len(bs), SWAP.path))
    row(w, "10 rows, mcfdw.prefetch off: added over floor", med(per["per_row10"]), "us")
    if SWAP.active:
        base_row(w, "10 rows, prefetched, added over floor", per["prefetch10"], per["b_prefetch10"], "us",
                 note="each build's statements in a pgbench mix of their own")
        base_row(w, "10 rows, mcfdw.prefetch off, added over floor", per["per_row10"], per["b_per_row10"],
                 "us")


def w8_seed():
    say("8. seed 004 workload: %d pgbench clients, 200 keys (160 populated, 95%% 80-250 B, 5%% 100 KB), "
        "%d rounds x %gs per contender and operation" % (CLIENTS, ROUNDS, SECONDS))
    conn = connect()
    targets = {"SET": 1.0, "GET": 1.0, "MULTI_GET(5)": 1.3, "DELETE": 1.0}
    for op, scripts in seed_scripts().items():
        scripts = with_baseline(scripts, ["mcfdw"])
        tps = {k: [] for k in scripts}
        for r in range(ROUNDS):
            for k, s in rotated(scripts.items(), r):
                seed_populate(conn)
                tps[k].append(run_as(k, lambda: pgbench(s, clients=CLIENTS, log=False)[0]))
            say("   %s round %d: mcfdw %.0f tps, pgmemcache %.0f tps%s"
                % (op, r + 1, tps["mcfdw"][-1], tps["pgmemcache"][-1],
                   ", baseline build's mcfdw %.0f tps" % tps[BASE + "mcfdw"][-1] if SWAP.active else ""))
        m, p = med(tps["mcfdw"]), med(tps["pgmemcache"])
        rr = ratio(m, p)
        w = "8 seed 004, %d clients" % CLIENTS
        row(w, "mcfdw: %s" % op, m, "tps", rr, None, ">= %.1f x pgm" % targets[op],
            check(rr, ">=", targets[op]))
        row(w, "pgmemcache: %s" % op, p, "tps")
        if SWAP.active:
            base_row(w, "mcfdw: %s" % op, tps["mcfdw"], tps[BASE + "mcfdw"], "tps", higher=True)
    conn.close()


# ---- workload 9: batch writes ---------------------------------------------
BATCH = 10000
BATCH_REPEAT = 5                # statements per contender per round
# keys of their own (w<window>:<n>, 100-byte values), so the keys the other
# workloads read stay as they are; each writer rewrites one fixed window,
# so memcached's memory holds them all
BATCH_KEYS = "(SELECT array_agg('%s:' || g) FROM generate_series(1, %d) g)"
BATCH_VALUES = "(SELECT array_agg(lpad(g::text, 100, 'v')) FROM generate_series(1, %d) g)"
BATCH_SQL = {
    "floor: keys": "SELECT cardinality(%s)" % (BATCH_KEYS % ("wf", BATCH)),
    "floor: keys and values": "SELECT cardinality(%s) + cardinality(%s)"
                              % (BATCH_KEYS % ("wf", BATCH), BATCH_VALUES % BATCH),
    "mc_get_multi": "SELECT count(*) FROM mc_get_multi(%s)" % (BATCH_KEYS % ("wg", BATCH)),
    "mc_set_multi": "SELECT mc_set_multi(%s, %s)" % (BATCH_KEYS % ("ws", BATCH), BATCH_VALUES % BATCH),
    "mc_delete_multi": "SELECT mc_delete_multi(%s)" % (BATCH_KEYS % ("wd", BATCH)),
    "mc_set loop": "SELECT count(*) FILTER (WHERE mc_set('wl:' || g, lpad(g::text, 100, 'v'))) "
                   "FROM generate_series(1, %d) g" % BATCH,
}
# what a delete deletes: written again (untimed) before every timed delete
BATCH_REFILL = "SELECT mc_set_multi(%s, %s)" % (BATCH_KEYS % ("wd", BATCH), BATCH_VALUES % BATCH)


def w9_batch_writes():
    say("9. %s-key batch writes: %d rounds x %d statements per contender (floors, mc_get_multi, "
        "mc_set_multi, mc_delete_multi, %s mc_set calls in one statement)"
        % (format(BATCH, ","), ROUNDS, BATCH_REPEAT, format(BATCH, ",")))
    conn = connect()
    # warm-up and checks: every write stored, every key read and deleted
    value(conn, BATCH_SQL["mc_set loop"].replace("'wl:'", "'wg:'"))
    for k, want in (("mc_get_multi", BATCH), ("mc_set_multi", BATCH), ("mc_set loop", BATCH)):
        n = value(conn, BATCH_SQL[k])
        if n != want:
            raise RuntimeError("%s: %s of %d keys" % (k, n, want))
    value(conn, BATCH_REFILL)
    n = value(conn, BATCH_SQL["mc_delete_multi"])
    if n != BATCH:
        raise RuntimeError("mc_delete_multi deleted %s of %d keys" % (n, BATCH))
    writers = ["mc_get_multi", "mc_set_multi", "mc_delete_multi", "mc_set loop"]
    sql = with_baseline(BATCH_SQL, writers)
    curs = {k: conn.cursor() for k in BATCH_SQL}
    bconn = None
    if SWAP.active:             # a session of the baseline build's, loaded now
        bconn = connect()
        run_as(BASE, lambda: value(bconn, BATCH_SQL["mc_get_multi"]))
        curs.update({BASE + k: bconn.cursor() for k in writers})
    wall = {k: [] for k in sql}      # ms per statement
    cur = conn.cursor()
    for r in range(ROUNDS):
        for i in range(BATCH_REPEAT):
            for k in rotated(sql, r * BATCH_REPEAT + i):
                if k.endswith("mc_delete_multi"):
                    cur.execute(BATCH_REFILL)
                t0 = time.perf_counter()
                curs[k].execute(sql[k])
                wall[k].append((time.perf_counter() - t0) * 1e3)
                if k.endswith("mc_delete_multi") and curs[k].fetchone()[0] != BATCH:
                    raise RuntimeError("mc_delete_multi did not delete all %d keys" % BATCH)
        n = BATCH_REPEAT
        say("   round %d: ms/statement %s"
            % (r + 1, ", ".join("%s %.1f" % (k, med(wall[k][-n:])) for k in sql)))
    conn.close()
    if bconn:
        bconn.close()
    m = {k: med(v) for k, v in wall.items()}

    def added(k, floor):
        # statement by statement, the floor measured next to it in the same round
        return med([a - f for a, f in zip(wall[k], wall[floor])])

    add_get = added("mc_get_multi", "floor: keys")
    w = "9 %s-key batch writes" % format(BATCH, ",")
    row(w, "floor: keys array", m["floor: keys"], "ms")
    row(w, "floor: keys and values arrays", m["floor: keys and values"], "ms")
    row(w, "mcfdw: mc_get_multi", m["mc_get_multi"], "ms")
    row(w, "mcfdw: mc_get_multi added over floor", add_get, "ms")
    for k, floor in (("mc_set_multi", "floor: keys and values"), ("mc_delete_multi", "floor: keys")):
        a = added(k, floor)
        row(w, "mcfdw: %s" % k, m[k], "ms")
        r_ = ratio(a, add_get)
        row(w, "mcfdw: %s added over floor" % k, a, "ms", None, None,
            "<= 2.0 x get_multi's", check(r_, "<=", 2.0),
            "%.2f x mc_get_multi's added time" % r_ if r_ is not None else "")
    row(w, "mcfdw: %s mc_set calls in one statement" % format(BATCH, ","), m["mc_set loop"], "ms")
    speed = ratio(m["mc_set loop"], m["mc_set_multi"])
    row(w, "mcfdw: mc_set_multi speed-up over the mc_set loop", speed, "x", None, None,
        ">= 30 x", check(speed, ">=", 30.0), "wall of the loop / wall of mc_set_multi")
    speed = ratio(m["mc_set loop"], m["mc_delete_multi"])
    row(w, "mcfdw: mc_delete_multi speed-up over the mc_set loop", speed, "x", None, None,
        ">= 30 x", check(speed, ">=", 30.0), "wall of the loop / wall of mc_delete_multi")
    if SWAP.active:
        lat = {k: per_round(v, BATCH_REPEAT) for k, v in wall.items()}
        for k in writers:
            base_row(w, "mcfdw: " + k, lat[k], lat[BASE + k], "ms")


# ---- workload 12: a multi-get of compressed values ----------------------------
ZKEYS = 10000
ZARR = "(SELECT array_agg('%s' || g) FROM generate_series(1, %d) g)"
# 8 KB of hex digests: compressible about 2:1, as zlib finds it
ZVALUES = ("(SELECT array_agg((SELECT string_agg(md5(g::text || ':' || j), '') "
           "FROM generate_series(1, 256) j)) FROM generate_series(1, %d) g)" % ZKEYS)
ZSQL = {
    "floor": "SELECT cardinality(%s)" % (ZARR % ("zu", ZKEYS)),
    "plain": "SELECT count(*) FROM mc_get_multi(%s)" % (ZARR % ("zu", ZKEYS)),
    "compressed": "SELECT count(*) FROM mc_get_multi(%s, 'mcz')" % (ZARR % ("zc", ZKEYS)),
}
# writes of the same values, read from a table (building them costs seconds):
# keys and values arrays alone (the floor), mc_set_multi plain and compressed.
# They rewrite the keys the reads read, with the same bytes: four sets of
# 10,000 8 KB values would not fit the rig's memcacheds (-m 64 each).  The
# level-1 write (compression_level '1') has keys of its own, deleted after
# each statement outside its time: its streams are other bytes, which the
# compressed reads must not read
ZWSQL = {
    "write floor": "SELECT cardinality(array_agg('zu' || g)) + cardinality(array_agg(v)) FROM bench_zvalues",
    "write plain": "SELECT mc_set_multi(array_agg('zu' || g), array_agg(v)) FROM bench_zvalues",
    "write compressed": "SELECT mc_set_multi(array_agg('zc' || g), array_agg(v), server => 'mcz') "
                        "FROM bench_zvalues",
    "write compressed level 1": "SELECT mc_set_multi(array_agg('zl' || g), array_agg(v), server => 'mcz1') "
                                "FROM bench_zvalues",
}
ZL_DELETE = "SELECT mc_delete_multi((SELECT array_agg('zl' || g) FROM generate_series(1, %d) g), 'mcz1')" % ZKEYS
# JSON-like values: the words and the record of inflate_bench.c's make_json
JSON_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
              "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa")
JSON_RECORD = '{"id":%d,"name":"%s %s","price":%d.%02d,"qty":%d,"tags":["%s","%s"],"sku":"%08x"},'


def json_values(n, size=8192):
    """n JSON-like values of size bytes, made as inflate_bench.c's make_json
    makes its values, so that docs/benchmarks.md's per-value figures for
    JSON-ish records (stream size, inflate time and instructions) describe
    the values workload 12's JSON-like rows read: its LCG, its seed, running
    on from one value to the next (so every value differs), and its draws in
    make_json's order (a record's sku first, its id last).  make_json leaves
    the array open, a comma after its last record; here that comma and the
    space after it are "]}", so a value is a JSON document, as an
    application would cache one, and the first 1,000 values differ from
    inflate_bench.c's in those two bytes alone.  Spaces, which JSON allows
    after a value, pad each to size bytes exactly: the plain read then moves
    as many bytes as the digests' does."""
    seed = 12345
    out = []
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) & 0xffffffff
        parts = ['{"user":%d,"items":[' % ((seed >> 8) % 1000000)]
        off = len(parts[0])
        while off < size - 200:
            r = []
            for _ in range(9):
                seed = (seed * 1103515245 + 12345) & 0xffffffff
                r.append(seed >> 8)
            rec = JSON_RECORD % (r[8] % 100000, JSON_WORDS[r[7] % 16], JSON_WORDS[r[6] % 16],
                                 r[5] % 1000, r[4] % 100, r[3] % 20,
                                 JSON_WORDS[r[2] % 16], JSON_WORDS[r[1] % 16], r[0])
            parts.append(rec)
            off += len(rec)
        v = "".join(parts)[:-1] + "]}"
        out.append(v + " " * (size - len(v)))
    return out


def w12_json_reads(conn):
    """Workload 12's reads again on JSON-like values (json_values): the
    digests' floor, plain and compressed statements (ZSQL), in rounds of
    their own after the digests' (ROUNDS x BATCH_REPEAT, rotated).  The
    values rewrite the zu and zc keys, plain and through mcz, as the
    digests' writes do: a second set of 10,000 8 KB values would not fit
    the rig's memcacheds (-m 64 each).  Returns each statement's wall
    times (ms), and the bytes the compressed values inflate to and are
    stored as."""
    import io
    import zlib
    cur = conn.cursor()
    evictions = "SELECT sum(value::bigint) FROM mc_stats() WHERE name = 'evictions'"
    ev0 = value(conn, evictions)
    vals = json_values(ZKEYS)
    cur.execute("DROP TABLE IF EXISTS bench_jvalues")
    cur.execute("CREATE UNLOGGED TABLE bench_jvalues (g integer PRIMARY KEY, v text)")
    cur.execute("ALTER TABLE bench_jvalues ALTER v SET STORAGE EXTERNAL")
    # no tab, newline or backslash in the values: COPY's text format as is
    cur.copy_expert("COPY bench_jvalues (g, v) FROM STDIN",
                    io.StringIO("".join("%d\t%s\n" % (g, v) for g, v in enumerate(vals, 1))))
    valid = value(conn, "SELECT count(*) FROM bench_jvalues WHERE json_typeof(v::json) = 'object'")
    stored = value(conn, "SELECT mc_set_multi(array_agg('zu' || g), array_agg(v)) FROM bench_jvalues")
    stored += value(conn, "SELECT mc_set_multi(array_agg('zc' || g), array_agg(v), server => 'mcz') "
                          "FROM bench_jvalues")
    plain = value(conn, "SELECT count(*) FROM mc_get_multi(%s) m JOIN bench_jvalues j "
                        "ON m.key = 'zu' || j.g AND m.value = j.v" % (ZARR % ("zu", ZKEYS)))
    cur.execute("DROP TABLE bench_jvalues")
    # the stored streams, through the server without compression
    cur.execute("SELECT key, value FROM mc_get_multi_bytea(%s)" % (ZARR % ("zc", ZKEYS)))
    blobs = {k: bytes(v) for k, v in cur.fetchall()}
    same = sum(1 for g, v in enumerate(vals, 1)
               if "zc%d" % g in blobs and zlib.decompress(blobs["zc%d" % g]) == v.encode())
    if (valid, stored, plain, same) != (ZKEYS, 2 * ZKEYS, ZKEYS, ZKEYS):
        raise RuntimeError("workload 12, JSON-like values: %d valid JSON, %d stored, %d plain and %d "
                           "compressed read back as written, of %d" % (valid, stored, plain, same, ZKEYS))
    inflated = ZKEYS * len(vals[0])
    stored_bytes = sum(len(b) for b in blobs.values())
    wall = {k: [] for k in ZSQL}
    for r in range(ROUNDS):
        for i in range(BATCH_REPEAT):
            for k in rotated(list(wall), r * BATCH_REPEAT + i):
                t0 = time.perf_counter()
                cur.execute(ZSQL[k])
                if k != "floor" and cur.fetchone()[0] != ZKEYS:
                    raise RuntimeError("workload 12: %s on JSON-like values did not find every key" % k)
                wall[k].append((time.perf_counter() - t0) * 1e3)
        n = BATCH_REPEAT
        say("   JSON-like round %d: ms/statement %s"
            % (r + 1, ", ".join("%s %.1f" % (k, med(wall[k][-n:])) for k in wall)))
    # the rewrite keeps the memcacheds' items within their memory: any item
    # evicted meanwhile (a key of another workload) would say otherwise
    say("   JSON-like values: %.1f MB stored compressed, %d items evicted by the memcacheds meanwhile"
        % (stored_bytes / 1e6, value(conn, evictions) - ev0))
    return wall, inflated, stored_bytes


def w12_compressed():
    say("12. %s-key multi-get and mc_set_multi of 8 KB values, compressed (zlib, flag 2) and "
        "plain: %d rounds x %d statements, and zlib's inflate alone on the same values; then the "
        "multi-get alone on JSON-like 8 KB values: %d rounds x %d statements"
        % (format(ZKEYS, ","), ROUNDS, BATCH_REPEAT, ROUNDS, BATCH_REPEAT))
    import zlib
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT option_name, option_value FROM pg_options_to_table("
                "(SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'memcached'))")
    opts = dict(cur.fetchall())
    opts.update(compression="zlib", compressed_flag="2", compress_threshold="1")
    cur.execute("DROP SERVER IF EXISTS mcz")
    cur.execute("CREATE SERVER mcz FOREIGN DATA WRAPPER mcfdw OPTIONS (%s)"
                % ", ".join("%s '%s'" % (k, v.replace("'", "''")) for k, v in opts.items()))
    cur.execute("DROP SERVER IF EXISTS mcz1")
    cur.execute("CREATE SERVER mcz1 FOREIGN DATA WRAPPER mcfdw OPTIONS (%s, compression_level '1')"
                % ", ".join("%s '%s'" % (k, v.replace("'", "''")) for k, v in opts.items()))
    # the values once, in a table stored uncompressed (no TOAST compression)
    cur.execute("DROP TABLE IF EXISTS bench_zvalues")
    cur.execute("CREATE UNLOGGED TABLE bench_zvalues (g integer PRIMARY KEY, v text)")
    cur.execute("ALTER TABLE bench_zvalues ALTER v SET STORAGE EXTERNAL")
    cur.execute("INSERT INTO bench_zvalues SELECT g, v FROM unnest(%s) WITH ORDINALITY AS u(v, g)" % ZVALUES)
    stored = value(conn, ZWSQL["write plain"]) + value(conn, ZWSQL["write compressed"])
    cur.execute("SELECT value FROM mc_get_multi_bytea(%s)" % (ZARR % ("zc", ZKEYS)))
    blobs = [bytes(r[0]) for r in cur.fetchall()]
    if stored != 2 * ZKEYS or len(blobs) != ZKEYS:
        raise RuntimeError("workload 12: %d stored, %d compressed values read" % (stored, len(blobs)))
    inflated = sum(len(zlib.decompress(b)) for b in blobs)
    stored_bytes = sum(len(b) for b in blobs)
    mine = ["plain", "compressed", "write plain", "write compressed"]
    sql = with_baseline(dict(ZSQL, **ZWSQL, inflate=None), mine)
    curs = {k: cur for k in sql}
    bconn = None
    if SWAP.active:             # a session of the baseline build's, loaded now
        bconn = connect()
        run_as(BASE, lambda: value(bconn, ZSQL["plain"]))
        curs.update({BASE + k: bconn.cursor() for k in mine})
    wall = {k: [] for k in sql}
    # where a read's wall time goes in the backend: on a CPU, waiting for
    # one, or waiting for memcached (the rest), per statement
    pid = value(conn, "SELECT pg_backend_pid()")
    split = {k: [] for k in ("floor", "plain", "compressed")}
    for r in range(ROUNDS):
        for i in range(BATCH_REPEAT):
            for k in rotated(list(wall), r * BATCH_REPEAT + i):
                s0 = sched_ns(pid) if k in split else None
                t0 = time.perf_counter()
                if k == "inflate":
                    for b in blobs:
                        zlib.decompress(b)
                else:
                    curs[k].execute(sql[k])
                    if "floor" not in k and curs[k].fetchone()[0] != ZKEYS:
                        raise RuntimeError("workload 12: %s did not find or store every key" % k)
                wall[k].append((time.perf_counter() - t0) * 1e3)
                s1 = sched_ns(pid) if s0 is not None else None
                if s1 is not None:
                    split[k].append((wall[k][-1], (s1[0] - s0[0]) / 1e6, (s1[1] - s0[1]) / 1e6))
                if k == "write compressed level 1":
                    curs[k].execute(ZL_DELETE)
        n = BATCH_REPEAT
        say("   round %d: ms/statement %s"
            % (r + 1, ", ".join("%s %.1f" % (k, med(wall[k][-n:])) for k in wall)))
    if bconn:
        bconn.close()
    jwall, j_inflated, j_stored = w12_json_reads(conn)
    cur.execute("DROP SERVER mcz, mcz1")
    cur.execute("DROP TABLE bench_zvalues")
    conn.close()
    m = {k: med(v) for k, v in wall.items()}
    add_plain = med([a - f for a, f in zip(wall["plain"], wall["floor"])])
    add_z = med([a - f for a, f in zip(wall["compressed"], wall["floor"])])
    bound = 1.5 * add_plain + m["inflate"]
    w = "12 %s-key get_multi, 8 KB values compressed" % format(ZKEYS, ",")
    row(w, "floor: keys array", m["floor"], "ms")
    row(w, "mcfdw: mc_get_multi, plain values", m["plain"], "ms")
    row(w, "mcfdw: mc_get_multi, compressed values", m["compressed"], "ms", None, None, "", "",
        "%.1f MB inflated from %.1f MB" % (inflated / 1e6, stored_bytes / 1e6))
    row(w, "zlib inflate alone (Python zlib.decompress, same libz)", m["inflate"], "ms")
    row(w, "mcfdw: plain, added over floor", add_plain, "ms")
    row(w, "mcfdw: compressed, added over floor", add_z, "ms", None, ratio(add_z, bound),
        "<= 1.5 x plain's + inflate", check(add_z, "<=", bound),
        "bound %.1f ms = 1.5 x %.1f + %.1f" % (bound, add_plain, m["inflate"]))
    r_read = ratio(add_z, add_plain)
    row(w, "mcfdw: compressed added / plain added (issue 25)", r_read, "x", None, r_read,
        "<= 2.0 x plain", check(r_read, "<=", 2.0),
        "what inflating adds per value: %.1f us; Python's zlib alone: %.1f us"
        % ((add_z - add_plain) * 1e3 / ZKEYS, m["inflate"] * 1e3 / ZKEYS))
    # the same reads on JSON-like values, in rounds of their own after these
    jrounds = "%d rounds x %d statements after the digests'" % (ROUNDS, BATCH_REPEAT)
    add_jp = med([a - f for a, f in zip(jwall["plain"], jwall["floor"])])
    add_jz = med([a - f for a, f in zip(jwall["compressed"], jwall["floor"])])
    row(w, "mcfdw: JSON-like values, plain, added over floor", add_jp, "ms", note=jrounds)
    row(w, "mcfdw: JSON-like values, compressed, added over floor", add_jz, "ms", note=
        "%.1f MB inflated from %.1f MB; %s" % (j_inflated / 1e6, j_stored / 1e6, jrounds))
    r_json = ratio(add_jz, add_jp)
    row(w, "mcfdw: JSON-like values, compressed added / plain added", r_json, "x", None, r_json,
        "<= 2.0 x plain", check(r_json, "<=", 2.0),
        "what inflating adds per value: %.1f us; %s" % ((add_jz - add_jp) * 1e3 / ZKEYS, jrounds))
    if all(split.values()):
        # the medians of each statement's split, over the floor's
        f_cpu = med([c for _, c, _ in split["floor"]])
        f_rq = med([q for _, _, q in split["floor"]])
        for k in ("plain", "compressed"):
            cpu = med([c for _, c, _ in split[k]]) - f_cpu
            rq = med([q for _, _, q in split[k]]) - f_rq
            idle = med([wl - c - q for wl, c, q in split[k]])
            row(w, "mcfdw: %s, backend on a CPU, added over floor (schedstat)" % k, cpu, "ms",
                note="waiting for a CPU %.1f ms; waiting for memcached %.1f ms (the statement's wall "
                     "less both)" % (rq, idle))
        r_cpu = ratio(med([c for _, c, _ in split["compressed"]]) - f_cpu,
                      med([c for _, c, _ in split["plain"]]) - f_cpu)
        row(w, "mcfdw: compressed / plain, backend on a CPU over floor (schedstat)", r_cpu, "x")
    # writes: the same 10,000 values, mc_set_multi plain and compressed
    w = "12 10,000-key set_multi, 8 KB values compressed"
    add_wp = med([a - f for a, f in zip(wall["write plain"], wall["write floor"])])
    add_wz = med([a - f for a, f in zip(wall["write compressed"], wall["write floor"])])
    row(w, "floor: keys and values arrays (from a table)", m["write floor"], "ms")
    row(w, "mcfdw: mc_set_multi, plain", m["write plain"], "ms")
    row(w, "mcfdw: mc_set_multi, compressed (compress_threshold 1)", m["write compressed"], "ms")
    row(w, "mcfdw: plain, added over floor", add_wp, "ms")
    r_write = ratio(add_wz, add_wp)
    row(w, "mcfdw: compressed, added over floor", add_wz, "ms", None, r_write,
        "<= 2.0 x plain", check(r_write, "<=", 2.0),
        "what deflating adds per value: %.1f us" % ((add_wz - add_wp) * 1e3 / ZKEYS))
    add_w1 = med([a - f for a, f in zip(wall["write compressed level 1"], wall["write floor"])])
    row(w, "mcfdw: mc_set_multi, compressed at compression_level 1", m["write compressed level 1"], "ms")
    row(w, "mcfdw: compressed at level 1, added over floor", add_w1, "ms", None, ratio(add_w1, add_wp),
        "", "", "what deflating at level 1 adds per value: %.1f us; %.2f x level 6's"
        % ((add_w1 - add_wp) * 1e3 / ZKEYS, ratio(add_w1 - add_wp, add_wz - add_wp) or 0))
    if SWAP.active:
        lat = {k: per_round(v, BATCH_REPEAT) for k, v in wall.items()}
        for k in mine:
            base_row("12 10,000-key get_multi and set_multi, 8 KB values", "mcfdw: mc_%s" % {
                "plain": "get_multi, plain", "compressed": "get_multi, compressed",
                "write plain": "set_multi, plain", "write compressed": "set_multi, compressed"}[k],
                lat[k], lat[BASE + k], "ms")


def w12_callgrind():
    """Instructions per value of workload 12's four statements over their
    floors, in the single-user backend: what compressing adds to a read and
    to a write with nothing sampled (the wall-clock rows above carry
    memcached's and the kernel's share, and the machine's noise)."""
    say("12. user-mode instructions per 8 KB value, plain and compressed: callgrind on a single-user backend")
    w = "12 10,000-key get_multi and set_multi, 8 KB values"
    if shutil.which("valgrind") is None:
        row(w, "callgrind: instructions per value", None, "instr", note="valgrind not installed")
        return
    su = single_user()
    if su.error:
        row(w, "callgrind: instructions per value", None, "instr", note="single-user backend: " + su.error)
        return
    k1, k2 = 200, 1000
    out = su.run([
        "DROP SERVER IF EXISTS mcz",
        "CREATE SERVER mcz FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '%s', distribution 'modula', "
        "compression 'zlib', compressed_flag '2', compress_threshold '1')"
        % ",".join("127.0.0.1:%d" % port for port in PORTS),
        "DROP SERVER IF EXISTS mcz1",
        "CREATE SERVER mcz1 FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '%s', distribution 'modula', "
        "compression 'zlib', compressed_flag '2', compress_threshold '1', compression_level '1')"
        % ",".join("127.0.0.1:%d" % port for port in PORTS),
        "DROP TABLE IF EXISTS bench_cgz",
        "CREATE UNLOGGED TABLE bench_cgz (g integer PRIMARY KEY, v text)",
        "ALTER TABLE bench_cgz ALTER v SET STORAGE EXTERNAL",
        "INSERT INTO bench_cgz SELECT g, (SELECT string_agg(md5(g::text || ':' || j), '') "
        "FROM generate_series(1, 256) j) FROM generate_series(1, %d) g" % k2,
        "SELECT mc_set_multi(array_agg('cgu' || g), array_agg(v)) "
        "+ mc_set_multi(array_agg('cgz' || g), array_agg(v), server => 'mcz') AS stored FROM bench_cgz"])
    if "ERROR" in out or 'stored = "%d"' % (2 * k2) not in out:
        row(w, "callgrind: instructions per value", None, "instr",
            note="single-user backend: " + su.first_error(out))
        return
    su.K1, su.K2 = k1, k2
    arr = "(SELECT array_agg('%s' || g) FROM generate_series(1, %d) g)"
    rows = "FROM bench_cgz WHERE g <= %d"
    sqls = {
        "get floor": (lambda k: "SELECT cardinality(%s)" % (arr % ("cgu", k)), lambda k: k),
        "get_multi, plain": (lambda k: "SELECT count(*) FROM mc_get_multi(%s)" % (arr % ("cgu", k)),
                             lambda k: k),
        "get_multi, compressed": (lambda k: "SELECT count(*) FROM mc_get_multi(%s, 'mcz')"
                                  % (arr % ("cgz", k)), lambda k: k),
        "set floor": (lambda k: "SELECT cardinality(array_agg('cgu' || g)) + cardinality(array_agg(v)) "
                      + rows % k, lambda k: 2 * k),
        "set_multi, plain": (lambda k: "SELECT mc_set_multi(array_agg('cgu' || g), array_agg(v)) "
                             + rows % k, lambda k: k),
        "set_multi, compressed": (lambda k: "SELECT mc_set_multi(array_agg('cgz' || g), array_agg(v), "
                                  "server => 'mcz') " + rows % k, lambda k: k),
        "set_multi, compressed level 1": (lambda k: "SELECT mc_set_multi(array_agg('cgl' || g), array_agg(v), "
                                          "server => 'mcz1') " + rows % k, lambda k: k),
    }
    try:
        res = {}
        for name, (fn, expect) in sqls.items():
            res[name] = su.instructions(fn, expect)
        base = {}
        if SWAP.active:
            with SWAP.baseline():
                for name in ("get_multi, compressed", "set_multi, compressed"):
                    base[name] = su.instructions(sqls[name][0], sqls[name][1])
    finally:
        su.K1, su.K2 = SingleUser.K1, SingleUser.K2
        su.run(["DROP SERVER mcz, mcz1", "DROP TABLE bench_cgz"])
    for op in ("get", "set"):
        fl, err = res["%s floor" % op]
        add = {}
        for kind in ("plain", "compressed"):
            name = "%s_multi, %s" % (op, kind)
            v, e = res[name]
            add[kind] = v - fl if v is not None and fl is not None else None
            row(w, "mcfdw: mc_%s over floor, instructions per value (callgrind)" % name, add[kind],
                "instr", note=("single-user backend: " + (e or err)) if (e or err) else
                "%s to %s values" % (format(k1, ","), format(k2, ",")))
            if name in base:
                b, be = base[name]
                base_row(w, "mcfdw: mc_%s over floor, per value (callgrind)" % name, add[kind],
                         b - fl if b is not None and fl is not None else None, "instr",
                         note=("baseline's single-user backend: " + be) if be else "")
        row(w, "mcfdw: mc_%s_multi, compressed / plain, instructions over floor (callgrind)" % op,
            ratio(add["compressed"], add["plain"]), "x", note="no target: the wall-clock rows carry it")
        if op == "set":
            v, e = res["set_multi, compressed level 1"]
            add1 = v - fl if v is not None and fl is not None else None
            row(w, "mcfdw: mc_set_multi, compressed level 1 over floor, instructions per value (callgrind)",
                add1, "instr", note=("single-user backend: " + (e or err)) if (e or err) else
                "compression_level '1'; %.2f x level 6's" % (ratio(add1, add["compressed"]) or 0))


# ---- workload 14: invalidation from the write-ahead log (issue 23) ------------
# A private cluster of its own (the rig's preloads pgmemcache, not mcfdw,
# and runs at wal_level replica), on the rig's four memcacheds.
WAL_RATE = 1000                 # updates a second of the steady write load
WAL_ROWS = 20000                # rows of the loaded table (and keys of the rate rounds)
WAL_SAMPLES = 40 if QUICK else 150      # timed commits per contender
WAL_POLL_MS = 10                # mcfdw.wal_poll_interval of the cluster
WAL_LAG_CAP = 2.0               # seconds: a key not gone by then counts as this


class WalCluster:
    """initdb and start a cluster that preloads mcfdw with wal_level =
    logical, as test/integration/wal_invalidate.py starts its own."""

    def __init__(self):
        self.asuser = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.base = tempfile.mkdtemp(prefix="walbench.", dir=rig_tmp if os.path.isdir(rig_tmp) else None)
        os.chmod(self.base, 0o755)
        if self.asuser:
            shutil.chown(self.base, "postgres", "postgres")
        self.pgdata = os.path.join(self.base, "pgdata")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]

    def run(self, *cmd):
        p = subprocess.run(self.asuser + list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=self.base)
        if p.returncode != 0:
            raise RuntimeError("%s failed: %s" % (cmd[0], p.stdout[-2000:]))

    def start(self):
        self.run(os.path.join(PGBIN, "initdb"), "-D", self.pgdata, "-U", "postgres", "-E", "UTF8",
                 "--locale=C.UTF-8", "--auth=trust", "--no-sync")
        conf = os.path.join(self.pgdata, "postgresql.conf")
        trusted = "output_plugin_libraries" in open(conf).read()
        with open(conf, "a") as f:
            f.write("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"
                    "shared_preload_libraries = 'mcfdw'\nwal_level = logical\n"
                    "max_replication_slots = 4\nmax_wal_senders = 4\nfsync = off\n"
                    "shared_buffers = 64MB\n"
                    "mcfdw.wal_poll_interval = %dms\n" % (self.port, self.base, WAL_POLL_MS))
            if trusted:
                f.write("output_plugin_libraries = 'pgoutput, test_decoding, mcfdw'\n")
        self.run(os.path.join(PGBIN, "pg_ctl"), "-D", self.pgdata, "-l",
                 os.path.join(self.base, "postgres.log"), "-w", "-t", "60", "start")
        return self

    def stop(self):
        if os.path.exists(os.path.join(self.pgdata, "postmaster.pid")):
            subprocess.run(self.asuser + [os.path.join(PGBIN, "pg_ctl"), "-D", self.pgdata,
                                          "-m", "immediate", "-w", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.base)
        shutil.rmtree(self.base, ignore_errors=True)

    def connect(self):
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        conn.autocommit = True
        return conn

    def env(self):
        return dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(self.port), PGUSER="postgres",
                    PGDATABASE="postgres")


class Probe:
    """Asks memcached directly whether a key is there ("mg <key>": HD or
    EN), on one socket per instance, so the poll costs one round trip."""

    def __init__(self, ports):
        self.socks = {p: socket.create_connection(("127.0.0.1", p)) for p in ports}

    def cmd(self, port, line, value=None):
        s = self.socks[port]
        s.sendall(line.encode() + b"\r\n" + (value + b"\r\n" if value is not None else b""))
        buf = b""
        while not buf.endswith(b"\r\n"):
            buf += s.recv(4096)
        return buf

    def set(self, port, key):
        if not self.cmd(port, "ms %s 1" % key, b"v").startswith(b"HD"):
            raise RuntimeError("could not set %s" % key)

    def present(self, port, key):
        return self.cmd(port, "mg %s" % key).startswith(b"HD")

    def close(self):
        for s in self.socks.values():
            s.close()


def wal_sent(conn, table):
    cur = conn.cursor()
    cur.execute("SELECT sent, pending FROM mc_wal_watches WHERE \"table\" = %s::regclass", (table,))
    return cur.fetchone()


def wal_wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError("workload 14: timed out waiting for %s" % what)
        time.sleep(0.002)


def w14_lag(cl, conn, probe, route):
    """COMMIT to key gone, the watch and mc_invalidate alternating, under a
    steady load of WAL_RATE updates a second on the watched table."""
    script = os.path.join(WORK, "wal_load.sql")
    with open(script, "w") as f:
        f.write("\\set id random(1, %d)\nUPDATE wl SET v = v + 1 WHERE id = :id;\n" % WAL_ROWS)
    load = subprocess.Popen([os.path.join(PGBIN, "pgbench"), "-n", "-M", "prepared", "-c", "2",
                             "-j", "2", "-R", str(WAL_RATE), "-T", "600", "-f", script],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cl.env(), cwd=WORK)
    lags = {"watch": [], "mc_invalidate": []}
    late = {"watch": 0, "mc_invalidate": 0}
    cur = conn.cursor()
    try:
        time.sleep(1.0)
        upd0 = value(conn, "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'wl'")
        t_load = time.monotonic()
        for i in range(WAL_SAMPLES):
            for c in rotated(lags, i):
                table = "ws" if c == "watch" else "tl"
                key = "%s:%d" % (table, i + 1)
                probe.set(route[key], key)
                cur.execute("UPDATE %s SET v = v + 1 WHERE id = %%s" % table, (i + 1,))
                t0 = time.perf_counter()
                while probe.present(route[key], key):
                    if time.perf_counter() - t0 > WAL_LAG_CAP:
                        late[c] += 1
                        break
                lags[c].append((time.perf_counter() - t0) * 1e3)
                time.sleep(0.01)
        upd1 = value(conn, "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'wl'")
        rate = (upd1 - upd0) / (time.monotonic() - t_load)
    finally:
        load.terminate()
        load.wait()
    say("   load %.0f updates/s; watch p50 %.1f ms p99 %.1f ms; mc_invalidate p50 %.2f ms p99 %.2f ms"
        % (rate, pct(lags["watch"], 50), pct(lags["watch"], 99),
           pct(lags["mc_invalidate"], 50), pct(lags["mc_invalidate"], 99)))
    return lags, late, rate


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def w14_rate(conn):
    """Keys a second: the worker delivering one committed UPDATE of
    WAL_ROWS rows, against mc_delete_multi of the same keys, alternating.

    Both times hold one round trip and nothing else of the bench's.  The
    keys' array is built once, before the rounds: built inside the timed
    statement, it added 1.0-4.4 ms to mc_delete_multi's 7.7-14 ms (6
    pairs, 2026-12-03).  The worker's end is seen by a loop inside the
    server that reads mc_wal_status() every millisecond: a client
    polling mc_wal_watches every 2 ms saw it 0.9-2.5 ms (median 2.1)
    after the worker counted the keys, the loop 0.2-5.0 ms (median 0.4),
    5 rounds each against the worker's own clock.
    """
    keys = "(SELECT array_agg('wd:' || g) FROM generate_series(1, %d) g)" % WAL_ROWS
    refill = "SELECT mc_set_multi(%s, (SELECT array_agg('v'::text) FROM generate_series(1, %d)), NULL, NULL, 'wb')" \
        % (keys, WAL_ROWS)
    rates = {"worker": [], "mc_delete_multi": []}
    cur = conn.cursor()
    # stored as it is (not compressed): reading it back costs a copy only
    cur.execute("CREATE TEMP TABLE w14_keys (k text[])")
    cur.execute("ALTER TABLE w14_keys ALTER k SET STORAGE EXTERNAL")
    cur.execute("INSERT INTO w14_keys SELECT %s" % keys)
    cur.execute("""CREATE FUNCTION pg_temp.w14_wait(target bigint) RETURNS void LANGUAGE plpgsql AS $$
        DECLARE deadline timestamptz := clock_timestamp() + interval '60 s';
        BEGIN
          WHILE NOT coalesce((SELECT sent >= target AND pending = 0 FROM mc_wal_status()
                               WHERE relid = 'wd'::regclass), false) LOOP
            IF clock_timestamp() > deadline THEN
              RAISE EXCEPTION 'workload 14: timed out waiting for the worker''s deletes';
            END IF;
            PERFORM pg_sleep(0.001);
          END LOOP;
        END $$""")
    for r in range(ROUNDS):
        for c in rotated(rates, r):
            cur.execute(refill)
            if c == "worker":
                sent0 = wal_sent(conn, "wd")[0]
                cur.execute("UPDATE wd SET v = v + 1")
                t0 = time.perf_counter()
                cur.execute("SELECT pg_temp.w14_wait(%s)", (sent0 + WAL_ROWS,))
            else:
                t0 = time.perf_counter()
                cur.execute("SELECT mc_delete_multi(k, 'wb') FROM w14_keys")
                if cur.fetchone()[0] != WAL_ROWS:
                    raise RuntimeError("mc_delete_multi did not delete all %d keys" % WAL_ROWS)
            rates[c].append(WAL_ROWS / (time.perf_counter() - t0))
        say("   round %d: keys/s worker %.0f, mc_delete_multi %.0f"
            % (r + 1, rates["worker"][-1], rates["mc_delete_multi"][-1]))
    cur.execute("DROP TABLE w14_keys")
    return {c: med(v) for c, v in rates.items()}


def w14_tps(cl, conn):
    """pgbench tps of an UPDATE workload on the watched table: the watch on
    (the worker decodes and deletes), off (no watch, so no slot, nothing
    decoded), and logical decoding alone (no watch; pg_recvlogical streams
    the same changes through PostgreSQL's own test_decoding plugin to
    /dev/null), the cost the issue compares the watch's against."""
    script = "\\set id random(1, %d)\nUPDATE wl SET v = v + 1 WHERE id = :id;\n" % WAL_ROWS
    tps = {"watch on": [], "watch off": [], "decoding alone": []}
    slots = "SELECT count(*) FROM pg_replication_slots WHERE plugin = 'mcfdw'"
    recv = [os.path.join(PGBIN, "pg_recvlogical"), "-h", "127.0.0.1", "-p", str(cl.port),
            "-U", "postgres", "-d", "postgres", "-S", "bench_td"]
    made = subprocess.run(recv + ["-P", "test_decoding", "--create-slot"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if made.returncode != 0:
        say("   decoding alone: not measured (%s)" % made.stdout.strip()[-200:])
        del tps["decoding alone"]
    watched = True
    try:
        for r in range(ROUNDS):
            for c in rotated(tps, r):
                if c == "watch on" and not watched:
                    value(conn, "SELECT mc_watch('wl', ARRAY['wl:{id}'], 'wb')")
                elif c != "watch on" and watched:
                    value(conn, "SELECT mc_unwatch('wl')")
                    wal_wait(lambda: value(conn, slots) == 0, 60, "the slot dropped")
                watched = c == "watch on"
                streamer = None
                if c == "decoding alone":
                    streamer = subprocess.Popen(recv + ["--start", "-f", "/dev/null", "-F", "1", "-s", "1"],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    tps[c].append(pgbench(script, clients=2, seconds=max(SECONDS, 2), log=False,
                                          env=cl.env())[0])
                finally:
                    if streamer:
                        streamer.terminate()
                        streamer.wait(30)
            say("   round %d: %s" % (r + 1, ", ".join("tps %s %.0f" % (c, tps[c][-1]) for c in tps)))
    finally:
        if "decoding alone" in tps:
            subprocess.run(recv + ["--drop-slot"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {c: med(v) for c, v in tps.items()}


def w14_wal():
    say("14. invalidation from the write-ahead log: COMMIT to key gone at %d updates/s "
        "(%d commits per contender), the worker's keys/s against mc_delete_multi's, "
        "pgbench tps with the watch on and off" % (WAL_RATE, WAL_SAMPLES))
    cl = WalCluster().start()
    probe = None
    try:
        conn = cl.connect()
        cur = conn.cursor()
        cur.execute("CREATE EXTENSION mcfdw")
        cur.execute("CREATE SERVER wb FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)",
              (",".join("127.0.0.1:%d" % p for p in PORTS),))
        cur.execute("CREATE USER MAPPING FOR PUBLIC SERVER wb")
        for t in ("wl", "ws", "tl", "wd"):
            cur.execute("CREATE TABLE %s (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)" % t)
            cur.execute("INSERT INTO %s (id) SELECT g FROM generate_series(1, %d) g" % (t, WAL_ROWS))
        cur.execute("CREATE TRIGGER tl_cache AFTER UPDATE ON tl FOR EACH ROW "
                    "EXECUTE FUNCTION mc_invalidate('@wb', 'tl:{id}')")
        for t in ("wl", "ws", "wd"):
            value(conn, "SELECT mc_watch(%s, ARRAY[%s], 'wb')", (t, t + ":{id}"))
        samples = ["%s:%d" % (t, i + 1) for t in ("ws", "tl") for i in range(WAL_SAMPLES)]
        cur.execute("SELECT key, port FROM mc_route(%s, 'wb')", (samples,))
        route = dict(cur.fetchall())
        probe = Probe(PORTS)
        lags, late, rate = w14_lag(cl, conn, probe, route)
        rates = w14_rate(conn)
        value(conn, "SELECT mc_unwatch(t) FROM unnest(ARRAY['ws', 'wd']) t")
        tps = w14_tps(cl, conn)
        conn.close()
    finally:
        if probe:
            probe.close()
        cl.stop()
    w = "14 invalidation from the WAL"
    note = "at %.0f updates/s (pgbench -R %d on a watched table), mcfdw.wal_poll_interval %d ms; " \
           "%d commits each, a key not gone in %.0f s counted as that (watch %d, mc_invalidate %d)" \
        % (rate, WAL_RATE, WAL_POLL_MS, WAL_SAMPLES, WAL_LAG_CAP, late["watch"], late["mc_invalidate"])
    p99 = pct(lags["watch"], 99)
    row(w, "watch: COMMIT to key gone, p50", pct(lags["watch"], 50), "ms")
    row(w, "watch: COMMIT to key gone, p99", p99, "ms", None, None, "< 50 ms",
        check(p99, "<", 50.0), note)
    row(w, "mc_invalidate: COMMIT to key gone, p50", pct(lags["mc_invalidate"], 50), "ms")
    row(w, "mc_invalidate: COMMIT to key gone, p99", pct(lags["mc_invalidate"], 99), "ms")
    row(w, "worker: keys deleted a second", rates["worker"], "keys/s")
    row(w, "mc_delete_multi: keys deleted a second", rates["mc_delete_multi"], "keys/s")
    r_ = ratio(rates["worker"], rates["mc_delete_multi"])
    row(w, "worker / mc_delete_multi, keys a second", r_, "x", None, None, ">= 0.5 x",
        check(r_, ">=", 0.5), "one UPDATE of %s rows, COMMIT to the last key acknowledged "
        "(mc_wal_status().sent, read inside the server every 1 ms); mc_delete_multi of the keys' "
        "array built before the timing" % format(WAL_ROWS, ","))
    row(w, "pgbench UPDATE tps, watch off", tps["watch off"], "tps")
    row(w, "pgbench UPDATE tps, watch on", tps["watch on"], "tps")
    r_ = ratio(tps["watch on"], tps["watch off"])
    row(w, "pgbench UPDATE tps, watch on / off", r_, "x", None, None, "", "",
        "2 clients; off: no watch, no slot; on: the worker decodes and deletes beside them")
    if "decoding alone" in tps:
        row(w, "pgbench UPDATE tps, logical decoding alone", tps["decoding alone"], "tps")
        r_ = ratio(tps["watch on"], tps["decoding alone"])
        row(w, "pgbench UPDATE tps, watch on / decoding alone", r_, "x", None, None, "", "",
            "decoding alone: no watch; pg_recvlogical streams the changes through test_decoding "
            "to /dev/null, what logical decoding costs PostgreSQL without mcfdw")


# ---- report ------------------------------------------------------------------
def fmt_num(v, unit=""):
    if v is None or v != v:
        return "-"
    if unit in ("conns", "allocs", "kB") and float(v).is_integer():
        return "%d" % v
    av = abs(v)
    if av >= 1000:
        return "{:,.0f}".format(v)
    if av >= 100:
        return "%.1f" % v
    if av >= 10:
        return "%.2f" % v
    return "%.3f" % v


def fmt_ratio(v):
    return "-" if v is None or v != v else "%.2f" % v


def fmt_ratio3(v):
    return "-" if v is None or v != v else "%.3f" % v


def report(info, elapsed):
    lines = []
    lines.append("mcfdw benchmark — %s, %s mode, %d rounds x %gs, %.0f s in all"
                 % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                    "quick" if QUICK else "full", ROUNDS, SECONDS, elapsed))
    lines.append("machine: nproc %s; CPU %s; memory %s; kernel %s"
                 % (info["nproc"], info["cpu"], info["memory"], info["kernel"]))
    lines.append("software: PostgreSQL %s; pgmemcache %s (libmemcached %s); %s; 4 memcached servers on loopback"
                 % (info["postgresql"], info["pgmemcache"], info["libmemcached"], info["memcached"]))
    lines.append("median over rounds (contenders alternate inside each round); mcfdw/pgm = the mcfdw row / "
                 "its pgmemcache row; /floor|raw = the row / the floor (workloads 1, 4) or / the raw C "
                 "client (2, 3); us = microseconds")
    head = ("workload", "contender", "median", "unit", "mcfdw/pgm", "/floor|raw", "target", "result")
    table = [head]
    for r in ROWS:
        table.append((r["workload"], r["contender"], fmt_num(r["median"], r["unit"]), r["unit"],
                      fmt_ratio(r["vs_pgm"]), fmt_ratio(r["vs_floor"]), r["target"], r["status"]))
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    right = {2, 4, 5}
    lines.append("")
    for i, t in enumerate(table):
        cells = [t[c].rjust(widths[c]) if c in right else t[c].ljust(widths[c]) for c in range(len(t))]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [(r["workload"], r["contender"], r["note"]) for r in ROWS if r["note"]]
    if notes:
        lines.append("")
        lines.append("notes:")
        for w, c, n in notes:
            lines.append("  %s / %s: %s" % (w, c, n))
    targets = [r for r in ROWS if not r["base"]]
    met = sum(1 for r in targets if r["status"] == "met")
    missed = [r for r in targets if r["status"] == "missed"]
    lines.append("")
    na = sum(1 for r in targets if r["status"] == "n/a")
    lines.append("targets: %d met, %d missed, %d not measured%s" % (met, len(missed), na,
                 "" if not missed else " (" + "; ".join("%s: %s" % (r["workload"], r["contender"])
                                                          for r in missed) + ")"))
    if BASE_SUMMARY:
        lines += baseline_summary()
    return "\n".join(lines) + "\n"


def baseline_summary():
    """The comparisons with BENCH_BASELINE in one table (base_row): each
    row's medians for both builds, the median of the per-round ratios, their
    quartiles, the bound and whether it was met."""
    lines = ["", "this build against the baseline (%s), bound %.3f (BENCH_BASELINE_BOUND); this build "
             "and baseline: medians over rounds; ratio: the median of the rounds' ratios; +-95%%: "
             "1.57 x (q3 - q1) / sqrt(rounds), about a 95 %% interval of that median; rounds: how "
             "many would make it +-%.3f:" % (SWAP.path, BASE_BOUND, BASE_BOUND - 1)]
    head = ("row", "this build", "baseline", "unit", "ratio", "q1-q3", "+-95%", "rounds", "bound", "met")
    table = [head]
    for b in BASE_SUMMARY:
        spread = b["q1"] is not None
        table.append((b["row"], fmt_num(b["mine"], b["unit"]), fmt_num(b["base"], b["unit"]), b["unit"],
                      fmt_ratio3(b["ratio"]),
                      "%s-%s" % (fmt_ratio3(b["q1"]), fmt_ratio3(b["q3"])) if spread else "-",
                      fmt_ratio3(b["notch"]) if spread else "-", str(b["need"]) if spread else "-",
                      b["bound"], b["status"]))
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    right = {1, 2, 4, 5, 6, 7}
    for i, t in enumerate(table):
        lines.append("  ".join(t[c].rjust(widths[c]) if c in right else t[c].ljust(widths[c])
                               for c in range(len(t))).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    missed = [b for b in BASE_SUMMARY if b["status"] == "missed"]
    lines.append("baseline: %d met, %d missed, %d not measured"
                 % (sum(1 for b in BASE_SUMMARY if b["status"] == "met"), len(missed),
                    sum(1 for b in BASE_SUMMARY if b["status"] == "n/a")))
    return lines


# ---- workload 9: TLS against plain TCP ------------------------------------
def start_tls_memcacheds(n, tls=True):
    """n private memcacheds with -Z (or, with tls False, the same without
    -Z: the plain side of workload 10 must not be the rig's long-running
    memcacheds, whose state differs from fresh ones), certificates made
    with the openssl command in WORK; returns (ports, processes, CA file)."""
    # not under WORK (0700): the backend, as postgres, reads the CA file
    d = tempfile.mkdtemp(prefix="bench-tls.", dir=os.path.dirname(WORK))
    os.chmod(d, 0o755)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for args in (["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                                           "-subj", "/CN=bench CA"],
                 ["req", "-new"] + ec + ["-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=bench"],
                 ["x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                  "-set_serial", "1", "-days", "2", "-out", "srv.crt", "-extfile", "san.ext"]):
        subprocess.run(["openssl"] + args, cwd=d, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for fn in os.listdir(d):
        os.chmod(os.path.join(d, fn), 0o644)
    ports, procs = [], []
    for _ in range(n):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [os.environ.get("MCFDW_MEMCACHED", "/usr/bin/memcached"), "-l", "127.0.0.1",
               "-p", str(port), "-U", "0", "-m", "64"]
        if tls:
            cmd += ["-Z", "-o", "ssl_chain_cert=%s,ssl_key=%s" % (os.path.join(d, "srv.crt"),
                                                                   os.path.join(d, "srv.key"))]
        if os.geteuid() == 0:
            cmd += ["-u", "nobody"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ports.append(port)
    for port in ports:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
    return ports, procs, os.path.join(d, "ca.crt")


def raw_round_trip(ports, ca):
    """Microseconds per round trip of the raw C client's LOOP single gets
    (rawclient -s) on ports over k0..k9999; over TLS when ca is given."""
    out = run_rawclient(LOOP, "-s", 0, *(["-S", ca] if ca else []), ports=ports, keyspace=10000)
    m = re.search(r"calls=(\d+) misses=0 wall_ms=([0-9.]+)", out)
    if not m:
        raise RuntimeError("rawclient -s printed: " + out)
    return float(m.group(2)) * 1000 / int(m.group(1))


def loop_round_trip(conn, server):
    """Microseconds per get of LOOP mc_get calls in one statement (server is
    the mc_get argument naming the server, or empty)."""
    t0 = time.perf_counter()
    n = value(conn, "SELECT count(mc_get('k' || mod(g * 7919, 10000)%s)) FROM generate_series(1, %d) g"
              % (server, LOOP))
    t = time.perf_counter() - t0
    if n != LOOP:
        raise RuntimeError("%d gets in one statement found %s" % (LOOP, n))
    return t * 1e6 / LOOP


def perf_syscalls(pids, run):
    """Syscalls of the processes pids (all their threads) while run() runs,
    counted by perf stat on the syscall tracepoints, and their CPU time
    (task-clock, ms): (total, {name: count}, ms), or None when perf cannot
    count here."""
    names = ["read", "write", "sendmsg", "sendto", "recvfrom", "epoll_wait", "epoll_ctl",
             "getpid", "futex", "clock_nanosleep"]
    out = os.path.join(WORK, "perfstat.%d" % pids[0])
    p = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out, "-e",
                          ",".join(["task-clock", "raw_syscalls:sys_enter"] +
                                   ["syscalls:sys_enter_" + n for n in names]),
                          "-p", ",".join(map(str, pids))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    run()
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    p.wait()
    counts = {}
    try:
        with open(out) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and re.match(r"^[0-9.]+$", parts[0]):
                    counts[parts[2]] = float(parts[0])
    except OSError:
        return None
    if "raw_syscalls:sys_enter" not in counts:
        return None
    return (counts["raw_syscalls:sys_enter"], {n: counts.get("syscalls:sys_enter_" + n, 0) for n in names},
            counts.get("task-clock"))


def w10_syscalls(w, plain_pids, tls_pids):
    """System calls per single get over plain TCP and TLS: the backend's,
    and the memcacheds' (memcached -Z reads a record's header and its body
    apart: one read more per request, which no client can spare it)."""
    if shutil.which("perf") is None:
        row(w, "syscalls per get (perf stat)", None, "calls", note="perf is not installed")
        return
    conn = connect()
    pid = backend_pid(conn)
    sql = "SELECT count(mc_get('k' || mod(g * 7919, 10000)%s)) FROM generate_series(1, %d) g"
    for what, extra, mc_pids in (("plain TCP", ", server => 'bench_plain'", plain_pids),
                                 ("TLS", ", server => 'bench_tls'", tls_pids)):
        value(conn, sql % (extra, 100))         # connections made, sessions kept
        got = {}

        def run():
            got["mc"] = perf_syscalls(mc_pids, lambda: value(conn, sql % (extra, LOOP)))
        got["be"] = perf_syscalls([pid], run)
        for who, key in (("mcfdw backend", "be"), ("memcached", "mc")):
            if got.get(key) is None:
                row(w, "%s: syscalls per get, %s (perf stat)" % (who, what), None, "calls",
                    note="perf stat cannot count syscalls here")
                continue
            total, by, ms = got[key]
            row(w, "%s: syscalls per get, %s (perf stat)" % (who, what), total / LOOP, "calls",
                note=" ".join("%s %.2f" % (n, c / LOOP) for n, c in by.items() if c >= LOOP / 100))
            row(w, "%s: CPU time per get, %s (perf stat task-clock)" % (who, what),
                ms * 1000 / LOOP if ms is not None else None, "us")
    conn.close()


# x86_64 system call numbers the round-trip timeline looks for
NR_WRITE, NR_WRITEV, NR_SENDTO, NR_SENDMSG, NR_EPOLL_WAIT = 1, 20, 44, 46, 232
TIMELINE_N = 3000               # gets traced per side


def syscall_events(path):
    """(time s, comm, tid, "enter"|"exit", nr) of a perf.data file recorded
    on the raw_syscalls tracepoints."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,time,event,trace"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    ev = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s+([\d.]+):\s+raw_syscalls:sys_(enter|exit): NR (\d+)", line)
        if m:
            ev.append((float(m.group(3)), m.group(1), int(m.group(2)), m.group(4), int(m.group(5))))
    ev.sort()
    return ev


def round_trip_segments(events, client_tids):
    """Each single-get round trip cut at four system-call boundaries: the
    client's write of the request to a memcached worker's return from
    epoll_wait (the kernel), the worker's own time to its reply's write,
    the reply to the client's return from epoll_wait (the kernel), and the
    client's own time from there to its next request's write (reading and
    decrypting the reply, the SQL row, the next key, encrypting it).  The
    four means add up to the time per get.  Returns {segment: [us]}."""
    seg = {"to_server": [], "server": [], "to_client": [], "client": []}
    t_send = t_swake = t_sreply = t_cwake = None
    for t, comm, tid, kind, nr in events:
        if tid in client_tids:
            if kind == "enter" and nr in (NR_WRITE, NR_SENDTO):
                if t_cwake is not None:
                    seg["client"].append((t - t_cwake) * 1e6)
                t_send, t_swake, t_sreply, t_cwake = t, None, None, None
            elif kind == "exit" and nr == NR_EPOLL_WAIT and t_sreply is not None and t_cwake is None:
                t_cwake = t
                seg["to_client"].append((t - t_sreply) * 1e6)
        elif comm.startswith("mc-worker"):
            if kind == "exit" and nr == NR_EPOLL_WAIT and t_send is not None and t_swake is None:
                t_swake = t
                seg["to_server"].append((t - t_send) * 1e6)
            elif (kind == "enter" and nr in (NR_WRITE, NR_WRITEV, NR_SENDMSG)
                  and t_swake is not None and t_sreply is None):
                t_sreply = t
                seg["server"].append((t - t_swake) * 1e6)
    return seg


def perf_record(pids, out):
    return subprocess.Popen(["perf", "record", "-q", "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit",
                             "-o", out, "-p", ",".join(map(str, pids))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def perf_stop(p):
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    p.wait()


def w10_timeline(w, plain, tls):
    """Where a single get's time goes, plain and TLS, for mcfdw (gets in
    one statement) and for the raw C client: the system calls of the client
    and of the memcacheds, recorded with perf, cut into the four segments
    of round_trip_segments.  plain and tls are (ports, memcached pids, CA
    file or None).  Returns the time TLS adds to mcfdw's own segment (us per
    get), all of the added time that is the client's to save, or None."""
    if shutil.which("perf") is None or platform.machine() != "x86_64":
        row(w, "where a get's time goes (perf record)", None, "us", note="needs perf on x86_64")
        return None
    names = (("to_server", "the kernel, request to memcached's wake-up"),
             ("server", "memcached's own, wake-up to reply"),
             ("to_client", "the kernel, reply to the client's wake-up"),
             ("client", "the client's own, wake-up to next request"))
    sql = "SELECT count(mc_get('k' || mod(g * 7919, 10000), server => '%s')) FROM generate_series(1, %d) g"
    got = {}
    conn = connect()
    pid = backend_pid(conn)
    for side, (ports, mc_pids, ca) in (("plain", plain), ("tls", tls)):
        srv = "bench_tls" if ca else "bench_plain"
        value(conn, sql % (srv, 100))           # connections made
        f = os.path.join(WORK, "timeline.mcfdw.%s" % side)
        p = perf_record([pid] + mc_pids, f)
        time.sleep(0.5)
        value(conn, sql % (srv, TIMELINE_N))
        perf_stop(p)
        got[("mcfdw", side)] = round_trip_segments(syscall_events(f), {pid})
        # the raw client: its own recording, merged with the memcacheds' by time
        fm = os.path.join(WORK, "timeline.mc.%s" % side)
        fr = os.path.join(WORK, "timeline.raw.%s" % side)
        pm = perf_record(mc_pids, fm)
        time.sleep(0.5)
        cmd = [RAWCLIENT, "-p", ",".join(map(str, ports)), "-n", str(TIMELINE_N), "-k", "10000",
               "-s", "0"] + (["-S", ca] if ca else [])
        out = subprocess.run(["perf", "record", "-q", "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit",
                              "-o", fr, "--"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        perf_stop(pm)
        if "misses=0" not in out.stdout:
            raise RuntimeError("rawclient under perf record printed: " + out.stdout[-300:])
        ev = sorted(syscall_events(fm) + syscall_events(fr))
        got[("raw", side)] = round_trip_segments(ev, {e[2] for e in ev if e[1] == "rawclient"})
    conn.close()
    mean = {k: {s: (statistics.mean(v) if v else float("nan")) for s, v in segs.items()} for k, segs in got.items()}
    for who, label in (("mcfdw", "mcfdw (gets in one statement)"), ("raw", "raw C client")):
        for side, what in (("plain", "plain TCP"), ("tls", "TLS")):
            m = mean[(who, side)]
            row(w, "%s: a get's time by segment, %s (perf record)" % (label, what), sum(m.values()), "us",
                None, ratio(sum(m.values()), sum(mean[(who, "plain")].values())) if side == "tls" else None,
                note="; ".join("%s %.1f" % (n, m[s]) for s, n in names)
                + (" (/floor|raw is TLS / plain TCP)" if side == "tls" else ""))
        for s, n in names:
            row(w, "%s: TLS adds to %s" % (label, n), mean[(who, "tls")][s] - mean[(who, "plain")][s], "us")
    return mean[("mcfdw", "tls")]["client"] - mean[("mcfdw", "plain")]["client"]


def w10_callgrind(w, plain_ports, ports, ca):
    """User-mode instructions TLS adds to a single get: mcfdw's (a
    single-user backend, 1,000 vs 5,000 mc_get calls on each server) and
    the raw C client's (1,000 vs 5,000 round trips)."""
    if shutil.which("valgrind") is None:
        row(w, "callgrind: instructions TLS adds per get", None, "instr", note="valgrind not installed")
        return
    su = single_user()
    err = su.error
    if not err:
        out = su.run(["DROP SERVER IF EXISTS bench_tls",
                      "CREATE SERVER bench_tls FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '%s', "
                      "distribution 'modula', tls 'verify-full', tls_ca_file '%s')"
                      % (",".join("127.0.0.1:%d" % p for p in ports), ca),
                      "DROP SERVER IF EXISTS bench_plain",
                      "CREATE SERVER bench_plain FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '%s', "
                      "distribution 'modula')" % ",".join("127.0.0.1:%d" % p for p in plain_ports)])
        if "ERROR" in out:
            err = su.first_error(out)
    if err:
        row(w, "callgrind: instructions TLS adds per get", None, "instr", note="single-user backend: " + err)
        return
    sql = "SELECT count(mc_get('k' || (g %% 10000)%s)) FROM generate_series(1, %d) g"
    mc = {}
    for k, extra in (("plain", ", server => 'bench_plain'"), ("tls", ", server => 'bench_tls'")):
        mc[k], e = su.instructions(lambda n: sql % (extra, n), lambda n: n)
        if e:
            row(w, "callgrind: instructions TLS adds per get", None, "instr", note="single-user backend: " + e)
            return
    raw = {}
    for k, args, p in (("plain", [], plain_ports), ("tls", ["-S", ca], ports)):
        got = []
        for n in (SingleUser.K1, SingleUser.K2):
            out = run_rawclient(n, "-s", 0, *args, ports=p, keyspace=10000,
                                valgrind=["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"])
            m = re.search(r"Collected : (\d+)", out)
            if not m:
                raise RuntimeError("rawclient under callgrind printed: " + out[-300:])
            got.append(int(m.group(1)))
        raw[k] = (got[1] - got[0]) / (SingleUser.K2 - SingleUser.K1)
    add_mc, add_raw = mc["tls"] - mc["plain"], raw["tls"] - raw["plain"]
    row(w, "mcfdw: instructions per get, plain TCP (callgrind)", mc["plain"], "instr")
    row(w, "mcfdw: instructions TLS adds per get (callgrind)", add_mc, "instr", None,
        ratio(add_mc, add_raw), note="/floor|raw is mcfdw's / the raw client's")
    row(w, "raw C client: instructions per round trip, plain TCP (callgrind)", raw["plain"], "instr")
    row(w, "raw C client: instructions TLS adds per round trip (callgrind)", add_raw, "instr")
    if SWAP.active:
        for k, extra, label in (("plain", ", server => 'bench_plain'", "plain TCP"),
                                ("tls", ", server => 'bench_tls'", "TLS")):
            with SWAP.baseline():
                b, e = su.instructions(lambda n: sql % (extra, n), lambda n: n)
            base_row(w, "mcfdw: instructions per get, %s (callgrind)" % label, mc[k], b, "instr",
                     note=("baseline's single-user backend: " + e) if e else "")


def w10_cold(w):
    """A cold 10-key mc_get_multi over the four instances, plain TCP and
    TLS: each call in a new session (the library and the server entry
    loaded first, nothing connected), so the call connects to every
    instance it reads from; the two alternate, in turn first."""
    keys = ["k%d" % i for i in range(10)]
    calls = 10 if QUICK else 40
    servers = ["bench_plain", "bench_tls"]
    ms = {k: [] for k in with_baseline(dict.fromkeys(servers), servers)}
    conns = {}

    def cold(k):
        srv = k[len(BASE):] if k.startswith(BASE) else k
        c = connect()
        value(c, "SELECT count(*) FROM mc_servers WHERE server = %s", (srv,))
        t0 = time.perf_counter()
        got = value(c, "SELECT count(*) FROM mc_get_multi(%s::text[], %s)", (keys, srv))
        t = (time.perf_counter() - t0) * 1000
        conns[k] = value(c, "SELECT sum(connections) FROM mc_servers WHERE server = %s", (srv,))
        c.close()
        if got != len(keys):
            raise RuntimeError("a cold 10-key multi-get on %s found %s" % (srv, got))
        return t
    for i in range(calls):
        for k in rotated(ms, i):
            ms[k].append(run_as(k, lambda: cold(k)))
    plain, tls = med(ms["bench_plain"]), med(ms["bench_tls"])
    say("   cold 10-key mc_get_multi: plain %.2f ms, TLS %.2f ms (median of %d, a new session each)"
        % (plain, tls, calls))
    row(w, "mcfdw: cold 10-key mc_get_multi over 4 instances, plain TCP (new session each call)",
        plain, "ms", note="%s connects per call" % conns["bench_plain"])
    row(w, "mcfdw: cold 10-key mc_get_multi over 4 instances, TLS (new session each call)",
        tls, "ms", None, ratio(tls, plain),
        note="/floor|raw is TLS / plain TCP here; %s handshakes per call" % conns["bench_tls"])
    if SWAP.active:
        # one call is one sample: the calls pair up in the order they ran
        for srv, what in (("bench_plain", "plain TCP"), ("bench_tls", "TLS")):
            base_row(w, "mcfdw: cold 10-key mc_get_multi, %s" % what, ms[srv], ms[BASE + srv], "ms")


def w10_tls():
    say("10. TLS (verify-full) against plain TCP, four fresh instances each, started alike: single get, "
        "10,000-key multi-get, handshakes after warm-up")
    ports, procs, ca = start_tls_memcacheds(len(PORTS))
    plain_ports, plain_procs, plain_ca = start_tls_memcacheds(len(PORTS), tls=False)
    try:
        conn = connect()
        conn.cursor().execute("DROP SERVER IF EXISTS bench_tls")
        conn.cursor().execute("CREATE SERVER bench_tls FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s, "
                    "distribution 'modula', tls 'verify-full', tls_ca_file %s)",
              (",".join("127.0.0.1:%d" % p for p in ports), ca))
        conn.cursor().execute("DROP SERVER IF EXISTS bench_plain")
        conn.cursor().execute("CREATE SERVER bench_plain FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s, "
                    "distribution 'modula')", (",".join("127.0.0.1:%d" % p for p in plain_ports),))
        for srv in ("bench_tls", "bench_plain"):
            n = value(conn, "SELECT count(*) FILTER (WHERE mc_set('k' || i, lpad(i::text, 100, 'v'), "
                            "server => '%s')) FROM generate_series(0, 9999) i" % srv)
            if n != 10000:
                raise RuntimeError("writing 10,000 keys to %s stored %s" % (srv, n))
        # handshakes: one backend, warmed up, then 10,000 calls
        value(conn, "SELECT count(*) FROM mc_get_multi((SELECT array_agg('k' || i) "
                    "FROM generate_series(0, 99) i), 'bench_tls')")
        before = value(conn, "SELECT sum(connections) FROM mc_servers WHERE server = 'bench_tls'")
        value(conn, "SELECT count(*) FILTER (WHERE mc_get('k' || (i % 10000), server => 'bench_tls') "
                    "IS NOT NULL) FROM generate_series(1, 10000) i")
        after = value(conn, "SELECT sum(connections) FROM mc_servers WHERE server = 'bench_tls'")
        conn.close()
        w = "10 TLS vs plain TCP"
        hs = after - before
        row(w, "mcfdw: new handshakes per 10,000 calls after warm-up", hs, "count",
            target="= 0", status=check(hs, "<=", 0))
        w10_cold(w)
        single = {
            "floor": "SELECT 1;\n",
            "plain": "\\set k random(0, 9999)\nSELECT mc_get('k' || :k, server => 'bench_plain');\n",
            "tls": "\\set k random(0, 9999)\nSELECT mc_get('k' || :k, server => 'bench_tls');\n",
            # the raw C client's round trips on the same two sets of instances
            "raw plain": (plain_ports, None),
            "raw TLS": (ports, ca),
            # mcfdw's round trips back to back (no pgbench transaction between)
            "loop plain": ", server => 'bench_plain'",
            "loop TLS": ", server => 'bench_tls'",
        }
        arr = "(SELECT array_agg('k' || g) FROM generate_series(0, 9999) g)"
        multi = {
            "floor": "SELECT cardinality(%s);\n" % arr,
            "plain": "SELECT count(*) FROM mc_get_multi(%s, 'bench_plain');\n" % arr,
            "tls": "SELECT count(*) FROM mc_get_multi(%s, 'bench_tls');\n" % arr,
        }
        for what, scripts, target in (("single get", single, 1.3), ("10,000-key mc_get_multi", multi, 2.0)):
            scripts = with_baseline(scripts, [k for k in scripts if k in ("plain", "tls", "loop plain",
                                                                          "loop TLS")])
            lat = {k: [] for k in scripts}
            # each build's session for the loops, warmed alike before the
            # first round: library loaded, a connection to each server open
            warm = ("SELECT count(*) FROM mc_get_multi(ARRAY['k1'], 'bench_plain') "
                    "UNION ALL SELECT count(*) FROM mc_get_multi(ARRAY['k1'], 'bench_tls')")
            lconn = connect()
            value(lconn, warm)
            blconn = None
            if SWAP.active and "loop plain" in scripts:     # the baseline build's session, loaded now
                blconn = connect()
                run_as(BASE, lambda: value(blconn, warm))
            for r in range(ROUNDS):
                for k, s in rotated(scripts.items(), r):
                    kind = k[len(BASE):] if k.startswith(BASE) else k
                    if kind.startswith("raw"):
                        lat[k].append(raw_round_trip(*s))
                    elif kind.startswith("loop"):
                        lat[k].append(loop_round_trip(blconn if k.startswith(BASE) else lconn, s))
                    else:
                        lat[k].append(run_as(k, lambda: pgbench(s)[1]))
                say("   %s round %d: floor %.1f us, plain %.1f us, TLS %.1f us%s"
                    % (what, r + 1, lat["floor"][-1], lat["plain"][-1], lat["tls"][-1],
                       "; in one statement %.1f us plain, %.1f us TLS; raw client %.1f us plain, %.1f us TLS"
                       % (lat["loop plain"][-1], lat["loop TLS"][-1], lat["raw plain"][-1], lat["raw TLS"][-1])
                       if "raw TLS" in lat else ""))
            lconn.close()
            if blconn:
                blconn.close()
            if SWAP.active:
                for k, label in (("plain", "plain TCP"), ("tls", "TLS")):
                    base_added(w, "mcfdw: %s, %s" % (what, label), lat, k, "floor")
                for k, label in (("loop plain", "plain TCP"), ("loop TLS", "TLS")):
                    if k in lat:
                        base_added(w, "mcfdw: %s gets in one statement, per get, %s"
                                   % (format(LOOP, ","), label), lat, k, None)
            add_plain = med([p - f for p, f in zip(lat["plain"], lat["floor"])])
            add_tls = med([t - f for t, f in zip(lat["tls"], lat["floor"])])
            rt = ratio(add_tls, add_plain)
            if what == "single get":
                single_added = {"plain": add_plain, "tls": add_tls}
            row(w, "mcfdw: %s added over floor, plain TCP" % what, add_plain, "us")
            row(w, "mcfdw: %s added over floor, TLS" % what, add_tls, "us", None, rt,
                "<= %s x plain" % target, check(rt, "<=", target),
                note="/floor|raw is TLS / plain TCP here")
            if "raw TLS" not in lat:
                continue
            raw_plain, raw_tls = med(lat["raw plain"]), med(lat["raw TLS"])
            row(w, "raw C client: single get round trip, plain TCP", raw_plain, "us")
            row(w, "raw C client: single get round trip, TLS", raw_tls, "us", None,
                ratio(raw_tls, raw_plain), note="/floor|raw is TLS / plain TCP here")
            # what TLS adds, paired inside each round
            tls_mc = med([t - p for t, p in zip(lat["tls"], lat["plain"])])
            tls_raw = med([t - p for t, p in zip(lat["raw TLS"], lat["raw plain"])])
            row(w, "mcfdw: TLS's added time per single get (TLS - plain)", tls_mc, "us")
            row(w, "raw C client: TLS's added time per round trip (TLS - plain)", tls_raw, "us")
            rm = ratio(tls_mc, tls_raw)
            row(w, "mcfdw: TLS's added time over the raw client's", rm, "x", None, rm,
                "<= 1.2 x raw (proposed)", check(rm, "<=", 1.2),
                note="/floor|raw is mcfdw's (TLS - plain) / the raw client's (TLS - plain)")
            row(w, "mcfdw: %s gets in one statement, per get, plain TCP" % format(LOOP, ","),
                med(lat["loop plain"]), "us")
            row(w, "mcfdw: %s gets in one statement, per get, TLS" % format(LOOP, ","),
                med(lat["loop TLS"]), "us", None, ratio(med(lat["loop TLS"]), med(lat["loop plain"])),
                note="/floor|raw is TLS / plain TCP here")
            tls_loop = med([t - p for t, p in zip(lat["loop TLS"], lat["loop plain"])])
            row(w, "mcfdw in one statement: TLS's added time per get (TLS - plain)", tls_loop, "us",
                None, ratio(tls_loop, tls_raw), note="/floor|raw is over the raw client's (TLS - plain)")
        w10_syscalls(w, [p.pid for p in plain_procs], [p.pid for p in procs])
        own = w10_timeline(w, (plain_ports, [p.pid for p in plain_procs], None),
                           (ports, [p.pid for p in procs], ca))
        if own is not None:
            # the target row's terms: single get added over the floor
            bound = ratio(single_added["tls"] - own, single_added["plain"])
            row(w, "mcfdw: single get added over floor, TLS / plain, if mcfdw's own TLS time were zero",
                bound, "x", None, bound,
                note=("above 1.3: no client could have met the 1.3x target in this run; the rest "
                      "of TLS's time is memcached's and the kernel's" if bound is not None and bound > 1.3
                      else "1.3 or below: the target's margin in this run was larger than "
                           "memcached's and the kernel's share of TLS's time"))
        w10_callgrind(w, plain_ports, ports, ca)
    finally:
        for p in procs + plain_procs:
            p.kill()
            p.wait()
        for d in (ca, plain_ca):
            shutil.rmtree(os.path.dirname(d), ignore_errors=True)


def main():
    global SWAP
    t0 = time.time()
    say("work directory %s; %d rounds x %gs%s" % (WORK, ROUNDS, SECONDS, " (quick)" if QUICK else ""))
    SWAP = BaselineSwap()
    run_all(t0)


def run_all(t0):
    conn = connect()
    load_keys(conn)
    conn.close()
    info = machine()
    steps = [(1, w1_single_get),
             (2, w2_small_multi),
             (2, w2_callgrind),
             (3, lambda: w_multi(3, 10000, 1.5)),
             (3, w3_callgrind),
             (4, w4_loop),
             (4, w4_callgrind),
             (6, w6_parser),
             (7, w7_pool),
             (8, w8_seed),
             (9, w9_batch_writes),
             (10, w10_tls),
             (11, w11_foreign_table),
             (12, w12_compressed),
             (12, w12_callgrind),
             (13, w13_prefetch),
             (14, w14_wal)]
    for num, fn in steps:
        if ONLY and num not in ONLY and not (num in (2, 3) and 5 in ONLY):
            continue
        fn()
    text = report(info, time.time() - t0)
    print("")
    print(text, end="", flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    partial = QUICK or bool(ONLY) or SWAP.active or any(
        os.environ.get(k) for k in ("BENCH_ROUNDS", "BENCH_SECONDS", "BENCH_MIX_ROUNDS"))
    base = os.path.join(RESULTS, "quick" if partial else "latest")
    csv_path = base + (".csv.tmp" if partial else ".csv")
    txt_path = base + (".txt.tmp" if partial else ".txt")
    with open(csv_path, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "contender", "median", "unit", "mcfdw_vs_pgmemcache",
                     "mcfdw_vs_floor_or_raw", "target", "result", "note"])
        for r in ROWS:
            wr.writerow([r["workload"], r["contender"],
                         "" if r["median"] is None else "%.4g" % r["median"], r["unit"],
                         "" if r["vs_pgm"] is None else "%.3f" % r["vs_pgm"],
                         "" if r["vs_floor"] is None else "%.3f" % r["vs_floor"],
                         r["target"], r["status"], r["note"]])
    with open(txt_path, "w") as f:
        f.write(text)
    say("wrote %s and %s" % (os.path.relpath(csv_path, SRC), os.path.relpath(txt_path, SRC)))
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, psycopg2.Error) as e:
        print("bench: error: %s" % e, file=sys.stderr)
        sys.exit(1)
