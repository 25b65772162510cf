#!/usr/bin/env python3
"""engine_layer.py — the request engine is the one way to the sockets, as TAP.

The requests of every surface (single-key calls as a run of one;
multi-gets, batch writes, the on-commit queue, foreign-table scans, joins,
DML and full-scan dumps pipelined) run through the request engine
(engine.c): only it sends a single-key request (McConnRoundtrip) or a
stats command (McConnStatLines) and decides whether a request that may
have run is sent again or failed over (McConnInDoubt, the at-most-once
rule), only its pipeline.c readies a pipelined run's connections
(McConnPrepare), only it drives the shared wait (pipeline.c's
McPipeline*) and sends and reads a pipeline's bytes (one state machine
per instance, not one per kind of request), and no file above it — the
foreign-data wrapper (fdw*.c), the on-commit queue (xact.c), the *_multi
writes (batch_sql.c), the trigger (trigger.c) — calls the connection
layer (McConn*, McNet*), not even the views that show and close a
session's sockets (they ask server_cache.c: McServerConnStats,
McServerCloseIdle).  A file still doing so is listed in PENDING with what
it waits for, and reported as TODO until it no longer needs the entry.

The runner is the files of RUNNER (client/run*.[ch]: run.c the run
itself, run_route.c the failover rule and the routing, run_reads.c and
run_writes.c each kind's pipelines, run_mn.c the "MN" neither asked for,
run_int.h their shared state, which no other file includes).  A single-key call is a run of one, the
runner's (run.h's McRunOne, run_route.c's McRunRouteOne): only they ask
the engine to send a request alone (McEngineSendOne), so the one failover
rule (run_route.c) routes a run of one and the rounds of a run of many
alike.  A stats command is the runner's as well (run.h's McRunStats):
only the runner's files ask the engine to send one (McEngineStatLines),
so the views and the planner go through the runner as every other
request does.  A request is described once, as the engine's operation
(McOp), text commands included (only engine.c spells out a stats, flush_all or
lru_crawler metadump command): no file above the engine encodes one
(mc_encode_*, McRequest), only the runner (engine.c's request alone, the
runner's files' runs) encodes a request, batch writes take the same type
as a single-key call, and the runner's files are the one client of the
pipelined engine (McEngine): no other file sets one up or gives it fill,
read or start callbacks.

Each rule lists the files of some folders but their owners whose code
matches a pattern (offenders) and prints ok, or not ok naming them
(check).
"""
import fnmatch
import glob
import os
import re

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
LAYERS = ("client", "sql", "fdw")         # the engine's folder and those above it
EVERY = ("client", "sql", "fdw", "net", "core")
ABOVE = ("sql", "fdw")
# The runner's files (all in client/), and of them the run of one's.
RUNNER = ("run.c", "run.h", "run_int.h", "run_route.c", "run_route.h", "run_reads.c", "run_writes.c",
          "run_mn.c")
RUN_OF_ONE = ("run.h", "run_route.c")
PENDING = {}
n = 0


