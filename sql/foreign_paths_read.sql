--
-- foreign_paths_read: every read path PostgreSQL 15 offers into a foreign
-- table, at a small work_mem so tuplestores spill to disk: key lists and
-- results larger than work_mem (hits, misses, compressed values), full
-- scans, the batched join, ANALYZE, IMPORT FOREIGN SCHEMA, row locks,
-- cursors and rescans, parallel plans.  docs/fdw_paths.md lists them.
--
SELECT mctest.create('rp', 2);
ALTER SERVER rp OPTIONS (ADD compression 'zlib', ADD compressed_flag '2',
                         ADD compress_threshold '100', ADD allow_full_scan 'true');
SELECT mc_flush_all('rp');
-- rows of mc_get_multi's shape (laid out by hand), and general rows
CREATE FOREIGN TABLE rp_kv (key text, value text, flags integer) SERVER rp
  OPTIONS (key_prefix 'r:');
CREATE FOREIGN TABLE rp_wide (key text, value text, flags integer, cas bigint)
  SERVER rp OPTIONS (key_prefix 'r:');
CREATE FOREIGN TABLE rp_full (key text, value text, flags integer) SERVER rp
  OPTIONS (key_prefix 'r:', allow_full_scan 'true');
-- 4,000 items: short plain values, and every fifth long (compressed)
SELECT mc_set_multi(array_agg('r:' || g),
                    array_agg(CASE WHEN g % 5 = 0 THEN repeat('v' || g, 60) ELSE 'v' || g END),
                    server => 'rp')
  FROM generate_series(1, 4000) g;
SELECT count(*) FILTER (WHERE (mc_get_raw('r:' || g, 'rp')).flags = 2) AS compressed
  FROM generate_series(1, 20) g;
CREATE TABLE rp_expect AS
  SELECT g, g::text AS k,
         CASE WHEN g % 5 = 0 THEN repeat('v' || g, 60) ELSE 'v' || g END AS v
    FROM generate_series(1, 4000) g;
SET work_mem = '64kB';
SET mcfdw.debug_check_rows = on;

-- key = ANY (ARRAY (SELECT ...)): 6,000 keys (4,000 hits, 2,000 misses),
-- rows past work_mem: the tuplestore spills, rows read back from disk
SELECT count(*), count(*) FILTER (WHERE value = e.v) AS same,
       count(*) FILTER (WHERE flags = 2) AS compressed
  FROM rp_kv JOIN rp_expect e ON e.k = rp_kv.key
 WHERE rp_kv.key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
SELECT count(*), sum(length(value)), md5(string_agg(key || value, ',' ORDER BY key))
    = (SELECT md5(string_agg(k || v, ',' ORDER BY k)) FROM rp_expect) AS same
  FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
SELECT count(*), sum(length(value)), count(cas) AS with_cas
  FROM rp_wide WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(-2000, 4000) g));
-- the same through mc_get_multi and IN (SELECT ...)
SELECT count(*) FROM mc_get_multi(ARRAY (SELECT 'r:' || g FROM generate_series(1, 6000) g), 'rp');
SELECT count(*), sum(length(value))
  FROM rp_kv WHERE key IN (SELECT g::text FROM generate_series(1, 6000) g);
-- a generic plan's parameter: the same keys, scanned again
PREPARE rp_keys(text[]) AS SELECT count(*), sum(length(value)) FROM rp_kv WHERE key = ANY ($1);
SET plan_cache_mode = force_generic_plan;
SELECT array_agg(g::text) AS rp_keys FROM generate_series(1, 6000) g \gset
EXECUTE rp_keys(:'rp_keys');
EXECUTE rp_keys(:'rp_keys');
RESET plan_cache_mode;
DEALLOCATE rp_keys;

-- full scan: batches whose rows outgrow work_mem
SELECT count(*), sum(length(value)), count(*) FILTER (WHERE flags = 2) AS compressed
  FROM rp_full;
SELECT md5(string_agg(key || value, ',' ORDER BY key))
    = (SELECT md5(string_agg(k || v, ',' ORDER BY k)) FROM rp_expect) AS same
  FROM rp_full;

