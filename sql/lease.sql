--
-- lease: mc_get_lease (memcached's N/R flags: one winner recomputes) and
-- mc_mark_stale (md I: a stale value served while one caller refreshes)
--
-- a miss: the first caller wins and must compute; the others do not
SELECT value, flags, cas IS NOT NULL AS has_cas, won, stale FROM mc_get_lease('l:1', '30 seconds');
SELECT value, flags, won, stale FROM mc_get_lease('l:1', '30 seconds');
SELECT value, won, stale FROM mc_get_lease_bytea('l:1', '30 seconds');
-- the placeholder is no value for the other reads either: a miss
SELECT mc_get('l:1') IS NULL AS placeholder_is_a_miss,
       (SELECT count(*) FROM mc_get_multi(ARRAY['l:1'])) AS multi_get_rows,
       mc_gets('l:1') IS NULL AS gets_miss;
-- the winner stores the value; everyone reads it
SELECT mc_set('l:1', 'v1', '1 hour');
SELECT value, flags, won, stale FROM mc_get_lease('l:1', '30 seconds');
-- marked stale: the value stays, the first reader wins the refresh
SELECT mc_mark_stale('l:1');
SELECT value, won, stale FROM mc_get_lease('l:1', '30 seconds');
SELECT value, won, stale FROM mc_get_lease('l:1', '30 seconds');
SELECT mc_get('l:1') AS plain_read_sees_stale_value;
-- a set clears it
SELECT mc_set('l:1', 'v2', '1 hour');
SELECT value, won, stale FROM mc_get_lease('l:1', '30 seconds');
-- the winner may store with the lease's cas: a newer invalidation refuses it
SELECT won, mc_cas('l:2', 'computed', cas) AS stored FROM mc_get_lease('l:2', '30 seconds');
SELECT mc_get('l:2');
SELECT mc_mark_stale('l:2');
SELECT won, stale, cas AS lease_cas FROM mc_get_lease('l:2', '30 seconds') \gset
SELECT mc_mark_stale('l:2');
SELECT mc_cas('l:2', 'from stale data', :lease_cas) AS stored_over_newer_invalidation;
-- recache_below: a value close to expiry lets one caller refresh it early
SELECT mc_set('l:3', 'old', '10 seconds');
SELECT value, won, stale FROM mc_get_lease('l:3', '30 seconds', '60 seconds');
SELECT value, won, stale FROM mc_get_lease('l:3', '30 seconds', '60 seconds');
-- far from expiry: nobody wins
SELECT mc_set('l:4', 'fresh', '1 hour');
SELECT value, won FROM mc_get_lease('l:4', '30 seconds', '60 seconds');
-- an empty value outside a lease is a value
SELECT mc_set('l:5', '');
SELECT value = '' AS empty_value, won FROM mc_get_lease('l:5', '30 seconds');
-- the placeholder expires with lease_ttl: then someone wins again
SELECT won FROM mc_get_lease('l:6', '1 second');
SELECT won FROM mc_get_lease('l:6', '1 second');
SELECT pg_sleep(2.1);
SELECT won FROM mc_get_lease('l:6', '1 second');
-- mc_mark_stale: a missing key; a ttl bounds the stale item's life
SELECT mc_mark_stale('l:none');
SELECT mc_set('l:7', 'v');
SELECT mc_mark_stale('l:7', '1 second');
SELECT pg_sleep(2.1);
SELECT mc_get('l:7') IS NULL AS gone;
-- arguments
SELECT mc_get_lease(NULL, '30 seconds') IS NULL AS null_key;
SELECT mc_get_lease('l:8', NULL);
SELECT mc_get_lease('l:8', '30 seconds', '31 days');
SELECT mc_get_lease('l:8', '-1 second');
SELECT mc_mark_stale(NULL) IS NULL AS null_key;
