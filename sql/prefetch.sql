--
-- prefetch: a query calling mc_get / mc_get_bytea once per row reads the
-- keys of a batch of rows in one round; each call answers what it would
-- have answered alone
--
SELECT mctest.create('pf', 1, 2);
SELECT mc_get('pf:load', 'pf') IS NULL AS library_loaded;
CREATE TABLE pf_users (id int PRIMARY KEY, name text);
INSERT INTO pf_users SELECT i, 'user ' || i FROM generate_series(1, 60) i;
CREATE TABLE pf_orders (id int, user_id int);
INSERT INTO pf_orders SELECT i, 1 + i % 30 FROM generate_series(1, 40) i;
ANALYZE pf_users, pf_orders;
-- even ids have a value, odd ones miss; 7 is binary (not text)
SELECT mc_set_multi(array_agg('pf:' || id), array_agg('v' || id), server => 'pf')
  FROM pf_users WHERE id % 2 = 0;
SELECT mc_set('pf:7', '\xff00fe'::bytea, server => 'pf');

-- the plan shows the prefetching node over the scan
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u WHERE u.id <= 20;
EXPLAIN (COSTS OFF, VERBOSE)
SELECT o.id, mc_get('pf:' || u.id, 'pf') AS v FROM pf_orders o JOIN pf_users u ON u.id = o.user_id;
-- a LIMIT bounds the batches
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u LIMIT 5;
-- and EXPLAIN ANALYZE counts them: 16, 32, then the last 12 rows
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT u.id, mc_get_bytea('pf:' || u.id, 'pf') FROM pf_users u;

-- the answers: prefetch on and off give the same rows
CREATE FUNCTION pf_same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE on_rows text; off_rows text;
BEGIN
  SET mcfdw.prefetch = off;
  EXECUTE format('SELECT string_agg(r::text, %L) FROM (%s) r', ';', q) INTO off_rows;
  SET mcfdw.prefetch = on;
  EXECUTE format('SELECT string_agg(r::text, %L) FROM (%s) r', ';', q) INTO on_rows;
  RETURN CASE WHEN on_rows IS NOT DISTINCT FROM off_rows THEN 'same' ELSE 'DIFFERENT: ' || on_rows || ' / ' || off_rows END;
END $$;
SELECT pf_same($q$SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u WHERE u.id <> 7 ORDER BY u.id$q$);
SELECT pf_same($q$SELECT u.id, mc_get_bytea('pf:' || u.id, 'pf') FROM pf_users u ORDER BY u.id$q$);
SELECT pf_same($q$SELECT o.id, coalesce(mc_get('pf:' || u.id, 'pf'), 'none') FROM pf_orders o JOIN pf_users u ON u.id = o.user_id WHERE u.id <> 7$q$);
SELECT pf_same($q$SELECT u.id, mc_get(CASE WHEN u.id % 3 = 0 THEN NULL ELSE 'pf:' || u.id END, 'pf') FROM pf_users u WHERE u.id <> 7$q$);
SELECT pf_same($q$SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u WHERE u.id <> 7 LIMIT 3$q$);

-- the rows themselves, prefetched
SELECT u.id, mc_get('pf:' || u.id, 'pf') AS v FROM pf_users u WHERE u.id BETWEEN 1 AND 6 ORDER BY u.id;

-- a value that is not text raises its error at its own row: rows 1..6 come first
CREATE FUNCTION pf_note(i int, v text) RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN RAISE NOTICE 'row %', i; RETURN v; END $$;
EXPLAIN (COSTS OFF)
SELECT pf_note(u.id, mc_get('pf:' || u.id, 'pf')) FROM pf_users u WHERE u.id <= 9 ORDER BY u.id;
\set VERBOSITY terse
SELECT pf_note(u.id, mc_get('pf:' || u.id, 'pf')) FROM pf_users u WHERE u.id <= 9 ORDER BY u.id;
SET mcfdw.prefetch = off;
SELECT pf_note(u.id, mc_get('pf:' || u.id, 'pf')) FROM pf_users u WHERE u.id <= 9 ORDER BY u.id;
RESET mcfdw.prefetch;
-- a bad key is refused at its own row too (no prefetch error, no round trip for it)
SELECT pf_note(u.id, mc_get(CASE WHEN u.id = 3 THEN 'bad key ' || repeat('x', 300) ELSE 'pf:' || u.id END, 'pf'))
  FROM pf_users u WHERE u.id <= 5 ORDER BY u.id;
