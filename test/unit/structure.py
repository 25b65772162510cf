#!/usr/bin/env python3
"""structure.py — the shape of src/ that the house rules promise, as TAP.

src/ holds one folder per layer (LAYERS, top to bottom).  Data flows one way
(SQL surface -> foreign tables -> client -> connections -> pure C), so:

1. no call cycle among the .c files: an edge A -> B means A names a function
   or global defined (non-static) in B; a header's static inline functions
   that call something are a node of their own (or their .c file's, for a
   header named as one: server_cache.h's are server_cache.c's), called by
   the files that call them and calling what their bodies call, so a
   circle closed through a header's inline helper is seen;
2. no #include cycle among src/'s files;
3. every #include "x.h" of a file names a header of its own folder or of a
   folder below it;
4. every call edge goes to its own folder or a folder below it;
5. the pure-C layer (core/) includes nothing outside core/ but the C
   library: no PostgreSQL header (the unit tests and the fuzzer build it
   without PostgreSQL's include path; this says why a build fails);
6. a record of owned parts (OWNED: McConn in net/conn_int.h, McNet in
   net/net.h, McServer in client/server.h) is written only by its parts'
   owners: each member of the struct names its owner file in its comment
   ("McConnIo io; /* conn_io.c */"), and an assignment, compound
   assignment, ++/-- or memset-like call on x->member... (McNet's:
   net->member or x.net.member; McServer's: through a variable declared a
   McServer pointer, in every folder) outside that file fails, unless it
   is in a static inline function of a header named with the owner's
   prefix (conn_io_reset_rbuf is conn_io.c's, net_sock_changed net.c's);
7. in the folders of PREFIXED (sql/, fdw/, client/, net/), a file's
   exported functions carry its prefix: its name (conn_fd_ for conn_fd.c)
   or that name in CamelCase after "Mc" (McConnFd), or PREFIX_NAMES' word
   for it; a name belongs to the file whose prefix is the longest to begin
   it, so two files cannot share a prefix.  Names others choose are kept:
   a SQL-callable function (PG_FUNCTION_INFO_V1) keeps the name the
   install script gives it, a foreign-data wrapper callback the name of
   its FdwRoutine field after "Mc" (McBeginForeignScan, as postgres_fdw's
   postgresBeginForeignScan), and PostgreSQL's entry points (_PG_init) are
   theirs.  core/ is one library named mc_ throughout (its own rule);
8. the checks themselves fail on a tree with an upward include, an upward
   call, a call cycle (one through a header's inline function too), a PostgreSQL header in core/, a foreign write to an owned part, or
   a function named with another file's prefix (a synthetic tree made
   here).

Headers are included by name (one -I per folder), so names are unique
across src/.  The folder graph is printed as comments, so a change of
structure shows in the log.  Usage: structure.py [SRC_ROOT]
"""
import collections
import os
import re
import shutil
import sys
import tempfile

# The layers, top to bottom; docs/layout.md's tables follow this order.
LAYERS = [
    ("sql", "the SQL surface: the module's entry point, SQL functions and views, the invalidation trigger, the on-commit queue"),
    ("fdw", "the foreign-data wrapper: planning, scans, batched joins, full scans, modifications"),
    ("client", "the client: server cache and options, keys, values, routing and health, the pipelined engines"),
    ("net", "connections: life cycle, bytes and waits, connects, TLS, stats and line streams"),
    ("core", "pure C, no PostgreSQL header: the protocol, request encoding, rings, hashes, compression, metadump lines"),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}

