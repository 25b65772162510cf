--
-- unix_socket: Unix socket entries in "servers" (/path[:weight]), what
-- mc_servers shows for them, TLS refused, and a missing socket's error
--
-- malformed socket entries
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/run/mc.sock:0');
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/run/mc.sock:2:3');
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/run/mc sock');
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/run/mc*.sock');
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/run/memcached/');
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/');
SELECT format('CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
              '/' || repeat('s', 107)) AS long_path \gset
:long_path;
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '/run/a.sock, /run/a.sock');
-- a relative path is a host name, and not a valid one
CREATE SERVER us_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'run/a.sock');
-- accepted: 106-byte path, weights, sockets beside TCP, paths differing in case
SELECT format('CREATE SERVER us_long FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
              '/' || repeat('s', 106)) AS long_path \gset
:long_path;
CREATE SERVER us_ok FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '/run/memcached/a.sock:3, /run/memcached/A.sock, 127.0.0.1:11211, /run/memcached/a.sock2',
           distribution 'dalli');
SELECT instance, host, port, weight, points, state
  FROM mc_servers WHERE server = 'us_ok' ORDER BY instance;
-- TLS does not go over a socket
CREATE SERVER us_tls FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '127.0.0.1:11211, /run/memcached/a.sock', tls 'require');
ALTER SERVER us_ok OPTIONS (ADD tls 'verify-full');
-- a socket nobody created
CREATE SERVER us_missing FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers '/nonexistent/mcfdw-test/memcached.sock');
SELECT mc_get('k', server => 'us_missing');
SELECT host, port, state, failures, last_error FROM mc_servers WHERE server = 'us_missing';
DROP SERVER us_ok;
DROP SERVER us_long;
DROP SERVER us_missing;
