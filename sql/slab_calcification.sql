--
-- slab_calcification: mc_slab_calcification on the rig's memcacheds, none of
-- them calcified — the types, one row per live instance, the automover's
-- setting and counters equal to the raw stats lines, privileges.  The
-- signal itself lights up in test/integration/slab_experiments.py
-- (slab_automove=0 against 2) and its thresholds are checked at their edges
-- in test/integration/slab_calcification.py.
--
-- the columns and their types
SELECT column_name, data_type
  FROM information_schema.columns WHERE table_name = 'mc_slab_calcification'
 ORDER BY ordinal_position;

-- a server of our own on the third rig memcached, with a few items
SELECT mctest.create('calc_a', 3);
SELECT count(*) FILTER (WHERE mc_set('calctest:' || i, repeat('c', 500), server => 'calc_a')) AS stored
  FROM generate_series(1, 50) i;

-- one row: a rig memcached (64 MB, nearly empty) is not calcified
SELECT count(*) AS rows, bool_and(NOT calcified) AS not_calcified,
       bool_and(reason IS NULL AND starved_class IS NULL AND oldest_class IS NULL) AS no_classes
  FROM mc_slab_calcification('calc_a');

-- the automover's setting and counters are memcached's lines, by the same
-- names (taken between two identical raw snapshots: they may move)
CREATE TEMP TABLE raw (name text, value text);
CREATE TEMP TABLE cv AS SELECT * FROM mc_slab_calcification('calc_a') WITH NO DATA;
DO $$
DECLARE
  before text;
  snap text := $q$SELECT string_agg(name || '=' || value, ',' ORDER BY name)
                   FROM (SELECT name, value FROM mc_stats('calc_a') WHERE name ~ '^(slab|evictions)'
                         UNION ALL SELECT name, value FROM mc_stats('calc_a', 'settings')
                          WHERE name = 'slab_automove') s$q$;
BEGIN
  FOR attempt IN 1..50 LOOP
    TRUNCATE raw, cv;
    EXECUTE snap INTO before;
    INSERT INTO raw SELECT name, value FROM mc_stats('calc_a') WHERE name ~ '^(slab|evictions)';
    INSERT INTO raw SELECT name, value FROM mc_stats('calc_a', 'settings') WHERE name = 'slab_automove';
    INSERT INTO cv SELECT * FROM mc_slab_calcification('calc_a');
    EXIT WHEN (SELECT string_agg(name || '=' || value, ',' ORDER BY name) FROM raw) = before;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT f.col, r.value IS NOT NULL AS server_reports_it,
       r.value = CASE WHEN f.col = 'slab_reassign_running'
                      THEN (CASE WHEN (to_jsonb(cv) ->> f.col)::boolean THEN '1' ELSE '0' END)
                      ELSE to_jsonb(cv) ->> f.col END AS equal
  FROM cv
  CROSS JOIN unnest(ARRAY['slab_global_page_pool', 'slab_automove', 'evictions', 'slabs_moved',
                          'slab_reassign_rescues', 'slab_reassign_chunk_rescues',
                          'slab_reassign_evictions_nomem', 'slab_reassign_inline_reclaim',
                          'slab_reassign_busy_items', 'slab_reassign_busy_deletes',
                          'slab_reassign_running']) f(col)
  LEFT JOIN raw r ON r.name = f.col
 ORDER BY f.col;

-- a server with one live and one closed instance: a row for the live one
DO $$ BEGIN EXECUTE format('CREATE SERVER calc_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
              mctest.addrs(3) || ',' || mctest.closed_addr()); END $$;
SELECT count(*) AS rows, bool_and(instance <> mctest.closed_addr()) AS live_only
  FROM mc_slab_calcification('calc_down');
SELECT count(DISTINCT server) >= 2 AS view_covers_servers FROM mc_slab_calcification
 WHERE server IN ('calc_a', 'calc_down', 'memcached');

-- privileges: no USAGE, no rows in the view; naming the server is refused
CREATE ROLE mc_calc_user;
SET ROLE mc_calc_user;
SELECT count(*) AS visible FROM mc_slab_calcification WHERE server = 'calc_a';
SELECT count(*) FROM mc_slab_calcification('calc_a');
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER calc_a TO mc_calc_user;
SET ROLE mc_calc_user;
SELECT count(*) AS visible FROM mc_slab_calcification WHERE server = 'calc_a';
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER calc_a FROM mc_calc_user;
DROP ROLE mc_calc_user;

SELECT count(mc_delete('calctest:' || i, 'calc_a')) AS deleted FROM generate_series(1, 50) i;
DROP SERVER calc_a, calc_down;
