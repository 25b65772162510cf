--
-- counters: mc_incr / mc_decr
--
SELECT mc_incr('ctr:missing') IS NULL AS missing_is_null;
SELECT mc_incr('ctr:a', 1, 10);
SELECT mc_incr('ctr:a');
SELECT mc_incr('ctr:a', 5);
SELECT mc_decr('ctr:a', 3);
-- decrements stop at zero
SELECT mc_decr('ctr:a', 1000);
-- memcached decrements in place: the stored text keeps its width, space-padded
SELECT mc_get('ctr:a');
-- counters set from SQL text
SELECT mc_set('ctr:b', '41');
SELECT mc_incr('ctr:b');
-- auto-created with a ttl
SELECT mc_decr('ctr:c', 1, 100, interval '1 second');
SELECT pg_sleep(2.1);
SELECT mc_get('ctr:c') IS NULL AS expired;
-- bigint range
SELECT mc_set('ctr:max', '9223372036854775807');
SELECT mc_incr('ctr:max', 0);
SELECT mc_incr('ctr:max');
SELECT mc_incr('ctr:x', NULL) IS NULL AS null_delta;
SELECT mc_incr('ctr:x', 1, -5);
-- many increments in one statement are atomic on the server
SELECT max(mc_incr('ctr:loop', 1, 0)) FROM generate_series(1, 1000);
