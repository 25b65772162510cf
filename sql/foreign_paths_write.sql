--
-- foreign_paths_write: every way PostgreSQL 15 writes into a foreign table
-- (docs/fdw_paths.md, "Writes") works or is refused with a clear error:
-- COPY, tuple routing, ON CONFLICT, TRUNCATE, triggers, generated columns,
-- constraints and defaults, views WITH CHECK OPTION, inheritance, MERGE,
-- prepared statements, EXPLAIN ANALYZE, savepoints, RETURNING.
--
SELECT mc_flush_all();
CREATE FOREIGN TABLE kv (key text, value text) SERVER memcached OPTIONS (key_prefix 'w:');
-- the SQLSTATE of a refusal
CREATE FUNCTION pg_temp.sqlstate(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;

-- COPY FROM into the foreign table: held and written in pipelined batches
-- of batch_size rows (the last at the end of the COPY)
COPY kv FROM STDIN;
c1	one
c2	two
\.
\echo rows copied: :ROW_COUNT
SELECT key, value FROM kv WHERE key IN ('c1', 'c2') ORDER BY key;
SELECT mc_get('w:c1');
CREATE FOREIGN TABLE kvb (key text, value text DEFAULT 'dflt') SERVER memcached
  OPTIONS (key_prefix 'w:', batch_size '100');
COPY kvb (key) FROM PROGRAM 'seq 1 250';
\echo rows copied: :ROW_COUNT
SELECT count(*), count(*) FILTER (WHERE value = 'dflt') FROM kvb
 WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(0, 300) g));
-- a bad row fails the COPY; the rows held with it are not written
COPY kv FROM STDIN;
c3	three
\N	null key
\.
SELECT mc_get('w:c3');
-- (from a program: psql 15, the client on every major here, ends CSV data
-- from STDIN with a line PostgreSQL 18 reads as data)
COPY kv FROM PROGRAM $$echo 'c4,"csv, quoted"'$$ WITH (FORMAT csv);
SELECT value FROM kv WHERE key = 'c4';
-- with a volatile DEFAULT (it could read the table) each row goes as it
-- comes: the second row's default reads the first row's value
CREATE FOREIGN TABLE vd (key text, value text DEFAULT coalesce(mc_get('vd:1') || '+', 'none'))
  SERVER memcached OPTIONS (key_prefix 'vd:', batch_size '100');
COPY vd (key) FROM STDIN;
1
2
\.
SELECT mc_get('vd:1'), mc_get('vd:2');
DROP FOREIGN TABLE vd;
-- under on_failure 'miss' each row goes as it comes: a row whose instance
-- cannot be reached is skipped and not counted
DO $$ BEGIN
  EXECUTE format('CREATE SERVER w_dead FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L)',
                 mctest.closed_addr(), 'miss');
END $$;
CREATE FOREIGN TABLE kv_dead (key text, value text) SERVER w_dead;
\set VERBOSITY terse
COPY kv_dead FROM STDIN;
d1	x
d2	y
\.
\echo rows copied: :ROW_COUNT
\set VERBOSITY default
DROP FOREIGN TABLE kv_dead;
DROP SERVER w_dead;

-- ON CONFLICT DO NOTHING is memcached's add: an existing key is skipped,
-- not counted and not returned; never overwritten
INSERT INTO kv VALUES ('a', '1');
INSERT INTO kv VALUES ('a', '2'), ('b', '2'), ('b', '3') ON CONFLICT DO NOTHING RETURNING *;
SELECT key, value FROM kv WHERE key IN ('a', 'b') ORDER BY key;
-- in pipelined batches too (no RETURNING): the count is of the rows stored
DO $$ DECLARE n bigint; BEGIN
  INSERT INTO kvb SELECT g::text, 'new' FROM generate_series(240, 260) g ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  RAISE NOTICE 'rows stored: %', n;
END $$;
SELECT value, count(*) FROM kvb WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(230, 270) g))
 GROUP BY value ORDER BY value;
-- a key twice in one batch: the first row is stored, the second skipped
INSERT INTO kvb VALUES ('d1', 'first'), ('d1', 'second') ON CONFLICT DO NOTHING;
\echo rows inserted: :ROW_COUNT
SELECT value FROM kvb WHERE key = 'd1';
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO kvb VALUES ('x', 'y') ON CONFLICT DO NOTHING;
-- a conflict target, and DO UPDATE: refused by PostgreSQL (no arbiter index)
INSERT INTO kv VALUES ('a', '3') ON CONFLICT (key) DO NOTHING;
INSERT INTO kv VALUES ('a', '3') ON CONFLICT (key) DO UPDATE SET value = excluded.value;
INSERT INTO kv VALUES ('a', '3') ON CONFLICT DO UPDATE SET value = excluded.value;
SELECT value FROM kv WHERE key = 'a';

