"""ring_clients: mcfdw reads what the real clients wrote, and the real
clients read what mcfdw wrote, key for key, on multi-server rings.

For each client family (Ruby Dalli; pylibmc on libmemcached in its ketama
and modula settings) and ring (1 to 16 servers, weighted or not, with a
Dalli namespace), the client stores generated keys (ASCII, ':'-heavy,
UTF-8, and for Dalli, keys with spaces), then one mc_get_multi over a
foreign server with the same server list and distribution must return every
key with its value; then mcfdw stores keys with mc_set and the client must
find them all.  Two Dalli rings also get keys of 251 to 600 characters,
which Dalli stores under a digest (the foreign server has long_keys
'dalli').  A key routed differently lands on a server where the other
side does not look, so any routing difference shows up as missing keys.
"""

import pylibmc

import clientkeys
import mcdb
import mcrig

NKEYS = 1500

t = mcrig.TAP()
servers = [mcrig.start_memcached("-t", "1") for _ in range(16)]
db = mcdb.Database("mcfdw_it_ring_clients")
c = db.connect()


def mcfdw_server(name, specs, dist, prefix=None, long_keys=False):
    opts = {"distribution": dist}
    if prefix is not None:
        opts["key_prefix"] = prefix
    if long_keys:
        opts["long_keys"] = "dalli"
    db.server(c, name, ",".join(specs), **opts)


def mcfdw_read(name, keys):
    """Rows of one mc_get_multi over all keys: {key bytes: value}."""
    cur = c.cursor()
    cur.execute("SELECT key, value FROM mc_get_multi(%s::text[], %s)",
                ([k.decode() for k in keys], name))
    return {k.encode(): v for k, v in cur.fetchall()}


def mcfdw_write(name, keys, tag):
    cur = c.cursor()
    cur.execute("SELECT count(*) FILTER (WHERE mc_set(k, %s || k, server => %s)) "
                "FROM unnest(%s::text[]) k", (tag, name, [k.decode() for k in keys]))
    return cur.fetchone()[0]


def case(label, family, ms, weights=None, dist=None, behaviors=None, namespace=None, seed=0,
         long_keys=False):
    specs = ["127.0.0.1:%d" % m.port + ("" if not weights else ":%d" % weights[i])
             for i, m in enumerate(ms)]
    keys = clientkeys.gen_keys(seed, NKEYS, spaces=(family == "dalli"), long=long_keys)
    name = "rc_%d" % seed
    mcfdw_server(name, specs, dist, prefix=(namespace + ":") if namespace else None,
                 long_keys=long_keys)

    # 1. the client writes, mcfdw reads
    clientkeys.flush(ms)
    if family == "dalli":
        stored = int(clientkeys.dalli("write", specs, keys, namespace))
        want = {k: "dalli:" + k.hex() for k in keys}
    else:
        cl = pylibmc.Client(specs, behaviors=behaviors or {})
        stored = sum(1 for k in keys if cl.set(k, b"py:" + k))
        want = {k: "py:" + k.decode() for k in keys}
    got = mcfdw_read(name, keys)
    missing = [k for k in keys if k not in got]
    wrong = [k for k in keys if k in got and got[k] != want[k]]
    t.ok(stored == len(keys) and not missing and not wrong,
         "%s: mcfdw reads all %d keys the client wrote" % (label, len(keys)),
         "stored %d, missing %d, wrong value %d" % (stored, len(missing), len(wrong)),
         "e.g. %r" % (missing[:3] or wrong[:3]))

    # 2. mcfdw writes, the client reads
    clientkeys.flush(ms)
    n = mcfdw_write(name, keys, "pg:")
    if family == "dalli":
        found = {}
        for line in clientkeys.dalli("read", specs, keys, namespace).splitlines():
            hx, v = line.split("\t", 1)
            found[bytes.fromhex(hx)] = v
    else:
        cl = pylibmc.Client(specs, behaviors=behaviors or {})
        found = {}
        for i in range(0, len(keys), 500):
            for k, v in cl.get_multi(keys[i:i + 500]).items():
                found[k] = v.decode() if isinstance(v, bytes) else v
    missing = [k for k in keys if k not in found]
    wrong = [k for k in keys if k in found and found[k] != "pg:" + k.decode()]
    t.ok(n == len(keys) and not missing and not wrong,
         "%s: the client reads all %d keys mcfdw wrote" % (label, len(keys)),
         "stored %d, missing %d, wrong value %d" % (n, len(missing), len(wrong)),
         "e.g. %r" % (missing[:3] or wrong[:3]))
    db.sql(c, 'DROP SERVER "%s"' % name)


