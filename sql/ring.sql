--
-- ring: distributions, weights and the mc_servers view
--
-- every distribution name, and what the view reports of the ring
DO $$
DECLARE
  d text;
BEGIN
  FOREACH d IN ARRAY ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula'] LOOP
    EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, distribution %L)',
                   'ring_' || d, 'a.example:11211:3, b.example:11211, c.example:11311', d);
  END LOOP;
END $$;
SELECT server, host, port, weight, distribution, points, state, failures, last_error, dead_until, connections, requests, instance
  FROM mc_servers WHERE server::text LIKE 'ring_%' ORDER BY server, instance;
-- one server: no continuum
CREATE SERVER ring_one FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'solo.example:11211');
SELECT server, points FROM mc_servers WHERE server = 'ring_one';
-- the view shows only servers the user may use
CREATE ROLE mc_ring_user;
GRANT USAGE ON FOREIGN SERVER ring_dalli TO mc_ring_user;
SET ROLE mc_ring_user;
SELECT DISTINCT server FROM mc_servers WHERE server::text LIKE 'ring_%';
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER ring_dalli FROM mc_ring_user;
DROP ROLE mc_ring_user;
-- each distribution routes the same keys its own way: record, for keys
-- written through it, which instance holds each (read through one-instance
-- servers), and check that the six layouts all differ.  (The layouts
-- themselves depend on the instances' ports, which change from run to run;
-- test/integration/ring_clients.py checks them against the real clients.)
DO $$
DECLARE
  d text;
BEGIN
  FOREACH d IN ARRAY ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula'] LOOP
    EXECUTE format('ALTER SERVER %I OPTIONS (SET servers %L)', 'ring_' || d, mctest.addrs(1, 2, 3));
  END LOOP;
END $$;
SELECT mctest.create('ring_i1', 1), mctest.create('ring_i2', 2), mctest.create('ring_i3', 3);
CREATE TEMP TABLE layout (d text, fingerprint text);
DO $$
DECLARE
  d text;
BEGIN
  FOREACH d IN ARRAY ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula'] LOOP
    PERFORM mc_flush_all(('ring_' || d)::name);
    PERFORM mc_set('ring:' || i, d, server => ('ring_' || d)::name) FROM generate_series(1, 60) i;
    INSERT INTO layout
      SELECT d, string_agg(CASE WHEN mc_get('ring:' || i, 'ring_i1') IS NOT NULL THEN '1'
                                WHEN mc_get('ring:' || i, 'ring_i2') IS NOT NULL THEN '2'
                                WHEN mc_get('ring:' || i, 'ring_i3') IS NOT NULL THEN '3'
                                ELSE '?' END, '' ORDER BY i)
        FROM generate_series(1, 60) i;
  END LOOP;
END $$;
SELECT count(*) AS layouts, count(DISTINCT fingerprint) AS distinct_layouts,
       bool_and(fingerprint !~ '[?]') AS every_key_found,
       bool_and(fingerprint ~ '1' AND fingerprint ~ '2' AND fingerprint ~ '3') AS all_instances_used
  FROM layout;
DROP SERVER ring_i1, ring_i2, ring_i3;
SELECT server, instance, state, requests > 0 AS used FROM mc_servers
 WHERE server IN ('ring_ketama', 'ring_dalli', 'ring_modula') ORDER BY server, instance;
DROP SERVER ring_ketama, ring_ketama_md5, ring_ketama_weighted, ring_ketama_weighted_oat,
            ring_dalli, ring_modula, ring_one;
