"""first_contact: what a user sees the first time mcfdw meets the wrong peer.

- A memcached that requires a login (-Y) and a role with no user mapping:
  every path (single-key read and write, multi-get, batch write, foreign
  table, stats) fails with 28000 naming the server and the instance, with a
  hint to create a user mapping; the instance is not marked dead for it.
- Peers that are not memcached 1.6 or later (an HTTP server answering
  "HTTP/1.1 400", a memcached before 1.6 answering "ERROR" to every meta
  command, a redis-like "-ERR"): the message quotes what answered (its first
  bytes, printable, bounded) and says memcached 1.6 or later is required;
  a password of the user mapping is never quoted.
- A commit whose queued writes go to a server that never answers honours
  pg_terminate_backend promptly (interrupts are held after commit).
"""

import threading
import time

import hostile
import mcdb
import mcrig
from tlsrig import path, start, write_file

t = mcrig.TAP()

write_file("fc_authfile", "alice:pw-alice\n")
auth = start(["-Y", path("fc_authfile")], tls=False)

db = mcdb.Database("mcfdw_it_first_contact")
c = db.connect()


def attempt(conn, query, args=None):
    """("ok", rows) or ("error", message | detail | hint, sqlstate)."""
    try:
        return ("ok", db.sql(conn, query, args))
    except Exception as e:      # psycopg2.Error
        d = getattr(e, "diag", None)
        text = " | ".join(x for x in (d and d.message_primary, d and d.message_detail,
                                      d and d.message_hint) if x)
        return ("error", text, getattr(e, "pgcode", None))


class Answering(hostile.LineServer):
    """A peer that is not memcached 1.6: each request line gets answer(line);
    None closes the connection after what was sent."""

    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    def _answer(self, c, line, lines):
        out = self.answer(line)
        if out is None:
            return False
        c.sendall(out)
        return True


def http(line):
    return (b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nContent-Type: text/html\r\n"
            b"Content-Length: 11\r\nConnection: close\r\n\r\nBad Request")


def old_memcached(line):
    # memcached 1.4/1.5: classic commands work, meta commands are unknown
    if line.startswith(b"set "):
        return b""              # its data line follows
    if line.startswith(b"stats"):
        return b"STAT pid 1\r\nEND\r\n"
    if line.startswith(b"pw-") or line.startswith(b"alice "):
        return b"STORED\r\n"
    return b"ERROR\r\n"


def redis(line):
    word = line.split(b" ", 1)[0]
    return b"-ERR unknown command '" + word + b"', with args beginning with: \r\n"


# ---- a memcached with -Y and a role without a user mapping ------------------
db.server(c, "needs_login", auth.addr, failure_limit=1, retry_delay=60,
          allow_full_scan="true")
db.sql(c, "CREATE FOREIGN TABLE fc_ft (key text, value text) SERVER needs_login")
db.sql(c, "CREATE FOREIGN TABLE fc_full (key text, value text) SERVER needs_login "
          "OPTIONS (allow_full_scan 'true')")
db.sql(c, "DROP ROLE IF EXISTS fc_app")
db.sql(c, "CREATE ROLE fc_app")
db.sql(c, "GRANT USAGE ON FOREIGN SERVER needs_login TO fc_app")
db.sql(c, "GRANT SELECT, INSERT ON fc_ft, fc_full TO fc_app")
db.sql(c, "GRANT USAGE ON SCHEMA public TO fc_app")

paths = [
    ("mc_get", "SELECT mc_get('k', server => 'needs_login')"),
    ("mc_set", "SELECT mc_set('k', 'v', server => 'needs_login')"),
    ("mc_delete", "SELECT mc_delete('k', server => 'needs_login')"),
    ("mc_get_multi", "SELECT * FROM mc_get_multi(ARRAY['a', 'b'], server => 'needs_login')"),
    ("mc_set_multi", "SELECT mc_set_multi(ARRAY['a'], ARRAY['1'], server => 'needs_login')"),
    ("mc_delete_multi", "SELECT mc_delete_multi(ARRAY['a'], server => 'needs_login')"),
    ("a foreign table scan", "SELECT * FROM fc_ft WHERE key = 'a'"),
    ("a foreign table INSERT", "INSERT INTO fc_ft VALUES ('a', '1')"),
    ("a full scan (lru_crawler metadump)", "SELECT count(*) FROM fc_full"),
]
u = db.connect()
db.sql(u, "SET ROLE fc_app")
for name, query in paths:
    r = attempt(u, query)
    t.ok(r[0] == "error" and r[2] == "28000" and '"needs_login"' in r[1] and auth.addr in r[1]
         and "CREATE USER MAPPING" in r[1] and 'role "fc_app"' in r[1],
         "%s on a server that requires a login, without a user mapping: 28000, the server, "
         "the instance, the role and a hint to CREATE USER MAPPING" % name, repr(r))
    if name == "mc_get":
        t.diag(r[1])
