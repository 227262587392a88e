#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The command line: --help, --version, --check-config, --listen, and what
the daemon does with bad settings and with secrets."""

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time

import harness
from harness import API


def run(args, env=None, timeout=10):
    e = {'PATH': os.environ.get('PATH', '/usr/bin:/bin')}
    for k in ('ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(env or {})
    return subprocess.run([harness.WIKIWEBD] + args, env=e, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


class Cli(harness.DaemonTestCase):

    def secret_file(self, value):
        fd, path = tempfile.mkstemp(prefix='wikiweb-e2e-secret-')
        with os.fdopen(fd, 'w') as f:
            f.write(value + '\n')
        self.addCleanup(os.unlink, path)
        return path

    def test_help(self):
        p = run(['--help'])
        self.assertEqual(p.returncode, 0, p)
        self.assertIn('--listen', p.stdout)
        self.assertIn('--check-config', p.stdout)
        self.assertIn('--version', p.stdout)

    def test_version_matches_health(self):
        p = run(['--version'])
        self.assertEqual(p.returncode, 0, p)
        self.assertTrue(p.stdout.strip(), p)
        d = self.daemon()
        v = d.browser().get(API + '/health').json['version']
        self.assertIn(v, p.stdout)

    def test_unknown_option(self):
        p = run(['--no-such-option'])
        self.assertNotEqual(p.returncode, 0, p)
        p = run(['--listen'])
        self.assertNotEqual(p.returncode, 0, p)

    def test_check_config_defaults(self):
        p = run(['--check-config'])
        self.assertEqual(p.returncode, 0, p)
        out = p.stdout
        for line in ('WIKI_WEB_QUEUE_MAX_LENGTH=100', 'WIKI_WEB_QUEUE_RESERVATION_SECONDS=60',
                     'WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=30', 'WIKI_WEB_MAX_REQUEST_BYTES=65536',
                     'WIKI_WEB_SESSION_MAX_AGE_SECONDS=2592000'):
            self.assertIn(line, out.splitlines(), out)

    def test_check_config_effective_values(self):
        env = {'WIKI_WEB_QUEUE_MAX_LENGTH': '0', 'WIKI_WEB_QUEUE_RESERVATION_SECONDS': '3600',
               'WIKI_WEB_QUEUE_HEARTBEAT_SECONDS': '1'}
        p = run(['--check-config'], env)
        self.assertEqual(p.returncode, 0, p)
        for k, v in env.items():
            self.assertIn(f'{k}={v}', p.stdout.splitlines(), p.stdout)
        p = run(['--check-config'], {'WIKI_WEB_QUEUE_MAX_LENGTH': '1000000',
                                     'WIKI_WEB_QUEUE_RESERVATION_SECONDS': '1',
                                     'WIKI_WEB_QUEUE_HEARTBEAT_SECONDS': '3600'})
        self.assertEqual(p.returncode, 0, p)

    def test_check_config_warns_without_host_names(self):
        """Trusted proxies and no WIKI_WEB_ALLOWED_HOSTS: only localhost
        and the machine's addresses would pass the Host check."""
        p = run(['--check-config'], {'WIKI_WEB_TRUSTED_PROXIES': '127.0.0.2'})
        self.assertEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_ALLOWED_HOSTS is empty', p.stderr)
        p = run(['--check-config'], {'WIKI_WEB_TRUSTED_PROXIES': '127.0.0.2',
                                     'WIKI_WEB_ALLOWED_HOSTS': 'wiki.example.com, *.corp.example'})
        self.assertEqual(p.returncode, 0, p)
        self.assertNotIn('WIKI_WEB_ALLOWED_HOSTS', p.stderr)
        self.assertIn('WIKI_WEB_ALLOWED_HOSTS=wiki.example.com,*.corp.example', p.stdout.splitlines())
        for bad in ('*', '*.*.example', 'wiki.example.com:8080', 'http://wiki.example.com', '192.0.2.1',
                    'a b', 'w*.example'):
            p = run(['--check-config'], {'WIKI_WEB_ALLOWED_HOSTS': bad})
            self.assertNotEqual(p.returncode, 0, (bad, p))
            self.assertIn('WIKI_WEB_ALLOWED_HOSTS', p.stderr, bad)

    def test_check_config_bad_values(self):
        cases = [
            ('WIKI_WEB_QUEUE_MAX_LENGTH', '-1', '1000000'),
            ('WIKI_WEB_QUEUE_MAX_LENGTH', '1000001', '1000000'),
            ('WIKI_WEB_QUEUE_MAX_LENGTH', 'ten', '1000000'),
            ('WIKI_WEB_QUEUE_RESERVATION_SECONDS', '0', '3600'),
            ('WIKI_WEB_QUEUE_RESERVATION_SECONDS', '3601', '3600'),
            ('WIKI_WEB_QUEUE_HEARTBEAT_SECONDS', '0', '3600'),
            ('WIKI_WEB_QUEUE_HEARTBEAT_SECONDS', '1.5', '3600'),
            ('WIKI_WEB_QUEUE_HEARTBEAT_SECONDS', '99999999999999999999999', '3600'),
            ('WIKI_WEB_COOKIE_SECURE', 'maybe', None),
            ('WIKI_WEB_ALLOWED_ORIGINS', 'ftp://x.example', None),
        ]
        for name, value, bound in cases:
            p = run(['--check-config'], {name: value})
            self.assertNotEqual(p.returncode, 0, f'{name}={value!r}: {p}')
            msg = p.stdout + p.stderr
            self.assertIn(name, msg, f'{name}={value!r}: {p}')
            if bound:
                self.assertIn(bound, msg, f'{name}={value!r}: the message gives the range: {p}')

    def test_check_config_masks_secrets(self):
        key = 'sk-' + secrets.token_hex(24)
        password = secrets.token_hex(16)
        env = {'WIKI_WEB_LLM_API_KEY_FILE': self.secret_file(key),
               'WIKI_WEB_WIKI_PASSWORD_FILE': self.secret_file(password)}
        p = run(['--check-config'], env)
        self.assertEqual(p.returncode, 0, p)
        for s in (key, password, key[:12], password[:12]):
            self.assertNotIn(s, p.stdout + p.stderr)
        # Through systemd credentials as well.
        cred = tempfile.mkdtemp(prefix='wikiweb-e2e-cred-')
        self.addCleanup(os.rmdir, cred)
        for name, value in (('llm-api-key', key), ('wiki-password', password)):
            with open(os.path.join(cred, name), 'w') as f:
                f.write(value)
            self.addCleanup(os.unlink, os.path.join(cred, name))
        p = run(['--check-config'], {'CREDENTIALS_DIRECTORY': cred})
        self.assertEqual(p.returncode, 0, p)
        for s in (key, password):
            self.assertNotIn(s, p.stdout + p.stderr)

    def test_check_config_unreadable_secret_file(self):
        p = run(['--check-config'], {'WIKI_WEB_LLM_API_KEY_FILE': '/nonexistent/wikiweb-key'})
        self.assertNotEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_LLM_API_KEY_FILE', p.stdout + p.stderr)

    def test_secret_never_in_log(self):
        key = 'sk-' + secrets.token_hex(24)
        password = secrets.token_hex(16)
        d = self.daemon(WIKI_WEB_LLM_API_KEY_FILE=self.secret_file(key),
                        WIKI_WEB_WIKI_PASSWORD_FILE=self.secret_file(password),
                        WIKI_WEB_LOG_LEVEL=7)
        d.secrets.update({key, password})
        b = d.browser()
        b.join()
        b.query()
        d.browser().query()
        d.stop()  # checks the log

    def test_bad_setting_under_socket_activation(self):
        """The daemon refuses to serve with a bad setting: the first
        connection starts it, it exits non-zero naming the variable."""
        d = harness.Daemon(self, WIKI_WEB_QUEUE_MAX_LENGTH='-1')
        self.addCleanup(shutil.rmtree, d.tmp, True)
        d.port = harness.free_port()
        with open(d.log_path, 'ab') as log:
            d.proc = subprocess.Popen(d._command(d.port), stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 5
            got = None
            while time.monotonic() < deadline and d.proc.poll() is None:
                try:
                    with socket.create_connection(('127.0.0.1', d.port), timeout=2) as s:
                        s.sendall(b'GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n')
                        got = s.recv(100)
                except OSError:
                    pass
                time.sleep(0.05)
            rc = d.proc.wait(5)
        finally:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        self.assertNotEqual(rc, 0, d.log())
        self.assertFalse(got, f'answered with a bad setting: {got!r}')
        self.assertIn('WIKI_WEB_QUEUE_MAX_LENGTH', d.log())

    def test_listen_without_socket_activation(self):
        d = self.daemon(socket_activation=False)
        b = d.browser()
        r = b.get(API + '/health')
        self.assertStatus(r, 200)
        self.assertStatus(b.join(), 201)


if __name__ == '__main__':
    harness.main()
