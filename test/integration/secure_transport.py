"""secure_transport: TLS (memcached -Z) and ASCII authentication (-Y).

The certificates come from tlsrig (a CA, a server certificate for
localhost/127.0.0.1, an expired one, a client certificate, and a second CA
that signed nothing).  Private memcacheds: four TLS ones, one
that requires client certificates, one with the expired certificate, a
plaintext one, one with an auth file and one with TLS and an auth file.
"""

import os
import socket
import subprocess
import threading
import time

import mcdb
import mcrig
from faultproxy import FaultProxy
from tlsrig import path, start, tls_args, write_file

t = mcrig.TAP()
HERE = os.path.dirname(os.path.abspath(__file__))
RUBY = os.environ.get("MCFDW_RUBY", "ruby")

write_file("authfile", "alice:pw-alice\nbob:pw-bob\n")
tls4 = [start(tls_args()) for _ in range(4)]
mtls = start(tls_args("server.crt", "ssl_ca_cert=" + path("ca.crt"), "ssl_verify_mode=2"))
expired = start(tls_args("expired.crt"))
plain = mcrig.start_memcached()
auth = start(["-Y", path("authfile")], tls=False)
tlsauth = start(["-Y", path("authfile")] + tls_args())
time.sleep(1.1)             # expired.crt's not-after is now in the past

db = mcdb.Database("mcfdw_it_secure")
c = db.connect()


def attempt(conn, query, args=None):
    """("ok", rows) or ("error", message + detail + hint, sqlstate)."""
    try:
        return ("ok", db.sql(conn, query, args))
    except Exception as e:      # psycopg2.Error
        d = getattr(e, "diag", None)
        text = " | ".join(x for x in (str(e).strip(), d and d.message_hint) if x)
        return ("error", text, getattr(e, "pgcode", None))


def roundtrip(conn, server, key="k"):
    r = attempt(conn, "SELECT mc_set(%s, 'v-' || %s, server => %s), mc_get(%s, server => %s)",
                (key, key, server, key, server))
    return r if r[0] != "ok" else ("ok", r[1][0])


# ---- modes against the right and the wrong CA -------------------------------
a0 = tls4[0].addr
db.server(c, "full", a0, tls="verify-full", tls_ca_file=path("ca.crt"))
t.is_(roundtrip(c, "full"), ("ok", (True, "v-k")), "verify-full with the right CA: set and get")
db.server(c, "full_name", a0, tls="verify-full", tls_ca_file=path("ca.crt"), tls_server_name="localhost")
t.is_(roundtrip(c, "full_name")[0], "ok", "verify-full with tls_server_name 'localhost' (a DNS name of the certificate)")
db.server(c, "ca", a0, tls="verify-ca", tls_ca_file=path("ca.crt"), tls_server_name="wrong.example")
t.is_(roundtrip(c, "ca")[0], "ok", "verify-ca with the right CA ignores the host name")
db.server(c, "req", a0, tls="require", tls_ca_file=path("other.crt"))
t.is_(roundtrip(c, "req")[0], "ok", "require does not verify: the wrong CA is no obstacle")
for mode in ("verify-ca", "verify-full"):
    db.server(c, "wrongca", a0, tls=mode, tls_ca_file=path("other.crt"), failure_limit=100)
    r = roundtrip(c, "wrongca")
    t.ok(r[0] == "error" and r[2] == "08001" and "certificate verify failed" in r[1]
         and tls4[0].addr in r[1],
         "%s with the wrong CA: 08001, certificate verify failed, the instance named" % mode, repr(r))
db.server(c, "badname", a0, tls="verify-full", tls_ca_file=path("ca.crt"),
          tls_server_name="wrong.example", failure_limit=100)
r = roundtrip(c, "badname")
t.ok(r[0] == "error" and r[2] == "08001" and
     'does not match host name "wrong.example"' in r[1],
     "verify-full with a wrong host name: a host name mismatch", repr(r))
db.server(c, "exp", expired.addr, tls="verify-full", tls_ca_file=path("ca.crt"), failure_limit=100)
r = roundtrip(c, "exp")
t.ok(r[0] == "error" and r[2] == "08001" and "certificate has expired" in r[1],
     "an expired certificate: certificate verify failed with OpenSSL's reason", repr(r))

