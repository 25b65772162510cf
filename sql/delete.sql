--
-- delete
--
SELECT mc_set('del:a', 'x');
SELECT mc_delete('del:a');
SELECT mc_delete('del:a');
SELECT mc_get('del:a') IS NULL AS gone;
SELECT mc_delete(NULL) IS NULL AS null_key;
-- delete in a loop, as cache invalidation does
SELECT count(*) FILTER (WHERE mc_set('del:n' || i, 'v')) FROM generate_series(1, 100) i;
SELECT count(*) FILTER (WHERE mc_delete('del:n' || i)) FROM generate_series(1, 100) i;
SELECT count(*) FILTER (WHERE mc_get('del:n' || i) IS NOT NULL) FROM generate_series(1, 100) i;
-- flush_all empties every instance of the server
SELECT mc_set('del:f', 'x');
SELECT mc_flush_all();
SELECT mc_get('del:f') IS NULL AS flushed;
