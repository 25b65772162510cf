--
-- long_keys: keys over memcached's 250 bytes, stored the way Dalli stores
-- them (option long_keys 'dalli'): the first 212 characters (213 with a
-- namespace), ':md5:', and the MD5 of the whole namespaced key.  Every
-- expected name below is computed with PostgreSQL's own md5() and read back
-- through a plain server, so the rule is checked independently of mcfdw's C.
--
SELECT mctest.create('lk', 1, 2, 3);
SELECT mctest.create('lk_plain', 1, 2, 3);
ALTER SERVER lk OPTIONS (ADD distribution 'dalli');
ALTER SERVER lk_plain OPTIONS (ADD distribution 'dalli');

-- the option: default 'error', bad values and prefixes that are no namespace
ALTER SERVER lk OPTIONS (ADD long_keys 'digest');
ALTER SERVER lk OPTIONS (ADD long_keys 'dalli', key_prefix 'app');
ALTER SERVER lk OPTIONS (ADD long_keys 'dalli', key_prefix ':');
ALTER SERVER lk OPTIONS (ADD long_keys 'error');
SELECT mc_set(repeat('x', 251), 'v', server => 'lk');
ALTER SERVER lk OPTIONS (SET long_keys 'dalli');

-- 250 characters: not digested
SELECT mc_set(repeat('a', 250), 'plain', server => 'lk'),
       mc_get(repeat('a', 250), server => 'lk_plain') AS stored_as_is;

-- 300 characters: stored under key[0, 212] + ':md5:' + md5(key)
CREATE TEMP TABLE lk_keys AS
SELECT 'rails/views/' || repeat('segment/', 36) || n AS k FROM generate_series(1, 3) n;
SELECT length(k) FROM lk_keys LIMIT 1;
SELECT bool_and(mc_set(k, 'v' || right(k, 1), server => 'lk')) FROM lk_keys;
SELECT right(k, 1) AS n, mc_get(k, server => 'lk') AS through_lk,
       mc_get(left(k, 212) || ':md5:' || md5(k), server => 'lk_plain') AS digest_name,
       length(left(k, 212) || ':md5:' || md5(k)) AS stored_length
  FROM lk_keys ORDER BY 1;
-- the routed name also decides the instance: found by a multi-get on either side
SELECT key = ANY (SELECT k FROM lk_keys) AS given_key, value
  FROM mc_get_multi((SELECT array_agg(k ORDER BY k) FROM lk_keys), server => 'lk') ORDER BY value;
SELECT value FROM mc_get_multi((SELECT array_agg(left(k, 212) || ':md5:' || md5(k) ORDER BY k) FROM lk_keys),
                               server => 'lk_plain') ORDER BY value;
-- every single-key function takes long keys
SELECT mc_append(k, '+', server => 'lk'), mc_get(k, server => 'lk') FROM lk_keys WHERE k LIKE '%1';
SELECT mc_set(k, '10', server => 'lk'), mc_incr(k, 5, server => 'lk') FROM lk_keys WHERE k LIKE '%2';
SELECT mc_delete(k, server => 'lk'), mc_get(left(k, 212) || ':md5:' || md5(k), server => 'lk_plain') IS NULL AS gone
  FROM lk_keys WHERE k LIKE '%3';

-- with a namespace ('app:' = Dalli's namespace 'app'): 213 characters of
-- "app:<key>", then the digest of "app:<key>"
ALTER SERVER lk OPTIONS (ADD key_prefix 'app:');
SELECT mc_set(k, 'ns', server => 'lk') FROM lk_keys WHERE k LIKE '%1';
SELECT mc_get(left('app:' || k, 213) || ':md5:' || md5('app:' || k), server => 'lk_plain') AS digest_name
  FROM lk_keys WHERE k LIKE '%1';

-- characters, not bytes, are counted in a UTF-8 database: 251 'é' are 502
-- bytes; digested, 212 of them are still too long for memcached
ALTER SERVER lk OPTIONS (DROP key_prefix);
SELECT mc_set(repeat('é', 251), 'x', server => 'lk');
-- 200 'é' are under 250 characters, so Dalli would not digest them either
SELECT mc_set(repeat('é', 200), 'x', server => 'lk');
-- a long key whose kept part has a space goes base64, and is then too long
SELECT mc_set('a b' || repeat('c', 300), 'x', server => 'lk');
-- ... unless the space is past the kept part
SELECT mc_set(repeat('c', 300) || ' d', 'tail', server => 'lk'),
       mc_get(repeat('c', 212) || ':md5:' || md5(repeat('c', 300) || ' d'), server => 'lk_plain');

DROP SERVER lk;
DROP SERVER lk_plain;
