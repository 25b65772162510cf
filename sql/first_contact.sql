--
-- first_contact: mistakes refused where they are made, with messages that
-- say what to do (the server-needing cases are in
-- test/integration/first_contact.py)
--
SELECT mctest.create('fc', 1);

-- memcached's login splits "user password" at spaces: a password with a
-- space could never log in, so it is refused, and never quoted
CREATE USER MAPPING FOR CURRENT_USER SERVER fc OPTIONS (username 'app', password 'pass word');
CREATE USER MAPPING FOR CURRENT_USER SERVER fc OPTIONS (username 'app', password ' leading');
CREATE USER MAPPING FOR CURRENT_USER SERVER fc OPTIONS (username 'app', password E'tab\there');
CREATE USER MAPPING FOR CURRENT_USER SERVER fc OPTIONS (username 'app', password 'pass:word-é');
ALTER USER MAPPING FOR CURRENT_USER SERVER fc OPTIONS (SET password 'new pass');
SELECT umoptions FROM pg_user_mappings WHERE srvname = 'fc';
-- the user name has the same rule (and no colon: the auth file's separator)
ALTER USER MAPPING FOR CURRENT_USER SERVER fc OPTIONS (SET username 'my app');
DROP USER MAPPING FOR CURRENT_USER SERVER fc;

-- entries of "servers" written with spaces instead of commas
ALTER SERVER fc OPTIONS (SET servers '127.0.0.1:11211 127.0.0.1:11212');
ALTER SERVER fc OPTIONS (SET servers '127.0.0.1:11211, 127.0.0.1:11212 127.0.0.1:11213');
ALTER SERVER fc OPTIONS (SET servers '127.0.0.1:11211 ,  127.0.0.1:11212');
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'fc';
SELECT mctest.point('fc', 1);

-- mc_invalidate on TRUNCATE: refused at CREATE TRIGGER
CREATE TABLE fc_t (id int);
CREATE TRIGGER fc_trunc AFTER TRUNCATE ON fc_t
  FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('fc:{id}');
CREATE TRIGGER fc_trunc AFTER INSERT OR TRUNCATE ON fc_t
  FOR EACH STATEMENT EXECUTE FUNCTION public.mc_invalidate('fc:{id}');
-- under another name too: the function is recognised by what it runs
CREATE FUNCTION fc_alias() RETURNS trigger AS '$libdir/mcfdw', 'mc_invalidate' LANGUAGE C;
CREATE TRIGGER fc_trunc AFTER TRUNCATE ON fc_t
  FOR EACH STATEMENT EXECUTE FUNCTION fc_alias('fc:{id}');
DROP FUNCTION fc_alias();
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'fc_t'::regclass;
-- other events and other functions are not its business
CREATE TRIGGER fc_rows AFTER INSERT OR UPDATE OR DELETE ON fc_t
  FOR EACH ROW EXECUTE FUNCTION mc_invalidate('fc:{id}');
CREATE FUNCTION fc_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER fc_other AFTER TRUNCATE ON fc_t FOR EACH STATEMENT EXECUTE FUNCTION fc_noop();
TRUNCATE fc_t;
-- created while event triggers were off: refused at its first firing
ALTER EVENT TRIGGER mcfdw_check_trigger DISABLE;
CREATE TRIGGER fc_trunc AFTER TRUNCATE ON fc_t
  FOR EACH STATEMENT EXECUTE FUNCTION mc_invalidate('fc:{id}');
ALTER EVENT TRIGGER mcfdw_check_trigger ENABLE;
TRUNCATE fc_t;
DROP TABLE fc_t;
DROP FUNCTION fc_noop();

-- mc_set_multi: a value over the server's item size limit names its key
-- (terse: the detail names the instance's port)
\set VERBOSITY terse
SELECT mc_set_multi(ARRAY['fc:small', 'fc:big', 'fc:small2'],
                    ARRAY['x', repeat('x', 2 * 1024 * 1024), 'y'], server => 'fc');
SELECT mc_set_multi(ARRAY['fc:big1', 'fc:big2'],
                    ARRAY[repeat('x', 2 * 1024 * 1024), repeat('x', 3 * 1024 * 1024)], server => 'fc');
\set VERBOSITY default
SELECT mc_set_multi(ARRAY['fc:after'], ARRAY['ok'], server => 'fc');

DROP SERVER fc;
