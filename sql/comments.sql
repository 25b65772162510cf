--
-- comments: every object the extension creates says what it is in psql
-- (\dx+ mcfdw, \df+ mc_*, \dv+ mc_*): no member of the extension is left
-- without a comment.  Foreign servers are the user's, not described here.
--
CREATE VIEW mctest.uncommented AS
  SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS member
    FROM pg_depend d
   WHERE d.refclassid = 'pg_extension'::regclass
     AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'mcfdw')
     AND d.deptype = 'e'
     AND d.classid <> 'pg_foreign_server'::regclass
     -- a view's row type and its array type (members from PostgreSQL 17
     -- on) are described by the view
     AND NOT (d.classid = 'pg_type'::regclass AND EXISTS
              (SELECT FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem
                WHERE t.oid = d.objid AND (t.typrelid <> 0 OR e.typrelid <> 0)))
     AND obj_description(d.objid, d.classid::regclass::name) IS NULL;

SELECT member FROM mctest.uncommented ORDER BY member;

-- and a member added without a comment is caught
CREATE FUNCTION mc_uncommented_probe() RETURNS int LANGUAGE sql AS 'SELECT 1';
ALTER EXTENSION mcfdw ADD FUNCTION mc_uncommented_probe();
SELECT member FROM mctest.uncommented ORDER BY member;
ALTER EXTENSION mcfdw DROP FUNCTION mc_uncommented_probe();
DROP FUNCTION mc_uncommented_probe();

-- as psql shows them
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') AS description
  FROM pg_proc p
 WHERE p.proname IN ('mc_get', 'mc_delete_on_commit', 'mc_connections', 'mc_disconnect')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT c.relname AS view, obj_description(c.oid, 'pg_class') AS description
  FROM pg_class c WHERE c.relname IN ('mc_servers', 'mc_connections') ORDER BY 1;
SELECT obj_description(oid, 'pg_foreign_data_wrapper') AS wrapper
  FROM pg_foreign_data_wrapper WHERE fdwname = 'mcfdw';

DROP VIEW mctest.uncommented;
