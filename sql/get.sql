--
-- get: mc_get / mc_gets reads, misses, NULL arguments, server argument
--
SELECT mc_set('get:greeting', 'hello');
SELECT mc_get('get:greeting');
-- a miss is NULL, not an error
SELECT mc_get('get:missing') IS NULL AS miss_is_null;
-- NULL key gives NULL
SELECT mc_get(NULL) IS NULL AS null_key;
-- empty values are values, not misses
SELECT mc_set('get:empty', '');
SELECT mc_get('get:empty') = '' AS empty_value;
-- multi-byte text round-trips
SELECT mc_set('get:utf8', 'grüße, 世界 🐘');
SELECT mc_get('get:utf8');
-- a value just under memcached's default item limit of 1 MB
SELECT mc_set('get:big', repeat('x', 1000000));
SELECT length(mc_get('get:big'));
SELECT md5(mc_get('get:big')) = md5(repeat('x', 1000000)) AS big_intact;
-- many calls in one statement
SELECT count(*) FILTER (WHERE mc_set('get:n' || i, i::text)) FROM generate_series(1, 500) i;
SELECT sum(mc_get('get:n' || i)::int) FROM generate_series(1, 500) i;
-- mc_gets: value, flags and the cas token
SELECT mc_set('get:flagged', 'v', flags => 42);
SELECT value, flags, cas > 0 AS has_cas FROM mc_gets('get:flagged');
SELECT mc_gets('get:missing') IS NULL AS gets_miss;
-- flags are 32-bit unsigned on the server: negative integers round-trip
SELECT mc_set('get:negflags', 'v', flags => -1);
SELECT flags FROM mc_gets('get:negflags');
-- server by argument and by setting
SELECT mctest.create('get_other', 2);
SELECT mc_set('get:where', 'on 2', server => 'get_other');
SELECT mc_get('get:where') IS NULL AS not_on_default, mc_get('get:where', server => 'get_other');
SET mcfdw.server = 'get_other';
SELECT mc_get('get:where');
RESET mcfdw.server;
SELECT mc_get('get:where') IS NULL AS back_on_default;
-- NULL server means the default
SELECT mc_get('get:greeting', NULL);
DROP SERVER get_other;
