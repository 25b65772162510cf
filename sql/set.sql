--
-- set: mc_set and the conditional stores, ttl, flags
--
SELECT mc_set('set:a', 'one');
SELECT mc_set('set:a', 'two');
SELECT mc_get('set:a');
-- NULL value or key: NULL result, nothing stored
SELECT mc_set('set:null', NULL::text) IS NULL AS null_value;
SELECT mc_set(NULL, 'x') IS NULL AS null_key;
SELECT mc_get('set:null') IS NULL AS not_stored;
-- NULL ttl and NULL flags mean none
SELECT mc_set('set:b', 'b', ttl => NULL, flags => NULL);
SELECT value, flags FROM mc_gets('set:b');
-- add: only when absent
SELECT mc_add('set:a', 'three'), mc_get('set:a');
SELECT mc_add('set:new', 'fresh'), mc_get('set:new');
-- replace: only when present
SELECT mc_replace('set:absent', 'x'), mc_get('set:absent') IS NULL AS still_absent;
SELECT mc_replace('set:a', 'replaced'), mc_get('set:a');
-- append / prepend
SELECT mc_append('set:a', '>'), mc_prepend('set:a', '<'), mc_get('set:a');
SELECT mc_append('set:absent', 'x') AS append_to_missing;
-- cas: succeeds with the current token, fails with a stale one
SELECT mc_set('set:cas', 'v1');
CREATE TEMP TABLE tok AS SELECT cas FROM mc_gets('set:cas');
SELECT mc_cas('set:cas', 'v2', (SELECT cas FROM tok)) AS first_cas;
SELECT mc_cas('set:cas', 'v3', (SELECT cas FROM tok)) AS stale_cas;
SELECT mc_get('set:cas');
SELECT mc_cas('set:nocas', 'v', 12345) AS cas_on_missing;
SELECT mc_cas('set:cas', 'v', NULL) IS NULL AS null_cas;
-- ttl: expires
SELECT mc_set('set:ttl', 'short', ttl => interval '1 second');
SELECT mc_get('set:ttl');
SELECT pg_sleep(2.1);
SELECT mc_get('set:ttl') IS NULL AS expired;
-- fractions of a second round up: never "no expiry"
SELECT mc_set('set:ttl2', 'x', ttl => interval '1 millisecond');
SELECT pg_sleep(1.5);
SELECT mc_get('set:ttl2') IS NULL AS expired_too;
-- long ttls (over memcached's 30-day relative limit) are kept, not read as 1970
SELECT mc_set('set:long', 'kept', ttl => interval '45 days');
SELECT mc_get('set:long');
SELECT mc_set('set:year', 'kept', ttl => interval '1 year');
SELECT mc_get('set:year');
-- bad ttls
SELECT mc_set('set:bad', 'x', ttl => interval '0');
SELECT mc_set('set:bad', 'x', ttl => interval '-5 minutes');
SELECT mc_set('set:bad', 'x', ttl => interval '100 years');
-- touch moves the expiry
SELECT mc_set('set:touch', 't', ttl => interval '1 second');
SELECT mc_touch('set:touch', interval '1 hour');
SELECT pg_sleep(1.5);
SELECT mc_get('set:touch');
SELECT mc_touch('set:absent', interval '1 hour') AS touch_missing;
