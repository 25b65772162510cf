--
-- read_only: the server option "writers" lets a server's owner give roles
-- read access without write access (every path that stores, deletes,
-- touches, counts or flushes refuses them with 42501), and a full scan,
-- which lists every key of the server, needs the server's own
-- allow_full_scan besides the table's.
--
CREATE ROLE mc_ro_owner;
CREATE ROLE mc_ro_writers;
CREATE ROLE mc_ro_writer IN ROLE mc_ro_writers;
CREATE ROLE mc_ro_reader;
GRANT USAGE ON FOREIGN DATA WRAPPER mcfdw TO mc_ro_owner;
CREATE SCHEMA ro_reader AUTHORIZATION mc_ro_reader;
SELECT mctest.create('ro', 1);
ALTER SERVER ro OWNER TO mc_ro_owner;
GRANT USAGE ON FOREIGN SERVER ro TO mc_ro_reader, mc_ro_writer;
-- runs a statement, says what came of it
CREATE FUNCTION ro_try(stmt text) RETURNS text LANGUAGE plpgsql AS
$$ BEGIN
     EXECUTE stmt;
     RETURN 'ok';
   EXCEPTION WHEN OTHERS THEN
     RETURN SQLSTATE || ' ' || SQLERRM;
   END $$;
SELECT mc_set('ro:k', 'v', server => 'ro');

-- without the option every role with USAGE writes (as in 1.1)
SET ROLE mc_ro_reader;
SELECT mc_set('ro:k', 'v', server => 'ro');
RESET ROLE;

-- the option's values: role names as search_path takes them; they must exist
ALTER SERVER ro OPTIONS (ADD writers 'mc_ro_nosuch');
ALTER SERVER ro OPTIONS (ADD writers 'mc_ro_writers, public');
ALTER SERVER ro OPTIONS (ADD writers 'mc_ro_writers, "MC_RO_WRITERS"');
ALTER SERVER ro OPTIONS (ADD writers 'mc_ro_writers,');
ALTER SERVER ro OPTIONS (ADD writers '"mc_ro_writers');
ALTER SERVER ro OPTIONS (ADD allow_full_scan 'maybe');
-- a foreign table's options are not the server's
CREATE FOREIGN TABLE ro_bad (key text) SERVER ro OPTIONS (writers 'mc_ro_writers');
CREATE USER MAPPING FOR mc_ro_reader SERVER ro OPTIONS (writers 'mc_ro_reader');

-- the reader cannot give itself write access: only the owner alters the server
SET ROLE mc_ro_reader;
ALTER SERVER ro OPTIONS (ADD writers 'mc_ro_reader');
ALTER SERVER ro OPTIONS (ADD allow_full_scan 'true');
RESET ROLE;
SET ROLE mc_ro_owner;
ALTER SERVER ro OPTIONS (ADD writers ' MC_RO_Writers ');
RESET ROLE;
SELECT o FROM pg_foreign_server, unnest(srvoptions) o
 WHERE srvname = 'ro' AND o NOT LIKE 'servers=%';

-- a write by the reader: refused, with who may write
SET ROLE mc_ro_reader;
SELECT mc_set('ro:k', 'overwritten', server => 'ro');
-- reads are allowed
SELECT mc_get('ro:k', 'ro'), mc_get_bytea('ro:k', 'ro');
SELECT value, flags, cas > 0 AS has_cas FROM mc_gets('ro:k', 'ro');
SELECT value FROM mc_gets_bytea('ro:k', 'ro');
SELECT value FROM mc_get_raw('ro:k', 'ro');
SELECT key, value FROM mc_get_multi(ARRAY['ro:k', 'ro:nope'], 'ro');
SELECT key, value FROM mc_get_multi_bytea(ARRAY['ro:k'], 'ro');
SELECT size, stale FROM mc_meta('ro:k', 'ro');
SELECT count(*) > 0 AS has_stats FROM mc_stats('ro');
RESET ROLE;
GRANT EXECUTE ON FUNCTION mc_flush_all(name) TO mc_ro_reader, mc_ro_writer, mc_ro_owner;

