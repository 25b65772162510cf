#!/bin/bash
# test.sh — `make test` (and `make unit`): bring the rig up, run every suite,
# count TAP, and end with the line "N passed, N failed".
#
# With MCFDW_BUILD=1 (`make test` sets it), two builds come first, each
# counted as one test: `make WERROR=1` (the release build, compiled only: a
# warning that shows only without Asserts fails here), then
# `make WERROR=1 ASSERTS=1 install`, the assert-enabled build that every
# suite below runs against (one more test checks that its Asserts are in).
# When that one fails, nothing else runs.
#
# Suites, in order (MCFDW_TESTS / `make test TESTS=...` picks some):
#   unit         test/unit/test_*.c, built by `make test/unit/bin/test_X`
#   scripts      test/unit/*.sh, then test/fuzz/run_fuzz.sh when present
#   regress      pg_regress over MCFDW_REGRESS against the private cluster
#   integration  test/integration/*.py|*.rb|*.sh
# MCFDW_TESTS takes suite names and/or file paths (comma or space separated):
# "unit,regress", "test/integration/pool.py", "none" (just the rig).
#
# Unix sockets: after the integration suite, the ones in SOCKET_TESTS below
# (those picked) run again against a second rig whose memcacheds and hang
# listener are Unix sockets (lib.sh's MCFDW_SOCKETS=1; mcrig.py, hostile.py
# and faultproxy.py follow it), counted as "NAME (unix sockets)".
# MCFDW_SOCKET_PASS=0 leaves that pass out; MCFDW_SOCKETS=1 makes the one
# rig a socket rig and runs the picked integration tests (any of them, to
# try one) and no regress (the pg_regress tests write TCP servers) in it.
#
# Counting: every TAP "ok"/"not ok" line counts (a "not ok ... # TODO" does
# not fail); a program that exits non-zero with no "not ok" counts one
# failure, one that prints no test line counts one failure, one that prints a
# plan it did not meet counts one failure; each pg_regress test counts once.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RIG_SRC"

MAKE=${MAKE:-make}
# make passes these; when run by hand, read them from the Makefile.
MCFDW_REGRESS=${MCFDW_REGRESS:-$(sed -n 's/^REGRESS_TESTS *= *//p' Makefile)}
MCFDW_REGRESS_OPTS=${MCFDW_REGRESS_OPTS:-$(sed -n 's/^REGRESS_OPTS *= *//p' Makefile)}
MCFDW_TESTS=${MCFDW_TESTS:-}
export MCFDW_FUZZ_SECONDS=${MCFDW_FUZZ_SECONDS:-20}
export MCFDW_RUBY=${MCFDW_RUBY:-/usr/bin/ruby}
export MCFDW_PYTHON MCFDW_MEMCACHED MCFDW_SRC="$RIG_SRC"
export PYTHONPATH="$RIG_SRC/test/lib${PYTHONPATH:+:$PYTHONPATH}"
export RUBYLIB="$RIG_SRC/test/lib${RUBYLIB:+:$RUBYLIB}"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Per-program time limits, seconds.
LIMIT_UNIT=${MCFDW_LIMIT_UNIT:-120}
# a whole build of the extension: 2m20s seen on a loaded 2-core machine
LIMIT_BUILD=${MCFDW_LIMIT_BUILD:-600}
LIMIT_SCRIPT=${MCFDW_LIMIT_SCRIPT:-300}
LIMIT_REGRESS=${MCFDW_LIMIT_REGRESS:-600}
LIMIT_INTEGRATION=${MCFDW_LIMIT_INTEGRATION:-300}

PASSED=0
FAILED=0
SKIPPED=0
FAILED_NAMES=()
SUMMARY_DONE=0
CUR_BASE=""

# ---- what to run ---------------------------------------------------------
WANT_SUITES=()
WANT_FILES=()
for w in ${MCFDW_TESTS//,/ }; do
	case "$w" in
	all) WANT_SUITES+=(unit scripts regress integration) ;;
	unit | scripts | regress | integration | none) WANT_SUITES+=("$w") ;;
	tap) WANT_SUITES+=(scripts) ;;
	*)
		[ -e "$w" ] || { echo "test.sh: no suite or file named '$w'" >&2; exit 2; }
		WANT_FILES+=("$w")
		;;
	esac
