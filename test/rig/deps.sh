#!/bin/bash
# deps.sh — install the Debian packages listed in test/rig/packages.txt that
# are missing, and nothing else.  Runs `apt-get update` once, only when
# something is missing.  Needs root only when it has something to install.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
list="$here/packages.txt"

mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$list")

missing=()
for p in "${pkgs[@]}"; do
	# dpkg -s succeeds for removed-but-configured packages too; check Status.
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#pkgs[@]} packages from test/rig/packages.txt are installed"
	exit 0
fi

echo "deps: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: error: not root, cannot install them; run as root or:" >&2
	echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "deps: error: apt-get not found (this rig expects Debian 12)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# The rig starts its own private servers: keep the packages from starting
# system-wide ones (a "15 main" cluster on 5432, memcached on 11211) while
# they install, unless the machine already has a policy of its own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# temporary, from mcfdw test/rig/deps.sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi
apt-get update -q
apt-get install -y -q "${missing[@]}"

# Installing postgresql-server-dev-15 can upgrade the server binaries; that is
# fine for the private cluster the rig starts fresh each time.
still=()
for p in "${missing[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || still+=("$p")
done
if [ ${#still[@]} -ne 0 ]; then
	echo "deps: error: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
echo "deps: installed ${missing[*]}"
