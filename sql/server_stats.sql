--
-- server_stats: mc_stats and mc_server_stats — types, typed values against
-- the raw lines, hit_ratio, down and hung instances, privileges.  Only
-- types, counts, booleans and relationships are printed (ports, pids and
-- uptimes change from run to run).
--
SELECT ordinal_position, column_name, data_type
  FROM information_schema.columns WHERE table_name = 'mc_server_stats'
 ORDER BY ordinal_position;
-- PUBLIC may read them, and nothing else (the owner's own privileges are
-- the defaults, whose letters vary between PostgreSQL majors)
SELECT c.relname, a.privilege_type
  FROM pg_class c, aclexplode(c.relacl) a
 WHERE c.relname IN ('mc_stats', 'mc_server_stats', 'mc_slab_stats', 'mc_slab_summary', 'mc_slab_ladder')
   AND a.grantee = 0
 ORDER BY 1, 2;

SELECT mctest.create('sst_a', 2);

-- every plain "stats" line, once per instance
SELECT count(*) > 50 AS many_lines, count(DISTINCT name) = count(*) AS unique_names,
       bool_or(name = 'version') AS has_version, count(DISTINCT instance) AS instances
  FROM mc_stats('sst_a');
SELECT name, value ~ '^[0-9]+$' AS numeric FROM mc_stats('sst_a')
 WHERE name IN ('pid', 'uptime', 'curr_items', 'limit_maxbytes') ORDER BY name;
SELECT count(*) > 0 AS settings_lines, bool_or(name = 'growth_factor') AS has_growth_factor
  FROM mc_stats('sst_a', 'settings');

-- hit_ratio follows get_hits and get_misses: 3 hits and 2 misses more
SELECT mc_set('sst:' || i, 'v', server => 'sst_a') FROM generate_series(1, 3) i;
CREATE TEMP TABLE before AS SELECT * FROM mc_server_stats('sst_a');
SELECT count(g) AS hits, count(*) - count(g) AS misses
  FROM generate_series(1, 5) i, LATERAL mc_get('sst:' || i, 'sst_a') g;
SELECT a.get_hits - b.get_hits AS more_hits, a.get_misses - b.get_misses AS more_misses,
       a.cmd_get - b.cmd_get AS more_gets,
       abs(a.hit_ratio - a.get_hits::float8 / (a.get_hits + a.get_misses)) < 1e-12 AS ratio_ok,
       a.hit_ratio BETWEEN 0 AND 1 AS ratio_range
  FROM mc_server_stats('sst_a') a, before b;

-- the typed row against the raw lines.  Only counters nothing in the
-- background moves (the LRU maintainer changes curr_items and bytes, every
-- stats command bytes_read and bytes_written, the clock uptime and rusage).
CREATE TEMP TABLE raw AS SELECT name, value FROM mc_stats('sst_a');
CREATE TEMP TABLE typed AS SELECT * FROM mc_server_stats('sst_a');
SELECT c AS col, (to_jsonb(t) ->> c) = (SELECT value FROM raw WHERE name = c) AS equal
  FROM typed t,
       unnest(ARRAY['version', 'pid', 'pointer_size', 'threads', 'max_connections', 'limit_maxbytes',
                    'total_items', 'cmd_get', 'cmd_set', 'cmd_flush', 'cmd_touch', 'get_hits', 'get_misses',
                    'get_expired', 'get_flushed', 'delete_hits', 'delete_misses', 'incr_hits', 'incr_misses',
                    'decr_hits', 'decr_misses', 'cas_hits', 'cas_misses', 'cas_badval', 'touch_hits',
                    'touch_misses', 'evictions', 'evicted_unfetched', 'expired_unfetched', 'slabs_moved']) c
 ORDER BY c;
-- the doubles parse, and everything an answering instance reports is set
SELECT rusage_user >= 0 AND rusage_system >= 0 AS rusage_ok,
       (SELECT value FROM raw WHERE name = 'rusage_user') ~ '^[0-9]+\.[0-9]+$' AS raw_is_fractional,
       uptime >= 0 AS uptime_ok, curr_connections >= 1 AS connected,
       host = '127.0.0.1' AS host_ok, instance = host || ':' || port AS instance_ok,
       port = mctest.port(2) AS port_ok, error IS NULL AS no_error,
       (SELECT count(*) FROM jsonb_each(to_jsonb(t)) WHERE value = 'null') AS null_columns
  FROM typed t;

-- a server with a live and a closed instance: a row for each, the dead one
-- with its error and nothing else; no error is raised
DO $$ BEGIN EXECUTE format('CREATE SERVER sst_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
              mctest.addrs(2) || ',' || mctest.closed_addr()); END $$;
SELECT instance = mctest.closed_addr() AS closed, error IS NULL AS answered, version IS NOT NULL AS has_version,
       error, (SELECT count(*) FROM jsonb_each(to_jsonb(s)) WHERE value <> 'null') AS set_columns
  FROM mc_server_stats('sst_down') s ORDER BY closed;
-- the second failure reaches failure_limit (2): from then on the instance
-- is marked dead and not tried, and the error says so
SELECT instance = mctest.closed_addr() AS closed, error FROM mc_server_stats('sst_down') ORDER BY closed;
SELECT instance = mctest.closed_addr() AS closed, error FROM mc_server_stats('sst_down') ORDER BY closed;
SELECT count(*) AS rows, count(DISTINCT instance) AS instances FROM mc_stats('sst_down')
 WHERE name = 'version';
SELECT count(*) FILTER (WHERE error IS NULL) AS answering, count(*) FILTER (WHERE error IS NOT NULL) AS failing
  FROM mc_server_stats WHERE server IN ('sst_a', 'sst_down');

-- a hung instance: one row with the timeout, within the io_timeout
DO $$ BEGIN EXECUTE format('CREATE SERVER sst_hang FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, io_timeout %L)',
              mctest.addrs(2) || ',' || mctest.hang_addr(), '200ms'); END $$;
SELECT clock_timestamp() AS t0 \gset
SELECT instance = mctest.hang_addr() AS hung, error FROM mc_server_stats('sst_hang') ORDER BY hung;
SELECT clock_timestamp() - :'t0'::timestamptz BETWEEN interval '190 ms' AND interval '3 s' AS bounded_by_io_timeout;
SELECT count(DISTINCT instance) AS instances FROM mc_stats('sst_hang');

-- privileges: the views show only servers the user has USAGE on
CREATE ROLE mc_sst_user;
SET ROLE mc_sst_user;
SELECT count(*) AS visible FROM mc_server_stats WHERE server = 'sst_a';
SELECT count(*) AS visible FROM mc_stats WHERE server = 'sst_a';
SELECT count(*) FROM mc_server_stats('sst_a');
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER sst_a TO mc_sst_user;
SET ROLE mc_sst_user;
SELECT server, error IS NULL AS answered FROM mc_server_stats;
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER sst_a FROM mc_sst_user;
DROP ROLE mc_sst_user;

-- an unknown server is an error, as everywhere
SELECT * FROM mc_server_stats('no_such_server');

SELECT count(mc_delete('sst:' || i, 'sst_a')) FROM generate_series(1, 3) i;
DROP SERVER sst_a, sst_down, sst_hang;