# ---- plaintext/TLS mismatches -----------------------------------------------
db.server(c, "tls_to_plain", plain.addr, tls="require", connect_timeout="500ms", failure_limit=100)
r = roundtrip(c, "tls_to_plain")
t.ok(r[0] == "error" and r[2] == "08001" and "TLS handshake" in r[1] and "plaintext" in r[1],
     "TLS against a plaintext server: the handshake fails and the message asks whether it is plaintext",
     repr(r))
db.server(c, "plain_to_tls", a0, failure_limit=100)
r = roundtrip(c, "plain_to_tls")
t.ok(r[0] == "error" and r[2] == "08006" and 'server option "tls"' in r[1],
     "plaintext against a TLS server: the reset hints at the tls option", repr(r))

# ---- client certificates ------------------------------------------------------
db.server(c, "mtls_no", mtls.addr, tls="verify-full", tls_ca_file=path("ca.crt"), failure_limit=100)
r = roundtrip(c, "mtls_no")
t.ok(r[0] == "error", "a server requiring client certificates refuses a client without one", repr(r))
db.server(c, "mtls", mtls.addr, tls="verify-full", tls_ca_file=path("ca.crt"),
          tls_cert_file=path("client.crt"), tls_key_file=path("client.key"))
t.is_(roundtrip(c, "mtls"), ("ok", (True, "v-k")), "... and serves one with tls_cert_file and tls_key_file")
db.server(c, "badkey", mtls.addr, tls="require", tls_cert_file=path("client.crt"),
          tls_key_file=path("nonexistent.key"))
r = roundtrip(c, "badkey")
t.ok(r[0] == "error" and r[2] == "F0000" and "nonexistent.key" in r[1]
     and "No such file" in r[1],
     "an unreadable key file is a configuration error that names the file", repr(r))

# ---- a stalled handshake: timeout and cancel ----------------------------------
hang = "127.0.0.1:%d" % mcrig.hang_port()
db.server(c, "hang_t", hang, tls="require", connect_timeout="300ms", failure_limit=100)
t0 = time.time()
r = roundtrip(c, "hang_t")
el = time.time() - t0
t.ok(r[0] == "error" and r[2] == "08001" and "timed out after 300 ms" in r[1]
     and "TLS handshake" in r[1] and el < 2.0,
     "a stalled handshake times out with connect_timeout (%.2fs)" % el, repr(r))
db.server(c, "hang_n", hang, tls="require", connect_timeout="0", io_timeout="0")
db.sql(c, "SET statement_timeout = '300ms'")
t0 = time.time()
r = roundtrip(c, "hang_n")
el = time.time() - t0
t.ok(r[0] == "error" and r[2] == "57014" and el < 2.0,
     "statement_timeout ends a stalled handshake (%.2fs)" % el, repr(r))
db.sql(c, "RESET statement_timeout")
pid = db.value(c, "SELECT pg_backend_pid()")
killer = db.connect()


def cancel_soon():
    time.sleep(0.3)
    db.sql(killer, "SELECT pg_cancel_backend(%s)", (pid,))


th = threading.Thread(target=cancel_soon)
th.start()
t0 = time.time()
r = attempt(c, "SELECT count(*) FROM mc_get_multi(ARRAY['a', 'b'], 'hang_n')")
el = time.time() - t0
th.join()
t.ok(r[0] == "error" and r[2] == "57014" and el < 2.0,
     "a cancel ends a multi-get stalled in the handshake (%.2fs)" % el, repr(r))
t.is_(roundtrip(c, "full"), ("ok", (True, "v-k")), "the session goes on after the cancel")

# ---- 10,000 keys over four TLS instances ------------------------------------
# io_timeout well above the default: what this part checks is the values
# and the handshakes, and a loaded machine has stalled a 10,000-key TLS
# pipeline past 1 s
db.server(c, "four", ",".join(m.addr for m in tls4), tls="verify-full", tls_ca_file=path("ca.crt"),
          io_timeout="10s")
n = db.value(c, "SELECT count(*) FILTER (WHERE mc_set('mk' || i, repeat(md5(i::text), 1 + i % 20), server => 'four')) "
                "FROM generate_series(1, 10000) i")