r = attempt(u, "SELECT error FROM mc_server_stats('needs_login')")
t.ok(r[0] == "ok" and "requires a login" in (r[1][0][0] or "") and 'role \"fc_app\"' in r[1][0][0],
     "mc_server_stats, a view: the row's error says the server requires a login", repr(r))
r = attempt(u, "SELECT mc_get('k', server => 'needs_login')")
t.ok(r[0] == "error" and r[2] == "28000",
     "the instance is not marked dead for it (failure_limit 1): the next call logs in again", repr(r))
r = attempt(u, "SELECT state, failures FROM mc_servers WHERE server = 'needs_login'")
t.ok(r[0] == "ok" and r[1][0][0] != "dead" and r[1][0][1] == 0,
     "mc_servers: the instance is not dead, no failure counted", repr(r))
# after commit (interrupts held, the catalog off limits): a WARNING that says so
del u.notices[:]
db.sql(u, "BEGIN")
db.sql(u, "SELECT mc_delete_on_commit('k', server => 'needs_login')")
db.sql(u, "COMMIT")
warned = [n for n in u.notices if "requires a login" in n]
lost = db.value(u, "SELECT lost FROM mc_invalidation_stats() WHERE server = 'needs_login'")
t.ok(warned and lost == 1, "an on-commit write to it: a WARNING saying the server requires a login, "
     "the write counted lost", repr((u.notices, lost)))
db.sql(c, "CREATE USER MAPPING FOR fc_app SERVER needs_login "
          "OPTIONS (username 'alice', password 'pw-alice')")
u.close()
u = db.connect()
db.sql(u, "SET ROLE fc_app")
r = attempt(u, "SELECT mc_set('k', 'v', server => 'needs_login'), mc_get('k', server => 'needs_login')")
t.is_(r, ("ok", [(True, "v")]), "with the user mapping created, the same server works at once")
u.close()

# ---- peers that are not memcached 1.6 or later -------------------------------
peers = [
    ("an HTTP server", http, "HTTP/1.1 400 Bad Request"),
    ("a memcached before 1.6", old_memcached, '"ERROR"'),
    ("a redis server", redis, "-ERR unknown command"),
]
wrong = [
    ("mc_get", "SELECT mc_get('k', server => 'peer')"),
    ("mc_set", "SELECT mc_set('k', 'v', server => 'peer')"),
    ("mc_get_multi", "SELECT * FROM mc_get_multi(ARRAY['a', 'b'], server => 'peer')"),
    ("mc_set_multi", "SELECT mc_set_multi(ARRAY['a'], ARRAY['1'], server => 'peer')"),
]
for what, answer, quoted in peers:
    peer = Answering(answer).start()
    db.server(c, "peer", peer.addr, failure_limit=100)
    for name, query in wrong:
        p = db.connect()
        r = attempt(p, query)
        p.close()
        t.ok(r[0] == "error" and r[2] == "08P01" and quoted in r[1] and
             "memcached 1.6 or later" in r[1] and peer.addr in r[1] and len(r[1]) < 700,
             "%s against %s: 08P01, what answered quoted and memcached 1.6 required" % (name, what),
             repr(r))
        if name == "mc_get":
            t.diag(r[1])
    # with a login: the password is never quoted, whatever the peer echoes
    db.sql(c, "CREATE USER MAPPING FOR CURRENT_USER SERVER peer "
              "OPTIONS (username 'alice', password 'pw-secret-fc')")
    p = db.connect()
    r = attempt(p, "SELECT mc_get('k', server => 'peer')")
    p.close()
    t.ok(r[0] == "error" and "pw-secret-fc" not in r[1],
         "%s behind a user mapping: an error, and the password in no message" % what, repr(r))
    db.sql(c, "DROP USER MAPPING FOR CURRENT_USER SERVER peer")
    peer.stop()

