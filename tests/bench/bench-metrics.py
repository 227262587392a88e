#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The cost of a scrape (API.md 12.3): the real wikiwebd with a metrics
socket, 100 queries in the history and 1,000 tickets waiting, scraped
SCRAPES times over one keep-alive connection on loopback. Prints the
median and the 99th percentile of the round trip, which bounds the time in
the daemon from above (target: under 1 ms), and the exposition's size.
Figures, not a test: exits 0 whatever they are.

    tests/bench/bench-metrics.py path/to/wikiwebd
"""

import http.client
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'e2e'))

import harness  # noqa: E402

QUERIES = int(os.environ.get('QUERIES', '100'))
TICKETS = int(os.environ.get('TICKETS', '1000'))
SCRAPES = int(os.environ.get('SCRAPES', '500'))


def main():
    if len(sys.argv) < 2:
        sys.exit('usage: bench-metrics.py path/to/wikiwebd')
    harness.WIKIWEBD = os.path.abspath(sys.argv[1])
    d = harness.Daemon(metrics=True, WIKI_WEB_QUEUE_MAX_LENGTH=str(TICKETS + 10), WIKI_WEB_LOG_LEVEL='4')
    d.start()
    try:
        # Unconfigured, each query fails at once and is recorded: 100 in the history.
        b = d.browser()
        for _ in range(QUERIES):
            b.post('/api/v1/query', {'question': 'Counted?'})
        for _ in range(TICKETS):
            d.browser().join()
        conn = http.client.HTTPConnection('127.0.0.1', d.metrics_port, timeout=10)
        times = []
        size = 0
        accept = {'Accept': 'application/openmetrics-text;version=1.0.0'}
        for i in range(SCRAPES + 20):
            t0 = time.perf_counter()
            conn.request('GET', '/metrics', headers=accept)
            r = conn.getresponse()
            body = r.read()
            t = time.perf_counter() - t0
            if i >= 20:  # warm-up
                times.append(t)
            size = len(body)
        conn.close()
        text = body.decode()
        assert f'wikiweb_queue_length {TICKETS}' in text, 'the tickets are not there'
        times.sort()
        print(f'scrape with {QUERIES} queries in the history and {TICKETS} tickets waiting, '
              f'{SCRAPES} scrapes, {size} bytes: median {statistics.median(times) * 1e6:.0f} us, '
              f'p99 {times[int(len(times) * 0.99) - 1] * 1e6:.0f} us, max {times[-1] * 1e6:.0f} us '
              f'(round trip on loopback, client included)')
    finally:
        d.stop()


if __name__ == '__main__':
    main()
