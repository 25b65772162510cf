"""alloc_budget: the backend memory a 10,000-key mc_get_multi allocates per
key stays within a budget, so a change that allocates per key or per reply
fails `make test` instead of slowing the benchmark down unnoticed.

The extension reports what a batch cost at DEBUG1 ("mcfdw: mc_get_multi of
N keys used B bytes of work memory": every block of the per-call work
context, read before it is freed).  Values go to the tuplestore and request
text to the connection's reused buffer, so what is counted is the per-key
bookkeeping: the key array, the de-duplication set, the routing slices.

BUDGET_PER_KEY is what the code achieved plus ~15 % headroom.  Lower it when
the engine gets leaner; raise it only with a reason in the commit message.
MCFDW_ALLOC_BUDGET_PER_KEY overrides it (to check that the test can fail).
"""

import os
import re

import mcdb
import mcrig

# Measured 50.95 bytes/key (509,544 bytes for 10,000 keys over 4 servers,
# PostgreSQL 15.20, gcc 12.2, Debian 12); 51 * 1.15 = 58.6.
BUDGET_PER_KEY = float(os.environ.get("MCFDW_ALLOC_BUDGET_PER_KEY", "58"))
NKEYS = 10000

t = mcrig.TAP()
ports = mcrig.rig_ports()
db = mcdb.Database("mcfdw_it_alloc_budget")
conn = db.connect()
db.server(conn, "mc4", ",".join("127.0.0.1:%d" % p for p in ports))

# 10,000 keys with 100-byte values, spread over the rig's servers
stored = db.value(conn, "SELECT count(*) FILTER (WHERE mc_set('ab:' || i, lpad(i::text, 100, 'v'), "
                        "server => 'mc4')) FROM generate_series(1, %s) i", (NKEYS,))
t.is_(stored, NKEYS, "%d keys stored over %d servers" % (NKEYS, len(ports)))

cur = conn.cursor()
cur.execute("SET client_min_messages = debug1")
del conn.notices[:]
found = db.value(conn, "SELECT count(*) FROM mc_get_multi((SELECT array_agg('ab:' || i) "
                       "FROM generate_series(1, %s) i), 'mc4')", (NKEYS,))
cur.execute("RESET client_min_messages")
t.is_(found, NKEYS, "the 10,000-key mc_get_multi finds every key")

pat = re.compile(r"mcfdw: mc_get_multi of (\d+) keys used (\d+) bytes of work memory")
reports = [m for m in (pat.search(n) for n in conn.notices) if m]
if not t.ok(len(reports) == 1, "the DEBUG1 report of the batch's work memory arrives",
            "notices: %r" % (conn.notices,)):
    t.done()
nkeys, used = int(reports[0].group(1)), int(reports[0].group(2))
t.is_(nkeys, NKEYS, "the report counts the batch's distinct keys")
per_key = used / nkeys
t.ok(per_key <= BUDGET_PER_KEY,
     "work memory per key: %.1f bytes (%d for %d keys), budget %g" % (per_key, used, nkeys, BUDGET_PER_KEY),
     "a change made mc_get_multi allocate more per key; find it before raising the budget")

conn.close()
t.done()