# Structs whose members are parts, each written by the file its comment
# names, and how a write is seen: None, x->member in the defining header's
# folder (McConn: conn_int.h is net/'s alone, its member names its own); a
# pattern, a write through it in that folder (McNet's members have names
# common elsewhere, so only a write through "net" counts); "typed",
# x->member of a variable declared a pointer to the struct, in every
# folder (McServer is public and its member names common).
OWNED = {"McConn": None, "McNet": r"\bnet\s*(?:->|\.)", "McServer": "typed"}
# Folders whose files' exported functions carry the file's prefix.
PREFIXED = ["sql", "fdw", "client", "net"]
# A file's CamelCase prefix, where it is not "Mc" + its name in CamelCase.
PREFIX_NAMES = {"client_stats.c": "McCs", "health.c": "McInstance",
                "server_cache.c": "McServer", "rowlayout.c": "McRow", "keys.c": "McKey",
                "values.c": "McValue", "fdw_fullscan.c": "McFullScan",
                "fdw_table.c": "McTable", "stats.c": "McStat", "keytmpl.c": "McKeyTmpl"}

DEFAULT_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")


def strip(text):
    # comments go, their line ends stay (a problem's line number is the file's)
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def read_tree(src):
    """{relative path: raw text} of src/LAYER/*.[ch]; files outside a layer folder."""
    files, stray = {}, []
    for root, _dirs, names in os.walk(src):
        for n in names:
            if not n.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(root, n), src)
            if rel.split(os.sep)[0] not in RANK or rel.count(os.sep) != 1:
                stray.append(rel)
                continue
            with open(os.path.join(root, n), encoding="utf-8") as f:
                files[rel] = f.read()
    return files, sorted(stray)


def layer(rel):
    return rel.split(os.sep)[0]


def analyse(src):
    files, stray = read_tree(src)
    by_name = collections.defaultdict(list)
    for rel in files:
        by_name[os.path.basename(rel)].append(rel)
    problems = collections.defaultdict(list)
    for name, rels in sorted(by_name.items()):
        if len(rels) > 1:
            problems["names"].append("%s is in %s" % (name, " and ".join(sorted(rels))))
    for rel in stray:
        problems["names"].append("%s is not in a layer folder (%s)" % (rel, ", ".join(RANK)))

    # includes
    inc = collections.defaultdict(set)
    for rel, text in files.items():
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            target = by_name.get(os.path.basename(m.group(1)))
            if target and "/" not in m.group(1):
                inc[rel].add(target[0])
            elif layer(rel) == "core":
                problems["core"].append('%s includes "%s", which is not a header of core/' % (rel, m.group(1)))
        if layer(rel) == "core":
            for m in re.finditer(r"^\s*#\s*include\s+<([^>]+)>", text, re.M):
                if re.match(r"(postgres|pg_|c\.h|fmgr|utils/|catalog/|access/|nodes/|storage/|executor/|libpq)", m.group(1)):
                    problems["core"].append("%s includes <%s>, a PostgreSQL header" % (rel, m.group(1)))
    for a in sorted(inc):
        for b in sorted(inc[a]):
            if RANK[layer(b)] < RANK[layer(a)]:
                problems["include-up"].append("%s includes %s (%s/ is above %s/)"
                                              % (a, b, layer(b), layer(a)))

    # definitions: non-static functions and globals of .c files; static
    # inline functions of headers belong to the header
    stripped = {rel: strip(text) for rel, text in files.items()}
    defs, funcs = {}, {}
    for rel, text in stripped.items():
        if rel.endswith(".c"):
            for m in re.finditer(r"^([A-Za-z_][\w \t*]*)\n([A-Za-z_]\w*)\(", text, re.M):
                if "static" not in m.group(1):
                    defs.setdefault(m.group(2), rel)
                    funcs.setdefault(m.group(2), rel)
            for m in re.finditer(r"^(?!static|extern|typedef)[A-Za-z_][\w \t*]*?\b((?:mc_|Mc)\w+)\s*(?:=[^=]|;)",
                                 text, re.M):
                defs.setdefault(m.group(1), rel)
        else:
            for m in re.finditer(r"^static\s+inline\s+[\w \t*]*\n([A-Za-z_]\w*)\(", text, re.M):
                defs.setdefault(m.group(1), rel)
    calls = collections.defaultdict(set)
    for rel, text in stripped.items():
        words = set(re.findall(r"\b\w+\b", text))
        for sym, owner in defs.items():
            if owner != rel and sym in words:
                calls[rel].add((owner, sym))
    for a in sorted(calls):
        ups = collections.defaultdict(list)
        for b, sym in calls[a]:
            if RANK[layer(b)] < RANK[layer(a)]:
                ups[b].append(sym)
        for b in sorted(ups):
            problems["call-up"].append("%s names %s of %s (%s/ is above %s/)"
                                       % (a, ", ".join(sorted(ups[b])), b, layer(b), layer(a)))

    problems["part-write"] = part_writes(files, stripped)
    problems["prefix"] = prefixes(files, funcs)

    call_edges = call_graph(stripped, defs)
    problems["call-cycle"] = ["cycle: " + " -> ".join(c + (c[0],)) for c in cycles(call_edges)]
    problems["include-cycle"] = ["cycle: " + " -> ".join(c + (c[0],)) for c in cycles(inc)]

    folder_edges = collections.defaultdict(collections.Counter)
    for a in inc:
        for b in inc[a]:
            if layer(a) != layer(b):
                folder_edges[layer(a)][layer(b)] += 1
    return problems, folder_edges, files


