--
-- route: mc_route, where each key goes, asked of the routing the get path
-- uses, without contacting memcached
--
-- an error's SQLSTATE and message, for the refusals below
CREATE FUNCTION mctest.route_err(q text) RETURNS text LANGUAGE plpgsql AS
$$ BEGIN
     EXECUTE q;
     RETURN 'no error';
   EXCEPTION WHEN OTHERS THEN
     RETURN SQLSTATE || ': ' || SQLERRM;
   END $$;

-- instances that are never contacted: the ring depends only on host:port
CREATE SERVER rt_ketama FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'a.example:11211, b.example:11211, c.example:11311');
SELECT * FROM mc_route(ARRAY['user:1', 'user:2', 'user:3', 'cart:17', 'k'], 'rt_ketama');
-- instance is mc_servers.instance: the same host and port
SELECT bool_and(r.host = s.host AND r.port = s.port) AS same_as_mc_servers, count(*)
  FROM mc_route((SELECT array_agg('k' || i) FROM generate_series(1, 200) i), 'rt_ketama') r
  JOIN mc_servers s ON s.server = 'rt_ketama' AND s.instance = r.instance;
-- nothing was contacted
SELECT instance, state, connections, requests FROM mc_servers WHERE server = 'rt_ketama' ORDER BY instance;
-- the default server (mcfdw.server)
SET mcfdw.server = 'rt_ketama';
SELECT key, instance, host, port FROM mc_route(ARRAY['user:1']);
RESET mcfdw.server;

-- every distribution, on the same instances: each its own layout
DO $$
DECLARE
  d text;
BEGIN
  FOREACH d IN ARRAY ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula'] LOOP
    EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, distribution %L)',
                   'rt_' || d || '_w', 'a.example:11211:3, b.example:11211, c.example:11311', d);
  END LOOP;
END $$;
SELECT d AS distribution,
       (SELECT string_agg(instance::text, '' ORDER BY o)
          FROM mc_route((SELECT array_agg('key' || i) FROM generate_series(0, 29) i),
                        ('rt_' || d || '_w')::name) WITH ORDINALITY AS r(key, instance, host, port, wire_key, base64, dead, failover_instance, o))
         AS instances_of_key0_to_key29
  FROM unnest(ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula']) d;
-- the published vectors (shared notes): localhost:11211-11213, weight 1
CREATE SERVER rt_vec_dalli FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'localhost:11211, localhost:11212, localhost:11213', distribution 'dalli');
CREATE SERVER rt_vec_ketama FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'localhost:11211, localhost:11212, localhost:11213', distribution 'ketama');
CREATE SERVER rt_vec_modula FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'localhost:11211, localhost:11212, localhost:11213', distribution 'modula');
SELECT d.key, d.port AS dalli, k.port AS ketama, m.port AS modula
  FROM mc_route(ARRAY['key0', 'key1', 'key7', 'key9'], 'rt_vec_dalli') d
  JOIN mc_route(ARRAY['key0', 'key1', 'key7', 'key9'], 'rt_vec_ketama') k USING (key)
  JOIN mc_route(ARRAY['key0', 'key1', 'key7', 'key9'], 'rt_vec_modula') m USING (key)
 ORDER BY d.key;

-- the key prefix: on the wire and in the hash
CREATE SERVER rt_prefix FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'a.example:11211, b.example:11211, c.example:11311', key_prefix 'app:');
SELECT key, instance, wire_key, base64 FROM mc_route(ARRAY['user:1', 'user:2', 'user:3'], 'rt_prefix');
-- routed as the prefixed key is on a server without the prefix
SELECT bool_and(p.instance = k.instance) AS prefix_hashed, count(*)
  FROM mc_route((SELECT array_agg('k' || i) FROM generate_series(1, 100) i), 'rt_prefix') p
  JOIN mc_route((SELECT array_agg('app:k' || i) FROM generate_series(1, 100) i), 'rt_ketama') k
    ON k.key = 'app:' || p.key;

-- keys with spaces, control characters or non-ASCII bytes go base64
SELECT key, wire_key, base64, convert_from(decode(wire_key, 'base64'), 'UTF8') AS decoded
  FROM mc_route(ARRAY['with space', 'caf' || chr(233), E'tab\there'], 'rt_prefix');
SELECT key, wire_key, base64 FROM mc_route(ARRAY['with space', 'plain'], 'rt_ketama');

-- long keys: Dalli's digest with long_keys 'dalli', an error without
CREATE SERVER rt_long FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'a.example:11211, b.example:11211', distribution 'dalli',
           key_prefix 'app:', long_keys 'dalli');
SELECT length(key) AS key_length, length(wire_key) AS wire_length, base64,
       wire_key = left('app:' || key, 213) || ':md5:' || md5('app:' || key) AS dalli_digest
  FROM mc_route(ARRAY[repeat('x', 300), repeat('y', 246)], 'rt_long');
