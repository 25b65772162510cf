"""batch_write_settle: a batch write that raises leaves nothing running.

A server of two live memcacheds and one instance that fails, without
failover: a large mc_delete_multi (and mc_set_multi) raises, and by the time
the error reaches the caller every request the call wrote to the live
instances has been answered, or its connection closed: memcached's item
counts, read straight from the live instances right after the error and
again a while later, do not move.  (Before, the requests already written
there were still being executed after the error, possibly after the
caller's next statement: a CI run lost keys that way.)

The failing instance, in turn: a refused connect; a server that resets the
connection at the first request bytes; one that answers them with
SERVER_ERROR (an error reply mid-stream); one that answers with a stray
opaque token; the last again with failover, for a delete (not failed
over, since it may have run: raised).  The error has an SQLSTATE and its detail says how many
requests were executed, which is what memcached shows; the backend's next
calls work.
"""

import time

import mcdb
import mcrig
from hostile import Listener, _reset

N = 150000
KEYS = ["bws:%d" % i for i in range(N)]


class Bad(Listener):
    """Reads the first request bytes, then: "reset" closes with RST;
    "error" answers SERVER_ERROR and reads on; "stray" answers a reply
    with an opaque token no request had, and reads on."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def _serve(self, c):
        try:
            c.settimeout(30)
            if not c.recv(4096):
                return
            if self.how == "reset":
                _reset(c)
                return
            c.sendall(b"SERVER_ERROR out of memory storing object\r\n" if self.how == "error"
                      else b"NF O99999999\r\n")
            while c.recv(65536):
                pass
        except OSError:
            pass


t = mcrig.TAP()
a = mcrig.start_memcached("-m", "256")
b = mcrig.start_memcached("-m", "256")
db = mcdb.Database("mcfdw_it_bw_settle")
admin = db.connect()
db.server(admin, "only_a", a.addr)
db.server(admin, "only_b", b.addr)
bads = {"refused": None, "reset": Bad("reset").start(), "error": Bad("error").start(),
        "stray": Bad("stray").start()}
for how, bad in bads.items():
    db.server(admin, "trio_" + how, "%s,%s,%s" % (a.addr, b.addr,
                                                  mcrig.refused_addr() if bad is None else bad.addr),
              failure_limit=1000, io_timeout="10s")


def items():
    return int(mcrig.stats(a.port)["curr_items"]) + int(mcrig.stats(b.port)["curr_items"])


def fill(c):
    for srv in ("only_a", "only_b"):
        db.value(c, "SELECT mc_set_multi(%s, array_fill('v'::text, ARRAY[%s]), server => %s)",
                 (KEYS, N, srv))


def attempt(c, sql, args):
    try:
        return ("ok", db.value(c, sql, args), None, "")
    except Exception as e:  # noqa: BLE001
        return ("error", str(e).splitlines()[0], getattr(e, "pgcode", None),
                getattr(getattr(e, "diag", None), "message_detail", None) or "")


# with failover, a delete whose instance fails after it may have run is
# not sent elsewhere but raised (README: deletes are never sent twice)
db.server(admin, "trio_stray_failover", "%s,%s,%s" % (a.addr, b.addr, bads["stray"].addr),
          failure_limit=1000, io_timeout="10s", failover="on")
CASES = [(how, fn) for how in bads for fn in ("mc_delete_multi", "mc_set_multi")] + \
    [("stray_failover", "mc_delete_multi")]

c = db.connect()
for how, fn in CASES:
    if fn == "mc_delete_multi":
        fill(c)
        call = "SELECT mc_delete_multi(%s, server => %s)"
    else:
        call = "SELECT mc_set_multi(%s, array_fill('w'::text, ARRAY[" + str(N) + "]), server => %s)"
    keys = KEYS if fn == "mc_delete_multi" else ["bws-%s:%d" % (how, i) for i in range(N)]
    before = items()
    r = attempt(c, call, (keys, "trio_" + how))
    first = items()
    time.sleep(0.5)
    second = items()
    t.is_(r[0], "error", "%s, failing instance %s: raises" % (fn, how))
    t.ok(r[2] is not None and r[2] != "XX000", "... with an SQLSTATE (%s): %s" % (r[2], r[1]))
    t.is_(second, first, "... memcached's items do not move after the error (%d, then %d)"
          % (first, second))
    done = [int(w) for w in r[3].split("Of the ")[1].split(" were executed")[0].split(", ")[1:2]] \
        if "Of the " in r[3] else None
    t.ok(done is not None, "... its detail says what became of the requests: %s" % r[3])
    if done is not None:
        t.is_(abs(before - second), done[0], "... as many keys are %s as it says were executed"
              % ("gone" if fn == "mc_delete_multi" else "stored"))
    t.is_(db.value(c, "SELECT mc_set_multi(ARRAY['bws:after'], ARRAY['x'], server => 'only_a')"), 1,
          "... the backend's next batch on a live instance works")
    t.is_(db.value(c, "SELECT mc_get('bws:after', server => 'only_a')"), "x",
          "... and reads back")
    db.value(c, "SELECT mc_delete('bws:after', server => 'only_a')")

t.done()
