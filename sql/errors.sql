--
-- errors: unreachable servers, dead marking, server-side errors
--
DO $$ BEGIN
  EXECUTE format('CREATE SERVER down FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L, failure_limit %L, retry_delay %L)',
                 mctest.closed_addr(), '2', '1h');
END $$;
\set VERBOSITY default
SELECT mc_get('k', server => 'down');
SELECT mc_set('k', 'v', server => 'down');
-- after failure_limit failures in a row it is marked dead: calls fail fast
-- (the hint names the time of the next try, so show the detail by hand)
DO $$
DECLARE
  msg text;
  detail text;
BEGIN
  PERFORM mc_get('k', server => 'down');
EXCEPTION WHEN connection_failure THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
  RAISE NOTICE '% / %', msg, detail;
END $$;
\set VERBOSITY terse
-- ALTER SERVER gives a fresh start; retry_delay 0 retries every time
ALTER SERVER down OPTIONS (SET retry_delay '0');
SELECT mc_get('k', server => 'down');
SELECT mc_get('k', server => 'down');
SELECT mc_get('k', server => 'down');
DROP SERVER down;
-- values over the server's item size limit (the detail names the instance's port)
SELECT mc_set('err:huge', repeat('x', 2 * 1024 * 1024));
\set VERBOSITY default
-- the connection is usable afterwards
SELECT mc_set('err:after', 'fine'), mc_get('err:after');
-- counters on non-numbers, and bad deltas
SELECT mc_set('err:word', 'abc');
SELECT mc_incr('err:word');
SELECT mc_incr('err:word', -1);
SELECT mc_get('err:word');