# a redis peer that echoes the request: the password is not quoted even then
echo = Answering(lambda line: b"-ERR unknown command '" + line + b"'\r\n").start()
db.server(c, "peer", echo.addr, failure_limit=100)
db.sql(c, "CREATE USER MAPPING FOR CURRENT_USER SERVER peer "
          "OPTIONS (username 'alice', password 'pw-secret-fc')")
p = db.connect()
r = attempt(p, "SELECT mc_get('k', server => 'peer')")
p.close()
t.ok(r[0] == "error" and "pw-secret-fc" not in r[1],
     "a peer echoing the login: the password in no message", repr(r))
echo.stop()
db.sql(c, "DROP USER MAPPING FOR CURRENT_USER SERVER peer")

# one that accepts the login, then answers with a piece of it: not quoted either
def replay():
    seen = {}

    def answer(line):
        if line.startswith(b"set "):
            return b""
        if line.startswith(b"alice "):
            seen["login"] = line
            return b"STORED\r\n"
        return b"-ERR " + seen.get("login", b"?")[8:] + b"\r\n"
    return answer


echo = Answering(replay()).start()
db.server(c, "peer", echo.addr, failure_limit=100)
db.sql(c, "CREATE USER MAPPING FOR CURRENT_USER SERVER peer "
          "OPTIONS (username 'alice', password 'pw-secret-fc')")
for name, query in wrong:
    p = db.connect()
    r = attempt(p, query)
    p.close()
    t.ok(r[0] == "error" and r[2] == "08P01" and "secret" not in r[1] and "-ERR" not in r[1],
         "%s against a peer replaying part of the login after accepting it: the password, "
         "whole or cut, in no message" % name, repr(r))
echo.stop()

# ---- a commit that waits for a server that never answers ---------------------
db.server(c, "hung", "127.0.0.1:%d" % mcrig.hang_port(), connect_timeout=5000, io_timeout=5000)
admin = db.connect()
w = db.connect(autocommit=False)
pid = w.get_backend_pid()
db.sql(w, "SELECT mc_delete_on_commit('fc:k', server => 'hung')")
done = {}


def commit():
    t0 = time.monotonic()
    try:
        w.commit()
        done["how"] = "committed"
    except Exception as e:      # noqa: BLE001
        done["how"] = "error: %s" % str(e).strip().splitlines()[0]
    done["t"] = time.monotonic() - t0


th = threading.Thread(target=commit, daemon=True)
th.start()
time.sleep(0.5)
t0 = time.monotonic()
db.sql(admin, "SELECT pg_terminate_backend(%s)", (pid,))
gone = None
while time.monotonic() - t0 < 15:
    if not db.value(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)):
        gone = time.monotonic() - t0
        break
    time.sleep(0.02)
th.join(10)
t.ok(gone is not None and gone < 1.0,
     "pg_terminate_backend during the post-commit wait for a hung server: the backend is gone "
     "within 1 s (it took %s s)" % (gone if gone is None else round(gone, 2)), repr(done))
w.close()
admin.close()

# a cancel during that wait gives the send up: the COMMIT succeeds at once, with a WARNING
w = db.connect(autocommit=False)
db.sql(w, "SELECT mc_delete_on_commit('fc:k', server => 'hung')")
done = {}
th = threading.Thread(target=commit, daemon=True)
th.start()
time.sleep(0.5)
t0 = time.monotonic()
w.cancel()
th.join(15)
took = time.monotonic() - t0
warned = [n for n in w.notices if "given up: the statement was canceled" in n]
w.autocommit = True
lost = db.value(w, "SELECT lost FROM mc_invalidation_stats() WHERE server = 'hung'")
t.ok(done.get("how") == "committed" and took < 1.0 and warned and lost == 1,
     "a cancel during the post-commit wait: COMMIT returns within 1 s, successfully, with a "
     "WARNING; the write counted lost", repr((done, round(took, 2), w.notices, lost)))
w.close()

# the same commit, not interrupted, still waits out its bound and warns
db.server(c, "hung_short", "127.0.0.1:%d" % mcrig.hang_port(), io_timeout=1500)
w = db.connect()
t0 = time.monotonic()
db.sql(w, "SELECT mc_delete_on_commit('fc:k', server => 'hung_short')")
elapsed = time.monotonic() - t0
r = db.value(w, "SELECT lost FROM mc_invalidation_stats() WHERE server = 'hung_short'")
t.ok(r == 1 and elapsed > 1.0,
     "without an interrupt the post-commit send waits out its bound, counted lost",
     repr((r, elapsed)))
w.close()

c.close()
t.done()