done
[ ${#WANT_SUITES[@]} -eq 0 ] && [ ${#WANT_FILES[@]} -eq 0 ] &&
	WANT_SUITES=(unit scripts regress integration)

want_suite() {
	local s
	for s in "${WANT_SUITES[@]}"; do [ "$s" = "$1" ] && return 0; done
	return 1
}

# Files of a suite to run: all of them when the suite is wanted, else the
# ones named in MCFDW_TESTS.
pick() {
	local suite=$1 f w
	shift
	for f in "$@"; do
		[ -e "$f" ] || continue
		if want_suite "$suite"; then
			echo "$f"
			continue
		fi
		for w in "${WANT_FILES[@]}"; do
			[ "$(realpath "$w")" = "$(realpath "$f")" ] && echo "$f"
		done
	done
	return 0
}

shopt -s nullglob
mapfile -t UNIT_FILES < <(pick unit test/unit/test_*.c)
mapfile -t SCRIPT_FILES < <(pick scripts test/unit/*.sh test/fuzz/run_fuzz.sh)
mapfile -t INTEGRATION_FILES < <(pick integration test/integration/*.py \
	test/integration/*.rb test/integration/*.sh | LC_ALL=C sort)
shopt -u nullglob

# The integration tests that also run over Unix sockets: every server they
# start or fake follows mcrig.SOCKETS.  The others stay TCP-only; the reason
# for each is in docs/testing.md ("Unix sockets").
SOCKET_TESTS=(
	test/integration/failover.py
	test/integration/pool_reuse.py
	test/integration/out_of_step.py
	test/integration/on_failure_errors.py
	test/integration/robust_at_most_once.py
	test/integration/robust_stray_reply.py
	test/integration/robust_stray_instances.py
	test/integration/robust_stray_pipeline.py
	test/integration/robust_dump_hostile.py
	test/integration/robust_restart.py
	test/integration/robust_batch.py
	test/integration/robust_foreign.py
	test/integration/robust_interrupts.py
	test/integration/multi_get_stream.py
	test/integration/dashboard.py
	test/integration/robust_soak.py
	test/integration/robust_tenants.py
	test/integration/race_invalidate.py
	test/integration/wait_event.py
)
SOCKET_FILES=()
if [ "${MCFDW_SOCKETS:-0}" = "1" ]; then
	MCFDW_REGRESS=""
else
	export MCFDW_SOCKETS=0
	if [ "${MCFDW_SOCKET_PASS:-1}" != "0" ]; then
		for f in "${INTEGRATION_FILES[@]}"; do
			for s in "${SOCKET_TESTS[@]}"; do
				[ "$(realpath "$f")" = "$(realpath "$s")" ] && SOCKET_FILES+=("$f")
			done
		done
	fi
fi

RUN_REGRESS=0
want_suite regress && [ -n "$MCFDW_REGRESS" ] && RUN_REGRESS=1
NEED_RIG=0
{ [ $RUN_REGRESS -eq 1 ] || [ ${#INTEGRATION_FILES[@]} -gt 0 ] || want_suite none; } && NEED_RIG=1

# ---- bookkeeping ---------------------------------------------------------
summary() {
	[ "$SUMMARY_DONE" -eq 1 ] && return 0
	SUMMARY_DONE=1
	echo ""
	if [ ${#FAILED_NAMES[@]} -gt 0 ]; then
		echo "failed:"
		printf '    %s\n' "${FAILED_NAMES[@]}"
	fi
	[ "$SKIPPED" -gt 0 ] && echo "($SKIPPED of the passed tests were skips)"
	echo "$PASSED passed, $FAILED failed"
}

# Kill the test program that is running, if any (its whole process group).
stop_current() {
	[ -n "$CUR_BASE" ] && [ -f "$CUR_BASE.pid" ] || return 0
	local pg
	pg=$(cat "$CUR_BASE.pid")
	kill -TERM -- "-$pg" 2>/dev/null || return 0
	local n
	for ((n = 0; n < 40; n++)); do
		kill -0 -- "-$pg" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL -- "-$pg" 2>/dev/null || true
	CUR_BASE=""
}

on_exit() {
	local rc=$?
	set +e
	trap '' INT TERM
	stop_current
	if [ "$SUMMARY_DONE" -eq 0 ]; then
		# Left early: a signal or a rig failure.  Count it, show the logs.
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("test.sh stopped early (status $rc)")
		rig_teardown 1
		rm -rf "$WORK"
		summary
		[ "$rc" -eq 0 ] && rc=1
		exit "$rc"
	fi
	rig_teardown 0
	rm -rf "$WORK"
	exit "$rc"
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcfdw-test.XXXXXX")	# outputs of the programs
trap on_exit EXIT
trap 'echo; echo "${0##*/}: interrupted"; exit 130' INT
trap 'echo "${0##*/}: terminated"; exit 143' TERM

header() { printf '\n===== %s =====\n' "$*"; }

# run_prog LIMIT CMD... — run CMD in its own process group, stream its output,
# leave RUN_OUT (the captured output) and RUN_RC (124 when it timed out).
RUN_SEQ=0
run_prog() {
	local limit=$1
	shift
	RUN_SEQ=$((RUN_SEQ + 1))
	CUR_BASE="$WORK/run.$RUN_SEQ"
	# run-one.sh ends by killing its own group; the 2>/dev/null keeps the
	# shell's "Killed" job notice out of the output (the test's own stderr
	# is already folded into its stdout).
	{ setsid "$RIG_SRC/test/rig/run-one.sh" "$CUR_BASE" "$limit" "$@" | tee "$CUR_BASE.out"; } 2>/dev/null &
	wait $! || true
	RUN_OUT="$CUR_BASE.out"
	if [ -f "$CUR_BASE.rc" ]; then
		RUN_RC=$(cat "$CUR_BASE.rc")
	elif [ -f "$CUR_BASE.timeout" ]; then
		echo "# rig: $(cat "$CUR_BASE.timeout")"
		RUN_RC=124
	else
		RUN_RC=255
	fi
	CUR_BASE=""
}

# count_tap NAME — add RUN_OUT's TAP lines to the totals.
count_tap() {
	local name=$1 p f s plan bail
	read -r p f s plan bail < <(awk '
		/^ok([ \t]|$)/      { p++; if (tolower($0) ~ /#[ \t]*skip/) s++; next }
		/^not ok([ \t]|$)/  { if (tolower($0) ~ /#[ \t]*todo/) p++; else f++; next }
		/^1\.\.[0-9]+/      { plan = substr($1, 4) + 0 }
		/^Bail out!/        { bail = 1 }
		END { printf "%d %d %d %d %d\n", p, f, s, (plan == "" ? -1 : plan), bail }
	' "$RUN_OUT")
	local extra=""
	if [ "$bail" -eq 1 ] && [ "$f" -eq 0 ]; then
		extra="bailed out"
	elif [ "$RUN_RC" -ne 0 ] && [ "$f" -eq 0 ]; then
		extra="exited with status $RUN_RC"
	elif [ $((p + f)) -eq 0 ]; then
		extra="printed no test result"
	elif [ "$plan" -ge 0 ] && [ "$plan" -ne $((p + f)) ] && [ "$f" -eq 0 ]; then
		extra="planned $plan tests, ran $((p + f))"
	fi
	if [ -n "$extra" ]; then
		echo "# rig: $name $extra: counted as a failure"
		f=$((f + 1))
	fi
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	SKIPPED=$((SKIPPED + s))
	[ "$f" -eq 0 ] || FAILED_NAMES+=("$name ($f)")
	# The failures themselves, repeated in the summary: CI shows only the
	# end of the output, and that is where the reason must be.
	[ "$f" -eq 0 ] || mapfile -t -O "${#FAILED_NAMES[@]}" FAILED_NAMES < <(awk '
		/^not ok([ \t]|$)/ { n = 6; print "      " substr($0, 1, 300); next }
		n > 0 && /^#/       { n--; print "      " substr($0, 1, 300); next }
		{ n = 0 }' "$RUN_OUT" | head -n 30)
	return 0
}

fail_one() {
	echo "not ok - $1"
	FAILED=$((FAILED + 1))
	FAILED_NAMES+=("$1")
}

# A socket rig is one: what the tests get from mcrig (the rig's servers, a
# private memcached, a hostile listener, a fault proxy) is a Unix socket.
check_socket_rig() {
	local name="rig (unix sockets): mcrig, hostile.py and faultproxy.py give Unix sockets"
	if "$MCFDW_PYTHON" - <<'PY'; then
import mcrig, hostile, faultproxy
got = [mcrig.rig_ports()[0], mcrig.hang_port(), mcrig.start_memcached().addr,
       hostile.HostileServer("endless_en").addr, faultproxy.FaultProxy(1).addr]
bad = [g for g in got if not (isinstance(g, str) and g.startswith("/"))]
print("# " + ", ".join(map(str, got)))
raise SystemExit(1 if bad or not mcrig.SOCKETS else 0)
PY
		echo "ok - $name"
		PASSED=$((PASSED + 1))
	else
		fail_one "$name"
	fi
}

# ---- 0. the builds ----------------------------------------------------------
# Each in a make of its own: the Makefile that called us may have started
# before PGXS was installed.
if [ "${MCFDW_BUILD:-0}" = "1" ]; then
	header "build"
	name="release build (make WERROR=1)"
	run_prog "$LIMIT_BUILD" "$MAKE" --no-print-directory -s WERROR=1 all
	if [ "$RUN_RC" -eq 0 ]; then echo "ok - $name"; PASSED=$((PASSED + 1)); else fail_one "$name"; fi
	name="assert-enabled build, installed (make WERROR=1 ASSERTS=1 install)"
	run_prog "$LIMIT_BUILD" "$MAKE" --no-print-directory -s WERROR=1 ASSERTS=1 install
	if [ "$RUN_RC" -eq 0 ]; then
		echo "ok - $name"
		PASSED=$((PASSED + 1))
		# A failed Assert calls ExceptionalCondition: no reference to it
		# means ASSERTS=1 compiled no Assert at all.  (grep reads all of
		# nm's output: a grep -q that stops early fails under pipefail.)
		name="assert-enabled build: mcfdw.so calls ExceptionalCondition"
		if nm -D --undefined-only mcfdw.so | grep -w ExceptionalCondition >/dev/null; then
			echo "ok - $name"
			PASSED=$((PASSED + 1))
		else
			fail_one "$name"
		fi
	else
		fail_one "$name"
		echo "# rig: nothing was installed; no suite runs"
		summary
		exit 1
	fi
fi

# ---- the rig ---------------------------------------------------------------
if [ $NEED_RIG -eq 1 ]; then
	header "rig"
	rig_start 4
	if ! rig_setup_extension; then
		fail_one "rig: CREATE EXTENSION mcfdw / CREATE SERVER memcached"
	fi
	[ "$MCFDW_SOCKETS" != 1 ] || check_socket_rig
fi

# ---- 1. C unit tests -------------------------------------------------------
if [ ${#UNIT_FILES[@]} -gt 0 ]; then
	header "unit: test/unit/test_*.c"
	for src in "${UNIT_FILES[@]}"; do
		name=$(basename "$src" .c)
		bin="test/unit/bin/$name"
		echo "# $name"
		if ! "$MAKE" --no-print-directory -s "$bin"; then
			fail_one "build $bin"
			continue
		fi
		if [ "${MCFDW_VALGRIND:-0}" = "1" ]; then
			run_prog "$LIMIT_UNIT" valgrind -q --error-exitcode=99 --leak-check=full "$bin"
		else
			run_prog "$LIMIT_UNIT" "$bin"
		fi
		count_tap "$name"
	done
fi

# ---- 2. TAP scripts --------------------------------------------------------
if [ ${#SCRIPT_FILES[@]} -gt 0 ]; then
	header "scripts: test/unit/*.sh, test/fuzz/run_fuzz.sh"
	for f in "${SCRIPT_FILES[@]}"; do
		echo "# $f"
		run_prog "$LIMIT_SCRIPT" bash "$f"
		count_tap "$f"
	done
fi

# ---- 3. pg_regress ---------------------------------------------------------
if [ $RUN_REGRESS -eq 1 ]; then
	header "regress: pg_regress $MCFDW_REGRESS"
	pg_regress="$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress"
	# PGXS appends its own --dbname to REGRESS_OPTS; the rig names the database.
	opts=()
	for o in $MCFDW_REGRESS_OPTS; do
		[[ $o == --dbname=* ]] || opts+=("$o")
	done
	outdir="$RIG/regress"
	mkdir -p "$outdir"
	# shellcheck disable=SC2086  # the option and test lists are word lists
	run_prog "$LIMIT_REGRESS" "$pg_regress" --inputdir=. --outputdir="$outdir" \
		--bindir="$RIG_PGBIN" --host=127.0.0.1 --port="$PGPORT" --user=postgres \
		--dbname=contrib_regression "${opts[@]}" $MCFDW_REGRESS
	read -r p f < <(awk '
		/^ok[ \t]/ || /\.\.\. ok([ \t]|$)/                     { p++; next }
		/\.\.\. failed \(ignored\)/                            { p++; next }
		/^not ok[ \t]/ || /\.\.\. (FAILED|failed)([ \t]|$)/    { f++; next }
		END { printf "%d %d\n", p, f }
	' "$RUN_OUT")
	if [ "$RUN_RC" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "# rig: pg_regress exited with status $RUN_RC: counted as a failure"
		f=1
	fi
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	if [ "$f" -ne 0 ]; then
		FAILED_NAMES+=("pg_regress ($f)")
		if [ -s "$outdir/regression.diffs" ]; then
			echo "----- regression.diffs -----"
			head -n 2000 "$outdir/regression.diffs"
			[ "$(wc -l <"$outdir/regression.diffs")" -le 2000 ] ||
				echo "(regression.diffs cut at 2000 lines)"
			echo "----- end of regression.diffs -----"
		fi
		# Keep them where PGXS would have put them (both are gitignored).
		rm -rf "$RIG_SRC/results"
		cp -r "$outdir/results" "$RIG_SRC/results" 2>/dev/null || true
		cp "$outdir/regression.diffs" "$outdir/regression.out" "$RIG_SRC/" 2>/dev/null || true
		echo "# rig: results/, regression.diffs and regression.out copied to $RIG_SRC"
	fi
fi

# ---- 4. integration tests --------------------------------------------------
if [ ${#INTEGRATION_FILES[@]} -gt 0 ]; then
	header "integration: test/integration/*$([ "$MCFDW_SOCKETS" = 1 ] && echo ', over Unix sockets')"
	for f in "${INTEGRATION_FILES[@]}"; do
		echo "# $f"
		case "$f" in
		*.py) run_prog "$LIMIT_INTEGRATION" "$MCFDW_PYTHON" "$f" ;;
		*.rb) run_prog "$LIMIT_INTEGRATION" "$MCFDW_RUBY" "$f" ;;
		*.sh) run_prog "$LIMIT_INTEGRATION" bash "$f" ;;
		esac
		count_tap "$f"
	done
fi

# ---- 5. integration tests over Unix sockets ----------------------------------
if [ ${#SOCKET_FILES[@]} -gt 0 ]; then
	if [ $NEED_RIG -eq 1 ]; then rig_teardown 0; fi
	header "integration over Unix sockets: a rig of socket memcacheds"
	MCFDW_SOCKETS=1
	rig_start 4
	if ! rig_setup_extension; then
		fail_one "rig (unix sockets): CREATE EXTENSION mcfdw / CREATE SERVER memcached"
	fi
	check_socket_rig
	for f in "${SOCKET_FILES[@]}"; do
		echo "# $f (unix sockets)"
		run_prog "$LIMIT_INTEGRATION" "$MCFDW_PYTHON" "$f"
		count_tap "$f (unix sockets)"
	done
fi

# ---- done ----------------------------------------------------------------
rig_keep_if_asked
status=0
[ "$FAILED" -eq 0 ] || status=1
rig_teardown "$status"
summary
exit "$status"
