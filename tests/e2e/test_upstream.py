#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 8, upstream failures and the destination policy: every failure
class provoked for real on loopback, through src/query/upstream.c on a real
sd-event loop (tests/tools/upstream/wikiweb-upstream-tool).

Every address any of these tests sends traffic to is a loopback address,
also the ones the policy must refuse (localhost, 127.0.0.2): were the policy
broken, the traffic would still stay on this machine.

Usage: test_upstream.py TOOL"""

import json
import os
import shutil
import subprocess
import sys
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
            self.assertRegex(echo['headers']['user-agent'], r'^wikiweb/\S+ \(\+\S+\) libcurl/\S+$')
            self.assertIn('gzip', echo['headers']['accept-encoding'])
            self.assertNotIn('expect', echo['headers'])

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

    def test_retry_after_is_reported(self):
        with us.ScriptedServer() as s:
            r = fetch(s.url('/retry'))
            self.assertError(r, 'upstream_failed')
            self.assertEqual(r['status'], 503)
            self.assertEqual(r['retry_after'], '2')

    def test_loop_stays_free_with_5_slow_requests(self):
        # The daemon-level measurement (GET /api/v1/queue/status while the
        # pipeline's requests are in flight) comes with the pipeline; here:
        # a 10 ms timer on the same loop as 5 requests of 1.5 s each.
        with us.ScriptedServer() as s:
            p, lines = run_tool('--allow', '127.0.0.1', 'lateness', '5', s.url('/slow?ms=1500'))
            self.assertEqual(p.returncode, 0, p.stderr)
            results, summary = lines[:-1], lines[-1]
            self.assertEqual(len(results), 5)
            for r in results:
                self.assertTrue(r['ok'], r)
            print('loop lateness while 5 slow requests are in flight: max %.3f ms, mean %.3f ms over %d ticks'
                  % (summary['max_lateness_ms'], summary['mean_lateness_ms'], summary['ticks']),
                  file=sys.stderr)
            self.assertGreater(summary['ticks'], 50)
            self.assertLess(summary['max_lateness_ms'], 10)


def us_skip(why):
    print('SKIP: ' + why, file=sys.stderr)
    sys.exit(1 if os.environ.get('WIKIWEB_TEST_NO_SKIP') == '1' else 77)


if __name__ == '__main__':
    TOOL = os.path.abspath(sys.argv.pop(1))
    prog = unittest.main(exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() and prog.result.testsRun else 1)
