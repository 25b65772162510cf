"""mcrig — helpers for mcfdw's integration tests (stdlib + psycopg2).

`make test` runs every test/integration/*.py with /usr/bin/python3 and this
directory on PYTHONPATH, inside the rig (test/rig/lib.sh), whose environment
says where things are: PGHOST/PGPORT/PGUSER/PGDATABASE, MCFDW_MC_PORTS (the
four rig memcacheds), MCFDW_HANG_PORT (accepts, never answers), MCFDW_RIG
(the rig's temp dir), MCFDW_MEMCACHED, MCFDW_SRC.

In the rig's Unix-socket pass (MCFDW_SOCKETS=1, see test/rig/test.sh) the
rig's memcacheds and its hang listener are Unix sockets: rig_ports() and
hang_port() give their paths (str), start_memcached() with no port starts
one on a socket, and listen() gives a socket listener, so a test that
writes its servers with addr() and reaches its servers with connect() (and
hostile.py's and faultproxy.py's listeners) runs unchanged in both passes.

A test prints TAP and exits non-zero on failure:

    import mcrig
    t = mcrig.TAP()
    mc = mcrig.start_memcached("-m", "8")      # a private one; stopped at exit
    conn = mcrig.pg_connect()
    t.is_(mc.stats()["curr_items"], "0", "starts empty")
    t.done()

The rig's own memcacheds are shared by all tests: don't stop them; start a
private one when a test needs to kill, restart or fill a server.
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["TAP", "free_port", "start_memcached", "Memcached", "stats", "socket_dir",
           "mc_command", "mc_raw_get", "rig_ports", "hang_port", "pg_connect", "wait_for",
           "wait_port", "SOCKETS", "addr", "hang_addr", "connect", "listen", "refused_addr",
           "private_cluster", "Cluster"]

HOST = "127.0.0.1"

# The rig's Unix-socket pass: its servers, and the ones tests start, are sockets.
SOCKETS = os.environ.get("MCFDW_SOCKETS") == "1"


class TAP:
    """TAP on stdout: ok/is_/skip/diag, then done() prints the plan and exits."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name="", *diag):
        """Record one test point; returns cond so a test can stop early."""
        self.n += 1
        if not cond:
            self.failed += 1
        print("%sok %d - %s" % ("" if cond else "not ", self.n, name), flush=True)
        if not cond:
            for d in diag:
                self.diag(d)
        return bool(cond)

    def is_(self, got, want, name=""):
        """ok(got == want), showing both when they differ."""
        return self.ok(got == want, name,
                       "     got: %r" % (got,), "expected: %r" % (want,))

    def skip(self, name, reason):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, reason), flush=True)

    def diag(self, msg):
        for line in str(msg).splitlines() or [""]:
            print("# " + line, flush=True)

    def done(self):
        """Print the plan and exit: status 1 if anything failed."""
        print("1..%d" % self.n, flush=True)
        sys.exit(1 if self.failed else 0)


def free_port():
    """A loopback port nobody listens on right now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _where(v):
    return int(v) if v.isdigit() else v


def rig_ports():
    """Ports of the rig's memcacheds, as ints (four under `make test`); in
    the Unix-socket pass their sockets' paths."""
    return [_where(p) for p in os.environ["MCFDW_MC_PORTS"].split(",") if p]


def hang_port():
    """Port of the rig's listener that accepts and never answers (its path
    in the Unix-socket pass)."""
    return _where(os.environ["MCFDW_HANG_PORT"])


def addr(where):
    """The servers option's entry for a port (int) on HOST or a Unix
    socket's path (str)."""
    return where if isinstance(where, str) else "%s:%d" % (HOST, where)


def hang_addr():
    """addr() of the rig's listener that accepts and never answers."""
    return addr(hang_port())


def connect(where, timeout=5.0):
    """A connected socket to a port (int) on HOST or a Unix socket (path)."""
    return _connect(where, timeout)


def listen(backlog=64):
    """(listening socket, where): on a free port of HOST, or in the
    Unix-socket pass on a fresh socket in socket_dir(), where is its path."""
    if SOCKETS:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.path.join(socket_dir(), "l.sock")
        s.bind(path)
        os.chmod(path, 0o777)
        s.listen(backlog)
        return s, path
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((HOST, 0))
    s.listen(backlog)
    return s, s.getsockname()[1]


def refused_addr():
    """A servers entry whose connects are refused: a free port of HOST, or
    in the Unix-socket pass a socket whose listener has closed."""
    if not SOCKETS:
        return addr(free_port())
    s, path = listen()
    s.close()
    return path