t.is_(n, 10000, "10,000 sets over TLS")
good = db.value(c, """
    SELECT count(*) FROM mc_get_multi((SELECT array_agg('mk' || i) FROM generate_series(1, 10000) i), 'four') g
    WHERE g.value = repeat(md5(substr(g.key, 3)), 1 + substr(g.key, 3)::int % 20)""")
t.is_(good, 10000, "a 10,000-key multi-get over four TLS instances returns every value intact")
spread = db.sql(c, "SELECT count(*) FROM mc_servers WHERE server = 'four' AND requests > 0")
t.is_(spread[0][0], 4, "the keys went to all four instances")
# the pipelined write engine over TLS: 10,000 keys in one call (every
# 500th value 30 kB, larger than a segment), then read back
BW_VALUE = "repeat(md5(%s::text), CASE WHEN %s %% 500 = 0 THEN 960 ELSE 1 + %s %% 40 END)"
n = db.value(c, """
    SELECT mc_set_multi(array_agg('bw' || i), array_agg(%s), server => 'four')
    FROM generate_series(1, 10000) i""" % (BW_VALUE % ("i", "i", "i")))
t.is_(n, 10000, "mc_set_multi stores 10,000 keys over four TLS instances")
k = "substr(g.key, 3)::int"
good = db.value(c, """
    SELECT count(*) FROM mc_get_multi((SELECT array_agg('bw' || i) FROM generate_series(1, 10000) i), 'four') g
    WHERE g.value = %s""" % (BW_VALUE % (k, k, k)))
t.is_(good, 10000, "... and every value reads back intact")
n = db.value(c, "SELECT mc_delete_multi((SELECT array_agg('bw' || i) FROM generate_series(1, 10000) i), 'four')")
t.is_(n, 10000, "mc_delete_multi deletes them over TLS")


def connects(server):
    return db.value(c, "SELECT sum(connections) FROM mc_servers WHERE server = %s", (server,))


before = connects("four")
db.sql(c, "SELECT count(*) FILTER (WHERE mc_get('mk' || (i % 10000 + 1), server => 'four') IS NOT NULL) "
          "FROM generate_series(1, 10000) i")
db.sql(c, "SELECT count(*) FROM mc_get_multi((SELECT array_agg('mk' || i) FROM generate_series(1, 100) i), 'four')")
t.is_(connects("four") - before, 0, "10,000 gets and a multi-get after warm-up make no new handshake")

# ---- cold calls: the connects of all instances proceed together -----------------
# A proxy in front of each instance holds the first bytes of the server's
# answer (the handshake's, or the login's) HOLD seconds, on all four
# connections at once: a cold pipelined call waits for one such hold, not
# one per instance in turn (4 x 300 ms = 1.2 s).  connect_timeout is
# generous, so waiting in turn would be slow, not an error.
HOLD = 0.3
# 40 keys: every instance gets some, wherever the proxies' ports put them
COLD_KEYS = ["cold%d" % i for i in range(40)]
COLD_ROWS = [(k, "v-" + k) for k in sorted(COLD_KEYS)]


def held(memcacheds):
    pxs = [FaultProxy(m.port).start() for m in memcacheds]
    for px in pxs:
        px.first_delay = HOLD
    return ",".join(px.addr for px in pxs)


def cold(server, query, args):
    """(seconds, result, new connections) of a call in a new session, its
    first contact with the server's instances."""
    s = db.connect()
    try:
        # the library and the server entry are loaded, nothing is connected
        db.sql(s, "SELECT count(*) FROM mc_servers WHERE server = %s", (server,))
        t0 = time.time()
        r = attempt(s, query, args)
        el = time.time() - t0
        n = db.value(s, "SELECT sum(connections) FROM mc_servers WHERE server = %s", (server,))
        return el, r, n
    finally:
        s.close()


MULTI = "SELECT key, value FROM mc_get_multi(%s::text[], %s) ORDER BY key"
db.server(c, "held4", held(tls4), tls="verify-full", tls_ca_file=path("ca.crt"),
          connect_timeout="5s", allow_full_scan="true")
el, r, n = cold("held4", "SELECT mc_set_multi(%s::text[], %s::text[], server => %s)",
                (COLD_KEYS, ["v-" + k for k in COLD_KEYS], "held4"))
