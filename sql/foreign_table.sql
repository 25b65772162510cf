--
-- foreign_table: memcached as a table.  Key conditions become one
-- pipelined multi-get; everything else stays local.
--
SELECT mc_flush_all();
CREATE FOREIGN TABLE user_cache (key text, value jsonb, flags integer, cas bigint, ttl integer)
  SERVER memcached OPTIONS (key_prefix 'user:');

-- options and columns
CREATE FOREIGN TABLE bad (key text) SERVER memcached OPTIONS (nope '1');
CREATE FOREIGN TABLE bad (key text) SERVER memcached OPTIONS (batch_size '0');
CREATE FOREIGN TABLE bad (key text) SERVER memcached OPTIONS (allow_full_scan 'maybe');
CREATE FOREIGN TABLE bad (key text OPTIONS (field 'nope')) SERVER memcached;
CREATE FOREIGN TABLE bad (key text OPTIONS (colour 'red')) SERVER memcached;
CREATE FOREIGN TABLE nokey (k text) SERVER memcached;
SELECT * FROM nokey WHERE k = 'x';
CREATE FOREIGN TABLE intkey (key integer) SERVER memcached;
SELECT * FROM intkey WHERE key = 1;
CREATE FOREIGN TABLE twokeys (a text OPTIONS (field 'key'), b text OPTIONS (field 'key')) SERVER memcached;
SELECT * FROM twokeys WHERE a = 'x';
DROP FOREIGN TABLE nokey, intkey, twokeys;

-- INSERT, with RETURNING
INSERT INTO user_cache (key, value) VALUES ('1', '{"name": "ada"}'), ('2', '{"name": "bob"}');
INSERT INTO user_cache (key, value, flags, ttl) VALUES ('3', '{"name": "cy"}', 7, 600)
  RETURNING key, value, flags, ttl;
INSERT INTO user_cache (key) VALUES (NULL);
INSERT INTO user_cache (key, value) VALUES ('4', NULL);
INSERT INTO user_cache (key, value, ttl) VALUES ('4', '1', 0);
-- the table's key prefix goes before the key
SELECT mc_get('user:1'), mc_get('user:3'), mc_get('1');

-- every pushdown shape
SELECT key, value, flags FROM user_cache WHERE key = '1';
SELECT key, value FROM user_cache WHERE key IN ('1', '2', '3', 'missing') ORDER BY key;
SELECT key, value FROM user_cache WHERE key = ANY(ARRAY['1', '1', NULL, '2']) ORDER BY key;
SELECT key FROM user_cache WHERE key IN ('1', '2') OR key = '3' ORDER BY key;
SELECT key FROM user_cache WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(1, 5) g)) ORDER BY key;
SELECT key, flags, ttl BETWEEN 500 AND 600 AS ttl_ok, cas > 0 AS has_cas FROM user_cache WHERE key = '3';
SELECT key, ttl FROM user_cache WHERE key = '1';   -- no expiry: NULL
SELECT key FROM user_cache WHERE key = 'missing';
SELECT key FROM user_cache WHERE key = NULL;
-- other conditions stay local
SELECT key FROM user_cache WHERE key IN ('1', '2') AND value->>'name' = 'bob';
SELECT key FROM user_cache WHERE (key = '1' OR key = '2') AND key = '2';

EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM user_cache WHERE key = '42';
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM user_cache WHERE key IN ('1', '2', '3');
EXPLAIN (VERBOSE, COSTS OFF) SELECT key, value FROM user_cache WHERE key = ANY(ARRAY['1', '2', '2']);
EXPLAIN (VERBOSE, COSTS OFF) SELECT key FROM user_cache WHERE key IN ('1', '2') OR key = '3';
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT key FROM user_cache WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(1, 5) g));
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT key, flags FROM user_cache WHERE key IN ('1', '2') AND value->>'name' = 'bob';
EXPLAIN (VERBOSE, COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF)
  SELECT key FROM user_cache WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(1, 5) g));
