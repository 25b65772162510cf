#!/usr/bin/python3
"""ring_compat.py — prove src/core/ring.c routes keys where the real clients do.

For each case this starts from empty memcached servers, writes a few
thousand generated keys with the real client (Ruby Dalli 3.x for "dalli",
pylibmc on libmemcached for the ketama variants and modula), asks every
server directly which keys it holds, and compares that with what ringtool
(test/unit/ringtool.c over src/core/ring.c, src/core/dalli_key.c and src/core/hash.c) says.  Every key must
be found on exactly the server ringtool names; for Dalli the stored key must
also equal mc_dalli_route_key's output.  One TAP point per case.

Run with Debian's python (pylibmc lives there):
    /usr/bin/python3 test/integration/ring_compat.py
Environment: MCFDW_RINGTOOL=path uses a prebuilt ringtool instead of
compiling one with $CC (default gcc); MEMCACHED=path overrides
/usr/bin/memcached; RUBY=path overrides ruby.

The servers are our own children on free loopback ports (plus, when port
11211 is free on 127.0.0.2-4, three more there, because ketama names points
without the port on 11211); all are killed at exit, also on failure.
"""

import atexit
import base64
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import pylibmc
except ImportError:  # pragma: no cover - environment problem, not a test
    print("1..0 # SKIP pylibmc not importable (use /usr/bin/python3)")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DALLI_WRITER = os.path.join(ROOT, "test", "compat", "dalli_write.rb")
MEMCACHED = os.environ.get("MEMCACHED", "/usr/bin/memcached")
RUBY = os.environ.get("RUBY", "ruby")
NKEYS = 3000

_procs = []
_tmpdir = tempfile.mkdtemp(prefix="ring_compat.")
_tap_count = 0
_tap_failed = 0


# --------------------------------------------------------------- TAP
def tap_ok(cond, name):
    global _tap_count, _tap_failed
    _tap_count += 1
    if not cond:
        _tap_failed += 1
    print("%sok %d - %s" % ("" if cond else "not ", _tap_count, name), flush=True)
    return cond


def diag(msg):
    for line in str(msg).splitlines():
        print("# " + line, flush=True)


# ----------------------------------------------------------- servers
def cleanup():
    for p in _procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.time() + 3
    for p in _procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    _procs.clear()
    shutil.rmtree(_tmpdir, ignore_errors=True)


def _on_signal(signum, frame):
    cleanup()
    sys.exit(128 + signum)


atexit.register(cleanup)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def free_port(host="127.0.0.1"):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_memcached(host, port):
    """Start one memcached in the foreground as our child; True once it accepts."""
    args = [MEMCACHED, "-l", host, "-p", str(port), "-U", "0", "-m", "64",
            "-t", "1", "-c", "128"]
    if os.geteuid() == 0:
        args += ["-u", "nobody"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _procs.append(p)
    deadline = time.time() + 5
    while time.time() < deadline:
        if p.poll() is not None:
            return False
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


def start_servers(n):
    ports = []
    while len(ports) < n:
        port = free_port()
        if start_memcached("127.0.0.1", port):
            ports.append(port)
    return ports


# ---------------------------------------------------------- ringtool
def build_ringtool():
    pre = os.environ.get("MCFDW_RINGTOOL")
    if pre:
        return pre
    exe = os.path.join(_tmpdir, "ringtool")
    cc = os.environ.get("CC", "gcc")
    subprocess.run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-I" + os.path.join(ROOT, "src/core"), "-o", exe,
                    os.path.join(ROOT, "test/unit/ringtool.c"),
                    os.path.join(ROOT, "src/core/ring.c"),
                    os.path.join(ROOT, "src/core/dalli_key.c"),
                    os.path.join(ROOT, "src/core/hash.c")], check=True)
    return exe


def ringtool(tool, dist, specs, keys, extra=()):
    """Per key: (routed key bytes, server index) as src/core/ring.c computes them."""
    args = [tool, "-x", "-k"] + list(extra) + [dist] + specs
    inp = "".join(k.hex() + "\n" for k in keys)
    out = subprocess.run(args, input=inp, capture_output=True, text=True, check=True).stdout
    res = []
    for line in out.splitlines():
        hexkey, idx = line.split("\t")
        res.append((bytes.fromhex(hexkey), int(idx)))
    if len(res) != len(keys):
        raise RuntimeError("ringtool returned %d lines for %d keys" % (len(res), len(keys)))
    return res


