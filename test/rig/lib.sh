# lib.sh — the private test rig, sourced by run.sh and test.sh.
#
# Owns: one throw-away PostgreSQL cluster and N memcached servers on free
# loopback ports, a "hang" listener that accepts and never answers, the
# environment handed to the tests, and tearing all of it down.  With
# MCFDW_SOCKETS=1 the memcacheds and the hang listener are Unix sockets in
# $RIG/mcsock instead (memcached -s PATH -a 0700, run as the postgres user
# when we are root, as a cache beside the database would be), and
# MCFDW_MC_PORTS and MCFDW_HANG_PORT hold their paths.  Must not:
# touch any cluster, server or port it did not start itself.
#
# The sourcing script runs under `set -euo pipefail` and traps EXIT to call
# rig_teardown, so a failed step anywhere leaves nothing behind.

RIG_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MCFDW_PYTHON=${MCFDW_PYTHON:-/usr/bin/python3}
MCFDW_MEMCACHED=${MCFDW_MEMCACHED:-/usr/bin/memcached}

# PG_CONFIG from the environment (make exports it when the user sets it),
# else Debian's PostgreSQL 15, else whatever is on PATH.
if [ -z "${PG_CONFIG:-}" ]; then
	if [ -x /usr/lib/postgresql/15/bin/pg_config ]; then
		PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
	else
		PG_CONFIG=pg_config
	fi
fi

RIG=""				# the temp dir; empty when no rig is up
RIG_PGDATA=""
RIG_PGBIN=""
RIG_PIDS=()			# our own children: memcacheds, hang listener
RIG_MC_PORTS=()
RIG_PG_STARTED=0

rig_say() { echo "rig: $*"; }
rig_err() { echo "rig: error: $*" >&2; }

# Run a command as the postgres OS user when we are root (initdb and
# postgres refuse root), from a directory that user can enter.
rig_as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd "$RIG" && runuser -u postgres -- "$@")
	else
		(cd "$RIG" && "$@")
	fi
}