def socket_dir():
    """A fresh directory for Unix sockets that the rig's PostgreSQL (the
    postgres user) and its memcacheds (nobody, when root) can both use:
    under the rig's tmp dir (mode 1777), itself mode 0777."""
    rig = os.environ.get("MCFDW_RIG")
    rig_tmp = os.path.join(rig, "tmp") if rig else None
    d = tempfile.mkdtemp(prefix="sock-", dir=rig_tmp if rig_tmp and os.path.isdir(rig_tmp) else None)
    os.chmod(d, 0o777)
    return d


def _connect(where, timeout):
    """A socket to a memcached: a TCP port (int) on HOST, or a Unix socket's path (str)."""
    if isinstance(where, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(where)
        except OSError:
            s.close()
            raise
        return s
    return socket.create_connection((HOST, where), timeout=timeout)


def wait_for(pred, timeout=10.0, interval=0.02, what="condition"):
    """Poll pred() until it returns something true; return it, or raise."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def wait_port(port, timeout=10.0):
    """Wait until something accepts TCP connections on HOST:port."""
    def accepts():
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            return True
        except OSError:
            return False
    wait_for(accepts, timeout, what="port %d" % port)


def _reply_complete(buf, end):
    if not buf.endswith(b"\r\n"):
        return False
    if buf.endswith(tuple(end)):
        return True
    last = buf[:-2].rsplit(b"\r\n", 1)[-1]
    return last == b"ERROR" or last.startswith((b"CLIENT_ERROR", b"SERVER_ERROR"))


def mc_command(port, command, end=(b"END\r\n",), timeout=5.0):
    """Send one raw text-protocol command and return the raw reply.  port is
    a TCP port, or a Unix socket's path (a str).

    Reads until the reply ends with one of `end` or with an error line, or
    the server closes.  For stats and simple commands, not for values that
    may contain the end marker.  E.g. mc_command(p, "flush_all", end=(b"OK\r\n",)).
    """
    if isinstance(command, str):
        command = command.encode()
    if not command.endswith(b"\r\n"):
        command += b"\r\n"
    with _connect(port, timeout) as s:
        s.sendall(command)
        buf = b""
        while not _reply_complete(buf, end):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf


def mc_raw_get(port, key):
    """The value of key as memcached itself holds it ("get"), or None; a
    decremented number's padding spaces stripped."""
    r = mc_command(port, "get " + key)
    lines = r.split(b"\r\n")
    return lines[1].decode().rstrip(" ") if lines[0].startswith(b"VALUE") else None


def stats(port, group=""):
    """`stats [group]` of any memcached, as a dict of strings."""
    raw = mc_command(port, ("stats " + group).strip())
    out = {}
    for line in raw.decode("latin-1").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = parts[2]
    return out


_started = []


class Memcached:
    """A private memcached on a free port, or on a Unix socket (path, which
    then is self.port too: mc_command and stats take either); see
    start_memcached()."""

    def __init__(self, args, port=None, path=None):
        self.args = list(args)
        if SOCKETS and port is None and path is None:
            path = os.path.join(socket_dir(), "mc.sock")
        self.path = path
        self.port = path or port or free_port()
        self.proc = None
        self.pidfile = None
        rig = os.environ.get("MCFDW_RIG")
        rig_tmp = os.path.join(rig, "tmp") if rig else None
        self.log = tempfile.NamedTemporaryFile(
            prefix="memcached-%s-" % (os.path.basename(path) if path else self.port), suffix=".log",
            dir=rig_tmp if rig_tmp and os.path.isdir(rig_tmp) else None, delete=False)

    @property
    def addr(self):
        """"127.0.0.1:PORT" (or the socket's path), the form a servers option takes."""
        return self.path if self.path else "%s:%d" % (HOST, self.port)

    def start(self, timeout=10.0):
        binary = os.environ.get("MCFDW_MEMCACHED", "/usr/bin/memcached")
        if self.path:
            # -s turns TCP off; -a 0777 lets the postgres user connect
            cmd = [binary, "-s", self.path, "-a", "0777", "-m", "64"]
        else:
            cmd = [binary, "-l", HOST, "-p", str(self.port), "-U", "0", "-m", "64"]
        if os.geteuid() == 0:
            cmd += ["-u", "nobody"]
        cmd += self.args            # later flags win, e.g. -m 8
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._record_pid()
        try:
            wait_for(lambda: self.proc.poll() is not None or self._answers(),
                     timeout, what="memcached on %s" % self.port)
        except TimeoutError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError("memcached on %s exited: %s"
                               % (self.port, self._log_text()))
        return self

    def _answers(self):
        try:
            # a -Y memcached answers "CLIENT_ERROR unauthenticated" before a login
            return mc_command(self.port, b"version", end=(b"\r\n",), timeout=1).startswith(
                (b"VERSION", b"CLIENT_ERROR unauthenticated"))
        except OSError:
            return False

    def _log_text(self):
        try:
            with open(self.log.name, errors="replace") as f:
                return f.read().strip()
        except OSError:
            return ""

    def _record_pid(self):
        # The rig kills whatever is recorded here if this process dies first.
        rig = os.environ.get("MCFDW_RIG")
        if rig and os.path.isdir(os.path.join(rig, "pids")):
            self.pidfile = os.path.join(rig, "pids", "mcrig-%d.pid" % self.proc.pid)
            with open(self.pidfile, "w") as f:
                f.write("%d\n" % self.proc.pid)

    def stop(self, sig=signal.SIGKILL):
        """Stop it (SIGKILL by default: memcached keeps nothing to save)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.pidfile:
            try:
                os.unlink(self.pidfile)
            except OSError:
                pass
            self.pidfile = None

    def restart(self):
        """Stop and start again on the same port, empty."""
        self.stop()
        return self.start()

    def stats(self, group=""):
        return stats(self.port, group)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_memcached(*extra_args, port=None, path=None):
    """Start a private memcached (extra args are appended to the defaults
    `-l 127.0.0.1 -p PORT -U 0 -m 64 [-u nobody]`, or `-s PATH -a 0777 -m 64
    [-u nobody]` with path, a Unix socket, e.g. in socket_dir(); in the
    Unix-socket pass, one on a socket unless port is given); it is stopped
    at exit."""
    m = Memcached(extra_args, port, path)
    _started.append(m)
    return m.start()


def pg_connect(dbname=None, autocommit=True, **kw):
    """psycopg2 connection to the rig's cluster (PG* from the environment)."""
    import psycopg2     # here, so tests that need no PostgreSQL don't need it
    params = dict(host=os.environ.get("PGHOST", HOST),
                  port=os.environ.get("PGPORT", "5432"),
                  user=os.environ.get("PGUSER", "postgres"),
                  dbname=dbname or os.environ.get("PGDATABASE", "postgres"))
    params.update(kw)
    conn = psycopg2.connect(**params)
    conn.autocommit = autocommit
    return conn


_clusters = []


class Cluster:
    """A private PostgreSQL cluster of the test's own (see private_cluster()):
    .port (on HOST), .pgdata, .log (the server log's path), .base (its
    temporary directory, the Unix socket's too), .bindir (PG_CONFIG's)."""

    def __init__(self, conf_lines, name):
        pg_config = os.environ.get("PG_CONFIG", "pg_config")
        self.bindir = subprocess.check_output([pg_config, "--bindir"], text=True).strip()
        self.name = name
        rig = os.environ.get("MCFDW_RIG")
        self.base = tempfile.mkdtemp(prefix=name + "-", dir=os.path.join(rig, "tmp") if rig else None)
        os.chmod(self.base, 0o755)
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres", "postgres")
        self.pgdata = os.path.join(self.base, "pgdata")
        self.log = os.path.join(self.base, "postgres.log")
        self.port = free_port()
        self._pidfiles = []
        _clusters.append(self)
        r = self.run([self.bin("initdb"), "-D", self.pgdata, "-U", "postgres", "-E", "UTF8",
                      "--locale=C.UTF-8", "--auth=trust", "--no-sync"])
        if r.returncode != 0:
            raise RuntimeError("initdb of %s failed:\n%s" % (name, r.stdout))
        self.configure("listen_addresses = '127.0.0.1'", "port = %d" % self.port,
                       "unix_socket_directories = '%s'" % self.base, "fsync = off",
                       "shared_buffers = 16MB", "max_connections = 20", "log_min_messages = log",
                       *conf_lines)

    def bin(self, program):
        """The path of one of PostgreSQL's programs (initdb, pg_ctl, pg_dump)."""
        return os.path.join(self.bindir, program)

    def run(self, cmd, **kw):
        """cmd as the postgres OS user when run as root, in .base: the
        CompletedProcess, stdout and stderr together in .stdout."""
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + list(cmd)
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=self.base, **kw)

    def conf_text(self):
        with open(os.path.join(self.pgdata, "postgresql.conf")) as f:
            return f.read()

    def configure(self, *lines):
        """Append lines to postgresql.conf (a later line wins); read at the next start."""
        with open(os.path.join(self.pgdata, "postgresql.conf"), "a") as f:
            f.write("\n" + "".join(line + "\n" for line in lines))

    def start(self):
        """pg_ctl start, waiting up to 60 s: the CompletedProcess.  The
        postmaster is handed to the rig, which kills it if the test dies
        before its exit handlers run."""
        r = self.run([self.bin("pg_ctl"), "-D", self.pgdata, "-l", self.log, "-w", "-t", "60",
                      "start"])
        if r.returncode == 0:
            self._record_pid()
        return r

    def started(self, tap, name):
        """start() as one test point of tap (the output and the log shown
        when it fails): True when it started."""
        r = self.start()
        return tap.ok(r.returncode == 0, name, r.stdout, self.log_text())

    def stop(self, mode="fast", timeout=60):
        """pg_ctl stop -m mode (smart, fast, immediate): the CompletedProcess."""
        r = self.run([self.bin("pg_ctl"), "-D", self.pgdata, "-m", mode, "-w", "-t", str(timeout),
                      "stop"])
        if r.returncode == 0:
            self._forget_pids()
        return r

    def restart(self, mode="fast"):
        """stop(mode), then start(): the CompletedProcess of the one that failed, or start's."""
        r = self.stop(mode)
        return r if r.returncode != 0 else self.start()

    def running(self):
        return os.path.exists(os.path.join(self.pgdata, "postmaster.pid"))

    def connect(self, dbname="postgres", user="postgres", **kw):
        """pg_connect() to this cluster."""
        return pg_connect(host=HOST, port=self.port, user=user, dbname=dbname, **kw)

    def log_text(self):
        """The server log so far ("" before there is one)."""
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _record_pid(self):
        rig = os.environ.get("MCFDW_RIG")
        with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
            pm = int(f.readline())
        if rig and os.path.isdir(os.path.join(rig, "pids")):
            self._pidfiles.append(os.path.join(rig, "pids", "%s-%d.pid" % (self.name, pm)))
            with open(self._pidfiles[-1], "w") as f:
                f.write("%d\n" % pm)

    def _forget_pids(self):
        for f in self._pidfiles:
            try:
                os.unlink(f)
            except OSError:
                pass
        self._pidfiles = []

    def cleanup(self):
        """An immediate stop if it runs, then its directory removed (at exit)."""
        if self.running():
            self.stop("immediate", timeout=30)
        self._forget_pids()
        shutil.rmtree(self.base, ignore_errors=True)


