-- demo.sql — what `make run` shows when there is no terminal to open psql on.
-- The rig has created the extension and pointed the foreign server
-- "memcached" at its private memcached.

-- store a value, read it back as text and as bytes
SELECT mc_set('demo:greeting', 'hello from PostgreSQL');
SELECT mc_get('demo:greeting');
SELECT mc_get_bytea('demo:greeting');

-- a missing key reads as NULL
SELECT mc_get('demo:no-such-key');

-- delete it, and it is gone
SELECT mc_delete('demo:greeting');
SELECT mc_get('demo:greeting');