t.ok(r == ("ok", [(40,)]) and n == 4 and el < 0.9,
     "a cold mc_set_multi over four TLS instances whose handshakes each stall %d ms "
     "waits for them together (%.2fs)" % (HOLD * 1000, el), repr((r, n)))
el, r, n = cold("held4", MULTI, (COLD_KEYS, "held4"))
t.ok(r == ("ok", COLD_ROWS) and n == 4 and el < 0.9,
     "a cold mc_get_multi over four TLS instances whose handshakes each stall %d ms "
     "waits for them together, with every value (%.2fs)" % (HOLD * 1000, el), repr((r, n)))

auth4 = [start(["-Y", path("authfile")], tls=False) for _ in range(4)]
db.server(c, "heldauth4", held(auth4), connect_timeout="5s")
db.sql(c, "CREATE USER MAPPING FOR CURRENT_USER SERVER heldauth4 "
          "OPTIONS (username 'alice', password 'pw-alice')")
db.sql(c, "SELECT mc_set_multi(%s::text[], %s::text[], server => 'heldauth4')",
       (COLD_KEYS, ["v-" + k for k in COLD_KEYS]))
el, r, n = cold("heldauth4", MULTI, (COLD_KEYS, "heldauth4"))
t.ok(r == ("ok", COLD_ROWS) and n == 4 and el < 0.9,
     "a cold mc_get_multi over four -Y instances whose login answers each stall %d ms "
     "waits for them together, with every value (%.2fs)" % (HOLD * 1000, el), repr((r, n)))

# a full scan's dumps: planning gives up on the held item counts (250 ms),
# then the four dumps' connects wait for one hold together, not 4 x 300 ms
db.sql(c, "CREATE FOREIGN TABLE heldt (key text, value text) SERVER held4 "
          "OPTIONS (key_prefix 'cold', allow_full_scan 'true')")
el, r, n = cold("held4", "SELECT count(*) FROM heldt WHERE value = 'v-cold' || key", None)
t.ok(r == ("ok", [(40,)]) and el < 1.1,
     "a cold full scan over four TLS instances whose handshakes each stall %d ms "
     "connects to them together (%.2fs)" % (HOLD * 1000, el), repr(r))

# listeners that accept (the kernel completes the connect) and never speak
stall_socks = [socket.socket() for _ in range(4)]
for ls in stall_socks:
    ls.bind((mcrig.HOST, 0))
    ls.listen(16)
stalls = ["%s:%d" % ls.getsockname() for ls in stall_socks]
db.server(c, "stall4", ",".join(stalls), tls="require", connect_timeout="500ms",
          on_failure="miss", failure_limit=100)
del c.notices[:]
t0 = time.time()
r = attempt(c, MULTI, (COLD_KEYS, "stall4"))
el = time.time() - t0
state = db.sql(c, "SELECT count(*) FROM mc_servers WHERE server = 'stall4' "
                  "AND last_error LIKE %s", ("%timed out after 500 ms in the TLS handshake%",))
t.ok(r == ("ok", []) and el < 1.2 and state == [(4,)]
     and any("treated as misses" in x for x in c.notices),
     "on_failure 'miss', four instances that never answer the handshake: misses after "
     "connect_timeout (%.2fs), each instance's timeout counted, a warning" % el,
     repr((r, state, c.notices)))

# with no connect_timeout, each handshake wait is bounded by io_timeout from
# its own start: waited for in turn, four would take four of them
db.server(c, "stall4io", ",".join(stalls), tls="require", connect_timeout="0",
          io_timeout="500ms", on_failure="miss", failure_limit=100)
t0 = time.time()
r = attempt(c, MULTI, (COLD_KEYS, "stall4io"))
el = time.time() - t0
state = db.sql(c, "SELECT count(*) FROM mc_servers WHERE server = 'stall4io' "
                  "AND last_error LIKE %s", ("%timed out after 500 ms in the TLS handshake%",))
t.ok(r == ("ok", []) and el < 1.2 and state == [(4,)],
     "on_failure 'miss', no connect_timeout: four silent handshakes end after one "
     "io_timeout, not four (%.2fs)" % el, repr((r, state)))

