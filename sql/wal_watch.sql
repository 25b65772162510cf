--
-- wal_watch: mc_watch's checks, before anything is stored (the rig's
-- cluster does not preload mcfdw; test/integration/wal_invalidate.py runs
-- the worker in a cluster of its own)
--
CREATE TABLE ww_users (id int PRIMARY KEY, email text, name text);
CREATE TABLE ww_noident (id int, name text);
CREATE TABLE ww_parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE ww_parted_1 PARTITION OF ww_parted FOR VALUES FROM (0) TO (10);
CREATE TABLE ww_parted_2 (id int NOT NULL, v text);
ALTER TABLE ww_parted_2 ADD CONSTRAINT ww_parted_2_id UNIQUE (id);
CREATE UNLOGGED TABLE ww_unlogged (id int PRIMARY KEY);
CREATE VIEW ww_view AS SELECT 1 AS id;
\set VERBOSITY default
-- a column outside the replica identity, for UPDATE and DELETE's old key
SELECT mc_watch('ww_users', ARRAY['user:{id}', 'email:{email}']);
SELECT mc_watch('ww_noident', ARRAY['n:{id}']);
-- REPLICA IDENTITY FULL carries every column
ALTER TABLE ww_noident REPLICA IDENTITY FULL;
SELECT mc_watch('ww_noident', ARRAY['n:{name}'], 'nosuchserver');
-- malformed templates and columns, worded as mc_invalidate's
SELECT mc_watch('ww_users', ARRAY['user:{id']);
SELECT mc_watch('ww_users', ARRAY['user:{}']);
SELECT mc_watch('ww_users', ARRAY['user:{nope}']);
SELECT mc_watch('ww_users', ARRAY['']);
SELECT mc_watch('ww_users', ARRAY['@other', 'user:{id}']);
SELECT mc_watch('ww_users', ARRAY[]::text[]);
SELECT mc_watch('ww_users', ARRAY['user:{id}', NULL]);
-- a partitioned table with no partition yet: its templates are checked too
CREATE TABLE ww_empty (id int PRIMARY KEY) PARTITION BY RANGE (id);
SELECT mc_watch('ww_empty', ARRAY['@other', 'e:{id}']);
SELECT mc_watch('ww_empty', ARRAY['e:{nope}']);
DROP TABLE ww_empty;
SELECT mc_watch('ww_users', NULL);
-- actions
SELECT mc_watch('ww_users', ARRAY['user:{id}'], action => 'purge');
SELECT mc_watch('ww_users', ARRAY['user:{id}'], on_truncate => 'delete');
-- what the decoder cannot follow
SELECT mc_watch('ww_unlogged', ARRAY['u:{id}']);
SELECT mc_watch('ww_view', ARRAY['v:{id}']);
CREATE TEMP TABLE ww_temp (id int PRIMARY KEY);
SELECT mc_watch('ww_temp', ARRAY['t:{id}']);
SELECT mc_watch('pg_class', ARRAY['c:{oid}']);
-- a partitioned table: each leaf's own identity is checked (a partition
-- attached later with another identity gives 'W' records, not keys)
ALTER TABLE ww_parted ATTACH PARTITION ww_parted_2 FOR VALUES FROM (10) TO (20);
SELECT mc_watch('ww_parted', ARRAY['p:{v}']);
-- a valid watch still needs the worker, which starts only when preloaded
SELECT mc_watch('ww_users', ARRAY['user:{id}', '@@at:{id}']);
SELECT count(*) AS watches FROM mc_watches;
SELECT count(*) AS slots FROM pg_replication_slots;
-- the status is empty without the worker; pausing needs it
SELECT * FROM mc_wal_watches;
SELECT * FROM mc_wal_status();
SELECT mc_wal_pause();
SELECT mc_unwatch('ww_users');
-- functions that change state are not for PUBLIC
CREATE ROLE ww_role;
GRANT SELECT ON ww_users TO ww_role;
SET ROLE ww_role;
SELECT mc_watch('ww_users', ARRAY['user:{id}']);
SELECT mc_unwatch('ww_users');
SELECT mc_wal_pause();
SELECT mc_wal_resume();
SELECT count(*) FROM mc_watches;
RESET ROLE;
-- a dropped table's watches go with it (rows stored directly: mc_watch
-- needs the worker), whoever drops it
INSERT INTO mc_watches (relid, server, templates) VALUES
  ('ww_users', 'a', ARRAY['u:{id}']), ('ww_users', 'b', ARRAY['u:{id}']),
  ('ww_noident', 'a', ARRAY['n:{id}']);
-- mc_wal_watches is not for PUBLIC; a role granted it sees the watches of
-- servers it may use (and those whose server is gone): not memcached's
-- without USAGE on it
INSERT INTO mc_watches (relid, server, templates) VALUES ('ww_users', 'memcached', ARRAY['u:{id}']);
SELECT "table", server FROM mc_wal_watches ORDER BY 1, 2;
SET ROLE ww_role;
SELECT count(*) FROM mc_wal_watches;
RESET ROLE;
GRANT SELECT ON mc_wal_watches TO ww_role;
SET ROLE ww_role;
SELECT "table", server FROM mc_wal_watches ORDER BY 1, 2;
RESET ROLE;
REVOKE SELECT ON mc_wal_watches FROM ww_role;
ALTER TABLE ww_users OWNER TO ww_role;
SET ROLE ww_role;
DROP TABLE ww_users;
RESET ROLE;
SELECT relid, server FROM mc_watches ORDER BY 1, 2;
DELETE FROM mc_watches;
\set VERBOSITY terse
DROP TABLE ww_noident, ww_parted, ww_unlogged;
DROP ROLE ww_role;
DROP VIEW ww_view;
