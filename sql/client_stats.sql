--
-- client_stats: mc_client_stats, what mcfdw did per server, instance and
-- operation, counted exactly for a known workload; mc_cluster_health; the
-- reset and its privilege.  The rig does not preload mcfdw, so this is the
-- session scope; test/integration/client_stats_cluster.py runs the cluster
-- scope, the error classes a hostile server provokes, and the histogram
-- against a delaying proxy.
--
\set VERBOSITY terse
SELECT mctest.create('cs_srv', 1, 2);
DO $$ BEGIN
  EXECUTE format('CREATE SERVER cs_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, failure_limit %L)',
                 mctest.closed_addr(), '2');
  EXECUTE format('CREATE SERVER cs_miss FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L)',
                 mctest.closed_addr(), 'miss');
  EXECUTE format('CREATE SERVER cs_hang FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, io_timeout %L)',
                 mctest.hang_addr(), '200');
END $$;
SELECT mc_delete_multi(ARRAY(SELECT 'cs:' || i FROM generate_series(1, 20) i), 'cs_srv') >= 0 AS cleared;
SELECT mc_client_stats_reset();
-- nothing counted since the reset; the scope is this session's
SELECT count(*) AS rows FROM mc_client_stats;
-- a known workload: 7 sets, 10 gets of which 7 hit, one multi-get of 20
-- keys (7 hits), deletes (one hit, one miss), a touch, an incr of a missing
-- key without initial value (a miss), a set_multi of 3, an on-commit
-- delete, a stats command per instance
SELECT count(mc_set('cs:' || i, 'v' || i, server => 'cs_srv')) FROM generate_series(1, 7) i;
SELECT count(mc_get('cs:' || i, 'cs_srv')) AS hits FROM generate_series(1, 10) i;
SELECT count(*) AS hits FROM mc_get_multi(ARRAY(SELECT 'cs:' || i FROM generate_series(1, 20) i), 'cs_srv');
SELECT mc_delete('cs:1', 'cs_srv'), mc_delete('cs:99', 'cs_srv');
SELECT mc_touch('cs:2', '1 hour', 'cs_srv');
SELECT mc_incr('cs:n', 1, server => 'cs_srv');
SELECT mc_set_multi(ARRAY['cs:11', 'cs:12', 'cs:13'], ARRAY['a', 'b', 'c'], server => 'cs_srv');
BEGIN;
SELECT mc_delete_on_commit('cs:3', 'cs_srv');
COMMIT;
SELECT count(DISTINCT instance) AS instances FROM mc_stats('cs_srv');
-- (which instance a key goes to depends on the rig's ports: per-instance
-- counts are not shown, nor the calls of a set_multi, one per instance it
-- reached)
SELECT op, CASE WHEN op <> 'set_multi' THEN sum(calls) END AS calls, sum(keys) AS keys,
       sum(hits) AS hits, sum(misses) AS misses,
       bool_and(bytes_sent > 0 AND bytes_received > 0) AS bytes,
       sum(errors_connect + errors_timeout + errors_protocol + errors_server + errors_auth) AS errors,
       sum(degraded) AS degraded,
       bool_and(total_time > 0 AND max_time > 0 AND max_time <= total_time) AS time,
       sum((SELECT sum(b) FROM unnest(latency_hist) b)) = sum(calls) AS hist_counts_calls,
       bool_and(array_length(latency_hist, 1) = 26) AS hist_len
  FROM mc_client_stats WHERE server = 'cs_srv' GROUP BY op ORDER BY op;
SELECT DISTINCT scope, dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AS this_db
  FROM mc_client_stats;
