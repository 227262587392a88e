#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The MCP face's own cost (docs/API.md "MCP"), on loopback, with the real
wikiwebd, a real MediaWiki (tests/fixtures/mediawiki.py) and the scripted
model server (tests/fixtures/fake_llm.py). Prints figures; exits 0 whatever
they are (2 when it cannot measure).

1. ask_wiki against POST /api/v1/query, same run, same daemon: QUERIES (40)
   of each, alternating, each a question the scripted model answers at
   once, each on a new connection. Prints the median and p90 round trip of
   each and the difference of the medians: what the face adds (JSON-RPC,
   the queue's join and claim, the result's text and structuredContent).
2. tools/list: REQUESTS (2000) one after the other, each on a new
   connection: requests a second.
3. read_page of "Apple": READS (300) one after the other, each for
   another person (the rate limit is per person): requests a second, and
   the same for the wiki's own read, so that the face's share shows.

    tests/bench/bench-mcp.py [path/to/wikiwebd]
"""

import http.client
import json
import os
import statistics
import sys
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', 'e2e'))
sys.path.insert(0, os.path.join(here, '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402
import mediawiki  # noqa: E402

QUERIES = 40
REQUESTS = 2000
READS = 300


def post(port, path, body, headers=None):
    h = {'Host': f'127.0.0.1:{port}', 'Content-Type': 'application/json'}
    h.update(headers or {})
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    try:
        t0 = time.perf_counter()
        conn.request('POST', path, body=json.dumps(body).encode(), headers=h)
        r = conn.getresponse()
        data = r.read()
        return time.perf_counter() - t0, r.status, json.loads(data)
    finally:
        conn.close()


def rpc(method, params=None, id=1):
    m = {'jsonrpc': '2.0', 'id': id, 'method': method}
    if params is not None:
        m['params'] = params
    return m


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    wikiwebd = sys.argv[1] if len(sys.argv) > 1 else os.environ.get('WIKIWEBD', 'build/wikiwebd-test')
    harness.WIKIWEBD = os.path.abspath(wikiwebd)
    why = mediawiki.available()
    if why:
        print('bench-mcp: no MediaWiki here:', why)
        return 2
    w = mediawiki.Wiki().start()
    llm = fake_llm.FakeLLM([{'answer': 'An apple is a fruit.'}] * (2 * QUERIES + 4)).start()
    d = harness.Daemon(None, WIKI_WEB_WIKI_API_URL=w.api_url, WIKI_WEB_LLM_URL=llm.url,
                       WIKI_WEB_LLM_MODEL='test-model', WIKI_WEB_TRUSTED_PROXIES='127.0.0.1/32',
                       WIKI_WEB_LOG_LEVEL='5').start()
    try:
        port = d.port
        # Warm up both paths once.
        post(port, '/api/v1/query', {'question': 'Warm?'}, {'X-Remote-User': 'api'})
        post(port, '/mcp', rpc('tools/call', {'name': 'ask_wiki', 'arguments': {'question': 'Warm?'}}),
             {'X-Remote-User': 'mcp'})
        api, mcp = [], []
        for i in range(QUERIES):
            t, s, b = post(port, '/api/v1/query', {'question': 'What is an apple?'}, {'X-Remote-User': 'api'})
            assert s == 200, b
            api.append(t)
            t, s, b = post(port, '/mcp', rpc('tools/call', {'name': 'ask_wiki',
                                                             'arguments': {'question': 'What is an apple?'}}),
                           {'X-Remote-User': 'mcp'})
            assert s == 200 and not b['result'].get('isError'), b
            mcp.append(t)
        ma, mm = statistics.median(api), statistics.median(mcp)
        print(f'1. POST /api/v1/query: median {ma * 1000:.1f} ms, p90 {pct(api, 0.9) * 1000:.1f} ms ({QUERIES})')
        print(f'   ask_wiki over /mcp:  median {mm * 1000:.1f} ms, p90 {pct(mcp, 0.9) * 1000:.1f} ms ({QUERIES})')
        print(f'   the face adds {(mm - ma) * 1000:+.1f} ms to the median')

        t0 = time.perf_counter()
        for i in range(REQUESTS):
            _, s, b = post(port, '/mcp', rpc('tools/list', id=i), {'X-Remote-User': 'list'})
            assert s == 200 and len(b['result']['tools']) == 3
        dt = time.perf_counter() - t0
        print(f'2. tools/list: {REQUESTS / dt:.0f} requests/s ({REQUESTS} in {dt:.2f} s, one connection each)')

        t0 = time.perf_counter()
        for i in range(READS):
            _, s, b = post(port, '/mcp', rpc('tools/call', {'name': 'read_page', 'arguments': {'title': 'Apple'}},
                                             id=i), {'X-Remote-User': f'reader{i}'})
            assert s == 200 and not b['result'].get('isError'), b
        dt = time.perf_counter() - t0
        url = w.api_url + '?action=query&prop=revisions&rvprop=content|ids&rvslots=main&titles=Apple&format=json'
        t1 = time.perf_counter()
        for i in range(READS):
            with urllib.request.urlopen(url, timeout=30) as r:
                r.read()
        dw = time.perf_counter() - t1
        print(f'3. read_page: {READS / dt:.0f} requests/s ({READS} in {dt:.2f} s); '
              f'the wiki alone: {READS / dw:.0f} reads/s ({dw:.2f} s)')
    finally:
        d.stop()
        llm.stop()
        w.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