-- a non-deterministic or non-text comparison is not a key condition
SELECT key FROM user_cache WHERE key LIKE '1%';

-- no key condition: an error with a hint
SELECT * FROM user_cache;
SELECT * FROM user_cache WHERE value->>'name' = 'ada';
SELECT * FROM user_cache WHERE key = '1' OR value IS NULL;
CREATE FOREIGN TABLE full_cache (key text, value text) SERVER memcached OPTIONS (allow_full_scan 'true');
ALTER SERVER memcached OPTIONS (ADD allow_full_scan 'true');
EXPLAIN (COSTS OFF) SELECT * FROM full_cache;   -- a full scan (foreign_fullscan)
ALTER SERVER memcached OPTIONS (DROP allow_full_scan);
DROP FOREIGN TABLE full_cache;

-- prepared statements with generic plans: parameters known when the scan starts
SET plan_cache_mode = force_generic_plan;
PREPARE by_keys(text[]) AS SELECT key, value FROM user_cache WHERE key = ANY($1) ORDER BY key;
EXECUTE by_keys('{1,2}');
EXECUTE by_keys('{3,nope,NULL}');
EXECUTE by_keys(NULL);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE by_keys('{1,2}');
PREPARE by_or(text, text) AS
  SELECT key FROM user_cache WHERE key IN ('1', $1) OR key = $2 ORDER BY key;
EXECUTE by_or('2', '3');
EXECUTE by_or('nope', NULL);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE by_or('2', '3');
PREPARE upd(text, jsonb) AS UPDATE user_cache SET value = $2 WHERE key = $1 RETURNING key, value;
EXECUTE upd('3', '{"name": "cyd"}');
RESET plan_cache_mode;
DEALLOCATE ALL;

-- joins on the key: NULL keys, duplicate keys and misses, as a nested loop
-- over the parameterized scan (foreign_join tests the batched join)
SET mcfdw.enable_batched_join = off;
CREATE TABLE users (id int, team int);
INSERT INTO users VALUES (1, 7), (2, 7), (3, 8), (4, 7), (NULL, 7), (1, 7);
SELECT u.id, c.value FROM users u JOIN user_cache c ON c.key = u.id::text ORDER BY u.id;
SELECT u.id, c.value FROM users u LEFT JOIN user_cache c ON c.key = u.id::text
 WHERE u.team = 7 ORDER BY u.id NULLS LAST;
SELECT u.id FROM users u WHERE EXISTS (SELECT 1 FROM user_cache c WHERE c.key = u.id::text) ORDER BY u.id;
SELECT u.id FROM users u WHERE u.id::text IN (SELECT key FROM user_cache) ORDER BY u.id;
SELECT u.id FROM users u WHERE NOT EXISTS (SELECT 1 FROM user_cache c WHERE c.key = u.id::text)
 ORDER BY u.id NULLS LAST;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id, c.value FROM users u LEFT JOIN user_cache c ON c.key = u.id::text WHERE u.team = 7;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id FROM users u WHERE EXISTS (SELECT 1 FROM user_cache c WHERE c.key = u.id::text);
RESET mcfdw.enable_batched_join;

-- UPDATE and DELETE by key, with RETURNING
UPDATE user_cache SET value = '{"name": "grace"}' WHERE key = '42' RETURNING key;
UPDATE user_cache SET value = '{"name": "grace"}' WHERE key = '1' RETURNING key, value;
UPDATE user_cache SET flags = 9, ttl = 300 WHERE key = '1' RETURNING key, value, flags, ttl;
SELECT key, value, flags, ttl BETWEEN 200 AND 300 AS ttl_ok FROM user_cache WHERE key = '1';
UPDATE user_cache SET key = 'x' WHERE key = '1';
UPDATE user_cache SET value = '{}';
EXPLAIN (VERBOSE, COSTS OFF) UPDATE user_cache SET value = '{}' WHERE key = '1';
-- cas: the row's cas makes the write a compare-and-swap; a conflict skips the row
SELECT cas AS old_cas FROM user_cache WHERE key = '2' \gset
SELECT mc_set('user:2', '{"name": "someone else"}');
UPDATE user_cache SET value = '"mine"', cas = :old_cas WHERE key = '2' RETURNING key;
SELECT value FROM user_cache WHERE key = '2';
UPDATE user_cache SET value = '"mine"' WHERE key = '2' AND cas <> :old_cas RETURNING key, value, cas <> :old_cas AS new_cas;
SELECT value FROM user_cache WHERE key = '2';
DELETE FROM user_cache WHERE key = ANY('{2,nope}') RETURNING key, value;
DELETE FROM user_cache WHERE key IN ('1', '3') RETURNING key;
SELECT key FROM user_cache WHERE key IN ('1', '2', '3');
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM user_cache WHERE key = ANY('{1,2}');