INLINE = r"^static\s+inline\s+[\w \t*]*\n([A-Za-z_]\w*)\([^{;]*?\)\s*\{(.*?)^\}"


def call_graph(stripped, defs):
    """{file: files it calls} for the call-cycle check.  A static inline
    function of a header calls from its header's node: the .c file named as
    the header (server_cache.h's are server_cache.c's), or else the header
    itself (conn_int.h).  A file that calls an inline which calls something
    (a .c file's function, or such an inline) calls that node; an inline
    that calls nothing adds no edge.  So a circle closed through a header's
    inline helper is seen, and a header's inlines may call only what lies
    below every file that uses them."""
    inline = {}
    for rel, text in stripped.items():
        if rel.endswith(".h"):
            node = rel[:-2] + ".c" if rel[:-2] + ".c" in stripped else rel
            for m in re.finditer(INLINE, text, re.M | re.S):
                inline.setdefault(m.group(1), (node, set(re.findall(r"\b\w+\b", m.group(2)))))
    funcs = {sym: owner for sym, owner in defs.items() if owner.endswith(".c")}
    calling = {fn for fn, (_, words) in inline.items() if words & set(funcs)}
    grew = True
    while grew:
        more = {fn for fn, (_, words) in inline.items() if words & calling} - calling
        calling |= more
        grew = bool(more)
    target = dict(funcs)
    target.update({fn: inline[fn][0] for fn in calling})
    edges = collections.defaultdict(set)
    texts = [(rel, text) for rel, text in stripped.items() if rel.endswith(".c")]
    texts += [(node, " ".join(words)) for node, words in inline.values()]
    for rel, text in texts:
        for w in set(re.findall(r"\b\w+\b", text)):
            to = target.get(w)
            if to is not None and to != rel:
                edges[rel].add(to)
    return edges


def prefix_of(rel):
    """The file's (snake_case, CamelCase) prefixes: conn_fd.c -> conn_fd, McConnFd."""
    stem = os.path.basename(rel)[:-2]
    camel = PREFIX_NAMES.get(os.path.basename(rel),
                             "Mc" + "".join(w[:1].upper() + w[1:] for w in stem.split("_")))
    return stem, camel


def name_owner(name, rels):
    """The file of rels whose prefix is the longest to begin name, or None."""
    best, best_len = None, 0
    for rel in rels:
        snake, camel = prefix_of(rel)
        for p, ok in ((snake, name == snake or name.startswith(snake + "_")),
                      (camel, name.startswith(camel))):
            if ok and len(p) > best_len:
                best, best_len = rel, len(p)
    return best


