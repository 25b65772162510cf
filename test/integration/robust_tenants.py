"""robust_tenants: USAGE on a server does not let a role flush every
instance (and so every other server's key_prefix namespace)."""

import mcdb
import mcrig

t = mcrig.TAP()
mc = mcrig.start_memcached()
db = mcdb.Database("mcfdw_it_robust_tenants")
c = db.connect()
db.server(c, "a", mc.addr, key_prefix="a:")
db.server(c, "b", mc.addr, key_prefix="b:")
db.sql(c, "DROP ROLE IF EXISTS mc_tenant_a")
db.sql(c, "CREATE ROLE mc_tenant_a")
db.sql(c, "GRANT USAGE ON FOREIGN SERVER a TO mc_tenant_a")
db.sql(c, "SELECT mc_set('k', 'theirs', server => 'b')")
db.sql(c, "SET ROLE mc_tenant_a")
t.is_(db.value(c, "SELECT mc_set('k', 'mine', server => 'a')"), True, "a tenant with USAGE writes")
try:
    db.sql(c, "SELECT mc_flush_all('a')")
    r = ("ok", None)
except Exception as e:  # noqa: BLE001
    r = ("error", getattr(e, "pgcode", None))
db.sql(c, "RESET ROLE")
t.is_(r, ("error", "42501"), "mc_flush_all is not executable with USAGE alone (42501)")
t.is_(db.value(c, "SELECT mc_get('k', server => 'b')"), "theirs",
      "another server's namespace on the same instance survives")
t.ok(not db.value(c, "SELECT has_function_privilege('public', 'mc_flush_all(name)', 'EXECUTE')"),
     "mc_flush_all is revoked from PUBLIC")
db.sql(c, "DROP OWNED BY mc_tenant_a")
db.sql(c, "DROP ROLE mc_tenant_a")
c.close()
t.done()
