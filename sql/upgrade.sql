--
-- upgrade: a 1.0 installation updated to the current version is a fresh
-- installation of it
--
\set orig_db :DBNAME
CREATE DATABASE mcfdw_upgrade;
\c mcfdw_upgrade
CREATE EXTENSION mcfdw VERSION '1.0';
-- 1.0 created the server "memcached"; configured as its README said
DO $$ BEGIN
  EXECUTE format('ALTER SERVER memcached OPTIONS (SET servers %L, ADD io_timeout %L)',
                 '127.0.0.1:' || split_part(current_setting('mcfdw_test.mc_ports'), ',', 1), '5s');
END $$;
CREATE USER MAPPING FOR PUBLIC SERVER memcached;
-- in 1.0 anyone may flush
CREATE VIEW flush_acl AS
  SELECT a.grantee = 0 AS public, a.privilege_type
    FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
   WHERE p.oid = 'mc_flush_all(name)'::regprocedure;
SELECT * FROM flush_acl WHERE public;
ALTER EXTENSION mcfdw UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'mcfdw';
SELECT * FROM flush_acl WHERE public;
-- the server is the user's now (pg_dump dumps it), configured as it was
SELECT srvname, regexp_replace(array_to_string(srvoptions, ' '), ':[0-9]+', ':PORT') AS options,
       EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_foreign_server'::regclass
                  AND d.objid = s.oid AND d.deptype = 'e') AS member,
       (SELECT count(*) FROM pg_user_mappings m WHERE m.srvid = s.oid) AS mappings
  FROM pg_foreign_server s;
SELECT mc_set('up:k', 'updated'), mc_get('up:k');
-- and mc_counters_reset is not for PUBLIC either
SELECT count(*) AS public_counters_reset FROM pg_proc p,
       aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.oid = 'mc_counters_reset()'::regprocedure AND a.grantee = 0;
-- the same objects as CREATE EXTENSION makes
CREATE TABLE upgraded AS
  SELECT pg_describe_object(classid, objid, 0) AS obj FROM pg_depend
   WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw') AND deptype = 'e';
-- (a view's row type is listed as a member from PostgreSQL 17 on: not shown)
SELECT obj FROM upgraded WHERE obj ~ 'commit|invalidat' AND obj !~ '^type ' ORDER BY obj;
-- and the same comments (obj_description per member)
CREATE TABLE upgraded_comments AS
  SELECT pg_describe_object(classid, objid, 0) AS obj,
         obj_description(objid, classid::regclass::name) AS description
    FROM pg_depend
   WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw') AND deptype = 'e';
SELECT count(*) FILTER (WHERE description IS NOT NULL) > 70 AS commented,
       count(*) FILTER (WHERE description IS NULL AND obj !~ '^(server|type) ') AS uncommented
  FROM upgraded_comments;
DROP VIEW flush_acl;
DROP SERVER memcached CASCADE;
DROP EXTENSION mcfdw;
CREATE EXTENSION mcfdw;
-- a fresh installation creates no server
SELECT count(*) AS servers FROM pg_foreign_server;
SELECT extversion FROM pg_extension WHERE extname = 'mcfdw';
SELECT count(*) AS public_flush FROM pg_proc p,
       aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.proname = 'mc_flush_all' AND a.grantee = 0;
CREATE TABLE fresh AS
  SELECT pg_describe_object(classid, objid, 0) AS obj FROM pg_depend
   WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw') AND deptype = 'e';
(SELECT 'only upgraded' AS "where", obj FROM upgraded EXCEPT SELECT 'only upgraded', obj FROM fresh)
UNION ALL
(SELECT 'only fresh', obj FROM fresh EXCEPT SELECT 'only fresh', obj FROM upgraded);
-- and no server is a member of either
SELECT obj FROM upgraded WHERE obj LIKE 'server %' UNION ALL SELECT obj FROM fresh WHERE obj LIKE 'server %';
CREATE TABLE fresh_comments AS
  SELECT pg_describe_object(classid, objid, 0) AS obj,
         obj_description(objid, classid::regclass::name) AS description
    FROM pg_depend
   WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw') AND deptype = 'e';
(SELECT 'only upgraded' AS "where", * FROM upgraded_comments EXCEPT SELECT 'only upgraded', * FROM fresh_comments)
UNION ALL
(SELECT 'only fresh', * FROM fresh_comments EXCEPT SELECT 'only fresh', * FROM upgraded_comments)
ORDER BY 2, 1;
-- and it works
DO $$ BEGIN
  EXECUTE format('CREATE SERVER memcached FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
                 '127.0.0.1:' || split_part(current_setting('mcfdw_test.mc_ports'), ',', 1));
END $$;
SELECT mc_set('up:k', 'v');
BEGIN;
SELECT mc_delete_on_commit('up:k');
SELECT mc_get('up:k');
COMMIT;
SELECT mc_get('up:k');
-- 1.1's server is detached by the name it has now, and an update finds
-- nothing to detach when the user detached it already
DROP SERVER memcached;
DROP EXTENSION mcfdw;
CREATE VIEW servers AS
  SELECT srvname, EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_foreign_server'::regclass
                             AND d.objid = s.oid AND d.deptype = 'e') AS member
    FROM pg_foreign_server s;
CREATE EXTENSION mcfdw VERSION '1.1';
ALTER SERVER memcached RENAME TO cache;
ALTER EXTENSION mcfdw UPDATE;
SELECT * FROM servers;
DROP SERVER cache;
DROP EXTENSION mcfdw;
CREATE EXTENSION mcfdw VERSION '1.1';
ALTER EXTENSION mcfdw DROP SERVER memcached;
ALTER EXTENSION mcfdw UPDATE;
SELECT * FROM servers;
\c :orig_db
DROP DATABASE mcfdw_upgrade WITH (FORCE);
