"""hostile — memcacheds that lie, flood, stall and refuse, for the robustness tests.

FaultProxy (faultproxy.py) breaks a reply; these break the protocol's
contract itself, the way a buggy proxy, a crashing server or a busy one does:

  HostileProxy(upstream_port)   a proxy in front of a real memcached that, on
      cue, sends an unsolicited reply some time after a correct one (stray),
      lets a request execute and then resets the client instead of answering
      (drop-after-execute), or, for the soak, does either at random along
      with delays past io_timeout and plain drops;
  LineServer()                  a fake server of text lines: each request line
      handed to the subclass's _answer, each connection's lines kept;
  DumpServer()                  a fake memcached whose "lru_crawler metadump"
      reply is scripted (then kept, closed, stalled or streamed forever),
      with "stats", the multi-get and "mn" of a little store of its own;
  HostileServer(behaviour)      a fake memcached that answers every request
      with an endless stream of "EN" lines, endless STAT lines with no END,
      STAT lines trickled a byte at a time, a key dump that never ends,
      stalls or is refused as busy, or a connection-limit refusal;
  SynBlackhole()                a port whose connects neither complete nor
      fail (its accept queue is full), to exercise connect_timeout;
  run_bounded(conn, sql)        run one statement with a hard wall-clock bound:
      past it, the test's own "way out" runs (typically stopping the hostile
      server so the backend errors out), then a cancel, then a terminate, so
      a backend that ignores interrupts never outlives the test;
  backend_rss_kb(pid)           VmRSS of a backend, from /proc.

Every server here runs in daemon threads of the test and stop() ends them;
no test leaves a listener or a runaway backend behind.  In the rig's
Unix-socket pass (mcrig.SOCKETS) the listeners are Unix sockets and `port`
is a path, except SynBlackhole's: a Unix socket's full accept queue refuses
a non-blocking connect at once (EAGAIN) instead of leaving it pending.
"""

import base64
import random
import select
import socket
import struct
import threading
import time

import mcrig

HOST = "127.0.0.1"

STRAY = b"VA 6\r\nPLANTD\r\n"


def request_tokens(data):
    """The opaque tokens (O<token>) of the meta requests in data, in order."""
    out = []
    for line in data.split(b"\r\n"):
        if line[:1] == b"m" and line[2:3] == b" ":
            out.extend(w[1:] for w in line.split()[2:] if w[:1] == b"O")
    return out


def _listener(backlog=64):
    """(socket, port or path): mcrig.listen()."""
    return mcrig.listen(backlog)


