"""app_values: values as the application tier writes them, read and
written by mcfdw byte for byte, with each real client on the other side.

Dalli (ruby-dalli 3.0.6, compress: true at its 4 KB default, namespace
"app"), pylibmc (min_compress_len) and pymemcache (3.5.2 has no
compression serde of its own: the test uses the few lines an application
writes around pymemcache.serde's FLAG_COMPRESSED) each store text and
binary values on both sides of their compression threshold; mcfdw reads
every value (mc_get_multi_bytea, mc_get_bytea, and mc_get for text) over a
foreign server with the matching options; then mcfdw writes new values
(mc_set, mc_set_multi) and the client reads every one.  Serialized objects
(Ruby Marshal, Python pickle) are refused as text with SQLSTATE 42804 and
read as their bytes; JSON written through Dalli's serializer reads as
jsonb.
"""

import os
import random
import subprocess
import zlib

import psycopg2
import pylibmc
from pymemcache import serde
from pymemcache.client.base import Client as PymemcacheClient

import mcdb
import mcrig

HERE = os.path.dirname(os.path.abspath(__file__))
DALLI = os.path.join(HERE, "..", "compat", "dalli_values.rb")
RUBY = os.environ.get("RUBY", "ruby")
SIZES = [1, 100, 4095, 4096, 4097, 8192, 65536, 300000]
WORDS = ["cache", "row", "\u00e9t\u00e9", "\u65e5\u672c", "json", "42", "{", "}", " ", "\n"]

t = mcrig.TAP()
m = mcrig.start_memcached("-t", "1")
spec = "127.0.0.1:%d" % m.port
db = mcdb.Database("mcfdw_it_app_values")
c = db.connect()
c.cursor().execute("SET bytea_output = 'hex'")


def text_value(rng, n):
    """About n bytes of compressible UTF-8 text."""
    out = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w.encode())
    return "".join(out).encode()[:n].decode("utf-8", "ignore")


def values(seed, prefix):
    rng = random.Random(seed)
    out = {}
    for n in SIZES:
        out["%s:t:%d" % (prefix, n)] = text_value(rng, n).encode()
        out["%s:b:%d" % (prefix, n)] = rng.randbytes(n)
    return out


def server(name, **opts):
    db.server(c, name, spec, **opts)


def read_multi(name, keys):
    cur = c.cursor()
    cur.execute("SELECT key, value FROM mc_get_multi_bytea(%s::text[], %s)", (keys, name))
    return {k: bytes(v) for k, v in cur.fetchall()}


def read_each(name, keys):
    cur = c.cursor()
    got = {}
    for k in keys:
        cur.execute("SELECT mc_get_bytea(%s, %s)", (k, name))
        v = cur.fetchone()[0]
        if v is not None:
            got[k] = bytes(v)
    return got


def read_text(name, keys):
    cur = c.cursor()
    got = {}
    for k in keys:
        cur.execute("SELECT mc_get(%s, %s)", (k, name))
        got[k] = cur.fetchone()[0]
    return got


def raw_flags(name, keys):
    cur = c.cursor()
    cur.execute("SELECT k, (mc_get_raw(k, %s)).flags FROM unnest(%s::text[]) k", (name, keys))
    return dict(cur.fetchall())


def compare(label, want, got):
    missing = [k for k in want if k not in got]
    wrong = [k for k in want if k in got and got[k] != want[k]]
    t.ok(not missing and not wrong, "%s: all %d values, byte for byte" % (label, len(want)),
         "missing %s, wrong %s" % (missing[:5], wrong[:5]))


def mcfdw_write(name, vals, multi):
    cur = c.cursor()
    keys = sorted(vals)
    if multi:
        cur.execute("SELECT mc_set_multi(%s::text[], %s::bytea[], server => %s)",
                    (keys, [psycopg2.Binary(vals[k]) for k in keys], name))
        return cur.fetchone()[0]
    n = 0
    for k in keys:
        cur.execute("SELECT mc_set(%s, %s::bytea, server => %s)", (k, psycopg2.Binary(vals[k]), name))
        n += cur.fetchone()[0]
    return n


def sqlstate(query, args):
    cur = c.cursor()
    try:
        cur.execute(query, args)
        return None
    except psycopg2.Error as e:
        return e.pgcode


def dalli(mode, lines, *extra):
    r = subprocess.run([RUBY, DALLI, mode, "--namespace", "app"] + list(extra) + [spec],
                       input="".join(" ".join(x.hex() for x in line) + "\n" for line in lines),
                       capture_output=True, text=True, timeout=300, check=True)
    return r.stdout


# ---- Dalli: flag 2, Marshal flag 1, namespace "app", 4 KB threshold ----------
server("dalli", key_prefix="app:", compression="zlib", compressed_flag="2",
       serialized_flag="1")
