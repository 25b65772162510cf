/* mcfdw--1.0.sql — the SQL surface of mcfdw 1.0. */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION mcfdw" to load this file. \quit

-- Servers are foreign servers of this wrapper; the validator checks their options.
CREATE FUNCTION mcfdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER mcfdw
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
