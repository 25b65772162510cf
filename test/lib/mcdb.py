"""mcdb — a private database with mcfdw created, for one integration test.

Integration tests share the rig's cluster; each works in its own database so
servers, roles of the test and pooled connections cannot leak between tests.
The database has no server until the test creates one: `db.server(c,
"memcached", ...)` makes the default one (mcfdw.server).

    db = mcdb.Database("pool_reuse")      # dropped and created afresh
    c = db.connect()                      # a new backend each call
    db.sql(c, "SELECT mc_get(%s)", ("k",))
"""

import mcrig


class Database:
    def __init__(self, name):
        self.name = name
        admin = mcrig.pg_connect()
        cur = admin.cursor()
        cur.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        cur.execute('CREATE DATABASE "%s"' % name)
        admin.close()
        c = self.connect()
        c.cursor().execute("CREATE EXTENSION mcfdw")
        c.close()

    def connect(self, **kw):
        """A new connection (a new backend, so a new pool)."""
        return mcrig.pg_connect(dbname=self.name, **kw)

    @staticmethod
    def sql(conn, query, args=None):
        """Run one statement; return all rows (or None for no result)."""
        cur = conn.cursor()
        cur.execute(query, args)
        return cur.fetchall() if cur.description else None

    @staticmethod
    def value(conn, query, args=None):
        """Run one statement; return the first column of the first row."""
        cur = conn.cursor()
        cur.execute(query, args)
        row = cur.fetchone()
        return row[0] if row else None

    @staticmethod
    def server(conn, name, servers, **options):
        """Create (or replace) a foreign server of mcfdw with these options."""
        cur = conn.cursor()
        cur.execute('DROP SERVER IF EXISTS "%s"' % name)
        opts = dict(servers=servers, **{k: str(v) for k, v in options.items()})
        cur.execute('CREATE SERVER "%s" FOREIGN DATA WRAPPER mcfdw OPTIONS (%s)'
                    % (name, ", ".join("%s %s" % (k, _lit(v)) for k, v in opts.items())))


def _lit(v):
    return "'" + str(v).replace("'", "''") + "'"
