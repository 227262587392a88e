#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md section 1 (transport) and 2 (error envelope), black-box over HTTP."""

import json
import signal
import socket
import time

import harness
from harness import API


def header_tokens(value):
    return [t.strip() for t in (value or '').split(',') if t.strip()]


class Transport(harness.DaemonTestCase):

    def test_health_names_the_missing_settings(self):
        """A wiki without a model: health lists the two model settings, and a query's failure names them
        and points to the README's "Quick start"."""
        d = self.daemon(WIKI_WEB_WIKI_API_URL='http://127.0.0.1:9/w/api.php')
        b = d.browser()
        j = b.get(API + '/health').json
        self.assertEqual(j['execution'], 'not_configured', j)
        self.assertEqual(j['missing_settings'], ['WIKI_WEB_LLM_URL', 'WIKI_WEB_LLM_MODEL'], j)
        r = b.query()
        self.assertError(r, 'execution_failed')
        self.assertEqual(r.json['error']['message'],
                         'query execution is not configured: WIKI_WEB_LLM_URL and WIKI_WEB_LLM_MODEL are not set '
                         '(see "Quick start" in the README)')

    def test_health(self):
        d = self.daemon()
        b = d.browser()
        r = b.get(API + '/health')
        self.assertStatus(r, 200)
        j = r.json
        self.assertEqual(set(j.keys()), {'status', 'contract_revision', 'version', 'state', 'sandbox', 'admission',
                                         'execution', 'missing_settings', 'wiki_read_as', 'slots', 'storage'}, r)
        # The history store (API.md 9, "The store under faults"): storage_cause only when not ok.
        self.assertEqual(j['storage'], 'ok')
        # The default: the wiki is read with the service's account (API.md
        # "Whose permissions"); wiki_read_check only in person mode.
        self.assertEqual(j['wiki_read_as'], 'service')
        self.assertEqual(j['slots'], {'total': 1, 'idle': 1, 'reserved': 0, 'running': 0})
        # No user manager for the test daemon here: the sandbox says so.
        self.assertIn(j['sandbox'], ('ok', 'starting', 'unavailable'))
        # Neither wiki nor model: health says so, and which settings are missing.
        self.assertEqual(j['execution'], 'not_configured')
        self.assertEqual(j['missing_settings'], ['WIKI_WEB_WIKI_API_URL', 'WIKI_WEB_LLM_URL', 'WIKI_WEB_LLM_MODEL'])
        self.assertEqual(j['status'], 'ok')
        self.assertTrue(harness.is_int(j['contract_revision']))
        self.assertEqual(j['contract_revision'], 1)
        self.assertIsInstance(j['version'], str)
        self.assertTrue(j['version'])
        self.assertEqual(j['state'], 'idle')
        self.assertEqual(j['admission'], 'open')
        self.assertStatus(b.join(), 201)
        r = b.get(API + '/health')
        self.assertEqual(r.json['state'], 'reserved', r)
        self.assertEqual(r.json['slots'], {'total': 1, 'idle': 0, 'reserved': 1, 'running': 0})

    def test_unknown_path_not_found(self):
        d = self.daemon()
        b = d.browser()
        # "/" is the web page (test_page.py); with WIKI_WEB_UI=false, unknown
        # as any other path.
        self.assertError(self.daemon(WIKI_WEB_UI='false').browser().get('/'), 'not_found')
        for method, path in [('GET', '/index.html'), ('GET', '/nope'), ('GET', '/api'), ('GET', '/api/v1'),
                             ('GET', '/api/v1/'), ('GET', '/api/v1/nope'), ('POST', '/api/v1/nope'),
                             ('GET', '/api/v2/health'), ('GET', '/api/v1/queue'),
                             ('GET', '/api/v1/queue/status/extra'), ('GET', '/api/v1/healthz'),
                             ('DELETE', '/api/v1/queue/tickets')]:
            r = b.request(method, path)
            self.assertStatus(r, 404)
            self.assertError(r, 'not_found')

    def test_wrong_method_allow_header(self):
        d = self.daemon()
        b = d.browser()
        endpoints = {
            '/health': 'GET',
            '/queue/join': 'POST',
            '/queue/status': 'GET',
            '/queue/ticket': 'DELETE',
            '/query': 'POST',
        }
        for path, allowed in endpoints.items():
            for method in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH'):
                if method == allowed:
                    continue
                r = b.request(method, API + path)
                self.assertStatus(r, 405)
                self.assertError(r, 'method_not_allowed')
                allow = [m.upper() for m in header_tokens(r.header('Allow'))]
                self.assertIn(allowed, allow, f'{method} {path}: {r!r}')
                self.assertNotIn(method, allow, f'{method} {path}: {r!r}')
        # None of those changed anything.
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']), ('idle', 0, None))

    def test_common_headers_on_every_status(self):
        """The harness checks Cache-Control, nosniff, Content-Type and the
        envelope on every response; this walks through one of each status."""
        d = self.daemon(WIKI_WEB_QUEUE_MAX_LENGTH=1, WIKI_WEB_MAX_REQUEST_BYTES=1024)
        a, b = d.browser(), d.browser()
        seen = set()
        for r in [a.get(API + '/health'), a.join(), a.join(), a.status(),
                  b.leave(), b.join(), b.query(), b.query(body='{'), b.get('/x'),
                  b.request('PUT', API + '/health'), b.query(body={'question': 'x' * 2000}),
                  b.query(origin='http://evil.example'), a.query(), a.leave(), a.join(),
                  a.leave()]:
            seen.add(r.status)
        self.assertEqual(seen, {200, 201, 204, 400, 403, 404, 405, 409, 413, 500, 503})

    def test_keep_alive(self):
        d = self.daemon()
        with socket.create_connection(('127.0.0.1', d.port), timeout=5) as s:
            req = (b'GET /api/v1/health HTTP/1.1\r\nHost: %s\r\n\r\n' % d.host.encode())
            for _ in range(3):
                s.sendall(req)
                r = harness.read_response(s, 'GET', 5)
                d.check_response(r)
                self.assertStatus(r, 200)

    # -- request_too_large ---------------------------------------------------

    def test_content_length_too_large_before_body(self):
        """413 is decided from Content-Length: it arrives while the body is
        still unsent."""
        d = self.daemon()
        for path in ('/query', '/queue/join'):
            with socket.create_connection(('127.0.0.1', d.port), timeout=5) as s:
                s.sendall(b'POST /api/v1%s HTTP/1.1\r\nHost: %s\r\n'
                          b'Content-Type: application/json\r\n'
                          b'Content-Length: 1000000000\r\n\r\n{"question":'
                          % (path.encode(), d.host.encode()))
                t0 = time.monotonic()
                r = harness.read_response(s, 'POST', 3)
                self.assertLess(time.monotonic() - t0, 2.0)
            d.check_response(r)
            self.assertError(r, 'request_too_large')
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']), ('idle', 0, None))

    def test_size_limit_boundary(self):
        """Exactly WIKI_WEB_MAX_REQUEST_BYTES is accepted, one more byte is not."""
        d = self.daemon(WIKI_WEB_MAX_REQUEST_BYTES=256)
        b = d.browser()
        base = '{"question":"hi"}'
        over = base + ' ' * (257 - len(base))
        r = b.query(body=over)
        self.assertError(r, 'request_too_large')
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']), ('idle', 0, None))
        exact = base + ' ' * (256 - len(base))
        r = b.query(body=exact)
        self.assertError(r, 'execution_failed')  # validated and claimed: execution not configured

    def test_chunked_stream_over_limit_is_cut_off(self):
        """A chunked body that goes on past the limit is not read for ever:
        the server answers 413 or closes the connection, long before the
        client is done sending 32 MiB. (libmicrohttpd 0.9.75 cannot queue
        a response in the middle of an upload, so a 413 may only come at
        the end of the body; see the next test.)"""
        d = self.daemon(WIKI_WEB_MAX_REQUEST_BYTES=1024)
        chunk = b'10000\r\n' + b' ' * 0x10000 + b'\r\n'
        sent = 0
        with socket.create_connection(('127.0.0.1', d.port), timeout=5) as s:
            s.sendall(b'POST /api/v1/query HTTP/1.1\r\nHost: %s\r\n'
                      b'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n'
                      b'c\r\n{"question":\r\n' % d.host.encode())
            try:
                while sent < 32 << 20:
                    s.sendall(chunk)
                    sent += 0x10000
                data = s.recv(65536)
            except (BrokenPipeError, ConnectionResetError):
                data = b''
        self.assertLess(sent, 32 << 20, 'the server read a 32 MiB body over a 1 KiB limit')
        if data:
            self.assertTrue(data.startswith(b'HTTP/1.1 413 '), data[:200])
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']), ('idle', 0, None))

    def test_chunked_complete_over_limit_and_under_limit(self):
        d = self.daemon(WIKI_WEB_MAX_REQUEST_BYTES=1024)
        body = json.dumps({'question': 'y' * 1100}).encode()
        chunks = b''.join(b'%x\r\n%s\r\n' % (len(body[i:i + 100]), body[i:i + 100])
                          for i in range(0, len(body), 100)) + b'0\r\n\r\n'
        head = (b'POST /api/v1/query HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n'
                b'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' % d.host.encode())
        r = d.raw(head + chunks, 'POST')
        self.assertError(r, 'request_too_large')
        # Far over the limit (512 KiB), still answered with 413 at the end.
        big = b''.join(b'4000\r\n' + b' ' * 0x4000 + b'\r\n' for _ in range(32))
        r = d.raw(head + b'c\r\n{"question":\r\n' + big + b'0\r\n\r\n', 'POST')
        self.assertError(r, 'request_too_large')
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']), ('idle', 0, None))
        # A small chunked body is read and validated like any other.
        r = d.raw(head + b'5\r\n{"que\r\nc\r\nstion":"hi"}\r\n0\r\n\r\n', 'POST')
        self.assertError(r, 'execution_failed')
        r = d.raw(head + b'5\r\n{"que\r\n7\r\nstion":\r\n0\r\n\r\n', 'POST')
        self.assertError(r, 'invalid_input')

    # -- invalid_input ---------------------------------------------------------

    def test_invalid_query_bodies(self):
        d = self.daemon()
        b = d.browser()
        cases = [
            ('text/plain', b'{"question":"hi"}'),
            ('application/x-www-form-urlencoded', b'question=hi'),
            ('application/json; charset=iso-8859-1', b'{"question":"hi"}'),
            ('application/jsonx', b'{"question":"hi"}'),
            (None, b'{"question":"hi"}'),
            ('application/json', b''),
            ('application/json', b'{"question":"\xff\xfe"}'),
            ('application/json', b'{"question":"\xc3"}'),
            ('application/json', b'{"question":"\xed\xa0\x80"}'),  # UTF-8 encoded surrogate
            ('application/json', b'{"question":"\xc0\xaf"}'),      # overlong
            ('application/json', b'{"question":'),
            ('application/json', b'{"question":"hi"'),
            ('application/json', b"{'question':'hi'}"),
            ('application/json', b'{"question":"hi",}'),
            ('application/json', b'{"question":"hi"} x'),
            ('application/json', b'{"question":"hi"}{}'),
            ('application/json', b'{"question":"hi"}]'),
            ('application/json', b'{"question":"hi","extra":1}'),
            ('application/json', b'{"question":"hi","pages":[],"x":null}'),
            ('application/json', b'{}'),
            ('application/json', b'{"pages":["A"]}'),
            ('application/json', b'null'),
            ('application/json', b'[]'),
            ('application/json', b'"hi"'),
            ('application/json', b'{"question":1}'),
            ('application/json', b'{"question":null}'),
            ('application/json', b'{"question":true}'),
            ('application/json', b'{"question":["hi"]}'),
            ('application/json', b'{"question":{"a":"b"}}'),
            ('application/json', b'{"question":"hi","pages":"A"}'),
            ('application/json', b'{"question":"hi","pages":[1]}'),
            ('application/json', b'{"question":"hi","pages":[null]}'),
            ('application/json', b'{"question":"hi","pages":{"a":1}}'),
            ('application/json', b'{"question":"a","question":"b"}'),
            ('application/json', b'{"question":"hi","pages":[],"pages":[]}'),
            ('application/json', b'{"question":""}'),
            ('application/json', b'{"question":"  \\t\\n "}'),
            ('application/json', b'{"question":"a\x00b"}'),   # raw control characters
            ('application/json', b'{"question":"a\x01b"}'),
            ('application/json', b'{"question":"a\nb"}'),
            ('application/json', b'{"question":"hi","pages":[1e999]}'),
            ('application/json', b'{"question":"hi","x":' + b'[' * 20000 + b']' * 20000 + b'}'),
            ('application/json', b'{"question":"hi","pages":' + b'[' * 30000 + b']' * 30000 + b'}'),
            ('application/json', b'[' * 60000),
        ]
        for ctype, body in cases:
            r = b.query(body=body, content_type=ctype)
            self.assertEqual(r.status, 400, f'{ctype} {body!r}: {r!r}')
            self.assertError(r, 'invalid_input')
        s = self.peek(d)
        # No claim happened (a claim would have produced a finished query).
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']), ('idle', 0, None))

    def test_invalid_join_bodies(self):
        d = self.daemon()
        b = d.browser()
        cases = [
            ('application/json', b'{"x":1}'),
            ('application/json', b'[]'),
            ('application/json', b'{'),
            ('application/json', b'{} x'),
            ('application/json', b'\xff'),
            ('text/plain', b'{}'),
        ]
        for ctype, body in cases:
            r = b.join(body=body, content_type=ctype)
            self.assertEqual(r.status, 400, f'{ctype} {body!r}: {r!r}')
            self.assertError(r, 'invalid_input')
        self.assertEqual(self.queue_length(d), 0)
        r = b.join(body=b'{}')
        self.assertStatus(r, 201)
        r = d.browser().join()
        self.assertStatus(r, 201)
        r = d.browser().join(body=b'{}', content_type='application/json; charset=utf-8')
        self.assertStatus(r, 201)
        self.assertEqual(self.queue_length(d), 3)

    # -- a stop answers a connection whose request is still on its way ---------

    def test_stop_answers_request_arriving_after_sigterm(self):
        """A connection accepted before SIGTERM whose request comes 300 ms
        later is answered (with Connection: close), not closed unanswered:
        under socket activation a restart must lose no request."""
        d = self.daemon()
        with socket.create_connection(('127.0.0.1', d.port), timeout=5) as s:
            # Let the daemon accept it: a first request on another connection
            # runs the loop past the accept.
            self.assertStatus(d.browser().status(), 200)
            time.sleep(0.2)
            d.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            self.assertIsNone(d.proc.poll(), 'the daemon exited with a connection it had accepted')
            s.sendall(b'GET /api/v1/health HTTP/1.1\r\nHost: %s\r\n\r\n' % d.host.encode())
            r = harness.read_response(s, 'GET', 5)
        self.assertStatus(r, 200)
        self.assertEqual(r.headers.get('Connection', '').lower(), 'close')
        # And it still exits promptly: nothing else to wait for.
        t0 = time.monotonic()
        self.assertEqual(d.wait_exit(5), 0)
        self.assertLess(time.monotonic() - t0, 2.5)

    # -- order of checks: origin -> size -> validation -> admission -------------

    def test_order_origin_before_size(self):
        d = self.daemon(WIKI_WEB_MAX_REQUEST_BYTES=1024)
        with socket.create_connection(('127.0.0.1', d.port), timeout=5) as s:
            s.sendall(b'POST /api/v1/query HTTP/1.1\r\nHost: %s\r\nOrigin: http://evil.example\r\n'
                      b'Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n'
                      % d.host.encode())
            r = harness.read_response(s, 'POST', 3)
        d.check_response(r)
        self.assertError(r, 'origin_denied')
        r = d.browser(origin='http://evil.example').query(body='{' + ' ' * 2000)
        self.assertError(r, 'origin_denied')

    def test_order_size_before_validation(self):
        d = self.daemon(WIKI_WEB_MAX_REQUEST_BYTES=1024)
        b = d.browser()
        r = b.query(body=b'\xff{' + b' ' * 2000, content_type='text/plain')
        self.assertError(r, 'request_too_large')

    def test_order_validation_before_admission(self):
        d = self.daemon(WIKI_WEB_MAX_REQUEST_BYTES=1024)
        holder, other = d.browser(), d.browser()
        self.assertStatus(holder.join(), 201)
        before = holder.status().json['ticket']
        # Busy for `other`, but its invalid body is rejected first.
        r = other.query(body='{"question":')
        self.assertError(r, 'invalid_input')
        r = other.query(body={'question': 'x' * 2000})
        self.assertError(r, 'request_too_large')
        r = other.query()
        self.assertError(r, 'busy')
        r = other.status()
        self.assertIsNone(r.json['ticket'])
        s = holder.status().json
        self.assertEqual(s['state'], 'reserved')
        self.assertEqual(s['queue_length'], 1)
        self.assertEqual(s['ticket']['id'], before['id'])
        self.assertEqual(s['ticket']['reservation_expires_at'], before['reservation_expires_at'])
        # The holder's own invalid or oversize body does not consume its reservation.
        r = holder.query(body='{"question":"hi","x":1}')
        self.assertError(r, 'invalid_input')
        r = holder.query(body={'question': 'x' * 2000})
        self.assertError(r, 'request_too_large')
        s = holder.status().json
        self.assertEqual((s['state'], s['ticket']['status']), ('reserved', 'reserved'))


if __name__ == '__main__':
    harness.main()