-- errors by class: a refused connect, a timeout, a server error (a value
-- over memcached's item size); the instance of each call is known.  After
-- failure_limit (2) refused connects the instance is marked dead: the third
-- call is refused without contacting it, a connect error too
SELECT mc_get('k', 'cs_down');
SELECT mc_get('k', 'cs_down');
SELECT mc_get('k', 'cs_down');
SELECT mc_get('k', 'cs_hang');
SELECT mc_set('cs:big', repeat('x', 2 * 1024 * 1024), server => 'cs_srv');
SET mcfdw.warn_on_miss = off;
SELECT mc_get('k', 'cs_miss') IS NULL AS miss;
RESET mcfdw.warn_on_miss;
SELECT server, op, sum(calls) AS calls, sum(errors_connect) AS connect,
       sum(errors_timeout) AS timeout, sum(errors_protocol) AS protocol,
       sum(errors_server) AS server_error, sum(errors_auth) AS auth, sum(degraded) AS degraded
  FROM mc_client_stats
 WHERE server IN ('cs_down', 'cs_hang', 'cs_miss') OR (server = 'cs_srv' AND op = 'set')
 GROUP BY server, op ORDER BY server, op;
-- the degraded calls are mc_counters' too
SELECT c.degraded = (SELECT sum(degraded) FROM mc_client_stats s WHERE s.server = c.server) AS same_degraded
  FROM mc_counters c WHERE server = 'cs_miss';
-- cs_down failed failure_limit (2) times in a row: marked dead, seen here
SELECT server, dead, failures, dead_until > marked_dead_at AS until_later,
       last_error <> '' AS has_error, scope
  FROM mc_cluster_health ORDER BY server;
-- p50 and p99 per instance from the histogram: README's query (the
-- dashboard's), with mc_get alone
SELECT count(*) > 0 AS any, bool_and(p50_ms <= p99_ms) AS ordered,
       bool_and(p50_ms > 0) AS positive, sum(requests) = 10 AS all_gets
  FROM (SELECT instance,
               min(2 ^ (b - 1) / 1000.0) FILTER (WHERE cum >= 0.50 * total) AS p50_ms,
               min(2 ^ (b - 1) / 1000.0) FILTER (WHERE cum >= 0.99 * total) AS p99_ms,
               max(total) AS requests
          FROM (SELECT instance, b,
                       sum(sum(n)) OVER (PARTITION BY instance ORDER BY b) AS cum,
                       sum(sum(n)) OVER (PARTITION BY instance) AS total
                  FROM mc_client_stats, unnest(latency_hist) WITH ORDINALITY AS u(n, b)
                 WHERE op NOT IN ('stats', 'full_scan') AND b > 1
                   AND server = 'cs_srv' AND op = 'get'
                 GROUP BY instance, b) h
         WHERE total > 0
         GROUP BY instance
         ORDER BY instance) q;
-- README's hit ratio and errors per instance
SELECT server, sum(hits)::float8 / nullif(sum(hits + misses), 0) AS hit_ratio,
       sum(errors_connect + errors_timeout + errors_protocol + errors_server + errors_auth) AS errors,
       sum(degraded) AS degraded
  FROM mc_client_stats WHERE server LIKE 'cs\_%' GROUP BY server ORDER BY 1;
-- rows only for the servers a role may use; the reset is not for PUBLIC
CREATE ROLE cs_user;
GRANT USAGE ON FOREIGN SERVER cs_miss TO cs_user;
SET ROLE cs_user;
SELECT DISTINCT server FROM mc_client_stats ORDER BY server;
SELECT DISTINCT server FROM mc_cluster_health ORDER BY server;
SELECT mc_client_stats_reset();
RESET ROLE;
SELECT count(*) AS public_reset FROM pg_proc p,
       aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.oid = 'mc_client_stats_reset()'::regprocedure AND a.grantee = 0;
-- the reset zeroes every row, forgets the marks, zeroes mc_counters, and
-- moves stats_reset; counting goes on from zero
SELECT max(stats_reset) AS r0 FROM mc_client_stats \gset
SELECT mc_client_stats_reset();
SELECT count(*) AS rows FROM mc_client_stats;
SELECT count(*) AS marks FROM mc_cluster_health;
SELECT degraded FROM mc_counters WHERE server = 'cs_miss';
SELECT mc_get('cs:2', 'cs_srv');
SELECT op, calls, hits, stats_reset > :'r0' AS reset_moved FROM mc_client_stats;
-- mc_counters_reset resets this view too: one reset for both
SELECT mc_counters_reset();
SELECT count(*) AS rows FROM mc_client_stats;
-- pipelined batch writes say which keys were there: a delete_multi of 3
-- stored keys and 2 absent ones, a touch_multi of 1 stored and 1 absent
SELECT mc_set_multi(ARRAY['cs:b1', 'cs:b2', 'cs:b3', 'cs:b4'], ARRAY['1', '2', '3', '4'], server => 'cs_srv');
SELECT mc_client_stats_reset();
SELECT mc_delete_multi(ARRAY['cs:b1', 'cs:b2', 'cs:b3', 'cs:nob1', 'cs:nob2'], 'cs_srv');
SELECT mc_touch_multi(ARRAY['cs:b4', 'cs:nob3'], '1 hour', 'cs_srv');
SELECT op, sum(keys) AS keys, sum(hits) AS hits, sum(misses) AS misses
  FROM mc_client_stats WHERE server = 'cs_srv' GROUP BY op ORDER BY op;
SELECT mc_delete('cs:b4', 'cs_srv');
DROP OWNED BY cs_user;
DROP ROLE cs_user;
DROP SERVER cs_srv;
DROP SERVER cs_down;
DROP SERVER cs_miss;
DROP SERVER cs_hang;
