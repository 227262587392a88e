#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md "Identity": who is asking, from a trusted reverse proxy's header,
fail-closed.

The daemon listens on 127.0.0.1 with WIKI_WEB_TRUSTED_PROXIES naming
another loopback address (127.0.0.2/32), and the client binds its socket
to the source address a case needs: 127.0.0.2 is the trusted proxy,
127.0.0.1 and 127.0.0.3 are not. Every spoofing attempt must be refused
and counted in wikiweb_identity_refused_total{reason} on the metrics
socket; the user header's value never reaches the log.

All traffic goes to loopback addresses only."""

import http.client
import re
import socket
import subprocess
import threading
import time

import harness

API = harness.API
PROXY = '127.0.0.2'
USER = 'X-Remote-User'


def request(d, method, path, headers=(), source=PROXY, body=None, cookie=None):
    """One request on a connection of its own from `source`, the headers
    exactly as given (a list of (name, value) pairs: repeated names and any
    bytes are sent as they are). Returns the checked harness.Response."""
    lines = [f'{method} {path} HTTP/1.1'.encode(), f'Host: {d.host}'.encode(), b'Connection: close']
    for k, v in headers:
        k = k.encode() if isinstance(k, str) else k
        v = v.encode() if isinstance(v, str) else v
        lines.append(k + b': ' + v)
    if cookie:
        lines.append(f'Cookie: {harness.COOKIE_NAME}={cookie}'.encode())
    if body is not None:
        body = body.encode() if isinstance(body, str) else body
        lines.append(b'Content-Type: application/json')
        lines.append(b'Content-Length: %d' % len(body))
    data = b'\r\n'.join(lines) + b'\r\n\r\n' + (body or b'')
    family = socket.AF_INET6 if ':' in d.listen_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.bind((source, 0))
        s.connect((d.listen_host, d.port))
        s.sendall(data)
        r = harness.read_response(s, method, 10)
    d.check_response(r, method)
    return r


def cookie_of(r):
    for c in r.set_cookies():
        name, _, rest = c.partition('=')
        if name.strip() == harness.COOKIE_NAME:
            return rest.split(';', 1)[0].strip()
    return None


def refused(d):
    """{reason: count} of wikiweb_identity_refused_total."""
    conn = http.client.HTTPConnection('127.0.0.1', d.metrics_port, timeout=10)
    try:
        conn.request('GET', '/metrics')
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r'^wikiweb_identity_refused_total\{reason="([a-z_]+)"\} (\d+)$', text, re.M)}


class Identity(harness.DaemonTestCase):

    def identity_daemon(self, proxies=PROXY + '/32', **env):
        return self.daemon(metrics=True, WIKI_WEB_TRUSTED_PROXIES=proxies, **env)

    def assertRefused(self, d, r, status, code, reason, before):
        """r was refused with status/code and counted once under reason."""
        self.assertStatus(r, status)
        self.assertError(r, code)
        self.assertEqual(r.set_cookies(), [], f'a refusal sets no cookie: {r!r}')
        after = refused(d)
        self.assertEqual(after[reason], before[reason] + 1, f'{reason} not counted: {before} -> {after}')
        return after

    # -- the spoofing suite ----------------------------------------------------

    def test_spoofing_suite(self):
        d = self.identity_daemon()
        c = refused(d)
        # 1. The header straight to the daemon from an untrusted address.
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source='127.0.0.1')
        c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)
        # 2. An empty value from the trusted proxy.
        r = request(d, 'GET', API + '/queue/status', [(USER, '')])
        c = self.assertRefused(d, r, 400, 'invalid_input', 'invalid', c)
        # 3. Sent twice, same value or not.
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice'), (USER, 'alice')])
        c = self.assertRefused(d, r, 400, 'invalid_input', 'repeated', c)
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice'), (USER, 'bob')])
        c = self.assertRefused(d, r, 400, 'invalid_input', 'repeated', c)
        # 4. The header name in another case is the same header (HTTP field
        #    names are case-insensitive): twice, and from an untrusted peer.
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice'), ('x-remote-user', 'bob')])
        c = self.assertRefused(d, r, 400, 'invalid_input', 'repeated', c)
        for name in ('x-remote-user', 'X-REMOTE-USER', 'x-ReMoTe-UsEr'):
            r = request(d, 'GET', API + '/queue/status', [(name, 'alice')], source='127.0.0.1')
            c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)
        # 5. A CR, an LF, a NUL, other control characters, DEL, C1.
        for bad in (b'ali\rce', b'ali\x00ce', b'ali\x01ce', b'ali\x7fce', b'ali\tce', b'ali\xc2\x85ce'):
            r = request(d, 'GET', API + '/queue/status', [(USER, bad)])
            c = self.assertRefused(d, r, 400, 'invalid_input', 'invalid', c)
        # A line end in the value ends the field: a second user header
        #    smuggled after it is the header sent twice.
        for sep in (b'\n', b'\r\n'):
            r = request(d, 'GET', API + '/queue/status', [(USER, b'alice' + sep + b'X-Remote-User: bob')])
            c = self.assertRefused(d, r, 400, 'invalid_input', 'repeated', c)
        # 6. Invalid UTF-8: a lone continuation byte, an overlong form, a
        #    surrogate, a sequence cut short.
        for bad in (b'\xff', b'ali\x80ce', b'\xc0\xaf', b'\xed\xa0\x80', b'\xe6\x9d'):
            r = request(d, 'GET', API + '/queue/status', [(USER, bad)])
            c = self.assertRefused(d, r, 400, 'invalid_input', 'invalid', c)
        # 7. 257 bytes (256 are fine).
        r = request(d, 'GET', API + '/queue/status', [(USER, 'a' * 257)])
        c = self.assertRefused(d, r, 400, 'invalid_input', 'invalid', c)
        r = request(d, 'GET', API + '/queue/status', [(USER, 'a' * 256)])
        self.assertStatus(r, 200)
        self.assertEqual(r.json['user'], 'a' * 256)
        # UTF-8 is taken as it is.
        r = request(d, 'GET', API + '/queue/status', [(USER, 'Zoë 東京'.encode())])
        self.assertStatus(r, 200)
        self.assertEqual(r.json['user'], 'Zoë 東京')
        # 8. X-Forwarded-For or Forwarded naming the trusted address: the
        #    peer is the connection's own address.
        for fwd in (('X-Forwarded-For', PROXY), ('Forwarded', f'for={PROXY}'), ('X-Real-IP', PROXY)):
            r = request(d, 'GET', API + '/queue/status', [fwd, (USER, 'alice')], source='127.0.0.1')
            c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)
        # 9. Peers next to the trusted one (the /32's boundaries).
        for peer in ('127.0.0.1', '127.0.0.3'):
            r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source=peer)
            c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)
        # 10. The page and the health endpoint refuse a spoofed header too.
        for path in ('/', API + '/health'):
            r = request(d, 'GET', path, [(USER, 'alice')], source='127.0.0.3')
            c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)
        # 11. Without an identity: 403, except the health check.
        r = request(d, 'GET', API + '/queue/status', source='127.0.0.1')
        c = self.assertRefused(d, r, 403, 'origin_denied', 'missing', c)
        r = request(d, 'POST', API + '/queue/join', source=PROXY)
        c = self.assertRefused(d, r, 403, 'origin_denied', 'missing', c)
        r = request(d, 'GET', '/', source=PROXY)
        c = self.assertRefused(d, r, 403, 'origin_denied', 'missing', c)
        r = request(d, 'GET', API + '/health', source='127.0.0.1')
        self.assertStatus(r, 200)
        # Nothing was believed: no ticket exists.
        r = request(d, 'GET', API + '/queue/status', [(USER, 'carol')])
        self.assertEqual(r.json['queue_length'], 0)
        # The header's values never reach the log; each untrusted address
        # was logged once (at most once a minute per address).
        log = d.log()
        self.assertNotIn('alice', log)
        self.assertNotIn('bob', log)
        self.assertEqual(log.count('from 127.0.0.1, which is not a trusted proxy'), 1, log)
        self.assertEqual(log.count('from 127.0.0.3, which is not a trusted proxy'), 1, log)
        self.assertNotIn('from 127.0.0.2,', log)

    def test_cookie_of_another_user(self):
        # 12. A cookie of user A presented with identity B is not B's
        #     session: B gets one of its own, A's is untouched.
        d = self.identity_daemon()
        c = refused(d)
        r = request(d, 'POST', API + '/queue/join', [(USER, 'alice')])
        self.assertStatus(r, 201)
        alice_cookie = cookie_of(r)
        self.assertRegex(alice_cookie, harness.TOKEN_RE)
        ticket = r.json['ticket']['id']
        self.assertEqual(refused(d), c, 'a first cookie is no refusal')

        r = request(d, 'GET', API + '/queue/status', [(USER, 'bob')], cookie=alice_cookie)
        c = self.assertRefused_cookie(d, r, c)
        self.assertIsNone(r.json['ticket'], 'bob sees alice\'s ticket through her cookie')
        self.assertEqual(r.json['user'], 'bob')
        bob_cookie = cookie_of(r)
        self.assertRegex(bob_cookie or '', harness.TOKEN_RE)
        self.assertNotEqual(bob_cookie, alice_cookie)
        # Bob's queue operations do not touch alice's ticket.
        r = request(d, 'DELETE', API + '/queue/ticket', [(USER, 'bob')], cookie=alice_cookie)
        self.assertError(r, 'ticket_not_found')
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], cookie=alice_cookie)
        self.assertEqual(r.json['ticket']['id'], ticket)
        self.assertEqual(r.set_cookies(), [], 'alice\'s own cookie is kept')
        # Alice's cookie without the header, from the proxy, with the
        # requirement off elsewhere, is no key either: see test_anonymous.

    def assertRefused_cookie(self, d, r, before):
        self.assertStatus(r, 200)
        after = refused(d)
        self.assertEqual(after['cookie'], before['cookie'] + 1, f'{before} -> {after}')
        return after

    def test_prefix_boundaries(self):
        # A /31: 127.0.0.2 and .3 are in it, .1 and .4 are not.
        d = self.identity_daemon(proxies='127.0.0.2/31')
        c = refused(d)
        for peer in ('127.0.0.2', '127.0.0.3'):
            r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source=peer)
            self.assertStatus(r, 200)
            self.assertEqual(r.json['user'], 'alice')
        for peer in ('127.0.0.1', '127.0.0.4'):
            r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source=peer)
            c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)

    def test_ipv6_entry_is_one_host(self):
        # 13. An IPv6 entry without a prefix is /128, not /32 (which would
        #     hold ::ffff:0:0/96, every IPv4 peer of a dual-stack socket).
        rc = subprocess.run([harness.WIKIWEBD, '--check-config'], capture_output=True, text=True,
                            env={'WIKI_WEB_TRUSTED_PROXIES': '::1', 'WIKI_WEB_STATE_DIRECTORY': '/nonexistent'})
        self.assertIn('WIKI_WEB_TRUSTED_PROXIES=::1/128\n', rc.stdout, rc)
        try:
            socket.create_server(('::1', 0), family=socket.AF_INET6).close()
        except OSError:
            harness.skip_or_fail('no IPv6 loopback')
        d = self.daemon(metrics=True, listen_host='::1', WIKI_WEB_TRUSTED_PROXIES='::1')
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source='::1')
        self.assertStatus(r, 200)
        self.assertEqual(r.json['user'], 'alice')
        d.stop()
        # The IPv4 proxy is not trusted through an IPv6 entry, nor an IPv6
        # peer through the IPv4-mapped form of an IPv4 entry.
        d = self.identity_daemon(proxies='::1')
        c = refused(d)
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source=PROXY)
        c = self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)
        d.stop()
        d = self.identity_daemon(proxies='::ffff:127.0.0.2')
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source=PROXY)
        self.assertStatus(r, 200)

    def test_wildcards_refused_at_start(self):
        # 14. A wildcard in the setting: the start is refused, naming it.
        for bad in ('*', '0.0.0.0/0', '::/0', '127.0.0.2,0.0.0.0/0', '::', '10.0.0.1/8', 'localhost',
                    '127.1', 'fe80::1%lo'):
            env = {'WIKI_WEB_TRUSTED_PROXIES': bad}
            rc = subprocess.run([harness.WIKIWEBD, '--check-config'], capture_output=True, text=True,
                                env=env, timeout=30)
            self.assertNotEqual(rc.returncode, 0, bad)
            self.assertIn('WIKI_WEB_TRUSTED_PROXIES', rc.stderr, bad)
            if bad in ('*', '0.0.0.0/0', '::/0', '::'):
                self.assertIn('wildcard', rc.stderr, bad)
        # And the daemon itself does not start.
        d = harness.Daemon(self, WIKI_WEB_TRUSTED_PROXIES='*')
        try:
            with self.assertRaises(AssertionError) as e:
                d.start(timeout=5)
            self.assertIn('WIKI_WEB_TRUSTED_PROXIES', str(e.exception))
        finally:
            d.discard()

    # -- who is asking ---------------------------------------------------------

    def test_one_person_one_place(self):
        d = self.identity_daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=60)
        # Someone else holds the slot so that tickets wait.
        r = request(d, 'POST', API + '/queue/join', [(USER, 'zed')])
        self.assertStatus(r, 201)
        # Alice on her laptop (no cookie yet) and her phone (another
        # session): one ticket.
        laptop = request(d, 'POST', API + '/queue/join', [(USER, 'alice')])
        self.assertStatus(laptop, 201)
        phone = request(d, 'POST', API + '/queue/join', [(USER, 'alice')])
        self.assertStatus(phone, 200)
        self.assertEqual(phone.json['ticket']['id'], laptop.json['ticket']['id'])
        self.assertEqual(phone.json['ticket']['position'], 1)
        self.assertEqual(phone.json['queue_length'], 2)
        self.assertEqual(phone.json['user'], 'alice')
        # Bob has his own place behind her.
        bob = request(d, 'POST', API + '/queue/join', [(USER, 'bob')])
        self.assertStatus(bob, 201)
        self.assertEqual(bob.json['ticket']['position'], 2)
        # Leaving from the phone leaves the laptop's place too: it is one.
        r = request(d, 'DELETE', API + '/queue/ticket', [(USER, 'alice')], cookie=cookie_of(phone))
        self.assertStatus(r, 204)
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], cookie=cookie_of(laptop))
        self.assertIsNone(r.json['ticket'])
        r = request(d, 'GET', API + '/queue/status', [(USER, 'bob')])
        self.assertEqual(r.json['ticket']['position'], 1)

    def test_one_running_query_per_person(self):
        d = self.identity_daemon(WIKI_WEB_TEST_FAULTS=1, WIKI_WEB_TEST_QUERY_DELAY_MS=2000)
        q = '{"question": "What is an apple?"}'
        done = {}
        t = threading.Thread(target=lambda: done.setdefault(
            'r', request(d, 'POST', API + '/query', [(USER, 'alice')], body=q)))
        t.start()
        try:
            deadline = time.monotonic() + 5
            while True:
                st = request(d, 'GET', API + '/queue/status', [(USER, 'alice')]).json
                if st['running_query'] or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            # Her second device sees her running query, and cannot start
            # another one while it runs.
            self.assertIsNotNone(st['running_query'], st)
            r = request(d, 'POST', API + '/query', [(USER, 'alice')], body=q)
            self.assertError(r, 'busy')
            # Bob sees no running query of his own.
            st = request(d, 'GET', API + '/queue/status', [(USER, 'bob')]).json
            self.assertIsNone(st['running_query'], st)
        finally:
            t.join(15)
        self.assertError(done['r'], 'execution_failed')

    def test_history_is_the_persons(self):
        # Query execution is not configured: every query fails with
        # execution_failed, and is recorded.
        d = self.identity_daemon()
        q = '{"question": "What is an apple?"}'
        r = request(d, 'POST', API + '/query', [(USER, 'alice')], body=q)
        self.assertError(r, 'execution_failed')
        alice_query = r.header('Wikiweb-Query-Id')
        r = request(d, 'POST', API + '/query', [(USER, 'bob')], body=q)
        bob_query = r.header('Wikiweb-Query-Id')
        # Alice on another device sees her record, not bob's.
        r = request(d, 'GET', API + '/history', [(USER, 'alice')])
        self.assertEqual([i['id'] for i in r.json['items']], [alice_query])
        r = request(d, 'GET', API + '/history/' + bob_query, [(USER, 'alice')])
        self.assertError(r, 'query_not_found')
        r = request(d, 'DELETE', API + '/history/' + bob_query, [(USER, 'alice')])
        self.assertError(r, 'query_not_found')
        r = request(d, 'GET', API + '/history', [(USER, 'bob')])
        self.assertEqual([i['id'] for i in r.json['items']], [bob_query])
        # The journal names the user of each query.
        log = d.log()
        self.assertRegex(log, f'Query {alice_query} asked by user alice')
        self.assertRegex(log, f'Query {bob_query} asked by user bob')
        # Across a restart too (the key is the person's, not the daemon's).
        d.restart()
        r = request(d, 'GET', API + '/history', [(USER, 'alice')])
        self.assertEqual([i['id'] for i in r.json['items']], [alice_query])

    def test_anonymous_when_not_required(self):
        d = self.identity_daemon(WIKI_WEB_REQUIRE_USER='false')
        r = request(d, 'POST', API + '/queue/join', [(USER, 'alice')])
        alice_cookie = cookie_of(r)
        # Without the header, from the proxy or elsewhere: an anonymous
        # session; alice's cookie there is a session of its own, not hers.
        r = request(d, 'GET', API + '/queue/status', source='127.0.0.1', cookie=alice_cookie)
        self.assertStatus(r, 200)
        self.assertIsNone(r.json['user'])
        self.assertIsNone(r.json['ticket'])
        r = request(d, 'GET', API + '/queue/status', source=PROXY)
        self.assertStatus(r, 200)
        self.assertIsNone(r.json['user'])
        # A spoofed header is still refused.
        c = refused(d)
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source='127.0.0.1')
        self.assertRefused(d, r, 403, 'origin_denied', 'untrusted_peer', c)

    def test_no_identity_without_proxies(self):
        # Without trusted proxies: today's behaviour exactly; the header
        # means nothing and is not refused.
        d = self.daemon(metrics=True)
        r = request(d, 'GET', API + '/queue/status', [(USER, 'alice')], source='127.0.0.1')
        self.assertStatus(r, 200)
        self.assertIsNone(r.json['user'])
        self.assertEqual(sum(refused(d).values()), 0)

    def test_streams_carry_the_user(self):
        d = self.identity_daemon()
        r = request(d, 'POST', API + '/queue/join', [(USER, 'alice')])
        s = harness.EventStream(d, API + '/queue/events', cookie=cookie_of(r), headers={USER: 'alice'},
                                source=PROXY)
        try:
            self.assertEqual(s.status, 200)
            ev = s.wait_for('status', timeout=10)
            self.assertEqual(harness.check_status_object(ev['data'])['user'], 'alice')
        finally:
            s.close()


if __name__ == '__main__':
    harness.main()