def _reset(sock):
    """Close with RST (SO_LINGER 0), as a crashing proxy does."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Listener:
    """A listening socket (mcrig.listen()) whose accepted connections are served by
    the subclass's _serve(sock), each in a daemon thread and closed when it
    returns (or raises OSError); `accepted` counts them, drop_all() closes
    them, stop() closes the listener too."""

    def __init__(self):
        self.accepted = 0
        self._stop = False
        self._lsock, self.port = _listener()
        self._conns = set()
        self._lock = threading.Lock()

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
        self.drop_all()

    def drop_all(self):
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _accept_loop(self):
        while not self._stop:
            try:
                c, _ = self._lsock.accept()
            except OSError:
                return
            self.accepted += 1
            with self._lock:
                self._conns.add(c)
            threading.Thread(target=self._serve_then_close, args=(c,), daemon=True).start()

    def _serve_then_close(self, c):
        try:
            self._serve(c)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(c)
            try:
                c.close()
            except OSError:
                pass


class HostileProxy(Listener):
    """A proxy in front of a real memcached; faults are armed by attribute.

        px = HostileProxy(mc.port).start()
        px.stray_next = 1          # after the next reply, inject `stray`
        px.drop_next = 1           # next request: execute, then reset client
        px.drop_match = b"md "     # ... counting only requests holding these bytes
        px.p_stray = 0.01 ...      # the soak's random faults (see _pump)
        px.stray_prepend = 1       # the reply to the next request holding
                                   # stray_match starts with `stray`: a late
                                   # reply that arrives after the next
                                   # pipeline is written; with stray_token = i,
                                   # `stray` % (the opaque token of the i-th
                                   # request of the connection's last request
                                   # chunk that had tokens): a reply to an
                                   # earlier run
    """

    def __init__(self, upstream_port):
        super().__init__()
        self.upstream_port = upstream_port
        self.stray = STRAY
        self.stray_delay = 0.05
        self.stray_next = 0         # replies still to be followed by a stray
        self.stray_after = None     # ... only a chunk ending so (b"MN\r\n": a pipeline's end)
        self.drop_next = 0          # requests still to be executed then dropped
        self.drop_match = None      # bytes: only requests holding them count for drop_next
        self.strays_sent = 0
        self.drops_done = 0
        # random faults, per reply chunk (soak)
        self.p_stray = 0.0
        self.p_delay = 0.0
        self.p_drop = 0.0
        self.p_drop_after_exec = 0.0
        self.delay = 0.3
        self.stray_choices = [STRAY]
        self.rng = random.Random(1)
        self.stray_prepend = 0      # requests still to have their reply led by the stray
        self.stray_match = b"mg "   # ... only requests holding these bytes count
        self.stray_token = None     # int: the stray is a template, see above
        self.prepends_sent = 0

    def _take(self, attr):
        with self._lock:
            n = getattr(self, attr)
            if n > 0:
                setattr(self, attr, n - 1)
                return True
            return False

    def _chance(self, p):
        if p <= 0:
            return False
        with self._lock:
            return self.rng.random() < p

    def _accept_loop(self):
        while not self._stop:
            try:
                client, _ = self._lsock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                upstream = mcrig.connect(self.upstream_port, timeout=2)
                upstream.settimeout(None)
            except OSError:
                _reset(client)      # upstream down (restart): refuse, as it would
                continue
            with self._lock:
                self._conns.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _inject_later(self, client, send_lock, data, delay):
        def go():
            time.sleep(delay)
            with send_lock:
                try:
                    client.sendall(data)
                    self.strays_sent += 1
                except OSError:
                    pass
        threading.Thread(target=go, daemon=True).start()

    def _prepend_for(self, data, last_tokens):
        """The stray to lead the reply to request chunk data with, or None."""
        if self.stray_match is not None and self.stray_match not in data:
            return None
        if not self._take("stray_prepend"):
            return None
        if self.stray_token is None:
            return self.stray
        tok = last_tokens[self.stray_token] if len(last_tokens) > self.stray_token else b"0"
        return self.stray % tok

    def _pump(self, client, upstream):
        socks = [client, upstream]
        send_lock = threading.Lock()
        last_tokens = []            # the opaque tokens of the last request chunk that had some
        prefix = None               # what leads the next reply chunk (stray_prepend)
        try:
            while not self._stop:
                readable, _, _ = select.select(socks, [], [], 0.2)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        lead = self._prepend_for(data, last_tokens)
                        if lead is not None:
                            prefix = lead
                        tokens = request_tokens(data)
                        if tokens:
                            last_tokens = tokens
                        upstream.sendall(data)
                        armed = self.drop_match is None or self.drop_match in data
                        if (armed and self._take("drop_next")) or self._chance(self.p_drop_after_exec):
                            # the server executes the request; its reply is lost
                            upstream.settimeout(2)
                            try:
                                upstream.recv(65536)
                            except OSError:
                                pass
                            self.drops_done += 1
                            _reset(client)
                            return
                        continue
                    if self._chance(self.p_drop):
                        _reset(client)
                        return
                    if self._chance(self.p_delay):
                        time.sleep(self.delay)
                    if prefix is not None:
                        data, prefix = prefix + data, None
                        self.prepends_sent += 1
                    with send_lock:
                        client.sendall(data)
                    if ((self.stray_after is None or data.endswith(self.stray_after))
                            and self._take("stray_next")):
                        self._inject_later(client, send_lock, self.stray, self.stray_delay)
                    elif self._chance(self.p_stray):
                        with self._lock:
                            stray = self.rng.choice(self.stray_choices)
                            delay = self.rng.choice((0.0, 0.001, 0.01, 0.05))
                        self._inject_later(client, send_lock, stray, delay)
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.difference_update(socks)
            for s in socks:
                try:
                    s.close()
                except OSError:
                    pass


ITEM = b"key=%s exp=-1 la=1700000000 cas=%d fetch=no cls=1 size=64\n"


def item(key, cas=1):
    """A metadump line of an item (memcached's own form)."""
    return ITEM % (key, cas)


class LineServer(Listener):
    """A fake server of text lines: each connection's request lines (ended
    by "\\r\\n") are kept in `conns` (one list a connection, in order) and
    handed to the subclass's _answer(sock, line, lines), lines being the
    connection's so far, which answers and returns False to close the
    connection."""

    def __init__(self):
        super().__init__()
        self.conns = []

    @property
    def requests(self):
        """The first request line of each connection."""
        return [lines[0] for lines in self.conns if lines]

    def _serve(self, c):
        lines = []
        self.conns.append(lines)
        buf = b""
        c.settimeout(None)
        while not self._stop:
            data = c.recv(65536)
            if not data:
                return
            buf += data
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                lines.append(line)
                if not self._answer(c, line, lines):
                    return

    def _answer(self, c, line, lines):
        raise NotImplementedError


class DumpServer(LineServer):
    """A fake memcached whose metadump reply is `script`: (bytes, then),
    then one of "keep" (go on serving the connection), "close", "stall"
    (silent, open) or "forever" (item lines with distinct keys, from
    `forever_key`, no END).  With `every_request`, every request line is
    answered so, whatever it asks ("stats" included).  `late` bytes go
    `late_delay` s after a kept reply.  "stats" says `stats_items` items
    (None: as many as `values` holds; "omitted": no curr_items line); "mg" reads `values`; `sent` counts
    the bytes of dump replies."""

    def __init__(self):
        super().__init__()
        self.script = (b"END\r\n", "keep")
        self.every_request = False
        self.forever_key = b"t:f%d"
        self.late = None
        self.late_delay = 0.1
        self.values = {b"t:a": b"A", b"t:b": b"B", b"t:c": b"C"}
        self.stats_items = None
        self.sent = 0

    def _dump(self, c):
        payload, then = self.script
        c.sendall(payload)
        self.sent += len(payload)
        if then == "close":
            return False
        if then == "stall":
            while not self._stop:
                time.sleep(0.05)
            return False
        if then == "forever":
            i = 0
            while not self._stop:
                chunk = b"".join(item(self.forever_key % j) for j in range(i, i + 5000))
                c.sendall(chunk)
                self.sent += len(chunk)
                i += 5000
            return False
        if self.late is not None:
            time.sleep(self.late_delay)
            c.sendall(self.late)
        return True

    def _answer(self, c, line, lines):
        words = line.split(b" ")
        if words[0] == b"lru_crawler" or self.every_request:
            return self._dump(c)
        if words[0] == b"stats":
            items = len(self.values) if self.stats_items is None else self.stats_items
            c.sendall(b"STAT pid 1\r\n" + (b"STAT curr_items %d\r\n" % items if items != "omitted" else b"")
                      + b"END\r\n")
        elif words[0] == b"mg" and len(words) > 1:
            c.sendall(self._mg(words))
        elif words[0] == b"mn":
            c.sendall(b"MN\r\n")
        elif line:
            c.sendall(b"ERROR\r\n")
        return True

    def _mg(self, words):
        """The reply to a meta get, from `values`."""
        key, flags = words[1], words[2:]
        if b"b" in flags:
            key = base64.b64decode(key)
        value = self.values.get(key)
        out = []
        for f in flags:
            if f[:1] == b"O":
                out.append(f)
            elif f == b"k":
                out.append(b"k" + words[1])
            elif f == b"b":
                out.append(b"b")
            elif value is not None and f == b"f":
                out.append(b"f0")
            elif value is not None and f == b"c":
                out.append(b"c7")
            elif value is not None and f == b"s":
                out.append(b"s%d" % len(value))
            elif value is not None and f == b"t":
                out.append(b"t-1")
        if value is None:
            return b"" if b"q" in flags else b" ".join([b"EN"] + out) + b"\r\n"
        if b"v" in flags:
            return b" ".join([b"VA %d" % len(value)] + out) + b"\r\n" + value + b"\r\n"
        return b" ".join([b"HD"] + out) + b"\r\n"


# HostileServer's key dump behaviours, as DumpServer scripts answering every request
DUMP_BEHAVIOURS = {
    "dump_forever": (b"", "forever"),
    "dump_stall": (b"key=stall exp=-1 la=1 cas=1 fetch=no cls=1 size=60\n", "stall"),
    "dump_busy": (b"BUSY currently processing crawler request\r\n", "keep"),
}
# ... and those that answer request lines one by one (LineServer's)
LINE_BEHAVIOURS = set(DUMP_BEHAVIOURS) | {"old_miss", "reorder", "wrong_opaque", "hd_hits"}


class HostileServer(DumpServer):
    """A fake memcached whose every connection runs one behaviour:

      endless_en      after the first request bytes, "EN\\r\\n" forever
      stats_forever   after the first request bytes, STAT lines forever, no END
      stats_trickle   after the first request bytes, STAT lines one byte per
                      `trickle` seconds, forever
      huge_va         after the first request bytes, a VA header announcing
                      a value of 1,000,000,000 bytes, then zeros forever
      trickle_hd      after the first request bytes, "HD O<t0>", "HD O<t1>",
                      ... (the opaque tokens of those requests in turn, then
                      "HD O<n>" with n counting on, as for requests without
                      tokens) one byte per `trickle` seconds, forever: a
                      reply that keeps making progress and never ends
      garbage         after the first request bytes, binary junk forever
      conn_limit      at accept, "ERROR Too many open connections" and close
                      (what memcached does at its -c limit)
      old_miss        every request line answered "EN" without its opaque
                      token, as memcached before 1.6.18 answers a miss
      dump_forever    after the first request bytes, metadump item lines
                      with distinct keys forever, no END
      dump_trickle    after the first request bytes, metadump item lines one
                      byte per `trickle` seconds, forever
      dump_stall      after the first request bytes, one metadump line, then
                      silence (the socket stays open)
      dump_busy       every request answered "BUSY currently processing
                      crawler request", as memcached does while a crawl runs
      reorder         a pipelined multi-get ("mg <key> ... O<n> q" lines,
                      then "mn") answered with every key a hit whose value
                      is the key itself, in reverse order: each reply's
                      opaque names a key other than the one it answers in
                      turn (the meta protocol's "wrong key in VALUE line")
      wrong_opaque    the same, every hit carrying an opaque no request had
      hd_hits         the same requests answered in order with "HD O<n>": a
                      hit without the value every request asked for

    `sent` counts bytes written; `requests` holds the first request line of
    each connection of the dump_* behaviours (DumpServer's scripts, every
    request answered as a dump); stop() ends every stream and closes.
    """

    def __init__(self, behaviour, trickle=0.1):
        super().__init__()
        self.behaviour = behaviour
        self.trickle = trickle
        if behaviour in DUMP_BEHAVIOURS:
            self.script = DUMP_BEHAVIOURS[behaviour]
            self.every_request = True
            self.forever_key = b"t:forever%d"

    def _serve(self, c):
        try:
            if self.behaviour == "conn_limit":
                c.sendall(b"ERROR Too many open connections\r\n")
                return
            if self.behaviour in LINE_BEHAVIOURS:
                super()._serve(c)
                return
            c.settimeout(30)
            first = c.recv(65536)
            if not first:
                return
            tokens = request_tokens(first)
            if self.behaviour == "endless_en":
                chunk = b"EN\r\n" * (256 * 1024)     # 1 MB per send
            elif self.behaviour == "stats_forever":
                chunk = b"".join(b"STAT item_%08d %s\r\n" % (i, b"x" * 40) for i in range(16384))
            elif self.behaviour in ("stats_trickle", "dump_trickle"):
                chunk = None
            elif self.behaviour == "trickle_hd":
                chunk = None
            elif self.behaviour == "garbage":
                chunk = bytes(range(256)) * 4096 + b"\r\n"
            elif self.behaviour == "huge_va":
                c.sendall(b"VA 1000000000 O0 f0\r\n")
                chunk = b"\0" * (1024 * 1024)
            else:
                raise ValueError(self.behaviour)
            c.settimeout(None)
            i = 0
            while not self._stop:
                if chunk is None:
                    if self.behaviour == "trickle_hd":
                        line = b"HD O%s\r\n" % (tokens[i] if i < len(tokens) else b"%d" % i)
                    elif self.behaviour == "dump_trickle":
                        line = b"key=trickle%d exp=-1 la=1 cas=1 fetch=no cls=1 size=60\n" % i
                    else:
                        line = b"STAT trickle_%d 1\r\n" % i
                    for b in line:
                        if self._stop:
                            return
                        c.sendall(bytes([b]))
                        self.sent += 1
                        time.sleep(self.trickle)
                    i += 1
                else:
                    c.sendall(chunk)
                    self.sent += len(chunk)
        except OSError:
            return

    def _answer(self, c, line, lines):
        """The behaviours of request lines (see the class comment): a dump's
        (DumpServer's), a miss of old, a pipelined multi-get's."""
        if self.behaviour in DUMP_BEHAVIOURS:
            return super()._answer(c, line, lines)
        if self.behaviour == "old_miss":
            out = b"EN\r\n" if line else b""
        elif line == b"mn":
            out = self._multi_get(lines)
        elif line and not line.startswith(b"mg "):
            out = b"EN\r\n"
        else:
            out = b""
        c.sendall(out)
        self.sent += len(out)
        return True

    def _multi_get(self, lines):
        """reorder, wrong_opaque, hd_hits: the replies to the gets since the
        last "mn", then its MN."""
        asked = []
        for line in reversed(lines[:-1]):
            if line == b"mn":
                break
            words = line.split(b" ")
            if words[0] == b"mg" and len(words) > 1:
                opaque = [w[1:] for w in words if w.startswith(b"O")]
                asked.insert(0, (words[1], opaque[0] if opaque else b"0"))
        if self.behaviour == "hd_hits":
            return b"".join(b"HD O%s\r\n" % o for _, o in asked) + b"MN\r\n"
        out = b""
        for i, (key, opaque) in enumerate(reversed(asked)):
            if self.behaviour == "wrong_opaque":
                opaque = b"%d" % (900000 + i)
            out += b"VA %d f0 O%s\r\n%s\r\n" % (len(key), opaque, key)
        return out + b"MN\r\n"


class SynBlackhole:
    """A port whose connects hang: a listener with a full accept queue, so
    the kernel drops further SYNs (no refusal, no completion)."""

    def __init__(self):
        self._l = socket.socket()
        self._l.bind((HOST, 0))
        self._l.listen(0)
        self.port = self._l.getsockname()[1]
        # one completed handshake fills a backlog-0 queue; later SYNs are dropped
        self._fill = [socket.create_connection((HOST, self.port), timeout=2)]

    def blocks(self, timeout=0.5):
        """True when a connect to it does hang (checked, not assumed)."""
        s = socket.socket()
        s.settimeout(timeout)
        try:
            s.connect((HOST, self.port))
            self._fill.append(s)
            return False
        except socket.timeout:
            s.close()
            return True
        except OSError:
            s.close()
            return False

    @property
    def addr(self):
        return "%s:%d" % (HOST, self.port)

    def stop(self):
        for s in self._fill + [self._l]:
            s.close()


def backend_rss_kb(pid):
    """VmRSS of process pid in kB (0 once it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Outcome:
    """What run_bounded saw: elapsed seconds, the error (pgcode, first line)
    or None, the rows, and which escalations were needed."""

    def __init__(self):
        self.elapsed = None
        self.error = None
        self.detail = None
        self.pgcode = None
        self.rows = None
        self.overran = False        # not done within the bound
        self.needed_cancel = False  # not done even after the way out
        self.needed_terminate = False
        self.stuck = False          # not done even after terminate

    def __repr__(self):
        return ("Outcome(elapsed=%.2f, pgcode=%r, error=%r, detail=%r, rows=%r, overran=%r, "
                "cancel=%r, terminate=%r, stuck=%r)"
                % (self.elapsed or -1, self.pgcode, self.error, self.detail, self.rows, self.overran,
                   self.needed_cancel, self.needed_terminate, self.stuck))


def run_bounded(conn, sql, args=None, bound=10.0, way_out=None, admin=None,
                during=None):
    """Run sql on conn in a thread; give it `bound` seconds.

    Past the bound: way_out() (e.g. hostile.stop()), then 5 s later a cancel,
    then 5 s later pg_terminate_backend through admin (a separate
    connection).  during(elapsed) is called every 50 ms while it runs (to
    watch memory, or to cancel from another session); if it returns True,
    way_out() runs at once.  Returns an Outcome.
    """
    out = Outcome()
    pid = None
    if admin is not None:
        pid = conn.get_backend_pid()

    def work():
        try:
            cur = conn.cursor()
            cur.execute(sql, args)
            out.rows = cur.fetchall() if cur.description else None
        except Exception as e:  # noqa: BLE001
            out.pgcode = getattr(e, "pgcode", None)
            lines = str(e).splitlines() or [""]
            out.error = lines[0]
            out.detail = " ".join(lines[1:])

    th = threading.Thread(target=work, daemon=True)
    t0 = time.monotonic()
    th.start()
    while th.is_alive() and time.monotonic() - t0 < bound:
        th.join(0.05)
        if during is not None and th.is_alive() and during(time.monotonic() - t0):
            out.overran = True
            break
    if th.is_alive():
        out.overran = True
        out.elapsed = time.monotonic() - t0
        if way_out is not None:
            way_out()
        th.join(5)
    if th.is_alive():
        out.needed_cancel = True
        conn.cancel()
        th.join(5)
    if th.is_alive() and admin is not None and pid is not None:
        out.needed_terminate = True
        admin.cursor().execute("SELECT pg_terminate_backend(%s)", (pid,))
        th.join(5)
    if th.is_alive():
        out.stuck = True
    if out.elapsed is None:
        out.elapsed = time.monotonic() - t0
    return out