# a member (of a part: .field, [i]) assigned, compound-assigned, ++ or --
ASSIGN = r"\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)"
FIELDS = r"(?:\s*\.\s*\w+|\s*\[[^\]]*\])"
WRITERS = r"\b(?:memset|MemSet|memcpy|memmove|strlcpy|strlcat|snprintf|vsnprintf|explicit_bzero)\s*\(\s*&?\s*"


def part_writes(files, stripped):
    """Writes to a part of an OWNED struct from a file that does not own it."""
    found = []
    for struct, how in OWNED.items():
        if not any(re.search(r"^(?:typedef\s+)?struct\s+%s\s*\{" % struct, text, re.M)
                   for rel, text in files.items() if rel.endswith(".h")):
            found.append("no header defines struct %s" % struct)
        for rel, text in sorted(files.items()):
            if not rel.endswith(".h"):
                continue
            m = re.search(r"^(?:typedef\s+)?struct\s+%s\s*\{(.*?)^\}\s*\w*;" % struct, text, re.M | re.S)
            if not m:
                continue
            folder = layer(rel)
            owners, parts = {}, set()
            for line in m.group(1).split("\n"):
                mm = re.match(r"\s*([\w \t]+?)([\s*]+)(\w+)\s*(?:\[[^\]]*\])?;\s*/\*\s*((?:\w+/)?\w+\.c)\b", line)
                if mm:
                    owner = mm.group(4)
                    owners[mm.group(3)] = owner if "/" in owner else os.path.join(folder, owner)
                    # a part of its own (not a pointer or a scalar): written
                    # a field at a time, so only "->part." is its write
                    if "*" not in mm.group(2) and re.search(r"\}\s*%s\s*;" % mm.group(1).strip(), text):
                        parts.add(mm.group(3))
            unowned = [ln.strip() for ln in m.group(1).split("\n")
                       if re.match(r"\s*[\w \t]+?[\s*]+\w+\s*(?:\[[^\]]*\])?;", ln)
                       and not re.search(r";\s*/\*\s*(?:\w+/)?\w+\.c\b", ln)]
            for ln in unowned:
                found.append("%s: member of %s names no owner file: %s" % (rel, struct, ln))
            for src, text2 in sorted(stripped.items()):
                if how != "typed" and layer(src) != folder:
                    continue
                via = how or r"->"
                if how == "typed":
                    names = set(re.findall(r"\b(?:struct\s+)?%s\s*\*\s*(?:const\s+)?(\w+)" % struct, text2))
                    if not names:
                        continue
                    via = r"\b(?:%s)\s*->" % "|".join(sorted(names))
                mods = [r for r in files if layer(r) == layer(src) and r.endswith(".c")]
                for member, owner in sorted(owners.items()):
                    fields = FIELDS + ("+" if member in parts else "*")
                    pats = [r"%s\s*%s\b%s%s" % (via, member, fields, ASSIGN),
                            r"(?:\+\+|--)\s*[\w.>-]*%s\s*%s\b%s" % (via, member, fields),
                            WRITERS + r"[\w.>-]*%s\s*%s\b" % (via, member)]
                    for pat in pats:
                        for w in re.finditer(pat, text2):
                            writer = src
                            if src.endswith(".h"):
                                fn = None
                                for f in re.finditer(r"^static\s+inline\s+[\w \t*]*\n(\w+)\(", text2[:w.start()], re.M):
                                    fn = f.group(1)
                                writer = name_owner(fn, mods) if fn else None
                            if writer != owner:
                                line = text2.count("\n", 0, w.start()) + 1
                                found.append("%s:%d writes %s's %s (%s)" % (
                                    src, line, struct, member,
                                    "a part of %s" % owner if writer is None or writer == src
                                    else "an inline named as %s's, not %s's" % (writer, owner)))
    return sorted(set(found))


