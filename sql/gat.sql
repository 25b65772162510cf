--
-- gat: get-and-touch, and the *_until functions (absolute expiry)
--
-- an untyped literal still resolves to the interval ttl: the absolute
-- forms have names of their own, so nothing is ambiguous
SELECT mc_set('gat:a', 'v', '1 hour');
SELECT mc_add('gat:lit', 'v', '1 hour'), mc_replace('gat:lit', 'w', '1 hour');
-- mc_gat returns the value (NULL on a miss), text or bytea
SELECT mc_gat('gat:a', '1 hour') AS gat, mc_gat_bytea('gat:a', '1 hour') AS gat_bytea;
SELECT mc_gat('gat:none', '1 hour') IS NULL AS miss;
SELECT mc_gat(NULL, '1 hour') IS NULL AS null_key;
-- the touch is real: an expiry in the past returns the value, then the
-- item is gone
SELECT mc_set('gat:b', 'bv');
SELECT mc_gat_until('gat:b', now() - interval '1 hour') AS last_read;
SELECT mc_get('gat:b') IS NULL AS expired;
-- and a NULL ttl removes the expiry
SELECT mc_set('gat:c', 'cv', '2 seconds');
SELECT mc_gat('gat:c', NULL);
SELECT mc_gat_bytea_until('gat:c', NULL);
-- the ttl rules of mc_set apply
SELECT mc_gat('gat:a', '-1 hour');
-- absolute expiry: the past expires at once
SELECT mc_set_until('gat:p', 'v', now() - interval '1 second');
SELECT mc_get('gat:p') IS NULL AS expired;
SELECT mc_set_until('gat:ninf', 'v', '-infinity');
SELECT mc_get('gat:ninf') IS NULL AS expired;
-- within 30 days and beyond (memcached reads a ttl above 30 days as a unix
-- time: sent as seconds, the item would have expired in 1970)
SELECT mc_set_until('gat:near', 'v', now() + interval '29 days'),
       mc_set_until('gat:far', '\x00ff'::bytea, now() + interval '60 days');
SELECT mc_get('gat:near') AS near, mc_get_bytea('gat:far') AS far;
-- NULL: no expiry
SELECT mc_set_until('gat:never', 'v', NULL), mc_get('gat:never');
-- out of range
SELECT mc_set_until('gat:x', 'v', 'infinity');
SELECT mc_set_until('gat:x', 'v', '2040-01-01 00:00:00+00');
-- the other writers
SELECT mc_add_until('gat:add', 'v', now() + interval '1 hour') AS added,
       mc_add_until('gat:add', 'v', now() + interval '1 hour') AS again;
SELECT mc_replace_until('gat:add', 'r', now() + interval '1 hour'), mc_get('gat:add');
SELECT mc_cas_until('gat:add', 'c', (SELECT cas FROM mc_gets('gat:add')),
                    now() + interval '1 hour') AS cas_ok, mc_get('gat:add');
SELECT mc_cas_until('gat:add', 'c2', 0, now() + interval '1 hour') AS cas_stale;
SELECT mc_incr_until('gat:ctr', 1, 10, now() + interval '1 hour') AS created,
       mc_incr_until('gat:ctr', 5, 10, now() + interval '1 hour') AS incremented,
       mc_decr_until('gat:ctr', 2, 0, now() + interval '1 hour') AS decremented;
SELECT mc_touch_until('gat:add', now() - interval '1 hour') AS touched;
SELECT mc_get('gat:add') IS NULL AS expired;
SELECT mc_touch_until('gat:none', now() + interval '1 hour') AS touched_missing;
-- a short absolute expiry runs out (memcached counts whole seconds)
SELECT mc_set_until('gat:short', 'v', now() + interval '1 second');
SELECT mc_set_until('gat:long', 'v', now() + interval '1 hour');
SELECT pg_sleep(2);
SELECT mc_get('gat:short') IS NULL AS short_expired, mc_get('gat:long') AS long_kept,
       mc_get('gat:c') AS no_expiry_kept;
