#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# How long a well-behaved client (127.0.0.2, GET /api/v1/health every 0.1 s)
# waits while 1,100 slowloris connections (127.0.0.1, a header byte every
# 3 s) and 2,000 idle ones (127.0.0.3..34) are held, all reconnecting when
# dropped, on loopback. Target: p99 under 1 s, no timeouts. A script that
# prints figures, not a test: it exits 0 whatever they are (2 when it cannot
# measure). bench-slots.py has the details.
#
#   tests/bench/bench-slots.sh [path/to/wikiwebd [path/to/reference-wikiwebd]]
#
# With a reference binary (e.g. one built from an older commit), both are
# measured in the same run, the reference first.
# Environment: DURATION (30 s per binary), SLOWLORIS (1100), IDLE (2000),
# NOFILE (16384: the daemon's RLIMIT_NOFILE, as the unit's LimitNOFILE=).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_find_wikiwebd "${1:-}"
bench_need python3 -- "apt-get install python3"

echo "bench-slots: ${SLOWLORIS:-1100} slowloris + ${IDLE:-2000} idle connections, ${DURATION:-30} s," \
        "$(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg) at start"
if [[ -n ${2:-} ]]; then
        python3 "$here/bench-slots.py" "$2" reference
fi
python3 "$here/bench-slots.py" "$wikiwebd" wikiwebd
