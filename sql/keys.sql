--
-- keys: length limits, and keys that cannot go on the wire as they are
--
SELECT mc_get('');
SELECT mc_set('', 'x');
-- 250 bytes is the limit for plain keys
SELECT mc_set(repeat('k', 250), 'max'), mc_get(repeat('k', 250));
SELECT mc_set(repeat('k', 251), 'x');
SELECT mc_get(repeat('k', 251));
SELECT mc_delete(repeat('k', 300));
-- keys with spaces, control characters or non-ASCII bytes go base64-encoded
SELECT mc_set('with space', 'sp'), mc_get('with space');
SELECT mc_set(E'tab\there', 'tab'), mc_get(E'tab\there');
SELECT mc_set('clé', 'utf8'), mc_get('clé');
SELECT mc_set('键', 'cjk'), mc_get('键');
-- ... and they are distinct keys
SELECT mc_get('with') IS NULL AS prefix_not_found, mc_get('space') IS NULL AS suffix_not_found;
-- injection attempts stay inside the key
SELECT mc_set('inj:victim', 'safe');
SELECT mc_set(E'inj:a\r\nmd inj:victim\r\n', 'x');
SELECT mc_get(E'inj:a\r\nmd inj:victim\r\n');
SELECT mc_delete(E'inj:b flush_all\r\n');
SELECT mc_get('inj:victim');
SELECT mc_set(E'inj:nl\n', 'x'), mc_get(E'inj:nl\n'), mc_get('inj:nl') IS NULL AS distinct_from_plain;
-- encoded keys are limited to 186 raw bytes (250 once encoded)
SELECT mc_set(repeat('é', 93), 'ok'), mc_get(repeat('é', 93));
SELECT mc_set(repeat('é', 93) || 'x', 'x');
SELECT mc_set(repeat(' ', 186), 'spaces'), mc_get(repeat(' ', 186));
SELECT mc_set(repeat(' ', 187), 'x');
-- keys that merely look like flags are plain keys
SELECT mc_set('b', 'key named b'), mc_get('b');
SELECT mc_set('v', 'key named v'), mc_get('v');
SELECT mc_set('k=1:q', 'odd'), mc_get('k=1:q');
