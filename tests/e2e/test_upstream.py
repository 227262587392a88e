#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 8, upstream failures and the destination policy: every failure
class provoked for real on loopback, through src/query/upstream.c on a real
sd-event loop (tests/tools/upstream/wikiweb-upstream-tool).

Every address any of these tests sends traffic to is a loopback address,
also the ones the policy must refuse (localhost, 127.0.0.2): were the policy
broken, the traffic would still stay on this machine.

Usage: test_upstream.py TOOL WIKIWEBD"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))
import upstream_servers as us  # noqa: E402

TOOL = None


def run_tool(*args, timeout=30, check_exit=False):
    p = subprocess.run([TOOL, *args], capture_output=True, timeout=timeout)
    lines = [json.loads(x) for x in p.stdout.decode('utf-8', 'replace').splitlines() if x.strip()]
    if check_exit:
        assert p.returncode == 0, (p.returncode, p.stderr)
    return p, lines


def fetch(url, *opts, allow=('127.0.0.1',), timeout=30):
    args = []
    for a in allow:
        args += ['--allow', a]
    p, lines = run_tool(*args, *opts, 'fetch', url, timeout=timeout)
    assert len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    return lines[0]


class Upstream(unittest.TestCase):

    def assertError(self, r, code):
        self.assertFalse(r['ok'], r)
        self.assertEqual(r['error'], code, r)
        self.assertTrue(r['message'], r)

    def test_ok_and_request_shape(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/echo'), '--method', 'POST', '--data', '{"a": 1}',
                      '--content-type', 'application/json', '--header', 'Authorization: Bearer k-123')
            self.assertTrue(r['ok'], r)
            self.assertEqual(r['status'], 200)
            self.assertEqual(r['content_type'], 'application/json')
            echo = json.loads(r['body'])
            self.assertEqual(echo['method'], 'POST')
            self.assertEqual(echo['body'], '{"a": 1}')
            self.assertEqual(echo['headers']['authorization'], 'Bearer k-123')
            self.assertEqual(echo['headers']['content-type'], 'application/json')
            # No WIKI_WEB_USER_AGENT_CONTACT: the project only, no contact.
            self.assertRegex(echo['headers']['user-agent'], r'^wikiweb/\S+ libcurl/\S+$')
            self.assertIn('gzip', echo['headers']['accept-encoding'])
            self.assertNotIn('expect', echo['headers'])

    def test_cancel_by_free(self):
        # Three slow requests; the second is freed while in flight: no
        # callback for it, and the other two complete (under ASan in CI:
        # nothing of it is touched after the free).
        with us.ScriptedServer() as s:
            p, lines = run_tool('--allow', '127.0.0.1', 'cancel', s.url('/slow?ms=800'))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(lines, [{'callbacks': 2, 'cancelled_called': False}])

    def test_gzip_decoded(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/gzip?n=5000'))
            self.assertTrue(r['ok'], r)
            self.assertEqual(r['body'], 'a' * 5000)

    def test_gzip_bomb_is_capped_on_decoded_bytes(self):
        # 4 MB of 'a' compress to ~4 KB; the cap counts the decoded bytes.
        with us.ScriptedServer() as s:
            r = fetch(s.url('/gzip?n=4000000'), '--max-bytes', '100000')
            self.assertError(r, 'upstream_response_too_large')

    def test_non_2xx_body_is_kept(self):
        with us.ScriptedServer() as s:
            for code in (400, 401, 404, 500, 503):
                r = fetch(s.url('/status/%d' % code))
                self.assertError(r, 'upstream_failed')
                self.assertEqual(r['status'], code)
                self.assertEqual(json.loads(r['body'])['error']['code'], code)

    def test_tls_self_signed(self):
        if not shutil.which('openssl'):
            us_skip('openssl not installed')
        with us.ScriptedServer(tls=True) as s:
            r = fetch(s.url('/ok'))
            self.assertError(r, 'tls_failed')
            self.assertEqual(s.requests, [])

    def test_closed_port(self):
        r = fetch('http://127.0.0.1:%d/' % us.closed_port())
        self.assertError(r, 'connectivity_failed')

    def test_unresolvable_name(self):
        # .invalid never resolves (RFC 6761); the resolver answers locally.
        r = fetch('http://wikiweb-test.invalid/', allow=('wikiweb-test.invalid',))
        self.assertError(r, 'connectivity_failed')

    def test_silent_server_hits_the_deadline(self):
        with us.SilentServer() as s:
            t0 = time.monotonic()
            r = fetch(s.url('/'), '--timeout-ms', '1500')
            took = time.monotonic() - t0
            self.assertError(r, 'query_timeout')
            self.assertGreaterEqual(r['elapsed_ms'], 1400)
            self.assertLess(took, 5)

    def test_connect_timeout(self):
        with us.FullBacklog() as s:
            t0 = time.monotonic()
            r = fetch(s.url('/'), '--connect-timeout-ms', '500', '--timeout-ms', '10000')
            self.assertError(r, 'connectivity_failed')
            # libcurl's words differ with timing ("Connection timeout after
            # 501 ms", "Timeout was reached"); the class and the time are the point.
            self.assertRegex(r['message'], '(?i)time')
            self.assertGreaterEqual(r['elapsed_ms'], 450)
            self.assertLess(time.monotonic() - t0, 5)

    def test_deadline_while_connecting(self):
        with us.FullBacklog() as s:
            r = fetch(s.url('/'), '--timeout-ms', '700')
            self.assertError(r, 'query_timeout')
            self.assertGreaterEqual(r['elapsed_ms'], 650)

    def test_body_over_cap_with_content_length(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/big?n=2000000&cl=1'), '--max-bytes', '1048576')
            self.assertError(r, 'upstream_response_too_large')
            # refused from Content-Length: no body bytes were taken
            self.assertEqual(r['body_size'], 0)

    def test_body_over_cap_without_content_length(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/big?n=2000000&cl=0'), '--max-bytes', '1048576')
            self.assertError(r, 'upstream_response_too_large')
            r = fetch(s.url('/big?n=1048576&cl=0'), '--max-bytes', '1048576')
            self.assertTrue(r['ok'], r)
            self.assertEqual(r['body_size'], 1048576)

    def test_redirect_followed_on_same_host(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/chain/5'))
            self.assertTrue(r['ok'], r)
            self.assertEqual(r['redirects'], 5)
            self.assertEqual(r['body'], 'end of chain')
            self.assertTrue(r['url'].endswith('/chain/0'), r)

    def test_redirect_chain_of_6(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/chain/6'))
            self.assertError(r, 'upstream_failed')
            self.assertIn('redirected more than 5', r['message'])
            self.assertEqual(len(s.requests), 6)

    def test_redirect_to_localhost_not_named(self):
        with us.ScriptedServer() as s:
            to = 'http://localhost:%d/ok' % s.port
            r = fetch(s.url('/redirect?to=' + urllib.parse.quote(to, safe='')))
            self.assertError(r, 'destination_denied')
            self.assertEqual(r['denied_by'], 'redirect')
            self.assertEqual(s.requests, ['/redirect'])

    def test_redirect_to_other_loopback_ip_not_named(self):
        with us.CountingListener('127.0.0.2') as other, us.ScriptedServer() as s:
            to = 'http://127.0.0.2:%d/' % other.port
            r = fetch(s.url('/redirect?to=' + urllib.parse.quote(to, safe='')))
            self.assertError(r, 'destination_denied')
            time.sleep(0.2)
            self.assertEqual(other.accepted, 0)

    def test_redirect_to_named_other_host_denied(self):
        # Both hosts are named: a redirect still may not change the host.
        with us.CountingListener('127.0.0.2') as other, us.ScriptedServer() as s:
            to = 'http://127.0.0.2:%d/' % other.port
            r = fetch(s.url('/redirect?to=' + urllib.parse.quote(to, safe='')),
                      allow=('127.0.0.1', '127.0.0.2'))
            self.assertError(r, 'destination_denied')
            time.sleep(0.2)
            self.assertEqual(other.accepted, 0)

    def test_redirect_to_other_scheme_denied(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/redirect?to=' + urllib.parse.quote('ftp://127.0.0.1/', safe='')))
            self.assertError(r, 'destination_denied')

    def test_unnamed_host_never_connected(self):
        with us.CountingListener('127.0.0.2') as other:
            r = fetch('http://127.0.0.2:%d/' % other.port)
            self.assertError(r, 'destination_denied')
            self.assertEqual(r['denied_by'], 'url')
            time.sleep(0.2)
            self.assertEqual(other.accepted, 0)

    def test_localhost_named_resolves_and_connects(self):
        # Named explicitly, localhost's loopback address is allowed.
        with us.ScriptedServer() as s:
            r = fetch('http://localhost:%d/ok' % s.port, allow=('localhost',))
            self.assertTrue(r['ok'], r)

    def test_hostile_urls_refused(self):
        for url in ('http://127.0.0.1@127.0.0.2/', 'http://2130706433/', 'http://0x7f.1/',
                    'http://127.1/', 'file:///etc/passwd', 'gopher://127.0.0.1/', 'http://[::1%25lo]/',
                    'http://127.0.0.1:0/', 'http://127.0.0.1:99999/', 'http:/127.0.0.1/', 'http://127.0.0.1\\@x/'):
            r = fetch(url)
            self.assertError(r, 'destination_denied')

    def run_with_hosts(self, hosts, *args):
        """Run the tool with a private /etc/hosts: a new mount namespace in
        which a temporary file is bind-mounted over /etc/hosts. The host's
        own /etc/hosts is never written; the namespace ends with the tool."""
        if os.geteuid() != 0 or not shutil.which('unshare'):
            if os.environ.get('WIKIWEB_TEST_NO_SKIP') == '1':
                self.fail('needs root and unshare(1) for a private /etc/hosts')
            self.skipTest('needs root and unshare(1) for a private /etc/hosts')
        with tempfile.NamedTemporaryFile('w', prefix='wikiweb-hosts-') as f:
            f.write(hosts)
            f.flush()
            p = subprocess.run(['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
                                'mount --bind "$1" /etc/hosts && shift && exec "$@"', 'sh', f.name,
                                TOOL, *args], capture_output=True, timeout=30)
        lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
        self.assertEqual(len(lines), 1, (p.returncode, p.stdout, p.stderr))
        return lines[0]

    def test_name_resolving_to_loopback_not_named(self):
        # wikiweb-unnamed.test resolves to 127.0.0.9 in a private /etc/hosts.
        hosts = '127.0.0.1 localhost\n::1 localhost\n127.0.0.9 wikiweb-unnamed.test\n'
        with us.ScriptedServer('127.0.0.9') as s:
            url = 'http://wikiweb-unnamed.test:%d/ok' % s.port
            r = self.run_with_hosts(hosts, '--allow', '127.0.0.1', '--allow', '127.0.0.9', 'fetch', url)
            self.assertError(r, 'destination_denied')
            time.sleep(0.2)
            self.assertEqual(s.requests, [])
            # Named, the same name resolves there and is fetched: the
            # denial above was the policy, not the resolver.
            r = self.run_with_hosts(hosts, '--allow', 'wikiweb-unnamed.test', 'fetch', url)
            self.assertTrue(r['ok'], r)
            self.assertEqual(s.requests, ['/ok'])

    def test_retry_after_is_reported(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/retry'))
            self.assertError(r, 'upstream_failed')
            self.assertEqual(r['status'], 503)
            self.assertEqual(r['retry_after'], '2')

    def test_loop_stays_free_with_5_slow_requests(self):
        # The daemon-level measurement (GET /api/v1/queue/status while the
        # pipeline's requests are in flight) comes with the pipeline; here:
        # a 10 ms timer on the same loop as 5 requests of 1.5 s each. The
        # 99th percentile must stay under 10 ms; the maximum is printed. On
        # a busy shared machine the scheduler can delay the process whatever
        # the loop does, so up to 3 runs are made and the best one counts.
        best = None
        with us.ScriptedServer() as s:
            for attempt in range(3):
                p, lines = run_tool('--allow', '127.0.0.1', 'lateness', '5', s.url('/slow?ms=1500'))
                self.assertEqual(p.returncode, 0, p.stderr)
                results, summary = lines[:-1], lines[-1]
                self.assertEqual(len(results), 5)
                for r in results:
                    self.assertTrue(r['ok'], r)
                    self.assertGreaterEqual(r['elapsed_ms'], 1500)
                print('loop lateness while 5 slow requests are in flight: p99 %.3f ms, max %.3f ms, '
                      'mean %.3f ms over %d ticks of 10 ms'
                      % (summary['p99_lateness_ms'], summary['max_lateness_ms'], summary['mean_lateness_ms'],
                         summary['ticks']), file=sys.stderr)
                # 1.5 s of 10 ms ticks: a blocked loop would show far fewer.
                self.assertGreater(summary['ticks'], 100)
                if best is None or summary['p99_lateness_ms'] < best:
                    best = summary['p99_lateness_ms']
                if best < 10:
                    break
        self.assertLess(best, 10)


class CheckConfig(unittest.TestCase):
    """wikiwebd --check-config refuses upstream settings the destination
    policy would refuse at every query, without printing them."""

    def check(self, **env):
        e = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'WIKI_WEB_STATE_DIRECTORY': tempfile.gettempdir()}
        e.update(env)
        return subprocess.run([WIKIWEBD, '--check-config'], env=e, capture_output=True, text=True, timeout=10)

    def test_good(self):
        p = self.check(WIKI_WEB_WIKI_API_URL='http://127.0.0.1:8080/api.php', WIKI_WEB_LLM_URL='https://[::1]/v1',
                       WIKI_WEB_ALLOWED_DESTINATIONS='wiki.example.org,127.0.0.2')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('WIKI_WEB_ALLOWED_DESTINATIONS=wiki.example.org,127.0.0.2', p.stdout)

    def test_refused(self):
        for env in ({'WIKI_WEB_WIKI_API_URL': 'http://bot:s3cr3t-in-url@wiki.example.org/api.php'},
                    {'WIKI_WEB_WIKI_API_URL': 'http://127.1/api.php'},
                    {'WIKI_WEB_LLM_URL': 'http://[fe80::1%25eth0]/v1'},
                    {'WIKI_WEB_ALLOWED_DESTINATIONS': '2130706433'}):
            p = self.check(**env)
            self.assertNotEqual(p.returncode, 0, env)
            self.assertIn('WIKI_WEB_', p.stderr)
            self.assertNotIn('s3cr3t', p.stderr + p.stdout)


WIKIWEBD = None


def us_skip(why):
    print('SKIP: ' + why, file=sys.stderr)
    sys.exit(1 if os.environ.get('WIKIWEB_TEST_NO_SKIP') == '1' else 77)


if __name__ == '__main__':
    TOOL = os.path.abspath(sys.argv.pop(1))
    WIKIWEBD = os.path.abspath(sys.argv.pop(1))
    prog = unittest.main(exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() and prog.result.testsRun else 1)
