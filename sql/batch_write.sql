--
-- batch_write: mc_set_multi, mc_delete_multi, mc_touch_multi
--
SELECT mctest.create('bw', 1, 2, 3, 4);
-- counts: every distinct key stored, then read back
SELECT mc_set_multi(ARRAY(SELECT 'bw:' || i FROM generate_series(1, 1000) i),
                    ARRAY(SELECT 'v' || i FROM generate_series(1, 1000) i),
                    flags => 7, server => 'bw');
SELECT count(*), bool_and(value = 'v' || substr(key, 4)) AS values_match, min(flags), max(flags)
  FROM mc_get_multi(ARRAY(SELECT 'bw:' || i FROM generate_series(1, 1000) i), server => 'bw');
-- the writes really went to all four instances, where a reader finds them
SELECT count(*) AS instances_with_keys, sum(c) AS keys FROM (
  SELECT n, (SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'bw:' || i FROM generate_series(1, 1000) i),
                                               server => 'bw_' || n)) AS c
    FROM generate_series(1, 4) n, LATERAL (SELECT mctest.create('bw_' || n, n)) s
) per WHERE c > 100;
DROP SERVER bw_1, bw_2, bw_3, bw_4;
-- flags NULL: no F flag, stored with 0
SELECT mc_set_multi(ARRAY['bw:nf'], ARRAY['x'], flags => NULL, server => 'bw');
SELECT key, value, flags FROM mc_get_multi(ARRAY['bw:nf'], server => 'bw');
-- duplicates: sent once, the last value wins, counted once
SELECT mc_set_multi(ARRAY['bw:d', 'bw:e', 'bw:d'], ARRAY['first', 'e', 'last'], server => 'bw');
SELECT key, value FROM mc_get_multi(ARRAY['bw:d', 'bw:e'], server => 'bw') ORDER BY key;
-- touch: hits counted, misses not; NULL keys skipped, duplicates once
SELECT mc_touch_multi(ARRAY['bw:1', 'bw:2', NULL, 'bw:1', 'bw:absent'], '1 hour', server => 'bw');
-- delete: misses are not counted; NULL keys skipped; duplicates once
SELECT mc_delete_multi(ARRAY(SELECT 'bw:' || i FROM generate_series(1, 1005) i) || ARRAY[NULL, 'bw:1'], server => 'bw');
SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'bw:' || i FROM generate_series(1, 1000) i), server => 'bw');
SELECT mc_delete_multi(ARRAY['bw:1', 'bw:2'], server => 'bw');
SELECT mc_touch_multi(ARRAY['bw:1', 'bw:2'], '1 hour', server => 'bw');
-- empty and NULL arrays
SELECT mc_set_multi('{}'::text[], '{}'::text[], server => 'bw'),
       mc_delete_multi('{}'::text[], server => 'bw'),
       mc_touch_multi('{}', '1 hour', server => 'bw');
SELECT mc_set_multi(NULL, ARRAY['x'], server => 'bw') IS NULL AS set_null,
       mc_delete_multi(NULL, server => 'bw') IS NULL AS delete_null;
-- shapes and NULLs that are errors; nothing is written by a failing call
SELECT mc_set_multi(ARRAY['bw:m1', 'bw:m2'], ARRAY['x'], server => 'bw');
SELECT mc_set_multi(ARRAY[['bw:m1', 'bw:m2'], ['bw:m3', 'bw:m4']], ARRAY['a', 'b', 'c', 'd'], server => 'bw');
SELECT mc_delete_multi(ARRAY[['bw:m1', 'bw:m2'], ['bw:m3', 'bw:m4']], server => 'bw');
SELECT mc_set_multi(ARRAY['bw:m1', NULL], ARRAY['x', 'y'], server => 'bw');
SELECT mc_set_multi(ARRAY['bw:m1', 'bw:m2'], ARRAY['x', NULL], server => 'bw');
SELECT mc_set_multi(ARRAY['bw:m1', ''], ARRAY['x', 'y'], server => 'bw');
SELECT mc_set_multi(ARRAY['bw:m1', repeat('k', 300)], ARRAY['x', 'y'], server => 'bw');
SELECT mc_touch_multi(ARRAY['bw:m1'], NULL, server => 'bw');
SELECT mc_touch_multi(ARRAY['bw:m1'], '0 seconds', server => 'bw');
SELECT count(*) AS written FROM mc_get_multi(ARRAY['bw:m1', 'bw:m2', 'bw:m3'], server => 'bw');
-- bytea values, NUL bytes, keys that go base64
SELECT mc_set_multi(ARRAY['bw:b1', 'bw:with space', 'bw:é'],
                    ARRAY['\x00ff00'::bytea, '\x'::bytea, '\x41'::bytea], server => 'bw');
