--
-- multi_get: mc_get_multi / mc_get_multi_bytea over one and many instances
--
SELECT mctest.create('mg', 1, 2, 3, 4);
SELECT count(*) FILTER (WHERE mc_set('mg:' || i, 'v' || i, flags => i, server => 'mg'))
  FROM generate_series(1, 1000) i;
-- hits come back as rows; misses give no row
SELECT * FROM mc_get_multi(ARRAY['mg:1', 'mg:2', 'mg:3', 'mg:absent'], server => 'mg') ORDER BY key;
-- NULL elements are skipped; duplicates are asked once and returned once
SELECT * FROM mc_get_multi(ARRAY['mg:7', NULL, 'mg:7', 'mg:8', 'mg:7'], server => 'mg') ORDER BY key;
-- empty and NULL arrays give no rows
SELECT count(*) FROM mc_get_multi('{}'::text[], server => 'mg');
SELECT count(*) FROM mc_get_multi(NULL, server => 'mg');
SELECT count(*) FROM mc_get_multi(ARRAY[NULL, NULL]::text[], server => 'mg');
-- all misses: no rows, no error
SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'mg:none' || i FROM generate_series(1, 500) i), server => 'mg');
-- a large batch spread over the four instances: every key found, each value right
SELECT count(*), sum(flags), bool_and(value = 'v' || substr(key, 4)) AS values_match
  FROM mc_get_multi(ARRAY(SELECT 'mg:' || i FROM generate_series(1, 1000) i), server => 'mg');
-- hits mixed with misses in one pipeline (misses are silent under q)
SELECT count(*), min(substr(key, 4)::int), max(substr(key, 4)::int)
  FROM mc_get_multi(ARRAY(SELECT 'mg:' || i FROM generate_series(-500, 1500) i), server => 'mg');
-- the keys really are spread: each instance holds a share
SELECT count(*) AS instances_with_keys FROM (
  SELECT n, (SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'mg:' || i FROM generate_series(1, 1000) i),
                                               server => 'mg_' || n)) AS c
    FROM generate_series(1, 4) n, LATERAL (SELECT mctest.create('mg_' || n, n)) s
) per WHERE c > 100;
DROP SERVER mg_1, mg_2, mg_3, mg_4;
-- multi-dimensional arrays are read element by element
SELECT count(*) FROM mc_get_multi(ARRAY[['mg:1', 'mg:2'], ['mg:3', 'mg:4']], server => 'mg');
-- keys needing base64, binary values, NUL bytes
SELECT mc_set('mg:with space', '\x00ff00'::bytea, server => 'mg'),
       mc_set('mg:é', 'accent', server => 'mg'),
       mc_set(E'mg:\t', 'tab', server => 'mg');
SELECT key, value FROM mc_get_multi_bytea(ARRAY['mg:with space', 'mg:é', E'mg:\t', 'mg:1'], server => 'mg') ORDER BY key;
SELECT key, value FROM mc_get_multi(ARRAY['mg:é', E'mg:\t'], server => 'mg') ORDER BY key;
-- a binary value cannot be text
SELECT * FROM mc_get_multi(ARRAY['mg:with space'], server => 'mg');
-- the connection is in step afterwards
SELECT count(*) FROM mc_get_multi(ARRAY['mg:1', 'mg:2'], server => 'mg');
-- values of every size, including empty and ones near a pipeline buffer boundary
SELECT count(*) FILTER (WHERE mc_set('mg:size' || s, repeat('x', s), server => 'mg'))
  FROM unnest(ARRAY[0, 1, 125, 126, 127, 128, 16383, 16384, 16385, 65536, 500000]) s;
SELECT key, length(value), value = repeat('x', length(value)) AS intact
  FROM mc_get_multi(ARRAY(SELECT 'mg:size' || s
                            FROM unnest(ARRAY[0, 1, 125, 126, 127, 128, 16383, 16384, 16385, 65536, 500000]) s),
                    server => 'mg')
 ORDER BY length(value);
