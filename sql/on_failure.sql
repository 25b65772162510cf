--
-- on_failure: with 'miss', an unreachable instance answers every call with
-- a miss and the statement goes on
--
-- the option takes "error" or "miss"
CREATE SERVER of_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (on_failure 'maybe');
\set VERBOSITY terse
-- one instance up, one down (nothing listens on its port)
DO $$ BEGIN
  EXECUTE format('CREATE SERVER of_half FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L)',
                 mctest.addrs(1) || ',' || mctest.closed_addr(), 'miss');
END $$;
-- writes: true for the keys of the live instance, false for the others, and
-- one warning for the whole statement
CREATE TEMP TABLE of_keys AS
  SELECT 'of:' || i AS k, mc_set('of:' || i, 'v' || i, server => 'of_half') AS stored
    FROM generate_series(1, 20) i;
SELECT count(*) FILTER (WHERE stored) > 0 AS some_stored,
       count(*) FILTER (WHERE NOT stored) > 0 AS some_missed FROM of_keys;
-- reads find exactly the stored keys
SELECT count(*) FILTER (WHERE (mc_get(k, 'of_half') IS NOT NULL) <> stored) AS wrong
  FROM of_keys;
-- mc_get_multi: rows for the reachable instance only
SELECT (SELECT count(*) FROM mc_get_multi((SELECT array_agg(k) FROM of_keys), 'of_half'))
     = (SELECT count(*) FROM of_keys WHERE stored) AS multi_get_ok;
-- every single-key function on a key of the unreachable instance
SELECT min(k) AS dk FROM of_keys WHERE NOT stored \gset
SELECT mc_get(:'dk', 'of_half') AS get, mc_get_bytea(:'dk', 'of_half') AS get_bytea,
       mc_gets(:'dk', 'of_half') AS gets, mc_gat(:'dk', '1 hour', 'of_half') AS gat;
SELECT mc_add(:'dk', 'v', server => 'of_half') AS add,
       mc_replace(:'dk', 'v', server => 'of_half') AS replace,
       mc_append(:'dk', 'v', 'of_half') AS append,
       mc_cas(:'dk', 'v', 1, server => 'of_half') AS cas,
       mc_delete(:'dk', 'of_half') AS delete,
       mc_touch(:'dk', '1 hour', 'of_half') AS touch,
       mc_incr(:'dk', 1, 0, server => 'of_half') AS incr,
       mc_decr(:'dk', server => 'of_half') AS decr;
-- the keys of the live instance still work
SELECT min(k) AS lk FROM of_keys WHERE stored \gset
SELECT mc_get(:'lk', 'of_half') IS NOT NULL AS live_get, mc_delete(:'lk', 'of_half') AS live_delete;
-- batch writes: the live instance's keys are written, the others are not,
-- one warning, and the dead instance counted once per call
SELECT sum(degraded) AS b0 FROM mc_servers WHERE server = 'of_half' \gset
SELECT mc_set_multi((SELECT array_agg(k) FROM of_keys), (SELECT array_agg('w' || k) FROM of_keys),
                    server => 'of_half') = (SELECT count(*) FROM of_keys WHERE stored) AS set_multi_live_only;
SELECT sum(degraded) - :b0 AS set_multi_degraded FROM mc_servers WHERE server = 'of_half';
SELECT count(*) FILTER (WHERE mc_get(k, 'of_half') = 'w' || k) = count(*) FILTER (WHERE stored)
       AS live_written FROM of_keys;
SELECT sum(degraded) AS b0 FROM mc_servers WHERE server = 'of_half' \gset
SELECT mc_touch_multi((SELECT array_agg(k) FROM of_keys), '1 hour', 'of_half')
       = (SELECT count(*) FROM of_keys WHERE stored) AS touch_multi_live_only;
SELECT mc_delete_multi((SELECT array_agg(k) FROM of_keys), 'of_half')
       = (SELECT count(*) FROM of_keys WHERE stored) AS delete_multi_live_only;
SELECT sum(degraded) - :b0 AS touch_delete_degraded FROM mc_servers WHERE server = 'of_half';

-- every instance down: a dead port and a listener that never answers
-- (modula: the keys' instances do not depend on the listener's port)
DO $$ BEGIN
  EXECUTE format('CREATE SERVER of_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, on_failure %L, io_timeout %L, connect_timeout %L, distribution %L)',
                 mctest.closed_addr() || ',' || mctest.hang_addr(), 'miss', '100ms', '100ms', 'modula');