def prefixes(files, defs):
    """Exported functions of a PREFIXED folder's file not named with its prefix."""
    found = []
    # r->BeginForeignScan = McBeginForeignScan: a callback named by its field
    callbacks = set(m.group(2) for text in files.values()
                    for m in re.finditer(r"->\s*(\w+)\s*=\s*(Mc\1)\s*;", text))
    for folder in PREFIXED:
        mods = [r for r in files if layer(r) == folder and r.endswith(".c")]
        for name, rel in sorted(defs.items()):
            if rel not in mods:
                continue
            if re.search(r"PG_FUNCTION_INFO_V1\(\s*%s\s*\)" % re.escape(name), files[rel]):
                continue
            if name.startswith("_PG_") or name in callbacks:
                continue
            owner = name_owner(name, mods)
            if owner != rel:
                found.append("%s exports %s, %s" % (
                    rel, name, "which carries no prefix of its file's (%s, %s)" % prefix_of(rel)
                    if owner is None else "a name with %s's prefix" % owner))
    return found


def cycles(edges):
    found = set()
    for start in list(edges):
        stack = [(start, [start])]
        while stack:
            cur, path = stack.pop()
            for nxt in edges.get(cur, ()):
                if nxt == start:
                    k = path.index(min(path))
                    found.add(tuple(path[k:] + path[:k]))
                elif nxt not in path:
                    stack.append((nxt, path + [nxt]))
    return sorted(found)


CHECKS = [
    ("names", "every file of src/ is in a layer folder, and no two share a name"),
    ("call-cycle", "no call cycle among src/'s .c files"),
    ("include-cycle", "no #include cycle among src/'s files"),
    ("include-up", "every #include goes to the file's own folder or one below"),
    ("call-up", "every call goes to the file's own folder or one below"),
    ("core", "core/ includes no PostgreSQL header and nothing outside core/"),
    ("part-write", "every part of %s is written only by its owner" % ", ".join(sorted(OWNED))),
    ("prefix", "every exported function of %s carries its file's prefix" % ", ".join(f + "/" for f in PREFIXED)),
]