vals = values(1, "d")
keys = sorted(vals)
stored = int(dalli("write", [(k.encode(), v) for k, v in vals.items()]))
t.is_(stored, len(vals), "Dalli stored every value")
flags = raw_flags("dalli", keys)
t.ok(all((flags[k] & 2 != 0) == (len(vals[k]) >= 4096) for k in keys),
     "Dalli compressed exactly the values of 4096 bytes and more", str(flags))
compare("Dalli wrote, mc_get_multi_bytea read", vals, read_multi("dalli", keys))
compare("Dalli wrote, mc_get_bytea read", vals, read_each("dalli", keys))
texts = [k for k in keys if ":t:" in k]
compare("Dalli wrote, mc_get read the text values",
        {k: vals[k].decode() for k in texts}, read_text("dalli", texts))

vals2 = values(2, "d")
t.is_(mcfdw_write("dalli", {k: v for k, v in vals2.items() if ":t:" in k}, False)
      + mcfdw_write("dalli", {k: v for k, v in vals2.items() if ":b:" in k}, True),
      len(vals2), "mcfdw stored every value (mc_set, mc_set_multi)")
flags = raw_flags("dalli", keys)
t.ok(all((flags[k] & 2 != 0) == (len(vals2[k]) >= 4096 and ":t:" in k) for k in keys),
     "mcfdw compressed the compressible values of 4096 bytes and more", str(flags))
got = {}
for line in dalli("read", [(k.encode(),) for k in keys]).split("\n"):
    if line and not line.endswith(" -"):
        k, v = line.split(" ")
        got[bytes.fromhex(k).decode()] = bytes.fromhex(v)
compare("mcfdw wrote, Dalli read", vals2, got)

# Marshal: flag 1 (and 2 when compressed): bytes, never text
marshal = {"d:m:small": "caf\u00e9".encode(), "d:m:big": text_value(random.Random(3), 10000).encode()}
dumps = {}
for line in dalli("write_marshal", [(k.encode(), v) for k, v in marshal.items()]).split("\n"):
    if line:
        k, v = line.split(" ")
        dumps[bytes.fromhex(k).decode()] = bytes.fromhex(v)
t.is_(raw_flags("dalli", sorted(marshal)), {"d:m:small": 1, "d:m:big": 3},
      "Dalli's Marshal values carry flag 1 (3 when compressed)")
compare("Dalli's Marshal dumps read as bytes", dumps, read_each("dalli", sorted(marshal)))
t.is_([sqlstate("SELECT mc_get(%s, 'dalli')", (k,)) for k in sorted(marshal)], ["42804", "42804"],
      "mc_get refuses a Marshal dump: 42804")

# serializer: JSON sets flag 1 too: a server without serialized_flag reads it as jsonb
server("dalli_json", key_prefix="app:", compression="zlib", compressed_flag="2")
jvals = {"d:j:%d" % n: text_value(random.Random(n), n).encode() for n in (10, 5000)}
t.is_(int(dalli("write_json", [(k.encode(), v) for k, v in jvals.items()])), 2,
      "Dalli stored two JSON values")
cur = c.cursor()
cur.execute("SELECT k, mc_get(k, 'dalli_json')::jsonb ->> 'hex' FROM unnest(%s::text[]) k",
            (sorted(jvals),))
compare("Dalli's JSON read as jsonb", jvals, {k: bytes.fromhex(h) for k, h in cur.fetchall()})

# ---- pylibmc: flag 8, text 0x10, pickle 1 --------------------------------------
server("py", compression="zlib", compressed_flag="8", serialized_flag="1",
       compress_threshold="100")
pl = pylibmc.Client([spec])
pvals = values(4, "p")
pkeys = sorted(pvals)
stored = 0
for k, v in pvals.items():
    # text as str (pylibmc: flag 0x10), binary as bytes
    stored += bool(pl.set(k, v.decode() if ":t:" in k else v, min_compress_len=100))
t.is_(stored, len(pvals), "pylibmc stored every value")
flags = raw_flags("py", pkeys)
t.ok(all(flags[k] & 8 for k in pkeys if ":t:" in k and len(pvals[k]) >= 100)
     and not any(flags[k] & 8 for k in pkeys if len(pvals[k]) < 100),
     "pylibmc compressed its text values of 100 bytes and more, no shorter one", str(flags))
t.ok(all(flags[k] & 16 for k in pkeys if ":t:" in k), "pylibmc marked str values 0x10")
compare("pylibmc wrote, mc_get_multi_bytea read", pvals, read_multi("py", pkeys))
ptexts = [k for k in pkeys if ":t:" in k]
compare("pylibmc wrote, mc_get read the str values",
        {k: pvals[k].decode() for k in ptexts}, read_text("py", ptexts))