-- batched join: 6,000 outer rows, batches past work_mem
EXPLAIN (COSTS OFF)
SELECT count(*) FROM generate_series(1, 6000) g JOIN rp_kv ON rp_kv.key = g::text;
SELECT count(*), sum(length(value)) FROM generate_series(1, 6000) g
  JOIN rp_kv ON rp_kv.key = g::text;
SELECT count(*), count(value) FROM generate_series(1, 6000) g
  LEFT JOIN rp_kv ON rp_kv.key = g::text;

-- a parameterized scan as the inner side of a nested loop
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET mcfdw.enable_batched_join = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM generate_series(1, 6000) g JOIN rp_kv ON rp_kv.key = g::text;
SELECT count(*), sum(length(value)) FROM generate_series(1, 6000) g
  JOIN rp_kv ON rp_kv.key = g::text;
-- the inner scan rescanned per outer row, its parameter changing
EXPLAIN (COSTS OFF)
SELECT count(*), sum(length(rp_kv.value))
  FROM (SELECT (g % 3 + 1)::text AS k FROM generate_series(1, 30) g) o
  JOIN rp_kv ON rp_kv.key = o.k;
SELECT count(*), sum(length(rp_kv.value))
  FROM (SELECT (g % 3 + 1)::text AS k FROM generate_series(1, 30) g) o
  JOIN rp_kv ON rp_kv.key = o.k;
-- ... and with a key array per outer row (each scan's rows past work_mem)
EXPLAIN (COSTS OFF)
SELECT o, count(*), sum(length(value))
  FROM generate_series(0, 2) o,
       LATERAL (SELECT array_agg((g + o * 1000)::text) AS a FROM generate_series(1, 3000) g) x
  JOIN rp_kv ON rp_kv.key = ANY (x.a)
 GROUP BY o ORDER BY o;
SELECT o, count(*), sum(length(value))
  FROM generate_series(0, 2) o,
       LATERAL (SELECT array_agg((g + o * 1000)::text) AS a FROM generate_series(1, 3000) g) x
  JOIN rp_kv ON rp_kv.key = ANY (x.a)
 GROUP BY o ORDER BY o;
RESET mcfdw.enable_batched_join;
-- the batched join rescanned: as the inner side of a nested loop
SET enable_material = off;
EXPLAIN (COSTS OFF)
SELECT o, count(*) FROM generate_series(1, 3) o,
  LATERAL (SELECT 1 FROM generate_series(1, 3000) g JOIN rp_kv ON rp_kv.key = g::text
            OFFSET 0) j GROUP BY o ORDER BY o;
SELECT o, count(*) FROM generate_series(1, 3) o,
  LATERAL (SELECT 1 FROM generate_series(1, 3000) g JOIN rp_kv ON rp_kv.key = g::text
            OFFSET 0) j GROUP BY o ORDER BY o;
RESET enable_material;
-- ... and in a correlated subquery
SELECT o, (SELECT count(*) FROM generate_series(1, 3000) g
             JOIN rp_kv ON rp_kv.key = g::text WHERE g % o = 0)
  FROM generate_series(1, 3) o ORDER BY o;
-- a merge join over the scan's sorted rows
SET enable_nestloop = off;
SET enable_mergejoin = on;
SET mcfdw.enable_batched_join = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k
 WHERE rp_kv.key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
SELECT count(*), sum(length(value)) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k
 WHERE rp_kv.key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
RESET mcfdw.enable_batched_join;
RESET enable_nestloop;
RESET enable_hashjoin;
RESET enable_mergejoin;
-- TABLESAMPLE is for tables: refused by PostgreSQL
SELECT count(*) FROM rp_full TABLESAMPLE SYSTEM (10);

-- cursors: SCROLL (the executor materializes above the scan), WITH HOLD
BEGIN;
DECLARE c SCROLL CURSOR FOR
  SELECT key, length(value) FROM rp_kv
   WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g)) ORDER BY key;
FETCH FIRST c;
FETCH LAST c;
FETCH BACKWARD 2 c;
FETCH ABSOLUTE 1000 c;
FETCH RELATIVE -1 c;
MOVE LAST c;
FETCH PRIOR c;
CLOSE c;
-- a cursor without ORDER BY: a foreign scan cannot go backward, so it is
-- materialized
DECLARE c2 SCROLL CURSOR FOR
  SELECT key FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
