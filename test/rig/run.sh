#!/bin/bash
# run.sh — `make run`: one private memcached and PostgreSQL cluster with
# mcfdw created, then psql on a terminal, or test/rig/demo.sql without one.
# Everything is torn down when psql exits, on failure and on Ctrl-C.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RIG_SRC"

trap 'rig_teardown $?' EXIT
trap 'echo; echo "${0##*/}: interrupted"; exit 130' INT
trap 'echo "${0##*/}: terminated"; exit 143' TERM

rig_start 1
rig_setup_extension

rc=0
if [ -t 0 ] && [ -t 1 ]; then
	echo ""
	echo "mcfdw is ready: memcached on 127.0.0.1:${RIG_MC_PORTS[0]}, PostgreSQL on 127.0.0.1:$PGPORT"
	echo "From another shell: source $RIG/env.sh && psql"
	echo "Quit psql (\\q or Ctrl-D) to tear everything down."
	echo ""
	# A Ctrl-C in psql cancels the query; it must not end the session.  Job
	# control puts psql in a process group of its own that owns the terminal,
	# so the Ctrl-C reaches psql only, not make (which would report
	# "Interrupt" afterwards).  bash's job control needs stderr on the
	# terminal; without it, at least this script ignores the Ctrl-C.
	# Ignoring SIGTTOU lets the script take the terminal back afterwards.
	if [ -t 2 ]; then
		trap '' TTOU
		set -m
	fi
	trap '' INT
	"$RIG_PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres || rc=$?
	set +m
	trap 'echo; echo "${0##*/}: interrupted"; exit 130' INT
else
	echo ""
	rig_psql -d postgres -a -P "null=(null)" -f test/rig/demo.sql || rc=$?
	rig_keep_if_asked
fi
exit "$rc"