-- 246 characters + the prefix fit: not digested
SELECT wire_key = 'app:' || repeat('y', 246) AS as_given
  FROM mc_route(ARRAY[repeat('y', 246)], 'rt_long');
-- a digested key whose kept head has a space would go base64, over 186
-- bytes: refused as mc_get refuses it
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY['a b' || repeat('z', 300)], 'rt_long')$$) AS digest_base64;
SELECT mctest.route_err($$SELECT mc_get('a b' || repeat('z', 300), 'rt_long')$$) AS mc_get_digest_base64;
-- ... and routed by the digest: where the digest itself goes
CREATE SERVER rt_long_plain FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers 'a.example:11211, b.example:11211', distribution 'dalli');
SELECT count(*) AS keys, count(*) FILTER (WHERE r.instance = p.instance) AS routed_by_digest,
       count(DISTINCT r.instance) AS instances_used
  FROM mc_route((SELECT array_agg(i || repeat('x', 300)) FROM generate_series(1, 40) i), 'rt_long') r,
       mc_route(ARRAY[r.wire_key], 'rt_long_plain') p;
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY[repeat('x', 300)], 'rt_ketama')$$) AS too_long;
SELECT mctest.route_err($$SELECT mc_get(repeat('x', 300), 'rt_ketama')$$) AS mc_get_too_long;
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY[repeat(chr(233), 100)], 'rt_ketama')$$) AS too_long_base64;
SELECT mctest.route_err($$SELECT mc_get(repeat(chr(233), 100), 'rt_ketama')$$) AS mc_get_too_long_base64;

-- README's example
CREATE SERVER rt_rails FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '10.0.0.1:11211, 10.0.0.2:11211', distribution 'dalli',
           key_prefix 'app:', long_keys 'dalli');
SELECT left(key, 12) AS key, instance, host, port, left(wire_key, 24) AS wire_key, base64, dead, failover_instance
  FROM mc_route(ARRAY['user:1', 'user:4', 'with space', repeat('x', 300)], 'rt_rails');

-- invalid keys, unknown servers
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY['ok', ''], 'rt_ketama')$$) AS empty_key;
SELECT mctest.route_err($$SELECT mc_get('', 'rt_ketama')$$) AS mc_get_empty_key;
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY['k'], 'rt_nosuch')$$) AS unknown_server;
SET mcfdw.server = 'rt_nosuch';
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY['k'])$$) AS unknown_default_server;
RESET mcfdw.server;

-- NULLs: a NULL element is a row of NULLs, in its place; a NULL or empty
-- array gives no rows; duplicates each get their row
SELECT o, key, instance, host, port, wire_key, base64, dead, failover_instance
  FROM mc_route(ARRAY['user:1', NULL, 'user:1'], 'rt_ketama') WITH ORDINALITY
       AS r(key, instance, host, port, wire_key, base64, dead, failover_instance, o);
SELECT count(*) FROM mc_route(NULL, 'rt_ketama');
SELECT count(*) FROM mc_route('{}', 'rt_ketama');
-- a two-dimensional array is read in storage order, as mc_get_multi reads it
SELECT key FROM mc_route(ARRAY[['a', 'b'], ['c', 'd']], 'rt_ketama');

-- privileges: USAGE on the server, as every other function asks
CREATE ROLE mc_route_user;
GRANT USAGE ON SCHEMA mctest TO mc_route_user;
SET ROLE mc_route_user;
SELECT mctest.route_err($$SELECT * FROM mc_route(ARRAY['k'], 'rt_ketama')$$) AS without_usage;
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER rt_ketama TO mc_route_user;
SET ROLE mc_route_user;
SELECT key, instance, host, port FROM mc_route(ARRAY['user:1'], 'rt_ketama');
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER rt_ketama FROM mc_route_user;
REVOKE USAGE ON SCHEMA mctest FROM mc_route_user;
DROP ROLE mc_route_user;

-- routed where the writes go: keys set through a three-instance server are
-- read back through a one-instance server on the instance mc_route names,
-- for every distribution (with a prefix, so it counts too)
SELECT mctest.create('rt_i1', 1), mctest.create('rt_i2', 2), mctest.create('rt_i3', 3);
DO $$
DECLARE
  d text;
BEGIN
  FOREACH d IN ARRAY ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula'] LOOP
    EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, distribution %L, key_prefix %L)',
                   'rt_live_' || d, mctest.addrs(1, 2, 3), d, 'rt:');
  END LOOP;
END $$;
CREATE TEMP TABLE rt_found (d text, key text, instance int, found int);
DO $$
DECLARE
  d text;
  srv name;
