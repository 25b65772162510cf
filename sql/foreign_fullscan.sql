--
-- foreign_fullscan: a scan with no key condition on a table with
-- allow_full_scan 'true' lists the keys under the server's and the table's
-- prefixes (lru_crawler metadump) and fetches them in pipelined batches.
--
SELECT mctest.create('fs', 1);
ALTER SERVER fs OPTIONS (ADD allow_full_scan 'true');  -- the owner's consent
ALTER SERVER fs OPTIONS (ADD key_prefix 'fsapp:');
SELECT mc_flush_all('fs');
CREATE FOREIGN TABLE fs_users (key text, value jsonb, flags integer, cas bigint, ttl integer)
  SERVER fs OPTIONS (key_prefix 'user:', allow_full_scan 'true');
CREATE FOREIGN TABLE fs_other (key text, value text) SERVER fs
  OPTIONS (key_prefix 'other:', allow_full_scan 'true');
CREATE FOREIGN TABLE fs_all (key text, value text) SERVER fs OPTIONS (allow_full_scan 'true');
CREATE FOREIGN TABLE fs_nofull (key text, value text) SERVER fs OPTIONS (key_prefix 'user:');

-- without the option: an error with a hint
SELECT * FROM fs_nofull;
SELECT count(*) FROM fs_nofull WHERE value = 'x';

INSERT INTO fs_users (key, value, flags, ttl)
  SELECT g::text, jsonb_build_object('n', g), g % 3, CASE WHEN g % 2 = 0 THEN 600 END
    FROM generate_series(1, 25) g;
INSERT INTO fs_other VALUES ('a', 'x'), ('b', 'y');
-- on the same instance, outside the server's prefix: never listed
SELECT mc_set('user:99', '{"n": 99}'), mc_set('fsap', 'x'), mc_set('fsapp', 'x');

-- every row of the table's prefix, and only those
SELECT key, value, flags, ttl BETWEEN 590 AND 600 AS ttl_ok, cas > 0 AS has_cas
  FROM fs_users ORDER BY key::int;
SELECT count(*) FROM fs_users;
SELECT count(*) FROM fs_other;
SELECT key, value FROM fs_other ORDER BY key;
-- no table prefix: every item under the server's
SELECT count(*), count(*) FILTER (WHERE key LIKE 'user:%') AS users,
       count(*) FILTER (WHERE key LIKE 'other:%') AS other FROM fs_all;
-- other conditions stay local, on top of the full scan
SELECT key FROM fs_users WHERE (value->>'n')::int > 21 ORDER BY key;
SELECT key FROM fs_users WHERE flags = 1 AND ttl IS NULL ORDER BY key::int;
SELECT key FROM fs_users WHERE key LIKE '1%' ORDER BY key;
SELECT count(*), sum((value->>'n')::int) FROM fs_users WHERE flags <> 0;

-- EXPLAIN shows the full scan and its prefix filter
EXPLAIN (COSTS OFF) SELECT * FROM fs_users;
EXPLAIN (VERBOSE, COSTS OFF) SELECT key, value FROM fs_users WHERE value->>'n' = '3';
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM fs_users;
EXPLAIN (COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF) SELECT * FROM fs_users;
-- a key condition is pushed down: no full scan
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM fs_users WHERE key IN ('3', '4');
-- a join on the key takes the batched join, or else the parameterized
-- path, never the full scan
CREATE TEMP TABLE ids AS SELECT g::text AS id FROM generate_series(1, 30) g;
ANALYZE ids;
EXPLAIN (COSTS OFF) SELECT ids.id, u.value FROM ids JOIN fs_users u ON u.key = ids.id;
SET mcfdw.enable_batched_join = off;
EXPLAIN (COSTS OFF) SELECT ids.id, u.value FROM ids JOIN fs_users u ON u.key = ids.id;
RESET mcfdw.enable_batched_join;
SELECT count(*) FROM ids JOIN fs_users u ON u.key = ids.id;
-- ... unless the key cannot come from the other side
EXPLAIN (COSTS OFF)
  SELECT u.key, ids.id FROM fs_users u LEFT JOIN ids ON ids.id = u.value->>'n';

