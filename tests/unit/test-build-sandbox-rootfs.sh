#!/bin/sh
# SPDX-License-Identifier: MIT
# The argument handling of packaging/wikiweb-build-sandbox-rootfs, without
# running debootstrap: --help, usage errors (exit 2), refusals (exit 1)
# before anything is written. Usage: test-build-sandbox-rootfs.sh SOURCE_ROOT
set -u
script="$1/packaging/wikiweb-build-sandbox-rootfs"
n=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() { # expect WANT_RC PATTERN ARGS...
        want=$1 pattern=$2
        shift 2
        n=$((n + 1))
        out=$(sh "$script" "$@" 2>&1)
        rc=$?
        if [ $rc -eq "$want" ] && printf '%s\n' "$out" | grep -q -- "$pattern"; then
                echo "ok $n - $* -> $rc"
        else
                echo "not ok $n - $*: exit $rc (want $want), output:"
                printf '%s\n' "$out" | sed 's/^/#   /'
                fail=1
        fi
}

expect 0 "debootstrap --variant=minbase --include=python3" --help
expect 0 "Usage:" -h
expect 2 "expected exactly one DIR"
expect 2 "expected exactly one DIR" "$tmp/a" "$tmp/b"
expect 2 "unknown option: --bogus" --bogus "$tmp/a"
expect 2 "needs a value" --suite
expect 2 "needs a value" --mirror
expect 1 "DIR must be an absolute path" relative/dir
expect 1 "invalid suite name" --suite 'bookworm;rm' "$tmp/a"
expect 1 "refusing to build into /usr" /usr
expect 1 "refusing to build into /etc/x" /etc/x
expect 1 "refusing to build into /" /
mkdir "$tmp/full" && : >"$tmp/full/file"
if [ "$(id -u)" -eq 0 ]; then
        # As root the next checks are debootstrap's presence and the target.
        if command -v debootstrap >/dev/null 2>&1; then
                expect 1 "exists and is not empty" "$tmp/full"
        fi
else
        expect 1 "must be run as root" "$tmp/full"
fi
n=$((n + 1))
if [ -e "$tmp/full/file" ] && [ ! -e "$tmp/a" ] && [ -z "$(find "$tmp" -name '.wikiweb-rootfs.*')" ]; then
        echo "ok $n - nothing was written or removed"
else
        echo "not ok $n - a refused run changed $tmp"
        fail=1
fi
echo "1..$n"
exit $fail