-- every write path, as the reader, the writer and the owner
CREATE TABLE ro_writes (n serial, stmt text);
INSERT INTO ro_writes (stmt) VALUES
  ($$SELECT mc_set('ro:w', 'x', server => 'ro')$$),
  ($$SELECT mc_set('ro:w', 'x'::bytea, server => 'ro')$$),
  ($$SELECT mc_add('ro:w2', 'x', server => 'ro')$$),
  ($$SELECT mc_add('ro:w2', 'x'::bytea, server => 'ro')$$),
  ($$SELECT mc_replace('ro:w', 'x', server => 'ro')$$),
  ($$SELECT mc_replace('ro:w', 'x'::bytea, server => 'ro')$$),
  ($$SELECT mc_append('ro:w', 'x', 'ro')$$),
  ($$SELECT mc_append('ro:w', 'x'::bytea, 'ro')$$),
  ($$SELECT mc_prepend('ro:w', 'x', 'ro')$$),
  ($$SELECT mc_prepend('ro:w', 'x'::bytea, 'ro')$$),
  ($$SELECT mc_cas('ro:w', 'x', 1, server => 'ro')$$),
  ($$SELECT mc_cas('ro:w', 'x'::bytea, 1, server => 'ro')$$),
  ($$SELECT mc_set_until('ro:w', 'x', now() + '1h', server => 'ro')$$),
  ($$SELECT mc_set_until('ro:w', 'x'::bytea, now() + '1h', server => 'ro')$$),
  ($$SELECT mc_add_until('ro:w3', 'x', now() + '1h', server => 'ro')$$),
  ($$SELECT mc_add_until('ro:w3', 'x'::bytea, now() + '1h', server => 'ro')$$),
  ($$SELECT mc_replace_until('ro:w', 'x', now() + '1h', server => 'ro')$$),
  ($$SELECT mc_replace_until('ro:w', 'x'::bytea, now() + '1h', server => 'ro')$$),
  ($$SELECT mc_cas_until('ro:w', 'x', 1, now() + '1h', server => 'ro')$$),
  ($$SELECT mc_cas_until('ro:w', 'x'::bytea, 1, now() + '1h', server => 'ro')$$),
  ($$SELECT mc_delete('ro:w2', 'ro')$$),
  ($$SELECT mc_mark_stale('ro:w', server => 'ro')$$),
  ($$SELECT mc_touch('ro:w', '1h', 'ro')$$),
  ($$SELECT mc_touch_until('ro:w', now() + '1h', 'ro')$$),
  ($$SELECT mc_gat('ro:w', '1h', 'ro')$$),
  ($$SELECT mc_gat_bytea('ro:w', '1h', 'ro')$$),
  ($$SELECT mc_gat_until('ro:w', now() + '1h', 'ro')$$),
  ($$SELECT mc_gat_bytea_until('ro:w', now() + '1h', 'ro')$$),
  ($$SELECT mc_incr('ro:n', 1, 0, server => 'ro')$$),
  ($$SELECT mc_decr('ro:n', 1, 0, server => 'ro')$$),
  ($$SELECT mc_incr_until('ro:n', 1, 0, now() + '1h', 'ro')$$),
  ($$SELECT mc_decr_until('ro:n', 1, 0, now() + '1h', 'ro')$$),
  ($$SELECT mc_get_lease('ro:lease', '10s', server => 'ro')$$),
  ($$SELECT mc_get_lease_bytea('ro:lease', '10s', server => 'ro')$$),
  ($$SELECT mc_set_multi(ARRAY['ro:m'], ARRAY['x'], server => 'ro')$$),
  ($$SELECT mc_set_multi(ARRAY['ro:m'], ARRAY['x'::bytea], server => 'ro')$$),
  ($$SELECT mc_delete_multi(ARRAY['ro:m'], 'ro')$$),
  ($$SELECT mc_touch_multi(ARRAY['ro:w'], '1h', 'ro')$$),
  ($$SELECT mc_delete_on_commit('ro:w', 'ro')$$),
  ($$SELECT mc_set_on_commit('ro:w', 'x', server => 'ro')$$),
  ($$SELECT mc_set_on_commit('ro:w', 'x'::bytea, server => 'ro')$$),
  ($$SELECT mc_flush_all('ro')$$);