-- a stored value the column's type does not accept: an error naming the key
SELECT mc_set('user:bad', 'not json');
SELECT value FROM user_cache WHERE key = 'bad';
SELECT key FROM user_cache WHERE key = 'bad';  -- the value is not read
SELECT mc_set('user:bin', '\xff00'::bytea);
SELECT value FROM user_cache WHERE key = 'bin';

-- bytea and integer value columns, columns named by the option "field"
CREATE FOREIGN TABLE bin_cache (key text, value bytea) SERVER memcached OPTIONS (key_prefix 'bin:');
INSERT INTO bin_cache VALUES ('a', '\x00ff10'), ('b', '');
SELECT key, value FROM bin_cache WHERE key IN ('a', 'b') ORDER BY key;
SELECT mc_get_bytea('bin:a');
CREATE FOREIGN TABLE int_cache (k text OPTIONS (field 'key'), n integer OPTIONS (field 'value'),
                                f bigint OPTIONS (field 'flags'), note text)
  SERVER memcached OPTIONS (key_prefix 'int:', ttl '1h');
INSERT INTO int_cache VALUES ('a', 42, 4294967295, 'ignored'), ('b', -7, 0, NULL);
SELECT * FROM int_cache WHERE k IN ('a', 'b') ORDER BY k;
SELECT mc_get('int:a');
-- the table's ttl, seen through another table over the same keys
CREATE FOREIGN TABLE int_meta (key text, ttl integer) SERVER memcached OPTIONS (key_prefix 'int:');
SELECT key, ttl BETWEEN 3000 AND 3600 AS table_ttl FROM int_meta WHERE key = 'a';
EXPLAIN (VERBOSE, COSTS OFF) SELECT key, ttl FROM int_meta WHERE key = 'a';
EXPLAIN (VERBOSE, COSTS OFF) SELECT key FROM int_meta WHERE key = 'a';
SELECT key FROM int_meta WHERE key IN ('a', 'zz');
DROP FOREIGN TABLE int_meta;
SELECT mc_set('int:c', '4.5');
SELECT * FROM int_cache WHERE k = 'c';
INSERT INTO int_cache VALUES ('d', 1, -1);
DROP FOREIGN TABLE bin_cache, int_cache;

-- INSERT ... SELECT goes in pipelined batches of batch_size rows
CREATE FOREIGN TABLE batch_cache (key text, value text) SERVER memcached
  OPTIONS (key_prefix 'batch:', batch_size '100');
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO batch_cache SELECT g::text, 'v' || g FROM generate_series(1, 250) g;
INSERT INTO batch_cache SELECT g::text, 'v' || g FROM generate_series(1, 250) g;
SELECT count(*), min(value), max(value) FROM batch_cache
 WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(0, 300) g));
DROP FOREIGN TABLE batch_cache;

