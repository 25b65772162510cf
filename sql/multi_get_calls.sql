--
-- multi_get_calls: mc_get_multi and mc_get_multi_bytea called every way SQL
-- calls a set-returning function (in FROM, in the select list, beside
-- another function in ROWS FROM, under column aliases, in LATERAL, from
-- PL/pgSQL and SQL functions) return the same rows, laid out as
-- heap_form_minimal_tuple would lay them out (the row type comes from the
-- caller where it has one, else from the declaration)
--
SELECT mctest.create('mgc', 1, 2);
SET mcfdw.debug_check_rows = on;
SELECT count(*) FILTER (WHERE mc_set('mgc:' || i, repeat('v', i), flags => i, server => 'mgc'))
  FROM generate_series(1, 40) i;
SELECT mc_set('mgc:long', repeat('L', 5000), flags => 7, server => 'mgc');
CREATE TEMP TABLE mgc_keys AS
  SELECT ARRAY(SELECT 'mgc:' || i FROM generate_series(0, 41) i) || 'mgc:long'::text AS keys;
-- a digest of a set of rows, to compare each way of calling with FROM's
CREATE FUNCTION pg_temp.digest(rows text[]) RETURNS text LANGUAGE sql AS
$$ SELECT count(*) || ' rows ' || md5(string_agg(r, ',' ORDER BY r)) FROM unnest(rows) r $$;
-- in FROM: the reference
CREATE TEMP TABLE mgc_ref AS
  SELECT * FROM mc_get_multi((SELECT keys FROM mgc_keys), server => 'mgc');
SELECT count(*), sum(flags), sum(length(value)) FROM mgc_ref;
CREATE TEMP TABLE mgc_want AS SELECT pg_temp.digest(array_agg(r::text)) AS d FROM mgc_ref r;
-- the select list (ProjectSet): one call, each row a composite (written
-- (mc_get_multi(...)).* the call would run once per column)
SELECT pg_temp.digest(array_agg((m).key || ',' || (m).value || ',' || (m).flags)) =
       (SELECT pg_temp.digest(array_agg(key || ',' || value || ',' || flags)) FROM mgc_ref) AS same
  FROM (SELECT mc_get_multi((SELECT keys FROM mgc_keys), server => 'mgc') AS m) s;
SELECT mc_get_multi(ARRAY['mgc:1', 'mgc:2'], server => 'mgc') AS row ORDER BY 1;
-- column aliases
SELECT k, f, length(v) FROM mc_get_multi(ARRAY['mgc:3'], server => 'mgc') AS t(k, v, f);
SELECT pg_temp.digest(array_agg(r::text)) = (SELECT d FROM mgc_want) AS same
  FROM (SELECT k, v, f FROM mc_get_multi((SELECT keys FROM mgc_keys), server => 'mgc') AS t(k, v, f)) r;
-- ROWS FROM beside another function: rows zipped, NULLs past the shorter
SELECT count(*) AS rows, count(t.key) AS hits, count(g) AS series
  FROM ROWS FROM (mc_get_multi((SELECT keys FROM mgc_keys), server => 'mgc'),
                  generate_series(1, 50)) AS t(key, value, flags, g);
SELECT pg_temp.digest(array_agg(r::text)) = (SELECT d FROM mgc_want) AS same
  FROM (SELECT key, value, flags
          FROM ROWS FROM (mc_get_multi((SELECT keys FROM mgc_keys), server => 'mgc'),
                          generate_series(1, 3)) AS t(key, value, flags, g)
         WHERE key IS NOT NULL) r;
-- LATERAL, one call per outer row
SELECT n, count(m.key), sum(m.flags)
  FROM generate_series(1, 3) n,
       LATERAL mc_get_multi(ARRAY['mgc:' || n, 'mgc:' || n * 10, 'mgc:absent'], server => 'mgc') m
 GROUP BY n ORDER BY n;
-- PL/pgSQL: RETURN QUERY, and a FOR loop over the rows
CREATE FUNCTION mgc_query(keys text[]) RETURNS TABLE (key text, value text, flags integer)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT * FROM mc_get_multi(keys, server => 'mgc');
END $$;
CREATE FUNCTION mgc_loop(keys text[]) RETURNS TABLE (key text, value text, flags integer)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT * FROM mc_get_multi(keys, server => 'mgc') LOOP
    key := r.key; value := r.value; flags := r.flags;
    RETURN NEXT;
  END LOOP;
END $$;
SELECT pg_temp.digest(array_agg(r::text)) = (SELECT d FROM mgc_want) AS same
  FROM mgc_query((SELECT keys FROM mgc_keys)) r;
SELECT pg_temp.digest(array_agg(r::text)) = (SELECT d FROM mgc_want) AS same
  FROM mgc_loop((SELECT keys FROM mgc_keys)) r;
-- a SQL function returning the set, with a column definition list
CREATE FUNCTION mgc_sql(keys text[]) RETURNS SETOF record LANGUAGE sql
  AS $$ SELECT * FROM mc_get_multi_bytea(keys, server => 'mgc') $$;
SELECT count(*), sum(length(v)), sum(f)
  FROM mgc_sql((SELECT keys FROM mgc_keys)) AS t(k text, v bytea, f integer);
-- bytea in the select list
SELECT (m).* FROM (SELECT mc_get_multi_bytea(ARRAY['mgc:2'], server => 'mgc') AS m) s;
RESET mcfdw.debug_check_rows;
DROP FUNCTION mgc_query(text[]);
DROP FUNCTION mgc_loop(text[]);
DROP FUNCTION mgc_sql(text[]);
DROP SERVER mgc;