def strip(text, strings=True):
    """The code of text: comments dropped, and string literals emptied unless strings is false."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text) if strings else text


def calls(path, pattern, strings=True):
    return sorted(set(re.findall(pattern, strip(open(path, encoding="utf-8").read(), strings))))


def sources(dirs=LAYERS, owners=(), ext="c"):
    """src/<dir>/*.<ext> of dirs, but the owners' (file names, or fnmatch patterns such as conn*.c)."""
    return sorted(f for d in dirs for f in glob.glob(os.path.join(SRC, d, "*." + ext))
                  if not any(fnmatch.fnmatch(os.path.basename(f), o) for o in owners))


def offenders(pattern, owners=(), dirs=LAYERS, ext="c", strings=True):
    """The names of sources(dirs, owners, ext) whose code matches pattern (any of a tuple of them)."""
    patterns = pattern if isinstance(pattern, tuple) else (pattern,)
    return sorted(os.path.basename(f) for f in sources(dirs, owners, ext)
                  if any(calls(f, p, strings) for p in patterns))


def check(desc, found, todo=None):
    """One TAP line: ok when nothing was found, else not ok naming it (a TODO with its reason)."""
    global n
    n += 1
    if not found:
        print("ok %d - %s" % (n, desc))
    else:
        print("not ok %d - %s: %s%s" % (n, desc, ", ".join(found), " # TODO " + todo if todo else ""))


def main():
    for f in sources(ABOVE):
        name = os.path.basename(f)
        check("%s calls no connection or wait function" % name,
              calls(f, r"\b(McConn[A-Z]\w*|McNet[A-Z]\w*|McPipeline[A-Z]\w*)\s*\("), PENDING.get(name))
    for name in sorted(PENDING):
        check("PENDING names a file that exists", [] if glob.glob(os.path.join(SRC, "*", name)) else [name])
    check("only engine.c drives the pipelined wait",
          offenders(r"\b(McPipeline(?:Run|Begin|Restart))\s*\(", ("engine.c", "pipeline.c"), EVERY))
    check("only engine.c sends and reads a pipeline's bytes",
          offenders(r"\b(McConn(?:SendSome|RecvSome|LinesRead))\s*\(", ("engine.c", "conn*.c"), EVERY))
    for fn, owner, what in (
            ("McConnRoundtrip", "engine.c", "sends a single-key request (a run of one's)"),
            ("McConnStatLines", "engine.c", "sends a stats command"),
            ("McConnInDoubt", "engine.c", "decides whether a request that may have run goes again"),
            ("McConnPrepare", "pipeline.c", "readies a connection for a pipelined run")):
        check("only %s %s (%s)" % (owner, what, fn),
              offenders(r"\b(%s)\s*\(" % fn, (owner, "conn*.c"), EVERY))
    # The runner is the files RUNNER names, no more, no fewer: a runner's
    # file that is not named would be refused as any other file by the
    # rules below, and a name that is no file would let one in.
    runner = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "client", "run*.[ch]")))
    check("RUNNER names the runner's files (client/run*.[ch])",
          sorted(set(runner) ^ set(RUNNER)))
    # The runner's state is its files' alone.
    check("only the runner's files include run_int.h",
          offenders(r'#\s*include\s+"run_int\.h"', RUNNER, EVERY, "[ch]", strings=False))
    # A static function run_int.h defines out of line is a copy in every
    # file that calls it: only inline helpers belong there, one called out
    # of line is a runner file's (run_mn.c's run_mn_stray).
    check("run_int.h defines no function out of line (pg_noinline: a copy in each caller's file)",
          calls(os.path.join(SRC, "client", "run_int.h"), r"\b(pg_noinline)\b"))
    # A single-key call is a run of one, the runner's (run.h's McRunOne,
    # run_route.c's McRunRouteOne): they alone ask the engine to send a
    # request alone, so the failover rule routing it is the one the
    # runner's rounds follow.
    check("only the runner's run of one (%s) sends a request alone (McEngineSendOne)"
          % ", ".join(RUN_OF_ONE),
          offenders(r"\b(McEngineSendOne)\s*\(", ("engine.[ch]",) + RUN_OF_ONE, EVERY, "[ch]"))
    # A stats command is an operation of the runner's too (run.h's
    # McRunStats): the views and the planner ask the runner, never the
    # engine, whose stats function only the runner's files call.
    check("only the runner (%s) runs a stats command (McEngineStatLines)" % "run*.[ch]",
          offenders(r"\b(McEngineStatLines)\s*\(", ("engine.[ch]",) + RUNNER, EVERY, "[ch]"))
    # One operation type: requests are described as the engine's McOp and
    # encoded by it (McEngineOpEncode), never put together above it, and
    # the batch writes take the same type as a single-key call.
    for f in sources(ABOVE):
        check("%s builds no request by hand (an McOp for the engine)" % os.path.basename(f),
              calls(f, r"\b(mc_encode_\w+|McRequest)\b"))
    # The runner's files (engine.c: a request alone; RUNNER: runs) are the
    # only ones outside core/ (which defines the encoders) to encode a
    # request, whatever the encoder, and the only callers of the engine's
    # own encoder.
    check("only the runner (engine.[ch], run*.[ch]) encodes a request (mc_encode_*, McEngineOpEncode)",
          offenders(r"\b(mc_encode_\w+|McEngineOpEncode\w*)\s*\(", ("engine.[ch]",) + RUNNER,
                    ("client", "sql", "fdw", "net"), "[ch]"))
    # One runner of many requests: the runner's files are the pipelined
    # engine's only client.  A second one would set up an McEngine
    # (McEngineInit, McEngineRun) and give it callbacks: a fill or read
    # (what a read returns, McEngRead), a start or dropped.
    # (net/ and core/, below the engine, cannot include its header; their
    # transports have read callbacks of their own)
    check("the runner (run*.[ch]) is the one client of the pipelined engine (no other McEngine, fill or read)",
          offenders((r"\b(McEngineInit|McEngineRun)\s*\(", r"\b(McEngRead|McEngine)\b",
                     r"(?:\.|->)\s*(fill|read|start|dropped|gave_up|line_cmd)\s*=(?!=)"),
                    ("engine.[ch]",) + RUNNER, LAYERS, "[ch]"))
    # The text commands that are operations (MC_OP_STATS, MC_OP_FLUSH,
    # MC_OP_DUMP) are encoded by the engine alone (McEngineOpEncode): no
    # other file above the connection layer spells out a "stats ...",
    # "flush_all" or "lru_crawler metadump ..." request.
    check("only engine.c encodes a stats, flush_all or lru_crawler command (an McOp for the engine)",
          offenders(r'"(?:stats|flush_all|lru_crawler)\b[^"\n]*\\r\\n', ("engine.c",), strings=False))
    check("a batch write is an McOp (no second request type)",
          offenders(r"\b(McBatchOp|McBatchKind|McBatchResult)\b", (), EVERY, "[ch]"))
    print("1..%d" % n)


if __name__ == "__main__":
    main()
