#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Helper of bench-http.sh: fill a running wikiwebd's queue.

bench-fill.py HOST:PORT N TOKEN
Joins N sessions with distinct fresh cookies (over one keep-alive
connection), then joins TOKEN's session last, and prints the status body
TOKEN sees (on stdout, nothing else). Exits non-zero if any join is not
201 or the queue length is not N + 1."""

import http.client
import json
import secrets
import sys


def main():
    hostport, n, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    host, port = hostport.rsplit(':', 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def call(method, path, tok):
        conn.request(method, path, headers={'Cookie': f'wikiweb_session={tok}'})
        r = conn.getresponse()
        return r.status, r.read()

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