def private_cluster(conf_lines, name):
    """A private PostgreSQL cluster, initdb'd but not started (start() it):
    for a test that needs server settings the rig's shared cluster lacks
    (shared_preload_libraries = 'mcfdw', wal_level = logical).  initdb and
    pg_ctl run as the postgres OS user when the test runs as root, in a
    temporary directory under the rig's (name is its prefix, and the rig
    pidfile's); postgresql.conf gets a free port on HOST, the Unix socket in
    that directory, fsync off, shared_buffers 16MB, max_connections 20,
    log_min_messages log, then conf_lines (which may override those).  At
    exit it is stopped (immediate) and its directory removed.  Raises
    RuntimeError when initdb fails."""
    return Cluster(conf_lines, name)


def logical_cluster(name, conf_lines=()):
    """private_cluster for the WAL-invalidation tests: mcfdw preloaded,
    wal_level = logical, slots and senders, the worker polling every 50 ms
    with a 20 s timeout, then conf_lines; where the build lists the
    libraries trusted as output plugins (Debian's 15.20 does), mcfdw among
    them.  Not started."""
    pg = private_cluster(["shared_preload_libraries = 'mcfdw'", "wal_level = logical",
                          "max_replication_slots = 4", "max_wal_senders = 4",
                          "shared_buffers = 32MB", "mcfdw.wal_poll_interval = 50ms",
                          "mcfdw.wal_timeout = 20s"] + list(conf_lines), name)
    if "output_plugin_libraries" in pg.conf_text():
        pg.configure("output_plugin_libraries = 'pgoutput, test_decoding, mcfdw'")
    return pg


def _cleanup():
    for c in _clusters:
        c.cleanup()
    for m in _started:
        m.stop()
        try:
            os.unlink(m.log.name)
        except OSError:
            pass


def _on_term(signum, frame):
    sys.exit(128 + signum)      # runs atexit, so _cleanup too


atexit.register(_cleanup)
if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _on_term)
