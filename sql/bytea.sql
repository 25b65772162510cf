--
-- bytea: binary-safe values
--
SELECT mc_set('bin:a', '\x00ff00'::bytea, ttl => interval '10 minutes', flags => 7);
SELECT mc_get_bytea('bin:a');
SELECT value, flags FROM mc_gets_bytea('bin:a');
-- every byte value, NUL and CR LF included, round-trips
SELECT mc_set('bin:all', (SELECT string_agg(set_byte('\x00'::bytea, 0, i), ''::bytea) FROM generate_series(0, 255) i));
SELECT length(mc_get_bytea('bin:all')), md5(mc_get_bytea('bin:all')) = md5((SELECT string_agg(set_byte('\x00'::bytea, 0, i), ''::bytea) FROM generate_series(0, 255) i)) AS intact;
-- a value that looks like protocol stays data
SELECT mc_set('bin:proto', convert_to(E'x\r\nEND\r\nVA 3\r\n', 'UTF8'));
SELECT mc_get_bytea('bin:proto');
SELECT mc_get('bin:proto') = E'x\r\nEND\r\nVA 3\r\n' AS text_view;
-- empty
SELECT mc_set('bin:empty', ''::bytea), mc_get_bytea('bin:empty');
-- binary values are not text
SELECT mc_get('bin:a');
SELECT mc_set('bin:latin1', '\xe9'::bytea);
SELECT mc_get('bin:latin1');
-- text stored, bytea read
SELECT mc_set('bin:txt', 'é');
SELECT mc_get_bytea('bin:txt');
-- append works on bytes
SELECT mc_append('bin:a', '\x01'::bytea), mc_get_bytea('bin:a');
SELECT mc_get_bytea('bin:missing') IS NULL AS miss;
