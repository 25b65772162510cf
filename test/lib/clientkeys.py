"""clientkeys — keys and real clients for the tests that check mcfdw
against Dalli and pylibmc (ring_clients.py, batch_clients.py).

    keys = clientkeys.gen_keys(seed, 1000, spaces=True)   # bytes, distinct
    out = clientkeys.dalli("read", specs, keys)            # test/compat/dalli_rw.rb
    clientkeys.flush(servers)                              # flush_all each
    ttls = clientkeys.meta_ttls(ports, keys)               # {key: ttl} via mg <b64> b t

Keys are bytes of at most 186 bytes (so mcfdw can send any of them, base64
included): ASCII, ':'-heavy, UTF-8, and with spaces=True keys with spaces
(Dalli accepts them; libmemcached does not); with long=True a third are
over 250 characters, which Dalli stores under a digest.
"""

import base64
import os
import random
import socket
import subprocess

import mcrig

DALLI_RW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat", "dalli_rw.rb")
RUBY = os.environ.get("RUBY", "ruby")

UNI = ["\u00e9", "\u00fc", "\u00df", "\u03a9", "\u65e5", "\u672c", "\U0001f600", "\u20ac"]
ASCII = [chr(x) for x in range(0x21, 0x7f)]


def long_key(rng, n):
    """A key over Dalli's 250 characters: a printable ASCII head (what the
    digested name keeps: 212 or 213 characters) and a tail that may hold
    spaces and UTF-8, which the digest hides."""
    head = "views/%d/" % n + "".join(rng.choice(ASCII) for _ in range(rng.randint(250, 400)))
    tail = "".join(rng.choice(UNI + [" ", "/", "x"]) for _ in range(rng.randint(0, 150)))
    return head + tail


def gen_keys(seed, n, spaces=False, long=False):
    """n distinct keys (bytes), reproducible from seed."""
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        if long and rng.randrange(3) == 0:
            kb = long_key(rng, len(out)).encode()
            if kb not in seen:
                seen.add(kb)
                out.append(kb)
            continue
        kind = rng.randrange(6 if spaces else 5)
        if kind == 0:
            k = "user:%d" % len(out)
        elif kind == 1:
            k = "%s:%d:%d" % (rng.choice(["cart", "sess", "a:b"]), len(out), rng.randrange(10**6))
        elif kind == 2:
            k = "".join(rng.choice(ASCII) for _ in range(rng.randint(1, 120)))
        elif kind == 3:
            k = "".join(rng.choice(UNI + ASCII[:30]) for _ in range(rng.randint(1, 40)))
        elif kind == 4:
            k = "k%d" % len(out)
        else:
            k = "with space %d %s" % (len(out), rng.choice(UNI))
        kb = k.encode()
        if len(kb) > 186 or kb in seen:
            continue
        seen.add(kb)
        out.append(kb)
    return out


def flush(ms):
    """flush_all on each of these memcacheds (mcrig.Memcached)."""
    for m in ms:
        mcrig.mc_command(m.port, "flush_all", end=(b"OK\r\n",))


def dalli(mode, specs, keys, namespace=None, hex_values=False):
    """Run test/compat/dalli_rw.rb (write or read) on these servers and keys;
    returns what it printed."""
    args = [RUBY, DALLI_RW, mode] + (["--namespace", namespace] if namespace else []) \
        + (["--hex"] if hex_values else []) + specs
    r = subprocess.run(args, input="".join(k.hex() + "\n" for k in keys),
                       capture_output=True, text=True, timeout=300, check=True)
    return r.stdout


def meta_probe(ports, wire_keys):
    """Ask each of these memcacheds for every key, directly, with one
    pipeline per server of "mg <key> [b] t O<index> q" and "mn", so no
    client's routing is involved.  wire_keys: (key as sent, base64) pairs.
    Yields (index, port, flags) for every key a server holds, flags being
    its reply's {letter: value}."""
    req = b"".join(b"mg %s%s t O%d q\r\n" % (k, b" b" if b64 else b"", i)
                   for i, (k, b64) in enumerate(wire_keys)) + b"mn\r\n"
    for port in ports:
        with socket.create_connection((mcrig.HOST, port), timeout=10) as s:
            s.sendall(req)
            buf = b""
            while not buf.endswith(b"MN\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("memcached on port %d closed the connection" % port)
                buf += chunk
        for line in buf.split(b"\r\n"):
            if not line.startswith(b"HD "):
                if line not in (b"", b"MN"):
                    raise RuntimeError("unexpected reply %r from port %d" % (line[:80], port))
                continue
            flags = {f[:1]: f[1:] for f in line.split()[1:]}
            yield int(flags[b"O"]), port, flags


def meta_ttls(ports, keys):
    """{key: remaining ttl} of every key found on any of these memcacheds
    (-1: no expiry), asked with meta_probe.
    A key found on two servers is reported as None."""
    out = {}
    for i, _port, flags in meta_probe(ports, [(base64.b64encode(k), True) for k in keys]):
        key = keys[i]
        out[key] = None if key in out else int(flags[b"t"])
    return out
