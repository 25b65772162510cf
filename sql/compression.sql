--
-- compression: values compressed by the application's client (Dalli flag 2,
-- pylibmc/pymemcache flag 8), inflated on read and deflated on write;
-- serialized objects; the bounds on a hostile value
--
SELECT mctest.create('zd', 1);
SELECT mctest.create('zp', 1);
SELECT mctest.create('zsmall', 1);
-- option checks
ALTER SERVER zd OPTIONS (ADD compression 'gzip');
ALTER SERVER zd OPTIONS (ADD compression 'zlib');
ALTER SERVER zd OPTIONS (ADD compressed_flag '0');
ALTER SERVER zd OPTIONS (ADD compressed_flag '4294967296');
ALTER SERVER zd OPTIONS (ADD compressed_flag '0x2');
ALTER SERVER zd OPTIONS (ADD compressed_flag '2', serialized_flag '3');
ALTER SERVER zd OPTIONS (ADD max_value_size '512');
ALTER SERVER zd OPTIONS (ADD compress_threshold '-1');
ALTER SERVER zd OPTIONS (ADD compression_level '0');
ALTER SERVER zd OPTIONS (ADD compression_level '13');
ALTER SERVER zd OPTIONS (ADD compression_level 'fast');
-- Dalli: flag 2, serialized 1; a low threshold so short values compress
ALTER SERVER zd OPTIONS (ADD compression 'zlib', ADD compressed_flag '2',
                         ADD serialized_flag '1', ADD compress_threshold '100');
-- pylibmc: flag 8, reads only
ALTER SERVER zp OPTIONS (ADD compression 'zlib', ADD compressed_flag '8',
                         ADD compress_threshold '0');
ALTER SERVER zsmall OPTIONS (ADD compression 'zlib', ADD compressed_flag '2',
                             ADD max_value_size '64kB');

-- a value at or over the threshold is stored deflated, with the bit
SELECT mc_set('z:a', repeat('abc', 1000), server => 'zd');
SELECT flags, length(value) < 100 AS small, substr(value, 1, 2) AS zlib_header
  FROM mc_get_raw('z:a', 'zd');
-- every read inflates it; flags are returned as stored
SELECT mc_get('z:a', 'zd') = repeat('abc', 1000) AS get,
       mc_get_bytea('z:a', 'zd') = convert_to(repeat('abc', 1000), 'UTF8') AS get_bytea,
       mc_gat('z:a', '1 hour', 'zd') = repeat('abc', 1000) AS gat,
       mc_gat_bytea('z:a', '1 hour', 'zd') = convert_to(repeat('abc', 1000), 'UTF8') AS gat_bytea;
SELECT value = repeat('abc', 1000) AS gets, flags, cas IS NOT NULL AS has_cas
  FROM mc_gets('z:a', 'zd');
SELECT value = convert_to(repeat('abc', 1000), 'UTF8') AS gets_bytea, flags
  FROM mc_gets_bytea('z:a', 'zd');
