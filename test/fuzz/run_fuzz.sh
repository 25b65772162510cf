#!/bin/sh
# run_fuzz.sh — fuzz mc_parse_reply for a bounded time and report in TAP.
#
# Usage: test/fuzz/run_fuzz.sh [SECONDS]   (default 20)
#
# With clang and libFuzzer: a -fsanitize=fuzzer,address,undefined build,
# seeded from test/fuzz/corpus (read only; new inputs go to a temporary
# directory).  Without them: the replay build of the same target (seeds,
# then random mutations) under whatever sanitizers the compiler has.
# Prints "ok 1 - fuzz_protocol N runs, no crash" or "not ok 1 - ..." and
# exits non-zero on a crash or a broken invariant.
set -u

secs=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
src="$here/fuzz_protocol.c $root/src/core/protocol.c $root/src/core/metadump.c"
work=$(mktemp -d "${TMPDIR:-/tmp}/mcfdw_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# protocol tokens help libFuzzer reach the deeper branches sooner
cat > "$work/protocol.dict" <<'EOF'
"\x0d\x0a"
"VA "
"HD"
"EN"
"END"
"MN"
"NS"
"EX"
"NF"
"OK"
"STAT "
"ERROR"
"CLIENT_ERROR "
"SERVER_ERROR "
" f"
" k"
" b"
" c"
" t-"
" s"
" O"
" W"
"4294967296"
"2147483648"
"18446744073709551616"
"9223372036854775808"
EOF

have_libfuzzer() {
	command -v clang >/dev/null 2>&1 || return 1
	printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void) d; (void) n; return 0; }\n' \
		> "$work/probe.c"
	clang -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" >/dev/null 2>&1
}

fail() {
	echo "not ok 1 - fuzz_protocol: $1"
	echo "1..1"
	exit 1
}

if have_libfuzzer; then
	# shellcheck disable=SC2086
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-I"$root/src/core" $src -o "$work/fuzz" >"$work/build.log" 2>&1 ||
		{ cat "$work/build.log"; fail "libFuzzer build failed"; }
	mkdir "$work/corpus"
	"$work/fuzz" -max_total_time="$secs" -print_final_stats=1 -dict="$work/protocol.dict" \
		-artifact_prefix="$work/" "$work/corpus" "$here/corpus" >"$work/log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
	if [ $rc -ne 0 ] || [ -z "$runs" ]; then
		tail -40 "$work/log" | sed 's/^/# /'
		for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
			[ -f "$a" ] && { echo "# reproducer (hex):"; od -An -tx1 "$a" | head -20 | sed 's/^/# /'; }
		done
		fail "libFuzzer exited with $rc"
	fi
	echo "ok 1 - fuzz_protocol $runs runs, no crash (libFuzzer+ASan+UBSan, ${secs}s)"
else
	cc=""
	for c in clang gcc cc; do
		command -v "$c" >/dev/null 2>&1 && { cc=$c; break; }
	done
	[ -n "$cc" ] || fail "no C compiler"
	# shellcheck disable=SC2086
	if "$cc" -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -DMC_FUZZ_STANDALONE \
		-I"$root/src/core" $src -o "$work/fuzz" >"$work/build.log" 2>&1; then
		mode="replay+ASan+UBSan"
	elif "$cc" -g -O1 -DMC_FUZZ_STANDALONE -I"$root/src/core" $src -o "$work/fuzz" >"$work/build.log" 2>&1; then
		mode="replay, no sanitizers"
	else
		cat "$work/build.log"
		fail "replay build failed"
	fi
	"$work/fuzz" -t "$secs" "$here/corpus" >"$work/log" 2>&1
	rc=$?
	runs=$(sed -n 's/^fuzz_protocol: \([0-9]*\) runs.*/\1/p' "$work/log")
	if [ $rc -ne 0 ] || [ -z "$runs" ]; then
		tail -40 "$work/log" | sed 's/^/# /'
		fail "replay driver exited with $rc"
	fi
	echo "ok 1 - fuzz_protocol $runs runs, no crash ($mode, ${secs}s)"
fi
echo "1..1"
exit 0