db.server(c, "stall1", ",".join([m.addr for m in tls4[:3]] + stalls[:1]), tls="verify-full",
          tls_ca_file=path("ca.crt"), connect_timeout="500ms", failure_limit=100)
t0 = time.time()
r = attempt(c, MULTI, (COLD_KEYS, "stall1"))
el = time.time() - t0
t.ok(r[0] == "error" and r[2] == "08001" and "timed out after 500 ms" in r[1]
     and "TLS handshake" in r[1] and stalls[0] in r[1] and el < 1.2,
     "on_failure 'error': one instance that never answers the handshake fails the call "
     "with its connect_timeout, as a single get does (%.2fs)" % el, repr(r))
db.server(c, "stall1m", ",".join([m.addr for m in tls4[:3]] + stalls[:1]), tls="verify-full",
          tls_ca_file=path("ca.crt"), connect_timeout="500ms", on_failure="miss",
          failure_limit=100)
db.sql(c, "SELECT mc_set_multi(%s::text[], %s::text[], server => 'stall1m')",
       (COLD_KEYS, ["v-" + k for k in COLD_KEYS]))
t0 = time.time()
r = attempt(c, "SELECT count(*), count(*) FILTER (WHERE value = 'v-' || key) "
               "FROM mc_get_multi(%s::text[], 'stall1m')", (COLD_KEYS,))
el = time.time() - t0
t.ok(r[0] == "ok" and 0 < r[1][0][0] < 40 and r[1][0][0] == r[1][0][1] and el < 1.2,
     "on_failure 'miss': the other instances' values come back, the stalled one's keys "
     "are misses (%.2fs)" % el, repr(r))

db.server(c, "stall4n", ",".join(stalls), tls="require", connect_timeout="0", io_timeout="0")
th = threading.Thread(target=cancel_soon)
th.start()
t0 = time.time()
r = attempt(c, MULTI, (COLD_KEYS, "stall4n"))
el = time.time() - t0
th.join()
t.ok(r[0] == "error" and r[2] == "57014" and el < 1.5,
     "a cancel ends a cold multi-get whose four handshakes all stall (%.2fs)" % el, repr(r))
t.is_(roundtrip(c, "full"), ("ok", (True, "v-k")), "the session goes on after the cancel")

# ---- Dalli reads what mcfdw wrote over TLS -------------------------------------
db.sql(c, "SELECT mc_set('dalli:tls', 'written by mcfdw over TLS', server => 'full')")
script = """
require 'dalli'; require 'openssl'; require 'logger'
Dalli.logger = Logger.new(nil)
ctx = OpenSSL::SSL::SSLContext.new
ctx.ca_file = ARGV[1]
ctx.verify_mode = OpenSSL::SSL::VERIFY_PEER
c = Dalli::Client.new(ARGV[0], ssl_context: ctx, socket_timeout: 2)
print c.get('dalli:tls', raw: true).inspect
"""
try:
    out = subprocess.run([RUBY, "-e", script, a0, path("ca.crt")], capture_output=True,
                         text=True, timeout=30)
    t.is_(out.stdout, '"written by mcfdw over TLS"', "Dalli over TLS reads what mcfdw wrote over TLS")
    if out.returncode != 0:
        t.diag(out.stderr)
except FileNotFoundError:
    t.skip("Dalli over TLS", "no ruby")

# ---- authentication from user mappings -----------------------------------------
for stmt in [
    "DROP ROLE IF EXISTS mcfdw_alice", "DROP ROLE IF EXISTS mcfdw_bob",
    "DROP ROLE IF EXISTS mcfdw_carol", "DROP ROLE IF EXISTS mcfdw_admin",
    "CREATE ROLE mcfdw_alice", "CREATE ROLE mcfdw_bob", "CREATE ROLE mcfdw_carol",
    "CREATE ROLE mcfdw_admin",
]:
    db.sql(c, stmt)
