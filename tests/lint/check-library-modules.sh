#!/bin/sh
# SPDX-License-Identifier: MIT
# Each library is used by its one module only (docs/CODING_STYLE.md): its header may be
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
# wikiwebctl (its own program) is a D-Bus client and nothing else.
check 'systemd/sd-bus' 'src/bus/|src/sandbox/|src/wikiwebctl/'
check 'microhttpd\.h' 'src/http/'
check 'sqlite3\.h' 'src/store/'
# ICU (Unicode NFC, character properties) for the citations only.
check 'unicode/' 'src/query/citation\.c'
check 'openssl/' 'src/shared/sha256\.c'
# libarchive writes the ZIP of a person's whole history, nothing else.
check 'archive\.h|archive_entry\.h' 'src/api/export-zip\.c'
# json-c at the API edge (src/http/ renders the contract's JSON), in the
# upstream clients (src/query/) and the sandbox (config.json, the run's
# outputs), in the shared helpers (src/shared/json-util.*) and the one
# reader and writer of a record's sources and citations
# (src/shared/source.*). The store
# returns structs; wikiwebctl's --json output is made in its table module;
# history.c uses json-c to check that the sources
# handed to history_finish() are one JSON array (its -EINVAL contract) and
# to derive the report's signals from them; report.c reads the searches and
# sources the unanswered report lists. The MCP face (src/mcp/) speaks
# JSON-RPC, its wire format.
check 'json-c/' 'src/api/|src/mcp/|src/http/|src/query/|src/sandbox/|src/shared/json-util\.|src/shared/source\.|src/store/history\.c|src/store/report\.c|src/wikiwebctl/ctl-table\.c'

[ "$status" -eq 0 ] && echo "library-modules: each library is included by its one module only"
exit "$status"