-- several instances: EXPLAIN counts the instances the keys route to
SELECT mctest.create('ft4', 1, 2, 3, 4);
CREATE FOREIGN TABLE spread (key text, value text) SERVER ft4;
INSERT INTO spread SELECT g::text, 'v' || g FROM generate_series(1, 40) g;
-- (64 keys: which instance a key routes to depends on the rig's ports)
SELECT '{' || string_agg(g::text, ',') || '}' AS keys64 FROM generate_series(1, 64) g \gset
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM spread WHERE key = ANY(:'keys64');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM spread WHERE key IN ('1', '1');
SELECT count(*) FROM spread WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(1, 50) g));
SELECT count(*) FROM spread WHERE key = ANY(ARRAY(SELECT g::text FROM generate_series(1, 50) g))
   AND value = mc_get(key, 'ft4');
DROP FOREIGN TABLE spread;
DROP SERVER ft4;

-- on_failure 'miss': a row whose instance is unreachable is not written,
-- not counted and not returned; reads of its keys are misses.  One warning
-- per statement.
DO $$ BEGIN
  EXECUTE format('CREATE SERVER ft_half FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L)',
                 mctest.addrs(1) || ',' || mctest.closed_addr(), 'miss');
END $$;
CREATE FOREIGN TABLE half (key text, value text) SERVER ft_half OPTIONS (key_prefix 'half:');
\set VERBOSITY terse
CREATE TEMP TABLE half_keys AS
  SELECT g::text AS k, mc_set('half:' || g, 'probe', server => 'ft_half') AS live
    FROM generate_series(1, 40) g;
SELECT count(*) FILTER (WHERE live) > 0 AS some_live, count(*) FILTER (WHERE NOT live) > 0 AS some_dead
  FROM half_keys;
SELECT count(*) FILTER (WHERE live) AS nlive FROM half_keys \gset
SELECT min(k) AS lk FROM half_keys WHERE live \gset
SELECT min(k) AS dk FROM half_keys WHERE NOT live \gset
-- INSERT ... SELECT ... RETURNING (one row at a time) returns the rows written
CREATE TEMP TABLE half_tag (n bigint);
WITH ins AS (INSERT INTO half SELECT k, 'w' || k FROM half_keys RETURNING key)
  INSERT INTO half_tag SELECT count(*) FROM ins;
SELECT n = :nlive AS returning_live_only FROM half_tag;
-- without RETURNING (pipelined batches) the row count counts the rows written
DO $$ DECLARE n bigint; BEGIN
  INSERT INTO half SELECT k, 'x' || k FROM half_keys;
  GET DIAGNOSTICS n = ROW_COUNT;
  RAISE NOTICE 'batched insert counted the live rows: %', n = (SELECT count(*) FROM half_keys WHERE live);
END $$;
SELECT count(*) = :nlive AS read_live_only, bool_and(value = 'x' || key) AS values_ok
  FROM half WHERE key = ANY(ARRAY(SELECT k FROM half_keys));
-- single rows: the dead instance's row is skipped, the live one's written
INSERT INTO half VALUES (:'dk', 'd') RETURNING key;
INSERT INTO half VALUES (:'lk', 'l') RETURNING key = :'lk' AS live_key;
UPDATE half SET value = 'u' WHERE key IN (:'lk', :'dk') RETURNING key = :'lk' AS live_key, value;
DELETE FROM half WHERE key IN (:'lk', :'dk') RETURNING key = :'lk' AS live_key;
\set VERBOSITY default
DROP FOREIGN TABLE half;
DROP SERVER ft_half;

DROP TABLE users;
DROP FOREIGN TABLE user_cache;

-- a compressed value (written compressed by mc_set) inflates in a scan
DO $$ BEGIN
  EXECUTE format('CREATE SERVER ft_z FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, compression %L, compressed_flag %L, compress_threshold %L)',
                 mctest.addrs(1), 'zlib', '2', '64');
END $$;
SELECT mc_set('z1', repeat('compress me ', 100), server => 'ft_z');
CREATE FOREIGN TABLE zt (key text, value text, flags integer) SERVER ft_z;
SELECT (SELECT value FROM zt WHERE key = 'z1') = repeat('compress me ', 100) AS inflated,
       (SELECT flags FROM zt WHERE key = 'z1') AS flags;
DROP FOREIGN TABLE zt;
DROP SERVER ft_z;
