#!/usr/bin/env python3
"""engine_layer.py — the request engine is the one way to the sockets, as TAP.

The requests of every surface (single-key calls as a run of one;
multi-gets, batch writes, the on-commit queue, foreign-table scans, joins,
DML and full-scan dumps pipelined) run through the request engine
(engine.c): only it sends a single-key request (McConnRoundtrip) or a
stats command (McConnStatLines) and decides whether a request that may
have run is sent again or failed over (McConnInDoubt, the at-most-once
rule), only its pipeline.c readies a pipelined run's connections
(McConnPrepare), only it drives the shared wait
(pipeline.c's McPipeline*) and sends and reads a pipeline's bytes (one
state machine per instance, not one per kind of request), and no file
above it — the foreign-data
wrapper (fdw*.c), the on-commit queue (xact.c), the *_multi writes
(batch_sql.c), the trigger (trigger.c) — calls the connection layer
(McConn*, McNet*), not even the views that show and close a session's
sockets (they ask server_cache.c: McServerConnStats, McServerCloseIdle).
A file still doing so is listed in
PENDING with what it waits for, and reported as TODO until it no longer
needs the entry.  A request is described once, as the engine's operation
(McOp), text commands included (only engine.c spells out a stats or
flush_all command): no file above the engine encodes one (mc_encode_*, McRequest), only
the runner (engine.c's run of one, run.c's runs of many) encodes a request,
batch writes take the same type as a single-key call, and run.c is the one
client of the pipelined engine (McEngine): no other file sets one up or
gives it fill, read or start callbacks.
"""
import glob
import os
import re

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
ABOVE = ["sql/*.c", "fdw/*.c"]
PENDING = {}


