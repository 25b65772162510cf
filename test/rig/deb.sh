#!/bin/bash
# deb.sh — `make deb` and `make deb-check`: the Debian package
# postgresql-15-mcfdw, built from this tree by dpkg-buildpackage with
# debian/ (pg_buildext), and checked the way a user gets it; with a MAJOR
# (`make deb-check PG=17`), postgresql-MAJOR-mcfdw, built and checked the
# same way in a root of the Debian suite that packages that major
# (test/rig/debroot.sh: 17 in trixie, 18 in sid), its dist/ in dist/pgMAJOR.
#
#   deb.sh build [MAJOR]  the source package and the .debs, in dist/.  A copy of the
#                  tree (git's files, or the tree less what .gitignore names)
#                  is built in a temporary directory, with the orig tarball
#                  made from it: the tree itself is left as it was.
#   deb.sh check [MAJOR]  the build, then TAP lines and "N passed, N failed":
#                  versions agree, META.json, lintian (no error), dpkg -i,
#                  CREATE EXTENSION in a fresh cluster (and the update path
#                  from 1.0), mc_set/mc_get against a private memcached,
#                  dpkg -r.  Exits non-zero if anything failed.
#
# The package is for Debian's PostgreSQL 15 (/usr/lib/postgresql/15): both
# commands ignore PG_CONFIG.  The check installs into that system
# PostgreSQL, so it needs root (without root the install steps are skips).
#
# Owns: dist/, and for the time of a check the system PostgreSQL's mcfdw
# files: what `make install` put there is moved aside before dpkg -i and put
# back after dpkg -r, on failure and on interrupt too.  Must not: replace or
# remove a postgresql-15-mcfdw that dpkg had installed before (the check
# refuses to install then).  Runs no test suite at build time: the package
# build needs no memcached and no network.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RIG_SRC"

mode=${1:-}
case "$mode" in
build | check) ;;
*) echo "usage: ${0##*/} build|check [MAJOR]" >&2; exit 2 ;;
esac
PGMAJOR=${2:-15}
PACKAGE=postgresql-$PGMAJOR-mcfdw
PG_CONFIG=/usr/lib/postgresql/$PGMAJOR/bin/pg_config
DIST="$RIG_SRC/dist"
LIMIT_BUILD=${MCFDW_LIMIT_DEB_BUILD:-900}
# Another major: everything from the build on runs in its Debian root
# (IN_ROOT prefixes a command with that), the build under $ROOT/build.
IN_ROOT=()
ROOT=""
if [ "$PGMAJOR" != 15 ]; then
	ROOT=$("$RIG_SRC/test/rig/debroot.sh" path "$PGMAJOR")
	IN_ROOT=("$RIG_SRC/test/rig/debroot.sh" run "$PGMAJOR")
	DIST="$RIG_SRC/dist/pg$PGMAJOR"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcfdw-deb.XXXXXX")
