"""wal_invalidate: invalidation from the write-ahead log (mc_watch), with a
private cluster that preloads mcfdw with wal_level = logical
(mcrig.private_cluster; the rig's cluster preloads nothing), and two
private memcacheds, the second behind a fault proxy.

It checks: a committed UPDATE's old and new keys are deleted within a bound;
a rolled-back one deletes nothing; an instance down while 10,000 rows
change holds the position (the other instance's keys go, its own stay, the
worker backs off rather than spinning) and every key is deleted once it is
back; `pg_ctl -m immediate stop` in the middle of a stream, then a restart:
no committed key is left; COPY of 100,000 rows: every key deleted; a
partitioned table; TRUNCATE's flush; a watch outside the replica identity
refused; the slot dropped with the last watch and with the extension; a
prompt stop on shutdown while an instance hangs.
"""

import subprocess
import time

import psycopg2

import mcdb
import mcrig
from faultproxy import FaultProxy

t = mcrig.TAP()
BOUND = 5.0                     # seconds from COMMIT to the key being gone

pg = mcrig.logical_cluster("wal-cluster")
if not pg.started(t, "a cluster with mcfdw preloaded and wal_level = logical starts"):
    t.done()
connect = pg.connect
q = mcdb.Database.sql
log_text = pg.log_text


a = mcrig.start_memcached()
b = mcrig.start_memcached()
px = FaultProxy(b.port).start()

db = connect()
q(db, "CREATE EXTENSION mcfdw")
q(db, "CREATE SERVER wt FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s, connect_timeout '1000', io_timeout '2000')",
  ("%s,%s" % (a.addr, px.addr),))
q(db, "CREATE USER MAPPING FOR PUBLIC SERVER wt")


def present(keys):
    """The keys of `keys` either memcached still holds, asked directly."""
    got = set()
    keys = list(keys)
    for m in (a, b):
        for i in range(0, len(keys), 200):
            r = mcrig.mc_command(m.port, "get " + " ".join(keys[i:i + 200]))
            for line in r.split(b"\r\n"):
                if line.startswith(b"VALUE "):
                    got.add(line.split()[1].decode())
    return got


def set_keys(keys):
    for i in range(0, len(keys), 5000):
        chunk = keys[i:i + 5000]
        q(db, "SELECT mc_set_multi(%s, %s, NULL, NULL, 'wt')", (chunk, ["v"] * len(chunk)))


def wait_gone(keys, timeout):
    start = time.time()
    left = present(keys)
    while left and time.time() - start < timeout:
        time.sleep(0.05)
        left = present(list(left))
    return left, time.time() - start


# ---- refusals -------------------------------------------------------------------
q(db, "CREATE TABLE users (id int PRIMARY KEY, email text, name text)")
try:
    q(db, "SELECT mc_watch('users', ARRAY['email:{email}'], 'wt')")
    t.ok(False, "a template column outside the replica identity is refused")
except psycopg2.Error as e:
    t.ok(e.pgcode == "55000" and "REPLICA IDENTITY" in (e.diag.message_hint or ""),
         "a template column outside the replica identity is refused, with a hint",
         e.pgcode, str(e))
t.is_(q(db, "SELECT count(*) FROM pg_replication_slots")[0][0], 0, "... and no slot was created")

q(db, "CREATE DATABASE wal_other")
other = connect("wal_other")
q(other, "CREATE EXTENSION mcfdw")
q(other, "CREATE SERVER wt FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %s)", (a.addr,))
q(other, "CREATE TABLE t (id int PRIMARY KEY)")
try:
    q(other, "SELECT mc_watch('t', ARRAY['t:{id}'], 'wt')")
    t.ok(False, "a watch outside mcfdw.wal_database is refused")
except psycopg2.Error as e:
    t.ok(e.pgcode == "55000" and "mcfdw.wal_database" in (e.diag.message_hint or ""),
         "a watch outside mcfdw.wal_database is refused, with a hint", e.pgcode, str(e))
other.close()

# ---- a watch; UPDATE old and new keys ---------------------------------------------
q(db, "SELECT mc_watch('users', ARRAY['user:{id}'], 'wt')")
t.is_(q(db, "SELECT count(*) FROM pg_replication_slots WHERE plugin = 'mcfdw'")[0][0], 1,
      "the first watch creates the slot (plugin mcfdw)")