-- TRUNCATE: refused (memcached cannot delete keys by prefix)
TRUNCATE kv;
SELECT pg_temp.sqlstate('TRUNCATE kv');

-- a foreign table as a partition: INSERT and COPY through the partitioned
-- table route rows into it
CREATE TABLE parted (key text, value text) PARTITION BY LIST (key);
CREATE TABLE parted_local PARTITION OF parted FOR VALUES IN ('l1', 'l2', 'l3');
CREATE FOREIGN TABLE parted_mc PARTITION OF parted FOR VALUES IN ('p1', 'p2', 'p3', 'p4')
  SERVER memcached OPTIONS (key_prefix 'pm:');
INSERT INTO parted VALUES ('p1', 'x'), ('l1', 'y') RETURNING tableoid::regclass, *;
COPY parted FROM STDIN;
p2	z
l2	w
\.
\echo rows copied: :ROW_COUNT
SELECT tableoid::regclass, * FROM parted WHERE key IN ('p1', 'p2', 'l1', 'l2') ORDER BY key;
SELECT mc_get('pm:p1'), mc_get('pm:p2');
INSERT INTO parted VALUES ('p1', 'again'), ('p3', 'new') ON CONFLICT DO NOTHING RETURNING *;
SELECT value FROM parted WHERE key = 'p1';
-- a row inserted into the partition directly meets its partition constraint
INSERT INTO parted_mc VALUES ('l9', 'no');
SELECT mc_get('pm:l9');
-- an UPDATE moves a row into the foreign partition
UPDATE parted SET key = 'p4' WHERE key = 'l1' RETURNING tableoid::regclass, *;
SELECT tableoid::regclass, * FROM parted WHERE key IN ('l1', 'p4');
-- ... and cannot move one out (here: the key cannot be updated)
UPDATE parted SET key = 'l1' WHERE key = 'p4';
-- partitioned on another column than the key
CREATE TABLE byval (key text, value text) PARTITION BY LIST (value);
CREATE TABLE byval_local PARTITION OF byval FOR VALUES IN ('local', 'other');
CREATE FOREIGN TABLE byval_mc PARTITION OF byval FOR VALUES IN ('cached')
  SERVER memcached OPTIONS (key_prefix 'bv:');
INSERT INTO byval VALUES ('k1', 'local'), ('k2', 'cached'), ('k3', 'other');
-- moving a row out of the foreign partition: refused, the item unchanged
UPDATE byval SET value = 'local' WHERE key = 'k2';
SELECT pg_temp.sqlstate($$UPDATE byval SET value = 'local' WHERE key = 'k2'$$);
SELECT mc_get('bv:k2');
-- moving a row into a foreign partition the same UPDATE updates: refused
UPDATE byval SET value = 'cached' WHERE key IN ('k1', 'k2');
SELECT pg_temp.sqlstate($$UPDATE byval SET value = 'cached' WHERE key IN ('k1', 'k2')$$);
-- ... and allowed when the UPDATE does not update that partition
UPDATE byval SET value = 'cached' WHERE value = 'local' RETURNING tableoid::regclass, *;
SELECT tableoid::regclass, * FROM byval WHERE key IN ('k1', 'k2', 'k3') ORDER BY key;
DROP TABLE byval;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO parted VALUES ('p3', 'e');
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  UPDATE parted SET value = 'f' WHERE key IN ('p3', 'l2');
-- COPY into a partitioned table holds no row when a trigger of the tree
-- could read the foreign partition: a local partition's AFTER trigger
-- sees the row copied into the foreign one before it
CREATE TABLE seen (what text);
CREATE TABLE tparted (key text, value text) PARTITION BY LIST (key);
CREATE TABLE tparted_local PARTITION OF tparted FOR VALUES IN ('l');
CREATE FOREIGN TABLE tparted_mc PARTITION OF tparted FOR VALUES IN ('f')
  SERVER memcached OPTIONS (key_prefix 'tp:');
CREATE FUNCTION pg_temp.seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO seen VALUES (coalesce(mc_get('tp:f'), 'nothing'));
  RETURN NULL;
