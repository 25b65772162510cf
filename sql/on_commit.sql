--
-- on_commit: writes queued in a transaction and sent once it commits
--
-- nothing is sent before COMMIT (mc_get in the same transaction still sees
-- the old value), everything at COMMIT
SELECT mc_set('oc:a', 'old');
BEGIN;
SELECT mc_delete_on_commit('oc:a');
SELECT mc_get('oc:a') AS before_commit;
COMMIT;
SELECT mc_get('oc:a') AS after_commit;
-- ROLLBACK sends nothing
SELECT mc_set('oc:a', 'old');
BEGIN;
SELECT mc_delete_on_commit('oc:a');
SELECT mc_set_on_commit('oc:b', 'new');
ROLLBACK;
SELECT mc_get('oc:a') AS a, mc_get('oc:b') AS b;
-- outside a transaction block the statement commits at once
SELECT mc_delete_on_commit('oc:a');
SELECT mc_get('oc:a');
-- mc_set_on_commit: ttl and flags as mc_set takes them; text and bytea
BEGIN;
SELECT mc_set_on_commit('oc:s', 'v1', ttl => '1 hour', flags => 7);
SELECT mc_set_on_commit('oc:bin', '\x00ff'::bytea);
SELECT mc_get('oc:s') AS before_commit;
COMMIT;
SELECT value, flags FROM mc_gets('oc:s');
SELECT mc_get_bytea('oc:bin');
-- the last write of a key wins: set then delete is a delete, delete then
-- set is a set, whatever was queued for other keys in between
SELECT mc_set('oc:lw1', 'old'), mc_set('oc:lw2', 'old');
BEGIN;
SELECT mc_set_on_commit('oc:lw1', 'x');
SELECT mc_delete_on_commit('oc:lw1');
SELECT mc_delete_on_commit('oc:lw2');
SELECT mc_set_on_commit('oc:lw2', 'y');
SELECT mc_set_on_commit('oc:lw3', 'a');
SELECT mc_set_on_commit('oc:lw4', 'other');
SELECT mc_set_on_commit('oc:lw3', 'b');
SELECT mc_set_on_commit('oc:lw4', 'c');
SELECT mc_set_on_commit('oc:lw4', 'd');
COMMIT;
SELECT mc_get('oc:lw1') AS lw1, mc_get('oc:lw2') AS lw2, mc_get('oc:lw3') AS lw3,
       mc_get('oc:lw4') AS lw4;
-- ROLLBACK TO SAVEPOINT forgets what was queued since the savepoint, and
-- what it superseded counts again; RELEASE keeps it
SELECT mc_set('oc:sp1', 'old'), mc_set('oc:sp2', 'old'), mc_set('oc:sp3', 'old');
BEGIN;
SELECT mc_delete_on_commit('oc:sp1');
SAVEPOINT a;
SELECT mc_delete_on_commit('oc:sp2');
SELECT mc_set_on_commit('oc:sp1', 'from a');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SELECT mc_delete_on_commit('oc:sp3');
RELEASE SAVEPOINT b;
COMMIT;
SELECT mc_get('oc:sp1') AS sp1, mc_get('oc:sp2') AS sp2, mc_get('oc:sp3') AS sp3;
-- a released savepoint inside one rolled back is rolled back with it
SELECT mc_set('oc:sp1', 'old'), mc_set('oc:sp3', 'old');
BEGIN;
SAVEPOINT a;
SAVEPOINT b;
SELECT mc_delete_on_commit('oc:sp2');
RELEASE SAVEPOINT b;
SELECT mc_delete_on_commit('oc:sp3');
ROLLBACK TO SAVEPOINT a;
SELECT mc_set_on_commit('oc:sp1', 'after a');
RELEASE SAVEPOINT a;
COMMIT;
SELECT mc_get('oc:sp1') AS sp1, mc_get('oc:sp2') AS sp2, mc_get('oc:sp3') AS sp3;
-- PL/pgSQL exception blocks are subtransactions: a function that queues
-- and then fails inside one forgets its keys; a block that succeeds keeps them
SELECT mc_set('oc:ex' || i, 'old') FROM generate_series(1, 4) i;
CREATE FUNCTION oc_fail(k text) RETURNS void LANGUAGE plpgsql AS
$$ BEGIN PERFORM mc_delete_on_commit(k); RAISE EXCEPTION 'failed after queueing %', k; END $$;
DO $$
BEGIN
  PERFORM mc_delete_on_commit('oc:ex1');
  BEGIN
    PERFORM oc_fail('oc:ex2');
  EXCEPTION WHEN raise_exception THEN
    RAISE NOTICE 'caught: %', SQLERRM;
  END;
  BEGIN
    PERFORM mc_delete_on_commit('oc:ex3');
  EXCEPTION WHEN others THEN
    RAISE NOTICE 'not reached';
  END;
