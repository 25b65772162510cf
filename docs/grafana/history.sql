-- history.sql — samples of mcfdw's statistics views for the "over time"
-- panels of mcfdw-slabs.json.
--
-- The views show memcached's counters as they are now; Grafana does not keep
-- what a query returned, so the time-series panels (evictions, hit ratio,
-- waste over time) read these two tables instead.  Run this file once in the
-- database the dashboard's data source points at (it needs the mcfdw
-- extension), then call mcfdw_sample_stats() every minute or so, e.g. with
-- pg_cron:
--
--     SELECT cron.schedule('mcfdw-stats', '* * * * *', 'CALL mcfdw_sample_stats()');
--
-- or from cron: psql -c 'CALL mcfdw_sample_stats()'.  A sample keeps every
-- column of the views, so the tables follow the views' definitions when they
-- are created.  Old samples are deleted after mcfdw_sample_stats' keep
-- interval (7 days unless told otherwise).

CREATE TABLE IF NOT EXISTS mcfdw_slab_history AS
  SELECT now() AS sampled_at, * FROM mc_slab_stats WITH NO DATA;
CREATE INDEX IF NOT EXISTS mcfdw_slab_history_at ON mcfdw_slab_history (sampled_at);

CREATE TABLE IF NOT EXISTS mcfdw_server_history AS
  SELECT now() AS sampled_at, * FROM mc_server_stats WITH NO DATA;
CREATE INDEX IF NOT EXISTS mcfdw_server_history_at ON mcfdw_server_history (sampled_at);

CREATE OR REPLACE PROCEDURE mcfdw_sample_stats(keep interval DEFAULT '7 days')
LANGUAGE sql AS $$
  INSERT INTO mcfdw_slab_history SELECT now(), * FROM mc_slab_stats;
  INSERT INTO mcfdw_server_history SELECT now(), * FROM mc_server_stats;
  DELETE FROM mcfdw_slab_history WHERE sampled_at < now() - keep;
  DELETE FROM mcfdw_server_history WHERE sampled_at < now() - keep;
$$;