END $$;
CREATE TRIGGER seen AFTER INSERT ON tparted_local FOR EACH ROW EXECUTE FUNCTION pg_temp.seen();
COPY tparted FROM STDIN;
f	written
l	local
\.
SELECT what FROM seen;
DROP TABLE tparted, seen;
-- MERGE into it through the partitioned table: refused by PostgreSQL
MERGE INTO parted t USING (VALUES ('p1', 'm')) s (key, value) ON t.key = s.key
  WHEN NOT MATCHED THEN INSERT VALUES (s.key, s.value);
DROP TABLE parted;

-- triggers: BEFORE and AFTER, row and statement; transition tables are
-- refused by PostgreSQL
CREATE TABLE trig_log (n serial, what text);
CREATE FUNCTION pg_temp.log_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO trig_log (what) VALUES (concat_ws(' ', TG_WHEN, TG_LEVEL, TG_OP,
    CASE WHEN TG_LEVEL = 'ROW' AND TG_OP <> 'INSERT' THEN 'old=' || OLD.key || ':' || OLD.value END,
    CASE WHEN TG_LEVEL = 'ROW' AND TG_OP <> 'DELETE' THEN 'new=' || NEW.key || ':' || NEW.value END));
  IF TG_LEVEL = 'ROW' AND TG_WHEN = 'BEFORE' THEN
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    IF NEW.value = 'skip' THEN RETURN NULL; END IF;
    IF NEW.value = 'rekey' THEN NEW.key := NEW.key || '2'; END IF;
    NEW.value := upper(NEW.value);
  END IF;
  RETURN NEW;
END $$;
CREATE FOREIGN TABLE tkv (key text, value text) SERVER memcached OPTIONS (key_prefix 't:');
CREATE TRIGGER b_row BEFORE INSERT OR UPDATE OR DELETE ON tkv FOR EACH ROW EXECUTE FUNCTION pg_temp.log_trig();
CREATE TRIGGER a_row AFTER INSERT OR UPDATE OR DELETE ON tkv FOR EACH ROW EXECUTE FUNCTION pg_temp.log_trig();
CREATE TRIGGER b_stmt BEFORE INSERT OR UPDATE OR DELETE ON tkv FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.log_trig();
CREATE TRIGGER a_stmt AFTER INSERT OR UPDATE OR DELETE ON tkv FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.log_trig();
CREATE TRIGGER a_trans AFTER INSERT ON tkv REFERENCING NEW TABLE AS nt
  FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.log_trig();
INSERT INTO tkv VALUES ('a', 'x'), ('b', 'skip') RETURNING *;
COPY tkv FROM STDIN;
c	y
d	skip
\.
\echo rows copied: :ROW_COUNT
UPDATE tkv SET value = 'u' WHERE key IN ('a', 'c') RETURNING *;
SELECT key, value FROM tkv WHERE key IN ('a', 'b', 'c', 'd') ORDER BY key;
-- a BEFORE trigger that changes the key: refused, nothing written
UPDATE tkv SET value = 'rekey' WHERE key = 'a';
SELECT mc_get('t:a'), mc_get('t:a2');
DELETE FROM tkv WHERE key IN ('a', 'c') RETURNING *;
SELECT what FROM trig_log ORDER BY n;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO tkv VALUES ('e', 'v');
DROP FOREIGN TABLE tkv;

-- generated columns are computed before the write
CREATE FOREIGN TABLE gen (key text, value text GENERATED ALWAYS AS ('v-' || key) STORED)
  SERVER memcached OPTIONS (key_prefix 'gen:');
INSERT INTO gen (key) VALUES ('a') RETURNING *;
COPY gen (key) FROM STDIN;
b
\.
SELECT mc_get('gen:a'), mc_get('gen:b');
DROP FOREIGN TABLE gen;
-- a key generated from the value: an UPDATE that changes it is refused
CREATE FOREIGN TABLE genkey (key text GENERATED ALWAYS AS (lower(value)) STORED, value text)
  SERVER memcached OPTIONS (key_prefix 'gk:');
INSERT INTO genkey (value) VALUES ('A') RETURNING *;
UPDATE genkey SET value = 'a' WHERE key = 'a' RETURNING *;
UPDATE genkey SET value = 'B' WHERE key = 'a';
SELECT pg_temp.sqlstate($$UPDATE genkey SET value = 'B' WHERE key = 'a'$$);
SELECT mc_get('gk:a'), mc_get('gk:b');
DROP FOREIGN TABLE genkey;

