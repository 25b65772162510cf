--
-- invalidation: ALTER SERVER reaches other backends at their next transaction
--
CREATE EXTENSION dblink;
SELECT mctest.create('inv', 1);
SELECT mc_set('inv:k', 'on 1', server => 'inv');
SELECT dblink_connect('other', format('host=127.0.0.1 port=%s dbname=%s user=%s',
                                      current_setting('port'), current_database(), current_user));
-- the other backend reads through its own pooled connection
SELECT * FROM dblink('other', 'SELECT mc_get(''inv:k'', server => ''inv'')') AS r(v text);
SELECT mctest.point('inv', 2);
-- its next transaction uses the new servers
SELECT * FROM dblink('other', 'SELECT mc_get(''inv:k'', server => ''inv'') IS NULL') AS r(moved boolean);
SELECT mctest.point('inv', 1);
SELECT * FROM dblink('other', 'SELECT mc_get(''inv:k'', server => ''inv'')') AS r(v text);
-- GRANT/REVOKE reach it too
CREATE ROLE mc_inv_user;
GRANT USAGE ON FOREIGN SERVER inv TO mc_inv_user;
SELECT * FROM dblink('other', 'SET ROLE mc_inv_user; SELECT mc_get(''inv:k'', server => ''inv'')') AS r(v text);
REVOKE USAGE ON FOREIGN SERVER inv FROM mc_inv_user;
SELECT * FROM dblink('other', 'SELECT mc_get(''inv:k'', server => ''inv'')', false) AS r(v text);
SELECT dblink_exec('other', 'RESET ROLE');
-- a dropped server is gone for it as well
DROP SERVER inv;
SELECT * FROM dblink('other', 'SELECT mc_get(''inv:k'', server => ''inv'')', false) AS r(v text);
SELECT dblink_disconnect('other');
DROP ROLE mc_inv_user;
DROP EXTENSION dblink;
