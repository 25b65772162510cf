"""dashboard: every SQL query of docs/grafana/mcfdw-slabs.json runs against
the rig, so the dashboard cannot drift from the views.

Each panel target's rawSql and each query variable is taken from the JSON,
Grafana's PostgreSQL macros ($__timeFilter, $__timeFrom, ...) and the
dashboard variables ($server, $instance, multi-valued) are replaced with
concrete values the way Grafana does, and the result is run in a private
database with mcfdw and docs/grafana/history.sql installed, after a few
samples.  One of the servers has an instance that is down: the dashboard
must keep working.  A private memcached (-m 8, slab_automove=0) is made
calcified and configured in two servers: the calcification panels show it,
and count it once; every panel summing memcached's own figures shows the
same whether one or both of its servers are selected.  The client panels
(mc_client_stats, mc_counters, mc_wal_watches) show this session's known
workload exactly.  A query that fails, returns no rows, or keeps a '$'
placeholder Grafana would have replaced fails the test.
"""

import datetime
import json
import os
import re
import socket

import faultproxy
import mcdb
import mcrig

SRC = os.environ.get("MCFDW_SRC", os.getcwd())
DASHBOARD = os.path.join(SRC, "docs", "grafana", "mcfdw-slabs.json")
HISTORY = os.path.join(SRC, "docs", "grafana", "history.sql")

t = mcrig.TAP()
with open(DASHBOARD) as f:
    dash = json.load(f)
with open(HISTORY) as f:
    history_sql = f.read()

ports = mcrig.rig_ports()
db = mcdb.Database("mcfdw_it_dashboard")
c = db.connect()
# an instance nobody answers (in the Unix-socket pass, a socket nobody listens on)
DOWN = mcrig.refused_addr() if mcrig.SOCKETS else "127.0.0.1:1"
db.server(c, "memcached", mcrig.addr(ports[0]))
db.server(c, "dash_two", "%s,%s" % (mcrig.addr(ports[1]), DOWN), connect_timeout="300ms")
db.sql(c, history_sql)


