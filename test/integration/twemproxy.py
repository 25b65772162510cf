"""twemproxy: a memcached behind twemproxy (Debian's nutcracker), which
speaks memcached's text protocol but not the meta commands, and closes a
client's connection at the first command it does not know (mg, ms, mn),
unanswered.

mc_get, mc_set, mc_get_multi and mc_set_multi through it each fail at once
with 08006 and a message naming the problem (such proxies are not
supported) and a hint to connect to memcached directly; the session then
goes on using the memcached behind the proxy directly.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import mcdb
import mcrig

t = mcrig.TAP()
nutcracker = shutil.which("nutcracker") or "/usr/sbin/nutcracker"
mc = mcrig.start_memcached()
port = mcrig.free_port()
rig = os.environ.get("MCFDW_RIG")
tmp = os.path.join(rig, "tmp") if rig else None
work = tempfile.mkdtemp(prefix="twemproxy-", dir=tmp if tmp and os.path.isdir(tmp) else None)
conf = os.path.join(work, "nutcracker.yml")
with open(conf, "w") as f:
    f.write("pool:\n"
            "  listen: 127.0.0.1:%d\n"
            "  hash: fnv1a_64\n"
            "  distribution: ketama\n"
            "  timeout: 2000\n"
            "  servers:\n"
            "   - %s:1\n" % (port, mc.addr))
log = open(os.path.join(work, "nutcracker.log"), "w")
proc = subprocess.Popen([nutcracker, "-c", conf, "-s", str(mcrig.free_port()), "-o", log.name],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True)
pidfile = None
if rig and os.path.isdir(os.path.join(rig, "pids")):
    pidfile = os.path.join(rig, "pids", "twemproxy-%d.pid" % proc.pid)
    with open(pidfile, "w") as f:
        f.write("%d\n" % proc.pid)


def stop():
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if pidfile and os.path.exists(pidfile):
        os.unlink(pidfile)


try:
    mcrig.wait_port(port)
    # it proxies the text protocol to the memcached behind it ...
    mcrig.mc_command(mc.port, "set through 0 0 2\r\nok", end=(b"STORED\r\n",))
    got = mcrig.mc_command(port, "get through")
    t.ok(got.startswith(b"VALUE through"), "nutcracker is up and proxies 'get'", got)
    # ... and drops a connection at a meta command, unanswered
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"mn\r\n")
        t.is_(s.recv(100), b"", "nutcracker closes the connection at 'mn' without a reply")

    db = mcdb.Database("mcfdw_it_twemproxy")
    c = db.connect()
    db.server(c, "tw", "127.0.0.1:%d" % port, failure_limit=100, connect_timeout="1s",
              io_timeout="2s")
    db.server(c, "direct", mc.addr)

    def attempt(query):
        t0 = time.monotonic()
        try:
            db.sql(c, query)
            return ("ok", time.monotonic() - t0)
        except Exception as e:      # psycopg2.Error
            d = e.diag
            return ("error", " | ".join(x for x in (d.message_primary, d.message_detail,
                                                    d.message_hint) if x),
                    e.pgcode, time.monotonic() - t0)

    for label, query in [
            ("mc_get", "SELECT mc_get('k', server => 'tw')"),
            ("mc_set", "SELECT mc_set('k', 'v', server => 'tw')"),
            ("mc_get_multi", "SELECT * FROM mc_get_multi(ARRAY['a', 'b', 'c'], 'tw')"),
            ("mc_set_multi", "SELECT mc_set_multi(ARRAY['a', 'b'], ARRAY['1', '2'], server => 'tw')"),
            ("a multi-get of 5,000 keys", "SELECT count(*) FROM mc_get_multi("
             "ARRAY(SELECT 'key-' || i FROM generate_series(1, 5000) i), 'tw')"),
            ("a batch of 2,000 writes", "SELECT mc_set_multi(ARRAY(SELECT 'key-' || i FROM "
             "generate_series(1, 2000) i), ARRAY(SELECT repeat('v', 100) FROM generate_series(1, 2000)), "
             "server => 'tw')")]:
        r = attempt(query)
        t.ok(r[0] == "error" and r[2] == "08006" and "twemproxy (nutcracker)" in r[1]
             and "not supported" in r[1] and "Connect to memcached directly" in r[1]
             and r[3] < 1.0, "%s through twemproxy: a clear error at once" % label, r)

    r = attempt("SELECT mc_set('k', 'v', server => 'direct'), mc_get('through', server => 'direct')")
    t.ok(r[0] == "ok", "the session goes on with the memcached directly", r)
    t.is_(db.value(c, "SELECT mc_get('k', server => 'direct')"), "v", "... which answers")
    t.ok(proc.poll() is None, "nutcracker is still running")
finally:
    stop()
t.done()
