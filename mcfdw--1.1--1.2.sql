/* mcfdw--1.1--1.2.sql — from 1.1 to 1.2. */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION mcfdw UPDATE TO '1.2'" to load this file. \quit

-- The server 1.0 created, "memcached", becomes the user's: an extension's
-- member is not dumped by pg_dump (nor its options, user mappings, grants),
-- so a restore lost it.  Detached by whatever name it has now; none if the
-- user detached it already.
DO $$
DECLARE
	srv name;
BEGIN
	FOR srv IN
		SELECT s.srvname
		  FROM pg_depend d JOIN pg_foreign_server s ON s.oid = d.objid
		 WHERE d.classid = 'pg_foreign_server'::regclass
		   AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw')
	LOOP
		EXECUTE format('ALTER EXTENSION mcfdw DROP SERVER %I', srv);
	END LOOP;
END
$$;