GRANT SELECT ON ro_writes TO PUBLIC;
SET ROLE mc_ro_reader;
SELECT n, stmt, ro_try(stmt) FROM ro_writes ORDER BY n;
SET ROLE mc_ro_writer;
SELECT n, ro_try(stmt) FROM ro_writes ORDER BY n;
SET ROLE mc_ro_owner;
SELECT n, ro_try(stmt) FROM ro_writes ORDER BY n;
RESET ROLE;
-- NULL arguments write nothing, and are not refused
SET ROLE mc_ro_reader;
SELECT mc_set(NULL, 'x', server => 'ro'), mc_delete(NULL, 'ro');
RESET ROLE;

-- on-commit writes are refused when queued, not lost after the commit
SELECT mc_set('ro:oc', 'cached', server => 'ro');
SET ROLE mc_ro_reader;
BEGIN;
SELECT mc_delete_on_commit('ro:oc', 'ro');
ROLLBACK;
RESET ROLE;
SELECT mc_get('ro:oc', 'ro');

-- the invalidation trigger writes as the role whose statement fired it
CREATE TABLE ro_rows (id int PRIMARY KEY, v text);
CREATE TRIGGER ro_rows_inv AFTER INSERT OR UPDATE OR DELETE ON ro_rows
  FOR EACH ROW EXECUTE FUNCTION mc_invalidate('@ro', 'ro:row:{id}');
GRANT SELECT, INSERT, UPDATE, DELETE ON ro_rows TO mc_ro_reader, mc_ro_writer;
SELECT mc_set('ro:row:1', 'cached', server => 'ro');
SET ROLE mc_ro_reader;
INSERT INTO ro_rows VALUES (1, 'a');
SET ROLE mc_ro_writer;
INSERT INTO ro_rows VALUES (1, 'a');
RESET ROLE;
SELECT mc_get('ro:row:1', 'ro');

-- foreign tables: INSERT, UPDATE, DELETE refused at executor start
CREATE FOREIGN TABLE ro_cache (key text, value text) SERVER ro OPTIONS (key_prefix 'ro:ft:');
GRANT ALL ON ro_cache TO mc_ro_reader, mc_ro_writer, mc_ro_owner;
INSERT INTO ro_cache VALUES ('a', '1'), ('b', '2');
SET ROLE mc_ro_reader;
SELECT * FROM ro_cache WHERE key IN ('a', 'b') ORDER BY key;
INSERT INTO ro_cache VALUES ('c', '3');
UPDATE ro_cache SET value = 'x' WHERE key = 'a';
DELETE FROM ro_cache WHERE key = 'b';
-- EXPLAIN alone writes nothing; EXPLAIN ANALYZE runs the write
EXPLAIN (COSTS OFF) DELETE FROM ro_cache WHERE key = 'b';
EXPLAIN (COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF) DELETE FROM ro_cache WHERE key = 'b';
-- a refused write leaves nothing half-done
INSERT INTO ro_cache SELECT g::text, 'x' FROM generate_series(1, 10) g;
SELECT count(*) FROM ro_cache WHERE key IN ('1', '2', 'c');
-- COPY and a row routed into a foreign partition come through the same check
COPY ro_cache FROM STDIN;
d	4
\.
RESET ROLE;
CREATE TABLE ro_parted (key text, value text) PARTITION BY LIST (key);
CREATE FOREIGN TABLE ro_part_d PARTITION OF ro_parted FOR VALUES IN ('d')
  SERVER ro OPTIONS (key_prefix 'ro:ft:');
GRANT ALL ON ro_parted, ro_part_d TO mc_ro_reader;
SET ROLE mc_ro_reader;
INSERT INTO ro_parted VALUES ('d', '4');
SELECT count(*) FROM ro_cache WHERE key = 'd';
RESET ROLE;
DROP TABLE ro_parted;
SET ROLE mc_ro_writer;
INSERT INTO ro_cache VALUES ('c', '3');
UPDATE ro_cache SET value = 'x' WHERE key = 'a';
DELETE FROM ro_cache WHERE key = 'b';
SET ROLE mc_ro_owner;
UPDATE ro_cache SET value = 'y' WHERE key = 'a';
RESET ROLE;
SELECT * FROM ro_cache WHERE key IN ('a', 'b', 'c') ORDER BY key;