def load(port, prefix, n, value_size, batch=200):
    """n items prefix%08d of value_size bytes, quiet meta sets, one mn per batch."""
    val = b"v" * value_size
    with mcrig.connect(port, timeout=30) as sock:
        for b0 in range(0, n, batch):
            sock.sendall(b"".join(b"ms %s%08d %d q\r\n%s\r\n" % (prefix, i, value_size, val)
                                  for i in range(b0, min(b0 + batch, n))) + b"mn\r\n")
            got = b""
            while not got.endswith(b"MN\r\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("memcached closed the connection")
                got += chunk


# a calcified instance: 8 MB of 1 KB items, then 17 KB items that the one
# page their class gets evicts 20 times over (memcached's slab_automove=0)
calc_mc = mcrig.start_memcached("-m", "8", "-o", "slab_automove=0")
db.server(c, "dash_calc", calc_mc.addr)
db.server(c, "dash_calc_too", calc_mc.addr)
load(calc_mc.port, b"s:", 8 * 1000, 1000)
load(calc_mc.port, b"L:", 1260, 17000)
mcrig.wait_for(lambda: db.value(c, "SELECT calcified FROM mc_slab_calcification('dash_calc')"),
               timeout=15, interval=0.2, what="the private memcached to be calcified")

# a little traffic between samples, so the "over time" panels have deltas
for n in range(3):
    load(calc_mc.port, b"L%d:" % n, 40, 17000)      # the starved class evicts on
    db.sql(c, "SELECT count(mc_set('dash:' || i, repeat('d', 100 * i))) FROM generate_series(1, 20) i")
    db.sql(c, "SELECT count(mc_get('dash:' || i)) FROM generate_series(1, 30) i")
    db.sql(c, "CALL mcfdw_sample_stats()")
# a watch for the WAL-invalidation panel: the row mc_watch writes (the rig's
# cluster does not preload mcfdw, so no worker delivers it: its lag is NULL)
db.sql(c, "CREATE TABLE dash_watched (id int PRIMARY KEY)")
db.sql(c, "INSERT INTO mc_watches (relid, server, templates) VALUES ('dash_watched', 'memcached', ARRAY['w:{id}'])")
t.ok(db.value(c, "SELECT count(DISTINCT sampled_at) FROM mcfdw_server_history") == 3,
     "history.sql: three samples taken")
t.ok(db.value(c, "SELECT count(*) FROM mcfdw_server_history WHERE error IS NOT NULL") == 3,
     "history.sql: the down instance is sampled with its error, the sampling does not fail")

# ---- Grafana's substitutions ------------------------------------------------
now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
t_from, t_to = now - datetime.timedelta(hours=6), now + datetime.timedelta(minutes=1)
INTERVAL_S = 60


def ts(d):
    return "'%s'" % d.isoformat().replace("+00:00", "Z")


def quote(v):
    return "'" + v.replace("'", "''") + "'"


def macros(sql):
    """PostgreSQL data source macros, expanded as Grafana expands them."""
    def args(m):
        return [a.strip() for a in m.group(1).split(",")] if m.group(1).strip() else []
    rules = [
        (r"\$__timeFilter\(([^)]*)\)", lambda m: "%s BETWEEN %s AND %s" % (args(m)[0], ts(t_from), ts(t_to))),
        (r"\$__timeFrom\(\)", lambda m: ts(t_from)),
        (r"\$__timeTo\(\)", lambda m: ts(t_to)),
        (r"\$__timeGroupAlias\(([^)]*)\)",
         lambda m: "floor(extract(epoch from %s)/%d)*%d AS \"time\"" % (args(m)[0], INTERVAL_S, INTERVAL_S)),
        (r"\$__timeGroup\(([^)]*)\)",
         lambda m: "floor(extract(epoch from %s)/%d)*%d" % (args(m)[0], INTERVAL_S, INTERVAL_S)),
        (r"\$__timeEpoch\(([^)]*)\)", lambda m: "extract(epoch from %s) AS \"time\"" % args(m)[0]),
        (r"\$__time\(([^)]*)\)", lambda m: "%s AS \"time\"" % args(m)[0]),
        (r"\$__unixEpochFilter\(([^)]*)\)", lambda m: "%s >= %d AND %s <= %d" % (
            args(m)[0], t_from.timestamp(), args(m)[0], t_to.timestamp())),
        (r"\$__interval_ms\b", lambda m: str(INTERVAL_S * 1000)),
        (r"\$__interval\b", lambda m: "'%ds'" % INTERVAL_S),
    ]
    for pat, rep in rules:
        sql = re.sub(pat, rep, sql)
    return sql


def variables(sql, values):
    """$name, ${name}, [[name]]: a multi-valued variable becomes 'a','b'."""
    for name, vals in values.items():
        lit = ",".join(quote(v) for v in vals)
        sql = re.sub(r"\$\{%s(?::[a-z]+)?\}|\$%s\b|\[\[%s\]\]" % (name, name, name), lambda m: lit, sql)
    return sql


def leftover(sql):
    """Placeholders Grafana would have replaced but we did not."""
    return re.findall(r"\$(?:__)?[A-Za-z_]\w*|\$\{[^}]*\}|\[\[\w+\]\]", sql)


def run(sql):
    cur = c.cursor()
    cur.execute(sql)
    return cur.fetchall()


# ---- variables, in order (a later one may use an earlier one) -----------
values = {}
templ = dash.get("templating", {}).get("list", [])
for v in templ:
    if v.get("type") != "query":
        continue
    q = v["query"]["rawSql"] if isinstance(v["query"], dict) else v["query"]
    sql = variables(macros(q), values)
    t.ok(not leftover(sql), "variable %s: every placeholder substituted" % v["name"], *leftover(sql))
    try:
        rows = run(sql)
        err = None
    except Exception as e:  # noqa: BLE001
        rows, err = [], str(e).strip()
    t.ok(err is None and rows, "variable %s: query runs and returns values (%d)" % (v["name"], len(rows)), err or "")
    values[v["name"]] = [str(r[0]) for r in rows]
t.ok({"server", "instance"} <= set(values), "the dashboard has server and instance variables")
t.ok("dash_two" in values.get("server", []) and DOWN in values.get("instance", []),
     "the variables list every server and instance, the down one too")


# ---- every panel ---------------------------------------------------------
def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


DS_TYPES = ("grafana-postgresql-datasource", "postgres")
n_queries = 0
for p in all_panels(dash["panels"]):
    if p.get("type") in ("row", "text"):
        continue
    targets = p.get("targets", [])
    t.ok(targets and all(tg.get("rawSql") and tg.get("rawQuery") for tg in targets),
         "panel %r: has raw SQL targets" % p.get("title"))
    for tg in targets:
        ds = tg.get("datasource") or p.get("datasource") or {}
        sql = variables(macros(tg.get("rawSql", "")), values)
        left = leftover(sql)
        err = None
        rows = []
        if not left:
            try:
                rows = run(sql)
            except Exception as e:  # noqa: BLE001
                err = str(e).strip()
        n_queries += 1
        t.ok(ds.get("type") in DS_TYPES and not left and err is None and rows,
             "panel %r (%s): runs, %d rows" % (p.get("title"), tg.get("format"), len(rows)),
             *(["unsubstituted: %s" % " ".join(left)] if left else []
               + ([err] if err else []) + (["datasource %r" % ds] if ds.get("type") not in DS_TYPES else [])
               + ([] if rows or err or left else ["no rows"])))
t.ok(n_queries >= 10, "the dashboard has %d panel queries" % n_queries)

# the down instance is in the Instances table, with its error
inst = [p for p in all_panels(dash["panels"]) if p.get("title") == "Instances" and p.get("type") == "table"]
if inst:
    sql = variables(macros(inst[0]["targets"][0]["rawSql"]), values)
    rows = run(sql)
    t.ok(any(r[1] == DOWN and r[2] for r in rows), "Instances shows the down instance with its error")
else:
    t.ok(False, "the dashboard has an Instances panel")

# the calcification panels: the calcified instance, counted once although
# two servers name it
by_title = {p.get("title"): p for p in all_panels(dash["panels"])}
for title in ("Calcified instances", "Calcification"):
    t.ok(title in by_title, "the dashboard has a %r panel" % title)
if "Calcified instances" in by_title:
    rows = run(variables(macros(by_title["Calcified instances"]["targets"][0]["rawSql"]), values))
    t.is_(rows[0][0], 1, "Calcified instances: the one calcified instance, counted once for its two servers")
if "Calcification" in by_title:
    cur = c.cursor()
    cur.execute(variables(macros(by_title["Calcification"]["targets"][0]["rawSql"]), values))
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    calc = [r for r in rows if r["calcified"]]
    t.ok(len(calc) == 2 and {r["server"] for r in calc} == {"dash_calc", "dash_calc_too"}
         and all(r["instance"] == calc_mc.addr and r["reason"] == "old items" and r["slab_automove"] == 0
                 for r in calc) and rows[:2] == calc,
         "Calcification lists the calcified instance first, under both its servers", repr(rows))

# ---- an instance named by two servers counts once where panels sum ----------
# the calcified memcached is dash_calc's and dash_calc_too's: a panel over
# memcached's own figures shows the same whether one or both are selected
SUMMED = ("Slab waste", "Slab memory", "Instances answering", "Evictions and hit ratio",
          "Waste by class", "Pages by class", "Evictions by instance", "Evictions by slab class",
          "Hit ratio over time", "Waste over time", "Pages by class over time",
          "Calcified instances", "Slab pages moved by the automover")
one = dict(values, server=["dash_calc"], instance=[calc_mc.addr])
both = dict(values, server=["dash_calc", "dash_calc_too"], instance=[calc_mc.addr])
for title in SUMMED:
    if not t.ok(title in by_title, "the dashboard has a %r panel" % title):
        continue
    sql = by_title[title]["targets"][0]["rawSql"]
    r_one, r_both = run(variables(macros(sql), one)), run(variables(macros(sql), both))
    t.ok(r_one and r_one == r_both,
         "%s: the instance of two servers counted once" % title,
         "one server: %r" % r_one[:6], "both:       %r" % r_both[:6])

# ---- the client panels: what this session did -------------------------------
for title in ("Client hit ratio per instance", "Client latency p50 / p99 per instance",
              "Client errors by class", "Degraded calls", "Lost on-commit writes",
              "WAL invalidation lag", "Client statistics", "Instances marked dead"):
    t.ok(title in by_title, "the dashboard has a %r panel" % title)


def panel_rows(title, vals=values):
    cur = c.cursor()
    cur.execute(variables(macros(by_title[title]["targets"][0]["rawSql"]), vals))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


MC0 = mcrig.addr(ports[0])
if "Client hit ratio per instance" in by_title:
    rows = {r["instance"]: r["hit_ratio"] for r in panel_rows("Client hit ratio per instance")}
    t.is_(round(rows.get(MC0) or 0, 6), round(60 / 90, 6),
          "Client hit ratio: 3 x 30 gets of which 20 hit, on memcached's instance")
if "Client latency p50 / p99 per instance" in by_title:
    rows = {r["instance"]: r for r in panel_rows("Client latency p50 / p99 per instance")}
    r = rows.get(MC0)
    t.ok(r is not None and r["requests"] == 150 and 0 < r["p50_ms"] <= r["p99_ms"],
         "Client latency: the 150 sets and gets of memcached's instance, p50 <= p99", repr(rows))
    t.ok(DOWN not in rows, "... the down instance's stats commands are left out", repr(rows))
if "Client errors by class" in by_title:
    rows = {r["instance"]: r for r in panel_rows("Client errors by class")}
    t.ok(DOWN in rows and rows[DOWN]["connect"] + rows[DOWN]["timeout"] > 0
         and rows.get(MC0, {}).get("connect") == 0,
         "Client errors by class: the down instance's failed connects, none for memcached's", repr(rows))
if "WAL invalidation lag" in by_title:
    rows = panel_rows("WAL invalidation lag")
    t.ok([(r["table"], r["server"]) for r in rows] == [("dash_watched", "memcached")],
         "WAL invalidation lag: the watch", repr(rows))
# the percentiles against a known latency: replies delayed 40 ms are in the
# histogram's bucket [32.768, 65.536) ms
delayed = faultproxy.FaultProxy(ports[0], mode="delay").start()
delayed.delay = 0.040
db.server(c, "dash_delay", delayed.addr)
db.sql(c, "SELECT count(mc_get('dash:1', 'dash_delay')) FROM generate_series(1, 10)")
if "Client latency p50 / p99 per instance" in by_title:
    rows = panel_rows("Client latency p50 / p99 per instance",
                      dict(values, server=["dash_delay"], instance=[delayed.addr]))
    t.ok(len(rows) == 1 and rows[0]["requests"] == 10 and rows[0]["p50_ms"] == 65.536
         and rows[0]["p99_ms"] >= 65.536,
         "Client latency: 10 replies delayed 40 ms, p50 65.536 ms (the bucket's upper bound), "
         "p99 no lower", repr(rows))
delayed.stop()

# a server whose instance is down, answering as a miss: 3 degraded calls and
# an on-commit delete lost after its commit
db.server(c, "dash_miss", DOWN, on_failure="miss", connect_timeout="300ms")
db.sql(c, "SET mcfdw.warn_on_miss = off")
db.sql(c, "SELECT count(mc_get('dash:1', 'dash_miss')) FROM generate_series(1, 3)")
c.autocommit = False
db.sql(c, "SELECT mc_delete_on_commit('dash:1', 'dash_miss')")
c.commit()
c.autocommit = True
miss = dict(values, server=["dash_miss"], instance=[DOWN])
if "Degraded calls" in by_title:
    t.is_(panel_rows("Degraded calls", miss), [{"degraded calls": 3}], "Degraded calls: the 3 gets answered as a miss")
if "Lost on-commit writes" in by_title:
    t.is_(panel_rows("Lost on-commit writes", miss), [{"lost": 1, "sent": 0}],
          "Lost on-commit writes: the delete the down instance did not get")
if "Instances marked dead" in by_title:
    t.is_(panel_rows("Instances marked dead", miss), [{"dead now": 1, "marked since reset": 1}],
          "Instances marked dead: the down instance, marked by the degraded gets")
    t.is_(panel_rows("Instances marked dead", dict(values, server=["dash_calc", "dash_calc_too"])),
          [{"dead now": 0, "marked since reset": 0}], "... and no live one")
# the same memcached through two servers: each server's requests are its own
# and add up, counted once each
db.sql(c, "SELECT count(mc_get('dash:1', 'dash_calc')), count(mc_get('dash:1', 'dash_calc_too')) "
          "FROM generate_series(1, 5)")
if "Client latency p50 / p99 per instance" in by_title:
    rows = {r["instance"]: r["requests"] for r in panel_rows("Client latency p50 / p99 per instance", both)}
    t.is_(rows, {calc_mc.addr: 10}, "Client latency: 5 gets through each of the two servers are 10 requests")

calc_mc.stop()
c.close()
t.done()
