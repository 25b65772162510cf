"""robust_tls: TLS and ASCII authentication against hostile servers.

- A TLS server that misbehaves after a good handshake (an endless value, a
  value over the limit, a record trickled a byte per 100 ms, half a record
  then silence, close_notify or a reset mid-reply, bytes that are not TLS,
  an alert mid-reply): each call ends in bounded time with an errcode and
  the instance in the detail, the connection is discarded, and the next
  call makes a new connection that reads the right value.  A handshake
  trickled a byte at a time ends at connect_timeout.
- Cancel and statement_timeout reach mc_get, a multi-get over four TLS
  instances and a batch write stalled mid-record, within about a second.
- A TLS server that packs several replies into one record (and one reply
  across records), all in one write: a pipelined multi-get reads what
  OpenSSL holds without waiting on the socket.
- Login: user names and passwords that could inject a command are refused
  or arrive exactly as sent; a server that answers the login with anything
  but STORED gives a login or connection error that never shows the
  password (message, detail, hint, the server log, mc_servers, EXPLAIN).
- Privileges: a role that may create servers cannot name TLS files; no
  mcfdw view or function shows another role's password.
"""

import os
import re
import socket
import threading
import time

import mcdb
import mcrig
from hostile import run_bounded
from tlsrig import TlsHostile, path

t = mcrig.TAP()
db = mcdb.Database("mcfdw_it_robust_tls")
admin = db.connect()
upstream = mcrig.start_memcached()
PGLOG = os.path.join(os.environ.get("MCFDW_RIG", ""), "log", "postgres.log")


def log_size():
    try:
        return os.path.getsize(PGLOG)
    except OSError:
        return 0


