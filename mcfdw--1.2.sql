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

-- No foreign server: servers are the user's (CREATE SERVER memcached ...),
-- so pg_dump dumps them with their options, user mappings and grants.

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

-- Connections (connections_sql.c) ---------------------------------------------
-- This session's open sockets, listed and closed as postgres_fdw's
-- postgres_fdw_get_connections and postgres_fdw_disconnect[_all] do.  A role
-- sees and closes those of the servers it has USAGE on, made under the user
-- mapping it logs in with itself (after SET ROLE, none of another role's); a
-- superuser every one.  A connection a running request is using stays open.

CREATE FUNCTION mc_connections(
    OUT server name, OUT instance text, OUT user_name name, OUT tls boolean,
    OUT valid boolean, OUT in_use boolean, OUT requests bigint,
    OUT last_used timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_connections'
LANGUAGE C VOLATILE;

CREATE VIEW mc_connections AS SELECT * FROM mc_connections();
GRANT SELECT ON mc_connections TO PUBLIC;

CREATE FUNCTION mc_disconnect(server name)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_disconnect'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION mc_disconnect_all()
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_disconnect_all'
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

-- Where keys go (route_sql.c) -------------------------------------------------
-- Routing only, nothing is sent: each key's instance on the ring (1-based, as
-- mc_servers.instance), its wire form, and where a read would go now given
-- the instances' health (NULL when it would reach none).  A NULL element
-- gives a row of NULLs; a bad key is refused as mc_get refuses it.

CREATE FUNCTION mc_route(keys text[], server name DEFAULT NULL,
    OUT key text, OUT instance integer, OUT host text, OUT port integer,
    OUT wire_key text, OUT base64 boolean, OUT dead boolean,
    OUT failover_instance integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_route'
LANGUAGE C VOLATILE;

-- Comments ---------------------------------------------------------------------
-- What \dx+, \df+ and \dv+ say about each object: one line each, from the
-- README's reference, grouped as above.  Every member of the extension has
-- one (the comments regress test lists any that has none).

COMMENT ON FOREIGN DATA WRAPPER mcfdw IS
  'memcached as foreign servers: mc_* functions, foreign tables, rings shared with Dalli and libmemcached';
COMMENT ON FUNCTION mcfdw_validator(text[], oid) IS
  'checks the options of mcfdw foreign servers, user mappings, foreign tables and their columns';
COMMENT ON FUNCTION mcfdw_handler() IS
  'foreign-data wrapper handler of mcfdw: foreign tables whose rows are memcached items';

-- Reads
COMMENT ON FUNCTION mc_get(text, name) IS
  'value of a key as text; NULL on a miss';
COMMENT ON FUNCTION mc_get_bytea(text, name) IS
  'value of a key as bytea; NULL on a miss';
COMMENT ON FUNCTION mc_gets(text, name) IS
  'value (text), flags and cas token of a key, for mc_cas; NULL on a miss';
COMMENT ON FUNCTION mc_gets_bytea(text, name) IS
  'value (bytea), flags and cas token of a key, for mc_cas; NULL on a miss';

-- Writes
COMMENT ON FUNCTION mc_set(text, text, interval, integer, name) IS
  'stores a text value under a key (NULL ttl: no expiry); true when stored';
COMMENT ON FUNCTION mc_set(text, bytea, interval, integer, name) IS
  'stores a bytea value under a key (NULL ttl: no expiry); true when stored';
COMMENT ON FUNCTION mc_add(text, text, interval, integer, name) IS
  'stores a text value only if the key is missing; false if it exists';
COMMENT ON FUNCTION mc_add(text, bytea, interval, integer, name) IS
  'stores a bytea value only if the key is missing; false if it exists';
COMMENT ON FUNCTION mc_replace(text, text, interval, integer, name) IS
  'stores a text value only if the key exists; false if it is missing';
COMMENT ON FUNCTION mc_replace(text, bytea, interval, integer, name) IS
  'stores a bytea value only if the key exists; false if it is missing';
COMMENT ON FUNCTION mc_append(text, text, name) IS
  'appends text to the value of a key; false if the key is missing';
COMMENT ON FUNCTION mc_append(text, bytea, name) IS
  'appends bytes to the value of a key; false if the key is missing';
COMMENT ON FUNCTION mc_prepend(text, text, name) IS
  'prepends text to the value of a key; false if the key is missing';
COMMENT ON FUNCTION mc_prepend(text, bytea, name) IS
  'prepends bytes to the value of a key; false if the key is missing';
COMMENT ON FUNCTION mc_cas(text, text, bigint, interval, integer, name) IS
  'stores a text value if the item is unchanged since mc_gets gave cas; false if it changed or is gone';
COMMENT ON FUNCTION mc_cas(text, bytea, bigint, interval, integer, name) IS
  'stores a bytea value if the item is unchanged since mc_gets gave cas; false if it changed or is gone';
COMMENT ON FUNCTION mc_delete(text, name) IS
  'deletes a key now (not undone by ROLLBACK); true if it existed';
COMMENT ON FUNCTION mc_touch(text, interval, name) IS
  'gives a key a new ttl (NULL removes the expiry); true if it existed';

-- Counters
COMMENT ON FUNCTION mc_incr(text, bigint, bigint, interval, name) IS
  'adds delta to a counter and returns the new value; NULL if the key is missing and no initial is given';
COMMENT ON FUNCTION mc_decr(text, bigint, bigint, interval, name) IS
  'subtracts delta from a counter, stopping at 0, and returns the new value; NULL if the key is missing and no initial is given';

-- Whole cache
COMMENT ON FUNCTION mc_flush_all(name) IS
  'invalidates every item on every instance of the server, whatever its key_prefix; returns the instances flushed (not granted to PUBLIC)';

-- Multi-get
COMMENT ON FUNCTION mc_get_multi(text[], name) IS
  'one row (key, value text, flags) per key found, one pipelined round trip per instance; a miss gives no row';
COMMENT ON FUNCTION mc_get_multi_bytea(text[], name) IS
  'one row (key, value bytea, flags) per key found, one pipelined round trip per instance; a miss gives no row';

-- Pool and ring state
COMMENT ON FUNCTION mc_servers() IS
  'this session''s view of every server the current user may use, one row per instance: ring place, state, health, connections';
COMMENT ON VIEW mc_servers IS
  'this session''s view of every server the current user may use, one row per instance: ring place, state, health, connections';

-- Statistics
COMMENT ON FUNCTION mc_stats(name, text) IS
  'memcached''s stats lines (name, value) per instance of the server, or with NULL of every usable server; stats_group: slabs, items, settings, sizes or conns';
COMMENT ON FUNCTION mc_server_stats(name) IS
  'the stats of each instance as typed columns (hit_ratio, evictions, ...); an instance that cannot be reached gives one row with error set';
COMMENT ON FUNCTION mc_slab_stats(name) IS
  'one row per instance and slab class: stats slabs merged with stats items, with used and wasted bytes';
COMMENT ON FUNCTION mc_slab_summary(name) IS
  'one row per instance: slab totals, growth_factor and the size of the slab class ladder';
COMMENT ON FUNCTION mc_slab_ladder(name) IS
  'one row per instance and slab class its settings create (chunk size, chunks per page), with or without pages';
COMMENT ON VIEW mc_stats IS
  'memcached''s stats lines (name, value) per instance of every server the current user has USAGE on';
COMMENT ON VIEW mc_server_stats IS
  'the stats of each instance of every usable server as typed columns; an instance that cannot be reached has error set';
COMMENT ON VIEW mc_slab_stats IS
  'one row per instance of every usable server and slab class: stats slabs merged with stats items';
COMMENT ON VIEW mc_slab_summary IS
  'one row per instance of every usable server: slab totals, growth_factor, ladder size';
COMMENT ON VIEW mc_slab_ladder IS
  'one row per instance of every usable server and slab class its settings create';

-- Writes at commit
COMMENT ON FUNCTION mc_delete_on_commit(text, name) IS
  'queues a delete of the key, sent after COMMIT (nothing on ROLLBACK); the last write of a key wins';
COMMENT ON FUNCTION mc_set_on_commit(text, text, interval, integer, name) IS
  'queues a set of the key to a text value, sent after COMMIT (nothing on ROLLBACK); the last write of a key wins';
COMMENT ON FUNCTION mc_set_on_commit(text, bytea, interval, integer, name) IS
  'queues a set of the key to a bytea value, sent after COMMIT (nothing on ROLLBACK); the last write of a key wins';
COMMENT ON FUNCTION mc_invalidate() IS
  'trigger: queues on-commit deletes of the keys its templates (''user:{id}'') build from the changed rows';
COMMENT ON FUNCTION mc_invalidation_stats() IS
  'this session''s on-commit writes per server: queued, sent, lost after commit, last error';
COMMENT ON VIEW mc_invalidation_stats IS
  'this session''s on-commit writes per server: queued, sent, lost after commit, last error';

-- Counters a dashboard alerts on
COMMENT ON FUNCTION mc_counters() IS
  'per server: on-commit writes queued, sent and lost, and calls answered as a miss (degraded); every session''s when mcfdw is preloaded';
COMMENT ON VIEW mc_counters IS
  'per server: on-commit writes queued, sent and lost, and calls answered as a miss (degraded); every session''s when mcfdw is preloaded';
COMMENT ON FUNCTION mc_counters_reset() IS
  'zeroes the counts of mc_counters and mc_client_stats (not granted to PUBLIC)';

-- Get-and-touch, absolute expiry
COMMENT ON FUNCTION mc_gat(text, interval, name) IS
  'value of a key as text, its ttl reset in the same round trip (NULL removes the expiry); NULL on a miss';
COMMENT ON FUNCTION mc_gat_bytea(text, interval, name) IS
  'value of a key as bytea, its ttl reset in the same round trip (NULL removes the expiry); NULL on a miss';
COMMENT ON FUNCTION mc_gat_until(text, timestamptz, name) IS
  'mc_gat with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_gat_bytea_until(text, timestamptz, name) IS
  'mc_gat_bytea with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_set_until(text, text, timestamptz, integer, name) IS
  'mc_set with an absolute expiry (NULL: none; a past time expires the item at once) in place of a ttl';
COMMENT ON FUNCTION mc_set_until(text, bytea, timestamptz, integer, name) IS
  'mc_set with an absolute expiry (NULL: none; a past time expires the item at once) in place of a ttl';
COMMENT ON FUNCTION mc_add_until(text, text, timestamptz, integer, name) IS
  'mc_add with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_add_until(text, bytea, timestamptz, integer, name) IS
  'mc_add with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_replace_until(text, text, timestamptz, integer, name) IS
  'mc_replace with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_replace_until(text, bytea, timestamptz, integer, name) IS
  'mc_replace with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_cas_until(text, text, bigint, timestamptz, integer, name) IS
  'mc_cas with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_cas_until(text, bytea, bigint, timestamptz, integer, name) IS
  'mc_cas with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_touch_until(text, timestamptz, name) IS
  'mc_touch with an absolute expiry (NULL: none) in place of a ttl';
COMMENT ON FUNCTION mc_incr_until(text, bigint, bigint, timestamptz, name) IS
  'mc_incr with an absolute expiry (NULL: none) for a key it creates, in place of a ttl';
COMMENT ON FUNCTION mc_decr_until(text, bigint, bigint, timestamptz, name) IS
  'mc_decr with an absolute expiry (NULL: none) for a key it creates, in place of a ttl';

-- Batch writes
COMMENT ON FUNCTION mc_set_multi(text[], text[], interval, integer, name) IS
  'stores many text values, one pipeline per instance; returns how many distinct keys were stored';
COMMENT ON FUNCTION mc_set_multi(text[], bytea[], interval, integer, name) IS
  'stores many bytea values, one pipeline per instance; returns how many distinct keys were stored';
COMMENT ON FUNCTION mc_delete_multi(text[], name) IS
  'deletes many keys, one pipeline per instance (NULL keys skipped); returns how many distinct keys existed';
COMMENT ON FUNCTION mc_touch_multi(text[], interval, name) IS
  'gives many keys a new ttl, one pipeline per instance (NULL keys skipped); returns how many distinct keys existed';

-- Values written by applications, leases, item metadata
COMMENT ON FUNCTION mc_get_raw(text, name) IS
  'the bytes and flags of a key as stored, never inflated; NULL on a miss';
COMMENT ON FUNCTION mc_get_lease(text, interval, interval, name) IS
  'value (text) of a key, and won: whether this caller got the one right to recompute a missing or expiring value';
COMMENT ON FUNCTION mc_get_lease_bytea(text, interval, interval, name) IS
  'value (bytea) of a key, and won: whether this caller got the one right to recompute a missing or expiring value';
COMMENT ON FUNCTION mc_mark_stale(text, interval, name) IS
  'marks an item stale instead of deleting it (reads still get it, the first mc_get_lease wins its refresh); true if the key existed';
COMMENT ON FUNCTION mc_meta(text, name) IS
  'an item''s size, ttl left, last access, cas, flags and staleness, without its value and without bumping it; NULL on a miss';

-- Connections
COMMENT ON FUNCTION mc_connections() IS
  'this session''s open memcached connections the current user may see: server, instance, user mapping, TLS, in use, requests';
COMMENT ON VIEW mc_connections IS
  'this session''s open memcached connections the current user may see: server, instance, user mapping, TLS, in use, requests';
COMMENT ON FUNCTION mc_disconnect(name) IS
  'closes this session''s connections to the server (not one a running request uses); true if any was closed';
COMMENT ON FUNCTION mc_disconnect_all() IS
  'closes this session''s connections to every server (not one a running request uses); true if any was closed';

-- The TRUNCATE check of mc_invalidate triggers
COMMENT ON FUNCTION mc_check_trigger() IS
  'event trigger function: refuses an mc_invalidate trigger on TRUNCATE at CREATE TRIGGER';
COMMENT ON EVENT TRIGGER mcfdw_check_trigger IS
  'refuses CREATE TRIGGER ... TRUNCATE ... mc_invalidate: a TRUNCATE has no rows to build keys from';

-- Where keys go
COMMENT ON FUNCTION mc_route(text[], name) IS
  'where each key goes, without contacting memcached: its instance on the ring, host, port, the key as sent (prefix, digest, base64), whether that instance is marked dead, and the instance a read would go to now';

-- Slab calcification (slabs.c) ----------------------------------------------
-- One row per instance from one snapshot of its stats: calcified when a slab
-- class evicts at least 10 times the chunks it owns (starved) while another
-- class holds items at least twice as old (and a second older) as those the
-- starved class evicts, or the global page pool has free pages.  The
-- automover's setting and counters keep memcached's names.

CREATE FUNCTION mc_slab_calcification(server name DEFAULT NULL,
    OUT server name, OUT instance text, OUT calcified boolean, OUT reason text,
    OUT starved_class integer, OUT starved_pages bigint, OUT starved_evicted bigint,
    OUT starved_turnover double precision, OUT starved_evicted_time bigint,
    OUT oldest_class integer, OUT oldest_pages bigint, OUT oldest_age bigint,
    OUT slab_global_page_pool bigint, OUT slab_automove integer,
    OUT evictions bigint, OUT slabs_moved bigint,
    OUT slab_reassign_rescues bigint, OUT slab_reassign_chunk_rescues bigint,
    OUT slab_reassign_evictions_nomem bigint, OUT slab_reassign_inline_reclaim bigint,
    OUT slab_reassign_busy_items bigint, OUT slab_reassign_busy_deletes bigint,
    OUT slab_reassign_running boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_slab_calcification'
LANGUAGE C VOLATILE ROWS 4;

CREATE VIEW mc_slab_calcification AS SELECT * FROM mc_slab_calcification();
GRANT SELECT ON mc_slab_calcification TO PUBLIC;

COMMENT ON FUNCTION mc_slab_calcification(name) IS
  'one row per instance: calcified when a slab class evicts 10 times its chunks while another class holds items twice as old or free pages wait in the global pool; the automover''s setting and counters';
COMMENT ON VIEW mc_slab_calcification IS
  'one row per instance of every usable server: the slab calcification signal, the starved and the oldest class, the automover''s setting and counters';

-- Invalidation from the write-ahead log (wal_sql.c, wal_decode.c, wal_worker.c)
-- A watch: a table whose committed changes invalidate keys built from key
-- templates, on one server.  The output plugin "mcfdw" reads this table as
-- of each decoded transaction (user_catalog_table), the worker delivers.
-- pg_dump dumps its rows (an extension configuration table).

CREATE TABLE mc_watches (
    relid regclass NOT NULL,
    server name NOT NULL,
    templates text[] NOT NULL,
    action text NOT NULL DEFAULT 'delete' CHECK (action IN ('delete', 'mark_stale')),
    on_truncate text NOT NULL DEFAULT 'flush' CHECK (on_truncate IN ('flush', 'ignore')),
    PRIMARY KEY (relid, server)
) WITH (user_catalog_table = true);
SELECT pg_catalog.pg_extension_config_dump('mc_watches', '');
REVOKE ALL ON mc_watches FROM PUBLIC;
GRANT SELECT ON mc_watches TO PUBLIC;
-- tells the worker, at commit, that the watches changed (it reads them
-- again only then)
CREATE FUNCTION mc_watches_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'mc_watches_changed'
LANGUAGE C;
CREATE TRIGGER mc_watches_changed
  AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON mc_watches
  FOR EACH STATEMENT EXECUTE FUNCTION mc_watches_changed();

CREATE FUNCTION mc_watch(tbl regclass, templates text[], server name DEFAULT NULL,
                         action text DEFAULT 'delete', on_truncate text DEFAULT 'flush')
RETURNS void
AS 'MODULE_PATHNAME', 'mc_watch'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION mc_watch(regclass, text[], name, text, text) FROM PUBLIC;

CREATE FUNCTION mc_unwatch(tbl regclass, server name DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'mc_unwatch'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION mc_unwatch(regclass, name) FROM PUBLIC;

CREATE FUNCTION mc_wal_status(
    OUT relid oid, OUT server name, OUT pending bigint, OUT sent bigint,
    OUT retried bigint, OUT last_error text, OUT last_error_time timestamptz,
    OUT lag_seconds double precision, OUT paused boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_wal_status'
LANGUAGE C VOLATILE;

CREATE FUNCTION mc_wal_pause() RETURNS void
AS 'MODULE_PATHNAME', 'mc_wal_pause' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION mc_wal_pause() FROM PUBLIC;
CREATE FUNCTION mc_wal_resume() RETURNS void
AS 'MODULE_PATHNAME', 'mc_wal_resume' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION mc_wal_resume() FROM PUBLIC;

CREATE VIEW mc_wal_watches AS
SELECT w.relid AS "table", w.server, w.templates, w.action, w.on_truncate,
       r.slot_name, r.confirmed_flush_lsn AS confirmed_lsn,
       CASE WHEN r.confirmed_flush_lsn IS NOT NULL AND NOT pg_is_in_recovery()
            THEN pg_wal_lsn_diff(pg_current_wal_lsn(), r.confirmed_flush_lsn)::bigint END AS lag_bytes,
       s.lag_seconds, coalesce(s.pending, 0) AS pending, coalesce(s.sent, 0) AS sent,
       coalesce(s.retried, 0) AS retried, s.last_error, s.last_error_time,
       coalesce(s.paused, false) AS paused, r.wal_status
  FROM mc_watches w
  LEFT JOIN pg_replication_slots r
         ON r.slot_name = 'mcfdw_' || (SELECT oid FROM pg_database WHERE datname = current_database())
  LEFT JOIN mc_wal_status() s ON s.relid = w.relid AND s.server = w.server
 -- as mc_servers: a role sees the watches of the servers it may use (and
 -- those whose server is gone)
 WHERE NOT EXISTS (SELECT FROM pg_foreign_server fs WHERE fs.srvname = w.server)
    OR EXISTS (SELECT FROM pg_foreign_server fs
                WHERE fs.srvname = w.server AND has_server_privilege(fs.oid, 'USAGE'));

COMMENT ON TABLE mc_watches IS
  'watched tables: each committed change invalidates the keys its templates build, through the write-ahead log (dumped by pg_dump)';
COMMENT ON FUNCTION mc_watch(regclass, text[], name, text, text) IS
  'watches a table: each committed INSERT, UPDATE, DELETE invalidates its keys (old and new) from the write-ahead log; TRUNCATE flushes or is ignored';
COMMENT ON FUNCTION mc_unwatch(regclass, name) IS
  'stops watching a table (for one server, or all when NULL); changes committed before are still delivered; true if a watch was removed';
COMMENT ON FUNCTION mc_watches_changed() IS
  'trigger function: tells the write-ahead log worker at commit that mc_watches changed';
COMMENT ON FUNCTION mc_wal_status() IS
  'the write-ahead log worker''s counts per watch: keys pending, sent, retried, the last error, the lag in seconds, paused';
COMMENT ON FUNCTION mc_wal_pause() IS
  'holds the delivery of invalidations from the write-ahead log (the slot retains the changes) until mc_wal_resume or a restart';
COMMENT ON FUNCTION mc_wal_resume() IS
  'resumes the delivery of invalidations from the write-ahead log';
COMMENT ON VIEW mc_wal_watches IS
  'each watch with its delivery: confirmed position, lag in bytes and seconds, keys pending, sent, retried, the last error';

-- A dropped table's watches go with it (wal_sql.c)
CREATE FUNCTION mc_watches_drop() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'mc_watches_drop'
LANGUAGE C SECURITY DEFINER;
REVOKE ALL ON FUNCTION mc_watches_drop() FROM PUBLIC;
CREATE EVENT TRIGGER mcfdw_drop_watches ON sql_drop
  EXECUTE FUNCTION mc_watches_drop();
COMMENT ON FUNCTION mc_watches_drop() IS
  'event trigger function: removes the watches of dropped tables from mc_watches';
COMMENT ON EVENT TRIGGER mcfdw_drop_watches IS
  'removes a dropped table''s watches, so no orphan keeps the write-ahead log slot';

-- Client statistics (client_stats.c) ----------------------------------------
-- What mcfdw did, one row per database, server, instance and kind of
-- operation, in the manner of pg_stat_statements: scope 'cluster' when mcfdw
-- is in shared_preload_libraries (every backend's calls, flushed at the end
-- of each transaction), 'session' otherwise.  latency_hist[b] counts the
-- requests of [2^(b-2), 2^(b-1)) microseconds (latency_hist[2]: under 2 us;
-- latency_hist[1]: calls refused without a request, the instance dead).
CREATE FUNCTION mc_client_stats(
    OUT dbid oid, OUT server name, OUT instance text, OUT op text,
    OUT calls bigint, OUT keys bigint, OUT hits bigint, OUT misses bigint,
    OUT bytes_sent bigint, OUT bytes_received bigint,
    OUT errors_connect bigint, OUT errors_timeout bigint,
    OUT errors_protocol bigint, OUT errors_server bigint, OUT errors_auth bigint,
    OUT degraded bigint, OUT total_time double precision,
    OUT max_time double precision, OUT latency_hist bigint[],
    OUT stats_reset timestamptz, OUT scope text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_client_stats'
LANGUAGE C VOLATILE;

CREATE VIEW mc_client_stats AS SELECT * FROM mc_client_stats();
GRANT SELECT ON mc_client_stats TO PUBLIC;

-- zeroes mc_client_stats, forgets mc_cluster_health's marks, and zeroes
-- mc_counters with them (mc_counters_reset does the same): one reset
CREATE FUNCTION mc_client_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'mc_client_stats_reset'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION mc_client_stats_reset() FROM PUBLIC;

-- the instances any backend marked dead (failure_limit failures in a row),
-- when, and until when
CREATE FUNCTION mc_cluster_health(
    OUT dbid oid, OUT server name, OUT instance text, OUT dead boolean,
    OUT marked_dead_at timestamptz, OUT dead_until timestamptz,
    OUT failures integer, OUT last_error text, OUT scope text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mc_cluster_health'
LANGUAGE C VOLATILE;

CREATE VIEW mc_cluster_health AS SELECT * FROM mc_cluster_health();
GRANT SELECT ON mc_cluster_health TO PUBLIC;

COMMENT ON FUNCTION mc_client_stats() IS
  'what mcfdw did per database, server, instance and operation: calls, keys, hits, misses, bytes, errors by class, degraded calls, latency (total, max, histogram); the cluster''s when preloaded';
COMMENT ON VIEW mc_client_stats IS
  'what mcfdw did per database, server, instance and operation: calls, keys, hits, misses, bytes, errors by class, degraded calls, latency (total, max, histogram); the cluster''s when preloaded';
COMMENT ON FUNCTION mc_client_stats_reset() IS
  'zeroes mc_client_stats and mc_counters and forgets mc_cluster_health''s marks (not granted to PUBLIC)';
COMMENT ON FUNCTION mc_cluster_health() IS
  'the instances any backend marked dead, when, until when, and why; the cluster''s when preloaded';
COMMENT ON VIEW mc_cluster_health IS
  'the instances any backend marked dead, when, until when, and why; the cluster''s when preloaded';
