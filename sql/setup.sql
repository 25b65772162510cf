--
-- setup: runs first.  Creates the extension and the helpers the other
-- files use to reach the rig's memcached servers, whose ports the rig puts
-- in the mcfdw_test.* settings of the cluster.
--
CREATE EXTENSION mcfdw;

-- what CREATE EXTENSION made
SELECT fdwname, fdwvalidator::regproc FROM pg_foreign_data_wrapper WHERE fdwname = 'mcfdw';
-- and no server: a call naming none says how to create the default one
SELECT count(*) AS servers FROM pg_foreign_server;
SELECT mc_get('k');

CREATE SCHEMA mctest;

-- port of the rig's n-th memcached (1..4)
CREATE FUNCTION mctest.port(n int) RETURNS int LANGUAGE sql STABLE AS
$$ SELECT (string_to_array(current_setting('mcfdw_test.mc_ports'), ','))[n]::int $$;

-- "127.0.0.1:port" list of the given rig memcacheds
CREATE FUNCTION mctest.addrs(VARIADIC ns int[]) RETURNS text LANGUAGE sql STABLE AS
$$ SELECT string_agg('127.0.0.1:' || mctest.port(n), ',' ORDER BY o)
     FROM unnest(ns) WITH ORDINALITY AS u(n, o) $$;

-- point a foreign server at the given rig memcacheds
CREATE FUNCTION mctest.point(srv name, VARIADIC ns int[]) RETURNS void LANGUAGE plpgsql AS
$$ BEGIN
     EXECUTE format('ALTER SERVER %I OPTIONS (SET servers %L)', srv, mctest.addrs(VARIADIC ns));
   END $$;

-- create a foreign server of the wrapper on the given rig memcacheds
CREATE FUNCTION mctest.create(srv name, VARIADIC ns int[]) RETURNS void LANGUAGE plpgsql AS
$$ BEGIN
     EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER mcfdw OPTIONS (servers %L)',
                    srv, mctest.addrs(VARIADIC ns));
   END $$;

-- the listener that accepts connections and never answers
CREATE FUNCTION mctest.hang_addr() RETURNS text LANGUAGE sql STABLE AS
$$ SELECT '127.0.0.1:' || current_setting('mcfdw_test.hang_port') $$;

-- a loopback port nothing listens on (port 1, tcpmux, is never served here)
CREATE FUNCTION mctest.closed_addr() RETURNS text LANGUAGE sql STABLE AS
$$ SELECT '127.0.0.1:1' $$;

-- the default server (mcfdw.server), as README's first steps create it
SELECT mctest.create('memcached', 1);
SELECT mc_flush_all();
