#!/bin/sh
# SPDX-License-Identifier: MIT
# Every man page in man/ renders with "groff -ww -man" without a single
# warning. Usage: test-man-pages.sh SOURCE_ROOT
set -u

if ! command -v groff >/dev/null 2>&1; then
        echo "SKIP: groff is not installed (apt-get install groff-base)"
        [ "${WIKIWEB_TEST_NO_SKIP:-}" = 1 ] && exit 1
        exit 77
fi

n=0
fail=0
for page in "$1"/man/*.[1-8]; do
        [ -e "$page" ] || continue
        n=$((n + 1))
        out=$(LC_ALL=C.UTF-8 groff -ww -man -Tutf8 -z "$page" 2>&1)
        rc=$?
        if [ $rc -ne 0 ] || [ -n "$out" ]; then
                echo "not ok $n - ${page##*/}: exit $rc"
                echo "$out" | sed 's/^/#   /'
                fail=1
        else
                echo "ok $n - ${page##*/}"
        fi
done
echo "1..$n"
[ $n -gt 0 ] || { echo "no man page found in $1/man"; exit 1; }
exit $fail