# ------------------------------------------------------ server probes
def _rpc(host, port, payload, nreplies):
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(payload)
        f = s.makefile("rb")
        return [f.readline() for _ in range(nreplies)]
    finally:
        s.close()


def flush(addrs):
    for host, port in addrs:
        if _rpc(host, port, b"flush_all\r\n", 1)[0] != b"OK\r\n":
            raise RuntimeError("flush_all failed on %s:%d" % (host, port))


def mg_line(key):
    """A meta get for key: raw when the text protocol can carry it, else base64.

    memcached limits the base64 form to 250 characters too, so raw is the
    only way to probe long keys; gen_keys never makes keys needing base64.
    """
    if all(0x20 < c != 0x7f for c in key):
        return b"mg " + key + b"\r\n"
    return b"mg " + base64.b64encode(key) + b" b\r\n"


def holders(addrs, keys):
    """For each key, the list of server indices that hold it (meta mg, pipelined)."""
    found = [[] for _ in keys]
    for i, (host, port) in enumerate(addrs):
        if port is None:
            continue                        # a dead server of a failover case
        payload = b"".join(mg_line(k) for k in keys) + b"mn\r\n"
        replies = _rpc(host, port, payload, len(keys) + 1)
        if replies[-1] != b"MN\r\n":
            raise RuntimeError("unexpected probe reply from %s:%d" % (host, port))
        for j, r in enumerate(replies[:-1]):
            if r.startswith(b"HD"):
                found[j].append(i)
            elif not r.startswith(b"EN"):
                raise RuntimeError("probe reply %r" % r)
    return found


# ------------------------------------------------------------- keys
UNI = ["\u00e9", "\u00f1", "\u00fc", "\u00df", "\u03a9", "\u65e5", "\u672c",
       "\u8a9e", "\U0001f600", "\u20ac"]
ASCII = [chr(c) for c in range(0x21, 0x7f)]
RAW = [c for c in range(0x21, 0x100) if c != 0x7f]


def gen_keys(seed, n, long_keys=False, ns_safe=False, raw_bytes=False):
    """Deterministic mix: ids with ':', random ASCII, UTF-8, long-ish keys.

    long_keys adds Dalli keys over 250 characters (digest path): ASCII, and
    UTF-8 ones whose non-ASCII character sits where the kept prefix stays
    within memcached's 250-byte limit.  raw_bytes adds keys with arbitrary
    bytes 0x21-0xff (invalid UTF-8 included).  No key has whitespace or
    control characters, which the text protocol cannot carry.
    """
    rng = random.Random(seed)
    keys, seen = [], set()
    while len(keys) < n:
        i = len(keys)
        kind = rng.randrange(10 if (long_keys or raw_bytes) else 8)
        if kind == 0:
            k = "user:%d" % i
        elif kind == 1:
            k = "%s:%d:%s" % (rng.choice(["cart", "sess", "a:b", "x"]), i, rng.random())
        elif kind == 2:
            k = "".join(rng.choice(ASCII) for _ in range(rng.randint(1, 60)))
        elif kind in (3, 4):
            k = "".join(rng.choice(UNI + ASCII[:20]) for _ in range(rng.randint(1, 40)))
        elif kind == 5:
            k = "".join(rng.choice(ASCII) for _ in range(rng.randint(150, 250)))
        elif kind == 6:
            k = "\u00e9t\u00e9:%d:" % i + "".join(rng.choice(ASCII) for _ in range(rng.randint(100, 200)))
        elif kind == 7:
            k = "k%d" % i
        elif kind == 8 and raw_bytes:
            b = bytes(rng.choice(RAW) for _ in range(rng.randint(1, 80)))
            if rng.random() < 0.3:
                b += bytes(rng.randint(0x80, 0xff) for _ in range(rng.randint(200, 300)))
            k = b
        elif long_keys:
            ln = rng.randint(251, 400)
            body = [rng.choice(ASCII) for _ in range(ln)]
            r = rng.random()
            if r < 0.3:
                body[230] = rng.choice(UNI)      # beyond the kept prefix
            elif r < 0.5 and not ns_safe:
                body[5] = "\u00e9"               # 212 chars = 213 bytes kept
            k = "".join(body)
        else:
            k = "misc:%d" % i
        kb = k if isinstance(k, bytes) else k.encode("utf-8")
        if kb in seen or (not long_keys and not raw_bytes and len(kb) > 250):
            continue
        seen.add(kb)
        keys.append(kb)
    return keys


