--
-- sqlsmith_found: statements that broke mcfdw, found with random SQL
-- (test/integration/sqlsmith_crash.py and probes in its spirit), each the
-- smallest that showed it, with what they must do instead.
--
CREATE FOREIGN TABLE sf_b (key text, value text) SERVER memcached OPTIONS (key_prefix 'sf:');
CREATE FOREIGN TABLE sf_c (key text, value bytea) SERVER memcached OPTIONS (key_prefix 'sf:');
INSERT INTO sf_b VALUES ('1', 'one'), ('2', 'two');
CREATE TABLE sf_l (k text);
INSERT INTO sf_l VALUES ('1'), ('2'), ('3');
ANALYZE sf_l;

-- Two join conditions on a table's key with different outer relations
-- (the key in one equivalence class with two other tables' columns): the
-- planner compared the outer relations' bitmapsets as nodes,
-- "unrecognized node type: 1".
SELECT b.key, b.value, c.value
  FROM sf_l l JOIN sf_b b ON b.key = l.k JOIN sf_c c ON c.key = b.key ORDER BY 1;
SELECT l.k, b.value FROM sf_l l, sf_l m, sf_b b
  WHERE b.key = l.k AND b.key = m.k ORDER BY 1;
-- the same without the batched join: the nested loop's parameterized scans
SET mcfdw.enable_batched_join = off;
SELECT b.key, b.value, c.value
  FROM sf_l l JOIN sf_b b ON b.key = l.k JOIN sf_c c ON c.key = b.key ORDER BY 1;
RESET mcfdw.enable_batched_join;

DELETE FROM sf_b WHERE key IN ('1', '2');
DROP TABLE sf_l;
DROP FOREIGN TABLE sf_b, sf_c;
