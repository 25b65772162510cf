--
-- slab_stats: mc_slab_stats, mc_slab_summary and mc_slab_ladder — types,
-- the merge of "stats slabs" with "stats items" checked against the raw
-- lines, the waste arithmetic, down and hung instances, privileges.
-- Ports, sizes of other tests' data and timings vary from run to run: only
-- types, counts, booleans and relationships are printed.
--
-- the columns and their types
SELECT table_name, string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
  FROM information_schema.columns
 WHERE table_name IN ('mc_slab_stats', 'mc_slab_summary', 'mc_slab_ladder', 'mc_stats')
 GROUP BY table_name ORDER BY table_name;

-- a server of our own on the third rig memcached, with items in two classes
SELECT mctest.create('slab_a', 3);
SELECT count(*) FILTER (WHERE mc_set('slabtest:' || i, repeat('s', 500), server => 'slab_a')) AS small,
       count(*) FILTER (WHERE mc_set('slabtest:big:' || i, repeat('b', 3000), server => 'slab_a')) AS big
  FROM generate_series(100, 399) i;

-- the raw lines of the same instance, by class, and the view, taken
-- between two identical raw snapshots: memcached's LRU maintainer may reap
-- items other tests flushed at any moment ("age" moves with the clock and
-- is left out of the comparison)
CREATE TEMP TABLE raw_slab (class_id int, field text, value bigint);
CREATE TEMP TABLE raw_item (class_id int, field text, value bigint);
CREATE TEMP TABLE v AS SELECT * FROM mc_slab_stats('slab_a') WITH NO DATA;
CREATE FUNCTION pg_temp.raw_text() RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(name || '=' || value, ',' ORDER BY name)
    FROM (SELECT * FROM mc_stats('slab_a', 'slabs')
          UNION ALL SELECT * FROM mc_stats('slab_a', 'items')) r
   WHERE name !~ ':age' $$;
DO $$
DECLARE
  before text;
BEGIN
  FOR attempt IN 1..50 LOOP
    TRUNCATE raw_slab, raw_item, v;
    before := pg_temp.raw_text();
    INSERT INTO raw_slab
      SELECT split_part(name, ':', 1)::int, split_part(name, ':', 2), value::bigint
        FROM mc_stats('slab_a', 'slabs') WHERE name ~ '^[0-9]+:';
    INSERT INTO raw_item
      SELECT split_part(name, ':', 2)::int, split_part(name, ':', 3), value::bigint
        FROM mc_stats('slab_a', 'items') WHERE name ~ '^items:[0-9]+:';
    INSERT INTO v SELECT * FROM mc_slab_stats('slab_a');
    EXIT WHEN pg_temp.raw_text() = before;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;

-- one row per class the raw lines name, and no other
SELECT (SELECT count(*) FROM v) > 0 AS has_rows,
       (SELECT array_agg(class_id ORDER BY class_id) FROM v) =
       (SELECT array_agg(DISTINCT class_id ORDER BY class_id)
          FROM (SELECT class_id FROM raw_slab UNION SELECT class_id FROM raw_item) u) AS same_classes,
       (SELECT count(DISTINCT instance) FROM v) AS instances;

