--
-- options: the validator, option parsing, ALTER SERVER taking effect
--
-- unknown options, and options where none are allowed
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (host 'localhost');
ALTER FOREIGN DATA WRAPPER mcfdw OPTIONS (ADD servers 'x:1');
CREATE USER MAPPING FOR CURRENT_USER SERVER memcached OPTIONS (user 'x');
-- no servers option: the memcached default 127.0.0.1:11211
CREATE SERVER opt_default FOREIGN DATA WRAPPER mcfdw;
DROP SERVER opt_default;
-- the servers list: every entry is checked
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'a:1,,b:2');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'host:0');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'host:65536');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'host:11211:0');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'host:11211:2:9');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'host:abc');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'bad host:1');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'h/x:1');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers ':11211');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '[::1');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers '[zz]:1');
CREATE SERVER opt_bad FOREIGN DATA WRAPPER mcfdw OPTIONS (servers 'a:1, A:1');
-- accepted forms
CREATE SERVER opt_ok FOREIGN DATA WRAPPER mcfdw
  OPTIONS (servers ' 10.0.0.1:11211:2, cache-2.example.com:11311 ,[::1]:11211, localhost ',
           connect_timeout '2s', io_timeout '250', distribution 'dalli',
           key_prefix 'app:', failure_limit '3', retry_delay '1min', failover 'on');
-- numeric options
ALTER SERVER opt_ok OPTIONS (SET connect_timeout '-1');
ALTER SERVER opt_ok OPTIONS (SET connect_timeout 'soon');
ALTER SERVER opt_ok OPTIONS (SET io_timeout '2h');
ALTER SERVER opt_ok OPTIONS (SET failure_limit '0');
ALTER SERVER opt_ok OPTIONS (SET retry_delay '5 parsecs');
ALTER SERVER opt_ok OPTIONS (ADD idle_timeout '-1');
ALTER SERVER opt_ok OPTIONS (ADD idle_timeout '8d');
ALTER SERVER opt_ok OPTIONS (ADD max_reply_size '1kB');
ALTER SERVER opt_ok OPTIONS (ADD max_reply_size 'big');
ALTER SERVER opt_ok OPTIONS (ADD idle_timeout '5min', ADD max_reply_size '16MB');
ALTER SERVER opt_ok OPTIONS (DROP idle_timeout, DROP max_reply_size);
ALTER SERVER opt_ok OPTIONS (SET failover 'maybe');
ALTER SERVER opt_ok OPTIONS (SET distribution 'random');
ALTER SERVER opt_ok OPTIONS (SET key_prefix 'x');
ALTER SERVER opt_ok OPTIONS (SET key_prefix '');
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'opt_ok';
DROP SERVER opt_ok;
-- servers of another wrapper are refused
CREATE FOREIGN DATA WRAPPER not_mcfdw;
CREATE SERVER foreign_srv FOREIGN DATA WRAPPER not_mcfdw;
SELECT mc_get('x', server => 'foreign_srv');
DROP SERVER foreign_srv;
DROP FOREIGN DATA WRAPPER not_mcfdw;
-- unknown server, empty default
SELECT mc_get('x', server => 'no_such_server');
SET mcfdw.server = 'no_such_server';
SELECT mc_get('x');
SET mcfdw.server = '';
SELECT mc_get('x');
RESET mcfdw.server;
-- the mcfdw.* prefix is reserved: typos are caught
SET mcfdw.sever = 'x';
-- ALTER SERVER takes effect for the next call
SELECT mctest.create('opt_move', 1);
SELECT mc_set('opt:k', 'on 1', server => 'opt_move');
SELECT mctest.point('opt_move', 2);
SELECT mc_get('opt:k', server => 'opt_move') IS NULL AS moved_away;
SELECT mctest.point('opt_move', 1);
SELECT mc_get('opt:k', server => 'opt_move');
-- key_prefix: prepended to every key, on the wire and for routing
ALTER SERVER opt_move OPTIONS (ADD key_prefix 'ns:');
SELECT mc_set('k', 'prefixed', server => 'opt_move');
ALTER SERVER opt_move OPTIONS (DROP key_prefix);
SELECT mc_get('ns:k', server => 'opt_move');
SELECT mc_get('k', server => 'opt_move') IS NULL AS unprefixed_absent;
-- the prefix counts towards the key length
ALTER SERVER opt_move OPTIONS (ADD key_prefix 'ns:');
SELECT mc_set(repeat('k', 247), 'fits', server => 'opt_move');
SELECT mc_set(repeat('k', 248), 'x', server => 'opt_move');
-- dropping a server in use
DROP SERVER opt_move;
SELECT mc_get('k', server => 'opt_move');