END $$;
SELECT mc_get('oc:ex1') AS ex1, mc_get('oc:ex2') AS ex2, mc_get('oc:ex3') AS ex3,
       mc_get('oc:ex4') AS ex4;
-- the same with the error escaping: the whole transaction sends nothing
SELECT oc_fail('oc:ex4');
SELECT mc_get('oc:ex4') AS ex4;
DROP FUNCTION oc_fail(text);
-- a bad key or ttl is an error when it is queued, not at commit
SELECT mc_delete_on_commit('');
SELECT mc_delete_on_commit(repeat('x', 300));
SELECT mc_set_on_commit('oc:t', 'v', ttl => '-1 second');
SELECT mc_delete_on_commit('oc:k', 'no_such_server');
-- NULL keys and values queue nothing
SELECT mc_delete_on_commit(NULL), mc_set_on_commit('oc:n', NULL::text);
-- USAGE is checked when the write is queued
CREATE ROLE oc_user;
SET ROLE oc_user;
SELECT mc_delete_on_commit('oc:a');
RESET ROLE;
DROP ROLE oc_user;
-- PREPARE TRANSACTION is refused while writes are queued (and the
-- transaction rolls back)...
SELECT mc_set('oc:a', 'old');
BEGIN;
SELECT mc_delete_on_commit('oc:a');
PREPARE TRANSACTION 'oc_2pc';
SELECT mc_get('oc:a');
-- ...but not once they were rolled back to a savepoint (it fails here only
-- because the rig runs with max_prepared_transactions = 0)
BEGIN;
SAVEPOINT s;
SELECT mc_delete_on_commit('oc:a');
ROLLBACK TO SAVEPOINT s;
-- (terse: the server's hint quotes the setting's name from PostgreSQL 17 on)
\set VERBOSITY terse
PREPARE TRANSACTION 'oc_2pc';
\set VERBOSITY default
-- a server that is down at commit: the transaction stays committed, one
-- WARNING per server with the count, the lost writes counted; the other
-- servers' writes go out
CREATE SERVER oc_down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '127.0.0.1:1');
CREATE TABLE oc_t (id int, v text);
SELECT mc_set('oc:up', 'old');
BEGIN;
INSERT INTO oc_t VALUES (1, 'kept');
SELECT mc_delete_on_commit('oc:d1', 'oc_down');
SELECT mc_delete_on_commit('oc:d2', 'oc_down');
SELECT mc_set_on_commit('oc:d3', 'v', server => 'oc_down');
SELECT mc_delete_on_commit('oc:d1', 'oc_down');
SELECT mc_delete_on_commit('oc:up');
COMMIT;
SELECT * FROM oc_t;
SELECT mc_get('oc:up');
SELECT server, queued, sent, lost, last_error
  FROM mc_invalidation_stats WHERE server = 'oc_down';
SELECT lost FROM mc_invalidation_stats WHERE server = 'memcached';
-- a server that never answers, with io_timeout 0 (wait forever): the
-- commit still ends, within connect_timeout + 5 s
DO $$ BEGIN
  EXECUTE format('CREATE SERVER oc_hang FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, io_timeout %L)',
                 mctest.hang_addr(), '0');
END $$;
SELECT clock_timestamp() AS t0 \gset
SET client_min_messages = error;
BEGIN;
SELECT mc_delete_on_commit('oc:h' || i, 'oc_hang') FROM generate_series(1, 3) i;
COMMIT;
RESET client_min_messages;
SELECT clock_timestamp() - :'t0' < interval '8 seconds' AS bounded;
SELECT queued, sent, lost, last_error LIKE '%timed out%' AS timed_out
  FROM mc_invalidation_stats WHERE server = 'oc_hang';
DROP TABLE oc_t;
DROP SERVER oc_down;
DROP SERVER oc_hang;
