#!/bin/sh
# SPDX-License-Identifier: MIT
# The product has no test-only fault switch (src/shared/fault.h, meson's
# test-faults option, off by default and in the packages): no WIKI_WEB_TEST_
# name in the build's wikiwebd ($2, when it is built without them; "" when
# -Dtest-faults=true put them in), nor in any file of usr/bin, usr/sbin or
# usr/libexec of the .deb that $WIKIWEB_TEST_DEB names (CI builds it with
# packaging/build-deb). The tests' wikiwebd-test ($1) has them, and the same
# check must find them there, so a check that cannot see them does not
# pass. Exit 77 (skip) when there is neither a product to check nor a .deb,
# unless WIKIWEB_TEST_NO_SKIP=1.
set -eu

wikiwebd=$1
product=${2:-}
skip() {
        echo "SKIP: $*"
        if [ "${WIKIWEB_TEST_NO_SKIP:-}" = 1 ]; then
                echo "WIKIWEB_TEST_NO_SKIP=1: a skip is a failure"
                exit 1
        fi
        exit 77
}
fail() {
        echo "package-no-test-faults: $*" >&2
        exit 1
}
# The number of places the name is in file $1.
count() {
        grep -a -o WIKI_WEB_TEST_ "$1" | wc -l
}

n=$(count "$wikiwebd")
[ "$n" -gt 0 ] || fail "the test build's $wikiwebd has no WIKI_WEB_TEST_ name: the check cannot see them"
echo "test build: $wikiwebd has WIKI_WEB_TEST_ $n times"

if [ -n "$product" ]; then
        n=$(count "$product")
        [ "$n" -eq 0 ] || fail "the build's $product has WIKI_WEB_TEST_ $n times"
        echo "product: $product has no WIKI_WEB_TEST_ name"
fi

deb=${WIKIWEB_TEST_DEB:-}
if [ -z "$deb" ]; then
        [ -n "$product" ] && exit 0
        skip "WIKIWEB_TEST_DEB names no .deb (packaging/build-deb builds one)"
fi
[ -f "$deb" ] || fail "WIKIWEB_TEST_DEB=$deb: no such file"
command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/wikiweb-pkg-faults.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
dpkg-deb -x "$deb" "$tmp"

[ -f "$tmp/usr/libexec/wikiwebd" ] || fail "$deb has no usr/libexec/wikiwebd"
status=0
checked=0
for f in $(find "$tmp/usr/bin" "$tmp/usr/sbin" "$tmp/usr/libexec" -type f 2>/dev/null); do
        n=$(count "$f")
        checked=$((checked + 1))
        if [ "$n" -gt 0 ]; then
                echo "package-no-test-faults: ${f#"$tmp"} in $deb has WIKI_WEB_TEST_ $n times" >&2
                status=1
        fi
done
[ "$checked" -ge 2 ] || fail "only $checked programs in $deb: expected wikiwebd and wikiwebctl at least"
[ "$status" -eq 0 ] && echo "package: none of the $checked programs of $(basename "$deb") has a WIKI_WEB_TEST_ name"
exit "$status"
