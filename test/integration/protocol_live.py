#!/usr/bin/python3
"""protocol_live.py - check src/core/protocol.c against a real memcached.

Owns: the assumptions the protocol module makes about the server, checked
on the wire: base64 keys are accepted and name the same item as the raw
key, the key limits match, and every reply shape the parser handles comes
back as the parser expects.  Must not: touch any memcached it did not start.

It starts a private memcached on a free loopback port (bound to port 0 to
find one) and kills it at exit, compiles src/core/protocol.c into a shared
library and drives the real encoders and parser through ctypes, so what is
tested is the C code, not a Python copy of it.  Prints TAP; exits 1 on any
failure.  Skips (1..0) when memcached or a C compiler is missing.

Usage: python3 test/integration/protocol_live.py
"""
import atexit
import base64
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src", "core")

count = 0
failed = 0
cleanups = []


def ok(cond, name, diag=None):
    """One TAP point; diag is printed only when it fails."""
    global count, failed
    count += 1
    if not cond:
        failed += 1
    print("%sok %d - %s" % ("" if cond else "not ", count, name))
    if not cond and diag is not None:
        for line in str(diag).splitlines()[:20]:
            print("# " + line)
    sys.stdout.flush()
    return cond


def skip_all(why):
    print("1..0 # SKIP " + why)
    sys.exit(0)


def cleanup():
    while cleanups:
        try:
            cleanups.pop()()
        except Exception:
            pass


atexit.register(cleanup)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, lambda *_: sys.exit(1))


# --- build the C module ---------------------------------------------------

def build():
    """Compile protocol.c and request.c as a shared library plus a layout probe."""
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc") or shutil.which("clang")
    if cc is None:
        skip_all("no C compiler to build src/core/protocol.c and src/core/request.c")
    work = tempfile.mkdtemp(prefix="mcfdw_live.")
    cleanups.append(lambda: shutil.rmtree(work, ignore_errors=True))
    so = os.path.join(work, "libmcproto.so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I" + SRC,
                    os.path.join(SRC, "protocol.c"), os.path.join(SRC, "request.c"), "-o", so], check=True)
    probe = os.path.join(work, "probe.c")
    with open(probe, "w") as f:
        f.write("""
#include <stddef.h>
#include <stdio.h>
#include "protocol.h"
#define P(x) printf("%s %ld\\n", #x, (long) (x))
int main(void) {
  P(sizeof(McReply)); P(offsetof(McReply, present)); P(offsetof(McReply, stat_value_len));
  P(sizeof(McReqOpts)); P(offsetof(McReqOpts, mode)); P(offsetof(McReqOpts, opaque_len));
  P(MC_REPLY_NEED_MORE); P(MC_REPLY_VA); P(MC_REPLY_HD); P(MC_REPLY_EN); P(MC_REPLY_NS);
  P(MC_REPLY_EX); P(MC_REPLY_NF); P(MC_REPLY_MN); P(MC_REPLY_STAT); P(MC_REPLY_END);
  P(MC_REPLY_ERROR); P(MC_REPLY_CLIENT_ERROR); P(MC_REPLY_SERVER_ERROR); P(MC_REPLY_BAD);
  P(MC_F_VALUE); P(MC_F_FLAGS); P(MC_F_KEY); P(MC_F_CAS); P(MC_F_TTL); P(MC_F_SIZE);
  P(MC_F_B64); P(MC_F_OPAQUE); P(MC_F_WIN); P(MC_F_STALE); P(MC_F_WON);
  P(MC_KEY_OK); P(MC_KEY_EMPTY); P(MC_KEY_TOO_LONG); P(MC_REQ_HEADER_MAX); P(MC_KEY_MAX);
  return 0;
}
""")
    exe = os.path.join(work, "probe")
    subprocess.run([cc, "-I" + SRC, probe, "-o", exe], check=True)
    consts = {}
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
        name, value = line.rsplit(" ", 1)
        consts[name] = int(value)
    return ctypes.CDLL(so), consts


