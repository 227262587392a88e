#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The cost of one upstream request through src/query/upstream.c (libcurl
# multi in sd-event, the destination policy, the cap, a fresh easy handle per
# request) next to the curl command line tool fetching the same URL from the
# same nginx, in the same run, on loopback: N sequential requests (1,000),
# keep-alive on both sides (the tool's multi handle keeps the connection;
# curl reuses it across the URLs of one invocation). Prints both times, the
# per-request cost and the ratio. Target: ratio <= 1.2. A script that prints
# figures, not a test: it exits 0 whatever the ratio (non-zero only when it
# cannot measure).
#
#   tests/bench/bench-upstream.sh [path/to/wikiweb-upstream-tool]
#
# Environment: N (1000), ROUNDS (5: tool then curl, alternating; the best of
# each counts), SIZE (bytes of the file served, 2048). Both wall time and
# CPU time (user + system of the client process) are printed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
upstream_tool=${1:-}
if [[ -z $upstream_tool ]]; then
        for b in build build-main; do
                if [[ -x $root/$b/tests/tools/upstream/wikiweb-upstream-tool ]]; then
                        upstream_tool=$root/$b/tests/tools/upstream/wikiweb-upstream-tool
                        break
                fi
        done
fi
[[ -n $upstream_tool && -x $upstream_tool ]] || { echo "wikiweb-upstream-tool not found; pass its path" >&2; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_need nginx curl python3 -- "apt-get install nginx-light curl python3"

N=${N:-1000}
ROUNDS=${ROUNDS:-5}
SIZE=${SIZE:-2048}

bench_workdir bench-upstream

port=$(bench_free_port)
mkdir -p "$tmp/www"
head -c "$SIZE" /dev/zero | tr '\0' 'x' >"$tmp/www/page.json"
bench_nginx_start "$tmp" <<CONF
        keepalive_timeout 60s;
        log_format conn '\$connection';
        server {
                listen 127.0.0.1:$port;
                root $tmp/www;
                default_type application/json;
                location = /check.json {
                        access_log $tmp/nginx/check.log conn;
                        try_files /page.json =404;
                }
        }
CONF
url="http://127.0.0.1:$port/page.json"
bench_wait_http "$url" || { echo "nginx does not answer" >&2; exit 1; }

# curl: one invocation, N URLs, one connection (curl says "Re-using existing
# connection" for each after the first).
for i in $(seq "$N"); do echo "url = \"$url?$i\""; echo "output = /dev/null"; done >"$tmp/curl.cfg"

# Run a command; print "WALL_US CPU_US" (CPU: user + system of the child,
# from wait4: on a busy shared machine the wall time also measures the
# scheduler, the CPU time only the work).
measure() {
        python3 -c '
import os, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
out = p.stdout.read()
_, status, ru = os.wait4(p.pid, 0)
wall = time.monotonic() - t0
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit("failed: %r %r" % (sys.argv[1:], out[-500:]))
print(int(wall * 1e6), int((ru.ru_utime + ru.ru_stime) * 1e6))
' "$@"
}

best() {  # FILE COLUMN: the smallest value
        sort -n -k"$2" "$1" | head -1 | awk -v c="$2" '{ print $c }'
}

# Keep-alive on both sides: 50 requests each to a logged location, then
# count the distinct connections nginx saw.
check="http://127.0.0.1:$port/check.json"
"$upstream_tool" --allow 127.0.0.1 fetch-n 50 "$check" >/dev/null
tool_conns=$(sort -u "$tmp/nginx/check.log" | wc -l)
: >"$tmp/nginx/check.log"
kill -USR1 "$(cat "$tmp/nginx/nginx.pid")"; sleep 0.2
for i in $(seq 50); do echo "url = \"$check?$i\""; echo "output = /dev/null"; done >"$tmp/check.cfg"
curl -fsS --config "$tmp/check.cfg"
curl_conns=$(sort -u "$tmp/nginx/check.log" | wc -l)
echo "connections for 50 requests: wikiweb upstream $tool_conns, curl $curl_conns"

: >"$tmp/tool.txt"; : >"$tmp/curl.txt"
for r in $(seq "$ROUNDS"); do
        read -r tw tc < <(measure "$upstream_tool" --allow 127.0.0.1 fetch-n "$N" "$url")
        read -r cw cc < <(measure curl -fsS --config "$tmp/curl.cfg")
        echo "$tw $tc" >>"$tmp/tool.txt"; echo "$cw $cc" >>"$tmp/curl.txt"
        echo "round $r: wikiweb upstream $((tw / 1000)) ms wall, $((tc / 1000)) ms CPU; curl $((cw / 1000)) ms wall, $((cc / 1000)) ms CPU ($N requests)"
done

python3 - "$(best "$tmp/tool.txt" 1)" "$(best "$tmp/curl.txt" 1)" "$(best "$tmp/tool.txt" 2)" "$(best "$tmp/curl.txt" 2)" "$N" <<'PY'
import sys
tw, cw, tc, cc, n = (int(x) for x in sys.argv[1:])
print('best wall time: wikiweb upstream %.1f ms (%.1f us/request), curl %.1f ms (%.1f us/request): ratio %.2f (%s the 1.2 target)'
      % (tw / 1000, tw / n, cw / 1000, cw / n, tw / cw, 'within' if tw / cw <= 1.2 else 'MISSES'))
print('best CPU time:  wikiweb upstream %.1f ms (%.1f us/request), curl %.1f ms (%.1f us/request): ratio %.2f'
      % (tc / 1000, tc / n, cc / 1000, cc / n, tc / cc))
PY
