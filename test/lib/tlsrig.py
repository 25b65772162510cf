"""tlsrig — the test CA, its certificates and TLS memcacheds, for the TLS tests.

Importing it makes, with the openssl command, in a fresh directory the
backend and memcached can read: a CA (ca.crt), a server certificate for
localhost/127.0.0.1 (server.crt, server.key), the same one already expired
(expired.crt: not-after is its making time, so wait a second before use), a
client certificate (client.crt, client.key) and a second CA that signed
nothing (other.crt).

    import tlsrig
    mc = tlsrig.start(tlsrig.tls_args())          # memcached -Z, stopped at exit
    tlsrig.path("ca.crt")                         # for tls_ca_file
    tlsrig.server_context()                       # an ssl.SSLContext serving server.crt
"""

import os
import select
import socket
import ssl
import struct
import subprocess
import tempfile
import time

import hostile
import mcrig

_rig = os.environ.get("MCFDW_RIG")
_base = os.path.join(_rig, "tmp") if _rig and os.path.isdir(os.path.join(_rig, "tmp")) else None
D = tempfile.mkdtemp(prefix="mcfdw-tls-", dir=_base)
os.chmod(D, 0o755)          # the backend (postgres) and memcached (nobody) read here
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, cwd=D,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def path(name):
    return os.path.join(D, name)


def write_file(name, text):
    """A file in the certificate directory, readable by the servers."""
    with open(path(name), "w") as f:
        f.write(text)
    os.chmod(path(name), 0o644)
    return path(name)


