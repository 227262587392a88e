#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md section 4: the origin policy and CORS."""

import harness
from harness import API

ALLOWED = 'http://app.example:8080, https://other.example'


def tokens(value):
    return [t.strip() for t in (value or '').split(',') if t.strip()]


class Origin(harness.DaemonTestCase):

    def assertCors(self, r, origin):
        self.assertEqual(r.header('Access-Control-Allow-Origin'), origin, r)
        self.assertEqual(r.header('Access-Control-Allow-Credentials'), 'true', r)
        vary = [t.lower() for v in r.header_all('Vary') for t in tokens(v)]
        self.assertIn('origin', vary, r)

    def assertUnchanged(self, d, state='idle', length=0):
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['average_query_seconds']),
                         (state, length, None))

    def test_allowed_origins_get_cors(self):
        d = self.daemon(WIKI_WEB_ALLOWED_ORIGINS=ALLOWED)
        for origin in ('http://app.example:8080', 'https://other.example'):
            b = d.browser(origin=origin)
            r = b.join()
            self.assertStatus(r, 201)
            self.assertCors(r, origin)
            r = b.status()
            self.assertStatus(r, 200)
            self.assertCors(r, origin)
            self.assertStatus(b.leave(), 204)
            self.assertCors(b.last, origin)
            # Errors carry CORS too, so the page can read them.
            r = b.leave()
            self.assertError(r, 'ticket_not_found')
            self.assertCors(r, origin)
        b = d.browser(origin='http://app.example:8080')
        r = b.query()
        self.assertError(r, 'execution_failed')
        self.assertCors(r, 'http://app.example:8080')

    def test_same_origin_plain_http(self):
        d = self.daemon(WIKI_WEB_COOKIE_SECURE='false')
        r = d.browser(origin=f'http://{d.host}').join()
        self.assertStatus(r, 201)
        r = d.browser(origin=f'https://{d.host}').join()
        self.assertError(r, 'origin_denied')
        self.assertEqual(r.set_cookies(), [])
        self.assertUnchanged(d, 'reserved', 1)

    def test_same_origin_https_when_cookie_secure(self):
        d = self.daemon(WIKI_WEB_COOKIE_SECURE='true')
        r = d.browser(origin=f'https://{d.host}').join()
        self.assertStatus(r, 201)
        r = d.browser(origin=f'http://{d.host}').join()
        self.assertError(r, 'origin_denied')
        self.assertUnchanged(d, 'reserved', 1)

    def test_same_origin_follows_host_header(self):
        d = self.daemon()
        b = d.browser(origin='http://wiki.example')
        r = b.join(headers={'Host': 'wiki.example'})
        self.assertStatus(r, 201)
        r = b.status(headers={'Host': 'other.example'})
        self.assertError(r, 'origin_denied')

    def test_denied_origins(self):
        d = self.daemon(WIKI_WEB_ALLOWED_ORIGINS=ALLOWED)
        denied = ['null', 'http://evil.example', 'http://app.example', 'https://app.example:8080',
                  'http://app.example:8081', 'http://app.example:8080.evil.example',
                  'http://evil.example/http://app.example:8080', 'http://app.example:80800',
                  'http://other.example', 'https://other.example:443x', 'http://127.0.0.1',
                  f'https://{d.host}', 'file://', '']
        for origin in denied:
            for call in ('join', 'status', 'leave', 'query'):
                b = d.browser(origin=origin)
                r = getattr(b, call)(origin=origin)
                self.assertEqual(r.status, 403, f'{call} Origin: {origin!r}: {r!r}')
                self.assertError(r, 'origin_denied')
                self.assertEqual(r.set_cookies(), [], f'{origin!r}: a denied request gets no session')
                self.assertNotEqual(r.header('Access-Control-Allow-Origin'), origin)
        self.assertUnchanged(d)

    def test_denied_request_changes_nothing(self):
        d = self.daemon()
        evil = 'http://evil.example'
        holder = d.browser()
        self.assertStatus(holder.join(), 201)
        before = holder.status().json['ticket']
        # The holder's own cookie, from a foreign page: no leave, no claim.
        r = holder.leave(origin=evil)
        self.assertError(r, 'origin_denied')
        r = holder.query(origin=evil)
        self.assertError(r, 'origin_denied')
        r = holder.join(origin=evil)
        self.assertError(r, 'origin_denied')
        self.assertEqual(r.set_cookies(), [])
        after = holder.status().json
        self.assertEqual(after['ticket'], dict(before, heartbeat_expires_at=after['ticket']['heartbeat_expires_at']))
        self.assertEqual((after['state'], after['queue_length'], after['average_query_seconds']),
                         ('reserved', 1, None))
        # While idle, a foreign query claims nothing either.
        self.assertStatus(holder.leave(), 204)
        r = d.browser().query(origin=evil)
        self.assertError(r, 'origin_denied')
        self.assertIsNone(r.header('Wikiweb-Query-Id'))
        self.assertUnchanged(d)

    def test_sec_fetch_site_without_origin(self):
        d = self.daemon()
        b = d.browser()
        for call in ('join', 'status', 'leave', 'query'):
            r = getattr(b, call)(headers={'Sec-Fetch-Site': 'cross-site'})
            self.assertError(r, 'origin_denied')
            self.assertEqual(r.set_cookies(), [])
        self.assertUnchanged(d)
        for site in ('same-origin', 'same-site', 'none'):
            b = d.browser()
            r = b.join(headers={'Sec-Fetch-Site': site})
            self.assertIn(r.status, (200, 201), f'{site}: {r!r}')
            self.assertStatus(b.leave(), 204)

    def test_listed_origin_with_cross_site_fetch(self):
        d = self.daemon(WIKI_WEB_ALLOWED_ORIGINS=ALLOWED)
        b = d.browser(origin='http://app.example:8080')
        r = b.join(headers={'Sec-Fetch-Site': 'cross-site'})
        self.assertStatus(r, 201)
        self.assertCors(r, 'http://app.example:8080')

    def test_preflight(self):
        d = self.daemon(WIKI_WEB_ALLOWED_ORIGINS=ALLOWED)
        origin = 'https://other.example'
        for path, method in [('/query', 'POST'), ('/queue/join', 'POST'), ('/queue/status', 'GET'),
                             ('/queue/ticket', 'DELETE'), ('/health', 'GET')]:
            b = d.browser(origin=origin)
            r = b.request('OPTIONS', API + path, headers={
                'Access-Control-Request-Method': method,
                'Access-Control-Request-Headers': 'content-type'})
            self.assertStatus(r, 204)
            self.assertEqual(r.body, b'')
            self.assertIn(method, [m.upper() for m in tokens(r.header('Access-Control-Allow-Methods'))], r)
            self.assertEqual([h.lower() for h in tokens(r.header('Access-Control-Allow-Headers'))],
                             ['content-type'], r)
            self.assertEqual(r.header('Access-Control-Max-Age'), '600', r)
            self.assertCors(r, origin)
        self.assertUnchanged(d)

    def test_preflight_denied(self):
        d = self.daemon(WIKI_WEB_ALLOWED_ORIGINS=ALLOWED)
        for origin in ('http://evil.example', 'null'):
            r = d.browser(origin=origin).request('OPTIONS', API + '/query', headers={
                'Access-Control-Request-Method': 'POST',
                'Access-Control-Request-Headers': 'content-type'})
            self.assertError(r, 'origin_denied')
            self.assertIsNone(r.header('Access-Control-Allow-Methods'), r)


if __name__ == '__main__':
    harness.main()