\set VERBOSITY default

-- not prefetched: a statement that also writes, a volatile key, a cursor
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || u.id, 'pf'), mc_set('pf:w', 'x', server => 'pf') FROM pf_users u;
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || (random() * 10)::int, 'pf') FROM pf_users u;
CREATE SEQUENCE pf_seq;
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || u.id, 'pf'), nextval('pf_seq') FROM pf_users u;
BEGIN;
DECLARE pf_c CURSOR FOR SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u ORDER BY u.id;
EXPLAIN (COSTS OFF) DECLARE pf_c2 CURSOR FOR SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u;
FETCH 2 FROM pf_c;
FETCH BACKWARD 1 FROM pf_c;
COMMIT;
-- a qual that could fail for a row read ahead: the node is not split
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u WHERE 100 / (u.id - 1000) < 0;
-- the setting turns it off
SET mcfdw.prefetch = off;
EXPLAIN (COSTS OFF)
SELECT u.id, mc_get('pf:' || u.id, 'pf') FROM pf_users u;
RESET mcfdw.prefetch;

-- a write between the prefetch and the call is seen by the call: a FOR
-- loop's portal projects 10 rows, the bodies run, then the next rows are
-- projected; the body writes the key of the row 10 later
CREATE FUNCTION pf_loop() RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record; out text := '';
BEGIN
  FOR r IN SELECT u.id, mc_get('pf:' || u.id, 'pf') AS v FROM pf_users u
            WHERE u.id <= 14 AND u.id <> 7 ORDER BY u.id LOOP
    out := out || r.id || '=' || coalesce(r.v, '-') || ' ';
    PERFORM mc_set('pf:' || (r.id + 10), 'new' || (r.id + 10), server => 'pf');
  END LOOP;
  RETURN out;
END $$;
CREATE FUNCTION pf_reset() RETURNS void LANGUAGE sql AS $$
  SELECT mc_set_multi(array_agg('pf:' || i), array_agg('v' || i), server => 'pf')
    FROM generate_series(12, 24, 2) i;
  SELECT mc_delete_multi(array_agg('pf:' || i), 'pf') FROM generate_series(11, 23, 2) i;
$$;
SELECT pf_loop();
SELECT pf_reset();
SET mcfdw.prefetch = off;
SELECT pf_loop();
SELECT pf_reset();
RESET mcfdw.prefetch;

-- a PL/pgSQL FOR loop is prefetched (its portal fetches 10 rows, then 50)
CREATE FUNCTION pf_sum() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; n bigint := 0;
BEGIN
  FOR r IN SELECT u.id, mc_get('pf:' || u.id, 'pf') AS v FROM pf_users u WHERE u.id <> 7 LOOP
    IF r.v IS NOT NULL THEN n := n + 1; END IF;
  END LOOP;
  RETURN n;
END $$;
SELECT pf_sum();

-- rescans: the inner side of a nested loop, parameterized
SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off;
SELECT pf_same($q$SELECT o.id, (SELECT mc_get('pf:' || u.id, 'pf') FROM pf_users u WHERE u.id = o.user_id) FROM pf_orders o ORDER BY o.id$q$);
SELECT pf_same($q$SELECT o.id, x.v FROM pf_orders o CROSS JOIN LATERAL (SELECT mc_get('pf:' || (o.user_id + g), 'pf') AS v FROM generate_series(0, 2) g) x ORDER BY 1, 2$q$);
RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_material;

DROP FUNCTION pf_same(text), pf_note(int, text), pf_loop(), pf_reset(), pf_sum();
DROP TABLE pf_users, pf_orders;
DROP SEQUENCE pf_seq;
DROP SERVER pf;