def self_test():
    """The checks fail on trees that break them: a synthetic tree per rule."""
    base = {
        "sql/top.c": '#include "mid.h"\nvoid\nMcTop(void)\n{\n\tMcMid();\n}\n',
        "client/mid.h": '#include "low.h"\nextern void McMid(void);\n',
        "client/mid.c": '#include "mid.h"\nvoid\nMcMid(void)\n{\n\tMcLow();\n}\n',
        "core/low.h": "extern void McLow(void);\n",
        "core/low.c": '#include "low.h"\nvoid\nMcLow(void)\n{\n}\n',
    }
    broken = {
        "include-up": {"core/low.c": '#include "low.h"\n#include "mid.h"\nvoid\nMcLow(void)\n{\n}\n'},
        "call-up": {"core/low.c": '#include "low.h"\nextern void McTop(void);\nvoid\nMcLow(void)\n{\n\tMcTop();\n}\n'},
        "core": {"core/low.c": '#include "postgres.h"\n#include "low.h"\nvoid\nMcLow(void)\n{\n}\n'},
        "call-cycle": {"client/mid.c": '#include "mid.h"\nvoid\nMcMid(void)\n{\n\tMcLow();\n}\nvoid\nMcMid2(void)\n{\n}\n',
                       "client/other.c": '#include "mid.h"\nvoid\nMcOther(void)\n{\n\tMcMid2();\n}\n',
                       "client/mid.h": '#include "low.h"\nextern void McMid(void);\nextern void McMid2(void);\nextern void McOther(void);\n',
                       "core/low.c": '#include "low.h"\nvoid\nMcLow(void)\n{\n}\n'},
    }
    owned = ('#include "low.h"\ntypedef struct Part { int x; } Part;\n'
             'struct McConn\n{\n\tint\t\tid;\t\t/* net_a.c */\n'
             '\tPart\t\tpa;\t\t/* net_a.c */\n\tPart\t\tpb;\t\t/* net_b.c */\n};\n'
             'typedef struct McNet\n{\n\tint\t\tgen;\t\t/* net_a.c */\n} McNet;\n'
             'static inline void\nnet_a_reset(struct McConn *c)\n{\n\tc->pa.x = 0;\n}\n'
             'struct McServer\n{\n\tint\t\tvalid;\t\t/* net/net_a.c */\n};\n')
    net_a = ('#include "net_int.h"\nvoid\nnet_a_set(struct McConn *c, struct McServer *s)\n{\n'
             '\tc->pa.x = 1;\n\tc->id++;\n\ts->valid = 1;\n\tnet_a_reset(c);\n}\n')
    net_b = '#include "net_int.h"\nint\nnet_b_get(struct McConn *c)\n{\n\tc->pb.x += 1;\n\treturn c->pa.x == 2;\n}\n'
    base.update({"net/net_int.h": owned, "net/net_a.c": net_a, "net/net_b.c": net_b})
    broken["part-write"] = {"net/net_b.c": net_b.replace("\treturn", "\tc->pa.x = 2;\n\treturn")}
    broken["part-write/net"] = {"net/net_b.c": net_b.replace("\treturn", "\tc->net->gen++;\n\treturn")}
    broken["prefix"] = {"net/net_b.c": net_b + "void\nnet_a_more(void)\n{\n}\n"}
    broken["call-cycle"]["client/mid.c"] = '#include "mid.h"\nvoid\nMcMid(void)\n{\n\tMcOther();\n}\nvoid\nMcMid2(void)\n{\n}\n'
    # a circle closed by a header's inline: net_a.c -> net_int.h -> net_b.c -> net_a.c
    broken["call-cycle/inline"] = {
        "net/net_int.h": owned + 'extern int net_b_get(struct McConn *c);\n'
        'static inline void\nnet_int_check(struct McConn *c)\n{\n\t(void) net_b_get(c);\n}\n',
        "net/net_a.c": net_a.replace("\tnet_a_reset(c);", "\tnet_a_reset(c);\n\tnet_int_check(c);"),
        "net/net_b.c": net_b.replace("\treturn", "\tnet_a_set(c);\n\treturn")}
    results = []
    for rule, change in [(None, {})] + sorted(broken.items()):
        tmp = tempfile.mkdtemp(prefix="mcfdw-structure-")
        try:
            for rel, text in dict(base, **change).items():
                os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            problems, _, _ = analyse(tmp)
            failing = {k for k, v in problems.items() if v}
            results.append((rule, failing))
        finally:
            shutil.rmtree(tmp)
    return results


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SRC)
    problems, folder_edges, files = analyse(src)
    for name, _ in LAYERS:
        n = sum(1 for rel in files if layer(rel) == name)
        below = ", ".join("%s (%d)" % (b, c) for b, c in sorted(folder_edges[name].items(), key=lambda x: RANK[x[0]]))
        print("# %-6s %2d files; includes headers of: %s" % (name + "/", n, below or "-"))
    fails = 0
    num = 0
    for key, title in CHECKS:
        num += 1
        if problems.get(key):
            fails += 1
            print("not ok %d - %s" % (num, title))
            for p in problems[key]:
                print("#   " + p)
        else:
            print("ok %d - %s" % (num, title))
    for rule, failing in self_test():
        num += 1
        if rule is None:
            ok = not failing
            title = "the self-test's well-formed tree passes every check"
        else:
            ok = rule.split("/")[0] in failing
            title = "the check '%s' fails on a tree that breaks it%s" % (
                rule.split("/")[0], {"inline": " (through a header's inline function)",
                                     "net": " (McNet's)"}.get(rule.partition("/")[2], ""))
        if not ok:
            fails += 1
            print("#   failing checks: %s" % (", ".join(sorted(failing)) or "none"))
        print("%s %d - %s" % ("ok" if ok else "not ok", num, title))
    print("1..%d" % num)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
