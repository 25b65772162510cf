"""dump_restore — pg_dump and pg_restore lose nothing of mcfdw's configuration.

A database holding every kind of configuration (several servers and their
options, TLS and authentication included; user mappings with credentials
for PUBLIC and for roles; foreign tables with table and column options;
mc_invalidate triggers; grants on servers, the wrapper, foreign tables and
columns, revokes of mcfdw's functions; settings stored with ALTER DATABASE
and ALTER ROLE ... IN DATABASE) is dumped in the custom and the plain
format and restored into new databases, and once with --create after the
original is dropped: the catalogs must be the same, and the restored
database reads and writes.  Databases created at 1.0 and at 1.1, configured
as their README said (the extension's server "memcached" ALTERed, user
mappings of it, a foreign table, a trigger), are updated with ALTER
EXTENSION UPDATE, keep working, hold the same extension objects as a fresh
install, and survive a dump and restore with that server intact.  CREATE
EXTENSION and the update from 1.0 write no WARNING to the server log, and a
fresh install creates no server (1.0's script, which made one, is not run).
"""

import os
import subprocess
import tempfile

import mcdb
import mcrig
import tlsrig

t = mcrig.TAP()
ports = mcrig.rig_ports()
BINDIR = subprocess.run([os.environ.get("PG_CONFIG", "pg_config"), "--bindir"],
                        stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
LOG = os.path.join(os.environ["MCFDW_RIG"], "log", "postgres.log")
_rigtmp = os.path.join(os.environ["MCFDW_RIG"], "tmp")
TMP = tempfile.mkdtemp(prefix="mcfdw-dump-", dir=_rigtmp if os.path.isdir(_rigtmp) else None)
ROLES = ("mcfdw_dump_app", "mcfdw_dump_ro", "mcfdw_dump_admin")
SRC = "mcfdw_it_dump_src"
DBS = [SRC, "mcfdw_it_dump_fc", "mcfdw_it_dump_plain", "mcfdw_it_dump_fresh",
       "mcfdw_it_dump_v10", "mcfdw_it_dump_v11", "mcfdw_it_dump_v10_r", "mcfdw_it_dump_v11_r"]

admin = mcrig.pg_connect()

# pg_dump reads only servers of its own major or older: on another major
# than the client tools' (test/rig/majors.sh lends PostgreSQL 15's), skip.
_server_major = int(mcdb.Database.value(admin, "SHOW server_version_num")) // 10000
_dump_major = int(subprocess.run([os.path.join(BINDIR, "pg_dump"), "--version"],
                                 stdout=subprocess.PIPE, text=True, check=True)
                  .stdout.split()[2].split(".")[0])
if _dump_major < _server_major:
    t.skip("dump and restore", "pg_dump %d cannot dump a PostgreSQL %d server"
           % (_dump_major, _server_major))
    t.done()


def q(conn, sql, args=None):
    return mcdb.Database.sql(conn, sql, args)


def v(conn, sql, args=None):
    return mcdb.Database.value(conn, sql, args)


def drop_all():
    for d in DBS:
        q(admin, 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % d)
    for r in ROLES:
        q(admin, "DROP ROLE IF EXISTS %s" % r)


def createdb(name):
    q(admin, 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
    q(admin, 'CREATE DATABASE "%s"' % name)
    return mcrig.pg_connect(dbname=name)


def run(*cmd):
    """A client program of the rig's PostgreSQL; (ok, its output)."""
    p = subprocess.run([os.path.join(BINDIR, cmd[0])] + list(cmd[1:]), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode == 0 and "ERROR" not in p.stdout and "WARNING" not in p.stdout, p.stdout


def log_mark():
    return os.path.getsize(LOG)


def log_warnings(mark, db):
    """WARNING lines of database db written to the server log since mark."""
    with open(LOG, errors="replace") as f:
        f.seek(mark)
        return [ln for ln in f.read().splitlines() if "@%s " % db in ln and "WARNING" in ln]


# ---- what is compared --------------------------------------------------------

def sorted_array(col):
    """An array column as a sorted text array (options and ACLs are sets;
    pg_dump writes them in its own order), NULL kept apart from empty."""
    return ("CASE WHEN %s IS NULL THEN NULL ELSE ARRAY(SELECT x::text FROM unnest(%s) x "
            "ORDER BY 1) END" % (col, col))


CATALOG = {
    "extension": "SELECT e.extname, e.extversion, n.nspname, pg_get_userbyid(e.extowner) "
                 "FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                 "WHERE e.extname = 'mcfdw'",
    "members": "SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend "
               "WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw') "
               "AND deptype = 'e' ORDER BY 1",
    "wrapper": "SELECT fdwname, fdwhandler::regproc::text, fdwvalidator::regproc::text, %s, %s "
               "FROM pg_foreign_data_wrapper" % (sorted_array("fdwoptions"), sorted_array("fdwacl")),
    "servers": "SELECT s.srvname, w.fdwname, pg_get_userbyid(s.srvowner), s.srvtype, s.srvversion, "
               "%s, %s FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw "
               "ORDER BY 1" % (sorted_array("s.srvoptions"), sorted_array("s.srvacl")),
    "user_mappings": "SELECT srvname, usename, %s FROM pg_user_mappings ORDER BY 1, 2"
                     % sorted_array("umoptions"),
    "foreign_tables": "SELECT c.oid::regclass::text, s.srvname, pg_get_userbyid(c.relowner), %s, %s "
                      "FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid "
                      "JOIN pg_foreign_server s ON s.oid = ft.ftserver ORDER BY 1"
                      % (sorted_array("ft.ftoptions"), sorted_array("c.relacl")),
    "columns": "SELECT a.attrelid::regclass::text, a.attname, format_type(a.atttypid, a.atttypmod), "
               "%s, %s FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
               "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('f', 'r') "
               "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2"
               % (sorted_array("a.attfdwoptions"), sorted_array("a.attacl")),
    "triggers": "SELECT tgrelid::regclass::text, tgname, tgenabled, pg_get_triggerdef(oid) "
                "FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
    "function_acls": "SELECT p.oid::regprocedure::text, %s FROM pg_proc p JOIN pg_depend d "
                     "ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e' "
                     "AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw') "
                     "ORDER BY 1" % sorted_array("p.proacl"),
    "view_acls": "SELECT c.oid::regclass::text, %s FROM pg_class c JOIN pg_depend d "
                 "ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e' "
                 "ORDER BY 1" % sorted_array("c.relacl"),
    # settings of this database (ALTER DATABASE, ALTER ROLE ... IN DATABASE):
    # pg_dump writes them with --create only
    "db_settings": "SELECT coalesce(pg_get_userbyid(nullif(s.setrole, 0)), '(every role)'), %s "
                   "FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase "
                   "WHERE d.datname = current_database() ORDER BY 1" % sorted_array("s.setconfig"),
}


def catalog(dbname, without=()):
    c = mcrig.pg_connect(dbname=dbname)
    snap = {k: [tuple(r) for r in q(c, sql)] for k, sql in CATALOG.items() if k not in without}
    c.close()
    return snap


def same_catalog(got, want, name):
    """One test point per catalog, so a failure names what was lost."""
    for k in want:
        t.is_(got.get(k), want[k], "%s: %s" % (name, k))


def works(dbname, name, server=None):
    c = mcrig.pg_connect(dbname=dbname)
    key = "dump:%s" % dbname
    try:
        got = v(c, "SELECT mc_set(%s, 'value of ' || %s, server => %s) AND "
                   "mc_get(%s, server => %s) = 'value of ' || %s",
                (key, dbname, server, key, server, dbname))
    except Exception as e:
        got = e
    c.close()
    t.ok(got is True, "%s: a set and a get through server %s" % (name, server or "memcached, the default"),
         repr(got))


drop_all()
for r in ROLES:
    q(admin, "CREATE ROLE %s LOGIN" % r)

# ---- a fresh install ---------------------------------------------------------
mark = log_mark()
c = createdb("mcfdw_it_dump_fresh")
q(c, "CREATE EXTENSION mcfdw")
t.is_(log_warnings(mark, "mcfdw_it_dump_fresh"), [], "CREATE EXTENSION writes no WARNING to the server log")
t.is_(v(c, "SELECT extversion FROM pg_extension WHERE extname = 'mcfdw'"), "1.2",
      "CREATE EXTENSION installs 1.2")
# 1.0's script made a server (and the update would only detach it)
t.is_(v(c, "SELECT count(*) FROM pg_foreign_server"), 0,
      "a fresh install creates no server: mcfdw--1.2.sql runs directly, not 1.0's and the updates")
try:
    q(c, "SELECT mc_get('k')")
    t.ok(False, "a call naming no server, with no server memcached, is refused")
except Exception as e:
    t.ok(e.pgcode == "42704" and "CREATE SERVER memcached" in (e.diag.message_hint or ""),
         "a call naming no server, with no server memcached, is refused with a hint to create it",
         "%s %s hint: %s" % (e.pgcode, e.diag.message_primary, e.diag.message_hint))
c.close()
fresh = catalog("mcfdw_it_dump_fresh")

# ---- every kind of configuration ---------------------------------------------
c = createdb(SRC)
for stmt in [
    "CREATE EXTENSION mcfdw",
    "CREATE SERVER memcached FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '127.0.0.1:%d', "
    "io_timeout '2s', connect_timeout '500ms', failover 'true', failure_limit '3', retry_delay '5', "
    "idle_timeout '60', on_failure 'miss', key_prefix 'dmp:')" % ports[0],
    "CREATE SERVER ring FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '127.0.0.1:%d:2, 127.0.0.1:%d', "
    "distribution 'dalli', key_prefix 'app:', long_keys 'dalli', compression 'zlib', "
    "compressed_flag '2', compress_threshold '1kB', compression_level '1', max_value_size '4MB', "
    "serialized_flag '1', "
    "legacy_misses 'true', max_reply_size '1MB')" % (ports[1], ports[2]),
    "CREATE SERVER secure FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'localhost:%d', "
    "tls 'verify-full', tls_ca_file '%s', tls_server_name 'localhost', tls_cert_file '%s', "
    "tls_key_file '%s')" % (ports[3], tlsrig.path("ca.crt"), tlsrig.path("client.crt"),
                            tlsrig.path("client.key")),
    "CREATE SERVER \"Odd 'name'\" TYPE 'memcached' VERSION '1.6' FOREIGN DATA WRAPPER mcfdw "
    "OPTIONS (servers '[::1]:11211', distribution 'modula', tls 'require')",
    "GRANT USAGE ON FOREIGN DATA WRAPPER mcfdw TO mcfdw_dump_admin",
    "ALTER SERVER \"Odd 'name'\" OWNER TO mcfdw_dump_admin",
    "GRANT USAGE ON FOREIGN SERVER memcached TO mcfdw_dump_app, mcfdw_dump_ro",
    "GRANT USAGE ON FOREIGN SERVER ring TO mcfdw_dump_app WITH GRANT OPTION",
    "GRANT USAGE ON FOREIGN SERVER secure TO PUBLIC",
    "CREATE USER MAPPING FOR PUBLIC SERVER secure OPTIONS (username 'everyone', password 'pub-secret')",
    "CREATE USER MAPPING FOR mcfdw_dump_app SERVER secure OPTIONS (username 'app', password 'it''s:app')",
    "CREATE USER MAPPING FOR mcfdw_dump_app SERVER ring OPTIONS (username 'ringer', password 'r')",
    "CREATE USER MAPPING FOR mcfdw_dump_ro SERVER memcached",
    "CREATE USER MAPPING FOR CURRENT_USER SERVER \"Odd 'name'\" OPTIONS (username 'adm', password 'x')",
    "CREATE FOREIGN TABLE users_cache (key text, value text, flags integer, t integer OPTIONS (field 'ttl'), "
    "c bigint OPTIONS (field 'cas')) SERVER memcached OPTIONS (key_prefix 'user:', ttl '3600', "
    "batch_size '50', join_batch_size '100', allow_full_scan 'true')",
    "CREATE FOREIGN TABLE ring_cache (k text OPTIONS (field 'key'), v bytea OPTIONS (field 'value')) "
    "SERVER ring",
    "GRANT SELECT ON users_cache TO mcfdw_dump_ro",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON users_cache TO mcfdw_dump_app",
    "GRANT SELECT (k) ON ring_cache TO mcfdw_dump_ro",
    "CREATE TABLE users (id integer PRIMARY KEY, email text)",
    "CREATE TRIGGER users_inval AFTER UPDATE OR DELETE ON users FOR EACH ROW "
    "EXECUTE FUNCTION mc_invalidate('user:{id}', '@ring', 'email:{email}')",
    "CREATE TRIGGER users_inval_new AFTER INSERT ON users REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('user:{id}')",
    "ALTER TABLE users DISABLE TRIGGER users_inval_new",
    "REVOKE EXECUTE ON FUNCTION mc_set(text, text, interval, integer, name) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION mc_set(text, text, interval, integer, name) TO mcfdw_dump_app",
    "REVOKE EXECUTE ON FUNCTION mc_delete(text, name) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION mc_flush_all(name) TO mcfdw_dump_admin",
    "REVOKE SELECT ON mc_servers FROM PUBLIC",
    "GRANT SELECT ON mc_servers TO mcfdw_dump_ro",
    "ALTER DATABASE %s SET mcfdw.stats_timeout = '2s'" % SRC,
    "ALTER DATABASE %s SET mcfdw.warn_on_miss = off" % SRC,
    "ALTER ROLE mcfdw_dump_app IN DATABASE %s SET mcfdw.server = 'ring'" % SRC,
    "ALTER ROLE mcfdw_dump_app SET mcfdw.enable_batched_join = off",
]:
    q(c, stmt)
c.close()
want = catalog(SRC)
t.ok(all(want[k] for k in ("servers", "user_mappings", "foreign_tables", "triggers", "db_settings")),
     "the source database holds every kind of configuration", repr(want))
works(SRC, "source")

custom = os.path.join(TMP, "src.dump")
plain = os.path.join(TMP, "src.sql")
ok, out = run("pg_dump", "-Fc", "-f", custom, SRC)
t.ok(ok, "pg_dump -Fc", out)
ok, out = run("pg_dump", "-Fp", "-f", plain, SRC)
t.ok(ok, "pg_dump -Fp", out)
with open(plain) as f:
    text = f.read()
t.ok("CREATE SERVER memcached" in text and "CREATE USER MAPPING FOR mcfdw_dump_app SERVER secure" in text,
     "the plain dump holds the servers and their user mappings")

createdb("mcfdw_it_dump_fc").close()
ok, out = run("pg_restore", "--exit-on-error", "-d", "mcfdw_it_dump_fc", custom)
t.ok(ok, "pg_restore of the custom format into a new database", out)
same_catalog(catalog("mcfdw_it_dump_fc"), {k: x for k, x in want.items() if k != "db_settings"},
             "custom format restored")
works("mcfdw_it_dump_fc", "custom format restored")

createdb("mcfdw_it_dump_plain").close()
ok, out = run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "mcfdw_it_dump_plain", "-f", plain)
t.ok(ok, "psql -f of the plain format into a new database", out)
same_catalog(catalog("mcfdw_it_dump_plain"), {k: x for k, x in want.items() if k != "db_settings"},
             "plain format restored")
works("mcfdw_it_dump_plain", "plain format restored")

# --create: the database itself, its settings included, after the original is gone
created = os.path.join(TMP, "src-create.dump")
ok, out = run("pg_dump", "-Fc", "--create", "-f", created, SRC)
t.ok(ok, "pg_dump -Fc --create", out)
q(admin, 'DROP DATABASE "%s" WITH (FORCE)' % SRC)
ok, out = run("pg_restore", "--exit-on-error", "--create", "-d", "postgres", created)
t.ok(ok, "pg_restore --create after the database was dropped", out)
same_catalog(catalog(SRC), want, "restored with --create")
works(SRC, "restored with --create")
c = mcrig.pg_connect(dbname=SRC, user="mcfdw_dump_app")
t.is_(v(c, "SHOW mcfdw.server"), "ring", "restored with --create: ALTER ROLE ... IN DATABASE's setting applies")
c.close()
ok, out = run("pg_dumpall", "--globals-only")
t.ok(ok and 'ALTER ROLE mcfdw_dump_app SET "mcfdw.enable_batched_join" TO \'off\'' in out,
     "pg_dumpall --globals-only holds ALTER ROLE ... SET mcfdw.*",
     "\n".join(ln for ln in out.splitlines() if "mcfdw" in ln))

# ---- databases made at 1.0 and 1.1, updated ----------------------------------
for ver in ("1.0", "1.1"):
    db = "mcfdw_it_dump_v%s" % ver.replace(".", "")
    c = createdb(db)
    q(c, "CREATE EXTENSION mcfdw VERSION '%s'" % ver)
    for stmt in [
        # as the README of 1.0 and 1.1 said: ALTER the extension's server
        "ALTER SERVER memcached OPTIONS (SET servers '127.0.0.1:%d', ADD io_timeout '3s', "
        "ADD key_prefix 'v%s:')" % (ports[0], ver),
        "GRANT USAGE ON FOREIGN SERVER memcached TO mcfdw_dump_app",
        "CREATE USER MAPPING FOR PUBLIC SERVER memcached",
        "CREATE USER MAPPING FOR mcfdw_dump_app SERVER memcached OPTIONS (username 'app', password 'secret')",
        "CREATE FOREIGN TABLE kv (key text, value text) SERVER memcached OPTIONS (key_prefix 'kv:')",
        "CREATE TABLE items (id integer PRIMARY KEY)",
    ]:
        q(c, stmt)
    trigger = ("CREATE TRIGGER items_inval AFTER UPDATE OR DELETE ON items FOR EACH ROW "
               "EXECUTE FUNCTION mc_invalidate('item:{id}')")
    if ver != "1.0":            # 1.0 has no mc_invalidate
        q(c, trigger)
    before = catalog(db, without=("members", "function_acls", "view_acls", "wrapper", "extension"))
    mark = log_mark()
    q(c, "ALTER EXTENSION mcfdw UPDATE")
    t.is_(log_warnings(mark, db), [], "%s: ALTER EXTENSION UPDATE writes no WARNING to the server log" % ver)
    if ver == "1.0":
        q(c, trigger)
    c.close()
    c = mcrig.pg_connect(dbname=db)
    t.is_(v(c, "SELECT extversion FROM pg_extension WHERE extname = 'mcfdw'"), "1.2", "%s: updated to 1.2" % ver)
    works(db, "%s updated" % ver)
    q(c, "INSERT INTO items VALUES (1)")
    q(c, "SELECT mc_set('item:1', 'cached')")
    q(c, "INSERT INTO kv VALUES ('a', 'through the table')")
    t.is_(v(c, "SELECT value FROM kv WHERE key = 'a'"), "through the table",
          "%s updated: the foreign table reads and writes" % ver)
    q(c, "UPDATE items SET id = id WHERE id = 1")
    t.is_(v(c, "SELECT mc_get('item:1')"), None, "%s updated: the trigger invalidates" % ver)
    c.close()
    was = catalog(db)
    for k in ("servers", "user_mappings", "foreign_tables"):
        t.is_(was[k], before[k], "%s updated: %s unchanged by the update" % (ver, k))
    for k in ("members", "function_acls", "view_acls", "wrapper"):
        t.is_(was[k], fresh[k], "%s updated: %s as a fresh install's" % (ver, k))
    t.is_([s[0] for s in was["servers"]], ["memcached"],
          "%s updated: the server memcached is kept, not an extension member" % ver)

    dump = os.path.join(TMP, "%s.dump" % db)
    ok, out = run("pg_dump", "-Fc", "-f", dump, db)
    t.ok(ok, "%s updated: pg_dump -Fc" % ver, out)
    restored = db + "_r"
    createdb(restored).close()
    ok, out = run("pg_restore", "--exit-on-error", "-d", restored, dump)
    t.ok(ok, "%s updated: pg_restore into a new database" % ver, out)
    same_catalog(catalog(restored), {k: x for k, x in was.items() if k != "db_settings"},
                 "%s updated, restored" % ver)
    works(restored, "%s updated, restored" % ver)

admin.close()
admin = mcrig.pg_connect()
drop_all()
t.done()
