--
-- privileges: USAGE on the foreign server gates every call
--
CREATE ROLE mc_priv_user;
CREATE ROLE mc_priv_group;
SELECT mc_set('priv:k', 'secret');
SET ROLE mc_priv_user;
SELECT mc_get('priv:k');
SELECT mc_set('priv:k', 'overwritten');
SELECT mc_delete('priv:k');
SELECT mc_flush_all();
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER memcached TO mc_priv_user;
SET ROLE mc_priv_user;
SELECT mc_get('priv:k');
SELECT mc_set('priv:k2', 'mine');
-- without ownership the user cannot point the server elsewhere
ALTER SERVER memcached OPTIONS (SET servers '10.0.0.1:11211');
CREATE SERVER mine FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '10.0.0.1:11211');
-- mcfdw.server only names a server; USAGE is still required on it
RESET ROLE;
SELECT mctest.create('priv_other', 2);
SET ROLE mc_priv_user;
SET mcfdw.server = 'priv_other';
SELECT mc_get('priv:k');
SELECT mc_get('priv:k', server => 'priv_other');
RESET mcfdw.server;
-- revoking takes effect at once (the cached check is invalidated)
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER memcached FROM mc_priv_user;
SET ROLE mc_priv_user;
SELECT mc_get('priv:k');
-- USAGE through role membership, and losing it
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER memcached TO mc_priv_group;
GRANT mc_priv_group TO mc_priv_user;
SET ROLE mc_priv_user;
SELECT mc_get('priv:k');
RESET ROLE;
REVOKE mc_priv_group FROM mc_priv_user;
SET ROLE mc_priv_user;
SELECT mc_get('priv:k');
-- SECURITY DEFINER functions act with their owner's rights
RESET ROLE;
CREATE FUNCTION priv_reader(k text) RETURNS text LANGUAGE sql SECURITY DEFINER
  AS $$ SELECT mc_get(k) $$;
GRANT EXECUTE ON FUNCTION priv_reader(text) TO mc_priv_user;
SET ROLE mc_priv_user;
SELECT priv_reader('priv:k');
RESET ROLE;
DROP FUNCTION priv_reader(text);
-- mc_flush_all is not granted to PUBLIC: EXECUTE first, then USAGE as usual
GRANT EXECUTE ON FUNCTION mc_flush_all(name) TO mc_priv_user;
SET ROLE mc_priv_user;
SELECT mc_flush_all('priv_other');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION mc_flush_all(name) FROM mc_priv_user;
DROP SERVER priv_other;
REVOKE USAGE ON FOREIGN SERVER memcached FROM mc_priv_group;
DROP ROLE mc_priv_user;
DROP ROLE mc_priv_group;