-- SECURITY DEFINER: the check is the definer's, as USAGE's is
CREATE FUNCTION ro_writer_set(k text, v text) RETURNS boolean LANGUAGE sql
  SECURITY DEFINER AS $$ SELECT mc_set(k, v, server => 'ro') $$;
ALTER FUNCTION ro_writer_set(text, text) OWNER TO mc_ro_writer;
SET ROLE mc_ro_reader;
SELECT ro_writer_set('ro:def', 'by definer');
SELECT mc_get('ro:def', 'ro');
RESET ROLE;

-- membership changes take effect at once
REVOKE mc_ro_writers FROM mc_ro_writer;
SET ROLE mc_ro_writer;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
RESET ROLE;
GRANT mc_ro_writers TO mc_ro_writer;
SET ROLE mc_ro_writer;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
RESET ROLE;
-- writers '': only the owner (and superusers) write
ALTER SERVER ro OPTIONS (SET writers '');
SET ROLE mc_ro_writer;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
SET ROLE mc_ro_owner;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
RESET ROLE;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
-- a listed role dropped later matches nobody; the option no longer validates
CREATE ROLE mc_ro_gone;
GRANT mc_ro_gone TO mc_ro_reader;
ALTER SERVER ro OPTIONS (SET writers 'mc_ro_gone');
SET ROLE mc_ro_reader;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
RESET ROLE;
DROP ROLE mc_ro_gone;
SET ROLE mc_ro_reader;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
RESET ROLE;
ALTER SERVER ro OPTIONS (ADD io_timeout '2s');
-- dropping the option: everyone with USAGE writes again
ALTER SERVER ro OPTIONS (DROP writers);
SET ROLE mc_ro_reader;
SELECT ro_try($$SELECT mc_set('ro:k', 'v', server => 'ro')$$);
RESET ROLE;

-- full scans need the server owner's consent: a role with USAGE and CREATE
-- on a schema makes its own table with allow_full_scan, and is refused
SELECT mc_set('ro:secret:1', 'other prefix', server => 'ro');
SET ROLE mc_ro_reader;
CREATE FOREIGN TABLE ro_reader.everything (key text, value text) SERVER ro
  OPTIONS (allow_full_scan 'true');
-- no item count is asked of memcached when planning a refused full scan
SELECT sum(requests) AS before FROM mc_servers WHERE server = 'ro' \gset
EXPLAIN (COSTS OFF)
  SELECT e.key FROM (VALUES ('ro:secret:1'), ('ro:nope')) v(k) JOIN ro_reader.everything e ON e.key = v.k;
SELECT sum(requests) - :before AS requests FROM mc_servers WHERE server = 'ro';
SELECT key, value FROM ro_reader.everything;
EXPLAIN (COSTS OFF) SELECT * FROM ro_reader.everything;
SELECT count(*) FROM ro_reader.everything WHERE value = 'other prefix';
-- a key condition needs no full scan
SELECT key, value FROM ro_reader.everything WHERE key = 'ro:secret:1';
RESET ROLE;
-- with the server's consent
ALTER SERVER ro OPTIONS (ADD allow_full_scan 'true');
SET ROLE mc_ro_reader;
SELECT key, value FROM ro_reader.everything WHERE key LIKE 'ro:secret:%';
PREPARE ro_scan AS SELECT count(*) > 0 AS listed FROM ro_reader.everything;
EXECUTE ro_scan;
RESET ROLE;
-- consent withdrawn: a plan made before is planned again, and refused
ALTER SERVER ro OPTIONS (SET allow_full_scan 'false');
SET ROLE mc_ro_reader;
EXECUTE ro_scan;
DEALLOCATE ro_scan;
DROP FOREIGN TABLE ro_reader.everything;
RESET ROLE;

DROP TABLE ro_rows, ro_writes;
DROP FOREIGN TABLE ro_cache;
DROP FUNCTION ro_writer_set(text, text);
DROP FUNCTION ro_try(text);
REVOKE EXECUTE ON FUNCTION mc_flush_all(name) FROM mc_ro_reader, mc_ro_writer, mc_ro_owner;
DROP SERVER ro;
DROP SCHEMA ro_reader;
REVOKE USAGE ON FOREIGN DATA WRAPPER mcfdw FROM mc_ro_owner;
DROP ROLE mc_ro_owner, mc_ro_writer, mc_ro_writers, mc_ro_reader;