def strip(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def calls(path, pattern):
    text = strip(open(path, encoding="utf-8").read())
    return sorted(set(re.findall(pattern, text)))


def main():
    n = 0
    files = sorted({f for g in ABOVE for f in glob.glob(os.path.join(SRC, g))})
    for f in files:
        name = os.path.basename(f)
        found = [c for c in calls(f, r"\b(McConn[A-Z]\w*|McNet[A-Z]\w*|McPipeline[A-Z]\w*)\s*\(")]
        n += 1
        desc = "%s calls no connection or wait function" % name
        if not found:
            print("ok %d - %s" % (n, desc))
        elif name in PENDING:
            print("not ok %d - %s: %s # TODO %s" % (n, desc, ", ".join(found), PENDING[name]))
        else:
            print("not ok %d - %s: %s" % (n, desc, ", ".join(found)))
    for name in sorted(PENDING):
        if not glob.glob(os.path.join(SRC, "*", name)):
            n += 1
            print("not ok %d - PENDING names %s, which is gone" % (n, name))
    users = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "*", "*.c"))
                   if os.path.basename(f) != "pipeline.c"
                   and calls(f, r"\b(McPipeline(?:Run|Begin|Restart))\s*\("))
    n += 1
    if users == ["engine.c"]:
        print("ok %d - only engine.c drives the pipelined wait" % n)
    else:
        print("not ok %d - only engine.c drives the pipelined wait: %s" % (n, ", ".join(users)))
    pumps = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "*", "*.c"))
                   if not os.path.basename(f).startswith("conn")
                   and calls(f, r"\b(McConn(?:SendSome|RecvSome|LinesRead))\s*\("))
    n += 1
    if pumps == ["engine.c"]:
        print("ok %d - only engine.c sends and reads a pipeline's bytes" % n)
    else:
        print("not ok %d - only engine.c sends and reads a pipeline's bytes: %s" % (n, ", ".join(pumps)))
    for fn, owner, what in (
            ("McConnRoundtrip", "engine.c", "sends a single-key request (a run of one)"),
            ("McConnStatLines", "engine.c", "sends a stats command"),
            ("McConnInDoubt", "engine.c", "decides whether a request that may have run goes again"),
            ("McConnPrepare", "pipeline.c", "readies a connection for a pipelined run")):
        users = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "*", "*.c"))
                       if not os.path.basename(f).startswith("conn")
                       and calls(f, r"\b(%s)\s*\(" % fn))
        n += 1
        if users == [owner]:
            print("ok %d - only %s %s (%s)" % (n, owner, what, fn))
        else:
            print("not ok %d - only %s %s (%s): %s" % (n, owner, what, fn, ", ".join(users)))
    # One operation type: requests are described as the engine's McOp and
    # encoded by it (McEngineOpEncode), never put together above it, and
    # the batch writes take the same type as a single-key call.
    for f in files:
        name = os.path.basename(f)
        found = calls(f, r"\b(mc_encode_\w+|McRequest)\b")
        n += 1
        desc = "%s builds no request by hand (an McOp for the engine)" % name
        if not found:
            print("ok %d - %s" % (n, desc))
        else:
            print("not ok %d - %s: %s" % (n, desc, ", ".join(found)))
    # The runner's files (engine.c: a run of one; run.c: runs of many) are
    # the only ones outside core/ (which defines the encoders) to encode a
    # request, whatever the encoder, and the only callers of the engine's
    # own encoder.
    runner = ["engine.c", "run.c"]
    encoders = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "*", "*.c"))
                      if os.path.basename(os.path.dirname(f)) != "core"
                      and calls(f, r"\b(mc_encode_\w+|McEngineOpEncode\w*)\s*\("))
    n += 1
    if set(encoders) <= set(runner):
        print("ok %d - only the runner (%s) encodes a request (mc_encode_*, McEngineOpEncode)"
              % (n, ", ".join(runner)))
    else:
        print("not ok %d - only the runner (%s) encodes a request (mc_encode_*, McEngineOpEncode): %s"
              % (n, ", ".join(runner), ", ".join(f for f in encoders if f not in runner)))
    # One runner of many requests: run.c is the pipelined engine's only
    # client.  A second one would set up an McEngine (McEngineInit,
    # McEngineRun) and give it callbacks: a fill or read (what a read
    # returns, McEngRead), a start or dropped.
    # (net/ and core/, below the engine, cannot include its header; their
    # transports have read callbacks of their own)
    clients = sorted(os.path.basename(f) for d in ("client", "sql", "fdw")
                     for f in glob.glob(os.path.join(SRC, d, "*.c"))
                     if os.path.basename(f) not in ("engine.c", "run.c")
                     and (calls(f, r"\b(McEngineInit|McEngineRun)\s*\(")
                          or calls(f, r"\b(McEngRead|McEngine)\b")
                          or calls(f, r"(?:\.|->)\s*(fill|read|start|dropped|gave_up|line_cmd)\s*=(?!=)")))
    n += 1
    if not clients:
        print("ok %d - run.c is the one client of the pipelined engine (no other McEngine, fill or read)" % n)
    else:
        print("not ok %d - run.c is the one client of the pipelined engine (no other McEngine, fill or read): %s"
              % (n, ", ".join(clients)))
    # The text commands that are operations (MC_OP_STATS, MC_OP_FLUSH) are
    # encoded by the engine alone (McEngineOpEncode): no other file above
    # the connection layer spells out a "stats ..." or "flush_all" request.
    spelled = sorted(os.path.basename(f) for d in ("client", "sql", "fdw")
                     for f in glob.glob(os.path.join(SRC, d, "*.c"))
                     if os.path.basename(f) != "engine.c"
                     and re.search(r'"(?:stats|flush_all)\b[^"\n]*\\r\\n',
                                   re.sub(r"/\*.*?\*/", "", open(f, encoding="utf-8").read(),
                                          flags=re.S)))
    n += 1
    if not spelled:
        print("ok %d - only engine.c encodes a stats or flush_all command (an McOp for the engine)" % n)
    else:
        print("not ok %d - only engine.c encodes a stats or flush_all command (an McOp for the engine): %s"
              % (n, ", ".join(spelled)))
    old_types = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "*", "*.[ch]"))
                       if calls(f, r"\b(McBatchOp|McBatchKind|McBatchResult)\b"))
    n += 1
    if not old_types:
        print("ok %d - a batch write is an McOp (no second request type)" % n)
    else:
        print("not ok %d - a batch write is an McOp (no second request type): %s" % (n, ", ".join(old_types)))
    print("1..%d" % n)


if __name__ == "__main__":
    main()
