#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 8.1: the MediaWiki client (src/query/wiki-client.c) against a real
MediaWiki 1.39 (tests/fixtures/mediawiki.py: Debian's code under `php -S` on
127.0.0.1, a generated dump) and against scripted loopback servers for what
a local wiki cannot do (Retry-After, maxlag, 401/403). Driven through
tests/tools/upstream/wikiweb-upstream-tool on a real sd-event loop.

Usage: test_wiki.py TOOL"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'fixtures'))
import mediawiki  # noqa: E402
import upstream_servers as us  # noqa: E402

TOOL = None
DATA = os.path.join(HERE, '..', 'unit', 'data', 'mediawiki')


def skip_or_fail(why):
    print('SKIP: ' + why, file=sys.stderr)
    sys.exit(1 if os.environ.get('WIKIWEB_TEST_NO_SKIP') == '1' else 77)


class Client:
    """One wikiweb-upstream-tool "wiki" run: one client, one session."""

    def __init__(self, api_url, user=None, password=None, timeout_ms=20000, limit=5):
        self.args = [TOOL, '--wiki-url', api_url, '--timeout-ms', str(timeout_ms), '--limit', str(limit)]
        self.pwfile = None
        self.password = password
        if user:
            fd, self.pwfile = tempfile.mkstemp(prefix='wikiweb-pw-')
            os.write(fd, (password + '\n').encode())
            os.close(fd)
            self.args += ['--wiki-user', user, '--wiki-password-file', self.pwfile]

    def close(self):
        if self.pwfile:
            os.unlink(self.pwfile)

    def check_secret(self, *texts):
        if self.password:
            for t in texts:
                assert self.password not in t, 'the password leaked'

    def run(self, *commands, timeout=60):
        p = subprocess.run(self.args + ['wiki', *commands], capture_output=True, text=True, timeout=timeout)
        self.check_secret(p.stdout, p.stderr)
        out = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
        assert len(out) == len(commands), (p.returncode, p.stdout, p.stderr)
        return out

    def session(self):
        """Commands one at a time over stdin, in one session."""
        return Session(self)


