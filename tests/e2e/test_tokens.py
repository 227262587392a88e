#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md "Access tokens": a person named by the trusted proxy makes
personal access tokens, and "Authorization: Bearer" acts as them from any
address; a wrong, expired or revoked token is 401 invalid_token, never an
anonymous session, and an address past its refusals is rate_limited.

The daemon trusts 127.0.0.2 as its proxy; the token's requests come from
127.0.0.3 and 127.0.0.4, which are no proxies. The token never appears in
the daemon's log (Daemon.secrets, checked at the stop) nor in any response
but the one that made it.

All traffic goes to loopback addresses only."""

import os
import re
import sqlite3

import harness
from test_identity import PROXY, USER, refused, request

API = harness.API
CLIENT = '127.0.0.3'
CHALLENGE = 'Bearer realm="wikiweb", error="invalid_token"'
TOKEN_RE = re.compile(r'^wwp_[A-Za-z0-9_-]{43}$')
ID_RE = re.compile(r'^tk_[0-9a-f]{32}$')


def bearer(token):
    return ('Authorization', 'Bearer ' + token)


class Tokens(harness.DaemonTestCase):

    def token_daemon(self, **env):
        return self.daemon(metrics=True, WIKI_WEB_TRUSTED_PROXIES=PROXY + '/32', **env)

    def create(self, d, user='alice', body=None):
        r = request(d, 'POST', API + '/tokens', [(USER, user)],
                    body=harness.json.dumps(body if body is not None else {'name': 'laptop'}))
        if r.status == 201:
            d.secrets.add(r.json['token'])
        return r

    def assertInvalidToken(self, r):
        self.assertStatus(r, 401)
        self.assertError(r, 'invalid_token')
        self.assertEqual(r.header('WWW-Authenticate'), CHALLENGE)
        self.assertEqual(r.set_cookies(), [], repr(r))

    def test_create_list_use_revoke(self):
        d = self.token_daemon()
        r = self.create(d, body={'name': 'Claude Desktop', 'expires_in_days': 30})
        self.assertStatus(r, 201)
        t = r.json
        self.assertEqual(set(t), {'id', 'token', 'name', 'created_at', 'expires_at'})
        self.assertRegex(t['token'], TOKEN_RE)
        self.assertRegex(t['id'], ID_RE)
        self.assertEqual(t['name'], 'Claude Desktop')
        life = harness.parse_time(t['expires_at']) - harness.parse_time(t['created_at'])
        self.assertAlmostEqual(life, 30 * 86400, delta=1)
        token = t['token']

        # Used from an address that is no proxy: the person, no cookie.
        r = request(d, 'GET', API + '/queue/status', [bearer(token)], source=CLIENT)
        self.assertStatus(r, 200)
        self.assertEqual(r.json['user'], 'alice')
        self.assertEqual(r.set_cookies(), [])
        # The scheme's name in any case (RFC 9110 11.1).
        r = request(d, 'GET', API + '/history', [('Authorization', 'bearer ' + token)], source=CLIENT)
        self.assertStatus(r, 200)

        # A question asked with the token is the person's: in the history
        # their browser reads (execution is not configured here, so it
        # fails, recorded).
        r = request(d, 'POST', API + '/query', [bearer(token)], source=CLIENT,
                    body='{"question": "What is an apple?"}')
        qid = r.header('Wikiweb-Query-Id')
        self.assertRegex(qid or '', r'^qr_[0-9a-f]{32}$')
        r = request(d, 'GET', API + '/history', [(USER, 'alice')])
        self.assertEqual([i['id'] for i in r.json['items']], [qid])
        self.assertEqual(request(d, 'GET', API + '/history', [(USER, 'bob')]).json['items'], [])

        # Listed without the secret; its last use noted.
        r = request(d, 'GET', API + '/tokens', [(USER, 'alice')])
        self.assertStatus(r, 200)
        self.assertEqual(set(r.json), {'tokens', 'max_days'})
        self.assertEqual(r.json['max_days'], 90)
        [listed] = r.json['tokens']
        self.assertEqual(set(listed), {'id', 'name', 'created_at', 'expires_at', 'last_used_at', 'expired'})
        self.assertEqual(listed['id'], t['id'])
        self.assertIsNotNone(listed['last_used_at'])
        self.assertFalse(listed['expired'])
        # Bob sees none of Alice's, and cannot revoke hers.
        r = request(d, 'GET', API + '/tokens', [(USER, 'bob')])
        self.assertEqual(r.json['tokens'], [])
        r = request(d, 'DELETE', API + '/tokens/' + t['id'], [(USER, 'bob')])
        self.assertStatus(r, 404)
        self.assertError(r, 'not_found')

        # A request carrying a token lists, never creates.
        r = request(d, 'GET', API + '/tokens', [bearer(token)], source=CLIENT)
        self.assertEqual(len(r.json['tokens']), 1)
        r = request(d, 'POST', API + '/tokens', [bearer(token)], source=CLIENT, body='{"name": "more"}')
        self.assertStatus(r, 403)
        self.assertError(r, 'origin_denied')
        r = request(d, 'POST', API + '/tokens', [bearer(token), (USER, 'alice')], body='{"name": "more"}')
        self.assertStatus(r, 403)
        # Beside the proxy's header, the token must name the same person.
        r = request(d, 'GET', API + '/queue/status', [bearer(token), (USER, 'bob')])
        self.assertStatus(r, 403)
        self.assertError(r, 'origin_denied')
        r = request(d, 'GET', API + '/queue/status', [bearer(token), (USER, 'alice')])
        self.assertEqual(r.json['user'], 'alice')
        # Anonymous and spoofed callers get nothing.
        r = request(d, 'POST', API + '/tokens', [(USER, 'alice')], source=CLIENT, body='{"name": "x"}')
        self.assertStatus(r, 403)

        # Expired: refused as a wrong one.
        r2 = self.create(d, body={'name': 'short'})
        db = sqlite3.connect(os.path.join(d.env['WIKI_WEB_STATE_DIRECTORY'], 'history.sqlite3'), timeout=10)
        with db:
            db.execute('UPDATE tokens SET expires_at = 1000000 WHERE id = ?', (r2.json['id'],))
        db.close()
        self.assertInvalidToken(request(d, 'GET', API + '/queue/status', [bearer(r2.json['token'])],
                                        source=CLIENT))
        r = request(d, 'GET', API + '/tokens', [(USER, 'alice')])
        self.assertEqual([x['expired'] for x in r.json['tokens']], [False, True])

        # Revoked: 204, then refused, then gone.
        r = request(d, 'DELETE', API + '/tokens/' + t['id'], [(USER, 'alice')])
        self.assertStatus(r, 204)
        self.assertInvalidToken(request(d, 'GET', API + '/queue/status', [bearer(token)], source=CLIENT))
        r = request(d, 'DELETE', API + '/tokens/' + t['id'], [(USER, 'alice')])
        self.assertStatus(r, 404)

        # Unknown, malformed, empty: the same 401, on /mcp too.
        for bad in ('wwp_' + 'A' * 43, 'wwp_short', token + 'x', 'sh_' + '0' * 64, ''):
            self.assertInvalidToken(request(d, 'GET', API + '/queue/status', [bearer(bad)], source=CLIENT))
        self.assertInvalidToken(request(d, 'POST', '/mcp', [bearer('wwp_' + 'B' * 43)], source=CLIENT,
                                        body='{}'))
        # Another scheme (a proxy's own Basic) is no token.
        r = request(d, 'GET', API + '/queue/status', [('Authorization', 'Basic YWxpY2U6eA=='), (USER, 'alice')])
        self.assertEqual(r.json['user'], 'alice')
        r = request(d, 'GET', API + '/queue/status', [bearer(token), bearer(token)], source=CLIENT)
        self.assertStatus(r, 400)
        self.assertGreaterEqual(refused(d)['token'], 8)

        # Nothing of a token in the log: Daemon.secrets, at the stop.
        self.assertNotIn(token, d.log())

    def test_hostile_bodies(self):
        d = self.token_daemon(WIKI_WEB_TOKEN_MAX_DAYS=7)
        for body in ({}, {'name': ''}, {'name': ' lead'}, {'name': 'x' * 65}, {'name': 'a\tb'},
                     {'name': 'a\u0085b'}, {'name': 7}, {'name': None}, {'name': 'a', 'other': 1},
                     {'name': 'a', 'expires_in_days': 0}, {'name': 'a', 'expires_in_days': 8},
                     {'name': 'a', 'expires_in_days': 3651}, {'name': 'a', 'expires_in_days': '3'},
                     {'name': 'a', 'expires_in_days': 3.0}, {'name': 'a', 'expires_in_days': 2 ** 70},
                     [], 'x'):
            r = self.create(d, body=body)
            self.assertStatus(r, 400)
            self.assertError(r, 'invalid_input')
        r = self.create(d, body={'name': 'ü' * 64})
        self.assertStatus(r, 201)
        life = harness.parse_time(r.json['expires_at']) - harness.parse_time(r.json['created_at'])
        self.assertAlmostEqual(life, 7 * 86400, delta=1)
        # At most 50 a person.
        for i in range(49):
            self.assertStatus(self.create(d, body={'name': f't{i}'}), 201)
        r = self.create(d, body={'name': 'one too many'})
        self.assertStatus(r, 400)
        self.assertStatus(self.create(d, user='bob'), 201)

    def test_failures_rate_limited(self):
        d = self.token_daemon()
        good = self.create(d).json['token']
        wrong = bearer('wwp_' + 'C' * 43)
        for _ in range(10):
            self.assertInvalidToken(request(d, 'GET', API + '/queue/status', [wrong], source='127.0.0.4'))
        for headers in ([wrong], [bearer(good)]):
            r = request(d, 'GET', API + '/queue/status', headers, source='127.0.0.4')
            self.assertStatus(r, 429)
            self.assertError(r, 'rate_limited')
            self.assertRegex(r.header('Retry-After'), r'^[1-9][0-9]*$')
            self.assertLessEqual(int(r.header('Retry-After')), 60)
        self.assertEqual(refused(d)['token_rate_limited'], 2)
        # Another address is not held back.
        r = request(d, 'GET', API + '/queue/status', [bearer(good)], source=CLIENT)
        self.assertEqual(r.json['user'], 'alice')

    def test_no_tokens_without_proxies(self):
        d = self.daemon()
        r = request(d, 'POST', API + '/tokens', [(USER, 'alice')], source='127.0.0.1', body='{"name": "x"}')
        self.assertStatus(r, 403)
        self.assertError(r, 'origin_denied')
        self.assertIn('WIKI_WEB_TRUSTED_PROXIES', r.json['error']['message'])
        self.assertInvalidToken(request(d, 'GET', API + '/queue/status', [bearer('wwp_' + 'D' * 43)],
                                        source='127.0.0.1'))


if __name__ == '__main__':
    harness.main()
