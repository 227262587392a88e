#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md section 4: the origin policy and CORS."""

import http.client
import json
import subprocess

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
        d = self.daemon(WIKI_WEB_ALLOWED_HOSTS='wiki.example,other.example')
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



def own_address():
    """A non-loopback address of one of this machine's interfaces, or None."""
    try:
        out = subprocess.run(['ip', '-o', 'addr', 'show'], capture_output=True, text=True, timeout=5).stdout
    except OSError:
        return None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] in ('inet', 'inet6'):
            a = parts[3].split('/')[0]
            if not a.startswith('127.') and a != '::1' and not a.startswith('fe80'):
                return a if parts[2] == 'inet' else f'[{a}]'
    return None


def page(d, path, headers):
    """GET a file of the web page (its answers are not the API's JSON):
    (status, the JSON error or None)."""
    conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=10)
    try:
        conn.putrequest('GET', path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
        error = json.loads(body)['error'] if r.getheader('Content-Type', '').startswith('application/json') else None
        return r.status, error
    finally:
        conn.close()


class Rebinding(harness.DaemonTestCase):
    """API.md 4, "Host": a page on a name its owner makes resolve to the
    daemon's address sends that name in Host, and Origin to match. Every
    path refuses it before anything is done; the daemon's own names work."""

    EVIL = 'evil.example.com'

    def assertRefused(self, r):
        self.assertEqual(r.status, 403, r)
        self.assertError(r, 'origin_denied')
        self.assertEqual(r.json['error']['message'], 'Host not allowed', r)
        self.assertEqual(r.set_cookies(), [], 'a refused Host gets no session')
        self.assertIsNone(r.header('Access-Control-Allow-Origin'))
        self.assertIsNone(r.header('Wikiweb-Query-Id'))

    def rebound(self, d):
        host = f'{self.EVIL}:{d.port}'
        return {'Host': host, 'Origin': f'http://{host}', 'Sec-Fetch-Site': 'same-origin'}

    def test_rebinding_is_refused_everywhere(self):
        d = self.daemon()
        holder = d.browser()
        r = holder.query()
        self.assertError(r, 'execution_failed')
        record = r.header('Wikiweb-Query-Id')
        self.assertStatus(holder.join(), 201)
        h = self.rebound(d)
        for name, r in (('join', d.browser().join(headers=h)),
                        ('query', d.browser().query(headers=h)),
                        ('history', holder.get(API + '/history', headers=h)),
                        ('history item', holder.get(API + f'/history/{record}', headers=h)),
                        ('status', holder.status(headers=h)),
                        ('leave', holder.leave(headers=h)),
                        ('health', d.browser().get(API + '/health', headers=h)),
                        ('mcp', d.browser().post('/mcp', body={}, headers=h)),
                        ('unknown', d.browser().get('/no/such/path', headers=h)),
                        ('preflight', d.browser().request('OPTIONS', API + '/queue/join', headers=h))):
            with self.subTest(name):
                self.assertRefused(r)
        for path in ('/', '/app.js', '/style.css'):
            self.assertEqual(page(d, path, h), (403, {'code': 'origin_denied', 'message': 'Host not allowed'}))
        self.assertEqual(page(d, '/', {'Host': d.host}), (200, None))
        # Without Origin (a same-origin GET sends none) just the same.
        self.assertRefused(holder.get(API + '/history', headers={'Host': self.EVIL}))
        # Nothing changed: the holder's ticket and record are still there.
        s = holder.status().json
        self.assertEqual((s['state'], s['queue_length']), ('reserved', 1))
        self.assertEqual([i['id'] for i in holder.get(API + '/history').json['items']], [record])
        self.assertIn('Host is no name of this daemon', d.log())

    def test_hostile_hosts(self):
        d = self.daemon(WIKI_WEB_ALLOWED_HOSTS='wiki.example.com,*.corp.example')
        for host in ('127.0.0.1.evil.example', 'localhost.evil.example', 'corp.example', 'a.b.corp.example',
                     'wiki.example.com.evil.example', '127.1', '0x7f.0.0.1', '2130706433', '192.0.2.1',
                     f'localhost:{d.port}:1', 'localhost:99999', '[::1%25lo]', 'user@localhost',
                     'localhost/x', 'l%6fcalhost', '', ' '):
            with self.subTest(host=host):
                self.assertRefused(d.browser().get(API + '/queue/status', headers={'Host': host}))

    def test_own_names_still_work(self):
        d = self.daemon(WIKI_WEB_ALLOWED_HOSTS='wiki.example.com,*.corp.example',
                        WIKI_WEB_ALLOWED_ORIGINS='https://portal.example.org')
        hosts = [d.host, f'localhost:{d.port}', 'LocalHost', f'[::1]:{d.port}', '127.0.0.7',
                 f'0.0.0.0:{d.port}', f'[::ffff:127.0.0.1]:{d.port}', 'wiki.example.com', 'Wiki.Example.Com.:443',
                 f'a.corp.example:{d.port}', 'portal.example.org']
        a = own_address()
        if a:
            hosts.append(f'{a}:{d.port}')
        for host in hosts:
            with self.subTest(host=host):
                b = d.browser(origin=f'http://{host}')
                self.assertStatus(b.status(headers={'Host': host}), 200)
                self.assertStatus(b.join(headers={'Host': host}), 201)
                self.assertStatus(b.leave(headers={'Host': host}), 204)
                self.assertEqual(page(d, '/', {'Host': host}), (200, None))
        # The origin policy's own origin comes from the accepted Host alone.
        r = d.browser().join(headers={'Host': 'wiki.example.com', 'Origin': f'http://{self.EVIL}'})
        self.assertError(r, 'origin_denied')
        self.assertEqual(r.json['error']['message'], 'Origin denied by policy')


if __name__ == '__main__':
    harness.main()
