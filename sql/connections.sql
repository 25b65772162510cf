--
-- connections: this session's memcached connections (mc_connections),
-- closing them (mc_disconnect, mc_disconnect_all), as postgres_fdw's
-- postgres_fdw_get_connections and postgres_fdw_disconnect[_all].
--
SELECT mctest.create('conn_a', 1, 2);
SELECT mctest.create('conn_b', 3);
-- a new session holds none
SELECT count(*) FROM mc_connections;

-- thirty keys: both instances of conn_a
SELECT count(*) FILTER (WHERE mc_set('conn:' || i, 'v' || i, server => 'conn_a'))
  FROM generate_series(1, 30) i;
SELECT mc_set('conn:b', 'vb', server => 'conn_b');
CREATE VIEW mctest.conns AS
  SELECT server, (SELECT n FROM generate_series(1, 4) n
                   WHERE instance = '127.0.0.1:' || mctest.port(n)) AS rig_instance,
         user_name, tls, valid, in_use, requests > 0 AS used,
         last_used BETWEEN now() - interval '1 minute' AND clock_timestamp() AS recent
    FROM mc_connections;
SELECT * FROM mctest.conns ORDER BY server, rig_instance;
-- the function and the view agree; no password column to show
SELECT (SELECT count(*) FROM mc_connections()) = (SELECT count(*) FROM mc_connections) AS same;

-- closed: true, then false; mc_servers agrees
SELECT mc_disconnect('conn_a');
SELECT * FROM mctest.conns ORDER BY server, rig_instance;
SELECT server, instance, state FROM mc_servers WHERE server = 'conn_a' ORDER BY instance;
SELECT mc_disconnect('conn_a');
-- the next call reconnects
SELECT mc_get('conn:1', server => 'conn_a');
SELECT count(*) AS conn_a_open FROM mc_connections WHERE server = 'conn_a';
SELECT count(*) FROM mc_get_multi(ARRAY(SELECT 'conn:' || i FROM generate_series(1, 30) i), 'conn_a');
SELECT count(*) AS conn_a_open FROM mc_connections WHERE server = 'conn_a';

-- ALTER SERVER makes the session's copy stale (valid false) until the next
-- use rebuilds it, keeping the sockets of instances still listed
ALTER SERVER conn_a OPTIONS (ADD io_timeout '900');
SELECT rig_instance, valid FROM mctest.conns WHERE server = 'conn_a' ORDER BY rig_instance;
SELECT mc_get('conn:1', server => 'conn_a');
SELECT rig_instance, valid FROM mctest.conns WHERE server = 'conn_a' ORDER BY rig_instance;

-- all: true, then false
SELECT mc_disconnect_all();
SELECT count(*) FROM mc_connections;
SELECT mc_disconnect_all();

-- errors: no such server, a server of another wrapper; NULL gives NULL
SELECT mc_disconnect('conn_none');
CREATE FOREIGN DATA WRAPPER conn_other_fdw;
CREATE SERVER conn_other FOREIGN DATA WRAPPER conn_other_fdw;
SELECT mc_disconnect('conn_other');
SELECT mc_disconnect(NULL) IS NULL AS is_null;
DROP SERVER conn_other;
DROP FOREIGN DATA WRAPPER conn_other_fdw;

-- mid-transaction: nothing is lost, the next call reconnects, and the
-- on-commit queue is still sent at COMMIT
BEGIN;
SELECT mc_get('conn:b', server => 'conn_b');
SELECT mc_delete_on_commit('conn:b', server => 'conn_b');
SELECT mc_disconnect('conn_b');
SELECT mc_get('conn:b', server => 'conn_b');
SELECT mc_disconnect_all();
COMMIT;
SELECT mc_get('conn:b', server => 'conn_b') IS NULL AS deleted_at_commit;

-- an open cursor over a foreign table: its rows were read when it
-- started, and it goes on after the connections are closed
CREATE FOREIGN TABLE mctest.conn_ft (key text, value text) SERVER conn_a;
BEGIN;
DECLARE cur CURSOR FOR
  SELECT key, value FROM mctest.conn_ft WHERE key IN ('conn:1', 'conn:2', 'conn:3', 'conn:4') ORDER BY key;
FETCH 2 FROM cur;
SELECT mc_disconnect('conn_a');
FETCH ALL FROM cur;
SELECT key, value FROM mctest.conn_ft WHERE key = 'conn:5';
COMMIT;

-- a connection a running request uses is not closed: here a column type's
-- input function (a domain's CHECK) calls mc_disconnect while the scan
-- reads the replies; the rows are right and the socket stays pooled
CREATE DOMAIN mctest.closing AS text
  CHECK (VALUE IS NULL OR mc_disconnect('conn_b') IS NOT NULL);
CREATE FOREIGN TABLE mctest.conn_closing (key text, value mctest.closing) SERVER conn_b;
SELECT mc_set('conn:b1', 'x', server => 'conn_b'), mc_set('conn:b2', 'y', server => 'conn_b');
SELECT key, value FROM mctest.conn_closing WHERE key IN ('conn:b1', 'conn:b2') ORDER BY key;
SELECT * FROM mctest.conns WHERE server = 'conn_b';
SELECT mc_disconnect('conn_b');
SELECT * FROM mctest.conns WHERE server = 'conn_b';

-- a role sees (and closes) only connections of servers it may use, made
-- under the user mapping it logs in with; a superuser sees every one
SELECT mc_disconnect_all();
CREATE ROLE mcfdw_conn_role;
GRANT USAGE ON FOREIGN SERVER conn_a TO mcfdw_conn_role;
SELECT mc_get('conn:1', server => 'conn_a'), mc_get('conn:b1', server => 'conn_b');
SET ROLE mcfdw_conn_role;
SELECT server, count(*) FROM mc_connections GROUP BY server ORDER BY server;
SELECT mc_disconnect('conn_b');
SELECT mc_disconnect_all();
RESET ROLE;
SELECT server, rig_instance FROM mctest.conns ORDER BY server, rig_instance;
SELECT mc_disconnect_all();

-- a dropped server's connections are closed, and not listed
SELECT mc_get('conn:b1', server => 'conn_b');
DROP FOREIGN TABLE mctest.conn_closing;
DROP SERVER conn_b;
SELECT count(*) FROM mc_connections;

DROP VIEW mctest.conns;
DROP FOREIGN TABLE mctest.conn_ft;
DROP DOMAIN mctest.closing;
DROP SERVER conn_a;
DROP ROLE mcfdw_conn_role;
