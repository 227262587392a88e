# SPDX-License-Identifier: MIT
# Sourced by the bench scripts: find the wikiwebd to measure and check the
# tools a script needs.
#   bench_find_wikiwebd [PATH]   sets $root and $wikiwebd, exits 2 if none
#   bench_need TOOL... -- HINT   exits 2 naming the first missing tool
#   bench_workdir NAME           sets $tmp and pids=(), cleaned up at exit
#   bench_free_port, bench_wait_http, bench_nginx_start: see below

bench_find_wikiwebd() {
        root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
        wikiwebd=${1:-}
        if [[ -z $wikiwebd ]]; then
                for b in build-e2e build build-main; do
                        if [[ -x $root/$b/wikiwebd ]]; then wikiwebd=$root/$b/wikiwebd; break; fi
                done
        fi
        [[ -n $wikiwebd && -x $wikiwebd ]] || { echo "wikiwebd not found; pass its path" >&2; exit 2; }
}

bench_need() {
        local tools=() hint
        while [[ $# -gt 0 && $1 != -- ]]; do tools+=("$1"); shift; done
        hint=${2:-}
        for tool in "${tools[@]}"; do
                command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] ||
                        { echo "$tool is missing ($hint)" >&2; exit 2; }
        done
}

# bench_workdir NAME: a fresh directory $tmp (/tmp/wikiweb-NAME.XXXXXX,
# readable by nginx's worker) and an empty array pids; at exit every pid in
# pids is sent SIGTERM and waited for, and $tmp is removed.
bench_workdir() {
        tmp=$(mktemp -d "/tmp/wikiweb-$1.XXXXXX")
        chmod 755 "$tmp"
        pids=()
        trap bench_cleanup EXIT
}

bench_cleanup() {
        for p in "${pids[@]}"; do
                kill -TERM "$p" 2>/dev/null || true
                wait "$p" 2>/dev/null || true
        done
        rm -rf "$tmp"
}

# A free TCP port on 127.0.0.1.
bench_free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# bench_wait_http URL [TRIES] [INTERVAL]: until URL answers 2xx; returns 1
# (and says so) when it has not after TRIES (100) tries INTERVAL (0.05 s) apart.
bench_wait_http() {
        local tries=${2:-100} interval=${3:-0.05}
        for _ in $(seq "$tries"); do
                curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
                sleep "$interval"
        done
        echo "no answer from $1" >&2
        return 1
}

# bench_nginx_start DIR: nginx with one worker, no access log and
# keep-alive without a request limit, its files under DIR/nginx; what goes
# inside http {} after that (more directives, the server block) comes on
# stdin. Appends its pid to the caller's pids array.
bench_nginx_start() {
        local dir=$1 nginx_bin
        nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
        mkdir -p "$dir/nginx"
        {
                cat <<CONF
daemon off;
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 1024; }
http {
        access_log off;
        client_body_temp_path $dir/nginx/body;
        proxy_temp_path $dir/nginx/proxy;
        fastcgi_temp_path $dir/nginx/fastcgi;
        uwsgi_temp_path $dir/nginx/uwsgi;
        scgi_temp_path $dir/nginx/scgi;
        keepalive_requests 100000000;
CONF
                cat
                echo "}"
        } >"$dir/nginx.conf"
        "$nginx_bin" -c "$dir/nginx.conf" -p "$dir/nginx" >"$dir/nginx/stdout.log" 2>&1 &
        pids+=($!)
}
