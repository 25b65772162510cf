#!/bin/bash
# debroot.sh — a Debian root of the suite that packages a PostgreSQL major,
# for building and trying postgresql-MAJOR-mcfdw the way Debian builds it.
#
#   debroot.sh path MAJOR        prints the root's directory, making it first
#                                if needed (mmdebstrap, a few minutes)
#   debroot.sh run MAJOR CMD...  runs CMD in it (chroot, in a mount namespace
#                                of its own with /proc and a /dev/shm mounted)
#
# Debian 12 packages PostgreSQL 15 only, and pg_buildext builds for the
# majors whose postgresql-server-dev-V is installed at /usr/lib/postgresql/V:
# a package for 17 or 18 is built where Debian builds one, in its suite
# (17: trixie, 18: sid), with that suite's postgresql-server-dev-V,
# pg_buildext, lintian, and postgresql-V and memcached to install it into.
# Debian has no PostgreSQL 16 in any suite, so no package for 16 is built.
#
# Owns: the roots in the majors cache (MCFDW_MAJORS_CACHE, default
# /var/cache/mcfdw-majors, as test/rig/majors.sh), debroot-SUITE.  Must not:
# change the machine outside them; the mounts of `run` vanish with its
# namespace.  Needs root (mmdebstrap's root mode, chroot, mount).
set -euo pipefail

cmd=${1:?usage: debroot.sh path|run MAJOR [CMD...]}
major=${2:?usage: debroot.sh path|run MAJOR [CMD...]}
shift 2
CACHE=${MCFDW_MAJORS_CACHE:-/var/cache/mcfdw-majors}

case "$major" in
17) suite=trixie ;;
18) suite=sid ;;
16)
	echo "debroot.sh: no Debian suite packages PostgreSQL 16; no package for 16 is built" >&2
	exit 2
	;;
*) echo "debroot.sh: PostgreSQL $major: not one of 17, 18 (15 is built on this machine)" >&2; exit 2 ;;
esac

root=$CACHE/debroot-$suite
say() { echo "debroot.sh: $*" >&2; }

if ! [ -f "$root/.complete" ]; then
	command -v mmdebstrap >/dev/null || { say "mmdebstrap not found (apt-get install mmdebstrap)"; exit 1; }
	[ "$(id -u)" -eq 0 ] || { say "making a Debian root needs root"; exit 1; }
	say "making a Debian $suite root for PostgreSQL $major in $root (a few minutes)"
	mkdir -p "$CACHE"
	rm -rf "$root" "$root.tmp"
	# The archive this machine reaches may serve a Release past its Valid-Until
	# (sid's was, by weeks); its signature is still checked.
	mmdebstrap --quiet --variant=buildd --aptopt='Acquire::Check-Valid-Until "false"' \
		--include=debhelper,postgresql-server-dev-all,postgresql-server-dev-$major,postgresql-$major,libssl-dev,zlib1g-dev,libdeflate-dev,memcached,lintian \
		"$suite" "$root.tmp" \
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" >&2
	mv "$root.tmp" "$root"
	touch "$root/.complete"
fi

case "$cmd" in
path) echo "$root" ;;
run)
	[ $# -gt 0 ] || { say "run: no command"; exit 2; }
	exec unshare --mount --fork /bin/sh -c '
		root=$1; shift
		mount --make-rprivate / &&
		mount -t proc proc "$root/proc" &&
		mount -t tmpfs -o mode=1777 shm "$root/dev/shm" &&
		exec chroot "$root" "$@"' sh "$root" "$@"
	;;
*) echo "debroot.sh: $cmd: not path or run" >&2; exit 2 ;;
esac
