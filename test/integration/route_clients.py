"""route_clients: mc_route names the instance, and the key as sent, where
the real clients put each key.

For each distribution a client supports (Ruby Dalli: dalli; pylibmc on
libmemcached: ketama, ketama_md5, ketama_weighted, ketama_weighted_oat,
modula), on rings of three or four of the rig's memcacheds, the client
stores 1,000 generated keys (for Dalli, keys with spaces, a namespace and
keys over 250 characters, which it stores under a digest); then every
memcached is asked directly which of mc_route's wire keys it holds.  Each
key must be found exactly once, on the host and port mc_route names, under
the wire key it names: all 1,000 choices are compared.  A control checks
that the comparison catches a wrong distribution.

With a closed port in a Dalli ring (failover on, as Dalli's default), the
instance is marked dead by one multi-get, and mc_route's failover_instance
must be where Dalli, finding the port down, stores each key.
"""

import base64

import clientkeys
import mcdb
import mcrig

NKEYS = 1000

t = mcrig.TAP()
ports = mcrig.rig_ports()
db = mcdb.Database("mcfdw_it_route_clients")
c = db.connect()

try:
    import pylibmc
except ImportError:  # pragma: no cover - environment problem
    pylibmc = None


def routes(name, keys):
    """mc_route's rows for keys (bytes): {key: (instance, host, port, routed
    bytes, dead, failover_instance, wire key, base64)}."""
    cur = c.cursor()
    cur.execute("SELECT key, instance, host, port, wire_key, base64, dead, failover_instance "
                "FROM mc_route(%s::text[], %s)", ([k.decode() for k in keys], name))
    out = {}
    for key, inst, host, port, wire, b64, dead, fo in cur.fetchall():
        routed = base64.b64decode(wire) if b64 else wire.encode()
        out[key.encode()] = (inst, host, port, routed, dead, fo, wire, b64)
    return out


def where(mports, rows):
    """{routed key: port} of every key found on one of these memcacheds,
    asked as mcfdw asks (clientkeys.meta_probe with each mc_route row's wire
    key and base64 flag); a key found on two is mapped to None."""
    found = {}
    for i, p, _flags in clientkeys.meta_probe(mports, [(row[6].encode(), row[7]) for row in rows]):
        k = rows[i][3]
        found[k] = None if k in found else p
    return found


def compare(r, keys, found, col):
    """Keys whose location differs from what column col of mc_route names
    (2: the port on the ring; 5: the failover instance, mapped to a port
    by the caller), and keys not found at all."""
    wrong, missing = [], []
    for k in keys:
        row = r[k]
        if row[3] not in found:
            missing.append(k)
        elif found[row[3]] != col(row):
            wrong.append(k)
    return wrong, missing


def client_write(family, specs, keys, behaviors=None, namespace=None):
    if family == "dalli":
        return int(clientkeys.dalli("write", specs, keys, namespace))
    cl = pylibmc.Client(specs, behaviors=behaviors or {})
    return sum(1 for k in keys if cl.set(k, b"py:" + k))


def case(label, family, mports, weights, dist, behaviors=None, namespace=None, seed=0,
         long_keys=False, control=None):
    specs = ["127.0.0.1:%d" % p + ("" if not weights else ":%d" % weights[i])
             for i, p in enumerate(mports)]
    keys = clientkeys.gen_keys(1000 + seed, NKEYS, spaces=(family == "dalli"), long=long_keys)
    name = "rt_%d" % seed
    opts = {"distribution": dist}
    if namespace:
        opts["key_prefix"] = namespace + ":"
    if long_keys:
        opts["long_keys"] = "dalli"
    db.server(c, name, ",".join(specs), **opts)
    r = routes(name, keys)
    for p in mports:
        mcrig.mc_command(p, "flush_all", end=(b"OK\r\n",))
    stored = client_write(family, specs, keys, behaviors, namespace)
    found = where(mports, [r[k] for k in keys])
    wrong, missing = compare(r, keys, found, lambda row: row[2])
    hosts_ok = all(r[k][1] == "127.0.0.1" and specs[r[k][0] - 1].split(":")[1] == str(r[k][2])
                   for k in keys)
    t.ok(stored == len(keys) and len(r) == len(keys) and not wrong and not missing and hosts_ok,
         "%s: mc_route names the instance and wire key of all %d keys the client stored"
         % (label, len(keys)),
         "stored %d, routed %d, wrong instance %d, not found under the wire key %d, "
         "instance/port mismatch %s" % (stored, len(r), len(wrong), len(missing), not hosts_ok),
         "e.g. %r" % (wrong[:3] or missing[:3]))
    if control:
        # the comparison can fail: another distribution's answer is caught
        db.server(c, name + "_x", ",".join(specs), **dict(opts, distribution=control))
        rx = routes(name + "_x", keys)
        xwrong, xmissing = compare(rx, keys, found, lambda row: row[2])
        t.ok(len(xwrong) > NKEYS // 10,
             "%s: the comparison catches distribution %s (%d keys elsewhere)"
             % (label, control, len(xwrong)))
        db.sql(c, 'DROP SERVER "%s"' % (name + "_x"))
    db.sql(c, 'DROP SERVER "%s"' % name)