-- CHECK and NOT NULL constraints are checked before the write; DEFAULTs apply
CREATE FOREIGN TABLE chk (key text, value text DEFAULT 'dflt' CHECK (value <> 'bad'),
                          flags integer NOT NULL DEFAULT 3)
  SERVER memcached OPTIONS (key_prefix 'chk:');
INSERT INTO chk (key) VALUES ('a') RETURNING *;
INSERT INTO chk VALUES ('b', 'bad');
INSERT INTO chk VALUES ('c', 'ok', NULL);
COPY chk (key, value) FROM STDIN;
d	bad
\.
UPDATE chk SET value = 'bad' WHERE key = 'a';
SELECT pg_temp.sqlstate($$INSERT INTO chk VALUES ('b', 'bad')$$);
SELECT mc_get('chk:a'), mc_get('chk:b'), mc_get('chk:c'), mc_get('chk:d');
SELECT key, value, flags FROM chk WHERE key IN ('a', 'b', 'c', 'd');
DROP FOREIGN TABLE chk;

-- a view WITH CHECK OPTION: a row it would not show is not written
CREATE VIEW kv_short AS SELECT key, value FROM kv WHERE length(value) < 5 WITH CHECK OPTION;
INSERT INTO kv_short VALUES ('v1', 'ok') RETURNING *;
INSERT INTO kv_short VALUES ('v2', 'too long');
UPDATE kv_short SET value = 'too long' WHERE key = 'v1';
SELECT mc_get('w:v1'), mc_get('w:v2');
UPDATE kv_short SET value = 'ok2' WHERE key = 'v1' RETURNING *;
DELETE FROM kv_short WHERE key = 'v1' RETURNING *;
DROP VIEW kv_short;

-- a foreign table as a child of a local inheritance parent
CREATE TABLE inh (key text, value text);
CREATE FOREIGN TABLE inh_mc () INHERITS (inh) SERVER memcached OPTIONS (key_prefix 'inh:');
INSERT INTO inh VALUES ('l', 'local');
INSERT INTO inh_mc VALUES ('m', 'cached');
UPDATE inh SET value = value || '!' WHERE key IN ('l', 'm') RETURNING tableoid::regclass, *;
SELECT mc_get('inh:m');
DELETE FROM inh WHERE key IN ('l', 'm') RETURNING tableoid::regclass, *;
SELECT mc_get('inh:m');
DROP TABLE inh CASCADE;

-- MERGE: a foreign table as the source works; as the target PostgreSQL
-- refuses it
CREATE TABLE mtarget (key text PRIMARY KEY, value text);
INSERT INTO mtarget VALUES ('a', 'old'), ('z', 'keep');
MERGE INTO mtarget t USING (SELECT key, value FROM kv WHERE key IN ('a', 'b')) s ON t.key = s.key
  WHEN MATCHED THEN UPDATE SET value = s.value
  WHEN NOT MATCHED THEN INSERT VALUES (s.key, s.value);
SELECT * FROM mtarget ORDER BY key;
MERGE INTO kv USING mtarget m ON kv.key = m.key WHEN MATCHED THEN DELETE;
SELECT pg_temp.sqlstate('MERGE INTO kv USING mtarget m ON kv.key = m.key WHEN MATCHED THEN DELETE');
DROP TABLE mtarget;

-- UPDATE ... FROM, DELETE ... USING, a writable CTE feeding an INSERT
CREATE TABLE ks (k text, v text);
INSERT INTO ks VALUES ('j1', 'joined1'), ('j2', 'joined2');
INSERT INTO kv VALUES ('j1', 'old'), ('j2', 'old');
UPDATE kv SET value = ks.v FROM ks WHERE kv.key = ks.k RETURNING kv.*;
DELETE FROM kv USING ks WHERE kv.key = ks.k AND ks.v = 'joined1' RETURNING kv.*;
WITH u AS (UPDATE kv SET value = 'cte' WHERE key = 'j2' RETURNING *)
  INSERT INTO kv SELECT key || 'b', value FROM u RETURNING *;
SELECT key, value FROM kv WHERE key IN ('j1', 'j2', 'j2b') ORDER BY key;
DROP TABLE ks;
-- WHERE CURRENT OF: refused by PostgreSQL (a foreign row has no ctid)
CREATE FOREIGN TABLE kv_all (key text, value text) SERVER memcached
  OPTIONS (key_prefix 'w:', allow_full_scan 'true');