write_file("server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
write_file("client.ext", "extendedKeyUsage=clientAuth\n")
openssl("req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=mcfdw test CA")
openssl("req", "-x509", *EC, "-keyout", "other.key", "-out", "other.crt", "-days", "2",
        "-subj", "/CN=mcfdw other CA")
openssl("req", "-new", *EC, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-set_serial", "2", "-out", "server.crt", "-days", "2", "-extfile", "server.ext")
# -days 0: not after = not before = now, so expired a second later
openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-set_serial", "3", "-out", "expired.crt", "-days", "0", "-extfile", "server.ext")
openssl("req", "-new", *EC, "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=mcfdw")
openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-set_serial", "4", "-out", "client.crt", "-days", "2", "-extfile", "client.ext")
for _name in os.listdir(D):
    os.chmod(path(_name), 0o644)


def server_context():
    """An ssl.SSLContext that serves server.crt (for fake TLS servers)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(path("server.crt"), path("server.key"))
    return ctx


class TlsMemcached(mcrig.Memcached):
    """A private memcached whose readiness is checked over TLS (or, with an
    auth file, by its "unauthenticated" answer)."""

    def __init__(self, args, tls=True):
        super().__init__(args)
        self.tls = tls

    def _answers(self):
        try:
            raw = socket.create_connection((mcrig.HOST, self.port), timeout=1)
            if self.tls:
                ctx = ssl.create_default_context(cafile=path("ca.crt"))
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                ctx.load_cert_chain(path("client.crt"), path("client.key"))
                raw = ctx.wrap_socket(raw)
            with raw:
                raw.sendall(b"version\r\n")
                return raw.recv(100).startswith((b"VERSION", b"CLIENT_ERROR"))
        except (OSError, ssl.SSLError):
            return False


def start(args, tls=True):
    """Start a private memcached with these extra args; stopped at exit."""
    m = TlsMemcached(args, tls)
    mcrig._started.append(m)
    return m.start()


def tls_args(cert="server.crt", *extra):
    """memcached's -Z arguments serving cert (and server.key), plus extra ssl options."""
    return ["-Z", "-o", ",".join(["ssl_chain_cert=" + path(cert),
                                  "ssl_key=" + path("server.key")] + list(extra))]


class TlsHostile(hostile.Listener):
    """A fake TLS memcached whose records this test writes byte by byte.

    The handshake is real (server.crt, through ssl.SSLObject on memory BIOs,
    so every byte on the wire is ours to hold back, split or replace).  Each
    request then meets `behaviour`, read as the request arrives:

      good          relay to the plaintext memcached upstream_port, each
                    upstream read as one record
      coalesce      relay, but hold the upstream's answer until it pauses
                    (50 ms) and send it as records of `record` bytes (several
                    replies in one record, replies across records) in one
                    write: the bytes OpenSSL holds that epoll cannot see
      endless_body  "VA 4194304" for the request's opaque, then "x" forever
      huge_value    "VA 1000000000", then zeros forever
      trickle       one record holding a good 2,000-byte reply, its bytes
                    sent one per `trickle` seconds
      split_stall   half of a record holding the start of a reply, then
                    silence (the socket stays open)
      close_notify  a record with the start of a reply, then close_notify
                    and close
      abrupt        a record with the start of a reply, then a reset
      garbage       after the handshake and request, bytes that are not TLS
      alert         a record with the start of a reply, then a fatal alert
                    record (handshake_failure), then silence
      trickle_handshake  (at accept) the server's handshake messages a
                    byte per `trickle` seconds

    `requests` collects the decrypted request bytes; `accepted` counts
    connections; stop() closes everything.
    """

    def __init__(self, upstream_port=None, behaviour="good", record=16384, trickle=0.1):
        super().__init__()
        self.upstream_port = upstream_port
        self.behaviour = behaviour
        self.record = record
        self.trickle = trickle
        self.requests = b""
        self.resumed = []       # per connection: did its handshake resume a session?
        self._ctx = server_context()

    def _serve(self, sock):
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self._ctx.wrap_bio(inc, out, server_side=True)
        upstream = None
        try:
            sock.settimeout(30)
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    if self.behaviour == "trickle_handshake":
                        for b in out.read():
                            if self._stop:
                                return
                            sock.sendall(bytes([b]))
                            time.sleep(self.trickle)
                    self._flush(sock, out)
                    data = sock.recv(65536)
                    if not data:
                        return
                    inc.write(data)
            self._flush(sock, out)
            self.resumed.append(tls.session_reused)
            sock.settimeout(None)
            if self.upstream_port:
                upstream = socket.create_connection((mcrig.HOST, self.upstream_port), timeout=5)
                with self._lock:
                    self._conns.add(upstream)
            socks = [sock] + ([upstream] if upstream else [])
            held = b""
            # the first request may have come with the client's Finished
            if not self._from_client(sock, tls, inc, out, upstream, b""):
                return
            while not self._stop:
                readable, _, _ = select.select(socks, [], [], 0.05)
                if not readable and held:
                    for i in range(0, len(held), self.record):
                        tls.write(held[i:i + self.record])
                    held = b""
                    self._flush(sock, out)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is upstream:
                        if self.behaviour == "coalesce":
                            held += data
                        else:
                            tls.write(data)
                            self._flush(sock, out)
                    elif not self._from_client(sock, tls, inc, out, upstream, data):
                        return
        except (OSError, ssl.SSLError):
            return
        finally:
            with self._lock:
                self._conns.discard(sock)
                self._conns.discard(upstream)
            for s in (sock, upstream):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def _from_client(self, sock, tls, inc, out, upstream, data):
        """Decrypt what came (data) and relay it or meet it with the
        behaviour; False when the connection is done."""
        inc.write(data)
        plain = b""
        try:
            while True:
                plain += tls.read(65536)
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            pass
        if not plain:
            return True
        self.requests += plain
        if self.behaviour in ("good", "coalesce"):
            upstream.sendall(plain)
            return True
        self._hostile(sock, tls, out, plain)
        return False

    @staticmethod
    def _flush(sock, out):
        data = out.read()
        if data:
            sock.sendall(data)

    @staticmethod
    def _opaque(request):
        for word in request.split(b"\r\n", 1)[0].split():
            if word.startswith(b"O"):
                return b" " + word
        return b""

    def _record(self, tls, out, data):
        tls.write(data)
        return out.read()

    def _idle(self):
        while not self._stop:
            time.sleep(0.05)

    def _hostile(self, sock, tls, out, request):
        b = self.behaviour
        op = self._opaque(request)
        start = b"VA 100" + op + b"\r\nabc"
        if b == "endless_body":
            sock.sendall(self._record(tls, out, b"VA 4194304" + op + b"\r\n"))
            while not self._stop:
                tls.write(b"x" * 16384)
                sock.sendall(out.read())
        elif b == "huge_value":
            sock.sendall(self._record(tls, out, b"VA 1000000000" + op + b"\r\n"))
            while not self._stop:
                tls.write(b"\0" * 16384)
                sock.sendall(out.read())
        elif b == "trickle":
            raw = self._record(tls, out, b"VA 2000" + op + b"\r\n" + b"t" * 2000 + b"\r\n")
            for i in range(len(raw)):
                if self._stop:
                    return
                sock.sendall(raw[i:i + 1])
                time.sleep(self.trickle)
            self._idle()
        elif b == "split_stall":
            raw = self._record(tls, out, b"VA 2000" + op + b"\r\n" + b"s" * 2000 + b"\r\n")
            sock.sendall(raw[:len(raw) // 2])
            self._idle()
        elif b == "close_notify":
            sock.sendall(self._record(tls, out, start))
            try:
                tls.unwrap()
            except ssl.SSLWantReadError:
                pass
            sock.sendall(out.read())
        elif b == "abrupt":
            sock.sendall(self._record(tls, out, start))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif b == "garbage":
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" + bytes(range(256)) * 8)
            self._idle()
        elif b == "alert":
            sock.sendall(self._record(tls, out, start))
            sock.sendall(b"\x15\x03\x03\x00\x02\x02\x28")
            self._idle()
        else:
            raise ValueError(b)