# Print N distinct free loopback ports.  All sockets stay bound until every
# port is chosen, so the N are distinct; another process could still take
# one before we do, which the wait loops below would report.
rig_free_ports() {
	"$MCFDW_PYTHON" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# True once a memcached answers "version" on the port (or socket path).
rig_mc_ready() {
	if [[ $1 == /* ]]; then
		"$MCFDW_PYTHON" - "$1" 2>/dev/null <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"version\r\n")
sys.exit(0 if s.recv(100).startswith(b"VERSION") else 1)
PY
		return
	fi
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'version\r\n' >&3
		IFS= read -r -t 2 line <&3 || exit 1
		[[ $line == VERSION* ]]
	) 2>/dev/null
}

rig_check_tools() {
	local missing=()
	[ -x "$MCFDW_PYTHON" ] || missing+=("$MCFDW_PYTHON (python3)")
	[ -x "$MCFDW_MEMCACHED" ] || missing+=("$MCFDW_MEMCACHED (memcached)")
	command -v "$PG_CONFIG" >/dev/null || missing+=("$PG_CONFIG (postgresql-server-dev-15)")
	if [ ${#missing[@]} -ne 0 ]; then
		rig_err "not found: ${missing[*]}; run 'make deps' as root"
		return 1
	fi
	RIG_PGBIN=$("$PG_CONFIG" --bindir)
	local b
	for b in initdb pg_ctl postgres psql; do
		[ -x "$RIG_PGBIN/$b" ] || { rig_err "$RIG_PGBIN/$b not found (postgresql-15)"; return 1; }
	done
}

# rig_start NMEMCACHED — bring the rig up and export its environment.
rig_start() {
	local nmc=$1 i port pid
	rig_check_tools

	RIG=$(mktemp -d "${TMPDIR:-/tmp}/mcfdw-rig.XXXXXX")
	mkdir -p "$RIG/log" "$RIG/sock" "$RIG/pids" "$RIG/tmp"
	chmod 755 "$RIG"
	chmod 1777 "$RIG/pids" "$RIG/tmp"	# helpers of any user record pids here
	if [ "$(id -u)" -eq 0 ]; then
		if ! id -u postgres >/dev/null 2>&1; then
			rig_say "creating the postgres OS user"
			useradd --system --user-group --home-dir /var/lib/postgresql \
				--no-create-home --shell /bin/bash postgres
		fi
		chown postgres: "$RIG" "$RIG/log" "$RIG/sock"
	fi
	RIG_PGDATA="$RIG/pgdata"

	local ports
	read -r -a ports <<<"$(rig_free_ports $((nmc + 1)))"
	PGPORT=${ports[0]}
	RIG_MC_PORTS=("${ports[@]:1}")
	if [ "${MCFDW_SOCKETS:-0}" = "1" ]; then
		mkdir -p "$RIG/mcsock"
		[ "$(id -u)" -eq 0 ] && chown postgres: "$RIG/mcsock"
		RIG_MC_PORTS=()
		for ((i = 0; i < nmc; i++)); do RIG_MC_PORTS+=("$RIG/mcsock/mc$i.sock"); done
	fi
	local mc_csv
	mc_csv=$(IFS=,; echo "${RIG_MC_PORTS[*]}")

	# PostgreSQL: UTF8 whatever the caller's locale, trust auth, loopback only.
	rig_say "initdb in $RIG_PGDATA"
	rig_as_pg "$RIG_PGBIN/initdb" -D "$RIG_PGDATA" -U postgres -E UTF8 \
		--locale=C.UTF-8 --auth=trust --no-sync >"$RIG/log/initdb.log" 2>&1 ||
		{ cat "$RIG/log/initdb.log" >&2; rig_err "initdb failed"; return 1; }
	{
		echo ""
		echo "# --- added by test/rig/lib.sh ---"
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $PGPORT"
		echo "unix_socket_directories = '$RIG/sock'"
		echo "mcfdw_test.mc_ports = '$mc_csv'"
		echo "mcfdw_test.hang_port = '@HANG_PORT@'"
		echo "# --- test/rig/postgresql.conf ---"
		cat "$RIG_SRC/test/rig/postgresql.conf"
	} >>"$RIG_PGDATA/postgresql.conf"

	# memcached: in its own session so a Ctrl-C at the terminal (aimed at
	# psql) does not reach it; foreground so its errors land in our log.
	for port in "${RIG_MC_PORTS[@]}"; do
		local mcuser=() listen=(-l 127.0.0.1 -p "$port" -U 0) name=$port
		if [[ $port == /* ]]; then
			[ "$(id -u)" -eq 0 ] && mcuser=(-u postgres)
			listen=(-s "$port" -a 0700)
			name=$(basename "$port" .sock)
		else
			[ "$(id -u)" -eq 0 ] && mcuser=(-u nobody)
		fi
		setsid "$MCFDW_MEMCACHED" "${mcuser[@]}" "${listen[@]}" -m 64 \
			</dev/null >"$RIG/log/memcached-$name.log" 2>&1 &
		RIG_PIDS+=($!)
		echo $! >"$RIG/memcached-$name.pid"
	done

	# The hang listener picks its own port (bind to 0) and reports it.
	local hang_unix=()
	[ "${MCFDW_SOCKETS:-0}" = "1" ] && hang_unix=(--unix "$RIG/mcsock/hang.sock")
	setsid "$MCFDW_PYTHON" "$RIG_SRC/test/rig/hang.py" "$RIG/hang.port" "${hang_unix[@]}" \
		</dev/null >"$RIG/log/hang.log" 2>&1 &
	RIG_PIDS+=($!)
	local hang_pid=$!

	for ((i = 0; i < 200; i++)); do
		[ -s "$RIG/hang.port" ] && break
		kill -0 "$hang_pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -s "$RIG/hang.port" ] || { rig_err "hang listener did not start"; return 1; }
	MCFDW_HANG_PORT=$(cat "$RIG/hang.port")
	sed -i "s|@HANG_PORT@|$MCFDW_HANG_PORT|" "$RIG_PGDATA/postgresql.conf"

	rig_say "starting postgres on 127.0.0.1:$PGPORT"
	rig_as_pg "$RIG_PGBIN/pg_ctl" -D "$RIG_PGDATA" -l "$RIG/log/postgres.log" \
		-w -t 60 start >"$RIG/log/pg_ctl.log" 2>&1 ||
		{ rig_err "postgres did not start (pg_ctl: $(tail -n 1 "$RIG/log/pg_ctl.log"))"; return 1; }
	RIG_PG_STARTED=1

	for ((i = 0; i < ${#RIG_MC_PORTS[@]}; i++)); do
		port=${RIG_MC_PORTS[$i]}
		pid=${RIG_PIDS[$i]}
		local ok=0 n
		for ((n = 0; n < 200; n++)); do
			if ! kill -0 "$pid" 2>/dev/null; then break; fi
			if rig_mc_ready "$port"; then ok=1; break; fi
			sleep 0.05
		done
		if [ $ok -ne 1 ]; then
			if kill -0 "$pid" 2>/dev/null; then
				rig_err "memcached on port $port did not answer within 10s"
			else
				rig_err "memcached on port $port exited at start"
			fi
			return 1
		fi
	done
	rig_say "memcached on ports $mc_csv, hang listener on port $MCFDW_HANG_PORT"

	export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres
	export MCFDW_RIG="$RIG" MCFDW_MC_PORTS="$mc_csv" MCFDW_HANG_PORT
	export MCFDW_SOCKETS=${MCFDW_SOCKETS:-0}
	export MCFDW_MEMCACHED MCFDW_PYTHON MCFDW_SRC="$RIG_SRC" PG_CONFIG
	unset PGSERVICE PGPASSWORD PGSSLMODE PGHOSTADDR PGOPTIONS || true
	cat >"$RIG/env.sh" <<EOF
# Source this to reach the rig from another shell.
export PGHOST=127.0.0.1 PGPORT=$PGPORT PGUSER=postgres PGDATABASE=postgres
export MCFDW_RIG='$RIG' MCFDW_MC_PORTS='$mc_csv' MCFDW_HANG_PORT='$MCFDW_HANG_PORT'
export MCFDW_SOCKETS='$MCFDW_SOCKETS'
export MCFDW_MEMCACHED='$MCFDW_MEMCACHED' MCFDW_PYTHON='$MCFDW_PYTHON' MCFDW_SRC='$RIG_SRC'
export PG_CONFIG='$PG_CONFIG' PYTHONPATH='$RIG_SRC/test/lib'\${PYTHONPATH:+:\$PYTHONPATH}
export PATH='$RIG_PGBIN':\$PATH
EOF
}

rig_psql() {
	"$RIG_PGBIN/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres "$@"
}

# Create the extension in the postgres database and the foreign server
# "memcached" (mcfdw creates none) on the first rig memcached, as README's
# first steps do.
rig_setup_extension() {
	local servers=127.0.0.1:${RIG_MC_PORTS[0]}
	[[ ${RIG_MC_PORTS[0]} == /* ]] && servers=${RIG_MC_PORTS[0]}
	rig_say "CREATE EXTENSION mcfdw; CREATE SERVER memcached -> $servers"
	rig_psql -q -d postgres -v servers="$servers" <<'SQL'
CREATE EXTENSION mcfdw;
CREATE SERVER memcached FOREIGN DATA WRAPPER mcfdw OPTIONS (servers :'servers');
SQL
}

# Print the logs that explain a failure: tails of every non-empty log.
rig_print_logs() {
	[ -n "$RIG" ] && [ -d "$RIG/log" ] || return 0
	local f logs=("$RIG"/log/postgres.log "$RIG"/log/memcached-*.log "$RIG"/log/hang.log)
	# initdb's and pg_ctl's own logs only matter when the server never came up
	[ "$RIG_PG_STARTED" -eq 1 ] || logs=("$RIG"/log/initdb.log "$RIG"/log/pg_ctl.log "${logs[@]}")
	for f in "${logs[@]}"; do
		[ -s "$f" ] || continue
		echo "----- rig log ${f#"$RIG"/log/} (last 50 lines) -----"
		tail -n 50 "$f"
	done
	echo "----- end of rig logs -----"
}

# MCFDW_KEEP=1: show how to reach the rig and wait until Enter / a signal.
rig_keep_if_asked() {
	[ "${MCFDW_KEEP:-0}" = "1" ] && [ -n "$RIG" ] || return 0
	echo ""
	echo "rig: MCFDW_KEEP=1 — the rig stays up. From another shell:"
	echo "    source $RIG/env.sh && psql"
	sed -n 's/^export /    /p' "$RIG/env.sh"
	# A signal here only ends the wait; the caller then finishes normally.
	trap 'true' INT TERM
	if { : </dev/tty; } 2>/dev/null; then
		echo "rig: press Enter (or Ctrl-C) to tear it down"
		read -r _ </dev/tty || true
	else
		echo "rig: send SIGINT or SIGTERM to pid $$ to tear it down"
		sleep infinity &
		wait $! || true
		kill $! 2>/dev/null || true
	fi
	trap 'echo; echo "${0##*/}: interrupted"; exit 130' INT
	trap 'echo "${0##*/}: terminated"; exit 143' TERM
}

# Kill a process we did not start ourselves (a helper's memcached) and give
# it up to two seconds to go.
rig_kill() {
	local pid=$1 n
	kill -KILL "$pid" 2>/dev/null || return 0
	for ((n = 0; n < 40; n++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
}

# Stop everything the rig started and remove its directory.  Idempotent.
# rig_teardown STATUS: with a non-zero STATUS the logs are printed first.
rig_teardown() {
	local status=${1:-0} pid f
	[ -n "$RIG" ] || return 0
	trap '' INT TERM
	[ "$status" -eq 0 ] || rig_print_logs
	if [ -f "$RIG_PGDATA/postmaster.pid" ]; then
		rig_as_pg "$RIG_PGBIN/pg_ctl" -D "$RIG_PGDATA" -m immediate -w -t 30 stop \
			>/dev/null 2>&1 || {
			pid=$(head -n 1 "$RIG_PGDATA/postmaster.pid" 2>/dev/null || true)
			if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
		}
	fi
	for pid in "${RIG_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	# memcacheds and the like started by test helpers (test/lib/mcrig.py)
	for f in "$RIG"/pids/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null || true)
		[[ $pid =~ ^[0-9]+$ ]] && rig_kill "$pid"
	done
	rm -rf "$RIG"
	RIG=""
	RIG_PIDS=()
	RIG_PG_STARTED=0
}
