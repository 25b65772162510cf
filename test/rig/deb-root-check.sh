#!/bin/bash
# deb-root-check.sh MAJOR DEB VERSION — the install steps of `deb.sh check
# MAJOR`, run by it inside the Debian root of that major (debroot.sh run):
# dpkg -i the package, CREATE EXTENSION in a fresh cluster of the root's
# postgresql-MAJOR, mc_set/mc_get against a memcached, the update from 1.0,
# dpkg -r.  Prints one TAP line per step, named as deb.sh's own for 15.
#
# Owns: a temporary directory with the cluster and the sockets; the cluster
# listens on a Unix socket only and memcached on another, so nothing here
# takes a port of the machine.  Stops both and removes the package on any
# exit.
set -uo pipefail

V=$1 DEB=$2 CTL=$3
PACKAGE=postgresql-$V-mcfdw
BIN=/usr/lib/postgresql/$V/bin
EXTDIR=/usr/share/postgresql/$V/extension
LIBDIR=/usr/lib/postgresql/$V/lib

ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; }
diag() { sed 's/^/# /'; }

D=$(mktemp -d /tmp/mcfdw-root-check.XXXXXX)
chmod 755 "$D"
chown postgres: "$D"
MCPID=""
PG_UP=0
cleanup() {
	[ "$PG_UP" -eq 0 ] || runuser -u postgres -- "$BIN/pg_ctl" -D "$D/data" -m immediate -w stop >/dev/null 2>&1
	[ -z "$MCPID" ] || { kill -KILL "$MCPID"; wait "$MCPID"; } 2>/dev/null
	dpkg -r "$PACKAGE" >/dev/null 2>&1
	rm -rf "$D"
}
trap cleanup EXIT

name="dpkg -i $PACKAGE"
if dpkg -i "$DEB" >"$D/dpkg-i.log" 2>&1; then ok "$name"; else not_ok "$name"; diag <"$D/dpkg-i.log"; fi

name="the system's mcfdw files are the package's (dpkg -S)"
owned=1
for f in "$LIBDIR/mcfdw.so" "$EXTDIR/mcfdw.control" "$EXTDIR/mcfdw--$CTL.sql"; do
	if ! dpkg -S "$f" 2>/dev/null | grep -q "^$PACKAGE: "; then
		echo "# $f: not installed by $PACKAGE"
		owned=0
	fi
done
if [ $owned -eq 1 ]; then ok "$name"; else not_ok "$name"; fi

psql_() { "$BIN/psql" -X -v ON_ERROR_STOP=1 -h "$D" -p 5432 -U postgres "$@"; }

runuser -u postgres -- "$BIN/initdb" -D "$D/data" -U postgres -E UTF8 --locale=C.UTF-8 \
	--auth=trust --no-sync >"$D/initdb.log" 2>&1 || diag <"$D/initdb.log"
if runuser -u postgres -- "$BIN/pg_ctl" -D "$D/data" -l "$D/pg.log" -w -t 60 \
	-o "-c listen_addresses='' -k $D -p 5432" start >"$D/pg_ctl.log" 2>&1; then
	PG_UP=1
else
	diag <"$D/pg_ctl.log"
	[ -f "$D/pg.log" ] && diag <"$D/pg.log"
fi
mkdir "$D/mc"
chown memcache: "$D/mc"
memcached -u memcache -s "$D/mc/mc.sock" -a 0777 -m 16 </dev/null >"$D/mc.log" 2>&1 &
MCPID=$!
for ((n = 0; n < 100; n++)); do [ -S "$D/mc/mc.sock" ] && break; sleep 0.05; done

name="CREATE EXTENSION mcfdw in a fresh cluster: version $CTL, no WARNING"
if psql_ -d postgres -qAt -c 'CREATE EXTENSION mcfdw' \
	-c "SELECT extversion FROM pg_extension WHERE extname = 'mcfdw'" \
	>"$D/create.out" 2>"$D/create.err" &&
	[ "$(cat "$D/create.out")" = "$CTL" ] && ! [ -s "$D/create.err" ]; then
	ok "$name"
else
	not_ok "$name"
	cat "$D/create.out" "$D/create.err" | diag
fi

name="mc_set/mc_get through the packaged mcfdw against a private memcached"
got=$(psql_ -d postgres -qAt -v mc="$D/mc/mc.sock" 2>&1 <<'SQL' || true
CREATE SERVER memcached FOREIGN DATA WRAPPER mcfdw OPTIONS (servers :'mc');
SELECT mc_set('mcfdw-deb-check', 'from the package');
SELECT mc_get('mcfdw-deb-check');
SQL
)
if [ "$got" = "$(printf 't\nfrom the package')" ]; then ok "$name"; else not_ok "$name"; echo "$got" | diag; fi

name="ALTER EXTENSION mcfdw UPDATE from 1.0 reaches $CTL"
got=$(psql_ -d postgres -qAt 2>&1 <<'SQL' || true
CREATE DATABASE deb_update;
\c deb_update
CREATE EXTENSION mcfdw VERSION '1.0';
ALTER EXTENSION mcfdw UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'mcfdw';
SQL
)
if [ "$got" = "$CTL" ]; then ok "$name"; else not_ok "$name"; echo "$got" | diag; fi

runuser -u postgres -- "$BIN/pg_ctl" -D "$D/data" -m fast -w stop >/dev/null 2>&1 && PG_UP=0
name="dpkg -r $PACKAGE leaves no mcfdw file behind"
if dpkg -r "$PACKAGE" >"$D/dpkg-r.log" 2>&1 &&
	left=$(ls "$LIBDIR"/mcfdw.so "$EXTDIR"/mcfdw* 2>/dev/null; true) && [ -z "$left" ]; then
	ok "$name"
else
	not_ok "$name"
	{ cat "$D/dpkg-r.log"; echo "$left"; } | diag
fi
