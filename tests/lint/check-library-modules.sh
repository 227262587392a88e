#!/bin/sh
# SPDX-License-Identifier: MIT
# Each library is used by its one module only (STYLE.md): its header may be
# included under that module's folder and nowhere else in src/. Tests may
# include what the module under test needs. Exit 1 naming every stray include.
set -eu
cd "${1:-$(dirname "$0")/../..}"

status=0
check() {
        # $1: a header pattern (grep -E), $2: the folders allowed (grep -E on the path)
        hits=$(grep -rlE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<($1)" src || true)
        for f in $hits; do
                if ! echo "$f" | grep -qE "^($2)"; then
                        echo "library-modules: $f includes a header matching <$1>, which only $2 may use" >&2
                        status=1
                fi
        done
}

check 'curl/' 'src/query/'
check 'systemd/sd-bus' 'src/bus/|src/sandbox/'
check 'microhttpd\.h' 'src/http/'
check 'sqlite3\.h' 'src/store/'
check 'openssl/' 'src/shared/sha256\.c'

[ "$status" -eq 0 ] && echo "library-modules: each library is included by its one module only"
exit "$status"
