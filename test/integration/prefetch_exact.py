"""prefetch_exact: per-row mc_get calls prefetched in batches answer exactly
what they answer one round trip at a time (values, misses, errors at their
own row, on_failure, a dead instance), over joins, filters, LIMIT, cursors
and PL/pgSQL loops, each run with mcfdw.prefetch on and off in fresh
backends; and the round trips really are batched (a proxy in front of one
instance counts them)."""

import mcdb
import mcrig
from faultproxy import FaultProxy

t = mcrig.TAP()
mc1 = mcrig.start_memcached()
mc2 = mcrig.start_memcached()
px = FaultProxy(mc1.port).start()
closed = "127.0.0.1:%d" % mcrig.free_port()
db = mcdb.Database("mcfdw_it_prefetch_exact")
c = db.connect()
db.server(c, "pf", "%s,%s" % (px.addr, mc2.addr))
db.server(c, "pf_miss", "%s,%s" % (px.addr, mc2.addr), on_failure="miss",
          io_timeout="300ms", connect_timeout="300ms")
db.server(c, "pf_fo", "%s,%s" % (px.addr, mc2.addr), failover="true",
          io_timeout="300ms", connect_timeout="300ms")
db.server(c, "pf_dead", "%s,%s" % (closed, mc2.addr), on_failure="miss")
db.server(c, "pf_dead_err", "%s,%s" % (closed, mc2.addr))
db.sql(c, """CREATE TABLE users (id int PRIMARY KEY, grp int)""")
db.sql(c, """INSERT INTO users SELECT i, i % 7 FROM generate_series(1, 300) i""")
db.sql(c, """CREATE TABLE orders (id int, user_id int)""")
db.sql(c, """INSERT INTO orders SELECT i, 1 + (i * 37) % 300 FROM generate_series(1, 500) i""")
db.sql(c, "ANALYZE users, orders")
# two thirds of the keys have values (on both memcacheds, as the ring puts them)
for srv in ("pf",):
    db.sql(c, """SELECT mc_set_multi(array_agg('u:' || id), array_agg('value ' || id), server => %s)
                 FROM users WHERE id %% 3 <> 0""", (srv,))
db.sql(c, "SELECT mc_set('u:250', '\\xff00'::bytea, server => 'pf')")
db.sql(c, """CREATE FUNCTION note(i int, v text) RETURNS text LANGUAGE plpgsql STABLE AS
             $$ BEGIN RAISE NOTICE 'row %', i; RETURN v; END $$""")
db.sql(c, """CREATE FUNCTION loop_rows(lim int, srv name) RETURNS text LANGUAGE plpgsql AS $$
             DECLARE r record; out text := '';
             BEGIN
               FOR r IN SELECT u.id, mc_get('u:' || u.id, srv) AS v FROM users u
                         WHERE u.id <= lim ORDER BY u.id LOOP
                 out := out || r.id || '=' || coalesce(r.v, '-') || ';';
                 IF r.id = 45 THEN EXIT; END IF;
               END LOOP;
               RETURN out;
             END $$""")
c.close()


def run(sql, prefetch, setup=(), after=None):
    """The rows (or the error) and the notices of sql in a fresh backend,
    and what the query after says then."""
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("LOAD 'mcfdw'")
    cur.execute("SET mcfdw.prefetch = %s" % ("on" if prefetch else "off"))
    cur.execute("SET client_min_messages = notice")
    for s in setup:
        cur.execute(s)
    try:
        cur.execute(sql)
        out = ("rows", cur.fetchall() if cur.description else None)
    except Exception as e:  # noqa: BLE001
        out = ("error", str(e).splitlines()[0])
    notices = [n.strip() for n in conn.notices]
    if after:
        cur.execute(after)
        notices.append(cur.fetchall())
    conn.close()
    return out, notices


def same(sql, name, setup=(), after=None):
    off = run(sql, False, setup, after)
    on = run(sql, True, setup, after)
    t.ok(on == off, name, "on:  %r" % (on,), "off: %r" % (off,))
    return on


def round_trips(sql, prefetch):
    """memcached round trips through the proxy while sql runs: one per mg
    sent alone, one per pipelined batch (closed by mn)."""
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("LOAD 'mcfdw'")
    cur.execute("SET mcfdw.prefetch = %s" % ("on" if prefetch else "off"))
    cur.execute("SELECT mc_get('warm', 'pf')")
    px.requests = bytearray()
    px.record = True
    cur.execute(sql)
    cur.fetchall()
    px.record = False
    lines = bytes(px.requests).split(b"\r\n")
    conn.close()
    alone = sum(1 for ln in lines if ln.startswith(b"mg ") and b" q" not in ln)
    batches = sum(1 for ln in lines if ln == b"mn")
    return alone + batches, sum(1 for ln in lines if ln.startswith(b"mg "))


# the query mix
scan = "SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u WHERE u.id <> 250 ORDER BY u.id"
same(scan, "scan: values and misses")
same("SELECT u.id, mc_get_bytea('u:' || u.id, 'pf') FROM users u ORDER BY u.id", "scan: bytea")
same("SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u WHERE u.grp = 3 AND u.id <> 250",
     "filter")
