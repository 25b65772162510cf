"""batch_clients: what mc_set_multi, mc_touch_multi and mc_delete_multi
write, the real clients read, key for key and byte for byte.

Two foreign servers over the same three memcacheds: distribution 'ketama'
(read back by pylibmc with libmemcached's ketama) and 'dalli' (read back by
Ruby Dalli, test/compat/dalli_rw.rb).  For each, 1,000 generated keys
(ASCII, ':'-heavy, UTF-8, and for Dalli keys with spaces: see clientkeys)
with values of 0 bytes to 100 kB (UTF-8, CR LF, tabs, protocol-looking
lines), plus the first 100 keys again with other values (a duplicate is
sent once and its last value wins):

1. one mc_set_multi stores 1,000 keys; the client reads every one with the
   expected bytes, and asked directly (mg, no client routing) each key is
   on exactly one instance with no expiry;
2. one mc_touch_multi of '1 hour' touches 1,000; asked directly, every key
   now expires in about an hour;
3. one mc_delete_multi deletes 1,000; the client finds none, nor does mg.

A key routed differently from the client lands where the client does not
look, so a routing difference shows up as missing keys; a value framed
wrongly shows up as wrong bytes.
"""

import random

import pylibmc

import clientkeys
import mcdb
import mcrig

NKEYS = 1000
NDUP = 100

t = mcrig.TAP()
ms = [mcrig.start_memcached("-t", "1") for _ in range(3)]
ports = [m.port for m in ms]
specs = ["127.0.0.1:%d" % p for p in ports]
db = mcdb.Database("mcfdw_it_batch_clients")
c = db.connect()


def gen_values(seed, n):
    """n text values: empty, short, UTF-8, with CR LF and tabs, lines that
    look like replies, and a few of 20 to 100 kB."""
    rng = random.Random(seed)
    pieces = ["a", "xyz", "\u00e9t\u00e9", "\u65e5\u672c", "\U0001f600", "\r\n", "\t",
              "END\r\n", "VA 3 \r\n", "HD\r\n", " ", "0"]
    out = []
    for i in range(n):
        kind = rng.randrange(10)
        if kind == 0:
            v = ""
        elif kind == 9 and rng.randrange(5) == 0:
            v = "".join(rng.choice(pieces) for _ in range(rng.randint(4000, 20000)))
        else:
            v = "v%d:" % i + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 300)))
        out.append(v)
    return out


def client_read(family, keys):
    """{key bytes: value bytes} of every key the client finds."""
    found = {}
    if family == "dalli":
        for line in clientkeys.dalli("read", specs, keys, hex_values=True).splitlines():
            hk, hv = line.split("\t", 1)
            found[bytes.fromhex(hk)] = bytes.fromhex(hv)
    else:
        cl = pylibmc.Client(specs, behaviors={"ketama": True})
        for i in range(0, len(keys), 500):
            for k, v in cl.get_multi(keys[i:i + 500]).items():
                found[k] = v if isinstance(v, bytes) else v.encode()
        cl.disconnect_all()
    return found


def case(label, family, dist, seed):
    name = "bc_" + family
    db.server(c, name, ",".join(specs), distribution=dist)
    keys = clientkeys.gen_keys(seed, NKEYS, spaces=(family == "dalli"))
    values = gen_values(seed, NKEYS)
    # the first NDUP keys again, later in the array: their last value wins
    again = ["again:%d:" % i + values[i] for i in range(NDUP)]
    want = {k: (again[i] if i < NDUP else values[i]).encode() for i, k in enumerate(keys)}
    skeys = [k.decode() for k in keys]
    clientkeys.flush(ms)

    # 1. set: the client reads every key, byte for byte
    n = db.value(c, "SELECT mc_set_multi(%s::text[], %s::text[], server => %s)",
                 (skeys + skeys[:NDUP], values + again, name))
    found = client_read(family, keys)
    missing = [k for k in keys if k not in found]
    wrong = [k for k in keys if k in found and found[k] != want[k]]
    t.ok(n == NKEYS and not missing and not wrong,
         "%s: mc_set_multi stores %d keys, the client reads each one byte for byte" % (label, NKEYS),
         "mc_set_multi returned %s; client missing %d, wrong value %d" % (n, len(missing), len(wrong)),
         "e.g. %r" % [(k, found.get(k, b"")[:60], want[k][:60]) for k in (missing or wrong)[:3]])
    ttls = clientkeys.meta_ttls(ports, keys)
    odd = [k for k in keys if ttls.get(k) != -1]
    t.ok(len(ttls) == NKEYS and not odd,
         "%s: asked directly, each key is on one instance, with no expiry" % label,
         "found %d keys; not once with t-1: %d, e.g. %r"
         % (len(ttls), len(odd), [(k, ttls.get(k)) for k in odd[:3]]))

    # 2. touch: every key gets the new ttl
    n = db.value(c, "SELECT mc_touch_multi(%s::text[], '1 hour', server => %s)", (skeys, name))
    ttls = clientkeys.meta_ttls(ports, keys)
    odd = [k for k in keys if ttls.get(k) is None or not 3500 <= ttls[k] <= 3600]
    t.ok(n == NKEYS and len(ttls) == NKEYS and not odd,
         "%s: mc_touch_multi touches %d keys; each now expires in an hour" % (label, NKEYS),
         "mc_touch_multi returned %s; found %d; ttl not ~3600: %d, e.g. %r"
         % (n, len(ttls), len(odd), [(k, ttls.get(k)) for k in odd[:3]]))

    # 3. delete: the client finds none
    n = db.value(c, "SELECT mc_delete_multi(%s::text[], server => %s)", (skeys, name))
    found = client_read(family, keys)
    left = clientkeys.meta_ttls(ports, keys)
    t.ok(n == NKEYS and not found and not left,
         "%s: mc_delete_multi deletes %d keys; the client finds none" % (label, NKEYS),
         "mc_delete_multi returned %s; the client finds %d, mg finds %d" % (n, len(found), len(left)))
    db.sql(c, 'DROP SERVER "%s"' % name)


for i, (label, family, dist) in enumerate([("pylibmc ketama, 3 servers", "pylibmc", "ketama"),
                                          ("dalli, 3 servers", "dalli", "dalli")]):
    try:
        case(label, family, dist, seed=200 + i)
    except Exception as e:  # noqa: BLE001 - one broken case must not hide the other
        t.ok(False, label, repr(e))
        c.rollback()

c.close()
t.done()