P3, P4 = ports[:3], ports[:4]
K = {"ketama": True}
cases = [
    ("dalli, 4 instances, namespace 'app', long keys", "dalli", P4, None, "dalli", None, "app",
     True, "ketama"),
    ("dalli, weighted 3:1:2", "dalli", P3, [3, 1, 2], "dalli", None, None, False, None),
    ("pylibmc ketama, 4 instances", "pylibmc", P4, None, "ketama", K, None, False, "ketama_md5"),
    ("pylibmc ketama, weighted 2:1:1", "pylibmc", P3, [2, 1, 1], "ketama", K, None, False, None),
    ("pylibmc ketama + md5 hash, 4 instances", "pylibmc", P4, None, "ketama_md5",
     {"ketama": True, "hash": "md5"}, None, False, None),
    ("pylibmc ketama_weighted, weighted 3:1:2:1", "pylibmc", P4, [3, 1, 2, 1], "ketama_weighted",
     {"ketama_weighted": True}, None, False, None),
    ("pylibmc consistent weighted, 4 instances", "pylibmc", P4, None, "ketama_weighted_oat",
     {"distribution": "consistent weighted"}, None, False, None),
    ("pylibmc modula, 3 instances", "pylibmc", P3, None, "modula", {}, None, False, "ketama"),
    ("pylibmc modula, 4 instances", "pylibmc", P4, None, "modula", {}, None, False, None),
]
for i, (label, fam, mports, w, dist, beh, ns, lk, ctl) in enumerate(cases):
    if fam == "pylibmc" and pylibmc is None:
        t.skip(label, "pylibmc not importable")
        continue
    try:
        case(label, fam, mports, w, dist, behaviors=beh, namespace=ns, seed=i, long_keys=lk,
             control=ctl)
    except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
        t.ok(False, label, repr(e))
        c.rollback()


def dalli_failover():
    """A closed port as the second instance of a Dalli ring: Dalli finds it
    down and rehashes its keys; mcfdw, once the instance is marked dead,
    names the same instances in failover_instance."""
    label = "dalli failover, a dead instance among 4"
    specs = ["127.0.0.1:%d" % ports[0], "127.0.0.1:1", "127.0.0.1:%d" % ports[1],
             "127.0.0.1:%d" % ports[2]]
    live = [ports[0], ports[1], ports[2]]
    keys = clientkeys.gen_keys(77, NKEYS, spaces=True)
    db.server(c, "rt_fo", ",".join(specs), distribution="dalli", failover="on",
              failure_limit="1", retry_delay="1h", on_failure="miss", connect_timeout="500ms")
    db.sql(c, "SET mcfdw.warn_on_miss = off")
    before = routes("rt_fo", keys)
    on_dead = [k for k in keys if before[k][0] == 2]
    t.ok(len(on_dead) > NKEYS // 10 and all(not r[4] and r[5] == r[0] for r in before.values()),
         "%s: before, nothing dead and a read goes to the ring's instance (%d keys on the closed port)"
         % (label, len(on_dead)))
    # one multi-get of the closed port's keys marks it dead, touching no other
    db.sql(c, "SELECT count(*) FROM mc_get_multi(%s::text[], 'rt_fo')",
           ([k.decode() for k in on_dead[:5]],))
    r = routes("rt_fo", keys)
    same_ring = all(r[k][0] == before[k][0] for k in keys)
    dead_ok = all(r[k][4] == (r[k][0] == 2) for k in keys)
    moved = [k for k in keys if r[k][5] != r[k][0]]
    t.ok(same_ring and dead_ok and sorted(moved) == sorted(on_dead)
         and all(r[k][5] in (1, 3, 4) for k in keys),
         "%s: the ring is unchanged, its keys are dead and only they fail over" % label,
         "same ring %s, dead flags %s, moved %d of %d" % (same_ring, dead_ok, len(moved),
                                                         len(on_dead)))
    for p in live:
        mcrig.mc_command(p, "flush_all", end=(b"OK\r\n",))
    stored = client_write("dalli", specs, keys)
    found = where(live, [r[k] for k in keys])
    port_of = {i + 1: int(s.split(":")[1]) for i, s in enumerate(specs)}
    wrong, missing = compare(r, keys, found, lambda row: port_of.get(row[5]))
    t.ok(stored == len(keys) and not wrong and not missing,
         "%s: failover_instance is where Dalli stored all %d keys" % (label, len(keys)),
         "stored %d, wrong %d, missing %d" % (stored, len(wrong), len(missing)),
         "e.g. %r" % (wrong[:3] or missing[:3]))
    db.sql(c, "RESET mcfdw.warn_on_miss")
    db.sql(c, 'DROP SERVER "rt_fo"')


try:
    dalli_failover()
except Exception as e:  # noqa: BLE001
    t.ok(False, "dalli failover", repr(e))
    c.rollback()

c.close()
t.done()
