"""connections: mc_disconnect and mc_disconnect_all really close the
sockets (memcached's curr_connections drops; the backend's descriptors,
wait sets included, go back to what they were), the next call reconnects;
mc_connections names the user mapping each connection logged in with
(memcached -Y), shows a role only its own, shows TLS, and never a
password."""

import os
import socket

import mcdb
import mcrig
from tlsrig import path, start, tls_args, write_file

t = mcrig.TAP()
write_file("authfile", "alice:pw-alice\nbob:pw-bob\n")
plain = mcrig.start_memcached()
auth = start(["-Y", path("authfile")], tls=False)
tls = start(tls_args())

db = mcdb.Database("mcfdw_it_connections")
setup = db.connect()
db.server(setup, "plain", plain.addr)
db.server(setup, "auth", auth.addr)
db.server(setup, "secure", tls.addr, tls="require")
ROLES = ("mcfdw_it_conn_alice", "mcfdw_it_conn_bob", "mcfdw_it_conn_carol")
for r in ROLES:
    db.sql(setup, "DROP ROLE IF EXISTS %s" % r)
    db.sql(setup, "CREATE ROLE %s" % r)
    db.sql(setup, "GRANT USAGE ON FOREIGN SERVER auth TO %s" % r)
db.sql(setup, "CREATE USER MAPPING FOR mcfdw_it_conn_alice SERVER auth "
              "OPTIONS (username 'alice', password 'pw-alice')")
db.sql(setup, "CREATE USER MAPPING FOR mcfdw_it_conn_bob SERVER auth "
              "OPTIONS (username 'bob', password 'pw-bob')")
db.sql(setup, "CREATE USER MAPPING FOR PUBLIC SERVER auth "
              "OPTIONS (username 'alice', password 'pw-alice')")


def curr_connections(m, login=None):
    """memcached's curr_connections, less the one asking (which logs in
    first on a -Y server)."""
    with socket.create_connection(("127.0.0.1", m.port), timeout=5) as s:
        f = s.makefile("rb")
        if login:
            s.sendall(b"set a 0 0 %d\r\n%s\r\n" % (len(login), login))
            assert f.readline().startswith(b"STORED")
        s.sendall(b"stats\r\n")
        while True:
            line = f.readline()
            if not line or line.startswith(b"END"):
                raise AssertionError("no curr_connections")
            if line.startswith(b"STAT curr_connections "):
                return int(line.split()[2]) - 1


def settles(pred):
    """pred() becomes true within 5 s (memcached counts a close once it
    has seen it)."""
    try:
        return bool(mcrig.wait_for(pred, timeout=5))
    except TimeoutError:
        return False


def auth_conns():
    return curr_connections(auth, b"alice pw-alice")


def fds(pid):
    """The backend's sockets and epoll sets, or None if /proc says nothing."""
    d = "/proc/%d/fd" % pid
    try:
        names = os.listdir(d)
    except OSError:
        return None
    out = {"socket": 0, "eventpoll": 0}
    for n in names:
        try:
            link = os.readlink(os.path.join(d, n))
        except OSError:
            continue
        if link.startswith("socket:"):
            out["socket"] += 1
        elif "eventpoll" in link:
            out["eventpoll"] += 1
    return out


# --- the sockets really close --------------------------------------------
c = db.connect()
pid = db.value(c, "SELECT pg_backend_pid()")
db.value(c, "SELECT count(*) FROM mc_connections")     # the library loaded
base_fds = fds(pid)
base = curr_connections(plain)
db.sql(c, "SELECT mc_set('k' || i, 'v', server => 'plain') FROM generate_series(1, 20) i")
db.sql(c, "SELECT * FROM mc_get_multi(ARRAY['k1', 'k2', 'k3'], 'plain')")
t.ok(settles(lambda: curr_connections(plain) == base + 1), "a call opens one connection")
rows = db.sql(c, "SELECT server, instance, in_use, requests > 0 FROM mc_connections")
t.is_(rows, [("plain", plain.addr, False, True)], "mc_connections lists it")
used_fds = fds(pid)
if base_fds is None:
    t.skip("the backend holds one more socket and its wait sets", "/proc/%d/fd not readable" % pid)
