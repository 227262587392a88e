#!/bin/sh
# SPDX-License-Identifier: MIT
# No goto in src/ (docs/CODING_STYLE.md, "Errors and ownership"): what a
# function holds is released by cleanup attributes, never at a ladder of
# labels. Exit 1 naming every goto.
set -eu
cd "${1:-$(dirname "$0")/../..}"

hits=$(grep -rnE '(^|[^A-Za-z0-9_])goto[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*;' --include='*.c' --include='*.h' src || true)
if [ -n "$hits" ]; then
        echo "$hits" | sed 's/^/no-goto: /' >&2
        echo "no-goto: release with _cleanup_ helpers and return early instead (docs/CODING_STYLE.md)" >&2
        exit 1
fi
