--
-- secure_options: the TLS server options and the user-mapping credentials
--
-- tls takes libpq's sslmode names
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'on');
CREATE SERVER sec_ok FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '127.0.0.1:1', tls 'verify-full', tls_server_name 'cache.example');
-- TLS settings that tls 'disable' would silently ignore are refused
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (tls_server_name 'x');
ALTER SERVER sec_ok OPTIONS (SET tls 'disable');
-- a client certificate needs its key
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw
  OPTIONS (tls 'require', tls_cert_file '/nonexistent/client.crt');
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'require', tls_ca_file '');
-- a host name has no spaces or control characters
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw
  OPTIONS (tls 'verify-full', tls_server_name E'cache\texample');
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw
  OPTIONS (tls 'verify-full', tls_server_name 'cache example');
-- credentials: user mappings only, both or neither, no characters memcached splits on
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (username 'u', password 'p');
CREATE USER MAPPING FOR CURRENT_USER SERVER sec_ok OPTIONS (username 'u');
CREATE USER MAPPING FOR CURRENT_USER SERVER sec_ok OPTIONS (username 'a b', password 'p');
CREATE USER MAPPING FOR CURRENT_USER SERVER sec_ok OPTIONS (username 'a:b', password 'p');
CREATE USER MAPPING FOR CURRENT_USER SERVER sec_ok OPTIONS (username 'u', password E'p\nq');
CREATE USER MAPPING FOR CURRENT_USER SERVER sec_ok OPTIONS (tls 'require');
CREATE USER MAPPING FOR PUBLIC SERVER sec_ok OPTIONS (username 'u', password 'secret');
-- a role allowed to create servers may not name files the backend reads
CREATE ROLE sec_owner;
GRANT USAGE ON FOREIGN DATA WRAPPER mcfdw TO sec_owner;
SET ROLE sec_owner;
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw
  OPTIONS (tls 'verify-ca', tls_ca_file '/etc/passwd');
CREATE SERVER sec_bad FOREIGN DATA WRAPPER mcfdw
  OPTIONS (tls 'require', tls_cert_file '/etc/passwd', tls_key_file '/etc/shadow');
CREATE SERVER sec_owned FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'require');
-- the password of another role's mapping is not shown
SELECT usename, umoptions FROM pg_user_mappings WHERE srvname = 'sec_ok';
RESET ROLE;
SELECT usename, umoptions FROM pg_user_mappings WHERE srvname = 'sec_ok';
DROP SERVER sec_owned;
DROP USER MAPPING FOR PUBLIC SERVER sec_ok;
DROP SERVER sec_ok;
REVOKE USAGE ON FOREIGN DATA WRAPPER mcfdw FROM sec_owner;
DROP ROLE sec_owner;
