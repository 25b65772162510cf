/* mcfdw--1.2.sql — the SQL surface of mcfdw 1.2, installed directly by
   CREATE EXTENSION (not 1.0 plus updates). */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION mcfdw" to load this file. \quit

-- Servers are foreign servers of this wrapper; the validator checks their options.
CREATE FUNCTION mcfdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- Foreign tables (fdw*.c): key conditions become pipelined multi-gets, rows
-- become writes.
CREATE FUNCTION mcfdw_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER mcfdw
  HANDLER mcfdw_handler
  VALIDATOR mcfdw_validator;

CREATE SERVER memcached
  FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '127.0.0.1:11211');

-- Reads ---------------------------------------------------------------------

CREATE FUNCTION mc_get(key text, server name DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'mc_get'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_get_bytea(key text, server name DEFAULT NULL)
RETURNS bytea
AS 'MODULE_PATHNAME', 'mc_get_bytea'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_gets(key text, server name DEFAULT NULL,
                        OUT value text, OUT flags integer, OUT cas bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'mc_gets'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_gets_bytea(key text, server name DEFAULT NULL,
                              OUT value bytea, OUT flags integer, OUT cas bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'mc_gets_bytea'
LANGUAGE C VOLATILE;

-- Writes --------------------------------------------------------------------

CREATE FUNCTION mc_set(key text, value text, ttl interval DEFAULT NULL,
                       flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_set'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_set(key text, value bytea, ttl interval DEFAULT NULL,
                       flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_set'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_add(key text, value text, ttl interval DEFAULT NULL,
                       flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_add'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_add(key text, value bytea, ttl interval DEFAULT NULL,
                       flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_add'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_replace(key text, value text, ttl interval DEFAULT NULL,
                           flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_replace'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_replace(key text, value bytea, ttl interval DEFAULT NULL,
                           flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_replace'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_append(key text, value text, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_append'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_append(key text, value bytea, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_append'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_prepend(key text, value text, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_prepend'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_prepend(key text, value bytea, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_prepend'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_cas(key text, value text, cas bigint, ttl interval DEFAULT NULL,
                       flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_cas'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_cas(key text, value bytea, cas bigint, ttl interval DEFAULT NULL,
                       flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_cas'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_delete(key text, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_delete'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_touch(key text, ttl interval, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_touch'
LANGUAGE C VOLATILE;

-- Counters ------------------------------------------------------------------

CREATE FUNCTION mc_incr(key text, delta bigint DEFAULT 1, initial bigint DEFAULT NULL,
                        ttl interval DEFAULT NULL, server name DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'mc_incr'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_decr(key text, delta bigint DEFAULT 1, initial bigint DEFAULT NULL,
                        ttl interval DEFAULT NULL, server name DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'mc_decr'
LANGUAGE C VOLATILE;

-- Whole cache ---------------------------------------------------------------

CREATE FUNCTION mc_flush_all(server name DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'mc_flush_all'
LANGUAGE C VOLATILE;

-- Multi-get -----------------------------------------------------------------

CREATE FUNCTION mc_get_multi(keys text[], server name DEFAULT NULL)
RETURNS TABLE (key text, value text, flags integer)
AS 'MODULE_PATHNAME', 'mc_get_multi'
LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION mc_get_multi_bytea(keys text[], server name DEFAULT NULL)
RETURNS TABLE (key text, value bytea, flags integer)
AS 'MODULE_PATHNAME', 'mc_get_multi_bytea'
LANGUAGE C VOLATILE ROWS 100;

-- Pool and ring state -------------------------------------------------------

CREATE FUNCTION mc_servers(
    OUT server name, OUT host text, OUT port integer, OUT weight integer,
    OUT distribution text, OUT points integer, OUT state text,
    OUT failures integer, OUT last_error text, OUT dead_until timestamptz,
    OUT connections bigint, OUT requests bigint, OUT instance integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_servers'
LANGUAGE C VOLATILE;

CREATE VIEW mc_servers AS SELECT * FROM mc_servers();
GRANT SELECT ON mc_servers TO PUBLIC;

-- Statistics (stats.c) --------------------------------------------------
-- Each function covers the named server, or with NULL every mcfdw server the
-- current user has USAGE on; the views are "SELECT * FROM fn()" and granted
-- to PUBLIC (pg_stat_statements style).  An instance that cannot be reached
-- contributes no rows, except its one row with "error" set in
-- mc_server_stats.

CREATE FUNCTION mc_stats(server name DEFAULT NULL, stats_group text DEFAULT NULL,
    OUT server name, OUT instance text, OUT name text, OUT value text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_stats'
LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION mc_server_stats(server name DEFAULT NULL,
    OUT server name, OUT instance text, OUT host text, OUT port integer,
    OUT uptime bigint, OUT version text, OUT pid integer,
    OUT pointer_size integer, OUT threads integer,
    OUT rusage_user double precision, OUT rusage_system double precision,
    OUT max_connections bigint, OUT curr_connections bigint,
    OUT total_connections bigint, OUT rejected_connections bigint,
    OUT curr_items bigint, OUT total_items bigint, OUT bytes bigint,
    OUT limit_maxbytes bigint,
    OUT cmd_get bigint, OUT cmd_set bigint, OUT cmd_flush bigint, OUT cmd_touch bigint,
    OUT get_hits bigint, OUT get_misses bigint, OUT get_expired bigint,
    OUT get_flushed bigint, OUT hit_ratio double precision,
    OUT delete_hits bigint, OUT delete_misses bigint,
    OUT incr_hits bigint, OUT incr_misses bigint,
    OUT decr_hits bigint, OUT decr_misses bigint,
    OUT cas_hits bigint, OUT cas_misses bigint, OUT cas_badval bigint,
    OUT touch_hits bigint, OUT touch_misses bigint,
    OUT bytes_read bigint, OUT bytes_written bigint,
    OUT evictions bigint, OUT evicted_active bigint, OUT evicted_unfetched bigint,
    OUT expired_unfetched bigint, OUT reclaimed bigint, OUT slabs_moved bigint,
    OUT error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_server_stats'
LANGUAGE C VOLATILE ROWS 4;

CREATE FUNCTION mc_slab_stats(server name DEFAULT NULL,
    OUT server name, OUT instance text, OUT class_id integer,
    OUT chunk_size bigint, OUT chunks_per_page bigint, OUT total_pages bigint,
    OUT total_chunks bigint, OUT used_chunks bigint, OUT free_chunks bigint,
    OUT free_chunks_end bigint, OUT items bigint, OUT mem_requested bigint,
    OUT used_bytes bigint, OUT waste_bytes bigint, OUT waste_pct double precision,
    OUT evicted bigint, OUT evicted_nonzero bigint, OUT evicted_time bigint,
    OUT evicted_unfetched bigint, OUT expired_unfetched bigint,
    OUT outofmemory bigint, OUT reclaimed bigint, OUT crawler_reclaimed bigint,
    OUT age bigint, OUT get_hits bigint, OUT cmd_set bigint,
    OUT delete_hits bigint, OUT incr_hits bigint, OUT decr_hits bigint,
    OUT cas_hits bigint, OUT touch_hits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_slab_stats'
LANGUAGE C VOLATILE ROWS 40;

CREATE FUNCTION mc_slab_summary(server name DEFAULT NULL,
    OUT server name, OUT instance text,
    OUT active_slabs bigint, OUT total_malloced bigint, OUT limit_maxbytes bigint,
    OUT total_pages bigint, OUT items bigint, OUT used_bytes bigint,
    OUT mem_requested bigint, OUT waste_bytes bigint, OUT waste_pct double precision,
    OUT growth_factor double precision, OUT ladder_size integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_slab_summary'
LANGUAGE C VOLATILE ROWS 4;

CREATE FUNCTION mc_slab_ladder(server name DEFAULT NULL,
    OUT server name, OUT instance text, OUT class_id integer,
    OUT chunk_size bigint, OUT chunks_per_page bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_slab_ladder'
LANGUAGE C VOLATILE ROWS 40;

CREATE VIEW mc_stats AS SELECT * FROM mc_stats();
CREATE VIEW mc_server_stats AS SELECT * FROM mc_server_stats();
CREATE VIEW mc_slab_stats AS SELECT * FROM mc_slab_stats();
CREATE VIEW mc_slab_summary AS SELECT * FROM mc_slab_summary();
CREATE VIEW mc_slab_ladder AS SELECT * FROM mc_slab_ladder();
GRANT SELECT ON mc_stats, mc_server_stats, mc_slab_stats, mc_slab_summary,
                mc_slab_ladder TO PUBLIC;

-- Writes at commit (xact.c, trigger.c) ------------------------------------
-- Queued in the transaction, sent once it commits: nothing is sent before
-- COMMIT, nothing after ROLLBACK, and ROLLBACK TO SAVEPOINT forgets what was
-- queued since the savepoint.  The last write of a key wins.  A failure
-- after commit is a WARNING, counted in mc_invalidation_stats and mc_counters.

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

-- Counters a dashboard alerts on (counters.c) ---------------------------------
-- Per server: on-commit writes queued, sent and lost after commit, and calls
-- answered as a miss (on_failure 'miss').  scope 'cluster' when mcfdw is in
-- shared_preload_libraries (every session's counts), 'session' otherwise
-- (this session's only).  Rows for the servers the current user may use.
CREATE FUNCTION mc_counters(
    OUT server name, OUT queued bigint, OUT sent bigint, OUT lost bigint,
    OUT degraded bigint, OUT stats_reset timestamptz, OUT scope text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_counters'
LANGUAGE C VOLATILE;

CREATE VIEW mc_counters AS SELECT * FROM mc_counters();
GRANT SELECT ON mc_counters TO PUBLIC;

-- zeroes every count (as pg_stat_statements_reset, for the roles granted it)
CREATE FUNCTION mc_counters_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'mc_counters_reset'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION mc_counters_reset() FROM PUBLIC;

-- Get-and-touch, absolute expiry (functions.c) -----------------------------
-- mc_gat reads a value and resets its expiry in one round trip (NULL on a
-- miss; a NULL ttl removes the expiry, as mc_touch's does).  The *_until
-- forms take an absolute expiry (timestamptz) where the others take a ttl
-- interval; a time in the past expires the item at once.  They have names
-- of their own because timestamptz overloads would make an untyped literal
-- such as mc_set('k', 'v', '1 hour') ambiguous.

CREATE FUNCTION mc_gat(key text, ttl interval, server name DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'mc_gat'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_gat_bytea(key text, ttl interval, server name DEFAULT NULL)
RETURNS bytea
AS 'MODULE_PATHNAME', 'mc_gat_bytea'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_gat_until(key text, expires timestamptz, server name DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'mc_gat_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_gat_bytea_until(key text, expires timestamptz, server name DEFAULT NULL)
RETURNS bytea
AS 'MODULE_PATHNAME', 'mc_gat_bytea_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_set_until(key text, value text, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_set_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_set_until(key text, value bytea, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_set_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_add_until(key text, value text, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_add_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_add_until(key text, value bytea, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_add_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_replace_until(key text, value text, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_replace_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_replace_until(key text, value bytea, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_replace_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_cas_until(key text, value text, cas bigint, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_cas_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_cas_until(key text, value bytea, cas bigint, expires timestamptz,
    flags integer DEFAULT 0, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_cas_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_touch_until(key text, expires timestamptz, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_touch_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_incr_until(key text, delta bigint, initial bigint, expires timestamptz,
    server name DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'mc_incr_until'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_decr_until(key text, delta bigint, initial bigint, expires timestamptz,
    server name DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'mc_decr_until'
LANGUAGE C VOLATILE;

-- on_failure 'miss' (pool.c): mc_servers gains "degraded", the calls
-- answered with a miss because the instance could not be reached.
DROP VIEW mc_servers;
DROP FUNCTION mc_servers();
CREATE FUNCTION mc_servers(
    OUT server name, OUT host text, OUT port integer, OUT weight integer,
    OUT distribution text, OUT points integer, OUT state text,
    OUT failures integer, OUT last_error text, OUT dead_until timestamptz,
    OUT connections bigint, OUT requests bigint, OUT instance integer,
    OUT degraded bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_servers'
LANGUAGE C VOLATILE;

CREATE VIEW mc_servers AS SELECT * FROM mc_servers();
GRANT SELECT ON mc_servers TO PUBLIC;

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

-- Values written by applications, leases, item metadata (reads.c) ----------
-- With the server options compression, compressed_flag and serialized_flag
-- the reads inflate what the application's client compressed and refuse a
-- serialized object as text; mc_get_raw returns the stored bytes untouched.
-- mc_get_lease hands out at most one right to recompute a missing (or,
-- with recache_below, expiring) value; mc_mark_stale keeps an item as a
-- stale value until someone refreshes it.  mc_meta reads an item's
-- metadata without its value and without bumping it in the LRU.

CREATE FUNCTION mc_get_raw(key text, server name DEFAULT NULL,
                           OUT value bytea, OUT flags integer)
RETURNS record
AS 'MODULE_PATHNAME', 'mc_get_raw'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_get_lease(key text, lease_ttl interval,
                             recache_below interval DEFAULT NULL,
                             server name DEFAULT NULL,
                             OUT value text, OUT flags integer, OUT cas bigint,
                             OUT won boolean, OUT stale boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'mc_get_lease'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_get_lease_bytea(key text, lease_ttl interval,
                                   recache_below interval DEFAULT NULL,
                                   server name DEFAULT NULL,
                                   OUT value bytea, OUT flags integer, OUT cas bigint,
                                   OUT won boolean, OUT stale boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'mc_get_lease_bytea'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_mark_stale(key text, ttl interval DEFAULT NULL,
                              server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_mark_stale'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_meta(key text, server name DEFAULT NULL,
                        OUT size integer, OUT ttl_remaining integer,
                        OUT last_access integer, OUT hit_before boolean,
                        OUT cas bigint, OUT flags integer, OUT stale boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'mc_meta'
LANGUAGE C VOLATILE;

-- mc_invalidate cannot serve TRUNCATE (no rows to build keys from): such a
-- trigger is refused when it is created, by this event trigger, which runs
-- for every CREATE TRIGGER of the database (mc_invalidate itself, which
-- PostgreSQL does not load at CREATE TRIGGER, refuses it again at its first
-- firing, for one created while event triggers were off).
CREATE FUNCTION mc_check_trigger()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'mc_check_trigger'
LANGUAGE C;

CREATE EVENT TRIGGER mcfdw_check_trigger ON ddl_command_end
  WHEN TAG IN ('CREATE TRIGGER')
  EXECUTE FUNCTION mc_check_trigger();