-- keys that go base64 (spaces, control characters, non-ASCII) round-trip
INSERT INTO fs_other VALUES ('with space', 's'), (E'tab\there', 't'), ('é', 'e'), ('%41', 'p');
SELECT key, value, length(key) FROM fs_other ORDER BY key;
SELECT mc_get('fsapp:other:with space', 'memcached'), mc_get('other:%41', 'fs');

-- DML on top of a full scan: by key, row by row
UPDATE fs_other SET value = value || '!' WHERE value IN ('s', 't') RETURNING key, value;
DELETE FROM fs_other WHERE value = 'p' RETURNING key;
SELECT key, value FROM fs_other ORDER BY key;

-- a rescan fetches the listed keys again
SELECT o.key, (SELECT count(*) FROM fs_other i WHERE i.value > o.value) AS above
  FROM fs_other o ORDER BY o.key;

-- several instances; row estimates from the instances' item counts (a
-- prefix keeps MC_PREFIX_FRACTION = 0.1 of them), never asked without
-- allow_full_scan
SELECT mctest.create('fs3', 2, 3, 4);
ALTER SERVER fs3 OPTIONS (ADD allow_full_scan 'true');
SELECT mc_flush_all('fs3');
SELECT mctest.create('fs3p', 2, 3, 4);
ALTER SERVER fs3p OPTIONS (ADD allow_full_scan 'true');
ALTER SERVER fs3p OPTIONS (ADD key_prefix 'fs3:');
CREATE FOREIGN TABLE fs_spread (key text, value text) SERVER fs3p OPTIONS (allow_full_scan 'true');
CREATE FOREIGN TABLE fs_any (key text, value text) SERVER fs3 OPTIONS (allow_full_scan 'true');
CREATE FOREIGN TABLE fs_any_nofull (key text, value text) SERVER fs3;
INSERT INTO fs_spread SELECT g::text, 'v' || g FROM generate_series(1, 300) g;
INSERT INTO fs_any VALUES ('plain', 'p');
SELECT count(*), count(DISTINCT key), min(key::int), max(key::int), bool_and(value = 'v' || key)
  FROM fs_spread;
SELECT count(*) FROM fs_any;
CREATE FUNCTION pg_temp.plan_rows(q text) RETURNS float8 LANGUAGE plpgsql AS
$$ DECLARE j json;
   BEGIN EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j; RETURN (j->0->'Plan'->>'Plan Rows')::float8; END $$;
-- (curr_items also counts flushed items not yet reclaimed: bounds, not figures)
SELECT whole BETWEEN 301 AND 2000 AS whole_ok, prefixed BETWEEN 30 AND 200 AS prefixed_ok,
       filtered < whole / 10 AS filtered_ok, keyed
  FROM (SELECT pg_temp.plan_rows('SELECT * FROM fs_spread') AS prefixed,
               pg_temp.plan_rows('SELECT * FROM fs_any') AS whole,
               pg_temp.plan_rows('SELECT * FROM fs_any WHERE value = ''p''') AS filtered,
               pg_temp.plan_rows('SELECT * FROM fs_any WHERE key = ''p''') AS keyed) e;
SELECT requests AS before FROM mc_servers WHERE server = 'fs3' AND instance = 1 \gset
SELECT count(*) FROM (SELECT pg_temp.plan_rows('SELECT * FROM fs_any_nofull WHERE key = ''x''')) s;
SELECT requests - :before AS asked FROM mc_servers WHERE server = 'fs3' AND instance = 1;
EXPLAIN (COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF) SELECT * FROM fs_spread;

DROP FOREIGN TABLE fs_users, fs_other, fs_all, fs_nofull, fs_spread, fs_any, fs_any_nofull;
DROP SERVER fs;
DROP SERVER fs3;
DROP SERVER fs3p;
