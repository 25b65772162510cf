--
-- client_stats_off: mcfdw.client_stats = off leaves mc_client_stats as it
-- is (no call of any kind counted, nor a refused or degraded one), on
-- counts again; only a superuser may turn it off.
--
\set VERBOSITY terse
SELECT mctest.create('cso_srv', 1, 2);
DO $$ BEGIN
  EXECUTE format('CREATE SERVER cso_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, failure_limit %L)',
                 mctest.closed_addr(), '1');
  EXECUTE format('CREATE SERVER cso_miss FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L)',
                 mctest.closed_addr(), 'miss');
END $$;
SHOW mcfdw.client_stats;
SELECT count(mc_set('cso:' || i, 'v' || i, server => 'cso_srv')) FROM generate_series(1, 3) i;
SELECT mc_client_stats_reset();
-- off: gets, a multi-get, writes, a refused connect, a dead instance's
-- refusal and a degraded call leave no row
SET mcfdw.client_stats = off;
SELECT count(mc_get('cso:' || i, 'cso_srv')) AS hits FROM generate_series(1, 5) i;
SELECT count(*) AS hits FROM mc_get_multi(ARRAY['cso:1', 'cso:2', 'cso:9'], 'cso_srv');
SELECT mc_set('cso:4', 'v4', server => 'cso_srv'), mc_delete('cso:4', 'cso_srv');
SELECT mc_get('k', 'cso_down');
SELECT mc_get('k', 'cso_down');
SELECT mc_get('k', 'cso_miss');
SELECT count(*) AS rows FROM mc_client_stats;
-- on again: the same get is counted, once
SET mcfdw.client_stats = on;
SELECT mc_get('cso:1', 'cso_srv');
SELECT op, sum(calls) AS calls, sum(keys) AS keys, sum(hits) AS hits
  FROM mc_client_stats GROUP BY op ORDER BY op;
-- counts already made stay when counting stops
SET mcfdw.client_stats = off;
SELECT mc_get('cso:2', 'cso_srv');
SELECT op, sum(calls) AS calls FROM mc_client_stats GROUP BY op ORDER BY op;
RESET mcfdw.client_stats;
-- a role cannot stop counting its own calls
CREATE ROLE cso_user;
SET ROLE cso_user;
SET mcfdw.client_stats = off;
RESET ROLE;
DROP ROLE cso_user;
SELECT mc_client_stats_reset();
DROP SERVER cso_srv;
DROP SERVER cso_down;
DROP SERVER cso_miss;
