"""race_invalidate: the cache-aside race that a pre-commit delete opens and
mc_invalidate closes, with two sessions.

Session A updates a row in a transaction; its trigger invalidates the row's
cache key.  Session B, between A's UPDATE and A's COMMIT, misses the cache,
reads the row (the old version: A has not committed) and caches it.  With a
trigger that calls mc_delete, the delete happened before B's write, so the
stale value stays cached after A commits.  With mc_invalidate the delete is
sent after A's commit, so it removes what B cached."""

import mcdb
import mcrig

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_race_invalidate")
setup = db.connect()
db.server(setup, "cache", mc.addr)
db.sql(setup, "ALTER DATABASE mcfdw_it_race_invalidate SET mcfdw.server = 'cache'")
db.sql(setup, "CREATE TABLE users (id int PRIMARY KEY, name text)")
db.sql(setup, "INSERT INTO users VALUES (1, 'old')")
# the reader's cache-aside step: read the row, cache what was read
db.sql(setup, """
CREATE FUNCTION recache_user(uid int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
  SELECT name INTO v FROM users WHERE id = uid;
  PERFORM mc_set('user:' || uid, v);
  RETURN v;
END $$""")
db.sql(setup, """
CREATE FUNCTION delete_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mc_delete('user:' || OLD.id);
  RETURN NULL;
END $$""")
setup.close()


def run_race(trigger_sql, label):
    """A: BEGIN; UPDATE; -- B re-caches the old row -- A: COMMIT.
    Returns (B's cached value before A commits, the cached value after)."""
    a = db.connect()
    b = db.connect()
    db.sql(a, "DROP TRIGGER IF EXISTS users_cache ON users")
    db.sql(a, trigger_sql)
    db.sql(a, "UPDATE users SET name = 'old' WHERE id = 1")
    db.sql(a, "SELECT mc_set('user:1', 'old')")
    a.autocommit = False
    db.sql(a, "UPDATE users SET name = 'new' WHERE id = 1")
    read = db.value(b, "SELECT recache_user(1)")
    t.is_(read, "old", "%s: the reader sees the old row before the commit" % label)
    before = db.value(b, "SELECT mc_get('user:1')")
    a.commit()
    after = db.value(b, "SELECT mc_get('user:1')")
    a.close()
    b.close()
    return before, after


before, after = run_race(
    "CREATE TRIGGER users_cache AFTER UPDATE ON users "
    "FOR EACH ROW EXECUTE FUNCTION delete_now()", "mc_delete")
t.is_(after, "old", "mc_delete before commit: the stale row stays cached after the commit "
      "(the race this test is about)")

before, after = run_race(
    "CREATE TRIGGER users_cache AFTER UPDATE ON users "
    "FOR EACH ROW EXECUTE FUNCTION mc_invalidate('user:{id}')", "mc_invalidate")
t.is_(before, "old", "mc_invalidate: nothing is deleted before the commit")
t.is_(after, None, "mc_invalidate: the delete after the commit removes the re-cached stale row")
c = db.connect()
t.is_(db.value(c, "SELECT recache_user(1)"), "new", "the next reader caches the new row")
t.is_(db.value(c, "SELECT mc_get('user:1')"), "new", "... and the cache holds it")

# a rolled-back UPDATE leaves the cache alone
c.autocommit = False
db.sql(c, "UPDATE users SET name = 'rolled back' WHERE id = 1")
c.rollback()
c.autocommit = True
t.is_(db.value(c, "SELECT mc_get('user:1')"), "new", "a rolled-back UPDATE deletes nothing")
t.done()