# ------------------------------------------------------------ writers
def write_dalli(specs, keys, namespace=None, binary=False):
    """Store keys with Ruby Dalli; returns [(stored key bytes or None, ok)]."""
    kf = os.path.join(_tmpdir, "keys.hex")
    of = os.path.join(_tmpdir, "dalli.out")
    with open(kf, "w") as f:
        f.writelines(k.hex() + "\n" for k in keys)
    args = [RUBY, DALLI_WRITER, kf, of]
    if namespace is not None:
        args += ["--namespace", namespace]
    if binary:
        args += ["--binary"]
    subprocess.run(args + specs, check=True, timeout=120)
    res = []
    with open(of) as f:
        for line in f:
            hexkey, status = line.rstrip("\n").split("\t", 1)
            res.append((None if hexkey == "?" else bytes.fromhex(hexkey), status == "OK"))
    return res


def write_pylibmc(specs, keys, behaviors, warmup=False):
    c = pylibmc.Client(specs, behaviors=behaviors)
    if warmup:
        # let auto-eject notice the dead server before the measured writes
        for i in range(100):
            try:
                c.set(b"warmup:%d" % i, b"v")
            except pylibmc.Error:
                pass
    res = []
    for k in keys:
        try:
            res.append((k, bool(c.set(k, b"v"))))
        except pylibmc.Error:
            res.append((k, False))
    c.disconnect_all()
    return res


# -------------------------------------------------------------- cases
def spec(host, port, weight):
    return "%s:%d" % (host, port) + ("" if weight is None else ":%d" % weight)


def run_case(tool, name, client, dist, addrs, weights=None, seed=1,
             behaviors=None, namespace=None, binary=False, long_keys=False,
             raw_bytes=False, dead=(), ringtool_extra=(), warmup=False):
    """Write with the real client, locate every key, compare with ringtool."""
    t0 = time.time()
    weights = weights or [None] * len(addrs)
    specs = [spec(h, p, w) for (h, p), w in zip(addrs, weights)]
    live_addrs = [(h, None if i in dead else p) for i, (h, p) in enumerate(addrs)]
    flush([a for a in live_addrs if a[1] is not None])
    keys = gen_keys(seed, NKEYS, long_keys=long_keys or client == "dalli",
                    ns_safe=namespace is not None, raw_bytes=raw_bytes)

    extra = list(ringtool_extra)
    if namespace is not None:
        extra += ["-n", namespace]
    if binary:
        extra += ["-b"]
    if dead:
        extra += ["-d", ",".join(str(d) for d in dead)]

    predicted = ringtool(tool, dist, specs, keys, extra)
    # A UTF-8 key of <= 250 characters but more bytes keeps its length and
    # memcached refuses it (the client then marks the server failed and
    # reroutes what follows); such keys test error handling, not routing.
    keep = [i for i, (pk, _) in enumerate(predicted) if len(pk) <= 250]
    dropped = len(keys) - len(keep)
    keys = [keys[i] for i in keep]
    predicted = [predicted[i] for i in keep]

    if client == "dalli":
        written = write_dalli(specs, keys, namespace=namespace, binary=binary)
    else:
        written = write_pylibmc(specs, keys, behaviors, warmup=warmup)
    found = holders(live_addrs, [pk for pk, _ in predicted])

    write_fail = key_diff = mismatch = 0
    examples = []
    for k, (wkey, ok), (pkey, idx), where in zip(keys, written, predicted, found):
        if not ok:
            write_fail += 1
            continue
        if wkey is not None and wkey != pkey:
            key_diff += 1
            if len(examples) < 3:
                examples.append("key %r...: client stored %d bytes ...%r, ring.c routes %d bytes ...%r"
                                % (k[:30], len(wkey), wkey[-45:], len(pkey), pkey[-45:]))
            continue
        if where != [idx]:
            mismatch += 1
            if len(examples) < 3:
                examples.append("key %r: on servers %s, ring.c says %d" % (k[:40], where, idx))
    ok = write_fail == 0 and key_diff == 0 and mismatch == 0
    tap_ok(ok, "%s (%d keys)" % (name, len(keys)))
    diag("%s: mismatches %d, key-transform diffs %d, write failures %d%s, %.1fs"
         % (name, mismatch, key_diff, write_fail,
            (", %d keys over 250 bytes skipped" % dropped) if dropped else "",
            time.time() - t0))
    for e in examples:
        diag(e)
    return ok