S = servers
K = {"ketama": True}
cases = [
    ("dalli, 1 server", "dalli", S[:1], None, "dalli", None, None),
    ("dalli, 2 servers", "dalli", S[:2], None, "dalli", None, None),
    ("dalli, 3 servers", "dalli", S[:3], None, "dalli", None, None),
    ("dalli, 4 servers", "dalli", S[:4], None, "dalli", None, None),
    ("dalli, 16 servers", "dalli", S[:16], None, "dalli", None, None),
    ("dalli, weighted 3:1:2:1", "dalli", S[:4], [3, 1, 2, 1], "dalli", None, None),
    ("dalli, namespace 'app'", "dalli", S[:4], None, "dalli", None, "app"),
    ("pylibmc ketama, 1 server", "pylibmc", S[:1], None, "ketama", K, None),
    ("pylibmc ketama, 2 servers", "pylibmc", S[:2], None, "ketama", K, None),
    ("pylibmc ketama, 3 servers", "pylibmc", S[:3], None, "ketama", K, None),
    ("pylibmc ketama, 4 servers", "pylibmc", S[:4], None, "ketama", K, None),
    ("pylibmc ketama, 16 servers", "pylibmc", S[:16], None, "ketama", K, None),
    ("pylibmc ketama, weighted 2:1:1", "pylibmc", S[:3], [2, 1, 1], "ketama", K, None),
    ("pylibmc ketama, weighted 3:1:2:1", "pylibmc", S[:4], [3, 1, 2, 1], "ketama", K, None),
    ("pylibmc ketama + md5 hash, 4 servers", "pylibmc", S[:4], None, "ketama_md5",
     {"ketama": True, "hash": "md5"}, None),
    ("pylibmc ketama_weighted, 4 servers", "pylibmc", S[:4], None, "ketama_weighted",
     {"ketama_weighted": True}, None),
    ("pylibmc ketama_weighted, weighted 3:1:2:1", "pylibmc", S[:4], [3, 1, 2, 1],
     "ketama_weighted", {"ketama_weighted": True}, None),
    ("pylibmc consistent weighted, 4 servers", "pylibmc", S[:4], None, "ketama_weighted_oat",
     {"distribution": "consistent weighted"}, None),
    ("pylibmc modula (default), 3 servers", "pylibmc", S[:3], None, "modula", {}, None),
    ("pylibmc modula (default), 4 servers", "pylibmc", S[:4], None, "modula", {}, None),
]
for i, (label, fam, ms, w, dist, beh, ns) in enumerate(cases):
    try:
        case(label, fam, ms, weights=w, dist=dist, behaviors=beh, namespace=ns, seed=i)
    except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
        t.ok(False, label, repr(e))
        c.rollback()

# keys over 250 characters: Dalli digests them, mcfdw must too (long_keys)
long_cases = [
    ("dalli, long keys, 4 servers", S[:4], None),
    ("dalli, long keys, namespace 'app', 3 servers", S[:3], "app"),
]
for i, (label, ms, ns) in enumerate(long_cases):
    try:
        case(label, "dalli", ms, dist="dalli", namespace=ns, seed=100 + i, long_keys=True)
    except Exception as e:  # noqa: BLE001
        t.ok(False, label, repr(e))
        c.rollback()

c.close()
t.done()