BEGIN
  FOREACH d IN ARRAY ARRAY['ketama', 'ketama_md5', 'ketama_weighted', 'ketama_weighted_oat', 'dalli', 'modula'] LOOP
    srv := ('rt_live_' || d)::name;
    PERFORM mc_flush_all(srv);
    PERFORM mc_set('k' || i || ' ' || d, d, server => srv) FROM generate_series(1, 60) i;
    INSERT INTO rt_found
      SELECT d, r.key, r.instance,
             CASE WHEN mc_get('rt:' || r.key, 'rt_i1') = d THEN 1
                  WHEN mc_get('rt:' || r.key, 'rt_i2') = d THEN 2
                  WHEN mc_get('rt:' || r.key, 'rt_i3') = d THEN 3 END
        FROM mc_route((SELECT array_agg('k' || i || ' ' || d) FROM generate_series(1, 60) i), srv) r;
  END LOOP;
END $$;
SELECT d AS distribution, count(*) AS keys,
       count(*) FILTER (WHERE found = instance) AS where_routed,
       count(DISTINCT instance) AS instances_used
  FROM rt_found GROUP BY d ORDER BY d;

-- a dead instance: instance and host stay the key's place on the ring, dead
-- says the instance is marked dead, failover_instance is where a read goes
-- now.  The first instance is a closed port; a multi-get of its keys alone
-- marks it dead (failure_limit 1) and contacts no other instance.
SET mcfdw.warn_on_miss = off;
DO $$ BEGIN
  EXECUTE format('CREATE SERVER rt_dead_dalli FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, distribution %L, failover %L, failure_limit %L, retry_delay %L, on_failure %L, connect_timeout %L)',
                 mctest.closed_addr() || ', a.example:11211, b.example:11211', 'dalli', 'on', '1', '1h', 'miss', '500ms');
  EXECUTE format('CREATE SERVER rt_dead_ketama FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, failover %L, failure_limit %L, retry_delay %L, on_failure %L, connect_timeout %L)',
                 mctest.closed_addr() || ', a.example:11211, b.example:11211', 'on', '1', '1h', 'miss', '500ms');
  EXECUTE format('CREATE SERVER rt_dead_off FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, failure_limit %L, retry_delay %L, on_failure %L, connect_timeout %L)',
                 mctest.closed_addr() || ', a.example:11211, b.example:11211', '1', '1h', 'miss', '500ms');
END $$;
CREATE TEMP TABLE rt_keys AS SELECT 'dk' || i AS k FROM generate_series(1, 60) i;
-- before: nothing dead, a read goes to the key's instance
SELECT s AS server, count(*) AS keys, count(*) FILTER (WHERE dead) AS dead,
       count(*) FILTER (WHERE failover_instance = instance) AS read_there
  FROM unnest(ARRAY['rt_dead_dalli', 'rt_dead_ketama', 'rt_dead_off']::name[]) s,
       mc_route((SELECT array_agg(k) FROM rt_keys), s)
 GROUP BY s ORDER BY s;
SELECT s AS server,
       (SELECT count(*) FROM mc_get_multi(
          (SELECT array_agg(key) FROM mc_route((SELECT array_agg(k) FROM rt_keys), s) WHERE instance = 1), s))
         AS hits
  FROM unnest(ARRAY['rt_dead_dalli', 'rt_dead_ketama', 'rt_dead_off']::name[]) s ORDER BY s;
SELECT server, instance, state FROM mc_servers WHERE server::text LIKE 'rt_dead_%' ORDER BY server, instance;
-- after: the first instance's keys still map to it, marked dead; with
-- failover they are read from another instance, without it from none
SELECT s AS server, instance, count(*) AS keys, bool_and(dead) AS dead,
       count(*) FILTER (WHERE failover_instance = instance) AS read_there,
       count(*) FILTER (WHERE failover_instance IN (2, 3) AND failover_instance <> instance) AS failed_over,
       count(*) FILTER (WHERE failover_instance IS NULL) AS read_nowhere
  FROM unnest(ARRAY['rt_dead_dalli', 'rt_dead_ketama', 'rt_dead_off']::name[]) s,
       mc_route((SELECT array_agg(k) FROM rt_keys), s)
 GROUP BY s, instance ORDER BY s, instance;
-- where a failed-over key goes is the client family's choice: Dalli's
-- rehash, the live instances' continuum for ketama
SELECT key, instance, dead, failover_instance
  FROM mc_route(ARRAY['dk1', 'dk2', 'dk3', 'dk4', 'dk5', 'dk6', 'dk7', 'dk8'], 'rt_dead_dalli');
SELECT key, instance, dead, failover_instance
  FROM mc_route(ARRAY['dk1', 'dk2', 'dk3', 'dk4', 'dk5', 'dk6', 'dk7', 'dk8'], 'rt_dead_ketama');
RESET mcfdw.warn_on_miss;

DO $$
DECLARE
  s name;
BEGIN
  FOR s IN SELECT srvname FROM pg_foreign_server WHERE srvname::text LIKE 'rt\_%' LOOP
    EXECUTE format('DROP SERVER %I', s);
  END LOOP;
END $$;
DROP FUNCTION mctest.route_err(text);