q(db, "INSERT INTO users SELECT i, 'u' || i || '@x', 'n' FROM generate_series(1, 20000) i")
q(db, "CREATE TABLE pages (id int PRIMARY KEY, slug text)")
q(db, "ALTER TABLE pages REPLICA IDENTITY FULL")
q(db, "INSERT INTO pages VALUES (1, 'old')")
q(db, "SELECT mc_watch('pages', ARRAY['page:{slug}', 'pid:{id}'], 'wt')")
time.sleep(0.5)
set_keys(["page:old", "page:new", "pid:1"])
t0 = time.time()
q(db, "UPDATE pages SET slug = 'new' WHERE id = 1")
left, took = wait_gone(["page:old", "page:new", "pid:1"], BOUND)
t.ok(not left, "a committed UPDATE's old and new keys are deleted within %.0f s" % BOUND,
     "left: %s" % sorted(left))
t.diag("COMMIT to keys gone: %.3f s" % took)

# ---- rollback -------------------------------------------------------------------------
set_keys(["user:1", "user:2"])
c2 = connect()
c2.autocommit = False
q(c2, "UPDATE users SET name = 'rolled back' WHERE id = 1")
c2.rollback()
q(db, "UPDATE users SET name = 'x' WHERE id = 2")
left, _ = wait_gone(["user:2"], BOUND)
t.ok(not left and present(["user:1"]) == {"user:1"},
     "a rolled-back UPDATE deletes nothing (a later commit's key is gone, its key is not)")

# ---- a write made inside a function ------------------------------------------------------
set_keys(["user:4"])
q(db, "DO $$ BEGIN UPDATE users SET name = 'in a function' WHERE id = 4; END $$")
left, _ = wait_gone(["user:4"], BOUND)
t.ok(not left, "a write made inside a function deletes its key")

# ---- default replica identity: a changed primary key, a DELETE -----------------------------
q(db, "INSERT INTO users VALUES (30005, 'e', 'n'), (30006, 'f', 'n')")
set_keys(["user:30005", "user:130005", "user:30006"])
q(db, "UPDATE users SET id = 130005 WHERE id = 30005")
q(db, "DELETE FROM users WHERE id = 30006")
left, _ = wait_gone(["user:30005", "user:130005", "user:30006"], BOUND)
t.ok(not left, "with the primary key as replica identity: an UPDATE of the key deletes the old "
     "and the new key, a DELETE its key", sorted(left))

# ---- pause and resume ---------------------------------------------------------------------
q(db, "SELECT mc_wal_pause()")
set_keys(["user:7"])
q(db, "UPDATE users SET name = 'paused' WHERE id = 7")
time.sleep(1)
t.is_((present(["user:7"]), q(db, "SELECT bool_and(paused) FROM mc_wal_watches")[0][0]),
      ({"user:7"}, True), "mc_wal_pause holds the delivery, and the view says so")
q(db, "SELECT mc_wal_resume()")
left, _ = wait_gone(["user:7"], BOUND)
t.ok(not left, "mc_wal_resume delivers what was held")

# ---- an instance down while 10,000 rows change ----------------------------------------
keys = ["user:%d" % i for i in range(1, 10001)]
set_keys(keys)
t.is_(len(present(keys)), 10000, "10,000 keys set")
px.mode = "close"
acc0 = px.accepted
for i in range(0, 10000, 1000):
    q(db, "UPDATE users SET name = 'down' WHERE id > %s AND id <= %s", (i, i + 1000))
time.sleep(10)
left = present(keys)
onb = q(db, "SELECT count(*) FROM mc_route(%s, 'wt') WHERE port = %s", (keys, px.port))[0][0]
row = q(db, "SELECT pending, retried, last_error IS NOT NULL FROM mc_wal_watches "
        "WHERE \"table\" = 'users'::regclass")[0]
t.ok(0 < len(left) <= onb, "while an instance is down, the other's keys are deleted and its own "
     "stay", "left %d, on the down instance %d" % (len(left), onb))
t.ok(row[0] > 0 and row[1] > 0 and row[2], "mc_wal_watches shows keys pending and retried, and "
     "the last error", row)
t.ok(px.accepted - acc0 < 60, "the worker backs off: %d connection attempts in 10 s"
     % (px.accepted - acc0))
px.mode = "pass"
left, took = wait_gone(keys, 30)
t.ok(not left, "once the instance is back, every one of the 10,000 keys is deleted",
     "%d left" % len(left))