pvals2 = values(5, "p")
t.is_(mcfdw_write("py", pvals2, True), len(pvals2), "mcfdw stored every value (mc_set_multi)")
got = {k: pl.get(k) for k in pkeys}
compare("mcfdw wrote, pylibmc read", pvals2, got)
# text for pylibmc's str: flag 16 asked for, 8 added when compressed
cur.execute("SELECT mc_set(%s, %s, flags => 16, server => 'py')", ("p:str", "\u00e9t\u00e9 " * 100))
t.is_(pl.get("p:str"), "\u00e9t\u00e9 " * 100, "mcfdw's text with flags 16 reads as a str in pylibmc")
t.is_(raw_flags("py", ["p:str"])["p:str"], 24, "... stored with flags 16 | 8")
pl.set("p:pickle", {"a": [1, 2]})
t.is_(sqlstate("SELECT mc_get(%s, 'py')", ("p:pickle",)), "42804", "mc_get refuses a pickle: 42804")
cur.execute("SELECT mc_get_bytea('p:pickle', 'py')")
t.ok(bytes(cur.fetchone()[0])[:1] == b"\x80", "mc_get_bytea returns the pickle's bytes")


# ---- pymemcache: FLAG_COMPRESSED (8) around its own serde ------------------------
class ZlibSerde:
    """What an application adds to pymemcache 3.5.2 for compression."""

    def __init__(self, min_len):
        self.min_len = min_len

    def serialize(self, key, value):
        data, flags = serde.python_memcache_serializer(key, value)
        if len(data) >= self.min_len:
            data, flags = zlib.compress(data), flags | serde.FLAG_COMPRESSED
        return data, flags

    def deserialize(self, key, value, flags):
        if flags & serde.FLAG_COMPRESSED:
            value, flags = zlib.decompress(value), flags & ~serde.FLAG_COMPRESSED
        return serde.python_memcache_deserializer(key, value, flags)


pm = PymemcacheClient(("127.0.0.1", m.port), serde=ZlibSerde(100))
yvals = values(6, "y")
ykeys = sorted(yvals)
stored = sum(1 for k, v in yvals.items() if pm.set(k, v.decode() if ":t:" in k else v, noreply=False))
t.is_(stored, len(yvals), "pymemcache stored every value")
flags = raw_flags("py", ykeys)
t.ok(all((flags[k] & 8 != 0) == (len(yvals[k]) >= 100) for k in ykeys),
     "pymemcache's serde compressed values of 100 bytes and more", str(flags))
compare("pymemcache wrote, mc_get_multi_bytea read", yvals, read_multi("py", ykeys))
compare("pymemcache wrote, mc_get read the str values",
        {k: yvals[k].decode() for k in ykeys if ":t:" in k},
        read_text("py", [k for k in ykeys if ":t:" in k]))
yvals2 = values(7, "y")
t.is_(mcfdw_write("py", yvals2, False), len(yvals2), "mcfdw stored every value (mc_set)")
compare("mcfdw wrote, pymemcache read", yvals2, {k: pm.get(k) for k in ykeys})

# ---- compression_level '1': mcfdw's fastest deflate, read by every client ------
server("dalli_l1", key_prefix="app:", compression="zlib", compressed_flag="2",
       serialized_flag="1", compression_level="1")
vals3 = values(8, "d")
t.is_(mcfdw_write("dalli_l1", {k: v for k, v in vals3.items() if ":t:" in k}, False)
      + mcfdw_write("dalli_l1", {k: v for k, v in vals3.items() if ":b:" in k}, True),
      len(vals3), "mcfdw stored every value at compression_level 1 (mc_set, mc_set_multi)")
cur.execute("SELECT DISTINCT substr(r.value, 1, 2) FROM unnest(%s::text[]) k, mc_get_raw(k, 'dalli_l1') r "
            "WHERE r.flags & 2 <> 0", (sorted(vals3),))
hdrs = {bytes(r[0]) for r in cur.fetchall()}
t.ok(hdrs == {b"\x78\x01"}, "the level-1 values carry zlib's level-1 header (78 01)", str(hdrs))
got = {}
for line in dalli("read", [(k.encode(),) for k in sorted(vals3)]).split("\n"):
    if line and not line.endswith(" -"):
        k, v = line.split(" ")
        got[bytes.fromhex(k).decode()] = bytes.fromhex(v)
compare("mcfdw wrote at level 1, Dalli read", vals3, got)

server("py_l1", compression="zlib", compressed_flag="8", serialized_flag="1",
       compress_threshold="100", compression_level="1")
pvals3 = values(9, "p")
t.is_(mcfdw_write("py_l1", pvals3, True), len(pvals3), "mcfdw stored every value at level 1 (mc_set_multi)")
compare("mcfdw wrote at level 1, pylibmc read", pvals3, {k: pl.get(k) for k in sorted(pvals3)})
yvals3 = values(10, "y")
t.is_(mcfdw_write("py_l1", yvals3, False), len(yvals3), "mcfdw stored every value at level 1 (mc_set)")
compare("mcfdw wrote at level 1, pymemcache read", yvals3, {k: pm.get(k) for k in sorted(yvals3)})

m.stop()
t.done()
