/* mcfdw--1.0--1.1.sql — from 1.0 to 1.1: writes at commit, the mc_invalidate
   trigger, mc_invalidation_stats, mc_flush_all revoked from PUBLIC. */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION mcfdw UPDATE TO '1.1'" to load this file. \quit

-- Writes at commit (xact.c, trigger.c) ------------------------------------
-- Queued in the transaction, sent once it commits: nothing is sent before
-- COMMIT, nothing after ROLLBACK, and ROLLBACK TO SAVEPOINT forgets what was
-- queued since the savepoint.  The last write of a key wins.  A failure
-- after commit is a WARNING, counted in mc_invalidation_stats.

CREATE FUNCTION mc_delete_on_commit(key text, server name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'mc_delete_on_commit'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_set_on_commit(key text, value text, ttl interval DEFAULT NULL,
                                 flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'mc_set_on_commit'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_set_on_commit(key text, value bytea, ttl interval DEFAULT NULL,
                                 flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'mc_set_on_commit'
LANGUAGE C VOLATILE;

-- CREATE TRIGGER ... AFTER INSERT OR UPDATE OR DELETE ON t FOR EACH ROW
--   EXECUTE FUNCTION mc_invalidate('user:{id}', 'user_email:{email}');
CREATE FUNCTION mc_invalidate()
RETURNS trigger
AS 'MODULE_PATHNAME', 'mc_invalidate'
LANGUAGE C;

-- this backend's on-commit writes, per server
CREATE FUNCTION mc_invalidation_stats(
    OUT server name, OUT queued bigint, OUT sent bigint, OUT lost bigint,
    OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_invalidation_stats'
LANGUAGE C VOLATILE;

CREATE VIEW mc_invalidation_stats AS SELECT * FROM mc_invalidation_stats();
GRANT SELECT ON mc_invalidation_stats TO PUBLIC;

-- Privileges ------------------------------------------------------------------
-- Emptying a whole cache is for the roles it is granted to (as
-- pg_stat_statements_reset is); USAGE on a server still means reading and
-- writing its keys.
REVOKE ALL ON FUNCTION mc_flush_all(name) FROM PUBLIC;

-- Batch writes (batch_sql.c, batch.c) ----------------------------------------
-- One quiet pipeline per instance, written to all before any reply is read.
-- A key given twice is sent once (for a set, the last value wins); each
-- returns how many distinct keys were stored, deleted or touched.
-- mc_set_multi: arrays of equal length, no NULL key or value;
-- mc_delete_multi and mc_touch_multi skip NULL keys, as mc_get_multi does.

CREATE FUNCTION mc_set_multi(keys text[], "values" text[], ttl interval DEFAULT NULL,
                             flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'mc_set_multi'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_set_multi(keys text[], "values" bytea[], ttl interval DEFAULT NULL,
                             flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'mc_set_multi'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_delete_multi(keys text[], server name DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'mc_delete_multi'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_touch_multi(keys text[], ttl interval, server name DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'mc_touch_multi'
LANGUAGE C VOLATILE;
