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
-- text results are checked wherever the bad byte sits (the check reads
-- sixteen and eight bytes at a time, then the tail)
DO $$
DECLARE
  pos int;
  bad text;
BEGIN
  FOREACH pos IN ARRAY ARRAY[1, 8, 16, 17, 24, 33, 37, 40] LOOP
    FOREACH bad IN ARRAY ARRAY['\xff', '\x00'] LOOP
      PERFORM mc_set('bin:pos', overlay(convert_to(repeat('a', 40), 'UTF8') PLACING bad::bytea FROM pos FOR 1));
      BEGIN
        PERFORM mc_get('bin:pos');
        RAISE NOTICE 'byte % at %: accepted', bad, pos;
      EXCEPTION WHEN character_not_in_repertoire THEN
        NULL;
      END;
      BEGIN
        PERFORM * FROM mc_get_multi(ARRAY['bin:pos']);
        RAISE NOTICE 'byte % at % (multi-get): accepted', bad, pos;
      EXCEPTION WHEN character_not_in_repertoire THEN
        NULL;
      END;
    END LOOP;
  END LOOP;
  RAISE NOTICE 'invalid bytes rejected at every position';
END $$;
-- valid multi-byte text of every length passes
SELECT bool_and(mc_set('bin:utf8', repeat('é', n)) AND mc_get('bin:utf8') = repeat('é', n)) AS utf8_ok
  FROM generate_series(1, 40) n;
