/* mcfdw--1.1--1.2.sql — from 1.1 to 1.2. */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION mcfdw UPDATE TO '1.2'" to load this file. \quit

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