same("""SELECT o.id, u.id, coalesce(mc_get('u:' || u.id, 'pf'), 'none') FROM orders o
        JOIN users u ON u.id = o.user_id WHERE u.id <> 250 ORDER BY o.id""", "hash join")
same("""SELECT o.id, mc_get('u:' || o.user_id, 'pf') FROM orders o
        WHERE o.user_id <> 250 AND EXISTS (SELECT 1 FROM users u WHERE u.id = o.user_id AND u.grp < 3)
        ORDER BY o.id""", "semi join")
same("""SELECT o.id, mc_get('u:' || u.id, 'pf') FROM orders o JOIN users u ON u.id = o.user_id
        WHERE u.id <> 250 ORDER BY o.id""", "nested loop (parameterized inner)",
     setup=("SET enable_hashjoin = off", "SET enable_mergejoin = off"))
same("SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u LIMIT 7", "LIMIT")
same("SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u ORDER BY u.id DESC LIMIT 5 OFFSET 3",
     "ORDER BY .. LIMIT .. OFFSET")
same("""SELECT g, (SELECT mc_get('u:' || u.id, 'pf') FROM users u WHERE u.id = g * 3 + 1)
        FROM generate_series(1, 40) g""", "correlated subquery (rescans)")
same("SELECT loop_rows(120, 'pf')", "PL/pgSQL FOR loop, EXIT in the middle")

# errors: raised at their own row, after the same rows' notices
same("SELECT note(u.id, mc_get('u:' || u.id, 'pf')) FROM users u WHERE u.id > 240 ORDER BY u.id",
     "a value that is not text: the same error after the same rows")
same("""SELECT note(u.id, mc_get(CASE WHEN u.id = 245 THEN '' ELSE 'u:' || u.id END, 'pf'))
        FROM users u WHERE u.id > 240 ORDER BY u.id""", "an empty key: the same error at the same row")
same("SELECT loop_rows(300, 'pf')", "PL/pgSQL loop stopping before the bad value")

# cursors: no prefetch, so a row at a time reads a key at a time
conn = db.connect()
cur = conn.cursor()
cur.execute("LOAD 'mcfdw'")
cur.execute("BEGIN")
cur.execute("DECLARE cr CURSOR FOR SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u ORDER BY u.id")
cur.execute("FETCH 1 FROM cr")
cur.execute("SELECT mc_get('warm', 'pf')")
px.requests = bytearray()
px.record = True
cur.execute("FETCH 1 FROM cr")
row = cur.fetchall()
px.record = False
cur.execute("FETCH BACKWARD 1 FROM cr")
back = cur.fetchall()
mg = sum(1 for ln in bytes(px.requests).split(b"\r\n") if ln.startswith(b"mg "))
t.ok(mg <= 1, "cursor: FETCH 1 reads at most its own key", "mg lines: %d" % mg)
t.is_(row, [(2, "value 2")], "cursor: the second row")
t.is_(back, [(1, "value 1")], "cursor: FETCH BACKWARD still works")
cur.execute("COMMIT")
conn.close()

# on_failure and dead instances
px.mode = "close"
degraded = "SELECT server::text, degraded FROM mc_servers WHERE degraded > 0 ORDER BY 1, 2"
same("SELECT u.id, mc_get('u:' || u.id, 'pf_miss') FROM users u WHERE u.id <> 250 ORDER BY u.id",
     "on_failure miss, an instance closing every connection: same rows, warning, degraded count",
     after=degraded)
same("SELECT u.id, mc_get('u:' || u.id, 'pf_fo') FROM users u WHERE u.id <> 250 ORDER BY u.id",
     "failover, an instance closing every connection: same rows")
same("SELECT note(u.id, mc_get('u:' || u.id, 'pf')) FROM users u WHERE u.id <> 250 ORDER BY u.id",
     "on_failure error, an instance closing every connection: same error")
px.mode = "pass"
same("SELECT u.id, mc_get('u:' || u.id, 'pf_dead') FROM users u ORDER BY u.id",
     "on_failure miss, a dead instance: same rows, warning, degraded count", after=degraded)
same("SELECT u.id, mc_get('u:' || u.id, 'pf_dead_err') FROM users u ORDER BY u.id",
     "on_failure error, a dead instance: same error")

# the round trips are batched: 300 rows, about half through the proxy
off_rt, off_mg = round_trips(scan, False)
on_rt, on_mg = round_trips(scan, True)
t.ok(off_rt >= 100, "without prefetch: a round trip per key", "%d round trips" % off_rt)
t.ok(on_rt <= 6, "with prefetch: a round trip per batch (16, 32, 64, 128, the rest)",
     "%d round trips, %d keys" % (on_rt, on_mg))
t.is_(on_mg, off_mg, "the same keys asked")

# a LIMIT right above bounds the batch: no key past the limit is asked
lim_rt, lim_mg = round_trips("SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u ORDER BY u.id LIMIT 5",
                             True)
off_lim_rt, off_lim_mg = round_trips("SELECT u.id, mc_get('u:' || u.id, 'pf') FROM users u "
                                     "ORDER BY u.id LIMIT 5", False)
t.is_(lim_mg, off_lim_mg, "LIMIT 5: the keys of the five rows, no more",)

px.stop()
t.done()
