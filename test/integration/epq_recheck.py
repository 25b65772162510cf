"""epq_recheck: EvalPlanQual rechecks through a foreign table, with two
sessions at READ COMMITTED.

Session A updates a local row and holds its lock; session B runs a
statement that joins that row to a foreign table on the key and locks or
updates it, so B waits.  When A commits, B rechecks the join with the new
version of the local row and the foreign row it read before (a copy: no
row of memcached is locked).  If A changed the join column, the foreign
row no longer matches and B must skip the row, as it would for a local
table; if A changed another column, the row still matches.  The scan's
key condition is what decides the match, so the recheck must evaluate it
(fdw_recheck_quals); without it, B updated the row with the value of a
key the row no longer names."""

import threading

import mcdb
import mcrig

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_epq_recheck")
setup = db.connect()
db.server(setup, "cache", mc.addr)
db.sql(setup, "CREATE FOREIGN TABLE items (key text, value text) SERVER cache")
db.sql(setup, "CREATE TABLE orders (id int PRIMARY KEY, item text, note text, price text)")
db.sql(setup, "SELECT mc_set('a', 'price-a', server => 'cache')")
db.sql(setup, "SELECT mc_set('b', 'price-b', server => 'cache')")
setup.close()


def reset():
    c = db.connect()
    db.sql(c, "TRUNCATE orders")
    db.sql(c, "INSERT INTO orders VALUES (1, 'a', 'n', NULL), (2, 'b', 'n', NULL)")
    c.close()


def waiting(conn_pid):
    c = db.connect()
    try:
        return db.value(c, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity "
                        "WHERE pid = %s", (conn_pid,)) is True
    finally:
        c.close()


def race(a_sql, b_sql, settings=()):
    """A runs a_sql and holds its locks; B runs b_sql, which waits on them;
    A commits.  Returns B's rows (or its row count) and the error, if any."""
    a = db.connect()
    b = db.connect()
    for s in settings:
        db.sql(b, s)
    b_pid = db.value(b, "SELECT pg_backend_pid()")
    a.autocommit = False
    db.sql(a, a_sql)
    out = {}

    def run_b():
        try:
            cur = b.cursor()
            cur.execute(b_sql)
            out["rows"] = cur.fetchall() if cur.description else cur.rowcount
        except Exception as e:  # reported below
            out["error"] = e

    th = threading.Thread(target=run_b)
    th.start()
    try:
        mcrig.wait_for(lambda: waiting(b_pid), timeout=20, what="B waiting for A's lock")
    finally:
        a.commit()
        th.join(60)
    a.close()
    b.close()
    return out.get("rows"), out.get("error")


def plan(sql, settings=()):
    c = db.connect()
    for s in settings:
        db.sql(c, s)
    p = "\n".join(r[0] for r in db.sql(c, "EXPLAIN (COSTS OFF) " + sql))
    c.close()
    return p


def orders():
    c = db.connect()
    rows = db.sql(c, "SELECT id, item, note, price FROM orders ORDER BY id")
    c.close()
    return rows


UPDATE_JOIN = ("UPDATE orders o SET price = i.value FROM items i "
               "WHERE i.key = o.item AND o.id = 1")
LOCK_JOIN = ("SELECT o.id, o.item, i.value FROM orders o JOIN items i ON i.key = o.item "
             "WHERE o.id = 1 FOR UPDATE OF o")
ANY_JOIN = ("UPDATE orders o SET price = i.value FROM items i "
            "WHERE i.key = ANY (ARRAY[o.item, 'zz']) AND o.id = 1")
NESTLOOP = ("SET enable_hashjoin = off", "SET enable_mergejoin = off")

p = plan(UPDATE_JOIN)
t.ok("Nested Loop" in p and "Foreign Scan on items" in p,
     "the UPDATE joins through a parameterized foreign scan", p)

# the join column changed under B: the foreign row of 'a' no longer matches
reset()
rows, err = race("UPDATE orders SET item = 'b' WHERE id = 1", UPDATE_JOIN)
t.is_(err, None, "UPDATE ... FROM foreign: no error after the wait")
t.is_(rows, 0, "UPDATE ... FROM foreign: the row whose key changed is skipped")
t.is_(orders()[0], (1, "b", "n", None), "... and left as the other session wrote it")

# another column changed: the row still matches and is updated
reset()
rows, err = race("UPDATE orders SET note = 'm' WHERE id = 1", UPDATE_JOIN)
t.is_((rows, err), (1, None), "UPDATE ... FROM foreign: a row whose key stayed is updated")
t.is_(orders()[0], (1, "a", "m", "price-a"), "... with the foreign value of its key")

# the same with a key array built from the outer row
reset()
rows, err = race("UPDATE orders SET item = 'b' WHERE id = 1", ANY_JOIN, NESTLOOP)
t.is_((rows, err), (0, None), "key = ANY (outer array): the row whose key changed is skipped")
reset()
rows, err = race("UPDATE orders SET note = 'm' WHERE id = 1", ANY_JOIN, NESTLOOP)
t.is_((rows, err), (1, None), "key = ANY (outer array): a row whose key stayed is updated")

# SELECT ... FOR UPDATE of the local table, joined to the foreign one
reset()
rows, err = race("UPDATE orders SET item = 'b' WHERE id = 1", LOCK_JOIN)
t.is_((rows, err), ([], None), "FOR UPDATE join: the row whose key changed is not returned")
reset()
rows, err = race("UPDATE orders SET note = 'm' WHERE id = 1", LOCK_JOIN)
t.is_((rows, err), ([(1, "a", "price-a")], None),
      "FOR UPDATE join: a row whose key stayed is returned")

# the local row deleted under B: nothing, no error
reset()
rows, err = race("DELETE FROM orders WHERE id = 1", UPDATE_JOIN)
t.is_((rows, err), (0, None), "UPDATE ... FROM foreign: a row deleted meanwhile is skipped")

# a foreign table's key is never locked: B does not wait for a reader of it
reset()
a = db.connect()
a.autocommit = False
db.sql(a, "SELECT * FROM items WHERE key = 'a' FOR UPDATE")
b = db.connect()
db.sql(b, "SET lock_timeout = '2s'")
t.is_(db.sql(b, "SELECT key, value FROM items WHERE key = 'a' FOR UPDATE"),
      [("a", "price-a")], "FOR UPDATE of a foreign row takes no lock another session waits on")
a.rollback()
a.close()
b.close()

t.done()