ALTER SERVER memcached OPTIONS (ADD allow_full_scan 'true');
BEGIN;
DECLARE cur CURSOR FOR SELECT * FROM kv_all WHERE key = 'j2';
FETCH cur;
UPDATE kv_all SET value = 'x' WHERE CURRENT OF cur;
ROLLBACK;
SELECT mc_get('w:j2');
DROP FOREIGN TABLE kv_all;
ALTER SERVER memcached OPTIONS (DROP allow_full_scan);

-- prepared statements see ALTER FOREIGN TABLE and ALTER SERVER
SET plan_cache_mode = force_generic_plan;
PREPARE ins(text, text) AS INSERT INTO kv VALUES ($1, $2);
PREPARE upd(text, text) AS UPDATE kv SET value = $2 WHERE key = $1;
PREPARE del(text) AS DELETE FROM kv WHERE key = $1;
EXECUTE ins('p', '1');
ALTER FOREIGN TABLE kv OPTIONS (SET key_prefix 'w2:');
EXECUTE ins('p', '2');
EXECUTE upd('p', '3');
SELECT mc_get('w:p'), mc_get('w2:p');
EXECUTE del('p');
SELECT mc_get('w:p'), mc_get('w2:p');
ALTER FOREIGN TABLE kv OPTIONS (SET key_prefix 'w:');
ALTER FOREIGN TABLE kv ADD COLUMN flags integer DEFAULT 5;
EXECUTE ins('q', 'v');
SELECT key, value, flags FROM kv WHERE key = 'q';
ALTER FOREIGN TABLE kv DROP COLUMN flags;
SELECT mctest.create('wsrv', 1);
CREATE FOREIGN TABLE kvs (key text, value text) SERVER wsrv;
PREPARE ins2(text, text) AS INSERT INTO kvs VALUES ($1, $2);
EXECUTE ins2('srv', 'one');
SELECT mctest.point('wsrv', 2);
EXECUTE ins2('srv', 'two');
SELECT mc_get('srv', 'memcached'), mc_get('srv', 'wsrv');
DEALLOCATE ALL;
RESET plan_cache_mode;
DROP FOREIGN TABLE kvs;
DROP SERVER wsrv;

-- EXPLAIN ANALYZE of each write
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO kv VALUES ('e1', 'x');
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  INSERT INTO kvb SELECT 'e' || g, 'x' FROM generate_series(1, 5) g;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  INSERT INTO kv VALUES ('e1', 'y'), ('e9', 'y') ON CONFLICT DO NOTHING;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE kv SET value = 'z' WHERE key = 'e1';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) DELETE FROM kv WHERE key IN ('e1', 'e9');
SELECT key FROM kv WHERE key IN ('e1', 'e9');

-- savepoints: memcached has no rollback, so a write stays when its
-- subtransaction is rolled back; a failed write leaves the session usable
BEGIN;
SAVEPOINT s1;
INSERT INTO kv VALUES ('s1', 'kept');
ROLLBACK TO s1;
SELECT value FROM kv WHERE key = 's1';
SAVEPOINT s2;
INSERT INTO kv VALUES ('s2', 'x'), (NULL, 'y');
ROLLBACK TO s2;
SELECT mc_get('w:s2');
SAVEPOINT s3;
COPY kv FROM STDIN;
s3	x
\N	y
\.
ROLLBACK TO s3;
SELECT mc_get('w:s3');
INSERT INTO kv VALUES ('s4', 'after') RETURNING *;
UPDATE kv SET value = 'after2' WHERE key = 's4' RETURNING *;
COMMIT;
SELECT value FROM kv WHERE key = 's4';
-- a COPY failing in an exception block: the batches before the failure
-- are written, the rows held with it are not, and the block goes on
CREATE FOREIGN TABLE kvc (key text CHECK (key <> '1150'), value text DEFAULT 'd')
  SERVER memcached OPTIONS (key_prefix 'w:', batch_size '100');
DO $$ BEGIN
  BEGIN
    COPY kvc (key) FROM PROGRAM 'seq 1001 1200';
  EXCEPTION WHEN check_violation THEN
    RAISE NOTICE 'COPY failed: %', SQLERRM;
  END;
  INSERT INTO kvc VALUES ('after', 'x');
END $$;
SELECT count(*) FROM kvc WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(1001, 1200) g));
SELECT value FROM kvc WHERE key = 'after';
DROP FOREIGN TABLE kvc;

DROP FOREIGN TABLE kv, kvb;