def main():
    started = time.time()
    try:
        tool = build_ringtool()
    except (OSError, subprocess.CalledProcessError) as e:
        print("Bail out! cannot build ringtool: %s" % e)
        return 1
    if not os.path.exists(MEMCACHED):
        print("Bail out! %s not found" % MEMCACHED)
        return 1

    ports = start_servers(25)
    a = [("127.0.0.1", p) for p in ports]
    dead_port = free_port()                  # nothing listens here

    # ketama names points "host-i" on 11211: use 127.0.0.2-4 so we never
    # touch a shared memcached on 127.0.0.1:11211
    default_port = [("127.0.0.%d" % i, 11211) for i in (2, 3, 4)]
    have_default = all(start_memcached(h, p) for h, p in default_port)

    K = {"ketama": True}
    cases = [
        # name, client, ringtool dist, servers, kwargs
        ("dalli, 1 server", "dalli", "dalli", a[:1], {}),
        ("dalli, 2 servers", "dalli", "dalli", a[:2], {}),
        ("dalli, 3 servers", "dalli", "dalli", a[:3], {}),
        ("dalli, 4 servers", "dalli", "dalli", a[:4], {}),
        ("dalli, 16 servers", "dalli", "dalli", a[:16], {}),
        ("dalli, weighted 2:1:1", "dalli", "dalli", a[:3], {"weights": [2, 1, 1]}),
        ("dalli, weighted 3:1:2:1", "dalli", "dalli", a[:4], {"weights": [3, 1, 2, 1]}),
        ("dalli, namespace \"app\", 4 servers", "dalli", "dalli", a[:4], {"namespace": "app"}),
        ("dalli, UTF-8 strings with invalid bytes, 3 servers", "dalli", "dalli", a[:3],
         {"raw_bytes": True}),
        ("dalli, binary (ASCII-8BIT) keys, 3 servers", "dalli", "dalli", a[:3],
         {"raw_bytes": True, "binary": True}),
        ("dalli failover, server 1 of 4 down", "dalli", "dalli",
         [a[0], ("127.0.0.1", dead_port), a[1], a[2]], {"dead": (1,)}),

        ("ketama {ketama: True}, 1 server", "pylibmc", "ketama", a[:1], {"behaviors": K}),
        ("ketama {ketama: True}, 2 servers", "pylibmc", "ketama", a[:2], {"behaviors": K}),
        ("ketama {ketama: True}, 3 servers", "pylibmc", "ketama", a[:3], {"behaviors": K}),
        ("ketama {ketama: True}, 4 servers", "pylibmc", "ketama", a[:4], {"behaviors": K}),
        ("ketama {ketama: True}, 16 servers", "pylibmc", "ketama", a[:16], {"behaviors": K}),
        ("ketama {ketama: True}, weighted 2:1:1", "pylibmc", "ketama", a[:3],
         {"behaviors": K, "weights": [2, 1, 1]}),
        ("ketama {ketama: True}, weighted 3:1:2:1", "pylibmc", "ketama", a[:4],
         {"behaviors": K, "weights": [3, 1, 2, 1]}),
        ("ketama {distribution: consistent}, 4 servers", "pylibmc", "ketama", a[:4],
         {"behaviors": {"distribution": "consistent"}}),
        ("ketama-md5 {ketama: True, hash: md5}, 4 servers", "pylibmc", "ketama-md5", a[:4],
         {"behaviors": {"ketama": True, "hash": "md5"}}),
        ("ketama-md5 {ketama: True, hash: md5}, weighted 3:1:2:1", "pylibmc", "ketama-md5", a[:4],
         {"behaviors": {"ketama": True, "hash": "md5"}, "weights": [3, 1, 2, 1]}),
        ("ketama-weighted {ketama_weighted: True}, 4 servers", "pylibmc", "ketama-weighted", a[:4],
         {"behaviors": {"ketama_weighted": True}}),
        ("ketama-weighted {ketama_weighted: True}, 16 servers", "pylibmc", "ketama-weighted", a[:16],
         {"behaviors": {"ketama_weighted": True}}),
        ("ketama-weighted {ketama_weighted: True}, 25 servers (156 points each)", "pylibmc",
         "ketama-weighted", a[:25], {"behaviors": {"ketama_weighted": True}}),
        ("ketama-weighted {ketama_weighted: True}, weighted 3:1:2:1", "pylibmc", "ketama-weighted",
         a[:4], {"behaviors": {"ketama_weighted": True}, "weights": [3, 1, 2, 1]}),
        ("ketama-weighted-oat {distribution: consistent weighted}, 3 servers", "pylibmc",
         "ketama-weighted-oat", a[:3], {"behaviors": {"distribution": "consistent weighted"}}),
        ("ketama auto_eject, server 2 of 4 down (= failover walk)", "pylibmc", "ketama",
         [a[0], a[1], ("127.0.0.1", dead_port), a[2]],
         {"behaviors": {"ketama": True, "auto_eject": True, "failure_limit": 1,
                        "retry_timeout": 60}, "dead": (2,), "warmup": True}),
        ("ketama auto_eject, weighted 1:1:4:1, server 2 down (= mc_ring_build_live)", "pylibmc",
         "ketama", [a[0], a[1], ("127.0.0.1", dead_port), a[2]],
         {"behaviors": {"ketama": True, "auto_eject": True, "failure_limit": 1,
                        "retry_timeout": 60}, "weights": [1, 1, 4, 1], "dead": (2,),
          "warmup": True, "ringtool_extra": ["-L"]}),

        ("modula (pylibmc default), 1 server", "pylibmc", "modula", a[:1], {"behaviors": {}}),
        ("modula (pylibmc default), 2 servers", "pylibmc", "modula", a[:2], {"behaviors": {}}),
        ("modula (pylibmc default), 3 servers", "pylibmc", "modula", a[:3], {"behaviors": {}}),
        ("modula (pylibmc default), 4 servers", "pylibmc", "modula", a[:4], {"behaviors": {}}),
        ("modula (pylibmc default), 16 servers", "pylibmc", "modula", a[:16], {"behaviors": {}}),
    ]
    if have_default:
        cases += [
            ("ketama on port 11211 (\"host-i\" point names), 3 servers", "pylibmc", "ketama",
             default_port, {"behaviors": K}),
            ("ketama on port 11211, weighted 2:1:1", "pylibmc", "ketama", default_port,
             {"behaviors": K, "weights": [2, 1, 1]}),
            ("dalli on port 11211, 3 servers", "dalli", "dalli", default_port, {}),
        ]

    for seed, (name, client, dist, addrs, kw) in enumerate(cases, start=1):
        try:
            run_case(tool, name, client, dist, addrs, seed=seed, **kw)
        except Exception as e:            # one broken case must not hide the rest
            tap_ok(False, name)
            diag("%s: %s: %s" % (name, type(e).__name__, e))
    if not have_default:
        tap_ok(True, "ketama/dalli on port 11211 # SKIP 127.0.0.2-4:11211 not available")

    diag("total %.1fs" % (time.time() - started))
    print("1..%d" % _tap_count, flush=True)
    return 1 if _tap_failed else 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        cleanup()
    sys.exit(rc)
