--
-- cancel: statement_timeout and pg_cancel_backend() stop a call waiting on
-- a server that accepts connections and never answers
--
DO $$ BEGIN
  EXECUTE format('CREATE SERVER hung FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, io_timeout %L, connect_timeout %L)',
                 mctest.hang_addr(), '60s', '60s');
END $$;
-- statement_timeout: the wait is interrupted long before the 60 s io_timeout
SET statement_timeout = '100ms';
SELECT mc_get('k', server => 'hung');
SELECT mc_set('k', 'v', server => 'hung');
RESET statement_timeout;
-- a PL/pgSQL block that catches the cancel can go on using mcfdw
SET statement_timeout = '100ms';
DO $$
BEGIN
  BEGIN
    PERFORM mc_get('k', server => 'hung');
  EXCEPTION WHEN query_canceled THEN
    RAISE NOTICE 'caught: %', SQLERRM;
  END;
  RAISE NOTICE 'after: %', mc_set('cancel:plpgsql', 'ok') AND mc_get('cancel:plpgsql') = 'ok';
END $$;
RESET statement_timeout;
-- the io_timeout itself ends the wait when nothing else does (the detail
-- names the instance's port, which changes from run to run)
ALTER SERVER hung OPTIONS (SET io_timeout '200ms');
\set VERBOSITY terse
SELECT mc_get('k', server => 'hung');
\set VERBOSITY default
-- pg_cancel_backend() from another session
CREATE EXTENSION dblink;
SELECT dblink_connect('c', format('host=127.0.0.1 port=%s dbname=%s user=%s',
                                  current_setting('port'), current_database(), current_user));
SELECT dblink_exec('c', 'ALTER SERVER hung OPTIONS (SET io_timeout ''60s'')');
CREATE TEMP TABLE t0 AS SELECT clock_timestamp() AS t;
SELECT dblink_send_query('c', 'SELECT mc_get(''cancel-me'', server => ''hung'')');
-- wait until the other backend is waiting on memcached, then cancel it
DO $$
DECLARE
  victim int;
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM pg_stat_clear_snapshot();  -- else the first snapshot is read 1000 times
    SELECT pid INTO victim FROM pg_stat_activity
     WHERE wait_event_type = 'Extension' AND query LIKE '%cancel-me%' AND pid <> pg_backend_pid();
    EXIT WHEN victim IS NOT NULL;
    PERFORM pg_sleep(0.01);
  END LOOP;
  IF victim IS NULL THEN
    RAISE EXCEPTION 'the call never started waiting';
  END IF;
  PERFORM pg_cancel_backend(victim);
END $$;
SELECT * FROM dblink_get_result('c', false) AS r(v text);
SELECT * FROM dblink_get_result('c', false) AS r(v text);
SELECT clock_timestamp() - t < interval '10 seconds' AS cancelled_promptly FROM t0;
-- the cancelled session is fine afterwards
SELECT * FROM dblink('c', 'SELECT mc_set(''cancel:after'', ''ok'') AND mc_get(''cancel:after'') = ''ok''') AS r(ok boolean);
SELECT dblink_disconnect('c');
DROP EXTENSION dblink;
DROP SERVER hung;