MOVE FORWARD ALL c2;
\echo :ROW_COUNT
MOVE BACKWARD ALL c2;
\echo :ROW_COUNT
FETCH 1 c2;
FETCH ABSOLUTE -1 c2;
CLOSE c2;
-- a full scan under a SCROLL cursor
DECLARE c3 SCROLL CURSOR FOR SELECT key FROM rp_full;
MOVE FORWARD ALL c3;
\echo :ROW_COUNT
MOVE BACKWARD ALL c3;
\echo :ROW_COUNT
MOVE FORWARD ALL c3;
\echo :ROW_COUNT
CLOSE c3;
COMMIT;
DECLARE h CURSOR WITH HOLD FOR
  SELECT key, length(value) FROM rp_kv
   WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g)) ORDER BY key;
FETCH 2 h;
MOVE FORWARD 1000 h;
FETCH 1 h;
CLOSE h;
DECLARE h2 CURSOR WITH HOLD FOR SELECT count(*) FROM rp_full;
FETCH h2;
CLOSE h2;
-- a cursor opened in a savepoint that is rolled back: gone, never read
BEGIN;
SAVEPOINT s;
DECLARE c4 CURSOR FOR
  SELECT key FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
FETCH 2 c4;
ROLLBACK TO SAVEPOINT s;
FETCH 1 c4;
ROLLBACK;
-- a cursor opened before the savepoint, read inside it, rolled back: still there
BEGIN;
DECLARE c5 CURSOR FOR
  SELECT key FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
MOVE 10 c5;
SAVEPOINT s;
MOVE 1000 c5;
SELECT 1 / 0;
ROLLBACK TO SAVEPOINT s;
MOVE FORWARD ALL c5;
\echo :ROW_COUNT
CLOSE c5;
COMMIT;
-- a cursor whose first read (the multi-get, spilling) is inside a
-- savepoint rolled back: the rows stay the cursor's
BEGIN;
DECLARE c6 CURSOR FOR
  SELECT key FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
SAVEPOINT s;
FETCH 2 c6;
ROLLBACK TO SAVEPOINT s;
FETCH 2 c6;
MOVE FORWARD ALL c6;
\echo :ROW_COUNT
COMMIT;
-- an error in the middle of the multi-get (a value the column refuses),
-- in a savepoint: the cursor is dead, the server's connection is not
CREATE FOREIGN TABLE rp_int (key text, value integer) SERVER rp OPTIONS (key_prefix 'r:');
BEGIN;
DECLARE c7 CURSOR FOR
  SELECT key, value FROM rp_int WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
SAVEPOINT s;
FETCH 1 c7;
ROLLBACK TO SAVEPOINT s;
FETCH 1 c7;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
COMMIT;
DROP FOREIGN TABLE rp_int;

-- row locks: no row of memcached is locked; the row is copied
-- (ROW_MARK_COPY) for rechecks
SELECT key, value FROM rp_kv WHERE key = '1' FOR UPDATE;
SELECT key, value FROM rp_kv WHERE key IN ('2', '3') ORDER BY key FOR SHARE;
SELECT key FROM rp_kv WHERE key = '4' FOR NO KEY UPDATE NOWAIT;
SELECT key FROM rp_kv WHERE key = '5' FOR KEY SHARE SKIP LOCKED;
SELECT count(*) FROM (SELECT key FROM rp_full FOR UPDATE) s;
EXPLAIN (COSTS OFF) SELECT e.g, length(rp_kv.value) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k
 WHERE e.g IN (7, 10) ORDER BY e.g FOR UPDATE;
SELECT e.g, length(rp_kv.value) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k
 WHERE e.g IN (7, 10) ORDER BY e.g FOR UPDATE;
SELECT e.g, length(rp_kv.value) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k
 WHERE e.g IN (7, 8) ORDER BY e.g FOR UPDATE OF e;
SELECT count(*), sum(length(v)) FROM
  (SELECT rp_kv.value AS v FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k FOR SHARE OF rp_kv) s;

