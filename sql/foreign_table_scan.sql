--
-- foreign_table_scan: the scan's fast paths give the rows the general path
-- gives, and what a backend keeps of a foreign table follows its changes.
--
-- A table of mc_get_multi's row shape (key text, value text or bytea,
-- flags integer) has its rows laid out by hand (rowlayout.c); with
-- mcfdw.debug_check_rows each such row is compared byte for byte with
-- heap_form_minimal_tuple's.  Prefixed keys are packed into blocks, and the
-- key column's value is found where each key was packed.
--
SET mcfdw.debug_check_rows = on;

-- the same items through tables of every shape: short values (1-byte
-- varlena header), 200 bytes (4-byte header), 2,000 bytes (past what is
-- laid out by hand), empty; flags 0, 7 and -1 (4294967295 as bigint)
SELECT count(*) FILTER (WHERE mc_set('fts:' || k, v, flags => f)) AS written
  FROM (VALUES ('a', 'x', 0), ('b', repeat('y', 200), 7), ('c', repeat('z', 2000), -1),
               ('d', '', 0), ('é', 'ünïcödé', 3)) AS t(k, v, f);
CREATE FOREIGN TABLE fts (key text, value text, flags integer) SERVER memcached
  OPTIONS (key_prefix 'fts:');
CREATE FOREIGN TABLE fts_bytea (key text, value bytea, flags integer) SERVER memcached
  OPTIONS (key_prefix 'fts:');
CREATE FOREIGN TABLE fts_noprefix (key text, value text, flags integer) SERVER memcached;
-- not the hand-laid shape: columns in another order, a bigint flags column
CREATE FOREIGN TABLE fts_other (flags integer, value text, key text) SERVER memcached
  OPTIONS (key_prefix 'fts:');
CREATE FOREIGN TABLE fts_int8 (key text, value text, flags bigint) SERVER memcached
  OPTIONS (key_prefix 'fts:');

SELECT key, length(value) AS len, left(value, 8) AS starts, flags
  FROM fts WHERE key = ANY('{a,b,c,d,é,missing,a}') ORDER BY key;
SELECT key, length(value) AS len, flags
  FROM fts_bytea WHERE key IN ('a', 'b', 'c', 'd') ORDER BY key;
SELECT key, length(value) AS len, flags
  FROM fts_noprefix WHERE key = ANY('{fts:a,fts:b,fts:c,fts:é,a}') ORDER BY key;
-- every shape gives the same rows
SELECT (SELECT array_agg(f ORDER BY f.key) FROM fts f WHERE key = ANY('{a,b,c,d,é}')) =
       (SELECT array_agg((o.key, o.value, o.flags)::fts ORDER BY o.key) FROM fts_other o
         WHERE key = ANY('{a,b,c,d,é}')) AS same_rows,
       (SELECT array_agg((key, value, (flags - CASE WHEN flags > 2147483647 THEN 4294967296 ELSE 0 END)::int)::fts
                         ORDER BY key) FROM fts_int8 WHERE key = ANY('{a,b,c,d,é}')) =
       (SELECT array_agg(f ORDER BY f.key) FROM fts f WHERE key = ANY('{a,b,c,d,é}')) AS same_int8;
-- only the columns a query reads are asked for: the rows still come whole
SELECT count(*) AS hits FROM fts WHERE key = ANY('{a,b,c,d,é,missing}');
SELECT key, flags FROM fts WHERE key IN ('a', 'b') ORDER BY key;

-- a value that is not text: an error naming the key, on the hand-laid
-- path as on the general one
SELECT mc_set('fts:bin', '\x610062'::bytea);
SELECT key, value FROM fts WHERE key = 'bin';
SELECT key, value FROM fts_other WHERE key = 'bin';
SELECT key, value, flags FROM fts_bytea WHERE key = 'bin';

-- many keys: prefixed keys span several blocks, and each row's key is its own
SELECT count(*) FILTER (WHERE mc_set('fts:m' || g, 'v' || g, flags => g)) AS written
  FROM generate_series(1, 3000) g;
SELECT count(*) AS rows, bool_and(value = 'v' || substr(key, 2)) AS values_ok,
       bool_and(flags::text = substr(key, 2)) AS flags_ok, count(DISTINCT key) AS distinct_keys
  FROM fts WHERE key = ANY(ARRAY(SELECT 'm' || g FROM generate_series(1, 3000) g));