t.diag("delivered %.1f s after the instance came back" % took)
row = q(db, "SELECT pending, lag_bytes IS NOT NULL, confirmed_lsn IS NOT NULL FROM mc_wal_watches "
        "WHERE \"table\" = 'users'::regclass")[0]
t.is_(row, (0, True, True), "nothing pending afterwards; lag and confirmed position shown")

# ---- stray replies: a garbled instance holds the position too --------------------------
keys = ["user:%d" % i for i in range(1, 2001)]
set_keys(keys)
retried0 = q(db, "SELECT retried FROM mc_wal_watches WHERE \"table\" = 'users'::regclass")[0][0]
px.mode = "garble"
acc0 = px.accepted
q(db, "UPDATE users SET name = 'garbled' WHERE id <= 2000")
time.sleep(4)
row = q(db, "SELECT retried, last_error FROM mc_wal_watches WHERE \"table\" = 'users'::regclass")[0]
t.ok(row[0] > retried0 and row[1], "while an instance answers garbage (its deletes are executed, "
     "their replies lost), the batch is held and retried", row)
t.ok(px.accepted - acc0 < 30, "... without spinning: %d connections in 4 s" % (px.accepted - acc0))
px.mode = "pass"
left, _ = wait_gone(keys, 30)
t.ok(not left, "once it answers again, every key is deleted", "%d left" % len(left))

# ---- pg_dump dumps the watches ------------------------------------------------------------
# pg_dump reads only servers of its own major or older: on another major than
# the client tools' (test/rig/majors.sh lends PostgreSQL 15's), skip.
server_major = int(q(db, "SHOW server_version_num")[0][0]) // 10000
dump_major = int(subprocess.run([pg.bin("pg_dump"), "--version"],
                                stdout=subprocess.PIPE, text=True, check=True)
                 .stdout.split()[2].split(".")[0])
if dump_major < server_major:
    t.skip("pg_dump dumps the rows of mc_watches",
           "pg_dump %d cannot dump a PostgreSQL %d server" % (dump_major, server_major))
