#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Helper of bench-http.sh: fill a running wikiwebd's queue.

bench-fill.py HOST:PORT N TOKEN [QUERIES]
First asks QUERIES questions (default 10), one after the other, so that
the daemon knows that many query durations and the status object carries
a wait range (API.md 5): on a daemon without a wiki or a model each fails
at once, which still counts. Then joins N sessions with distinct fresh
cookies (over one keep-alive connection), then joins TOKEN's session last,
and prints the status body TOKEN sees (on stdout, nothing else). Exits
non-zero if any join is not 201 or the queue length is not N + 1."""

import http.client
import json
import secrets
import sys
import time


def main():
    hostport, n, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    host, port = hostport.rsplit(':', 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def call(method, path, tok, body=None):
        headers = {'Cookie': f'wikiweb_session={tok}'}
        if body is not None:
            headers['Content-Type'] = 'application/json'
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()

    for i in range(int(sys.argv[4]) if len(sys.argv) > 4 else 10):
        status, body = call('POST', '/api/v1/query', secrets.token_urlsafe(32), b'{"question": "Warm up?"}')
        if status not in (200, 500):
            sys.exit(f'query {i}: HTTP {status}: {body[:200]!r}')
    # A duration counts once the query's cleanup is confirmed, which may
    # come after its reply: the joins start once the range is known (or
    # at once from a daemon without it), so that every run does the same.
    probe = secrets.token_urlsafe(32)
    for _ in range(200):
        status, body = call('GET', '/api/v1/queue/status', probe)
        s = json.loads(body)
        if s.get('wait_known', True) and s['state'] == 'idle':
            break
        time.sleep(0.05)

    for i in range(n):
        status, body = call('POST', '/api/v1/queue/join', secrets.token_urlsafe(32))
        if status != 201:
            sys.exit(f'join {i}: HTTP {status}: {body[:200]!r}')
    status, body = call('POST', '/api/v1/queue/join', token)
    if status != 201:
        sys.exit(f'join of the benchmark session: HTTP {status}: {body[:200]!r}')
    status, body = call('GET', '/api/v1/queue/status', token)
    s = json.loads(body)
    if status != 200 or s['queue_length'] != n + 1 or s['ticket']['position'] != n:
        sys.exit(f'unexpected status: HTTP {status}: {body[:300]!r}')
    sys.stdout.buffer.write(body)


if __name__ == '__main__':
    main()
