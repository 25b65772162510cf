"""failover: a stopped instance is marked dead after failure_limit failures,
its keys fail (failover off) or are rerouted the way the client family does
(failover on, checked against Ruby Dalli), mc_servers shows it, and it is
used again once it is back and retry_delay has passed."""

import os
import subprocess
import time

import mcdb
import mcrig

HERE = os.path.dirname(os.path.abspath(__file__))
DALLI_RW = os.path.join(HERE, "..", "compat", "dalli_rw.rb")

t = mcrig.TAP()
ms = [mcrig.start_memcached() for _ in range(4)]
addrs = ",".join(m.addr for m in ms)
db = mcdb.Database("mcfdw_it_failover")
c = db.connect()
db.server(c, "fo", addrs, distribution="dalli", failover="on", failure_limit=2, retry_delay="2s",
          connect_timeout="500ms")
db.server(c, "nofo", addrs, distribution="dalli", failover="off", failure_limit=2, retry_delay="2s",
          connect_timeout="500ms")
db.server(c, "kfo", addrs, distribution="ketama", failover="on", failure_limit=2, retry_delay="2s",
          connect_timeout="500ms")
db.server(c, "inst2", ms[1].addr)
keys = ["fo:%d" % i for i in range(400)]


def error_of(sql, args=None):
    try:
        db.sql(c, sql, args)
        return None
    except Exception as e:  # noqa: BLE001
        return str(e).splitlines()[0]


def servers_view(server):
    return db.sql(c, "SELECT instance, state, failures, last_error, dead_until IS NOT NULL "
                     "FROM mc_servers WHERE server = %s ORDER BY instance", (server,))


# all up: write through mcfdw, find which keys live on instance 2
db.sql(c, "SELECT count(mc_set(k, 'v:' || k, server => 'fo')) FROM unnest(%s::text[]) k", (keys,))
on2 = {r[0] for r in db.sql(c, "SELECT key FROM mc_get_multi(%s::text[], 'inst2')", (keys,))}
t.ok(20 < len(on2) < 200, "instance 2 holds a share of the keys (%d of %d)" % (len(on2), len(keys)))
k2 = sorted(on2)[0]
t.is_(db.value(c, "SELECT count(*) FROM mc_get_multi(%s::text[], 'fo')", (keys,)), len(keys),
      "all keys readable while every instance is up")

ms[1].stop()

# failover on: the very first call for a key of the stopped instance does not
# fail; it goes on to the next instance, as Dalli does
e0 = error_of("SELECT mc_get(%s, server => 'fo')", (k2,))
t.ok(e0 is None, "failover on: a single get fails over on the spot", e0)

# failover off: keys of the stopped instance fail, with a clear error
e1 = error_of("SELECT mc_get(%s, server => 'nofo')", (k2,))
t.ok(e1 and "could not" in e1 and '"nofo"' in e1, "failover off: the first call fails to connect", e1)
error_of("SELECT mc_get(%s, server => 'nofo')", (k2,))
e3 = error_of("SELECT mc_get(%s, server => 'nofo')", (k2,))
t.ok(e3 and "is unavailable" in e3, "after failure_limit failures the instance is dead: fail fast", e3)
e4 = error_of("SELECT count(*) FROM mc_get_multi(%s::text[], 'nofo')", (keys,))
t.ok(e4 and "unavailable" in e4, "failover off: a multi-get touching it fails", e4)
other = sorted(set(keys) - on2)[0]
t.is_(db.value(c, "SELECT mc_get(%s, server => 'nofo')", (other,)), "v:" + other,
      "failover off: keys of live instances still work")
row = [r for r in servers_view("nofo") if r[0] == 2][0]
t.ok(row[1] == "dead" and row[2] >= 2 and row[3] and row[4],
     "mc_servers shows instance 2 dead, with its failures and error", repr(row))

# failover on: a multi-get skips the dead instance's keys (misses, no error)
n = db.value(c, "SELECT count(*) FROM mc_get_multi(%s::text[], 'fo')", (keys,))
n = db.value(c, "SELECT count(*) FROM mc_get_multi(%s::text[], 'fo')", (keys,))
t.is_(n, len(keys) - len(on2), "failover on: multi-get returns every key of the live instances")
row = [r for r in servers_view("fo") if r[0] == 2][0]
t.ok(row[1] == "dead", "mc_servers shows it dead for the failover server too", repr(row))

# failover on: writes and reads of the dead instance's keys go where Dalli
# sends them ("<try>" + key rehash); Dalli writes, mcfdw reads, and back
lost = sorted(on2)[:50]
specs = [m.addr for m in ms]
r = subprocess.run(["ruby", DALLI_RW, "write"] + specs, input="".join(k.encode().hex() + "\n" for k in lost),
                   capture_output=True, text=True, timeout=120)
t.is_(r.stdout.strip(), str(len(lost)), "Dalli (failover on) stores the dead instance's keys elsewhere")
got = dict(db.sql(c, "SELECT key, value FROM mc_get_multi(%s::text[], 'fo')", (lost,)))
t.is_(sum(1 for k in lost if got.get(k) == "dalli:" + k.encode().hex()), len(lost),
      "mcfdw finds them where Dalli put them")
db.sql(c, "SELECT count(mc_set(k, 'pg:' || k, server => 'fo')) FROM unnest(%s::text[]) k", (lost,))
r = subprocess.run(["ruby", DALLI_RW, "read"] + specs, input="".join(k.encode().hex() + "\n" for k in lost),
                   capture_output=True, text=True, timeout=120)
found = dict(line.split("\t", 1) for line in r.stdout.splitlines())
t.is_(sum(1 for k in lost if found.get(k.encode().hex()) == "pg:" + k), len(lost),
      "Dalli finds the keys mcfdw rerouted")

# ketama with failover: a key of the dead instance is written and read back
# on the same live instance (the continuum of live instances)
kk = ["kfo:%d" % i for i in range(300)]
db.sql(c, "SELECT count(mc_set(k, k, server => 'kfo')) FROM unnest(%s::text[]) k", (kk,))
db.sql(c, "SELECT count(mc_set(k, k, server => 'kfo')) FROM unnest(%s::text[]) k", (kk,))
t.is_(db.value(c, "SELECT count(*) FROM mc_get_multi(%s::text[], 'kfo')", (kk,)), len(kk),
      "ketama failover: every key written while an instance is dead reads back")

# back: after retry_delay the instance is tried again and used
ms[1].start()
time.sleep(2.2)
t.is_(db.value(c, "SELECT mc_set(%s, 'back', server => 'nofo')", (k2,)), True,
      "after retry_delay the restarted instance is used again")
row = [r for r in servers_view("nofo") if r[0] == 2][0]
t.ok(row[1] == "connected" and row[2] == 0 and not row[4],
     "mc_servers shows it connected, failures reset", repr(row))

c.close()
t.done()
