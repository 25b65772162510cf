#!/bin/bash
# run-one.sh BASE LIMIT CMD... — run one test program on behalf of test.sh.
#
# test.sh starts this under setsid, so it leads a process group (and session)
# of its own: a Ctrl-C meant for psql never reaches a test, and test.sh can
# kill the whole group on teardown.  CMD runs in the foreground with stdin
# from /dev/null and stderr folded into stdout.  Writes BASE.pid (this
# group), BASE.rc (CMD's exit status) or BASE.timeout (when LIMIT seconds
# ran out), then kills whatever CMD left behind in the group.
base=$1
limit=$2
shift 2
echo $$ >"$base.pid"

(
	trap '' TERM
	sleep "$limit"
	echo "timed out after ${limit}s" >"$base.timeout"
	kill -TERM -- -$$
	sleep 5
	kill -KILL -- -$$
) </dev/null >/dev/null 2>&1 &

"$@" </dev/null 2>&1
echo $? >"$base.rc"
kill -KILL 0