else:
    t.ok(used_fds["socket"] == base_fds["socket"] + 1 and
         used_fds["eventpoll"] > base_fds["eventpoll"],
         "the backend holds one more socket and its wait sets", base_fds, used_fds)

t.is_(db.value(c, "SELECT mc_disconnect('plain')"), True, "mc_disconnect: true")
t.ok(settles(lambda: curr_connections(plain) == base),
     "memcached's curr_connections drops back")
if base_fds is None:
    t.skip("every descriptor given back", "/proc/%d/fd not readable" % pid)
else:
    t.is_(fds(pid), base_fds, "every descriptor given back (socket and wait sets)")
t.is_(db.value(c, "SELECT count(*) FROM mc_connections"), 0, "none listed")
t.is_(db.value(c, "SELECT mc_disconnect('plain')"), False, "again: false")

t.is_(db.value(c, "SELECT mc_get('k1', server => 'plain')"), "v", "the next call reconnects")
t.ok(settles(lambda: curr_connections(plain) == base + 1), "with one connection")
t.is_(db.value(c, "SELECT mc_disconnect_all()"), True, "mc_disconnect_all: true")
t.ok(settles(lambda: curr_connections(plain) == base),
     "memcached's curr_connections drops back")
if base_fds is not None:
    t.is_(fds(pid), base_fds, "every descriptor given back")

# --- TLS ------------------------------------------------------------------
db.sql(c, "SELECT mc_set('t', 'v', server => 'secure')")
t.is_(db.sql(c, "SELECT server, tls FROM mc_connections"), [("secure", True)],
      "a TLS connection shows tls")
t.is_(db.value(c, "SELECT mc_disconnect_all()"), True, "and closes")

# --- user mappings and roles ---------------------------------------------
base = auth_conns()
for role in ROLES:
    db.sql(c, "SET ROLE %s" % role)
    db.sql(c, "SELECT mc_set('who', %s, server => 'auth')", (role,))
    db.sql(c, "RESET ROLE")
t.ok(settles(lambda: auth_conns() == base + 3), "three logins: alice's, bob's, PUBLIC's")
everything = db.sql(c, "SELECT * FROM mc_connections ORDER BY user_name")
t.is_([(r[0], r[2]) for r in everything],
      [("auth", "mcfdw_it_conn_alice"), ("auth", "mcfdw_it_conn_bob"), ("auth", "public")],
      "a superuser sees each, by the user mapping's user (PUBLIC's as public)")
t.ok("pw-" not in repr(everything), "no password in any column", everything)

db.sql(c, "SET ROLE mcfdw_it_conn_bob")
t.is_(db.sql(c, "SELECT server, user_name FROM mc_connections"),
      [("auth", "mcfdw_it_conn_bob")], "bob sees his own only")
t.is_(db.value(c, "SELECT mc_disconnect('auth')"), True, "and closes it")
t.is_(db.value(c, "SELECT mc_disconnect_all()"), False, "nothing more of his to close")
db.sql(c, "SET ROLE mcfdw_it_conn_carol")
t.is_(db.sql(c, "SELECT user_name FROM mc_connections"), [("public",)],
      "carol, without a mapping of her own, sees PUBLIC's")
db.sql(c, "RESET ROLE")
t.ok(settles(lambda: auth_conns() == base + 2), "bob's socket closed, the others open")
t.is_([r[0] for r in db.sql(c, "SELECT user_name FROM mc_connections ORDER BY 1")],
      ["mcfdw_it_conn_alice", "public"], "the superuser sees the other two")
t.is_(db.value(c, "SELECT mc_disconnect('auth')"), True, "and closes them")
t.ok(settles(lambda: auth_conns() == base), "every login closed")
c.close()

db.sql(setup, "DROP SERVER auth CASCADE")
for r in ROLES:
    db.sql(setup, "DROP ROLE %s" % r)
setup.close()
t.done()