-- parallel plans: a foreign scan is not parallel safe, so it runs in the
-- leader, above the Gather; the local side may run in workers
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
-- (force_parallel_mode is debug_parallel_query from PostgreSQL 16 on)
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'on', false) AS parallel_mode;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
SELECT count(*) FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
EXPLAIN (COSTS OFF)
SELECT count(*) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k;
SELECT count(*), sum(length(value)) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k;
SET mcfdw.enable_batched_join = off;
SELECT count(*), sum(length(value)) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k;
RESET mcfdw.enable_batched_join;
-- a full scan joined to a parallel local scan, on either side; which side
-- is hashed follows the full scan's row estimate, the item count planning
-- asks memcached for within 250 ms (a loaded machine may get the default):
-- the plans' nodes are checked, not their order
CREATE FUNCTION pg_temp.plan_shows(q text, VARIADIC what text[])
RETURNS TABLE (node text, shown boolean) LANGUAGE plpgsql AS $$
DECLARE
  plan text := '';
  l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    plan := plan || l || E'\n';
  END LOOP;
  RETURN QUERY SELECT w, strpos(plan, w) > 0 FROM unnest(what) w;
END $$;
SELECT * FROM pg_temp.plan_shows(
  'SELECT count(*) FROM rp_full JOIN rp_expect e ON e.v = rp_full.value',
  'Hash Join', 'Gather', 'Parallel Seq Scan on rp_expect e', 'Foreign Scan on rp_full',
  'Memcached Full Scan: lru_crawler metadump', 'Memcached Key Prefix Filter: ''r:''');
SELECT count(*) FROM rp_full JOIN rp_expect e ON e.v = rp_full.value;
SELECT * FROM pg_temp.plan_shows(
  'SELECT count(*) FROM rp_expect e WHERE e.v IN (SELECT value FROM rp_full)',
  'Gather', 'Parallel Seq Scan on rp_expect e', 'Foreign Scan on rp_full',
  'Memcached Full Scan: lru_crawler metadump');
SELECT count(*) FROM rp_expect e WHERE e.v IN (SELECT value FROM rp_full);
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'regress', false) AS parallel_mode;
SELECT count(*) FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 4000) g));
SELECT count(*), sum(length(value)) FROM rp_expect e JOIN rp_kv ON rp_kv.key = e.k;
SELECT count(*) FROM rp_full;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'off', false) AS parallel_mode;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_tuple_cost;
RESET parallel_setup_cost;

-- an Append of foreign scans (no asynchronous execution: one after the other)
EXPLAIN (COSTS OFF)
SELECT key FROM rp_kv WHERE key IN ('1', '2') UNION ALL
SELECT key FROM rp_wide WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(3, 4000) g))
UNION ALL SELECT key FROM rp_full;
SELECT count(*) FROM (
  SELECT key FROM rp_kv WHERE key IN ('1', '2') UNION ALL
  SELECT key FROM rp_wide WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(3, 4000) g))
  UNION ALL SELECT key FROM rp_full) s;

-- partitions and inheritance children: each a scan of its own, pruned as
-- any partition
CREATE TABLE rp_parts (key text, value text, flags integer) PARTITION BY RANGE (key);
CREATE FOREIGN TABLE rp_part1 PARTITION OF rp_parts FOR VALUES FROM ('1') TO ('2')
  SERVER rp OPTIONS (key_prefix 'r:');
CREATE FOREIGN TABLE rp_part2 PARTITION OF rp_parts FOR VALUES FROM ('2') TO ('9')
  SERVER rp OPTIONS (key_prefix 'r:');
EXPLAIN (COSTS OFF) SELECT key FROM rp_parts WHERE key IN ('10', '11');
SELECT key, length(value) FROM rp_parts WHERE key IN ('10', '11') ORDER BY key;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM rp_parts WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
SELECT count(*) FROM rp_parts
 WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g)) AND key < '2';
SELECT count(*) FROM generate_series(1, 6000) g JOIN rp_parts ON rp_parts.key = g::text
 WHERE rp_parts.key >= '2';
SELECT count(*) FROM rp_parts;
-- a partition's bound is not checked against its items (PostgreSQL checks
-- no constraint of a foreign table): partitions sharing a prefix each read
-- every key they are given, so a query that does not prune gets each
-- item once per partition
SELECT count(*), count(DISTINCT key) FROM rp_parts
 WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
