--
-- upgrade: a 1.0 installation updated to 1.1 is a fresh 1.1 installation
--
\set orig_db :DBNAME
CREATE DATABASE mcfdw_upgrade;
\c mcfdw_upgrade
CREATE EXTENSION mcfdw VERSION '1.0';
-- in 1.0 anyone may flush
CREATE VIEW flush_acl AS
  SELECT a.grantee = 0 AS public, a.privilege_type
    FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
   WHERE p.oid = 'mc_flush_all(name)'::regprocedure;
SELECT * FROM flush_acl WHERE public;
ALTER EXTENSION mcfdw UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'mcfdw';
SELECT * FROM flush_acl WHERE public;
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
DROP VIEW flush_acl;
DROP EXTENSION mcfdw;
CREATE EXTENSION mcfdw;
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
-- and it works
DO $$ BEGIN
  EXECUTE format('ALTER SERVER memcached OPTIONS (SET servers %L)',
                 '127.0.0.1:' || split_part(current_setting('mcfdw_test.mc_ports'), ',', 1));
END $$;
SELECT mc_set('up:k', 'v');
BEGIN;
SELECT mc_delete_on_commit('up:k');
SELECT mc_get('up:k');
COMMIT;
SELECT mc_get('up:k');
\c :orig_db
DROP DATABASE mcfdw_upgrade WITH (FORCE);