-- a server without compression reads the stored bytes
SELECT mc_get_bytea('z:a') = (mc_get_raw('z:a', 'zd')).value AS uncompressed_server_raw;
-- and a server whose bit is another one (pylibmc's 8) too
SELECT mc_get_bytea('z:a', 'zp') = (mc_get_raw('z:a', 'zd')).value AS other_bit_raw;
-- under the threshold: plain
SELECT mc_set('z:short', 'short', server => 'zd');
SELECT value, flags FROM mc_get_raw('z:short', 'zd');
-- incompressible: plain, whatever its length
SELECT mc_set('z:rand', (SELECT decode(string_agg(md5(i::text), ''), 'hex')
                           FROM generate_series(1, 64) i), server => 'zd');
SELECT flags, length(value) FROM mc_get_raw('z:rand', 'zd');
-- the caller's flags are kept, the bit added
SELECT mc_set('z:f', repeat('x', 500), flags => 16, server => 'zd');
SELECT flags FROM mc_get_raw('z:f', 'zd');
SELECT value = repeat('x', 500) AS same, flags FROM mc_gets('z:f', 'zd');
-- a value whose flags already carry the bit is sent as it is: raw copies
SELECT mc_set('z:copy', (mc_get_raw('z:a', 'zd')).value, flags => 2, server => 'zd');
SELECT (mc_get_raw('z:copy', 'zd')).value = (mc_get_raw('z:a', 'zd')).value AS untouched,
       mc_get('z:copy', 'zd') = repeat('abc', 1000) AS reads;
-- appended bytes are never compressed
SELECT mc_set('z:app', 'head', server => 'zd');
SELECT mc_append('z:app', repeat('y', 300), 'zd');
SELECT flags, length(value) FROM mc_get_raw('z:app', 'zd');
-- mc_add, mc_replace, mc_cas compress too
SELECT mc_add('z:add', repeat('a', 200), server => 'zd'),
       mc_replace('z:add', repeat('b', 200), server => 'zd');
SELECT flags, mc_get('z:add', 'zd') = repeat('b', 200) AS same FROM mc_get_raw('z:add', 'zd');
SELECT mc_cas('z:add', repeat('c', 300), (mc_gets('z:add', 'zd')).cas, server => 'zd');
SELECT flags, mc_get('z:add', 'zd') = repeat('c', 300) AS same FROM mc_get_raw('z:add', 'zd');

-- batch writes and writes at commit compress as mc_set does
SELECT mc_set_multi(ARRAY['z:m1', 'z:m2', 'z:m3'],
                    ARRAY[repeat('m', 2000), 'tiny', repeat('n', 100)], server => 'zd');
SELECT k, r.flags FROM unnest(ARRAY['z:m1', 'z:m2', 'z:m3']) k, mc_get_raw(k, 'zd') r ORDER BY k;
BEGIN;
SELECT mc_set_on_commit('z:oc', repeat('o', 1000), server => 'zd');
COMMIT;
SELECT flags, mc_get('z:oc', 'zd') = repeat('o', 1000) AS same FROM mc_get_raw('z:oc', 'zd');

-- the multi-get inflates, on both of its row paths (short rows laid out by
-- hand, long ones by PostgreSQL), checked byte for byte
SET mcfdw.debug_check_rows = on;
SELECT mc_set('z:mid', repeat('q', 900), server => 'zd');
SELECT key, flags, length(value),
       value = CASE key WHEN 'z:a' THEN repeat('abc', 1000) WHEN 'z:mid' THEN repeat('q', 900)
                        WHEN 'z:m1' THEN repeat('m', 2000) WHEN 'z:m2' THEN 'tiny'
                        WHEN 'z:m3' THEN repeat('n', 100) WHEN 'z:f' THEN repeat('x', 500) END AS same
  FROM mc_get_multi(ARRAY['z:a', 'z:mid', 'z:m1', 'z:m2', 'z:m3', 'z:f', 'z:none'], 'zd')
 ORDER BY key;
SELECT key, length(value) FROM mc_get_multi_bytea(ARRAY['z:a', 'z:rand', 'z:m2'], 'zd') ORDER BY key;
RESET mcfdw.debug_check_rows;

-- a serialized object (Ruby Marshal, flag 1) is bytes, never text
SELECT mc_set('z:ser', '\x04085b0669066907'::bytea, flags => 1, server => 'zd');
SELECT mc_get('z:ser', 'zd');
SELECT mc_get_bytea('z:ser', 'zd');
SELECT value, flags FROM mc_gets_bytea('z:ser', 'zd');
SELECT key FROM mc_get_multi(ARRAY['z:ser'], 'zd');
SELECT key, value FROM mc_get_multi_bytea(ARRAY['z:ser'], 'zd');
-- a server without serialized_flag does not look at the bit
SELECT mc_get('z:ser', 'zp') IS NOT NULL AS read_as_text;
-- serialized and compressed (flags 3): inflated bytes
SELECT mc_set('z:ser2', convert_to(repeat('marshal', 40), 'UTF8'), flags => 1, server => 'zd');
SELECT flags FROM mc_get_raw('z:ser2', 'zd');
SELECT mc_get_bytea('z:ser2', 'zd') = convert_to(repeat('marshal', 40), 'UTF8') AS inflated;
SELECT mc_get('z:ser2', 'zd');

-- JSON written by the application reads as jsonb
SELECT mc_set('z:json', '{"user": 42, "tags": ["a", "b"], "pad": "' || repeat('p', 200) || '"}',
              server => 'zd');
SELECT flags FROM mc_get_raw('z:json', 'zd');
SELECT mc_get('z:json', 'zd')::jsonb -> 'tags' AS tags;

-- hostile values: errors with their codes, and the socket stays usable
CREATE FUNCTION mctest.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- corrupt: marked compressed, but not a zlib stream
SELECT mc_set('z:bad', '\x789cdeadbeef'::bytea, flags => 2, server => 'zd');
SELECT mctest.try($$SELECT mc_get('z:bad', 'zd')$$);
SELECT mc_get('z:bad', 'zd');
-- truncated: a real stream cut short
SELECT mc_set('z:cut', substr((mc_get_raw('z:a', 'zd')).value, 1, 20), flags => 2, server => 'zd');
SELECT mctest.try($$SELECT mc_get_bytea('z:cut', 'zd')$$);
SELECT mctest.try($$SELECT * FROM mc_get_multi(ARRAY['z:a', 'z:cut'], 'zd')$$);
-- trailing bytes after the stream
SELECT mc_set('z:trail', (mc_get_raw('z:a', 'zd')).value || '\x00'::bytea, flags => 2, server => 'zd');
SELECT mctest.try($$SELECT mc_gets('z:trail', 'zd')$$);
-- the raw bytes are still there to look at
SELECT value, flags FROM mc_get_raw('z:bad', 'zd');
-- a zip bomb: 1 MB of zeros in about 1 kB, read where 64 kB is the bound
SELECT mc_set('z:bomb', repeat('0', 1000000), server => 'zd');
SELECT length((mc_get_raw('z:bomb', 'zd')).value) < 2000 AS tiny_on_the_wire;
SELECT mctest.try($$SELECT mc_get('z:bomb', 'zsmall')$$);
SELECT mctest.try($$SELECT * FROM mc_get_multi(ARRAY['z:bomb'], 'zsmall')$$);
SELECT mc_get('z:bomb', 'zsmall');
-- within the bound it reads
SELECT length(mc_get('z:bomb', 'zd'));
-- 20 MB of zeros: over the default max_value_size (16MB)
SELECT mc_set('z:bomb20', repeat('0', 20000000), server => 'zd');
SELECT mctest.try($$SELECT mc_get_bytea('z:bomb20', 'zd')$$);
-- exactly at the bound reads, one byte over does not
ALTER SERVER zsmall OPTIONS (SET max_value_size '1000000');
SELECT length(mc_get('z:bomb', 'zsmall'));
ALTER SERVER zsmall OPTIONS (SET max_value_size '999999');
SELECT mctest.try($$SELECT mc_get('z:bomb', 'zsmall')$$);
-- after all that, the same backend's sockets still work
SELECT mc_get('z:short', 'zd'), mc_get('z:short', 'zsmall');
-- foreign tables read a value as mc_get does, in every path: a serialized
-- object is refused for a column that is not bytea (42804, as mc_get), a
-- compressed one inflates, a bytea column takes the stored object's bytes
SELECT mc_set('zf:ser', 'marshal dump', flags => 1, server => 'zd'),
       mc_set('zf:serz', repeat('marshal ', 100), flags => 1, server => 'zd'),
       mc_set('zf:big', repeat('abc', 1000), server => 'zd'),
       mc_set('zf:plain', '{"n": 1}', server => 'zd');
SELECT k, (mc_get_raw(k, 'zd')).flags FROM unnest(ARRAY['zf:ser', 'zf:serz', 'zf:big', 'zf:plain']) k;
-- (key, value text, flags integer): the scan lays its rows out by hand
ALTER SERVER zd OPTIONS (ADD allow_full_scan 'true');
CREATE FOREIGN TABLE zft (key text, value text, flags integer) SERVER zd
  OPTIONS (key_prefix 'zf:', allow_full_scan 'true');
CREATE FOREIGN TABLE zfv (key text, value varchar) SERVER zd
  OPTIONS (key_prefix 'zf:', allow_full_scan 'true');
CREATE FOREIGN TABLE zfj (key text, value jsonb) SERVER zd
  OPTIONS (key_prefix 'zf:', allow_full_scan 'true');
CREATE FOREIGN TABLE zfb (key text, value bytea, flags integer) SERVER zd
  OPTIONS (key_prefix 'zf:', allow_full_scan 'true');
CREATE FUNCTION mctest.paths(tab text, k text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  q text;
  r text;
BEGIN
  FOREACH q IN ARRAY ARRAY[
    format('SELECT md5(value::text) FROM %I WHERE key = %L', tab, k),
    format('SELECT md5(value::text) FROM %I WHERE key = ANY (ARRAY[''big'', %L])', tab, k),
    format('SELECT md5(f.value::text) FROM (SELECT CASE g WHEN 7 THEN %L ELSE g::text END AS k FROM generate_series(1, 50) g) o JOIN %I f ON f.key = o.k', k, tab),
    format('SELECT md5(value::text) FROM %I WHERE key LIKE %L', tab, k)]
  LOOP
    FOREACH r IN ARRAY ARRAY['on', 'off'] LOOP
      CONTINUE WHEN r = 'off' AND q NOT LIKE '%JOIN%';
      PERFORM set_config('mcfdw.enable_batched_join', r, true);
      BEGIN
        EXECUTE q INTO r;
        RETURN NEXT 'ok ' || coalesce(r, 'no row');
      EXCEPTION WHEN OTHERS THEN
        RETURN NEXT SQLSTATE || ' ' || SQLERRM;
      END;
    END LOOP;
  END LOOP;
  PERFORM set_config('mcfdw.enable_batched_join', 'on', true);
END $$;
-- the join runs batched, and as a nested loop over the parameterized scan
EXPLAIN (COSTS OFF) SELECT f.value FROM (SELECT CASE g WHEN 7 THEN 'ser' ELSE g::text END AS k FROM generate_series(1, 50) g) o JOIN zft f ON f.key = o.k;
SET mcfdw.enable_batched_join = off;
EXPLAIN (COSTS OFF) SELECT f.value FROM (SELECT CASE g WHEN 7 THEN 'ser' ELSE g::text END AS k FROM generate_series(1, 50) g) o JOIN zft f ON f.key = o.k;
RESET mcfdw.enable_batched_join;
-- plain scan, = ANY, batched join, nested loop, full scan
SELECT * FROM mctest.paths('zft', 'ser');
SELECT * FROM mctest.paths('zft', 'serz');
SELECT * FROM mctest.paths('zfv', 'ser');
SELECT * FROM mctest.paths('zfj', 'ser');
SELECT * FROM mctest.paths('zft', 'big');
SELECT md5(repeat('abc', 1000)) AS big_md5;
SELECT * FROM mctest.paths('zfj', 'plain');
SELECT * FROM mctest.paths('zfb', 'ser');
SELECT md5(value) AS ser_md5, md5(convert_to(repeat('marshal ', 100), 'UTF8')) AS serz_inflated
  FROM mc_get_raw('zf:ser', 'zd');
SELECT * FROM mctest.paths('zfb', 'serz');
-- the error names the key as mc_get does; a query reading no value is not refused
SELECT value FROM zft WHERE key = 'ser';
SELECT key, flags FROM zft WHERE key = 'ser';
SELECT mc_get('zf:ser', 'zd');
-- a full scan of compressed values: text laid out by hand, and jsonb
SELECT mc_set('zfok:a', repeat('abc', 1000), server => 'zd'),
       mc_set('zfok:b', '{"n": "' || repeat('x', 500) || '"}', server => 'zd');
CREATE FOREIGN TABLE zfok (key text, value text, flags integer) SERVER zd
  OPTIONS (key_prefix 'zfok:', allow_full_scan 'true');
CREATE FOREIGN TABLE zfokj (key text, value jsonb) SERVER zd
  OPTIONS (key_prefix 'zfok:', allow_full_scan 'true');
SELECT key, md5(value), flags FROM zfok ORDER BY key;
SELECT key, length(value->>'n') FROM zfokj WHERE key = 'b';
SELECT count(*) FROM zfokj WHERE key LIKE 'b';
DROP FOREIGN TABLE zfok, zfokj;
-- compression_level '1': deflate's fastest level writes zlib's header for
-- it, and the value reads back through a server at the default level
SELECT mctest.create('zl1', 1);
ALTER SERVER zl1 OPTIONS (ADD compression 'zlib', ADD compressed_flag '2',
                          ADD compress_threshold '100', ADD compression_level '1');
SELECT mc_set('z:l1', repeat('level one ', 500), server => 'zl1'),
       mc_set_multi(ARRAY['z:l1m'], ARRAY[repeat('level one m ', 500)], server => 'zl1');
SELECT k, flags, substr(value, 1, 2) AS zlib_header, length(value) < 1000 AS deflated
  FROM unnest(ARRAY['z:l1', 'z:l1m']) k, mc_get_raw(k, 'zl1');
SELECT mc_get('z:l1', 'zd') = repeat('level one ', 500) AS l1,
       mc_get('z:l1m', 'zd') = repeat('level one m ', 500) AS l1m;
DROP SERVER zl1;
-- a value that gains little under zlib is inflated into a buffer about its
-- own size, not a guess at many times what is stored: while the value is
-- held, the backend's memory exceeds a plain read's of the same 400 kB by
-- less than twice the value (a foreign table's read frees its buffer
-- before the row is returned, so only the functions show it)
SELECT setseed(0.5);
SELECT mc_set('zf:mem', v, server => 'zd') AS deflated, mc_set('zf:memp', v, server => 'zp') AS plain
  FROM (SELECT string_agg(chr(33 + (random() * 89)::int), '') AS v FROM generate_series(1, 400000)) s;
SELECT flags, length(value) BETWEEN 200000 AND 390000 AS gains_little
  FROM mc_get_raw('zf:mem', 'zd');
CREATE FUNCTION mctest.held_over_plain(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  m text := 'SELECT (SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE length(s.v) > 0) FROM (%s OFFSET 0) s';
  p bigint;
  z bigint;
BEGIN
  FOR i IN 1..2 LOOP
    EXECUTE format(m, format(q, 'memp')) INTO p;
    EXECUTE format(m, format(q, 'mem')) INTO z;
  END LOOP;
  RETURN z - p;
END $$;
SELECT f, mctest.held_over_plain(q) < 800000 AS held_under_twice_the_value
  FROM (VALUES ('mc_get', 'SELECT mc_get(''zf:%s'', ''zd'') AS v'),
               ('mc_get_bytea', 'SELECT mc_get_bytea(''zf:%s'', ''zd'') AS v')) t(f, q);
DROP FUNCTION mctest.held_over_plain(text);
DROP FUNCTION mctest.paths(text, text);
DROP FOREIGN TABLE zft, zfv, zfj, zfb;
DROP FUNCTION mctest.try(text);
DROP SERVER zd, zp, zsmall;
