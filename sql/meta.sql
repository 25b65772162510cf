--
-- meta: mc_meta reads an item's metadata without its value and without
-- bumping it (mg ... u)
--
SELECT mc_set('m:1', 'hello', flags => 42);
SELECT size, ttl_remaining, last_access >= 0 AS has_last_access, hit_before,
       cas IS NOT NULL AS has_cas, flags, stale
  FROM mc_meta('m:1');
-- looking is not a hit
SELECT hit_before FROM mc_meta('m:1');
-- a read is
SELECT mc_get('m:1');
SELECT hit_before FROM mc_meta('m:1');
-- the cas is mc_gets's
SELECT (mc_meta('m:1')).cas = (mc_gets('m:1')).cas AS same_cas;
-- the remaining ttl
SELECT mc_set('m:2', 'x', '1 hour');
SELECT ttl_remaining BETWEEN 3590 AND 3600 AS about_an_hour FROM mc_meta('m:2');
-- a stale item
SELECT mc_mark_stale('m:2');
SELECT stale FROM mc_meta('m:2');
-- size is what is stored: compressed when the client compressed
SELECT mctest.create('mz', 1);
ALTER SERVER mz OPTIONS (ADD compression 'zlib', ADD compressed_flag '8',
                         ADD compress_threshold '100');
SELECT mc_set('m:z', repeat('z', 10000), server => 'mz');
SELECT size < 200 AS compressed_size, flags FROM mc_meta('m:z', 'mz');
DROP SERVER mz;
-- a miss is a NULL row
SELECT * FROM mc_meta('m:none');
SELECT mc_meta('m:none') IS NULL AS miss;
SELECT mc_meta(NULL) IS NULL AS null_key;
