/* mcfdw--1.1--1.2.sql — from 1.1 to 1.2. */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION mcfdw UPDATE TO '1.2'" to load this file. \quit

-- mc_invalidate triggers on TRUNCATE refused at CREATE TRIGGER
CREATE FUNCTION mc_check_trigger()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'mc_check_trigger'
LANGUAGE C;

CREATE EVENT TRIGGER mcfdw_check_trigger ON ddl_command_end
  WHEN TAG IN ('CREATE TRIGGER')
  EXECUTE FUNCTION mc_check_trigger();