class Session:
    def __init__(self, client):
        self.client = client
        self.p = subprocess.Popen(client.args + ['wiki', '-'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)

    def do(self, command):
        self.p.stdin.write(command + '\n')
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        self.client.check_secret(line)
        return json.loads(line)

    def close(self):
        rest, err = self.p.communicate(timeout=30)
        self.client.check_secret(rest, err)
        return self.p.returncode


class PublicWiki(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.wiki = mediawiki.Wiki(private=False).start()
        cls.client = Client(cls.wiki.api_url)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.wiki.stop()

    def test_search_full_text(self):
        # "xylophonic" is only in the text of one page, not in any title:
        # srwhat=text is what finds it.
        r, = self.client.run('search:xylophonic')
        self.assertTrue(r['ok'], r)
        self.assertEqual([h['title'] for h in r['results']], ['Zebra crossing'])
        self.assertIn('xylophonic', r['results'][0]['snippet'])
        self.assertNotIn('<span', r['results'][0]['snippet'])

    def test_search_limit_and_nothing_found(self):
        r, = Client(self.wiki.api_url, limit=3).run('search:orchard')
        self.assertEqual(len(r['results']), 3)
        r, = self.client.run('search:nonexistentwordqqq')
        self.assertTrue(r['ok'], r)
        self.assertEqual(r['results'], [])

    def test_read(self):
        r, = self.client.run('read:Fruit production')
        self.assertTrue(r['ok'], r)
        self.assertFalse(r['missing'])
        self.assertEqual(r['title'], 'Fruit production')
        self.assertEqual(r['content'], mediawiki.PAGES['Fruit production'])
        self.assertGreater(r['revision_id'], 0)
        self.assertEqual(r['url'], self.wiki.base_url + '/index.php/Fruit_production')

    def test_read_redirect_non_ascii_and_slash(self):
        r, = self.client.run('read:Tokyo')
        self.assertEqual((r['title'], r['redirected_from']), ('東京', 'Tokyo'))
        self.assertEqual(r['content'], mediawiki.PAGES['東京'])
        r, = self.client.run('read:Alpha budget')
        self.assertEqual(r['title'], 'Projects/Alpha/Budget')
        self.assertEqual(r['url'], self.wiki.base_url + '/index.php/Projects/Alpha/Budget')
        r, = self.client.run('read:Zürich')
        self.assertEqual(r['content'], mediawiki.PAGES['Zürich'])
        r, = self.client.run('read:Ελληνικά')
        self.assertEqual(r['content'], mediawiki.PAGES['Ελληνικά'])

    def test_missing_and_invalid(self):
        r, = self.client.run('read:No such page at all')
        self.assertTrue(r['ok'], r)
        self.assertTrue(r['missing'])
        self.assertIsNone(r['content'])
        r, = self.client.run('read:Bad[title]')
        self.assertTrue(r['ok'] and r['missing'], r)
        # "|" would ask for two pages: refused before any request
        r, = self.client.run('read:Apple|Banana')
        self.assertFalse(r['ok'])
        self.assertIn('start_error', r)

    def test_serial_requests_in_one_client(self):
        out = self.client.run('search:fruit', 'read:Apple', 'read:Banana', 'read:Apples')
        self.assertTrue(all(r['ok'] for r in out), out)
        self.assertEqual(out[3]['title'], 'Apple')


class PrivateWiki(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.wiki = mediawiki.Wiki(private=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.wiki.stop()

    def client(self, password=None, user=True):
        c = Client(self.wiki.api_url, self.wiki.bot_user if user else None,
                   password or self.wiki.bot_password)
        self.addCleanup(c.close)
        return c

    def test_anonymous_is_denied(self):
        r, = self.client(user=False).run('search:orchard')
        self.assertEqual(r['error'], 'wiki_auth_failed', r)
        self.assertIn('readapidenied', r['message'])

    def test_login_then_search_and_read(self):
        out = self.client().run('search:xylophonic', 'read:Tokyo')
        self.assertTrue(all(r['ok'] for r in out), out)
        self.assertEqual(out[0]['results'][0]['title'], 'Zebra crossing')
        self.assertEqual(out[1]['title'], '東京')
        self.assertEqual([r['logins'] for r in out], [1, 1])

    def test_wrong_password(self):
        wrong = 'a' * 32
        r, = self.client(password=wrong).run('read:Apple')
        self.assertEqual(r['error'], 'wiki_auth_failed', r)
        self.assertIn('Wiki login failed: Failed', r['message'])
        self.assertNotIn(wrong, json.dumps(r))

    def test_session_lost_and_relogin(self):
        s = self.client().session()
        r = s.do('read Apple')
        self.assertTrue(r['ok'], r)
        self.assertEqual(r['logins'], 1)
        self.assertGreater(self.wiki.delete_sessions(), 0)
        r = s.do('read Banana')
        self.assertTrue(r['ok'], r)
        self.assertEqual(r['title'], 'Banana')
        self.assertEqual(r['logins'], 2)
        r = s.do('search orchard')
        self.assertTrue(r['ok'], r)
        self.assertEqual(r['logins'], 2)
        self.assertEqual(s.close(), 0)


def reply(name):
    with open(os.path.join(DATA, name), 'rb') as f:
        return f.read()


class ScriptedWiki(unittest.TestCase):
    """What the local wiki cannot be made to do."""

    def test_retry_after_2_honoured(self):
        script = {'/api.php': [(503, [('Retry-After', '2')], b'{"error":"busy"}'),
                               (200, [], reply('search.json'))]}
        with us.ScriptedServer(script=script) as s:
            t0 = time.monotonic()
            r, = Client(s.url('/api.php')).run('search:orchard')
            took = time.monotonic() - t0
            self.assertTrue(r['ok'], r)
            self.assertEqual(len(s.requests), 2)
            self.assertGreaterEqual(took, 2.0)
            self.assertLess(took, 5.0)

    def test_maxlag_honoured(self):
        script = {'/api.php': [(200, [('Retry-After', '1'), ('MediaWiki-API-Error', 'maxlag'),
                                      ('X-Database-Lag', '7')], reply('maxlag.json')),
                               (200, [], reply('page.json'))]}
        with us.ScriptedServer(script=script) as s:
            t0 = time.monotonic()
            r, = Client(s.url('/api.php')).run('read:Fruit production')
            self.assertTrue(r['ok'], r)
            self.assertGreaterEqual(time.monotonic() - t0, 1.0)
            self.assertEqual(s.queries[0]['maxlag'], '5')

    def test_retry_after_beyond_deadline(self):
        script = {'/api.php': [(503, [('Retry-After', '30')], b'{}')]}
        with us.ScriptedServer(script=script) as s:
            t0 = time.monotonic()
            r, = Client(s.url('/api.php'), timeout_ms=3000).run('search:orchard')
            self.assertEqual(r['error'], 'query_timeout', r)
            self.assertLess(time.monotonic() - t0, 2.5)
            self.assertEqual(len(s.requests), 1)

    def test_retries_are_bounded(self):
        script = {'/api.php': [(200, [('Retry-After', '0')], reply('maxlag.json'))]}
        with us.ScriptedServer(script=script) as s:
            r, = Client(s.url('/api.php')).run('search:orchard')
            self.assertEqual(r['error'], 'upstream_failed', r)
            self.assertEqual(len(s.requests), 4)

    def test_401_and_403(self):
        for code in (401, 403):
            with us.ScriptedServer(script={'/api.php': [(code, [], b'{}')]}) as s:
                r, = Client(s.url('/api.php')).run('search:orchard')
                self.assertEqual(r['error'], 'wiki_auth_failed', r)

    def test_other_api_error(self):
        with us.ScriptedServer(script={'/api.php': [(200, [('MediaWiki-API-Error', 'badvalue')],
                                                     reply('badvalue.json'))]}) as s:
            r, = Client(s.url('/api.php')).run('search:orchard')
            self.assertEqual(r['error'], 'upstream_failed', r)
            self.assertIn('badvalue', r['message'])

    def test_unparseable_reply(self):
        with us.ScriptedServer(script={'/api.php': [(200, [], b'<html>maintenance</html>')]}) as s:
            r, = Client(s.url('/api.php')).run('read:Apple')
            self.assertEqual(r['error'], 'upstream_failed', r)

    def test_login_failure_reason_is_sanitized(self):
        token = reply('login-token.json')
        failed = json.dumps({'login': {'result': 'Failed', 'reason': 'bad Bearer abc.def secret ' + 'k' * 40}})
        script = {'/api.php': [(200, [], token), (200, [], failed.encode())]}
        with us.ScriptedServer(script=script) as s:
            c = Client(s.url('/api.php'), 'Bot@app', 'q' * 32)
            try:
                r, = c.run('read:Apple')
            finally:
                c.close()
            self.assertEqual(r['error'], 'wiki_auth_failed', r)
            self.assertIn('Bearer [REDACTED]', r['message'])
            self.assertNotIn('k' * 40, r['message'])


if __name__ == '__main__':
    # meson's timeout sends SIGTERM: exit so that the wikis are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    TOOL = os.path.abspath(sys.argv.pop(1))
    why = mediawiki.available()
    if why:
        skip_or_fail(why)
    prog = unittest.main(exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() and prog.result.testsRun else 1)
