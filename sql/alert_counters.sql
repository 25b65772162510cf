--
-- alert_counters: mc_counters, the per-server counts a dashboard alerts on.
-- The rig does not preload mcfdw, so this is the session scope; the cluster
-- scope (shared_preload_libraries) is test/integration/counters_cluster.py's.
--
\set VERBOSITY terse
DO $$ BEGIN
  EXECUTE format('CREATE SERVER ac_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
                 mctest.closed_addr());
  EXECUTE format('CREATE SERVER ac_miss FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L)',
                 mctest.closed_addr(), 'miss');
END $$;
-- a row for every usable server, zeros before anything is counted; without
-- preloading the scope is this session, counted since it started
SELECT server, queued, sent, lost, degraded, scope,
       stats_reset = (SELECT backend_start FROM pg_stat_activity
                       WHERE pid = pg_backend_pid()) AS since_session_start
  FROM mc_counters WHERE server IN ('memcached', 'ac_down', 'ac_miss') ORDER BY server;
-- on-commit writes: the live server's are sent, the down server's lost
BEGIN;
SELECT mc_delete_on_commit('ac:1');
SELECT mc_delete_on_commit('ac:2', 'ac_down');
SELECT mc_set_on_commit('ac:3', 'v', server => 'ac_down');
COMMIT;
-- a rolled-back write is queued, never sent nor lost
BEGIN;
SELECT mc_delete_on_commit('ac:4', 'ac_down');
ROLLBACK;
SELECT server, queued, sent, lost, degraded
  FROM mc_counters WHERE server IN ('memcached', 'ac_down') ORDER BY server;
-- on_failure 'miss': every call answered as a miss is counted
SET mcfdw.warn_on_miss = off;
SELECT mc_get('ac:5', 'ac_miss') AS get, mc_set('ac:5', 'v', server => 'ac_miss') AS set;
SELECT count(*) FROM mc_get_multi(ARRAY['ac:6', 'ac:7'], 'ac_miss');
RESET mcfdw.warn_on_miss;
SELECT server, queued, sent, lost, degraded FROM mc_counters WHERE server = 'ac_miss';
-- the same counts as the session views
SELECT c.lost = i.lost AND c.queued = i.queued AS same_as_invalidation_stats
  FROM mc_counters c JOIN mc_invalidation_stats i USING (server) WHERE server = 'ac_down';
SELECT c.degraded = (SELECT sum(degraded) FROM mc_servers WHERE server = 'ac_miss') AS same_as_servers
  FROM mc_counters c WHERE server = 'ac_miss';
-- rows only for the servers a role may use; the reset is not for PUBLIC
CREATE ROLE ac_user;
GRANT USAGE ON FOREIGN SERVER ac_miss TO ac_user;
SET ROLE ac_user;
SELECT server, degraded FROM mc_counters WHERE server LIKE 'ac\_%' ORDER BY server;
SELECT mc_counters_reset();
RESET ROLE;
SELECT count(*) AS public_reset FROM pg_proc p,
       aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.oid = 'mc_counters_reset()'::regprocedure AND a.grantee = 0;
-- the reset zeroes every count and moves stats_reset
SELECT stats_reset AS r0 FROM mc_counters WHERE server = 'ac_down' \gset
SELECT mc_counters_reset();
SELECT server, queued, sent, lost, degraded, stats_reset > :'r0' AS reset_moved
  FROM mc_counters WHERE server IN ('memcached', 'ac_down', 'ac_miss') ORDER BY server;
-- and counting goes on from zero
BEGIN;
SELECT mc_delete_on_commit('ac:8', 'ac_down');
COMMIT;
SELECT server, queued, lost FROM mc_counters WHERE server = 'ac_down';
DROP OWNED BY ac_user;
DROP ROLE ac_user;
DROP SERVER ac_down;
DROP SERVER ac_miss;