-- every typed column equals its raw line ("age" moves with the clock: skip)
SELECT f.col, f.src,
       count(*) >= 2 AS classes,
       count(*) = count(*) FILTER (WHERE r.value IS NOT DISTINCT FROM (to_jsonb(v) ->> f.col)::bigint) AS all_equal
  FROM v
  CROSS JOIN (VALUES ('chunk_size', 'slabs', 'chunk_size'), ('chunks_per_page', 'slabs', 'chunks_per_page'),
                     ('total_pages', 'slabs', 'total_pages'), ('total_chunks', 'slabs', 'total_chunks'),
                     ('used_chunks', 'slabs', 'used_chunks'), ('free_chunks', 'slabs', 'free_chunks'),
                     ('free_chunks_end', 'slabs', 'free_chunks_end'), ('get_hits', 'slabs', 'get_hits'),
                     ('cmd_set', 'slabs', 'cmd_set'), ('delete_hits', 'slabs', 'delete_hits'),
                     ('incr_hits', 'slabs', 'incr_hits'), ('decr_hits', 'slabs', 'decr_hits'),
                     ('cas_hits', 'slabs', 'cas_hits'), ('touch_hits', 'slabs', 'touch_hits'),
                     ('items', 'items', 'number'), ('mem_requested', 'items', 'mem_requested'),
                     ('evicted', 'items', 'evicted'), ('evicted_nonzero', 'items', 'evicted_nonzero'),
                     ('evicted_time', 'items', 'evicted_time'), ('evicted_unfetched', 'items', 'evicted_unfetched'),
                     ('expired_unfetched', 'items', 'expired_unfetched'), ('outofmemory', 'items', 'outofmemory'),
                     ('reclaimed', 'items', 'reclaimed'), ('crawler_reclaimed', 'items', 'crawler_reclaimed'))
             AS f(col, src, field)
  LEFT JOIN LATERAL (SELECT value FROM raw_slab s WHERE f.src = 'slabs' AND s.class_id = v.class_id AND s.field = f.field
                     UNION ALL
                     SELECT value FROM raw_item i WHERE f.src = 'items' AND i.class_id = v.class_id AND i.field = f.field) r ON true
 WHERE v.class_id IN (SELECT class_id FROM raw_item)
 GROUP BY f.col, f.src ORDER BY f.src, f.col;

-- the arithmetic: used = used_chunks * chunk_size, waste = used - requested
SELECT bool_and(used_bytes = used_chunks * chunk_size) AS used_ok,
       bool_and(waste_bytes = used_bytes - mem_requested) AS waste_ok,
       bool_and(waste_pct IS NULL AND used_bytes = 0
                OR abs(waste_pct - 100.0 * waste_bytes / used_bytes) < 1e-9) AS pct_ok,
       bool_and(total_chunks = total_pages * chunks_per_page) AS chunks_ok,
       bool_and(used_chunks + free_chunks = total_chunks) AS free_ok
  FROM v;

-- our items: the class the view puts them in is the smallest ladder class
-- that holds an item of that size (header 48 + key + 1 + value + 2 + cas 8)
CREATE TEMP TABLE ladder AS SELECT * FROM mc_slab_ladder('slab_a');
SELECT d.what,
       (SELECT class_id FROM ladder WHERE chunk_size >= d.item_size ORDER BY class_id LIMIT 1)
         = (SELECT class_id FROM v WHERE chunk_size >= d.item_size ORDER BY class_id LIMIT 1) AS ladder_agrees,
       (SELECT items >= 300 FROM v WHERE chunk_size >= d.item_size ORDER BY class_id LIMIT 1) AS holds_them
  FROM (VALUES ('500-byte values', 48 + length('slabtest:100') + 1 + 500 + 2 + 8),
               ('3000-byte values', 48 + length('slabtest:big:100') + 1 + 3000 + 2 + 8)) d(what, item_size);

-- the ladder: default settings (-f 1.25, -n 48) make 39 classes on 1.6; the
-- view's chunk sizes are the ladder's, and the ladder grows by the factor
SELECT (SELECT count(*) FROM ladder) AS ladder_classes,
       (SELECT ladder_size FROM mc_slab_summary('slab_a')) AS summary_ladder_size,
       (SELECT growth_factor FROM mc_slab_summary('slab_a')) AS growth_factor,
       (SELECT min(chunk_size) FROM ladder) AS smallest_chunk,
       (SELECT bool_and(l.chunk_size = v.chunk_size AND l.chunks_per_page = v.chunks_per_page)
          FROM v JOIN ladder l USING (class_id)) AS view_matches_ladder,
       (SELECT bool_and(b.chunk_size > a.chunk_size AND b.chunk_size <= a.chunk_size * 1.25 + 8)
          FROM ladder a JOIN ladder b ON b.class_id = a.class_id + 1
         WHERE b.class_id < (SELECT max(class_id) FROM ladder)) AS grows_by_factor;

-- the summary is the sum of the classes, next to the allocator's own totals
-- (both taken again between two identical raw snapshots, for the same reason)
CREATE TEMP TABLE sv AS SELECT * FROM mc_slab_stats('slab_a') WITH NO DATA;
CREATE TEMP TABLE ss AS SELECT * FROM mc_slab_summary('slab_a') WITH NO DATA;
DO $$
DECLARE
  before text;
