#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Throughput and latency of GET /api/v1/queue/status with 1,000 tickets held
# by other sessions, next to nginx serving a static file of the same size,
# in the same run, on loopback, with wrk. Prints both req/s, the ratio and
# p99 latencies. Target: ratio >= 0.8. A script that prints figures, not a
# test: it exits 0 whatever the ratio (non-zero only when it cannot measure).
#
#   tests/bench/bench-http.sh [path/to/wikiwebd]
#
# Environment: TICKETS (1000), THREADS (2), CONNECTIONS (50), DURATION (10s
# per run), ROUNDS (2: wikiwebd, nginx, then nginx, wikiwebd), WARMUP (2s),
# VERBOSE (print wrk's own output). The ratio is of each server's best run,
# the least disturbed by whatever else the machine is doing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_find_wikiwebd "${1:-}"
bench_need wrk nginx curl python3 -- "apt-get install wrk nginx curl"

TICKETS=${TICKETS:-1000}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-50}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2s}

bench_workdir bench

# --- wikiwebd with TICKETS tickets held by other sessions --------------------
port=$(bench_free_port)
env -i PATH="$PATH" \
        WIKI_WEB_QUEUE_MAX_LENGTH=$((TICKETS + 10)) \
        WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=3600 \
        WIKI_WEB_QUEUE_RESERVATION_SECONDS=3600 \
        WIKI_WEB_COOKIE_SECURE=false \
        WIKI_WEB_STATE_DIRECTORY="$tmp" \
        "$wikiwebd" --listen "127.0.0.1:$port" >"$tmp/wikiwebd.log" 2>&1 &
pids+=($!)
bench_wait_http "http://127.0.0.1:$port/api/v1/health"

token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
python3 "$here/bench-fill.py" "127.0.0.1:$port" "$TICKETS" "$token" >"$tmp/status.json"
size=$(stat -c %s "$tmp/status.json")

# --- nginx: one worker, a static file of the same size ------------------------
nport=$(bench_free_port)
mkdir -p "$tmp/www"
cp "$tmp/status.json" "$tmp/www/status.json"
chmod -R a+rX "$tmp/www"
bench_nginx_start "$tmp" <<EOF
        server {
                listen 127.0.0.1:$nport;
                location = /api/v1/queue/status {
                        root $tmp/www;
                        try_files /status.json =404;
                        default_type "application/json; charset=utf-8";
                        add_header Cache-Control no-store;
                        add_header X-Content-Type-Options nosniff;
                }
        }
EOF
bench_wait_http "http://127.0.0.1:$nport/api/v1/queue/status"
nsize=$(curl -fsS "http://127.0.0.1:$nport/api/v1/queue/status" | wc -c)
[[ $nsize == "$size" ]] || { echo "nginx body is $nsize bytes, wikiwebd's $size" >&2; exit 1; }

# --- measure: alternate the two servers, ROUNDS times, keep each one's best ---
run_wrk() {  # NAME URL ROUND
        local out=$tmp/wrk-$1-$3.txt
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency \
                -H "Cookie: wikiweb_session=$token" "$2" >"$out"
        if grep -q -e 'Non-2xx' -e 'Socket errors' "$out"; then
                echo "errors during the $1 run:" >&2
                cat "$out" >&2
        fi
        awk -v name="$1" '/^Requests\/sec:/ { rps = $2 } $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 }
                END { printf "%s %s %s %s\n", name, rps, p50, p99 }' "$out" >>"$tmp/results"
}
load=$(cut -d' ' -f1 /proc/loadavg)
wurl="http://127.0.0.1:$port/api/v1/queue/status"
nurl="http://127.0.0.1:$nport/api/v1/queue/status"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" -H "Cookie: wikiweb_session=$token" "$wurl" >/dev/null
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" "$nurl" >/dev/null
for r in $(seq "$ROUNDS"); do
        if (( r % 2 )); then
                run_wrk wikiwebd "$wurl" "$r"; run_wrk nginx "$nurl" "$r"
        else
                run_wrk nginx "$nurl" "$r"; run_wrk wikiwebd "$wurl" "$r"
        fi
done

echo "GET /api/v1/queue/status, $TICKETS tickets held by other sessions (+1 for the caller, position $TICKETS),"
echo "response body $size bytes; wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency on loopback, $ROUNDS alternating rounds,"
echo "$(nproc) CPUs, load average $load at start (other load on the machine skews the figures)"
printf '%-10s %6s %12s %10s %10s\n' server round 'req/s' p50 p99
awk '{ n[$1]++; printf "%-10s %6d %12s %10s %10s\n", $1, n[$1], $2, $3, $4 }' "$tmp/results"
best() { awk -v name="$1" '$1 == name && $2 > best { best = $2; line = $0 } END { print line }' "$tmp/results"; }
wbest=$(best wikiwebd); nbest=$(best nginx)
read -r _ w_rps w_p50 w_p99 <<<"$wbest"
read -r _ n_rps n_p50 n_p99 <<<"$nbest"
ratio=$(awk -v a="$w_rps" -v b="$n_rps" 'BEGIN { printf "%.2f", a / b }')
verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.8) ? "meets" : "BELOW" }')
echo "best of each: wikiwebd $w_rps req/s (p50 $w_p50, p99 $w_p99), nginx $n_rps req/s (p50 $n_p50, p99 $n_p99)"
echo "ratio wikiwebd/nginx: $ratio ($verdict the 0.8 target)"
if [[ -n ${VERBOSE:-} ]]; then
        cat "$tmp"/wrk-*.txt
fi