END $$;
SELECT sum(degraded) AS d0 FROM mc_servers WHERE server = 'of_down' \gset
SELECT mc_set('od:' || i, 'v', server => 'of_down') AS stored, mc_get('od:' || i, 'of_down') AS got
  FROM generate_series(1, 3) i;
SELECT mc_delete('od:1', 'of_down') AS delete, mc_incr('od:1', server => 'of_down') AS incr,
       mc_touch('od:1', '1 hour', 'of_down') AS touch;
SELECT count(*) FROM mc_get_multi(ARRAY['od:1', 'od:2', 'od:3'], 'of_down');
-- every degraded call is counted: 6 + 3, and the multi-get once for each of
-- the two instances
SELECT sum(degraded) - :d0 AS degraded FROM mc_servers WHERE server = 'of_down';
-- batch writes with every instance down: nothing written, no error
SELECT mc_set_multi(ARRAY['od:1', 'od:2', 'od:3'], ARRAY['a', 'b', 'c'], server => 'of_down') AS set_multi,
       mc_delete_multi(ARRAY['od:1', 'od:2', 'od:3'], 'of_down') AS delete_multi;
-- with failover too, running out of instances is a miss
ALTER SERVER of_down OPTIONS (ADD failover 'true');
SELECT mc_get('od:1', 'of_down') AS get, mc_set('od:1', 'v', server => 'of_down') AS set;
SELECT count(*) FROM mc_get_multi(ARRAY['od:1', 'od:2', 'od:3'], 'of_down');
SELECT mc_set_multi(ARRAY['od:1', 'od:2', 'od:3'], ARRAY['a', 'b', 'c'], server => 'of_down') AS set_multi;
ALTER SERVER of_down OPTIONS (DROP failover);

-- one warning per statement, however many calls; mcfdw.warn_on_miss off
-- silences it and the calls are still counted
SELECT count(mc_get('od:' || i, 'of_down')) FROM generate_series(1, 5) i;
SELECT count(mc_get('od:' || i, 'of_down')) FROM generate_series(1, 5) i;
SELECT sum(degraded) AS d1 FROM mc_servers WHERE server = 'of_down' \gset
SET mcfdw.warn_on_miss = off;
SELECT count(mc_get('od:' || i, 'of_down')) FROM generate_series(1, 5) i;
RESET mcfdw.warn_on_miss;
SELECT sum(degraded) - :d1 AS degraded_silently FROM mc_servers WHERE server = 'of_down';

-- a trigger that invalidates the cache: the UPDATE succeeds with the cache down
CREATE TABLE of_users (id int PRIMARY KEY, name text);
INSERT INTO of_users VALUES (1, 'ann'), (2, 'bob');
CREATE FUNCTION of_users_inval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mc_delete('user:' || NEW.id, 'of_down');
  RETURN NEW;
END $$;
CREATE TRIGGER of_users_inval AFTER UPDATE ON of_users
  FOR EACH ROW EXECUTE FUNCTION of_users_inval();
UPDATE of_users SET name = upper(name);
SELECT * FROM of_users ORDER BY id;
-- in a transaction block, the transaction goes on
BEGIN;
UPDATE of_users SET name = lower(name) WHERE id = 1;
SELECT mc_get('user:1', 'of_down') IS NULL AS miss;
COMMIT;
SELECT * FROM of_users ORDER BY id;

-- on_failure 'error' (the default): the same calls fail as before
ALTER SERVER of_down OPTIONS (SET on_failure 'error');
SELECT mc_get('od:1', 'of_down');
UPDATE of_users SET name = 'x';
SELECT * FROM of_users ORDER BY id;
SELECT count(*) FROM mc_get_multi(ARRAY['od:1', 'od:2', 'od:3'], 'of_down');
SELECT mc_set_multi(ARRAY['od:1', 'od:2', 'od:3'], ARRAY['a', 'b', 'c'], server => 'of_down');
ALTER SERVER of_half OPTIONS (DROP on_failure);
SELECT mc_set(:'dk', 'v', server => 'of_half');

DROP TABLE of_users;
DROP FUNCTION of_users_inval();
DROP SERVER of_half;
DROP SERVER of_down;
