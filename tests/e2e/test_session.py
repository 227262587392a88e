#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md section 3: the session cookie.

The harness remembers every token it saw or sent and fails a test when one
appears in a response body, a non-Set-Cookie header, or the daemon's log
(which runs at debug level, WIKI_WEB_LOG_LEVEL=7)."""

import secrets

import harness
from harness import API, check_set_cookie


def new_token():
    return secrets.token_urlsafe(32)  # 43 base64url characters


class Session(harness.DaemonTestCase):

    def test_fresh_cookie_attributes_insecure(self):
        d = self.daemon(WIKI_WEB_COOKIE_SECURE='false')
        r = d.browser().status()
        self.assertEqual(len(r.set_cookies()), 1, r)
        check_set_cookie(self, r.set_cookies()[0], secure=False)

    def test_fresh_cookie_attributes_secure_by_default(self):
        d = self.daemon(WIKI_WEB_COOKIE_SECURE=None)
        r = d.browser().status()
        self.assertEqual(len(r.set_cookies()), 1, r)
        check_set_cookie(self, r.set_cookies()[0], secure=True)
        d2 = self.daemon(WIKI_WEB_COOKIE_SECURE='true')
        r = d2.browser().join()
        self.assertStatus(r, 201)
        check_set_cookie(self, r.set_cookies()[0], secure=True)

    def test_max_age_setting(self):
        d = self.daemon(WIKI_WEB_SESSION_MAX_AGE_SECONDS=120)
        r = d.browser().status()
        check_set_cookie(self, r.set_cookies()[0], secure=False, max_age=120)

    def test_every_endpoint_issues_a_session(self):
        d = self.daemon()
        for call in (lambda b: b.get(API + '/health'), lambda b: b.status(), lambda b: b.join(),
                     lambda b: b.leave(), lambda b: b.query()):
            b = d.browser()
            r = call(b)
            self.assertEqual(len(r.set_cookies()), 1, r)
            check_set_cookie(self, r.set_cookies()[0], secure=False)
            if r.status == 500:
                self.wait_state(d, 'idle')
            if r.status == 201:
                self.assertStatus(b.leave(), 204)

    def test_tokens_are_fresh(self):
        d = self.daemon()
        seen = set()
        for _ in range(30):
            r = d.browser().status()
            seen.add(check_set_cookie(self, r.set_cookies()[0], secure=False))
        self.assertEqual(len(seen), 30)

    def test_well_formed_cookie_is_kept(self):
        d = self.daemon()
        tok = new_token()
        b = d.browser(cookie=tok)
        r = b.join()
        self.assertStatus(r, 201)
        self.assertEqual(r.set_cookies(), [])
        tid = r.json['ticket']['id']
        # Another browser with the same token is the same session.
        twin = d.browser(cookie=tok)
        r = twin.status()
        self.assertEqual(r.set_cookies(), [])
        self.assertEqual(r.json['ticket']['id'], tid)
        self.assertStatus(twin.join(), 200)

    def test_cookie_among_other_cookies(self):
        d = self.daemon()
        tok = new_token()
        b = d.browser(cookie=tok)
        self.assertStatus(b.join(), 201)
        for header in (f'a=1; wikiweb_session={tok}; b=2', f'other=x;wikiweb_session={tok}',
                       f'wikiweb_session={tok}; theme=dark'):
            r = b.status(send_cookie=False, headers={'Cookie': header})
            self.assertEqual(r.set_cookies(), [], header)
            self.assertIsNotNone(r.json['ticket'], header)

    def test_malformed_cookie_gets_fresh_session(self):
        d = self.daemon()
        good = new_token()
        for bad in ['', 'x', good[:42], good + 'A', good[:42] + '+', good[:42] + '/',
                    good[:42] + '=', good[:42] + '.', good[:41] + '==', good[:42] + '\u00e9']:
            b = d.browser()
            r = b.status(headers={'Cookie': f'wikiweb_session={bad}'})
            self.assertStatus(r, 200)
            self.assertEqual(len(r.set_cookies()), 1, f'{bad!r}: {r!r}')
            tok = check_set_cookie(self, r.set_cookies()[0], secure=False)
            self.assertNotEqual(tok, bad)

    def test_malformed_cookie_does_not_reach_a_session(self):
        """A malformed value never selects an existing session, even one
        that looks like the well-formed token plus junk."""
        d = self.daemon()
        tok = new_token()
        b = d.browser(cookie=tok)
        self.assertStatus(b.join(), 201)
        for bad in (tok + 'A', tok[:42], tok + ' x'):
            r = b.status(send_cookie=False, headers={'Cookie': f'wikiweb_session={bad}'})
            self.assertIsNone(r.json['ticket'], bad)
            self.assertEqual(len(r.set_cookies()), 1)

    def test_token_never_in_body_or_log(self):
        d = self.daemon(WIKI_WEB_LOG_LEVEL=7)
        users = [d.browser() for _ in range(3)] + [d.browser(cookie=new_token())]
        for u in users:
            u.join()
            u.status()
        users[1].query()
        users[0].query()
        users[2].leave()
        users[2].leave()
        d.browser(origin='http://evil.example', cookie=new_token()).join()
        d.browser(cookie=new_token()).post(API + '/query', body='{"question": 1}')
        d.browser(cookie=new_token()).get('/nope')
        d.stop()  # checks the log for every token seen


if __name__ == '__main__':
    harness.main()
