#!/usr/bin/env python3
"""structure.py — the shape of src/ that the house rules promise, as TAP.

No call cycle among src/*.c: an edge A -> B means A names a function or
global defined (non-static) in B.  Data flows one way (SQL surface -> keys
-> ring -> pool -> connection -> protocol); a cycle means some file calls
back up.  Static inline helpers of a header count for the file that owns
the state they read (OWNER_OF_INLINE).

That the pure modules (UNIT_PURE in the Makefile) include no
PostgreSQL header is enforced by the unit tests, which build them without
PostgreSQL's include path.

The graph is printed as comments, so a change of structure shows in the log.
"""
import collections
import glob
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
OWNER_OF_INLINE = {"McServerGet": "pool.c", "McPrefetchLookup": "prefetch_batch.c"}


def strip(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def main():
    files = sorted(glob.glob(os.path.join(SRC, "*.c")))
    texts = {os.path.basename(f): strip(open(f, encoding="utf-8").read()) for f in files}
    defs = dict(OWNER_OF_INLINE)
    for name, text in texts.items():
        # functions: return type on one line, name at the start of the next
        for m in re.finditer(r"^([A-Za-z_][\w \t*]*)\n([A-Za-z_]\w*)\(", text, re.M):
            if "static" not in m.group(1):
                defs.setdefault(m.group(2), name)
        # globals with the project's prefixes
        for m in re.finditer(r"^(?!static|extern|typedef)[A-Za-z_][\w \t*]*?\b((?:mc_|Mc)\w+)\s*(?:=[^=]|;)",
                             text, re.M):
            defs.setdefault(m.group(1), name)
    edges = collections.defaultdict(set)
    for name, text in texts.items():
        words = set(re.findall(r"\b\w+\b", text))
        for sym, owner in defs.items():
            if owner != name and sym in words:
                edges[name].add(owner)

    for a in sorted(edges):
        print("# %-13s -> %s" % (a, ", ".join(sorted(edges[a]))))

    cycles = set()
    for start in list(edges):
        stack = [(start, [start])]
        while stack:
            cur, path = stack.pop()
            for nxt in edges.get(cur, ()):
                if nxt == start:
                    k = path.index(min(path))
                    cycles.add(tuple(path[k:] + path[:k]))
                elif nxt not in path:
                    stack.append((nxt, path + [nxt]))
    fails = 0
    if cycles:
        fails += 1
        print("not ok 1 - no call cycle among src/*.c")
        for c in sorted(cycles):
            print("#   cycle: " + " -> ".join(c + (c[0],)))
    else:
        print("ok 1 - no call cycle among src/*.c")

    print("1..1")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
