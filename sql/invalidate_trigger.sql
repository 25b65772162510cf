--
-- invalidate_trigger: mc_invalidate queues on-commit deletes of keys built
-- from the rows a statement changed
--
CREATE TABLE it_users (id int PRIMARY KEY, email text, name text);
CREATE TRIGGER it_users_inv AFTER INSERT OR UPDATE OR DELETE ON it_users
  FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:user:{id}', 'it:email:{email}');
-- cache the keys; show which are still cached
CREATE FUNCTION it_cache(VARIADIC keys text[]) RETURNS void LANGUAGE sql AS
$$ SELECT count(mc_set(k, 'cached')) FROM unnest(keys) k $$;
CREATE FUNCTION it_cached(VARIADIC keys text[]) RETURNS TABLE (key text, cached boolean)
LANGUAGE sql AS $$ SELECT k, mc_get(k) IS NOT NULL FROM unnest(keys) k $$;
-- this backend's count of queued writes, for the default server
CREATE FUNCTION it_queued() RETURNS bigint LANGUAGE sql AS
$$ SELECT coalesce((SELECT queued FROM mc_invalidation_stats WHERE server = 'memcached'), 0) $$;
-- INSERT: the new row's keys, after commit only
SELECT it_cache('it:user:1', 'it:email:a@x');
BEGIN;
INSERT INTO it_users VALUES (1, 'a@x', 'Ann');
SELECT * FROM it_cached('it:user:1', 'it:email:a@x');
COMMIT;
SELECT * FROM it_cached('it:user:1', 'it:email:a@x');
-- UPDATE that changes a key column: the old key and the new one
SELECT it_cache('it:user:1', 'it:email:a@x', 'it:email:b@x');
UPDATE it_users SET email = 'b@x' WHERE id = 1;
SELECT * FROM it_cached('it:user:1', 'it:email:a@x', 'it:email:b@x');
-- UPDATE of another column: each key once (OLD's and NEW's are the same)
SELECT it_cache('it:user:1', 'it:email:b@x');
SELECT it_queued() AS q0 \gset
UPDATE it_users SET name = 'Anne' WHERE id = 1;
SELECT it_queued() - :q0 AS queued;
SELECT * FROM it_cached('it:user:1', 'it:email:b@x');
-- ROLLBACK: nothing is deleted
SELECT it_cache('it:user:1');
BEGIN;
UPDATE it_users SET name = 'Ann' WHERE id = 1;
ROLLBACK;
SELECT * FROM it_cached('it:user:1');
-- DELETE: the old row's keys
DELETE FROM it_users WHERE id = 1;
SELECT * FROM it_cached('it:user:1', 'it:email:b@x');
-- a NULL column gives no key for its template; the others go
SELECT it_cache('it:user:2', 'it:email:');
INSERT INTO it_users VALUES (2, NULL, 'Bob');
SELECT * FROM it_cached('it:user:2', 'it:email:');
-- a key memcached would refuse fails the statement at once
INSERT INTO it_users VALUES (3, repeat('e', 300), 'Cy');
-- an unknown column is an error at the first firing, naming the columns
CREATE TRIGGER it_bad AFTER INSERT ON it_users
  FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:user:{id}', 'it:{nope}');
INSERT INTO it_users VALUES (3, 'c@x', 'Cy');
DROP TRIGGER it_bad ON it_users;
-- template syntax: {{ and }} for braces, '@server' for the templates after
-- it, '@' alone back to mcfdw.server, '@@' for a key starting with '@'
SELECT mctest.create('it_other', 2);
CREATE TABLE it_tags (id int, tag text);
CREATE TRIGGER it_tags_inv AFTER INSERT OR UPDATE OR DELETE ON it_tags
  FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:{{tag}}:{tag}', '@@at:{id}',
    '@it_other', 'it:tag:{id}', '@', 'it:back:{id}');
SELECT it_cache('it:{tag}:red', '@at:1', 'it:tag:1', 'it:back:1');
SELECT mc_set('it:tag:1', 'cached', server => 'it_other');
INSERT INTO it_tags VALUES (1, 'red');
SELECT * FROM it_cached('it:{tag}:red', '@at:1', 'it:tag:1', 'it:back:1');
SELECT mc_get('it:tag:1', server => 'it_other') AS on_it_other;
-- templates that are not well formed, and misuse
CREATE TRIGGER it_bad AFTER INSERT ON it_tags FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:{tag');
INSERT INTO it_tags VALUES (2, 'x');
DROP TRIGGER it_bad ON it_tags;
CREATE TRIGGER it_bad AFTER INSERT ON it_tags FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:}');
INSERT INTO it_tags VALUES (2, 'x');
DROP TRIGGER it_bad ON it_tags;
CREATE TRIGGER it_bad AFTER INSERT ON it_tags FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:{}');
INSERT INTO it_tags VALUES (2, 'x');
DROP TRIGGER it_bad ON it_tags;
CREATE TRIGGER it_bad AFTER INSERT ON it_tags FOR EACH ROW EXECUTE FUNCTION mc_invalidate('@it_other');
INSERT INTO it_tags VALUES (2, 'x');
DROP TRIGGER it_bad ON it_tags;
CREATE TRIGGER it_bad BEFORE INSERT ON it_tags FOR EACH ROW EXECUTE FUNCTION mc_invalidate('it:{id}');
INSERT INTO it_tags VALUES (2, 'x');
DROP TRIGGER it_bad ON it_tags;
CREATE TRIGGER it_bad AFTER INSERT ON it_tags FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('it:{id}');
INSERT INTO it_tags VALUES (2, 'x');
DROP TRIGGER it_bad ON it_tags;
SELECT mc_invalidate();
-- statement triggers read the transition tables
DROP TRIGGER it_users_inv ON it_users;
CREATE TRIGGER it_users_ins AFTER INSERT ON it_users REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('it:user:{id}');
CREATE TRIGGER it_users_upd AFTER UPDATE ON it_users
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('it:user:{id}');
CREATE TRIGGER it_users_del AFTER DELETE ON it_users REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('it:user:{id}');
SELECT it_cache(VARIADIC array_agg('it:user:' || i)) FROM generate_series(10, 24) i;
INSERT INTO it_users SELECT i, 'u' || i || '@x', 'n' FROM generate_series(10, 12) i;
SELECT array_agg(i ORDER BY i) AS still_cached
  FROM generate_series(10, 24) i WHERE mc_get('it:user:' || i) IS NOT NULL;
SELECT it_cache(VARIADIC array_agg('it:user:' || i)) FROM generate_series(10, 24) i;
UPDATE it_users SET id = id + 10 WHERE id BETWEEN 10 AND 11;
SELECT array_agg(i ORDER BY i) AS still_cached
  FROM generate_series(10, 24) i WHERE mc_get('it:user:' || i) IS NOT NULL;
SELECT it_cache(VARIADIC array_agg('it:user:' || i)) FROM generate_series(10, 24) i;
DELETE FROM it_users WHERE id >= 12;
SELECT array_agg(i ORDER BY i) AS still_cached
  FROM generate_series(10, 24) i WHERE mc_get('it:user:' || i) IS NOT NULL;
DROP TABLE it_users;
DROP TABLE it_tags;
DROP SERVER it_other;
DROP FUNCTION it_cache(text[]);
DROP FUNCTION it_cached(text[]);
DROP FUNCTION it_queued();