chmod 755 "$WORK"
# Where the package is built: in the work directory, or in the root.
BUILD=$WORK/build
BUILD_IN=$BUILD		# its path for the commands that build
if [ -n "$ROOT" ]; then
	BUILD_IN=/build/${WORK##*/}
	BUILD=$ROOT$BUILD_IN
fi
PASSED=0
FAILED=0
FAILED_NAMES=()
INSTALLED=0		# 1 once dpkg -i was tried: cleanup removes the package
MOVED=()		# system files moved aside into $WORK/aside
SUMMARY_DONE=0

ok() { echo "ok - $1"; PASSED=$((PASSED + 1)); }
not_ok() { echo "not ok - $1"; FAILED=$((FAILED + 1)); FAILED_NAMES+=("$1"); }
skip() { echo "ok - $1 # skip $2"; PASSED=$((PASSED + 1)); }
diag() { sed 's/^/# /'; }

summary() {
	[ "$SUMMARY_DONE" -eq 1 ] && return 0
	SUMMARY_DONE=1
	echo ""
	if [ ${#FAILED_NAMES[@]} -gt 0 ]; then
		echo "failed:"
		printf '    %s\n' "${FAILED_NAMES[@]}"
	fi
	echo "$PASSED passed, $FAILED failed"
}

pkg_status() { dpkg-query -W -f='${Status}' "$PACKAGE" 2>/dev/null || true; }

# The files of mcfdw in the system PostgreSQL: the package's, or a
# `make install`'s (every install script ever installed included).
EXTDIR=""
LIBDIR=""
system_files() {
	local f
	for f in "$EXTDIR"/mcfdw.control "$EXTDIR"/mcfdw--*.sql "$LIBDIR"/mcfdw.so \
		"$LIBDIR"/bitcode/mcfdw.index.bc "$LIBDIR"/bitcode/mcfdw; do
		[ -e "$f" ] && echo "$f"
	done
	return 0
}

move_aside() {
	local f
	while IFS= read -r f; do
		mkdir -p "$WORK/aside$(dirname "$f")"
		mv "$f" "$WORK/aside$f"
		MOVED+=("$f")
	done < <(system_files)
}

# Put back what move_aside took; whatever is there now (nothing, after
# dpkg -r) is replaced.
restore() {
	local f
	for f in "${MOVED[@]}"; do
		rm -rf "$f"
		mkdir -p "$(dirname "$f")"
		mv "$WORK/aside$f" "$f"
	done
	MOVED=()
}

cleanup() {
	local rc=$?
	set +e
	trap '' INT TERM
	rig_teardown "$rc"
	if [ "$INSTALLED" -eq 1 ] && [ -n "$(pkg_status)" ] &&
		[ "$(pkg_status)" != "unknown ok not-installed" ]; then
		echo "# deb: removing $PACKAGE (dpkg -r)"
		dpkg -r "$PACKAGE" >"$WORK/dpkg-r.log" 2>&1 || diag <"$WORK/dpkg-r.log"
	fi
	if [ ${#MOVED[@]} -gt 0 ]; then
		echo "# deb: putting back the ${#MOVED[@]} mcfdw files moved aside"
		restore
	fi
	rm -rf "$WORK"
	[ -z "$ROOT" ] || rm -rf "$BUILD"
	if [ "$mode" = check ] && [ "$SUMMARY_DONE" -eq 0 ]; then
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("deb.sh stopped early (status $rc)")
		summary
		[ "$rc" -eq 0 ] && rc=1
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "${0##*/}: interrupted"; exit 130' INT
trap 'echo "${0##*/}: terminated"; exit 143' TERM

# ---- build ---------------------------------------------------------------
# Leaves DEB (the binary package's path) and CHANGES; returns non-zero with
# the build's log on failure.
DEB=""
CHANGES=""
build_packages() {
	local version upstream src log
	version=$(dpkg-parsechangelog -l debian/changelog -S Version)
	upstream=${version%-*}
	src="$BUILD/mcfdw-$upstream"
	mkdir -p "$src"
	# Only the sources: no objects, results or dist/ of earlier runs.
	if git -C "$RIG_SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z --cached --others --exclude-standard |
			while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
			tar --null -T - -cf - | tar -C "$src" -xf -
	else
		tar --exclude-vcs --exclude-vcs-ignores --exclude=./dist -cf - . | tar -C "$src" -xf -
	fi
	# 3.0 (quilt): the upstream tarball is the tree without debian/.
	tar -C "$BUILD" --exclude="mcfdw-$upstream/debian" --sort=name \
		--owner=0 --group=0 --numeric-owner -cJf "$BUILD/mcfdw_$upstream.orig.tar.xz" \
		"mcfdw-$upstream"
	log="$BUILD/build.log"
	# In another major's root, debian/control is made for that major first
	# (debian/pgversions says 15+; pg_buildext picks the suite's), as
	# Debian's builds for other suites do.
	local how="dpkg-buildpackage -us -uc"
	[ -z "$ROOT" ] || how="pg_buildext updatecontrol && $how"
	echo "# deb: $how in a copy of the tree${ROOT:+, in the Debian root $ROOT} (log: ${DIST#"$RIG_SRC"/}/build.log)"
	if ! timeout "$LIMIT_BUILD" "${IN_ROOT[@]}" /bin/sh -c "cd '$BUILD_IN/mcfdw-$upstream' && $how" >"$log" 2>&1; then
		mkdir -p "$DIST"
		cp "$log" "$DIST/build.log"
		tail -n 40 "$log" | diag
		return 1
	fi
	# only this build's files: dist/pgV of another major stays
	mkdir -p "$DIST"
	find "$DIST" -maxdepth 1 -type f -delete
	cp "$BUILD"/*.deb "$BUILD"/*.dsc "$BUILD"/*.changes \
		"$BUILD"/*.buildinfo "$BUILD"/*.tar.* "$log" "$DIST/"
	DEB=$(ls "$DIST/${PACKAGE}_${version}_"*.deb)
	CHANGES=$(ls "$DIST/mcfdw_${version}_"*.changes)
}

if [ "$mode" = build ]; then
	if build_packages; then
		echo "deb: built in dist/:"
		ls -1 "$DIST" | sed 's/^/    /'
		exit 0
	fi
	echo "deb: error: dpkg-buildpackage failed (dist/build.log)" >&2
	exit 1
fi

# ---- check ---------------------------------------------------------------
printf '\n===== deb: %s =====\n' "$PACKAGE"

# The version is written in four places; a release changes them together.
name="versions agree: mcfdw.control, debian/changelog, META.json, the install script"
ctl=$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" mcfdw.control)
deb_version=$(dpkg-parsechangelog -l debian/changelog -S Version)
if out=$("$MCFDW_PYTHON" - "$ctl" "${deb_version%-*}" 2>&1 <<'PY'
import json, os, sys
ctl, upstream = sys.argv[1:]
meta = json.load(open("META.json"))
semver = ctl + ".0" * (2 - ctl.count("."))
errs = []
if upstream != ctl:
    errs.append(f"debian/changelog says {upstream}, mcfdw.control {ctl}")
if meta.get("version") != semver:
    errs.append(f"META.json version {meta.get('version')}, expected {semver}")
p = meta.get("provides", {}).get("mcfdw", {})
if p.get("version") != semver:
    errs.append(f"META.json provides.mcfdw.version {p.get('version')}, expected {semver}")
if p.get("file") != f"mcfdw--{ctl}.sql" or not os.path.exists(p.get("file", "")):
    errs.append(f"META.json provides.mcfdw.file {p.get('file')}, expected mcfdw--{ctl}.sql (present)")
print("\n".join(errs))
sys.exit(1 if errs else 0)
PY
); then
	ok "$name ($ctl)"
else
	not_ok "$name"
	echo "$out" | diag
fi

# PGXN's META.json spec 1.0.0: the required keys and their forms.
name="META.json: PGXN meta-spec 1.0.0 required keys"
if out=$("$MCFDW_PYTHON" - 2>&1 <<'PY'
import json, re, sys
m = json.load(open("META.json"))
semver = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$")
licenses = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
            "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
            "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
            "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
            "restricted", "unrestricted", "unknown"}
errs = []
for k in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    if k not in m:
        errs.append(f"missing {k}")
if m.get("meta-spec", {}).get("version") != "1.0.0":
    errs.append("meta-spec.version is not 1.0.0")
if not semver.match(str(m.get("version", ""))):
    errs.append(f"version {m.get('version')} is not a semantic version")
lic = m.get("license")
if isinstance(lic, str) and lic not in licenses:
    errs.append(f"license {lic} is not one of the spec's strings")
for ext, p in m.get("provides", {}).items():
    for k in ("file", "version"):
        if k not in p:
            errs.append(f"provides.{ext} has no {k}")
    if not semver.match(str(p.get("version", ""))):
        errs.append(f"provides.{ext}.version is not a semantic version")
if m.get("release_status", "stable") not in ("stable", "testing", "unstable"):
    errs.append("release_status is not stable, testing or unstable")
rt = m.get("prereqs", {}).get("runtime", {}).get("requires", {})
if "PostgreSQL" not in rt:
    errs.append("prereqs.runtime.requires names no PostgreSQL")
print("\n".join(errs))
sys.exit(1 if errs else 0)
PY
); then
	ok "$name"
else
	not_ok "$name"
	echo "$out" | diag
fi

name="dpkg-buildpackage -us -uc builds $PACKAGE (pg_buildext, debian/control current)"
[ -z "$ROOT" ] || name="dpkg-buildpackage -us -uc builds $PACKAGE in Debian's $(cat "$ROOT/etc/debian_version") root (pg_buildext)"
if build_packages; then
	ok "$name"
else
	not_ok "$name"
	echo "# deb: nothing was built; no other step runs"
	summary
	exit 1
fi

# Errors fail; warnings and the rest are shown.  (lintian says it should
# not run as root; that line is not a finding.)
name="lintian: no errors in the source package and the .debs"
if [ -n "$ROOT" ]; then
	"${IN_ROOT[@]}" lintian -I --fail-on error "$BUILD_IN/${CHANGES##*/}" >"$WORK/lintian.out" 2>&1 && lrc=0 || lrc=$?
else
	lintian -I --fail-on error "$CHANGES" >"$WORK/lintian.out" 2>&1 && lrc=0 || lrc=$?
fi
grep -v 'running with root privileges' "$WORK/lintian.out" | diag || true
if [ "$lrc" -eq 0 ]; then
	ok "$name ($(grep -c '^W:' "$WORK/lintian.out" || true) warnings)"
else
	not_ok "$name"
fi

# ---- install, use, remove --------------------------------------------------
install_steps=(
	"dpkg -i $PACKAGE"
	"the system's mcfdw files are the package's (dpkg -S)"
	"CREATE EXTENSION mcfdw in a fresh cluster: version $ctl, no WARNING"
	"mc_set/mc_get through the packaged mcfdw against a private memcached"
	"ALTER EXTENSION mcfdw UPDATE from 1.0 reaches $ctl"
	"dpkg -r $PACKAGE leaves no mcfdw file behind"
)
skip_install() {
	local s
	for s in "${install_steps[@]}"; do skip "$s" "$1"; done
}

status=$(pkg_status)
if [ -n "$ROOT" ]; then
	# All in the root, where nothing else of mcfdw is installed: its
	# postgresql-$PGMAJOR and memcached, both on Unix sockets only.
	"${IN_ROOT[@]}" /bin/bash "$BUILD_IN/mcfdw-${deb_version%-*}/test/rig/deb-root-check.sh" \
		"$PGMAJOR" "$BUILD_IN/${DEB##*/}" "$ctl" >"$WORK/root-check.out" 2>&1 || true
	cat "$WORK/root-check.out"
	PASSED=$((PASSED + $(grep -c '^ok ' "$WORK/root-check.out" || true)))
	FAILED=$((FAILED + $(grep -c '^not ok ' "$WORK/root-check.out" || true)))
	while IFS= read -r l; do FAILED_NAMES+=("${l#not ok - }"); done < <(grep '^not ok ' "$WORK/root-check.out" || true)
	n=$(grep -c '^\(not \)\?ok ' "$WORK/root-check.out" || true)
	if [ "$n" -ne ${#install_steps[@]} ]; then
		not_ok "the install steps in the root: ${#install_steps[@]} planned, $n ran"
	fi
elif [ "$(id -u)" -ne 0 ]; then
	skip_install "not root: dpkg -i needs root"
elif [ -n "$status" ] && [ "$status" != "unknown ok not-installed" ]; then
	# Not ours to replace: the user's own package stays as it is.
	not_ok "$PACKAGE is not installed before the check (dpkg says: $status)"
	skip_install "$PACKAGE was already installed"
else
	EXTDIR="$("$PG_CONFIG" --sharedir)/extension"
	LIBDIR=$("$PG_CONFIG" --pkglibdir)
	# The smoke test must load the package's files and nothing else:
	# `make install`'s (make test installs into this same PostgreSQL) go
	# aside until the package is removed.
	move_aside
	[ ${#MOVED[@]} -eq 0 ] || echo "# deb: ${#MOVED[@]} mcfdw files of an earlier make install moved aside"

	INSTALLED=1
	name="dpkg -i $PACKAGE"
	if dpkg -i "$DEB" >"$WORK/dpkg-i.log" 2>&1; then
		ok "$name"
	else
		not_ok "$name"
		diag <"$WORK/dpkg-i.log"
	fi

	name="the system's mcfdw files are the package's (dpkg -S)"
	owned=1
	for f in "$LIBDIR/mcfdw.so" "$EXTDIR/mcfdw.control" "$EXTDIR/mcfdw--$ctl.sql"; do
		if ! dpkg -S "$f" 2>/dev/null | grep -q "^$PACKAGE: "; then
			echo "# $f: not installed by $PACKAGE"
			owned=0
		fi
	done
	if [ $owned -eq 1 ]; then ok "$name"; else not_ok "$name"; fi

	# A fresh cluster and one memcached (lib.sh), on the system's PostgreSQL.
	rig_start 1
	mc=127.0.0.1:${RIG_MC_PORTS[0]}

	name="CREATE EXTENSION mcfdw in a fresh cluster: version $ctl, no WARNING"
	if rig_psql -d postgres -qAt -c 'CREATE EXTENSION mcfdw' \
		-c "SELECT extversion FROM pg_extension WHERE extname = 'mcfdw'" \
		>"$WORK/create.out" 2>"$WORK/create.err"; then
		if [ "$(cat "$WORK/create.out")" = "$ctl" ] && ! [ -s "$WORK/create.err" ]; then
			ok "$name"
		else
			not_ok "$name"
			cat "$WORK/create.out" "$WORK/create.err" | diag
		fi
	else
		not_ok "$name"
		cat "$WORK/create.out" "$WORK/create.err" | diag
	fi

	name="mc_set/mc_get through the packaged mcfdw against a private memcached"
	got=$(rig_psql -d postgres -qAt -v mc="$mc" 2>&1 <<'SQL' || true
CREATE SERVER memcached FOREIGN DATA WRAPPER mcfdw OPTIONS (servers :'mc');
SELECT mc_set('mcfdw-deb-check', 'from the package');
SELECT mc_get('mcfdw-deb-check');
SQL
)
	if [ "$got" = "$(printf 't\nfrom the package')" ]; then
		ok "$name"
	else
		not_ok "$name"
		echo "$got" | diag
	fi

	name="ALTER EXTENSION mcfdw UPDATE from 1.0 reaches $ctl"
	got=$(rig_psql -d postgres -qAt 2>&1 <<'SQL' || true
CREATE DATABASE deb_update;
\c deb_update
CREATE EXTENSION mcfdw VERSION '1.0';
ALTER EXTENSION mcfdw UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'mcfdw';
SQL
)
	if [ "$got" = "$ctl" ]; then
		ok "$name"
	else
		not_ok "$name"
		echo "$got" | diag
	fi
	rig_teardown 0

	name="dpkg -r $PACKAGE leaves no mcfdw file behind"
	if dpkg -r "$PACKAGE" >"$WORK/dpkg-r.log" 2>&1 && INSTALLED=0 &&
		[ -z "$(system_files)" ]; then
		ok "$name"
	else
		not_ok "$name"
		{ cat "$WORK/dpkg-r.log"; system_files; } | diag
	fi

	if [ ${#MOVED[@]} -gt 0 ]; then
		n=${#MOVED[@]}
		restore
		echo "# deb: the $n mcfdw files of the earlier make install are back"
	fi
fi

summary
[ "$FAILED" -eq 0 ]