for name, addr, extra in (("auth", auth.addr, {}),
                          ("tlsauth", tlsauth.addr, {"tls": "verify-full", "tls_ca_file": path("ca.crt")})):
    db.server(c, name, addr, failure_limit=2, allow_full_scan="true", **extra)
    db.sql(c, 'GRANT USAGE ON FOREIGN SERVER "%s" TO mcfdw_alice, mcfdw_bob, mcfdw_carol' % name)
    db.sql(c, "CREATE USER MAPPING FOR mcfdw_alice SERVER \"%s\" OPTIONS (username 'alice', password 'pw-alice')" % name)
    db.sql(c, "CREATE USER MAPPING FOR mcfdw_bob SERVER \"%s\" OPTIONS (username 'bob', password 'secret-wrong')" % name)

for server in ("auth", "tlsauth"):
    db.sql(c, "SET ROLE mcfdw_alice")
    t.is_(roundtrip(c, server, "a1"), ("ok", (True, "v-a1")), "%s: alice logs in with her mapping" % server)
    db.sql(c, "SET ROLE mcfdw_bob")
    r = roundtrip(c, server, "b1")
    t.ok(r[0] == "error" and r[2] == "28P01" and "bob" in r[1] and "secret-wrong" not in r[1],
         "%s: after SET ROLE, bob's wrong password is 28P01 (alice's connection is not reused) and is not echoed"
         % server, repr(r))
    r2 = roundtrip(c, server, "b1")
    t.is_(r2[2] if r2[0] == "error" else r2, "28P01",
          "%s: the rejected login is raised again, not turned into a dead instance" % server)
    state = db.sql(c, "SELECT state, coalesce(last_error, '') FROM mc_servers WHERE server = %s", (server,))
    t.ok(state and state[0][0] != "dead" and "secret-wrong" not in state[0][1],
         "%s: mc_servers shows no password and no dead instance" % server, repr(state))
    # the statistics views show a rejected login as any failing instance:
    # mc_server_stats a row with the cause, the others no rows; no error
    r = attempt(c, "SELECT count(*), string_agg(coalesce(error, ''), ';') FROM mc_server_stats "
                   "WHERE server = %s", (server,))
    t.ok(r[0] == "ok" and r[1][0][0] == 1 and "bob" in r[1][0][1] and "secret-wrong" not in r[1][0][1],
         "%s: mc_server_stats shows bob's rejected login as a row with its error, no password" % server,
         repr(r))
    views = [attempt(c, "SELECT count(*) FROM %s WHERE server = %%s" % v, (server,))
             for v in ("mc_stats", "mc_slab_stats", "mc_slab_summary", "mc_slab_ladder",
                       "mc_slab_calcification")]
    views.append(attempt(c, "SELECT count(*) FROM mc_stats(%s)", (server,)))
    t.ok(all(v[0] == "ok" and v[1] == [(0,)] for v in views),
         "%s: mc_stats and the slab views leave the instance out, no error" % server, repr(views))
    db.sql(c, "SET ROLE mcfdw_alice")
    t.is_(roundtrip(c, server, "a2"), ("ok", (True, "v-a2")), "%s: alice again: her connection still works" % server)
    db.sql(c, "RESET ROLE")
    r = roundtrip(c, server, "r1")
    t.ok(r[0] == "error", "%s: a role without a mapping is not logged in" % server, repr(r))

# writes queued under one role are sent after commit with that role's login,
# whichever role is current at the commit (here bob, whose password is wrong)
for server in ("auth", "tlsauth"):
    db.sql(c, "SET ROLE mcfdw_alice")
    t.is_(roundtrip(c, server, "q1"), ("ok", (True, "v-q1")), "%s: alice stores q1" % server)
    del c.notices[:]
    db.sql(c, "BEGIN")
    db.sql(c, "SELECT mc_delete_on_commit('q1', server => %s)", (server,))
    db.sql(c, "SELECT mc_set_on_commit('q2', 'v-q2', server => %s)", (server,))
    db.sql(c, "SET ROLE mcfdw_bob")
    db.sql(c, "COMMIT")
    db.sql(c, "SET ROLE mcfdw_alice")
    r = attempt(c, "SELECT mc_get('q1', server => %s), mc_get('q2', server => %s)", (server, server))
    t.ok(r == ("ok", [(None, "v-q2")]) and not any("could not send" in n for n in c.notices),
         "%s: writes alice queued are sent with her login after SET ROLE bob and COMMIT" % server,
         repr((r, c.notices)))
    db.sql(c, "RESET ROLE")

