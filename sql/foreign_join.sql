--
-- foreign_join: a join of local rows to a foreign table on its key runs as
-- the batched join (a custom scan: one pipelined multi-get per batch of
-- outer rows), and its results are the nested loop's.
--
SELECT mc_flush_all();
-- batches of 3 outer rows, so every join below spans several batches
CREATE FOREIGN TABLE jc (key text, value jsonb, flags integer)
  SERVER memcached OPTIONS (key_prefix 'j:', join_batch_size '3');
INSERT INTO jc (key, value, flags) VALUES
  ('1', '{"n": 1}', 1), ('2', '{"n": 2}', 2), ('3', '{"n": 3}', 1), ('5', '{"n": 5}', 0);
-- NULL keys, duplicate keys (1, 2), misses (4, 6)
CREATE TABLE ju (id int, team int);
INSERT INTO ju VALUES (1, 7), (2, 7), (3, 8), (4, 7), (NULL, 7), (1, 7), (5, 8), (2, 9),
  (NULL, 8), (6, 7);
ANALYZE ju;

-- Runs q with the batched join (which EXPLAIN must show) and without it
-- (a nested loop over the parameterized scan): the same rows, or which differ.
CREATE FUNCTION mctest.join_check(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  plan text;
  batched text;
  nested text;
  agg text := 'SELECT string_agg(r::text, '' '' ORDER BY r::text) FROM (%s) r';
BEGIN
  PERFORM set_config('mcfdw.enable_batched_join', 'on', true);
  SELECT string_agg(l, E'\n') INTO plan FROM mctest.explain_lines(q) l;
  IF plan NOT LIKE '%Custom Scan (MemcachedBatchedJoin)%' THEN
    RETURN 'not batched: ' || plan;
  END IF;
  EXECUTE format(agg, q) INTO batched;
  PERFORM set_config('mcfdw.enable_batched_join', 'off', true);
  SELECT string_agg(l, E'\n') INTO plan FROM mctest.explain_lines(q) l;
  PERFORM set_config('mcfdw.enable_batched_join', 'on', true);
  IF plan LIKE '%MemcachedBatchedJoin%' THEN
    RETURN 'batched when off: ' || plan;
  END IF;
  PERFORM set_config('mcfdw.enable_batched_join', 'off', true);
  EXECUTE format(agg, q) INTO nested;
  PERFORM set_config('mcfdw.enable_batched_join', 'on', true);
  IF batched IS DISTINCT FROM nested THEN
    RETURN 'DIFFERENT: ' || coalesce(batched, '(none)') || ' | nested loop: ' || coalesce(nested, '(none)');
  END IF;
  RETURN coalesce(batched, '(none)');
END $$;
CREATE FUNCTION mctest.explain_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    RETURN NEXT l;
  END LOOP;
END $$;

-- INNER: each outer row with its item; NULL keys and misses give nothing
SELECT mctest.join_check($$SELECT u.id, u.team, c.key, c.value FROM ju u JOIN jc c ON c.key = u.id::text$$);
-- LEFT: misses and NULL keys extended with NULLs
SELECT mctest.join_check($$SELECT u.id, u.team, c.key, c.value, c.flags FROM ju u LEFT JOIN jc c ON c.key = u.id::text$$);
-- LEFT with a condition on the foreign table in ON: it decides the match and filters no outer row
SELECT mctest.join_check($$SELECT u.id, c.key, c.flags FROM ju u LEFT JOIN jc c ON c.key = u.id::text AND c.flags = 1$$);
-- LEFT with a join condition on both sides in ON
SELECT mctest.join_check($$SELECT u.id, u.team, c.key FROM ju u LEFT JOIN jc c ON c.key = u.id::text AND c.flags < u.team - 6$$);
-- LEFT with an outer-side condition in ON: it decides the match, the row stays
SELECT mctest.join_check($$SELECT u.id, u.team, c.key FROM ju u LEFT JOIN jc c ON c.key = u.id::text AND u.team = 7$$);
-- LEFT with WHERE conditions: they filter the joined rows (NULL-extended ones too)
SELECT mctest.join_check($$SELECT u.id, c.key, c.flags FROM ju u LEFT JOIN jc c ON c.key = u.id::text WHERE c.flags IS DISTINCT FROM 2$$);
SELECT mctest.join_check($$SELECT u.id, c.value FROM ju u LEFT JOIN jc c ON c.key = u.id::text WHERE u.team = 7$$);
-- INNER with conditions on the foreign table and on both sides
SELECT mctest.join_check($$SELECT u.id, c.key FROM ju u JOIN jc c ON c.key = u.id::text WHERE c.flags = 1$$);
SELECT mctest.join_check($$SELECT u.id, u.team, c.key FROM ju u JOIN jc c ON c.key = u.id::text AND c.flags <> u.team - 7$$);
SELECT mctest.join_check($$SELECT u.id, c.key FROM ju u JOIN jc c ON c.key = u.id::text WHERE (c.value->>'n')::int + u.team > 9$$);
-- SEMI: EXISTS and IN; an outer row at most once
SELECT mctest.join_check($$SELECT u.id, u.team FROM ju u WHERE EXISTS (SELECT 1 FROM jc c WHERE c.key = u.id::text)$$);
SELECT mctest.join_check($$SELECT u.id, u.team FROM ju u WHERE EXISTS (SELECT 1 FROM jc c WHERE c.key = u.id::text AND c.flags = 1)$$);
SELECT mctest.join_check($$SELECT u.id, u.team FROM ju u WHERE u.id::text IN (SELECT key FROM jc)$$);
SELECT mctest.join_check($$SELECT u.id, u.team FROM ju u WHERE u.id::text IN (SELECT key FROM jc WHERE flags > 0)$$);
-- more outer rows than a batch, many times over; an expression as the key
SELECT mctest.join_check($$SELECT count(*), sum((c.value->>'n')::int), count(DISTINCT g % 6) FROM generate_series(1, 100) g JOIN jc c ON c.key = (g % 6)::text$$);
SELECT mctest.join_check($$SELECT count(*), count(c.key) FROM generate_series(1, 100) g LEFT JOIN jc c ON c.key = (g % 7)::text$$);
-- the default join_batch_size: batches of 64, 256, 1024 ... outer rows
CREATE FOREIGN TABLE jc_big (key text, value jsonb) SERVER memcached OPTIONS (key_prefix 'j:');
SELECT mctest.join_check($$SELECT count(*), count(c.key), sum((c.value->>'n')::int) FROM generate_series(1, 3000) g LEFT JOIN jc_big c ON c.key = (g % 7)::text$$);
DROP FOREIGN TABLE jc_big;
-- the outer side a join of local tables
SELECT mctest.join_check($$SELECT a.id, b.team, c.key FROM ju a JOIN ju b ON a.id = b.id JOIN jc c ON c.key = a.id::text$$);

-- EXPLAIN: the custom scan for each join type, batch size and fields
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id, c.value FROM ju u JOIN jc c ON c.key = u.id::text;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id, c.flags FROM ju u LEFT JOIN jc c ON c.key = u.id::text AND c.flags = 1 WHERE u.team = 7;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id, c.key FROM ju u LEFT JOIN jc c ON c.key = u.id::text WHERE c.flags IS DISTINCT FROM 2;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id FROM ju u WHERE EXISTS (SELECT 1 FROM jc c WHERE c.key = u.id::text);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id FROM ju u WHERE u.id::text IN (SELECT key FROM jc);
EXPLAIN (COSTS OFF)
  SELECT u.id, c.value FROM ju u JOIN jc c ON c.key = u.id::text;
-- switched off: the nested loop over the parameterized scan
SET mcfdw.enable_batched_join = off;
EXPLAIN (COSTS OFF)
  SELECT u.id, c.value FROM ju u JOIN jc c ON c.key = u.id::text;
RESET mcfdw.enable_batched_join;
-- not a join the batched join serves: an anti join, a full join
EXPLAIN (COSTS OFF)
  SELECT u.id FROM ju u WHERE NOT EXISTS (SELECT 1 FROM jc c WHERE c.key = u.id::text);
SELECT u.id FROM ju u WHERE NOT EXISTS (SELECT 1 FROM jc c WHERE c.key = u.id::text)
 ORDER BY u.id NULLS LAST;
-- statements that lock rows or modify tables keep the nested loop (their
-- rechecks of a changed row need it)
EXPLAIN (COSTS OFF)
  SELECT u.id, c.value FROM ju u JOIN jc c ON c.key = u.id::text FOR UPDATE OF u;
EXPLAIN (COSTS OFF)
  UPDATE ju u SET team = c.flags FROM jc c WHERE c.key = u.id::text;
EXPLAIN (COSTS OFF)
  UPDATE ju u SET team = (SELECT count(*) FROM ju v JOIN jc c ON c.key = v.id::text);

-- rescanned inside an outer nested loop (a correlated subquery): each
-- rescan starts over with the new parameter
SELECT t.team,
       (SELECT string_agg(c.key || '=' || c.flags, ',' ORDER BY c.key, u.id)
          FROM ju u JOIN jc c ON c.key = u.id::text WHERE u.team = t.team) AS items
  FROM (VALUES (7), (8), (9), (7)) t(team) ORDER BY t.team;
EXPLAIN (COSTS OFF)
SELECT t.team,
       (SELECT string_agg(c.key || '=' || c.flags, ',' ORDER BY c.key, u.id)
          FROM ju u JOIN jc c ON c.key = u.id::text WHERE u.team = t.team) AS items
  FROM (VALUES (7), (8), (9), (7)) t(team);
-- a batched join as the inner side of a nested loop with no parameter:
-- rescanned from the start for each outer row
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT v.x, s.id, s.key FROM (VALUES (1), (2), (4)) v(x)
  LEFT JOIN (SELECT u.id, c.key FROM ju u LEFT JOIN jc c ON c.key = u.id::text OFFSET 0) s
    ON s.id = v.x
 ORDER BY v.x, s.key NULLS LAST;
EXPLAIN (COSTS OFF)
SELECT v.x, s.id, s.key FROM (VALUES (1), (2), (4)) v(x)
  LEFT JOIN (SELECT u.id, c.key FROM ju u LEFT JOIN jc c ON c.key = u.id::text OFFSET 0) s
    ON s.id = v.x;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

-- prepared statements with generic plans: the parameter reaches the key expression
SET plan_cache_mode = force_generic_plan;
PREPARE pj(int) AS
  SELECT u.id, c.key, c.value FROM ju u LEFT JOIN jc c ON c.key = (u.id + $1)::text
   ORDER BY u.id NULLS LAST, c.key;
EXECUTE pj(0);
EXECUTE pj(1);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE pj(1);
PREPARE ps(int) AS
  SELECT u.id FROM ju u WHERE EXISTS (SELECT 1 FROM jc c WHERE c.key = u.id::text AND c.flags = $1)
   ORDER BY u.id;
EXECUTE ps(1);
EXECUTE ps(2);
RESET plan_cache_mode;
DEALLOCATE ALL;

-- only the fields the query reads are asked for
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT u.id, c.flags FROM ju u JOIN jc c ON c.key = u.id::text;

-- a stored value that is not valid jsonb: an error naming the key
SELECT mc_set('j:9', 'not json');
SELECT g, c.value FROM generate_series(7, 10) g JOIN jc c ON c.key = g::text;
SELECT g, c.flags FROM generate_series(7, 10) g LEFT JOIN jc c ON c.key = g::text ORDER BY g;

-- a key too long for memcached: the same error as the nested loop's
SELECT g, c.value FROM generate_series(1, 5) g JOIN jc c ON c.key = repeat('x', 300) || g;
SET mcfdw.enable_batched_join = off;
SELECT g, c.value FROM generate_series(1, 5) g JOIN jc c ON c.key = repeat('x', 300) || g;
RESET mcfdw.enable_batched_join;

-- EXPLAIN ANALYZE runs it
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT u.id, c.value FROM ju u LEFT JOIN jc c ON c.key = u.id::text;

-- on_failure 'miss': an unreachable instance's keys are misses, as in the scan
CREATE SERVER jdead FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '127.0.0.1:1', on_failure 'miss', connect_timeout '200');
CREATE FOREIGN TABLE jd (key text, value text) SERVER jdead;
SELECT u.id, d.value FROM ju u LEFT JOIN jd d ON d.key = u.id::text ORDER BY u.id NULLS LAST LIMIT 3;
DROP FOREIGN TABLE jd;
DROP SERVER jdead;

DROP FUNCTION mctest.join_check(text), mctest.explain_lines(text);
DROP TABLE ju;
DROP FOREIGN TABLE jc;