-- a long prefix and long keys (250 bytes with the prefix: the protocol's limit)
CREATE FOREIGN TABLE fts_long (key text, value text, flags integer) SERVER memcached
  OPTIONS (key_prefix 'fts-a-rather-long-prefix-for-a-table:');
SELECT mc_set('fts-a-rather-long-prefix-for-a-table:' || repeat('k', 213), 'long', flags => 1);
SELECT length(key) AS keylen, value, flags FROM fts_long WHERE key = repeat('k', 213);

-- a join (a parameterized scan, rescanned per outer row) reads its keys
-- afresh each time
CREATE TABLE fts_outer (k text);
INSERT INTO fts_outer VALUES ('a'), ('b'), ('missing'), (NULL), ('a');
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT o.k, f.key, length(f.value) AS len, f.flags
  FROM fts_outer o JOIN fts f ON f.key = o.k ORDER BY o.k;
RESET enable_hashjoin;
RESET enable_mergejoin;
DROP TABLE fts_outer;

--
-- What a backend keeps of a table (its columns' fields and its options) is
-- reloaded after the table changes, for a plan made before the change as
-- for a new one.
--
SELECT mc_set('fts2:a', 'second');
SET plan_cache_mode = force_generic_plan;
PREPARE fts_get(text[]) AS SELECT * FROM fts WHERE key = ANY($1) ORDER BY key;
PREPARE fts_value(text) AS SELECT value FROM fts WHERE key = $1;
EXECUTE fts_get('{a}');
EXECUTE fts_value('a');
-- the table's prefix
ALTER FOREIGN TABLE fts OPTIONS (SET key_prefix 'fts2:');
EXECUTE fts_get('{a}');
EXECUTE fts_value('a');
SELECT value FROM fts WHERE key = 'a';
ALTER FOREIGN TABLE fts OPTIONS (DROP key_prefix);
EXECUTE fts_get('{fts:a,fts2:a}');
ALTER FOREIGN TABLE fts OPTIONS (ADD key_prefix 'fts:');
EXECUTE fts_get('{a}');
-- which column holds which field: a column option, then a rename
ALTER FOREIGN TABLE fts ALTER COLUMN flags OPTIONS (ADD field 'ttl');
EXECUTE fts_get('{a}');
ALTER FOREIGN TABLE fts ALTER COLUMN flags OPTIONS (DROP field);
EXECUTE fts_get('{a}');
ALTER FOREIGN TABLE fts RENAME COLUMN value TO v;
SELECT key, v FROM fts WHERE key = 'a';
ALTER FOREIGN TABLE fts RENAME COLUMN v TO value;
SELECT key, value FROM fts WHERE key = 'a';
-- a change another session makes reaches this one's kept table the same way
CREATE EXTENSION dblink;
SELECT dblink_connect('other', format('host=127.0.0.1 port=%s dbname=%s user=%s',
                                      current_setting('port'), current_database(), current_user));
EXECUTE fts_get('{a}');
SELECT dblink_exec('other', 'ALTER FOREIGN TABLE fts OPTIONS (SET key_prefix ''fts2:'')');
EXECUTE fts_get('{a}');
SELECT value FROM fts WHERE key = 'a';
SELECT dblink_exec('other', 'ALTER FOREIGN TABLE fts ALTER COLUMN flags OPTIONS (ADD field ''ttl'')');
EXECUTE fts_get('{a}');
SELECT dblink_exec('other', 'ALTER FOREIGN TABLE fts ALTER COLUMN flags OPTIONS (DROP field)');
SELECT dblink_exec('other', 'ALTER FOREIGN TABLE fts OPTIONS (SET key_prefix ''fts:'')');
EXECUTE fts_get('{a}');
SELECT dblink_disconnect('other');
DROP EXTENSION dblink;
-- the server's options (its prefix goes before the table's)
SELECT mc_set('srv:fts:a', 'server prefixed');
ALTER SERVER memcached OPTIONS (ADD key_prefix 'srv:');
EXECUTE fts_get('{a}');
SELECT key, value FROM fts WHERE key = 'a';
ALTER SERVER memcached OPTIONS (DROP key_prefix);
EXECUTE fts_get('{a}');
RESET plan_cache_mode;
DEALLOCATE ALL;

DROP FOREIGN TABLE fts, fts_bytea, fts_noprefix, fts_other, fts_int8, fts_long;
RESET mcfdw.debug_check_rows;