# a full scan (lru_crawler metadump) over a logged-in connection, TLS and plain
for server in ("auth", "tlsauth"):
    db.sql(c, "CREATE FOREIGN TABLE fs_%s (key text, value text) SERVER %s "
              "OPTIONS (key_prefix 'fs:', allow_full_scan 'true')" % (server, server))
    db.sql(c, "GRANT SELECT, INSERT ON fs_%s TO mcfdw_alice" % server)
    db.sql(c, "SET ROLE mcfdw_alice")
    db.sql(c, "INSERT INTO fs_%s SELECT g::text, repeat('v', 40) FROM generate_series(1, 3000) g" % server)
    t.is_(db.sql(c, "SELECT count(*), count(DISTINCT key), min(length(value)) FROM fs_%s" % server)[0],
          (3000, 3000, 40), "%s: a full scan lists and reads every key%s" % (server, " (a dump of many TLS records)" if server == "tlsauth" else ""))
    db.sql(c, "RESET ROLE")

# the PUBLIC mapping is the fallback; ALTER USER MAPPING takes effect
db.sql(c, "CREATE USER MAPPING FOR PUBLIC SERVER auth OPTIONS (username 'bob', password 'pw-bob')")
db.sql(c, "SET ROLE mcfdw_carol")
t.is_(roundtrip(c, "auth", "c1"), ("ok", (True, "v-c1")), "a role without its own mapping uses the PUBLIC one")
db.sql(c, "RESET ROLE")
db.sql(c, "ALTER USER MAPPING FOR mcfdw_bob SERVER auth OPTIONS (SET password 'pw-bob')")
db.sql(c, "SET ROLE mcfdw_bob")
t.is_(roundtrip(c, "auth", "b2"), ("ok", (True, "v-b2")), "ALTER USER MAPPING with the right password takes effect")
db.sql(c, "RESET ROLE")

# the password is visible to the mapping's owner side only (pg_user_mappings' rules)
db.sql(c, "SET ROLE mcfdw_alice")
opts = db.sql(c, "SELECT usename, umoptions FROM pg_user_mappings WHERE srvname = 'auth' ORDER BY usename")
db.sql(c, "RESET ROLE")
bob_opts = [o for u, o in opts if u == "mcfdw_bob"]
t.ok(bob_opts == [None], "another role's mapping options (its password) are hidden", repr(opts))

# ---- the validator -----------------------------------------------------------
r = attempt(c, "CREATE SERVER v1 FOREIGN DATA WRAPPER mcfdw OPTIONS (username 'x')")
t.ok(r[0] == "error" and r[2] == "HV00D", "username is not a server option", repr(r))
r = attempt(c, "CREATE USER MAPPING FOR mcfdw_carol SERVER req OPTIONS (username 'x')")
t.ok(r[0] == "error" and "must be given together" in r[1], "username needs password", repr(r))
r = attempt(c, "CREATE USER MAPPING FOR mcfdw_carol SERVER req OPTIONS (tls 'require')")
t.ok(r[0] == "error" and r[2] == "HV00D", "tls is not a user-mapping option", repr(r))
r = attempt(c, "CREATE SERVER v2 FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'on')")
t.ok(r[0] == "error" and "verify-full" in r[1], "tls takes libpq's mode names", repr(r))
r = attempt(c, "CREATE SERVER v3 FOREIGN DATA WRAPPER mcfdw OPTIONS (tls_ca_file '/x')")
t.ok(r[0] == "error" and 'require option "tls"' in r[1], "TLS files without tls are refused", repr(r))
db.sql(c, "GRANT USAGE ON FOREIGN DATA WRAPPER mcfdw TO mcfdw_admin")
db.sql(c, "SET ROLE mcfdw_admin")
r = attempt(c, "CREATE SERVER v4 FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'require', tls_ca_file '/etc/passwd')")
t.ok(r[0] == "error" and r[2] == "42501", "a non-superuser may not name a file", repr(r))
r = attempt(c, "CREATE SERVER v5 FOREIGN DATA WRAPPER mcfdw OPTIONS (tls 'verify-full', tls_server_name 'cache.example')")
t.is_(r[0], "ok", "... but may turn TLS on (system CAs) and name the host")
db.sql(c, "RESET ROLE")

c.close()
killer.close()
t.done()
