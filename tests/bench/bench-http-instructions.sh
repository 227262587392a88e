#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Instructions the daemon executes per GET /api/v1/queue/status with 1,000
# tickets held by other sessions, counted by valgrind's callgrind: a figure
# that does not move with the machine's load (unlike bench-http.sh's req/s).
# Two runs that differ only in the number of status requests; the difference
# divided by the difference in requests removes start-up and the joins. Also
# prints the functions that cost the most in the longer run.
#
#   tests/bench/bench-http-instructions.sh [path/to/wikiwebd]
#
# Environment: TICKETS (1000), REQUESTS (5000), TOP (8).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_find_wikiwebd "${1:-}"
bench_need valgrind callgrind_annotate curl python3 -- "apt-get install valgrind curl"

TICKETS=${TICKETS:-1000}
REQUESTS=${REQUESTS:-5000}
TOP=${TOP:-8}

tmp=$(mktemp -d /tmp/wikiweb-bench-ir.XXXXXX)
vpid=
cleanup() {
        if [[ -n $vpid ]]; then kill -TERM "$vpid" 2>/dev/null || true; wait "$vpid" 2>/dev/null || true; fi
        rm -rf "$tmp"
}
trap cleanup EXIT

run() {  # NREQUESTS OUT: total instructions of a daemon run that answers NREQUESTS status calls
        local port token
        port=$(bench_free_port)
        env -i PATH="$PATH" \
                WIKI_WEB_QUEUE_MAX_LENGTH=$((TICKETS + 10)) \
                WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=3600 \
                WIKI_WEB_QUEUE_RESERVATION_SECONDS=3600 \
                WIKI_WEB_COOKIE_SECURE=false \
                WIKI_WEB_STATE_DIRECTORY="$tmp" \
                valgrind --tool=callgrind --callgrind-out-file="$2" \
                "$wikiwebd" --listen "127.0.0.1:$port" >"$tmp/valgrind.log" 2>&1 &
        vpid=$!
        # Under valgrind start-up is slow: 20 s; the fill below fails loudly if it never answered.
        bench_wait_http "http://127.0.0.1:$port/api/v1/health" 200 0.1 || true
        token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
        python3 "$here/bench-fill.py" "127.0.0.1:$port" "$TICKETS" "$token" >/dev/null
        python3 - "$port" "$token" "$1" <<'EOF'
import http.client
import sys

port, token, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
for _ in range(n):
    c.request('GET', '/api/v1/queue/status', headers={'Cookie': f'wikiweb_session={token}'})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f'HTTP {r.status}')
EOF
        kill -TERM "$vpid"
        wait "$vpid" || { echo "wikiwebd under valgrind exited with $?" >&2; cat "$tmp/valgrind.log" >&2; exit 1; }
        vpid=
        callgrind_annotate "$2" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

short=$(run 0 "$tmp/short.out")
long=$(run "$REQUESTS" "$tmp/long.out")
per=$(( (long - short) / REQUESTS ))
echo "GET /api/v1/queue/status with $TICKETS tickets held by other sessions, one keep-alive connection:"
echo "  $per instructions per request in wikiwebd (callgrind, $REQUESTS requests)"
echo "most expensive functions over the whole longer run (start-up and $((TICKETS + 1)) joins included):"
callgrind_annotate "$tmp/long.out" 2>/dev/null | awk '/file:function/ { on = 1; next } on && NF && !/^-+$/' | head -n "$TOP"
