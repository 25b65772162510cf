"""faultproxy — a TCP proxy in front of memcached that misbehaves on demand.

The pool must survive servers that stall, cut replies short, send garbage or
close mid-request, and must never reuse a connection whose reply it did not
finish reading.  Real memcached does none of that on cue, so tests put this
proxy between mcfdw and a real server and pick the fault:

    px = FaultProxy(upstream_port).start()
    px.mode = "delay"; px.delay = 0.3    # replies arrive 300 ms late
    ...                                   # point a foreign server at px.port
    px.accepted                           # client connections seen so far
    px.record = True; px.requests         # the request bytes, kept while record is set

Modes (for replies, server -> client; requests always pass through):
  pass      forward as is
  delay     hold each reply chunk for `delay` seconds, then forward it
  hang      swallow replies
  truncate  forward the first `limit` bytes of each reply chunk, then close
  garble    replace each reply chunk with `garbage`
  close     close the client connection as soon as a request arrives

Whatever the mode, `first_delay` seconds (0: none) hold the first reply
chunk of each connection: a TLS server's answer to the hello, or a plain
server's answer to the login, arrives that much late, on every connection
at once (each has its own thread).

In the rig's Unix-socket pass (mcrig.SOCKETS) the proxy listens on a Unix
socket (`port` is its path) and upstream_port may be a path too.
"""

import select
import socket
import threading
import time

import mcrig

HOST = "127.0.0.1"


class FaultProxy:
    def __init__(self, upstream_port, mode="pass"):
        self.upstream_port = upstream_port
        self.mode = mode
        self.delay = 0.0
        self.first_delay = 0.0
        self.limit = 3
        self.garbage = b"XX garbage\r\n"
        self.accepted = 0
        self.record = False
        self.requests = bytearray()
        self._lsock, self.port = mcrig.listen(64)
        self._stop = False
        self._conns = []

    @property
    def addr(self):
        return mcrig.addr(self.port)

    def start(self):
        threading.Thread(target=self._accept_loop, daemon=True).start()
        return self

    def stop(self):
        self._stop = True
        try:
            self._lsock.close()
        except OSError:
            pass
        for s in list(self._conns):
            try:
                s.close()
            except OSError:
                pass

    def _accept_loop(self):
        while not self._stop:
            try:
                client, _ = self._lsock.accept()
            except OSError:
                return
            self.accepted += 1
            upstream = mcrig.connect(self.upstream_port, timeout=None)
            self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client, upstream):
        """Shuttle bytes both ways, applying the current fault to replies."""
        socks = [client, upstream]
        first = True
        try:
            while not self._stop:
                readable, _, _ = select.select(socks, [], [], 0.2)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        if self.mode == "close":
                            return
                        if self.record:
                            self.requests += data
                        upstream.sendall(data)
                        continue
                    if first and self.first_delay:
                        time.sleep(self.first_delay)
                    first = False
                    mode = self.mode
                    if mode == "hang":
                        continue
                    if mode == "delay":
                        time.sleep(self.delay)
                        client.sendall(data)
                    elif mode == "truncate":
                        client.sendall(data[:self.limit])
                        return
                    elif mode == "garble":
                        client.sendall(self.garbage)
                    else:
                        client.sendall(data)
        except OSError:
            return
        finally:
            for s in socks:
                try:
                    s.close()
                except OSError:
                    pass
