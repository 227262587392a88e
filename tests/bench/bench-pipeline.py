#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The query pipeline's own cost, on loopback, with the real wikiwebd, a real
MediaWiki (tests/fixtures/mediawiki.py) and the scripted model server
(tests/fixtures/fake_llm.py). Prints figures; exits 0 whatever they are
(2 when it cannot measure).

1. Overhead: QUERIES (50) queries whose scripted model reads one page and
   then answers. Per query: the end-to-end time over HTTP (client clock)
   minus the time the wiki and the model took (the record's timings_ms).
   Prints the median and p90. Target: median under 5 ms.
2. GET /api/v1/queue/status p99 while queries run back to back, next to the
   same with an idle slot, same run (STATUS_REQUESTS each, from a client in
   a process of its own): the ratio. Target: at most 1.5.

    tests/bench/bench-pipeline.py [path/to/wikiwebd]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', 'e2e'))
sys.path.insert(0, os.path.join(here, '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402
import mediawiki  # noqa: E402

QUERIES = int(os.environ.get('QUERIES', '50'))
STATUS_REQUESTS = int(os.environ.get('STATUS_REQUESTS', '400'))
READ_ANSWER = [{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
               {'answer': 'Apple is a fruit [Apple].'}]


def find_wikiwebd():
    if len(sys.argv) > 1:
        return os.path.abspath(sys.argv[1])
    root = os.path.abspath(os.path.join(here, '..', '..'))
    for b in ('build', 'build-e2e', 'build-main'):
        p = os.path.join(root, b, 'wikiwebd')
        if os.access(p, os.X_OK):
            return p
    return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs))) - 1))]


# The status client runs in a process of its own: in this one, the fake
# model server and the back-to-back query client hold the GIL, which would
# be measured as the daemon's latency. One connection per request, one
# session (the cookie of the first answer), as a polling front end does.
STATUS_PROBE = r"""
import http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
cookie = None
out = []
for i in range(n + 1):
    h = {'Cookie': cookie} if cookie else {}
    t0 = time.perf_counter()
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
    c.request('GET', '/api/v1/queue/status', headers=h)
    r = c.getresponse()
    r.read()
    c.close()
    dt = (time.perf_counter() - t0) * 1000
    if r.status != 200:
        sys.exit(f'status {r.status}')
    if cookie is None:
        cookie = r.getheader('Set-Cookie').split(';')[0]
    else:
        out.append(dt)
    time.sleep(0.002)
print(json.dumps(out))
"""


def status_latencies(d, n):
    p = subprocess.run([sys.executable, '-c', STATUS_PROBE, str(d.port), str(n)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f'status probe: {p.stderr.strip()}')
    return json.loads(p.stdout)


def main():
    wikiwebd = find_wikiwebd()
    if not wikiwebd:
        print('wikiwebd not found; pass its path', file=sys.stderr)
        return 2
    why = mediawiki.available()
    if why:
        print('no MediaWiki: ' + why, file=sys.stderr)
        return 2
    harness.WIKIWEBD = wikiwebd
    w = mediawiki.Wiki().start()
    llm = fake_llm.FakeLLM([]).start()
    shm = tempfile.mkdtemp(prefix='wikiweb-bench-', dir='/dev/shm') if os.path.isdir('/dev/shm') else None
    daemons = []
    try:
        # The history commits twice per query with synchronous=FULL (an
        # fsync each, ~4 ms on this machine's disk): measured once with the
        # state directory on disk and once on tmpfs, where fsync is free,
        # to tell the history's share from the pipeline's own.
        for where, state in (('disk', None), ('tmpfs', shm)):
            if where == 'tmpfs' and not state:
                continue
            env = dict(WIKI_WEB_WIKI_API_URL=w.api_url, WIKI_WEB_LLM_URL=llm.url,
                       WIKI_WEB_LLM_MODEL='bench', WIKI_WEB_LOG_LEVEL='6')
            if state:
                env['WIKI_WEB_STATE_DIRECTORY'] = state
            d = harness.Daemon(None, **env).start()
            daemons.append(d)
            llm.set_script(READ_ANSWER * (QUERIES + 1))
            b = d.browser()
            # one warm-up query (connections, the wiki's caches)
            r = b.query('What is an apple?', timeout=60)
            assert r.status == 200, r
            overhead, recorded = [], []
            for _ in range(QUERIES):
                t0 = time.perf_counter()
                r = b.query('What is an apple?', timeout=60)
                e2e = (time.perf_counter() - t0) * 1000
                assert r.status == 200, r
                t = r.json['timings_ms']
                overhead.append(e2e - t['wiki'] - t['model'])
                recorded.append(t['total'] - t['wiki'] - t['model'])
            print(f'pipeline overhead, state directory on {where}, {QUERIES} queries (one wiki_read, then '
                  f'the answer; end to end over HTTP minus wiki and model time):')
            print(f'  median {statistics.median(overhead):.2f} ms, p90 {pct(overhead, 90):.2f} ms, '
                  f'min {min(overhead):.2f} ms (target: median < 5 ms)')
            print(f'  inside the daemon (record: total - wiki - model, whole ms): '
                  f'median {statistics.median(recorded):.1f} ms')

        for d, where in zip(daemons, ('disk', 'tmpfs')):
            idle = status_latencies(d, STATUS_REQUESTS)
            stop = threading.Event()
            ran = [0]

            def back_to_back():
                q = d.browser()
                while not stop.is_set():
                    llm.set_script(READ_ANSWER)
                    r = q.query('What is an apple?', timeout=60)
                    if r.status == 200:
                        ran[0] += 1

            th = threading.Thread(target=back_to_back)
            th.start()
            time.sleep(0.2)
            busy = status_latencies(d, STATUS_REQUESTS)
            if ran[0] == 0:
                raise RuntimeError('no query ran while the busy figures were taken')
            stop.set()
            th.join(60)
            p_idle, p_busy = pct(idle, 99), pct(busy, 99)
            print(f'GET /api/v1/queue/status, {STATUS_REQUESTS} requests each, state directory on {where}:')
            print(f'  idle slot:                 median {statistics.median(idle):.3f} ms, p99 {p_idle:.3f} ms')
            print(f'  queries back to back ({ran[0]}): median {statistics.median(busy):.3f} ms, '
                  f'p99 {p_busy:.3f} ms')
            print(f'  p99 ratio busy/idle: {p_busy / p_idle:.2f} (target <= 1.5)')
    finally:
        for d in daemons:
            d.discard()
        llm.stop()
        w.stop()
        if shm:
            shutil.rmtree(shm, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