class McReply(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("consumed", ctypes.c_size_t),
                ("need", ctypes.c_size_t), ("header_len", ctypes.c_size_t),
                ("value_off", ctypes.c_size_t), ("value_len", ctypes.c_size_t),
                ("present", ctypes.c_uint), ("client_flags", ctypes.c_uint32),
                ("cas", ctypes.c_uint64), ("ttl", ctypes.c_int64),
                ("size", ctypes.c_uint64), ("key_off", ctypes.c_size_t),
                ("key_len", ctypes.c_size_t), ("opaque_off", ctypes.c_size_t),
                ("opaque_len", ctypes.c_size_t), ("msg_off", ctypes.c_size_t),
                ("msg_len", ctypes.c_size_t), ("stat_value_off", ctypes.c_size_t),
                ("stat_value_len", ctypes.c_size_t)]


class McReqOpts(ctypes.Structure):
    _fields_ = [("want", ctypes.c_uint), ("quiet", ctypes.c_bool),
                ("has_ttl", ctypes.c_bool), ("ttl", ctypes.c_int64),
                ("has_cas", ctypes.c_bool), ("cas", ctypes.c_uint64),
                ("has_client_flags", ctypes.c_bool), ("client_flags", ctypes.c_uint32),
                ("mode", ctypes.c_char), ("has_delta", ctypes.c_bool),
                ("delta", ctypes.c_uint64), ("has_initial", ctypes.c_bool),
                ("initial", ctypes.c_uint64), ("has_vivify_ttl", ctypes.c_bool),
                ("vivify_ttl", ctypes.c_int64), ("has_recache_ttl", ctypes.c_bool),
                ("recache_ttl", ctypes.c_int64), ("no_bump", ctypes.c_bool),
                ("invalidate", ctypes.c_bool),
                ("opaque", ctypes.c_char_p), ("opaque_len", ctypes.c_size_t)]


lib, C = build()
lib.mc_parse_reply.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(McReply)]
lib.mc_parse_reply.restype = ctypes.c_int
lib.mc_key_check.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_bool)]
lib.mc_key_check.restype = ctypes.c_int
lib.mc_b64_encode.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
lib.mc_b64_encode.restype = ctypes.c_size_t
lib.mc_encode_request.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                  ctypes.c_size_t, ctypes.c_bool, ctypes.c_long,
                                  ctypes.POINTER(McReqOpts)]
lib.mc_encode_request.restype = ctypes.c_size_t
class McTag(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char * 8), ("word", ctypes.c_uint64),
                ("mask", ctypes.c_uint64), ("len", ctypes.c_uint32)]


lib.mc_tag_make.argtypes = [ctypes.POINTER(McTag), ctypes.c_uint32]
lib.mc_tag_make.restype = None
lib.mc_encode_get_opaque.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_bool, ctypes.c_bool, ctypes.POINTER(McTag),
                                     ctypes.c_uint32]
lib.mc_encode_get_opaque.restype = ctypes.c_size_t
lib.mc_encode_noop.argtypes = [ctypes.c_char_p]
lib.mc_encode_noop.restype = ctypes.c_size_t

layout_ok = (ctypes.sizeof(McReply) == C["sizeof(McReply)"] and
             McReply.present.offset == C["offsetof(McReply, present)"] and
             McReply.stat_value_len.offset == C["offsetof(McReply, stat_value_len)"] and
             ctypes.sizeof(McReqOpts) == C["sizeof(McReqOpts)"] and
             McReqOpts.mode.offset == C["offsetof(McReqOpts, mode)"] and
             McReqOpts.opaque_len.offset == C["offsetof(McReqOpts, opaque_len)"])
if not ok(layout_ok, "ctypes mirror of McReply/McReqOpts matches protocol.h"):
    print("1..%d" % count)
    sys.exit(1)

TYPE = {C[k]: k[len("MC_REPLY_"):] for k in C if k.startswith("MC_REPLY_")}
F = {k[len("MC_F_"):]: C[k] for k in C if k.startswith("MC_F_")}


# --- helpers around the C functions ----------------------------------------