BEGIN
  FOR attempt IN 1..50 LOOP
    TRUNCATE sv, ss;
    before := pg_temp.raw_text();
    INSERT INTO sv SELECT * FROM mc_slab_stats('slab_a');
    INSERT INTO ss SELECT * FROM mc_slab_summary('slab_a');
    EXIT WHEN pg_temp.raw_text() = before;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT s.active_slabs = (SELECT count(*) FROM sv WHERE total_pages > 0) AS active_slabs_ok,
       s.total_pages = (SELECT sum(total_pages) FROM sv) AS pages_ok,
       s.items = (SELECT sum(items) FROM sv) AS items_ok,
       s.used_bytes = (SELECT sum(used_bytes) FROM sv) AS used_ok,
       s.mem_requested = (SELECT sum(mem_requested) FROM sv) AS requested_ok,
       s.waste_bytes = s.used_bytes - s.mem_requested AS waste_ok,
       abs(s.waste_pct - 100.0 * s.waste_bytes / s.used_bytes) < 1e-9 AS pct_ok,
       s.total_malloced >= s.total_pages * 1048576 AS malloced_ok,
       s.limit_maxbytes = 64 * 1048576 AS limit_ok
  FROM ss s;

-- the views cover every server the user may use, the functions one
SELECT count(DISTINCT server) >= 2 AS several_servers,
       bool_or(server = 'slab_a') AS has_slab_a,
       bool_or(server = 'memcached') AS has_memcached
  FROM mc_slab_summary;
SELECT count(*) = (SELECT count(*) FROM v) AS same_rows FROM mc_slab_stats WHERE server = 'slab_a';

-- a server with one live and one closed instance: rows for the live one
-- only, and no error
DO $$ BEGIN EXECUTE format('CREATE SERVER slab_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
              mctest.addrs(3) || ',' || mctest.closed_addr()); END $$;
SELECT count(DISTINCT instance) AS instances, bool_and(instance <> mctest.closed_addr()) AS live_only,
       count(*) = (SELECT count(*) FROM v) AS same_classes
  FROM mc_slab_stats('slab_down');
SELECT count(*) AS summary_rows FROM mc_slab_summary('slab_down');
SELECT count(*) AS ladders FROM (SELECT DISTINCT instance FROM mc_slab_ladder('slab_down')) l;
-- again, now that the closed instance is marked dead (no retry, no error)
SELECT count(DISTINCT instance) AS instances FROM mc_slab_stats('slab_down');
SELECT count(*) > 0 AS view_works FROM mc_slab_stats WHERE server IN ('slab_a', 'slab_down');

-- a hung instance costs one io_timeout and contributes nothing
DO $$ BEGIN EXECUTE format('CREATE SERVER slab_hang FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, io_timeout %L, connect_timeout %L)',
              mctest.hang_addr(), '200ms', '200ms'); END $$;
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS hung_rows FROM mc_slab_stats('slab_hang');
SELECT clock_timestamp() - :'t0'::timestamptz BETWEEN interval '190 ms' AND interval '3 s' AS bounded_by_io_timeout;
SELECT count(*) AS hung_summary_rows FROM mc_slab_summary('slab_hang');

-- privileges: no USAGE, no rows (the view does not fail); naming the server
-- is refused as for every other call
CREATE ROLE mc_slab_user;
SET ROLE mc_slab_user;
SELECT count(*) AS visible FROM mc_slab_stats WHERE server = 'slab_a';
SELECT count(*) AS visible FROM mc_slab_summary WHERE server = 'slab_a';
SELECT count(*) FROM mc_slab_stats('slab_a');
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER slab_a TO mc_slab_user;
SET ROLE mc_slab_user;
SELECT count(*) > 0 AS visible FROM mc_slab_stats WHERE server = 'slab_a';
SELECT count(DISTINCT server) AS servers FROM mc_slab_summary;
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER slab_a FROM mc_slab_user;
DROP ROLE mc_slab_user;

-- stats groups mc_stats will not send
SELECT * FROM mc_stats('slab_a', 'reset');
SELECT * FROM mc_stats('slab_a', 'detail on');

SELECT count(mc_delete('slabtest:' || i, 'slab_a')) + count(mc_delete('slabtest:big:' || i, 'slab_a')) AS deleted
  FROM generate_series(100, 399) i;
DROP SERVER slab_a, slab_down, slab_hang;