def log_since(offset):
    try:
        with open(PGLOG, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


def connections(conn, server):
    """Connections conn's backend made to server (mc_servers is per backend)."""
    return db.value(conn, "SELECT coalesce(sum(connections), 0) FROM mc_servers "
                           "WHERE server = %s", (server,))


VALUE = "good value " * 10
mcrig.mc_command(upstream.port, b"set rt:k 0 0 %d\r\n%s" % (len(VALUE), VALUE.encode()),
                 end=(b"STORED\r\n",))

# ---- 1. hostile TLS servers after a good handshake ---------------------------
hs = TlsHostile(upstream.port).start()
db.server(admin, "h", hs.addr, tls="verify-full", tls_ca_file=path("ca.crt"),
          io_timeout="500ms", failure_limit="100")
c = db.connect()
t.is_(db.value(c, "SELECT mc_get('rt:k', server => 'h')"), VALUE,
      "through the relay, a good TLS server: the value")
CASES = (
    ("endless_body", ("08P01", "54000"), "a 4 MB value followed by endless bytes"),
    ("huge_value", ("54000",), "a value of 1 GB announced"),
    ("trickle", ("08006",), "a record trickled a byte per 100 ms"),
    ("split_stall", ("08006",), "half a record, then silence"),
    ("close_notify", ("08006",), "close_notify mid-reply"),
    ("abrupt", ("08006",), "a reset mid-reply"),
    ("garbage", ("08006", "08P01"), "bytes that are not TLS after the handshake"),
    ("alert", ("08006", "08P01"), "an alert record mid-reply"),
)
for behaviour, codes, what in CASES:
    for fn, sql in (("mc_get", "SELECT mc_get('rt:k', server => 'h')"),
                    ("mc_get_multi", "SELECT key, value FROM mc_get_multi(ARRAY['rt:k', 'rt:x'], 'h')")):
        before = connections(c, "h")
        addr = hs.addr
        hs.behaviour = behaviour
        o = run_bounded(c, sql, bound=8, way_out=hs.stop, admin=admin)
        hs.behaviour = "good"
        if hs._stop:        # the way out was needed: a fresh server for what follows
            hs = TlsHostile(upstream.port).start()
            db.server(admin, "h", hs.addr, tls="verify-full", tls_ca_file=path("ca.crt"),
                      io_timeout="500ms", failure_limit="100")
        t.ok(not o.overran and o.elapsed < 4 and o.pgcode in codes and o.rows is None
             and addr in (o.detail or ""),
             "%s, %s: %s in %.2f s, the instance in the detail"
             % (fn, what, o.pgcode, o.elapsed or -1), repr(o))
        mid = connections(c, "h")
        o = run_bounded(c, sql, bound=8, admin=admin)
        want = [(VALUE,)] if fn == "mc_get" else [("rt:k", VALUE)]
        t.ok(o.rows == want and connections(c, "h") == mid + 1,
             "%s, %s: the next call makes a new connection and reads the value" % (fn, what),
             repr(o), "connections %d, %d, %d" % (before, mid, connections(c, "h")))
c.close()

# a reconnect offers the session the server handed out before: the server
# sees a resumed handshake (no certificate exchange)
hr = TlsHostile(upstream.port).start()
db.server(admin, "hr", hr.addr, tls="verify-full", tls_ca_file=path("ca.crt"))
c = db.connect()
first = db.value(c, "SELECT mc_get('rt:k', server => 'hr')")
hr.drop_all()               # the server closes the pooled connection
time.sleep(0.2)
second = db.value(c, "SELECT mc_get('rt:k', server => 'hr')")
t.ok(first == VALUE and second == VALUE and hr.resumed == [False, True],
     "a reconnect resumes the TLS session of the connection before",
     repr((first == VALUE, second == VALUE, hr.resumed)))
c.close()
hr.stop()

# a handshake trickled a byte per 100 ms: connect_timeout bounds it, though
# every wait ends with a byte
hs.behaviour = "trickle_handshake"
db.server(admin, "h", hs.addr, tls="require", io_timeout="500ms", connect_timeout="1s",
          failure_limit="100")
c = db.connect()
o = run_bounded(c, "SELECT mc_get('rt:k', server => 'h')", bound=8, way_out=hs.stop, admin=admin)
t.ok(not o.overran and o.elapsed < 2.5 and o.pgcode == "08001" and "timed out after 1000 ms" in (o.detail or ""),
     "a handshake trickled a byte per 100 ms: connect_timeout 1 s ends it (%.2f s)" % (o.elapsed or -1),
     repr(o))
c.close()
hs.stop()

# ---- 2. cancel and statement_timeout mid-record -------------------------------
stall = [TlsHostile(upstream.port, "split_stall").start() for _ in range(4)]
db.server(admin, "st1", stall[0].addr, tls="require", io_timeout="0", connect_timeout="2s")
db.server(admin, "st4", ",".join(s.addr for s in stall), tls="require", io_timeout="0",
          connect_timeout="2s")
keys = ["st:%d" % i for i in range(200)]
CALLS = (
    ("mc_get", "SELECT mc_get('st:1', server => 'st1')", None, [(None,)]),
    ("mc_get_multi over four instances", "SELECT count(*) FROM mc_get_multi(%s::text[], 'st4')",
     (keys,), [(0,)]),
    ("mc_set_multi over four instances",
     "SELECT mc_set_multi(%s::text[], %s::text[], server => 'st4')", (keys, keys), [(200,)]),
    ("mc_get_multi over four instances", "SELECT count(*) FROM mc_get_multi(%s::text[], 'st4') "
     "WHERE key = value", (keys,), [(200,)]),
)
for name, sql, args, good in CALLS:
    for s in stall:
        s.behaviour = "split_stall"
    c = db.connect()
    pid = c.get_backend_pid()
    fired = []

    def cancel_at(elapsed):
        if not fired and elapsed > 0.7:
            fired.append(elapsed)
            db.sql(admin, "SELECT pg_cancel_backend(%s)", (pid,))
        return False

    o = run_bounded(c, sql, args, bound=8, way_out=lambda: [s.stop() for s in stall],
                    admin=admin, during=cancel_at)
    late = (o.elapsed or 99) - (fired[0] if fired else 0)
    t.ok(not o.overran and o.pgcode == "57014" and fired and late < 1.2,
         "%s stalled mid-record: a cancel ends it %.2f s later" % (name, late), repr(o))
    db.sql(c, "SET statement_timeout = '700ms'")
    o = run_bounded(c, sql, args, bound=8, way_out=lambda: [s.stop() for s in stall], admin=admin)
    t.ok(not o.overran and o.pgcode == "57014" and o.elapsed < 1.9,
         "%s stalled mid-record: statement_timeout 700 ms ends it in %.2f s" % (name, o.elapsed),
         repr(o))
    for s in stall:
        s.behaviour = "good"
    o = run_bounded(c, sql, args, bound=8, admin=admin)
    t.ok(o.rows == good, "%s: the interrupted connections are not reused: %r" % (name, o.rows), repr(o))
    c.close()
for s in stall:
    s.stop()

# ---- 3. several replies in one record, a reply across records ------------------
ups = [mcrig.start_memcached() for _ in range(2)]
for u in ups:        # every key in both: whichever instance the ring picks has it
    for i in range(300):
        v = b"v%d-" % i * (1 + i % 7)
        mcrig.mc_command(u.port, b"set sp:%d 0 0 %d\r\n%s" % (i, len(v), v), end=(b"STORED\r\n",))
want = {"sp:%d" % i: "v%d-" % i * (1 + i % 7) for i in range(300)}
for record in (16384, 61, 7):
    co = [TlsHostile(u.port, "coalesce", record=record).start() for u in ups]
    db.server(admin, "co", ",".join(x.addr for x in co), tls="require", io_timeout="3s",
              failure_limit="100")
    c = db.connect()
    o = run_bounded(c, "SELECT key, value FROM mc_get_multi(%s::text[], 'co')",
                    (sorted(want) + ["sp:missing"],), bound=20, admin=admin)
    got = dict(o.rows or [])
    wrong = [k for k, v in got.items() if want.get(k) != v]
    t.ok(o.rows is not None and not wrong and len(got) == 300 and o.elapsed < 2.5,
         "records of %d bytes, each write holding many: a multi-get reads %d values, none "
         "wrong, in %.2f s (io_timeout 3 s)" % (record, len(got), o.elapsed), repr(o)[:300], wrong[:5])
    o = run_bounded(c, "SELECT count(*) FROM generate_series(1, 50) i, "
                       "LATERAL mc_get('sp:' || i, server => 'co') g WHERE g IS NOT NULL",
                    bound=20, admin=admin)
    # each reply waits for the relay's 50 ms pause
    t.ok(o.rows == [(50,)] and o.elapsed < 8,
         "records of %d bytes: 50 single gets, all hits, in %.2f s" % (record, o.elapsed), repr(o))
    c.close()
    for x in co:
        x.stop()


# ---- 4. the login: what goes on the wire, and answers other than STORED --------
class LoginServer:
    """A plaintext fake memcached -Y: it reads the login (a set whose data is
    "user password") into `logins`, then answers it as `mode` says:

      stored        STORED, then every request a miss (EN)
      error         ERROR
      client_error  CLIENT_ERROR bad command line format
      echo          CLIENT_ERROR quoting the data it got (the password)
      garbage       binary bytes and the password, then a line end
      endless       a line that never ends
      close         no answer: the connection closed
      stall         no answer: silence
    """

    def __init__(self, mode):
        self.mode = mode
        self.logins = []
        self._l = socket.socket()
        self._l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._l.bind((mcrig.HOST, 0))
        self._l.listen(16)
        self.port = self._l.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def addr(self):
        return "%s:%d" % (mcrig.HOST, self.port)

    def stop(self):
        self._stop = True
        self._l.close()

    def _accept(self):
        while not self._stop:
            try:
                c, _ = self._l.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            c.settimeout(10)
            buf = b""
            while b"\r\n" not in buf:
                d = c.recv(4096)
                if not d:
                    return
                buf += d
            m = re.match(rb"set \S+ \d+ -?\d+ (\d+)\r\n", buf)
            total = m.end() + int(m.group(1)) + 2 if m else len(buf)
            while len(buf) < total:
                d = c.recv(4096)
                if not d:
                    break
                buf += d
            self.logins.append(buf[:total])
            data = buf[m.end():total - 2] if m else buf
            rest = buf[total:]
            mode = self.mode
            if mode == "stored":
                c.sendall(b"STORED\r\n")
                while not self._stop:
                    while b"\r\n" in rest:
                        line, rest = rest.split(b"\r\n", 1)
                        op = [w for w in line.split() if w.startswith(b"O")]
                        c.sendall(b"EN" + (b" " + op[0] if op else b"") + b"\r\n")
                    d = c.recv(4096)
                    if not d:
                        return
                    rest += d
            elif mode == "error":
                c.sendall(b"ERROR\r\n")
            elif mode == "client_error":
                c.sendall(b"CLIENT_ERROR bad command line format\r\n")
            elif mode == "echo":
                c.sendall(b"CLIENT_ERROR bad data chunk " + data + b"\r\n")
            elif mode == "garbage":
                c.sendall(b"\x00\xff\xfe\x1b[2J" + data + b"\xc3\x28\r\n")
            elif mode == "endless":
                while not self._stop:
                    c.sendall(b"A" * 65536)
            elif mode == "stall":
                while not self._stop:
                    time.sleep(0.05)
            if mode != "close":
                time.sleep(0.5)
        except OSError:
            return
        finally:
            c.close()


PW = "Pw-Secret-4242:with'punctuation\"!"
USER = "robust_user"
for stmt in ("DROP ROLE IF EXISTS rt_alice", "DROP ROLE IF EXISTS rt_bob",
             "DROP ROLE IF EXISTS rt_admin", "CREATE ROLE rt_alice", "CREATE ROLE rt_bob",
             "CREATE ROLE rt_admin"):
    db.sql(admin, stmt)


def mapping(server, role="rt_alice", user=USER, password=PW):
    db.sql(admin, 'GRANT USAGE ON FOREIGN SERVER "%s" TO rt_alice, rt_bob' % server)
    db.sql(admin, 'DROP USER MAPPING IF EXISTS FOR %s SERVER "%s"' % (role, server))
    db.sql(admin, 'CREATE USER MAPPING FOR %s SERVER "%s" OPTIONS (username %%s, password %%s)'
           % (role, server), (user, password))


def as_role(role, sql, args=None, bound=8):
    c = db.connect()
    db.sql(c, "SET ROLE " + role)
    o = run_bounded(c, sql, args, bound=bound, admin=admin)
    c.close()
    return o


def text_of(o):
    return "%s %s" % (o.error, o.detail)


# values the validator must refuse, and the message must not quote
BAD_USERS = ("a b", "a\rb", "a\nb", "a\x01b", "a:b", "a\x7fb", "u" * 251)
BAD_PASSWORDS = ("p\rset x 0 0 1", "p\nflush_all", "p\x01q", "p\x1bq", "p\x7fq", "P" * 251,
                 # memcached splits the login at spaces: it could never accept these
                 "Pw-Secret-4242 with spaces", " leading and trailing ")
db.server(admin, "inj", "127.0.0.1:1")
for u in BAD_USERS:
    try:
        mapping("inj", user=u)
        r = "accepted"
    except Exception as e:      # psycopg2.Error
        r = e.pgcode
    t.ok(r == "HV024", "user name %r: refused by the validator (HV024)" % u[:20], r)
for pw in BAD_PASSWORDS:
    try:
        mapping("inj", password=pw)
        r, text = "accepted", ""
    except Exception as e:      # psycopg2.Error
        r, text = e.pgcode, str(e)
    t.ok(r == "HV024" and pw not in text and pw[1:] not in text,
         "password %r: refused by the validator (HV024), not quoted" % pw[:20], r, text)

ok_server = LoginServer("stored")
db.server(admin, "login", ok_server.addr, failure_limit="100")
for pw in (PW, "x" * 250, "quote'\"\\and%s%n"):
    mapping("login", password=pw)
    del ok_server.logins[:]
    o = as_role("rt_alice", "SELECT mc_get('k', server => 'login')")
    data = ("%s %s" % (USER, pw)).encode()
    want = b"set mcfdw:auth 0 -1 %d\r\n%s\r\n" % (len(data), data)
    t.ok(o.rows == [(None,)] and ok_server.logins == [want],
         "password %r: the login is exactly one set of %d bytes" % (pw[:20], len(data)),
         repr(o), repr(ok_server.logins))
mapping("login")

log_from = log_size()
# what the detail says of the answer: its first word, never what follows
SAYS = {"error": 'answered "ERROR"', "client_error": 'answered "CLIENT_ERROR"',
        "echo": 'answered "CLIENT_ERROR"', "garbage": "not a memcached reply",
        "endless": "not a memcached reply", "close": "closed the connection",
        "stall": "timed out"}
for mode in ("error", "client_error", "echo", "garbage", "endless", "close", "stall"):
    ls = LoginServer(mode)
    db.sql(admin, "DROP SERVER IF EXISTS bad CASCADE")
    db.server(admin, "bad", ls.addr, failure_limit="100", io_timeout="500ms",
              connect_timeout="1s")
    mapping("bad")
    c = db.connect()
    db.sql(c, "SET ROLE rt_alice")
    o = run_bounded(c, "SELECT mc_get('k', server => 'bad')", bound=8, admin=admin)
    t.ok(not o.overran and o.elapsed < 3 and o.rows is None and o.pgcode is not None and
         (o.pgcode in ("28P01", "28000") or o.pgcode.startswith("08")) and
         ls.addr in text_of(o) and PW not in text_of(o) and "Secret" not in text_of(o) and
         SAYS[mode] in text_of(o),
         "a login answered %s: %s in %.2f s, the instance named, '%s', no password"
         % (mode, o.pgcode, o.elapsed or -1, SAYS[mode]), repr(o))
    o = run_bounded(c, "SELECT string_agg(concat_ws(' ', s.*), ' ') FROM mc_servers s "
                       "WHERE server = 'bad'", bound=8, admin=admin)
    t.ok(o.rows and o.rows[0][0] and "Secret" not in o.rows[0][0],
         "a login answered %s: mc_servers shows the failure, no password" % mode, repr(o))
    c.close()
    ls.stop()

# what other sessions see while a login is under way
ls = LoginServer("stall")
db.sql(admin, "DROP SERVER IF EXISTS bad CASCADE")
db.server(admin, "bad", ls.addr, failure_limit="100", io_timeout="0", connect_timeout="0")
mapping("bad")
seen = []


def watch(elapsed):
    if elapsed > 0.5 and not seen:
        seen.append(db.value(admin, "SELECT string_agg(concat_ws(' ', a.*), ' ') FROM pg_stat_activity a"))
        return True
    return False


c = db.connect()
db.sql(c, "SET ROLE rt_alice")
o = run_bounded(c, "SELECT mc_get('k', server => 'bad')", bound=8, admin=admin, during=watch,
                way_out=lambda: db.sql(admin, "SELECT pg_cancel_backend(%s)", (c.get_backend_pid(),)))
t.ok(seen and "mc_get" in seen[0] and "Secret" not in seen[0],
     "pg_stat_activity during a login shows the query, not the password", repr(seen)[:300])
c.close()
ls.stop()

t.ok(PW.encode() not in log_since(log_from) and b"Secret" not in log_since(log_from),
     "the server log since the logins began holds no password")

# ---- 5. privileges -----------------------------------------------------------------
db.sql(admin, "GRANT USAGE ON FOREIGN DATA WRAPPER mcfdw TO rt_admin")
for opts in ("tls 'require', tls_ca_file '%s'" % path("ca.crt"),
             "tls 'require', tls_cert_file '%s', tls_key_file '%s'" % (path("client.crt"), path("client.key")),
             "tls 'require', tls_key_file '/etc/shadow', tls_cert_file '/etc/passwd'"):
    o = as_role("rt_admin", "CREATE SERVER rt_s FOREIGN DATA WRAPPER mcfdw OPTIONS (%s)" % opts)
    t.is_(o.pgcode, "42501", "a role that may create servers: CREATE SERVER (%s) is 42501" % opts[:40])
o = as_role("rt_admin", "CREATE SERVER rt_own FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'require')")
t.is_(o.pgcode, None, "... it may create one with tls 'require'")
o = as_role("rt_admin", "ALTER SERVER rt_own OPTIONS (ADD tls_ca_file '/etc/passwd')")
t.is_(o.pgcode, "42501", "... nor ADD tls_ca_file to its own server")
for opt in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
    o = as_role("rt_admin", "CREATE USER MAPPING FOR rt_admin SERVER rt_own OPTIONS (%s '/etc/passwd')" % opt)
    t.is_(o.pgcode, "HV00D", "... nor set %s in a user mapping (not an option there)" % opt)
db.server(admin, "rt_given", "127.0.0.1:1", tls="verify-full", tls_ca_file=path("ca.crt"))
db.sql(admin, "ALTER SERVER rt_given OWNER TO rt_admin")
o = as_role("rt_admin", "ALTER SERVER rt_given OPTIONS (SET tls_ca_file '/etc/passwd')")
t.is_(o.pgcode, "42501", "a non-superuser owner of a server with tls_ca_file cannot change it")
db.sql(admin, "DROP SERVER rt_given")

# another role's password: no mcfdw view or function shows it
plainauth = "plainauth"
db.server(admin, plainauth, upstream.addr)
mapping(plainauth)
o = as_role("rt_alice", "SELECT mc_set('pa', 'x', server => 'plainauth')")
t.is_(o.rows, [(True,)], "alice logs in to a memcached without -Y (it stores nothing of the login)")
# EXPLAIN VERBOSE of a foreign-table query on a server with a login
db.sql(admin, "CREATE FOREIGN TABLE rt_ft (key text, value text) SERVER plainauth")
db.sql(admin, "GRANT SELECT ON rt_ft TO rt_alice")
for q in ("SELECT * FROM rt_ft WHERE key = 'a'", "SELECT * FROM rt_ft WHERE key IN ('a', 'b')"):
    o = as_role("rt_alice", "EXPLAIN (VERBOSE, ANALYZE, COSTS OFF) " + q)
    text = "\n".join(r[0] for r in o.rows or [])
    t.ok(o.rows and "Memcached" in text and "Secret" not in text,
         "EXPLAIN VERBOSE ANALYZE %s: no password" % q, text, repr(o))
probes = [
    "SELECT coalesce(string_agg(concat_ws(' ', s.*), ' '), '') FROM mc_servers s",
    "SELECT coalesce(string_agg(concat_ws(' ', s.*), ' '), '') FROM mc_server_stats s",
    "SELECT coalesce(string_agg(concat_ws(' ', s.*), ' '), '') FROM mc_stats s",
    "SELECT coalesce(string_agg(concat_ws(' ', s.*), ' '), '') FROM mc_counters s",
    "SELECT coalesce(mc_get('mcfdw:auth', 'plainauth'), '') || coalesce(mc_get('mcfdw:auth', 'login'), '')",
    "SELECT coalesce(string_agg(concat_ws(' ', umoptions), ' '), '') FROM pg_user_mappings",
]
for role in ("rt_bob", "rt_alice"):
    # pg_user_mappings shows a role its own mapping: PostgreSQL's rule
    for q in probes if role == "rt_bob" else probes[:-1]:
        o = as_role(role, q)
        got = repr(o.rows) + text_of(o)
        t.ok("Secret" not in got and not o.overran,
             "%s: %s shows no password of rt_alice" % (role, q.split("FROM ")[-1][:40]), got[:300])
raw = mcrig.mc_command(upstream.port, b"mg mcfdw:auth v", end=(b"\r\n",))
t.is_(raw, b"EN\r\n", "memcached without -Y holds no item of the login")

admin.close()
t.done()
