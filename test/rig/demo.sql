-- demo.sql — what `make run` shows when there is no terminal to open psql on.
-- The rig has created the extension and, as README's first steps do, the
-- foreign server "memcached" on its private memcached.

-- store a value, read it back as text and as bytes
SELECT mc_set('demo:greeting', 'hello from PostgreSQL');
SELECT mc_get('demo:greeting');
SELECT mc_get_bytea('demo:greeting');

-- binary values, a ttl and client flags
SELECT mc_set('demo:blob', '\x00ff00'::bytea, ttl => interval '10 minutes', flags => 7);
SELECT value, flags FROM mc_gets_bytea('demo:blob');

-- a missing key reads as NULL
SELECT mc_get('demo:no-such-key');

-- many keys in one round trip: one row per key found
SELECT count(mc_set('demo:user:' || i, 'user number ' || i)) FROM generate_series(1, 100) i;
SELECT * FROM mc_get_multi(ARRAY['demo:user:1', 'demo:user:2', 'demo:user:3', 'demo:nobody'])
 ORDER BY key;

-- counters
SELECT mc_incr('demo:hits', initial => 0), mc_incr('demo:hits'), mc_incr('demo:hits', 10);

-- delete it, and it is gone
SELECT mc_delete('demo:greeting');
SELECT mc_get('demo:greeting');

-- this session's connections
SELECT server, host, state, failures, connections, requests FROM mc_servers;