SELECT key, value FROM mc_get_multi_bytea(ARRAY['bw:b1', 'bw:with space', 'bw:é'], server => 'bw') ORDER BY key;
-- a value over memcached's item size limit: the server's error, the call fails
\set VERBOSITY terse
SELECT mc_set_multi(ARRAY['bw:big'], ARRAY[repeat('x', 2 * 1024 * 1024)], server => 'bw');
\set VERBOSITY default
-- the connections are in step afterwards
SELECT mc_set_multi(ARRAY['bw:after'], ARRAY['ok'], server => 'bw');
SELECT value FROM mc_get_multi(ARRAY['bw:after'], server => 'bw');
-- a key prefix is part of every key
DO $$ BEGIN
  EXECUTE format('CREATE SERVER bw_pfx FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, key_prefix %L)',
                 mctest.addrs(1, 2, 3, 4), 'pfx:');
END $$;
SELECT mc_set_multi(ARRAY['a', 'b'], ARRAY['pa', 'pb'], server => 'bw_pfx');
SELECT key, value FROM mc_get_multi(ARRAY['pfx:a', 'pfx:b', 'a'], server => 'bw') ORDER BY key;
SELECT mc_delete_multi(ARRAY['a', 'b', 'c'], server => 'bw_pfx');
SELECT count(*) FROM mc_get_multi(ARRAY['pfx:a', 'pfx:b'], server => 'bw');
-- ttl: keys set with a ttl, and keys touched with one, expire
SELECT mc_set_multi(ARRAY['bw:t1', 'bw:t2'], ARRAY['x', 'y'], ttl => '1 second', server => 'bw');
SELECT mc_set_multi(ARRAY['bw:t3', 'bw:t4'], ARRAY['x', 'y'], server => 'bw');
SELECT mc_touch_multi(ARRAY['bw:t3'], '1 second', server => 'bw');
SELECT count(*) FROM mc_get_multi(ARRAY['bw:t1', 'bw:t2', 'bw:t3', 'bw:t4'], server => 'bw');
SELECT pg_sleep(2.2);
SELECT key FROM mc_get_multi(ARRAY['bw:t1', 'bw:t2', 'bw:t3', 'bw:t4'], server => 'bw');
-- an instance down: an error without failover; with it, its keys go to the others.
-- The failing calls raise once the requests they had already written to
-- the live instances are answered; how many there are depends on whether
-- the refused connect fails at once or after the others have sent theirs,
-- so the detail's counts are shown as N.  (test/integration/
-- batch_write_settle.py checks that nothing runs after the error.)
DO $$ BEGIN
  EXECUTE format('CREATE SERVER bw_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, failure_limit %L, retry_delay %L)',
                 mctest.addrs(1, 2) || ',' || mctest.closed_addr(), '100', '1h');
END $$;
CREATE FUNCTION mctest.bw_err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || E'\nDETAIL: ' ||
         regexp_replace(d, '[0-9]+ (were|may)', 'N \1', 'g');
END $$;
SELECT mctest.bw_err($$SELECT mc_set_multi(ARRAY(SELECT 'bwe:' || i FROM generate_series(1, 300) i),
                    ARRAY(SELECT 'v' || i FROM generate_series(1, 300) i), server => 'bw_down')$$);
SELECT mctest.bw_err($$SELECT mc_delete_multi(ARRAY(SELECT 'bwe:' || i FROM generate_series(1, 300) i), server => 'bw_down')$$);
DROP FUNCTION mctest.bw_err(text);
-- (failure_limit 1: the failed instance is then dead, so readers route around it too)
ALTER SERVER bw_down OPTIONS (ADD failover 'on', SET failure_limit '1');
SELECT mc_set_multi(ARRAY(SELECT 'bwd:' || i FROM generate_series(1, 300) i),
                    ARRAY(SELECT 'v' || i FROM generate_series(1, 300) i), server => 'bw_down');
SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'bwd:' || i FROM generate_series(1, 300) i), server => 'bw_down');
SELECT mc_delete_multi(ARRAY(SELECT 'bwd:' || i FROM generate_series(1, 300) i), server => 'bw_down');
SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'bwd:' || i FROM generate_series(1, 300) i), server => 'bw_down');
DROP SERVER bw_down, bw_pfx, bw;