def key_encode(raw):
    """The wire form of a key as keys.c builds it: mc_key_check, then
    mc_b64_encode when the key must go base64."""
    b64 = ctypes.c_bool()
    st = lib.mc_key_check(raw, len(raw), ctypes.byref(b64))
    if st != C["MC_KEY_OK"]:
        return st, b"", False
    if not b64.value:
        return st, raw, False
    out = ctypes.create_string_buffer(4 * ((len(raw) + 2) // 3) + 1)
    n = lib.mc_b64_encode(raw, len(raw), out)
    return st, out.raw[:n], True


def request(cmd, wkey, b64, datalen=-1, **kw):
    o = McReqOpts()
    for k, v in kw.items():
        if k == "opaque":
            o.opaque = v
            o.opaque_len = len(v)
        elif k == "mode":
            o.mode = v
        else:
            setattr(o, k, v)
    dst = ctypes.create_string_buffer(C["MC_REQ_HEADER_MAX"])
    n = lib.mc_encode_request(dst, cmd, wkey, len(wkey), b64, datalen, ctypes.byref(o))
    assert n > 0
    return dst.raw[:n]


TAG = McTag()
lib.mc_tag_make(ctypes.byref(TAG), 123456)
TAGTEXT = TAG.text[:TAG.len]


def get_opaque(wkey, b64, pos, want_flags=True):
    """The multi-get's pipelined request, mg <key> [b] v [f] O<tag><pos> q
    (the tag of sequence number 123456)."""
    dst = ctypes.create_string_buffer(C["MC_REQ_HEADER_MAX"])
    n = lib.mc_encode_get_opaque(dst, wkey, len(wkey), b64, want_flags, ctypes.byref(TAG), pos)
    return dst.raw[:n]


def tag_pos(opaque):
    """The position of a token get_opaque wrote (its tag checked), else -1."""
    if not opaque or not opaque.startswith(TAGTEXT) or not opaque[len(TAGTEXT):].isdigit():
        return -1
    return int(opaque[len(TAGTEXT):])


def noop():
    dst = ctypes.create_string_buffer(8)
    n = lib.mc_encode_noop(dst)
    return dst.raw[:n]


class Reply:
    """A parsed reply with its bytes, for readable assertions."""

    def __init__(self, buf, r):
        self.raw = buf[:r.consumed]
        self.type = TYPE[r.type]
        self.r = r
        self.present = r.present
        self.value = buf[r.value_off:r.value_off + r.value_len]
        self.key = buf[r.key_off:r.key_off + r.key_len] if r.present & F["KEY"] else None
        self.opaque = buf[r.opaque_off:r.opaque_off + r.opaque_len] if r.present & F["OPAQUE"] else None
        self.msg = buf[r.msg_off:r.msg_off + r.msg_len]
        self.stat_value = buf[r.stat_value_off:r.stat_value_off + r.stat_value_len]
        self.flags = r.client_flags if r.present & F["FLAGS"] else None
        self.cas = r.cas if r.present & F["CAS"] else None
        self.ttl = r.ttl if r.present & F["TTL"] else None
        self.size = r.size if r.present & F["SIZE"] else None
        self.b64 = bool(r.present & F["B64"])

    def key_matches(self, raw):
        """Does the echoed k name raw?  base64 only when the reply says b."""
        if self.key is None:
            return False
        return (base64.b64decode(self.key, validate=True) if self.b64 else self.key) == raw

    def __repr__(self):
        return "%s %r" % (self.type, self.raw[:200])


# --- a private memcached ----------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_memcached():
    binary = shutil.which("memcached") or ("/usr/bin/memcached" if os.path.exists("/usr/bin/memcached") else None)
    if binary is None:
        skip_all("memcached not installed")
    for _attempt in range(5):
        port = free_port()
        args = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64"]
        if os.geteuid() == 0:
            args += ["-u", "nobody"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def stop(p=proc):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
        cleanups.append(stop)
        deadline = time.time() + 5
        while time.time() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return port, binary
            except OSError:
                time.sleep(0.05)
        stop()
    skip_all("could not start memcached")


PORT, BINARY = start_memcached()


class Conn:
    """One connection; replies are split by the C parser, never by Python."""

    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def reply(self):
        """Next complete reply; reads exactly what the parser says is missing."""
        while True:
            r = McReply()
            t = lib.mc_parse_reply(self.buf, len(self.buf), ctypes.byref(r))
            if TYPE[t] != "NEED_MORE":
                rep = Reply(self.buf, r)
                if rep.type == "BAD":
                    raise AssertionError("BAD reply: %r" % self.buf[:200])
                self.buf = self.buf[r.consumed:]
                return rep
            chunk = self.s.recv(max(r.need, 65536))
            if not chunk:
                raise AssertionError("connection closed")
            self.buf += chunk

    def until(self, last, data=None):
        """Send data, collect replies up to and including one of type last."""
        if data is not None:
            self.send(data)
        out = []
        while True:
            rep = self.reply()
            out.append(rep)
            if rep.type == last:
                return out

    def raw_until(self, marker):
        """Text-protocol helper: read raw bytes until marker."""
        while marker not in self.buf:
            self.buf += self.s.recv(65536)
        i = self.buf.index(marker) + len(marker)
        data, self.buf = self.buf[:i], self.buf[i:]
        return data


def ms(conn, raw, value, **kw):
    st, wkey, b64 = key_encode(raw)
    assert st == C["MC_KEY_OK"], (raw, st)
    conn.send(request(b"ms", wkey, b64, len(value), **kw) + value + b"\r\n")
    return conn.reply()


# --- checks -----------------------------------------------------------------

c = Conn()
version = c.until("END", b"stats\r\n")
ver = [r.stat_value for r in version if r.type == "STAT" and r.msg == b"version"]
print("# memcached %s at 127.0.0.1:%d (%s)" % (ver[0].decode() if ver else "?", PORT, BINARY))
ok(all(r.type in ("STAT", "END") for r in version) and len(version) > 20,
   "stats: %d STAT lines then END, all parsed" % (len(version) - 1))

# keys: raw, base64, and the same item either way
keys = [b"plain:key", b"with space", b"tab\there", b"nul\x00byte", b"del\x7f",
        b"caf\xc3\xa9", b"\xff\xfe\x80", b"\r\nmn\r\n", b"x" * 250, bytes(range(1, 187))]
for i, raw in enumerate(keys):
    value = b"value-%d\r\nwith CRLF inside" % i
    st, wkey, b64 = key_encode(raw)
    rep = ms(c, raw, value, has_client_flags=True, client_flags=i + 1)
    ok(rep.type == "HD", "ms accepts key %r as %s" % (raw[:24], "base64" if b64 else "raw"), rep)
    c.send(get_opaque(wkey, b64, i) + noop())
    reps = c.until("MN")
    va = reps[0]
    ok(len(reps) == 2 and va.type == "VA" and va.value == value and va.flags == i + 1 and
       va.opaque == TAGTEXT + b"%d" % i,
       "mg [b] v f O q finds it again (%s key)" % ("base64" if b64 else "raw"), reps)
    c.send(request(b"mg", wkey, b64, want=F["KEY"]))
    rep = c.reply()
    ok(rep.type == "HD" and rep.key_matches(raw) and rep.b64 == b64,
       "mg [b] k echoes the key %s" % ("base64 with b" if b64 else "raw"), rep)

# the raw key reaches the item stored through its base64 form, and back
for raw in (b"caf\xc3\xa9", b"\xff\xfe\x80", b"plain:key"):
    st, wkey, b64 = key_encode(raw)
    c.send(b"get " + raw + b"\r\n")
    data = c.raw_until(b"END\r\n")
    ok(data.startswith(b"VALUE " + raw + b" "),
       "text-protocol get of raw %r reaches the item set via %s" % (raw, "b" if b64 else "raw key"), data)
c.send(b"set rawonly 7 0 2\r\nhi\r\n")
c.raw_until(b"\r\n")
st, wkey, b64 = key_encode(b"rawonly")
c.send(request(b"mg", b"cmF3b25seQ==", True, want=F["VALUE"] | F["KEY"] | F["FLAGS"]))
rep = c.reply()
ok(rep.type == "VA" and rep.value == b"hi" and rep.key == b"rawonly" and not rep.b64 and
   rep.key_matches(b"rawonly"),
   "an item stored raw, fetched with b: k comes back raw, no b", rep)

# key limits: ours match the server's
st186, w186, b186 = key_encode(b"\xe9" * 186)
st187, _, _ = key_encode(b"\xe9" * 187)
c.send(request(b"mg", w186, True, want=F["VALUE"]) + noop())
reps = c.until("MN")
ok(st186 == C["MC_KEY_OK"] and len(w186) == 248 and reps[0].type == "EN",
   "186-byte binary key = 248 base64 bytes: the server takes it (EN, a miss)", reps)
ok(st187 == C["MC_KEY_TOO_LONG"], "187-byte binary key is refused locally")
c.send(b"mg " + b"QUFB" * 63 + b" b v\r\n" + noop())
reps = c.until("MN")
ok(reps[0].type == "CLIENT_ERROR", "the server refuses a 252-byte base64 key (so must we)", reps)
c.send(b"mg Zm9vMw b v\r\n" + noop())
reps = c.until("MN")
ok(reps[0].type == "CLIENT_ERROR" and b"decoding" in reps[0].msg,
   "the server refuses unpadded base64 (so padding is required)", reps)
st, w251, b = key_encode(b"k" * 251)
ok(st == C["MC_KEY_TOO_LONG"], "251-byte printable key is refused locally")

# the pipelined multi-get: hits, misses (silent), MN
batch = b""
names = [b"mget:%d" % i for i in range(20)]
for i, k in enumerate(names):
    if i % 3 != 0:
        ms(c, k, b"v%d" % i)
    st, wkey, b64 = key_encode(k)
    batch += get_opaque(wkey, b64, i, want_flags=(i % 2 == 0))
reps = c.until("MN", batch + noop())
hits = [r for r in reps if r.type == "VA"]
ok(len(hits) == len([i for i in range(20) if i % 3]) and reps[-1].type == "MN" and
   [tag_pos(r.opaque) for r in hits] == [i for i in range(20) if i % 3] and
   all(r.value == b"v%d" % tag_pos(r.opaque) for r in hits),
   "pipelined mg v [f] O q x20 + mn: %d hits in order, misses silent, MN last" % len(hits), reps)
ok(all((r.flags is not None) == (tag_pos(r.opaque) % 2 == 0) for r in hits),
   "f comes back exactly when asked for")

# mg with s t c, T before t, and EN with k/O
ms(c, b"shape", b"bar", has_ttl=True, ttl=1000)
c.send(request(b"mg", b"shape", False, want=F["VALUE"] | F["SIZE"] | F["TTL"] | F["CAS"]))
rep = c.reply()
ok(rep.type == "VA" and rep.size == 3 and rep.ttl == 1000 and rep.cas and rep.value == b"bar",
   "mg v s t c: VA with s, t and c", rep)
c.send(request(b"mg", b"shape", False, has_ttl=True, ttl=99, want=F["TTL"]))
rep = c.reply()
ok(rep.type == "HD" and rep.ttl == 99, "mg T99 t (our order): t reports the new TTL", rep)
c.send(b"mg shape t T77\r\n")
rep = c.reply()
ok(rep.type == "HD" and rep.ttl == 99, "mg t T77 (other order): t reports the old TTL", rep)
c.send(request(b"mg", b"nosuch", False, want=F["VALUE"] | F["KEY"], opaque=b"o42"))
rep = c.reply()
ok(rep.type == "EN" and rep.key == b"nosuch" and rep.opaque == b"o42",
   "miss without q: EN echoes k and O (1.6.18)", rep)
st, wkey, b64 = key_encode(b"\x00\xffmiss")
c.send(request(b"mg", wkey, b64, want=F["VALUE"] | F["KEY"], opaque=b"5"))
rep = c.reply()
ok(rep.type == "EN" and rep.b64 and rep.key_matches(b"\x00\xffmiss"),
   "binary-key miss: EN k<base64> b", rep)

# ms replies
rep = ms(c, b"msk", b"1", want=F["KEY"] | F["CAS"], opaque=b"9")
ok(rep.type == "HD" and rep.key == b"msk" and rep.opaque == b"9" and rep.cas,
   "ms k O c: HD with k, O and c", rep)
cas = rep.cas
rep = ms(c, b"msk", b"2", mode=b"E")
ok(rep.type == "NS", "ms ME (add) on an existing key: NS", rep)
rep = ms(c, b"msk", b"2", has_cas=True, cas=cas + 1000)
ok(rep.type == "EX", "ms C<wrong cas>: EX", rep)
rep = ms(c, b"msk", b"2", has_cas=True, cas=cas)
ok(rep.type == "HD", "ms C<right cas>: HD", rep)
rep = ms(c, b"nokey", b"2", mode=b"R")
ok(rep.type == "NS", "ms MR (replace) on a missing key: NS", rep)
c.send(request(b"ms", b"quiet", False, 1, quiet=True) + b"q\r\n" + noop())
reps = c.until("MN")
ok(len(reps) == 1, "ms q: success is silent", reps)
c.send(request(b"ms", b"big", False, 2000000) + b"x" * 2000000 + b"\r\n" + noop())
reps = c.until("MN")
ok(reps[0].type == "SERVER_ERROR" and b"too large" in reps[0].msg and len(reps) == 2,
   "value over the item size limit: SERVER_ERROR, data swallowed", reps)

# md replies
c.send(request(b"md", b"msk", False))
ok(c.reply().type == "HD", "md: HD")
c.send(request(b"md", b"msk", False, want=F["KEY"], opaque=b"1"))
rep = c.reply()
ok(rep.type == "NF" and rep.key == b"msk" and rep.opaque == b"1", "md on a miss: NF with k and O", rep)
c.send(request(b"md", b"msk", False, quiet=True) + noop())
reps = c.until("MN")
ok(reps[0].type == "NF", "md q on a miss: NF is still sent", reps)

# ma replies
ms(c, b"ctr", b"5")
c.send(request(b"ma", b"ctr", False, want=F["VALUE"]))
rep = c.reply()
ok(rep.type == "VA" and rep.value == b"6", "ma v: VA with the new value", rep)
c.send(request(b"ma", b"ctr", False, mode=b"D", has_delta=True, delta=2,
               want=F["VALUE"] | F["TTL"] | F["CAS"] | F["KEY"]))
rep = c.reply()
ok(rep.type == "VA" and rep.value == b"4" and rep.ttl == -1 and rep.cas and rep.key == b"ctr",
   "ma MD D2 v t c k: VA 4 with t-1, c and k", rep)
c.send(request(b"ma", b"ctr-miss", False, want=F["VALUE"]))
ok(c.reply().type == "NF", "ma on a miss: NF")
c.send(request(b"ma", b"ctr-new", False, has_vivify_ttl=True, vivify_ttl=0, has_initial=True,
               initial=10, want=F["VALUE"]))
rep = c.reply()
ok(rep.type == "VA" and rep.value == b"10", "ma N0 J10 v on a miss: VA 10 (auto-created)", rep)
c.send(request(b"ma", b"ctr", False, quiet=True, want=F["VALUE"]) + noop())
reps = c.until("MN")
ok(len(reps) == 1, "ma q v: even the VA is suppressed on 1.6.18 (never combine q with v on ma)", reps)
ms(c, b"txt", b"abc")
c.send(request(b"ma", b"txt", False))
rep = c.reply()
ok(rep.type == "CLIENT_ERROR" and b"non-numeric" in rep.msg, "ma on a non-number: CLIENT_ERROR", rep)

# leases: W / Z, stale: X
c.send(request(b"mg", b"lease", False, has_vivify_ttl=True, vivify_ttl=30, want=F["VALUE"] | F["TTL"]) +
       request(b"mg", b"lease", False, has_vivify_ttl=True, vivify_ttl=30, want=F["VALUE"] | F["TTL"]))
r1, r2 = c.reply(), c.reply()
ok(r1.type == "VA" and r1.value == b"" and r1.present & F["WIN"] and
   r2.type == "VA" and r2.present & F["WON"],
   "mg N30: first gets VA 0 W, second VA 0 Z", (r1, r2))
ms(c, b"stale", b"z")
c.send(request(b"md", b"stale", False, invalidate=True, has_ttl=True, ttl=30) +
       request(b"mg", b"stale", False, want=F["VALUE"] | F["CAS"]))
rep_md, rep = c.reply(), c.reply()
ok(rep_md.type == "HD" and rep.type == "VA" and rep.present & F["STALE"] and rep.present & F["WIN"],
   "md I T30 then mg: VA with X and W", (rep_md, rep))

# errors and stats families
c.send(b"bogus\r\n")
ok(c.reply().type == "ERROR", "unknown command: ERROR")
for sub in (b"slabs", b"items", b"settings"):
    reps = c.until("END", b"stats " + sub + b"\r\n")
    ok(all(r.type == "STAT" for r in reps[:-1]) and len(reps) > 3,
       "stats %s: %d STAT lines then END" % (sub.decode(), len(reps) - 1), reps[:3])
reps = c.until("END", b"stats slabs\r\n")
names_ = {r.msg for r in reps if r.type == "STAT"}
ok(b"active_slabs" in names_ and b"total_malloced" in names_ and
   any(n.endswith(b":chunk_size") for n in names_),
   "stats slabs rows: <class>:<field>, active_slabs, total_malloced")
reps = c.until("END", b"stats items\r\n")
ok(all(r.msg.startswith(b"items:") for r in reps if r.type == "STAT"),
   "stats items rows: items:<class>:<field>")
reps = c.until("END", b"stats settings\r\n")
ok(any(r.msg == b"item_size_max" for r in reps), "stats settings has item_size_max")

print("1..%d" % count)
cleanup()
sys.exit(1 if failed else 0)