DROP TABLE rp_parts;
CREATE TABLE rp_parent (key text, value text, flags integer);
INSERT INTO rp_parent VALUES ('1', 'local', 0);
CREATE FOREIGN TABLE rp_child () INHERITS (rp_parent) SERVER rp OPTIONS (key_prefix 'r:');
SELECT tableoid::regclass, key, value FROM rp_parent WHERE key = '1' ORDER BY 1;
SELECT count(*) FROM rp_parent;
DROP TABLE rp_parent CASCADE;
-- system columns and whole rows
SELECT tableoid::regclass, key FROM rp_kv WHERE key = '1';
SELECT xmin FROM rp_kv WHERE key = '1';
SELECT rp_kv, row_to_json(rp_kv) FROM rp_kv WHERE key IN ('1', '2') ORDER BY key;
-- a recursive query: the join rescanned once per iteration, batched or not
WITH RECURSIVE chain(k, n) AS (
  SELECT '1'::text, 1
  UNION ALL
  SELECT (length(rp_kv.value) + n)::text, n + 1 FROM chain JOIN rp_kv ON rp_kv.key = chain.k
   WHERE n < 50)
SELECT count(*), max(n), sum(k::int) FROM chain;
SET mcfdw.enable_batched_join = off;
WITH RECURSIVE chain(k, n) AS (
  SELECT '1'::text, 1
  UNION ALL
  SELECT (length(rp_kv.value) + n)::text, n + 1 FROM chain JOIN rp_kv ON rp_kv.key = chain.k
   WHERE n < 50)
SELECT count(*), max(n), sum(k::int) FROM chain;
RESET mcfdw.enable_batched_join;

-- EXPLAIN ANALYZE of the spilling paths
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM rp_kv WHERE key = ANY (ARRAY (SELECT g::text FROM generate_series(1, 6000) g));
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM rp_full;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM generate_series(1, 6000) g JOIN rp_kv ON rp_kv.key = g::text;

-- ANALYZE: a table that allows full scans gets statistics from a bounded
-- random sample; any other, none, quietly (no key listing).  (Not VERBOSE:
-- PostgreSQL 18's prints timings.)
ANALYZE rp_kv;
ANALYZE rp_wide;
SELECT relname, reltuples FROM pg_class WHERE relname IN ('rp_kv', 'rp_wide') ORDER BY 1;
SELECT count(*) FROM pg_stats WHERE tablename IN ('rp_kv', 'rp_wide');
ALTER FOREIGN TABLE rp_full ALTER COLUMN key SET STATISTICS 10;
ALTER FOREIGN TABLE rp_full ALTER COLUMN value SET STATISTICS 10;
ALTER FOREIGN TABLE rp_full ALTER COLUMN flags SET STATISTICS 10;
-- the table allows full scans, its server not: no key listed, no sample
ALTER SERVER rp OPTIONS (SET allow_full_scan 'false');
ANALYZE rp_full;
SELECT reltuples FROM pg_class WHERE relname = 'rp_full';
ALTER SERVER rp OPTIONS (SET allow_full_scan 'true');
-- 3,000 rows sampled (300 times the statistics target) of 4,000 keys
ANALYZE rp_full;
SELECT reltuples FROM pg_class WHERE relname = 'rp_full';
SELECT attname, null_frac, n_distinct, most_common_vals IS NOT NULL AS mcv
  FROM pg_stats WHERE tablename = 'rp_full' ORDER BY attname;
ANALYZE rp_full (flags);
-- the whole database: foreign tables are not part of it
ANALYZE;

-- IMPORT FOREIGN SCHEMA: memcached has no schemas; refused with an errcode
CREATE SCHEMA rp_import;
\set VERBOSITY sqlstate
IMPORT FOREIGN SCHEMA anything FROM SERVER rp INTO rp_import;
\set VERBOSITY default
IMPORT FOREIGN SCHEMA anything FROM SERVER rp INTO rp_import;
DROP SCHEMA rp_import;

RESET mcfdw.debug_check_rows;
RESET work_mem;
DROP TABLE rp_expect;
DROP FOREIGN TABLE rp_kv, rp_wide, rp_full;
SELECT mc_flush_all('rp');
DROP SERVER rp;