-- bad keys fail the whole call before anything is sent
SELECT * FROM mc_get_multi(ARRAY['mg:1', ''], server => 'mg');
SELECT * FROM mc_get_multi(ARRAY['mg:1', repeat('k', 251)], server => 'mg');
-- key_prefix applies to every key, and the key column shows the key as given
ALTER SERVER mg OPTIONS (ADD key_prefix 'mg:');
SELECT * FROM mc_get_multi(ARRAY['1', '2', 'é'], server => 'mg') ORDER BY key;
ALTER SERVER mg OPTIONS (DROP key_prefix);
-- works in PL/pgSQL loops and with the default server
SELECT mctest.point('memcached', 1, 2, 3, 4);
SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'mg:' || i FROM generate_series(1, 100) i));
SELECT mctest.point('memcached', 1);
DO $$
DECLARE
  r record;
  n int := 0;
BEGIN
  FOR r IN SELECT * FROM mc_get_multi(ARRAY['mg:1', 'mg:2', 'mg:3'], server => 'mg') LOOP
    n := n + 1;
  END LOOP;
  RAISE NOTICE 'rows: %', n;
END $$;
-- every row shape: values either side of the 1-byte varlena header limit
-- (126/127 bytes) and of the rows laid out by hand (1024/1025), after keys
-- of every length mod 4 (so every alignment pad), and keys either side of
-- 126/127 bytes; each row is checked against mc_get, then stored in a
-- table and read back.  mcfdw.debug_check_rows also compares every row
-- mcfdw lays out itself with PostgreSQL's own layout, byte for byte.
SET mcfdw.debug_check_rows = on;
CREATE TEMP TABLE mg_shapes AS
SELECT 'mg:len:' || n || repeat('.', p) AS k, n, p
  FROM unnest(ARRAY[0, 1, 125, 126, 127, 128, 1023, 1024, 1025, 4000]) n, generate_series(0, 3) p;
SELECT count(*) FILTER (WHERE mc_set(k, repeat(chr(97 + p), n), flags => n * 10 + p, server => 'mg'))
  FROM mg_shapes;
SELECT m.flags / 10 AS n, count(*) AS rows,
       bool_and(length(m.value) = m.flags / 10) AS len_ok,
       bool_and(m.value = repeat(chr(97 + m.flags % 10), m.flags / 10)) AS value_ok,
       bool_and(m.value = mc_get(m.key, server => 'mg')) AS same_as_mc_get,
       bool_and(m.key = s.k) AS key_ok
  FROM mc_get_multi(ARRAY(SELECT k FROM mg_shapes), server => 'mg') m
  JOIN mg_shapes s ON s.k = m.key
 GROUP BY 1 ORDER BY 1;
CREATE TEMP TABLE mg_copy AS SELECT * FROM mc_get_multi(ARRAY(SELECT k FROM mg_shapes), server => 'mg');
SELECT count(*), sum(length(key)), sum(length(value)), sum(flags), md5(string_agg(key || value, ',' ORDER BY key))
     = (SELECT md5(string_agg(k || repeat(chr(97 + p), n), ',' ORDER BY k)) FROM mg_shapes) AS same_bytes
  FROM mg_copy;
SELECT count(*) FILTER (WHERE mc_set(repeat('K', n), 'key of ' || n, flags => n, server => 'mg'))
  FROM unnest(ARRAY[125, 126, 127, 128, 250]) n;
SELECT length(key), value, flags FROM mc_get_multi(ARRAY(SELECT repeat('K', n) FROM unnest(ARRAY[125, 126, 127, 128, 250]) n), server => 'mg')
 ORDER BY 1;
-- bytea rows keep NUL bytes, at either header size
SELECT count(*) FILTER (WHERE mc_set('mg:bin:' || n, decode(repeat('00ff', n / 2), 'hex'), server => 'mg'))
  FROM unnest(ARRAY[2, 126, 128, 1024, 2048]) n;
SELECT key, length(value), value = decode(repeat('00ff', length(value) / 2), 'hex') AS bytes_ok
  FROM mc_get_multi_bytea(ARRAY(SELECT 'mg:bin:' || n FROM unnest(ARRAY[2, 126, 128, 1024, 2048]) n), server => 'mg')
 ORDER BY length(value);
RESET mcfdw.debug_check_rows;
-- privileges: USAGE is required, as for every function
CREATE ROLE mc_mg_user;
SET ROLE mc_mg_user;
SELECT * FROM mc_get_multi(ARRAY['mg:1'], server => 'mg');
RESET ROLE;
DROP ROLE mc_mg_user;
DROP SERVER mg;