else:
    r = pg.run([pg.bin("pg_dump"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres",
                "--data-only", "-t", "mc_watches", "postgres"])
    t.ok(r.returncode == 0 and 'public.users\twt\t{"user:{id}"}' in r.stdout,
         "pg_dump dumps the rows of mc_watches (an extension configuration table)", r.stdout[-2000:])

# ---- pg_ctl -m immediate stop in the middle of a stream -----------------------------
keys = ["user:%d" % i for i in range(1, 20001)]
set_keys(keys)
committed = []
for i in range(0, 20000, 1000):
    q(db, "UPDATE users SET name = 'crash' WHERE id > %s AND id <= %s", (i, i + 1000))
    committed += keys[i:i + 1000]
    if i == 9000:
        break
db.close()
r = pg.stop("immediate")
t.ok(r.returncode == 0, "pg_ctl -m immediate stop in the middle of a stream", r.stdout)
r = pg.start()
t.ok(r.returncode == 0, "the cluster restarts", r.stdout)
db = connect()
left, took = wait_gone(committed, 30)
t.ok(not left, "after the restart, no key of a committed change is left (%d keys)" % len(committed),
     "%d left" % len(left))

# ---- COPY of 100,000 rows --------------------------------------------------------------
q(db, "CREATE TABLE bulk (id int PRIMARY KEY)")
q(db, "SELECT mc_watch('bulk', ARRAY['bulk:{id}'], 'wt')")
keys = ["bulk:%d" % i for i in range(1, 100001)]
set_keys(keys)
cur = db.cursor()
import io
cur.copy_expert("COPY bulk FROM STDIN", io.StringIO("".join("%d\n" % i for i in range(1, 100001))))
left, took = wait_gone(keys, 60)
t.ok(not left, "COPY of 100,000 rows into a watched table: every key deleted",
     "%d left" % len(left))
t.diag("100,000 keys deleted %.1f s after COMMIT" % took)

# ---- a partitioned table; TRUNCATE ---------------------------------------------------------
q(db, "CREATE TABLE parts (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
q(db, "CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (100)")
q(db, "CREATE TABLE parts_2 PARTITION OF parts FOR VALUES FROM (100) TO (200)")
q(db, "INSERT INTO parts VALUES (5, 'a'), (150, 'b')")
q(db, "SELECT mc_watch('parts', ARRAY['part:{id}'], 'wt')")
set_keys(["part:5", "part:150"])
q(db, "UPDATE parts SET v = 'c'")
left, _ = wait_gone(["part:5", "part:150"], BOUND)
t.ok(not left, "a watched partitioned table: each partition's changes delete their keys")
# a partition created after the watch, whose identity lacks the key column
q(db, "CREATE TABLE pw (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
q(db, "CREATE TABLE pw_1 PARTITION OF pw FOR VALUES FROM (0) TO (100)")
q(db, "ALTER TABLE pw_1 REPLICA IDENTITY FULL")
q(db, "SELECT mc_watch('pw', ARRAY['pw:{v}'], 'wt')")
q(db, "CREATE TABLE pw_2 PARTITION OF pw FOR VALUES FROM (100) TO (200)")
q(db, "INSERT INTO pw VALUES (5, 'a'), (150, 'b')")
time.sleep(1)       # the INSERT's own keys delivered before these are set
set_keys(["pw:a", "pw:b"])
q(db, "DELETE FROM pw")


def warned():
    r = q(db, "SELECT last_error FROM mc_wal_watches WHERE \"table\" = 'pw'::regclass")[0][0]
    return r is not None and "replica identity" in r


left, _ = wait_gone(["pw:a"], BOUND)
try:
    mcrig.wait_for(warned, BOUND, what="last_error")
except TimeoutError:
    pass
t.ok(not left and warned() and present(["pw:b"]) == {"pw:b"},
     "a partition whose identity lacks a key column gives no key for a DELETE but a "
     "WARNING and last_error; the other partition's key is deleted", sorted(left),
     q(db, "SELECT last_error FROM mc_wal_watches WHERE \"table\" = 'pw'::regclass"),
     sorted(present(["pw:b"])))
q(db, "SELECT mc_unwatch('pw')")

set_keys(["unrelated:1"])
q(db, "TRUNCATE parts")
left, _ = wait_gone(["unrelated:1"], BOUND)
t.ok(not left, "TRUNCATE of a watch with on_truncate 'flush' flushes the server")
try:
    mcrig.wait_for(lambda: "after a TRUNCATE" in log_text(), BOUND, what="log line")
except TimeoutError:
    pass
t.ok("after a TRUNCATE" in log_text(), "... and says so in the log")
time.sleep(1.1)     # memcached's flush_all also drops what is set in the same second

# ---- a key column added later with a default -----------------------------------------------
q(db, "CREATE TABLE late (id int PRIMARY KEY)")
q(db, "INSERT INTO late VALUES (1)")
q(db, "ALTER TABLE late ADD COLUMN kind text NOT NULL DEFAULT 'd'")
q(db, "ALTER TABLE late REPLICA IDENTITY FULL")
q(db, "SELECT mc_watch('late', ARRAY['late:{kind}:{id}'], 'wt')")
set_keys(["late:d:1"])
q(db, "DELETE FROM late")
left, _ = wait_gone(["late:d:1"], BOUND)
t.ok(not left, "a row older than a key column added with a default gives its key (the default)")

# ---- action 'mark_stale' -----------------------------------------------------------------------
q(db, "CREATE TABLE leased (id int PRIMARY KEY, v text)")
q(db, "INSERT INTO leased VALUES (1, 'a')")
q(db, "SELECT mc_watch('leased', ARRAY['lease:{id}'], 'wt', action => 'mark_stale')")
set_keys(["lease:1"])
q(db, "UPDATE leased SET v = 'b'")


def stale():
    r = q(db, "SELECT (mc_meta('lease:1', 'wt')).stale")[0][0]
    return r is True


try:
    mcrig.wait_for(stale, BOUND, what="stale")
except TimeoutError:
    pass
t.ok(stale() and present(["lease:1"]) == {"lease:1"},
     "action 'mark_stale' marks the key stale (md I) instead of deleting it")

# ---- one transaction's keys for two watches, interleaved ----------------------------------------
# the worker files a key by its record's head (table, server, action);
# alternating heads must each reach their own watch's action and count
q(db, "CREATE TABLE mixd (id int PRIMARY KEY, v int)")
q(db, "CREATE TABLE mixs (id int PRIMARY KEY, v int)")
q(db, "INSERT INTO mixd SELECT g, 0 FROM generate_series(1, 50) g")
q(db, "INSERT INTO mixs SELECT g, 0 FROM generate_series(1, 50) g")
q(db, "SELECT mc_watch('mixd', ARRAY['mixd:{id}'], 'wt')")
q(db, "SELECT mc_watch('mixs', ARRAY['mixs:{id}'], 'wt', action => 'mark_stale')")
mixd = ["mixd:%d" % i for i in range(1, 51)]
mixs = ["mixs:%d" % i for i in range(1, 51)]
set_keys(mixd + mixs)


def mix_sent():
    return dict(q(db, "SELECT \"table\"::text, sent FROM mc_wal_watches "
                      "WHERE \"table\" IN ('mixd'::regclass, 'mixs'::regclass)"))


sent0 = mix_sent()
q(db, "DO $$ BEGIN FOR i IN 1..50 LOOP "
      "UPDATE mixd SET v = v + 1 WHERE id = i; UPDATE mixs SET v = v + 1 WHERE id = i; "
      "END LOOP; END $$")
left, _ = wait_gone(mixd, BOUND)
t.ok(not left, "one transaction alternating two watched tables: the delete watch's keys are all deleted",
     "%d left" % len(left))
try:
    mcrig.wait_for(lambda: all(mix_sent()[k] - sent0.get(k, 0) == 50 for k in ("mixd", "mixs")),
                   BOUND, what="sent")
except TimeoutError:
    pass
notstale = [k for k in mixs if q(db, "SELECT (mc_meta(%s, 'wt')).stale", (k,))[0][0] is not True]
t.ok(present(mixs) == set(mixs) and not notstale,
     "... and the mark_stale watch's keys are all there, marked stale", "%d not stale" % len(notstale))
got = mix_sent()
t.ok(all(got[k] - sent0.get(k, 0) == 50 for k in ("mixd", "mixs")),
     "... and each watch counts its own 50 keys as sent", repr((sent0, got)))
q(db, "DROP TABLE mixd, mixs")

# ---- on_truncate 'ignore' -------------------------------------------------------------------
q(db, "SELECT mc_watch('late', ARRAY['late:{kind}:{id}'], 'wt', on_truncate => 'ignore')")
set_keys(["unrelated:2"])
q(db, "TRUNCATE late")


def ignored():
    r = q(db, "SELECT last_error FROM mc_wal_watches WHERE \"table\" = 'late'::regclass")[0][0]
    return r is not None and "TRUNCATE" in r


try:
    mcrig.wait_for(ignored, BOUND, what="last_error")
except TimeoutError:
    pass
t.ok(ignored() and present(["unrelated:2"]) == {"unrelated:2"},
     "on_truncate 'ignore': nothing is flushed, last_error says a TRUNCATE was not invalidated")

# ---- a hung instance, then a prompt stop ---------------------------------------------------
set_keys(["user:3"])
px.mode = "hang"
q(db, "UPDATE users SET name = 'hang' WHERE id = 3")
time.sleep(0.8)
t0 = time.time()
r = pg.stop("fast")
took = time.time() - t0
t.ok(r.returncode == 0 and took < 5, "a fast shutdown stops the worker promptly while an instance "
     "hangs (%.1f s)" % took, r.stdout)
px.mode = "pass"
pg.start()
db = connect()
left, _ = wait_gone(["user:3"], 30)
t.ok(not left, "the change held by the hung instance is delivered after the restart")

# ---- the slot goes with the last watch, and with the extension ------------------------------
for tbl in ("users", "pages", "bulk", "parts", "late"):
    q(db, "SELECT mc_unwatch(%s)", (tbl,))
q(db, "DROP TABLE leased")     # its watch goes with it (mcfdw_drop_watches)
t.is_(q(db, "SELECT count(*) FROM mc_watches")[0][0], 0, "no watch is left")


def slots():
    return q(db, "SELECT count(*) FROM pg_replication_slots WHERE plugin = 'mcfdw'")[0][0]


mcrig.wait_for(lambda: slots() == 0, 10, what="slot dropped")
t.is_(slots(), 0, "the slot is dropped with the last watch")
q(db, "SELECT mc_watch('users', ARRAY['user:{id}'], 'wt')")
t.is_(slots(), 1, "a new watch creates it again")
q(db, "DROP EXTENSION mcfdw CASCADE")
try:
    mcrig.wait_for(lambda: slots() == 0, 10, what="slot dropped")
except TimeoutError:
    pass
t.is_(slots(), 0, "DROP EXTENSION: the worker drops the slot")
db.close()
t.done()
