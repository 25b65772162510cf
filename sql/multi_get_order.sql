--
-- multi_get_order: the order of mc_get_multi's rows.  One instance's rows
-- come in the order of the array; the instances' rows are interleaved as
-- their replies arrive, so the order over several instances is not fixed
-- (README: add ORDER BY).  (mc_get_multi(...)).* in a select list is one
-- call per column, zipped by position: consistent for keys on one
-- instance, not guaranteed over several, and a round trip per column;
-- called in FROM or LATERAL it is one call whose rows are always whole.
--
SELECT mctest.create('mgo_one', 2);
SELECT mctest.create('mgo_all', 1, 2, 3, 4);
SELECT count(*) FILTER (WHERE mc_set('mgo:' || i, 'v' || i, server => s))
  FROM generate_series(1, 40) i, unnest(ARRAY['mgo_one', 'mgo_all']::name[]) s;
CREATE TEMP TABLE mgo_keys AS
  SELECT ARRAY(SELECT 'mgo:' || i FROM generate_series(40, 1, -1) i) AS keys;
-- one instance: the rows in the array's order, so the columns of the calls line up
SELECT (mc_get_multi(ARRAY['mgo:3', 'mgo:1', 'nokey', 'mgo:22', 'mgo:2'], 'mgo_one')).*;
SELECT count(*) AS rows, count(*) FILTER (WHERE value = 'v' || substr(key, 5)) AS whole,
       bool_and(o = ord) AS array_order
  FROM (SELECT g.*, row_number() OVER () AS o
          FROM (SELECT (mc_get_multi((SELECT keys FROM mgo_keys), 'mgo_one')).*) g) r
  JOIN unnest((SELECT keys FROM mgo_keys)) WITH ORDINALITY AS u(k, ord) ON u.k = r.key;
-- several instances: the keys spread over all four
SELECT count(DISTINCT instance) AS instances FROM mc_route((SELECT keys FROM mgo_keys), 'mgo_all');
-- in FROM, and in LATERAL: one call, every row whole
SELECT count(*) AS rows, count(*) FILTER (WHERE value = 'v' || substr(key, 5)) AS whole
  FROM mc_get_multi((SELECT keys FROM mgo_keys), 'mgo_all');
SELECT count(*) AS rows, count(*) FILTER (WHERE m.value = 'v' || substr(m.key, 5)) AS whole
  FROM mgo_keys t CROSS JOIN LATERAL mc_get_multi(t.keys, 'mgo_all') m;
-- the composite in a select list, expanded outside the call: one call, whole rows
SELECT count(*) AS rows, count(*) FILTER (WHERE (m).value = 'v' || substr((m).key, 5)) AS whole
  FROM (SELECT mc_get_multi((SELECT keys FROM mgo_keys), 'mgo_all') AS m) s;
-- calls per instance (mc_client_stats): (f(...)).* calls once per column (3),
-- FROM once
SELECT mc_client_stats_reset();
SELECT count(*) AS rows FROM (SELECT (mc_get_multi((SELECT keys FROM mgo_keys), 'mgo_all')).*) s;
SELECT min(calls) AS min_calls, max(calls) AS max_calls, count(*) AS instances
  FROM mc_client_stats WHERE server = 'mgo_all' AND op = 'get_multi';
SELECT mc_client_stats_reset();
SELECT count(*) AS rows FROM mc_get_multi((SELECT keys FROM mgo_keys), 'mgo_all');
SELECT min(calls) AS min_calls, max(calls) AS max_calls, count(*) AS instances
  FROM mc_client_stats WHERE server = 'mgo_all' AND op = 'get_multi';
DROP SERVER mgo_one, mgo_all;
