#!/bin/bash
# bench.sh — `make bench`: mcfdw side by side with pgmemcache and a raw C
# client, on a private rig like `make test`'s (test/rig/lib.sh).
#
# Owns: bringing the bench rig up (four memcacheds, a private PostgreSQL with
# pgmemcache preloaded and mcfdw created, both pointed at the same four
# servers with the same "modula" routing), building test/bench/bin/rawclient
# (plain sockets, and OpenSSL for its TLS mode), and handing over to
# test/bench/bench.py, which loads the keys, runs the workloads and prints
# the table (and writes test/bench/results/latest.csv).
# Must not: touch anything the rig did not start.
#
# Knobs (environment): BENCH_QUICK=1 (fewer, shorter rounds), BENCH_ROUNDS,
# BENCH_SECONDS, BENCH_MIX_ROUNDS (rounds of workload 2 and of workload
# 13's 10-row statements), BENCH_ONLY=1,3,8 (some workloads),
# BENCH_BASELINE=path/to/mcfdw.so (another build measured in the same rounds
# of every workload but 6 and 14, each row of mcfdw's then compared, this
# build / baseline, against BENCH_BASELINE_BOUND, default 1.03),
# MCFDW_KEEP=1 (the rig stays up afterwards, as with `make test`).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../rig/lib.sh"
cd "$RIG_SRC"

trap 'rig_teardown $?' EXIT
trap 'echo; echo "${0##*/}: interrupted"; exit 130' INT
trap 'echo "${0##*/}: terminated"; exit 143' TERM

rig_start 4
servers=$(printf '127.0.0.1:%s,' "${RIG_MC_PORTS[@]}")
servers=${servers%,}

# pgmemcache reads its servers from pgmemcache.default_servers when the
# library loads.  It works when loaded on first use too (the setting is a
# placeholder until then), but its README says to preload it, and that is
# how it is deployed: preloaded, so no backend pays the library load.  A
# preload needs a restart.
rig_say "pgmemcache: shared_preload_libraries, pgmemcache.default_servers = '$servers'"
{
	echo "# --- added by test/bench/bench.sh ---"
	echo "shared_preload_libraries = 'pgmemcache'"
	echo "pgmemcache.default_servers = '$servers'"
} >>"$RIG_PGDATA/postgresql.conf"
rig_as_pg "$RIG_PGBIN/pg_ctl" -D "$RIG_PGDATA" -l "$RIG/log/postgres.log" \
	-w -t 60 restart >"$RIG/log/pg_ctl.log" 2>&1 ||
	{ rig_err "postgres did not restart (pg_ctl: $(tail -n 1 "$RIG/log/pg_ctl.log"))"; exit 1; }

rig_setup_extension
rig_say "server memcached -> $servers, distribution modula; CREATE EXTENSION pgmemcache"
rig_psql -q -d postgres -v servers="$servers" <<'SQL'
ALTER SERVER memcached OPTIONS (SET servers :'servers', ADD distribution 'modula');
CREATE EXTENSION IF NOT EXISTS pgmemcache;
SQL

mkdir -p test/bench/bin
rig_say "building test/bench/bin/rawclient"
${CC:-cc} -O2 -Wall -Wextra -Werror -Isrc/core -o test/bench/bin/rawclient \
	test/bench/rawclient.c src/core/ring.c src/core/hash.c -lssl -lcrypto

export MCFDW_PGBIN="$RIG_PGBIN" MCFDW_PGDATA="$RIG_PGDATA"
export PYTHONPATH="$RIG_SRC/test/lib${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
rc=0
"$MCFDW_PYTHON" test/bench/bench.py || rc=$?
rig_keep_if_asked
exit "$rc"
