#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Shared harness for the e2e suite (h2o style: the real daemon on a free port).

Every test starts its own wikiwebd behind `systemd-socket-activate` on a free
loopback port, talks to it over HTTP with the standard library only, stops it
with SIGTERM and checks that it exits 0. Nothing here knows the daemon's
internals: only API.md.

Usage from a test file:

    import harness
    class T(harness.DaemonTestCase):
        def test_x(self):
            d = self.daemon(WIKI_WEB_QUEUE_MAX_LENGTH=2)
            b = d.browser()
            r = b.post('/api/v1/queue/join')
            self.assertEqual(r.status, 201)
    if __name__ == '__main__':
        harness.main()

The test is run as `python3 test_x.py /path/to/wikiwebd` (meson passes the
executable). Exit code 77 (skip) when systemd-socket-activate is missing,
unless WIKIWEB_TEST_NO_SKIP=1.
"""

import atexit
import base64
import calendar
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SKIP = 77
API = '/api/v1'
COOKIE_NAME = 'wikiweb_session'
TOKEN_RE = re.compile(r'^[A-Za-z0-9_-]{43}$')
TICKET_ID_RE = re.compile(r'^tk_[A-Za-z0-9_-]+$')
QUERY_ID_RE = re.compile(r'^qr_[A-Za-z0-9_-]+$')
TIME_RE = re.compile(r'^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$')

# API.md section 2: code -> HTTP status.
ERRORS = {
    'invalid_input': 400,
    'model_context_exceeded': 400,
    'origin_denied': 403,
    'destination_denied': 403,
    'wiki_auth_failed': 403,
    'artifact_not_found': 404,
    'ticket_not_found': 404,
    'query_not_found': 404,
    'not_found': 404,
    'method_not_allowed': 405,
    'busy': 409,
    'request_too_large': 413,
    'upstream_failed': 502,
    'upstream_response_too_large': 502,
    'tls_failed': 502,
    'connectivity_failed': 502,
    'model_output_limit': 502,
    'query_timeout': 504,
    'execution_failed': 500,
    'cleanup_failed': 500,
    'internal_error': 500,
    'queue_full': 503,
    'request_header_too_large': 431,  # extension (docs/HTTP.md)
    'rate_limited': 429,  # extension (API.md 11: too many open event streams)
    'storage_unavailable': 503,  # extension (API.md 2: the history cannot take a new record)
    'invalid_token': 401,  # extension (API.md "Access tokens": a wrong, expired or revoked token)
}

STATUS_KEYS = {'state', 'queue_length', 'max_length', 'ticket', 'estimated_wait_seconds',
               'average_query_seconds', 'reservation_seconds', 'heartbeat_seconds',
               'poll_after_seconds', 'running_query', 'user', 'slots', 'estimated_wait_range_seconds',
               'wait_known'}
SLOTS_KEYS = {'total', 'idle', 'reserved', 'running'}
TICKET_KEYS = {'id', 'status', 'position', 'joined_at', 'heartbeat_expires_at',
               'reservation_expires_at'}

WIKIWEBD = None  # set by main() from argv[1] or $WIKIWEBD
_LIVE = set()    # daemons started and not yet stopped, killed if the test runner dies
SSA = shutil.which('systemd-socket-activate') or '/usr/bin/systemd-socket-activate'


def skip_or_fail(why):
    """Exit 77 (meson: skipped) with a reason, or 1 under WIKIWEB_TEST_NO_SKIP=1."""
    print(f'SKIP: {why}', file=sys.stderr)
    if os.environ.get('WIKIWEB_TEST_NO_SKIP') == '1':
        print('WIKIWEB_TEST_NO_SKIP=1: a skip is a failure', file=sys.stderr)
        sys.exit(1)
    sys.exit(SKIP)


def free_port(host='127.0.0.1'):
    """A port that was free a moment ago (the caller retries on a bind race)."""
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# A dbus-daemon of a test's own: anyone may own and call anything on it.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
 <type>session</type>
 <listen>unix:path={path}</listen>
 <auth>EXTERNAL</auth>
 <policy context="default">
  <allow user="*"/>
  <allow own="*"/>
  <allow send_destination="*" eavesdrop="true"/>
  <allow eavesdrop="true"/>
  <allow receive_sender="*"/>
 </policy>
</busconfig>
"""


def private_bus(directory, timeout=10.0):
    """A dbus-daemon listening in directory: its address and process (the
    caller stops it)."""
    conf, path = os.path.join(directory, 'bus.conf'), os.path.join(directory, 'bus')
    with open(conf, 'w') as f:
        f.write(BUS_CONFIG.format(path=path))
    p = subprocess.Popen(['dbus-daemon', f'--config-file={conf}', '--nofork', '--nopidfile'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            p.wait()
            raise AssertionError('dbus-daemon did not start')
        time.sleep(0.02)
    return 'unix:path=' + path, p


def parse_time(s):
    """RFC 3339 UTC with milliseconds ("2026-11-22T10:00:00.000Z") -> epoch seconds."""
    m = TIME_RE.match(s)
    if not m:
        raise AssertionError(f'not an RFC 3339 UTC millisecond time: {s!r}')
    y, mo, d, h, mi, sec, ms = (int(x) for x in m.groups())
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)) + ms / 1000.0


def _strict_object(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise AssertionError(f'duplicate keys in a response object: {keys}')
    return dict(pairs)


def strict_json(data):
    """Parse a response body: UTF-8, JSON, no duplicate keys, no NaN."""
    text = data.decode('utf-8')  # raises on invalid UTF-8

    def bad_constant(c):
        raise AssertionError(f'non-JSON constant {c} in a response')
    return json.loads(text, object_pairs_hook=_strict_object, parse_constant=bad_constant)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Response:
    """One HTTP response: status, headers (case-insensitive), raw body, JSON."""

    def __init__(self, status, reason, headers, body, elapsed):
        self.status = status
        self.reason = reason
        self.headers = headers  # http.client.HTTPMessage
        self.body = body
        self.elapsed = elapsed
        self._json = None

    def header(self, name):
        return self.headers.get(name)

    def header_all(self, name):
        return self.headers.get_all(name) or []

    @property
    def json(self):
        if self._json is None:
            self._json = strict_json(self.body)
        return self._json

    def set_cookies(self):
        return self.header_all('Set-Cookie')

    def __repr__(self):
        return (f'<Response {self.status} {self.reason} headers={list(self.headers.items())} '
                f'body={self.body[:300]!r}>')


def read_response(sock, method, timeout):
    """Parse one HTTP response from a connected socket."""
    sock.settimeout(timeout)
    t0 = time.monotonic()
    r = http.client.HTTPResponse(sock, method=method)
    r.begin()
    body = r.read()
    return Response(r.status, r.reason, r.msg, body, time.monotonic() - t0)


class Daemon:
    """A wikiwebd under systemd-socket-activate (or with --listen) on a free port.

    env: WIKI_WEB_* settings passed with -E; a value of None drops a default.
    Defaults: WIKI_WEB_COOKIE_SECURE=false (plain-http tests),
    WIKI_WEB_LOG_LEVEL=7 (so the secrecy checks see debug lines too),
    WIKI_WEB_STATE_DIRECTORY=<a temporary directory>.
    notify: listen on a NOTIFY_SOCKET of our own and record every sd_notify
    message with its arrival time (self.notifications: [(epoch, text)]).
    """

    def __init__(self, testcase=None, socket_activation=True, args=(), notify=False, metrics=False,
                 listen_host='127.0.0.1', **env):
        self.testcase = testcase
        # listen_host: the loopback address of the API socket ('::1' for IPv6).
        self.listen_host = listen_host
        # metrics: a second listening socket named "metrics", as
        # wikiwebd-metrics.socket passes it (self.metrics_port).
        self.metrics = metrics
        self.metrics_port = None
        self.socket_activation = socket_activation
        self.args = list(args)
        self.tmp = tempfile.mkdtemp(prefix='wikiweb-e2e-')
        state = os.path.join(self.tmp, 'state')
        os.mkdir(state)
        self.env = {
            'WIKI_WEB_COOKIE_SECURE': 'false',
            'WIKI_WEB_LOG_LEVEL': '7',
            'WIKI_WEB_STATE_DIRECTORY': state,
        }
        for k in ('ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'):
            if k in os.environ:
                self.env[k] = os.environ[k]
        for k, v in env.items():
            if v is None:
                self.env.pop(k, None)
            else:
                self.env[k] = str(v)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.tmp, 'daemon.log')
        self.tokens = set()   # every session token seen or sent: never in a body or the log
        self.secrets = set()  # other strings that must never appear in the log or a body
        self.stopped = False
        self.notifications = []
        self.notify_sock = None
        if notify:
            path = os.path.join(self.tmp, 'notify')
            self.notify_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.notify_sock.bind(path)
            self.env['NOTIFY_SOCKET'] = path
            threading.Thread(target=self._notify_reader, daemon=True).start()

    def _notify_reader(self):
        sock = self.notify_sock
        sock.settimeout(0.2)
        while not self.stopped:
            try:
                data = sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            self.notifications.append((time.time(), data.decode('utf-8', 'replace')))

    def notifications_between(self, t0, t1, prefix='STATUS='):
        """sd_notify messages received in [t0, t1] (epoch seconds) that
        carry a line starting with prefix."""
        return [(t, m) for t, m in list(self.notifications)
                if t0 <= t <= t1 and any(line.startswith(prefix) for line in m.split('\n'))]

    # -- lifecycle -----------------------------------------------------------

    def _listen(self, port):
        if ':' in self.listen_host:
            return f'[{self.listen_host}]:{port}'
        return f'{self.listen_host}:{port}'

    def _command(self, port):
        if self.socket_activation and self.metrics:
            self.metrics_port = free_port()
            cmd = [SSA, '-l', self._listen(port), '-l', f'127.0.0.1:{self.metrics_port}',
                   '--fdname=http:metrics']
            for k, v in self.env.items():
                cmd += ['-E', f'{k}={v}']
            return cmd + [WIKIWEBD] + self.args
        if self.socket_activation:
            cmd = [SSA, '-l', self._listen(port), '--fdname=http']
            for k, v in self.env.items():
                cmd += ['-E', f'{k}={v}']
            return cmd + [WIKIWEBD] + self.args
        return [WIKIWEBD, '--listen', self._listen(port)] + self.args

    def start(self, timeout=10.0):
        for _ in range(5):
            port = free_port(self.listen_host)
            log = open(self.log_path, 'ab')
            env = None
            if not self.socket_activation:
                env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin')}
                env.update(self.env)
            self.proc = subprocess.Popen(self._command(port), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
            log.close()
            _LIVE.add(self)
            self.port = port
            if self._wait_ready(timeout):
                return self
            rc = self.proc.poll()
            if rc is None:
                self._kill()
                raise AssertionError(f'daemon not answering on port {port} after {timeout} s; '
                                     f'log:\n{self.log()}')
            if 'in use' in self.log():
                continue  # lost the race for the port: try another one
            raise AssertionError(f'daemon exited with {rc} before answering; log:\n{self.log()}')
        raise AssertionError('could not find a free port')

    def _wait_ready(self, timeout):
        """Ready = a GET /api/v1/health answered (the first connection also
        makes systemd-socket-activate start the daemon)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.listen_host, self.port), timeout=2) as s:
                    s.sendall(b'GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n'
                              b'Connection: close\r\n\r\n' % self.port)
                    r = read_response(s, 'GET', max(0.5, deadline - time.monotonic()))
                    for c in r.set_cookies():
                        self._note_cookie(c)
                    return True
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
        return False

    def _kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        _LIVE.discard(self)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=5.0):
        """SIGTERM; the daemon must exit 0 within `timeout`. Then the secrecy
        checks on the log. Raises AssertionError on any violation (with the
        log in the message); the temporary directory goes either way."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self._stop(timeout)
        finally:
            if self.notify_sock:
                self.notify_sock.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _stop(self, timeout):
        rc = self.proc.poll() if self.proc else None
        if self.proc is None:
            return
        if rc is not None:
            _LIVE.discard(self)
            raise AssertionError(f'daemon died during the test with status {rc}; log:\n{self.log()}')
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
            _LIVE.discard(self)
        except subprocess.TimeoutExpired:
            self._kill()
            raise AssertionError(f'daemon did not exit within {timeout} s of SIGTERM; log:\n{self.log()}')
        if rc != 0:
            raise AssertionError(f'daemon exited with {rc} after SIGTERM '
                                 f'({time.monotonic() - t0:.2f} s); log:\n{self.log()}')
        self.check_log_secrecy()

    def wait_exit(self, timeout=5.0):
        """For a test that has already sent SIGTERM itself: wait for the exit,
        run the secrecy checks, clean up; returns the exit status."""
        self.stopped = True
        try:
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill()
                raise AssertionError(f'daemon did not exit within {timeout} s; log:\n{self.log()}')
            _LIVE.discard(self)
            self.check_log_secrecy()
            return rc
        finally:
            if self.notify_sock:
                self.notify_sock.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def state_directory(self):
        return os.path.join(self.tmp, 'state')

    def restart(self, hard=False, timeout=10.0):
        """Stop the daemon, with SIGTERM (it must exit 0) or, when hard, with
        SIGKILL as a crash would, and start it again on the same state
        directory (and a new port)."""
        if hard:
            self._kill()
        else:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout)
            _LIVE.discard(self)
            if rc != 0:
                raise AssertionError(f'daemon exited with {rc} after SIGTERM; log:\n{self.log()}')
        self.start(timeout)
        return self

    def discard(self):
        """Kill without checks and remove the temporary directory."""
        self.stopped = True
        if self.proc and self.proc.poll() is None:
            self._kill()
        _LIVE.discard(self)
        if self.notify_sock:
            self.notify_sock.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_log_secrecy(self):
        log = self.log()
        for t in self.tokens:
            if t in log:
                raise AssertionError(f'a session token appears in the daemon log: {t}\n{log}')
        for s in self.secrets:
            if s in log:
                raise AssertionError(f'a secret appears in the daemon log: {s}\n{log}')

    def log(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except FileNotFoundError:
            return ''

    # -- clients -------------------------------------------------------------

    @property
    def host(self):
        return self._listen(self.port)

    def browser(self, origin=None, cookie=None):
        return Browser(self, origin=origin, cookie=cookie)

    def _note_cookie(self, header):
        name, _, rest = header.partition('=')
        if name.strip() == COOKIE_NAME:
            self.tokens.add(rest.split(';', 1)[0].strip())

    def raw(self, data, method='GET', timeout=5.0, half_close=False):
        """Send raw bytes on a fresh connection, return the parsed Response."""
        with socket.create_connection(('127.0.0.1', self.port), timeout=timeout) as s:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
            r = read_response(s, method, timeout)
        self.check_response(r)
        return r

    def check_response(self, r, method='GET'):
        """The rules every response follows (API.md 1, 2, 3)."""
        tc = unittest.TestCase()
        ctx = repr(r)
        tc.assertEqual(r.header('Cache-Control'), 'no-store', ctx)
        tc.assertEqual(r.header('X-Content-Type-Options'), 'nosniff', ctx)
        tc.assertLessEqual(len(r.header_all('Set-Cookie')), 1, ctx)
        for c in r.set_cookies():
            self._note_cookie(c)
        if r.status == 204 or method == 'HEAD':
            tc.assertEqual(r.body, b'', ctx)
        elif r.status == 200 and r.header('Content-Security-Policy') == 'sandbox':
            pass  # an artifact download: the bytes, with their own media type
        else:
            tc.assertEqual(r.header('Content-Type'), 'application/json; charset=utf-8', ctx)
            r.json  # parses strictly or raises
        if r.status >= 400:
            check_error_envelope(r)
        for t in self.tokens:
            tc.assertNotIn(t.encode(), r.body, 'session token in a response body')
            for k, v in r.headers.items():
                if k.lower() != 'set-cookie':
                    tc.assertNotIn(t, v, f'session token in response header {k}')
        for s in self.secrets:
            tc.assertNotIn(s.encode(), r.body, 'secret in a response body')


def check_error_envelope(r, code=None):
    """Exactly {"error": {"code": ..., "message": ...}}, status from the table."""
    tc = unittest.TestCase()
    ctx = repr(r)
    j = r.json
    tc.assertIsInstance(j, dict, ctx)
    tc.assertEqual(set(j.keys()), {'error'}, ctx)
    e = j['error']
    tc.assertIsInstance(e, dict, ctx)
    tc.assertEqual(set(e.keys()), {'code', 'message'}, ctx)
    tc.assertIsInstance(e['code'], str, ctx)
    tc.assertIsInstance(e['message'], str, ctx)
    tc.assertIn(e['code'], ERRORS, ctx)
    tc.assertEqual(r.status, ERRORS[e['code']], ctx)
    tc.assertLessEqual(len(e['message'].encode()), 1024, ctx)
    tc.assertNotIn('\n', e['message'], ctx)
    tc.assertNotIn('\r', e['message'], ctx)
    if code is not None:
        tc.assertEqual(e['code'], code, ctx)
    if e['code'] in ('busy', 'queue_full', 'storage_unavailable'):
        ra = r.header('Retry-After')
        tc.assertIsNotNone(ra, f'{e["code"]} without Retry-After: {ctx}')
        tc.assertRegex(ra, r'^[0-9]+$', ctx)
        tc.assertGreaterEqual(int(ra), 1, ctx)


class Browser:
    """One browser: a cookie jar holding the wikiweb_session cookie, an
    optional Origin header sent with every request, one connection per
    request (unless a persistent one is asked for)."""

    def __init__(self, daemon, origin=None, cookie=None):
        self.d = daemon
        self.origin = origin
        self.cookie = cookie
        if cookie:
            daemon.tokens.add(cookie)
        self.last = None

    def request(self, method, path, body=None, headers=None, content_type='application/json',
                send_cookie=True, origin=True, timeout=10.0):
        h = {'Host': self.d.host, 'Connection': 'close'}
        if origin is True and self.origin:
            h['Origin'] = self.origin
        elif isinstance(origin, str):
            h['Origin'] = origin
        if send_cookie and self.cookie:
            h['Cookie'] = f'{COOKIE_NAME}={self.cookie}'
        if body is not None:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            elif isinstance(body, str):
                body = body.encode()
            if content_type:
                h['Content-Type'] = content_type
        if headers:
            for k, v in headers.items():
                if v is None:
                    h.pop(k, None)
                else:
                    h[k] = v
        conn = http.client.HTTPConnection('127.0.0.1', self.d.port, timeout=timeout)
        t0 = time.monotonic()
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in h.items():
                conn.putheader(k, v)
            if body is not None and not any(k.lower() in ('content-length', 'transfer-encoding')
                                            for k in h):
                conn.putheader('Content-Length', str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
            r = Response(resp.status, resp.reason, resp.msg, data, time.monotonic() - t0)
        finally:
            conn.close()
        self.d.check_response(r, method)
        for c in r.set_cookies():
            name, _, rest = c.partition('=')
            if name.strip() == COOKIE_NAME:
                self.cookie = rest.split(';', 1)[0].strip()
        self.last = r
        return r

    def get(self, path, **kw):
        return self.request('GET', path, **kw)

    def post(self, path, body=None, **kw):
        return self.request('POST', path, body=body, **kw)

    def delete(self, path, **kw):
        return self.request('DELETE', path, **kw)

    # -- API shortcuts -------------------------------------------------------

    def join(self, **kw):
        return self.post(API + '/queue/join', **kw)

    def status(self, **kw):
        return self.get(API + '/queue/status', **kw)

    def leave(self, **kw):
        return self.delete(API + '/queue/ticket', **kw)

    def stream(self, path, **kw):
        """An EventStream of this browser's session (API.md 11)."""
        if self.cookie is None:
            self.status()  # get a session first
        if self.origin and 'headers' not in kw:
            kw['headers'] = {'Origin': self.origin}
        return EventStream(self.d, path, cookie=self.cookie, **kw)

    def queue_events(self, **kw):
        return self.stream(API + '/queue/events', **kw)

    def query(self, question='What is an apple?', **kw):
        body = kw.pop('body', None)
        if body is None:
            body = {'question': question}
        return self.post(API + '/query', body=body, **kw)


class EventStream:
    """A Server-Sent Events client reading the raw stream (API.md 11), as a
    browser's EventSource would but without its reconnects: one request on
    a connection of its own, the response head, then the chunked body
    parsed into events as it arrives (WHATWG HTML 9.2: lines end at CR, LF
    or CRLF; comments start with ':'; an empty line dispatches).

    If the response is not a stream (an error), .response holds it parsed
    and .events() yields nothing."""

    def __init__(self, daemon, path, method='GET', cookie=None, headers=None, body=None,
                 timeout=10.0, rcvbuf=None, source=None):
        self.d = daemon
        family = socket.AF_INET6 if ':' in daemon.listen_host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source:
            # The client's own loopback address (a trusted proxy's or not).
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect((daemon.listen_host, daemon.port))
        h = {'Host': daemon.host, 'Accept': 'text/event-stream'}
        if cookie:
            h['Cookie'] = f'{COOKIE_NAME}={cookie}'
        if body is not None:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            h['Content-Type'] = 'application/json'
            h['Content-Length'] = str(len(body))
        for k, v in (headers or {}).items():
            if v is None:
                h.pop(k, None)
            else:
                h[k] = v
        req = f'{method} {path} HTTP/1.1\r\n' + ''.join(f'{k}: {v}\r\n' for k, v in h.items()) + '\r\n'
        self.sent_at = time.monotonic()
        self.sock.sendall(req.encode() + (body or b''))
        self.buf = b''
        self.eof = False
        self.comments = []      # comment lines seen (without the ':')
        self.last_id = None
        self._read_head()

    # -- transport ---------------------------------------------------------

    def _fill(self, timeout):
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
        self.buf += data
        return bool(data)

    def _read_head(self):
        while b'\r\n\r\n' not in self.buf:
            if not self._fill(10.0):
                raise AssertionError(f'connection closed before a response head: {self.buf!r}')
        head, self.buf = self.buf.split(b'\r\n\r\n', 1)
        lines = head.decode('latin-1').split('\r\n')
        self.status = int(lines[0].split()[1])
        self.headers = http.client.HTTPMessage()
        for line in lines[1:]:
            k, _, v = line.partition(':')
            self.headers[k.strip()] = v.strip()
        for c in self.headers.get_all('Set-Cookie') or []:
            self.d._note_cookie(c)
        self.chunked = (self.headers.get('Transfer-Encoding') or '').lower() == 'chunked'
        self.body = b''          # the decoded body so far, not yet parsed into events
        self.chunks_done = False
        self.response = None
        if not (self.headers.get('Content-Type') or '').startswith('text/event-stream'):
            # An ordinary response: read it whole.
            n = int(self.headers.get('Content-Length') or 0)
            while len(self.buf) < n and self._fill(10.0):
                pass
            self.response = Response(self.status, '', self.headers, self.buf[:n], 0.0)
            self.d.check_response(self.response)
            self.close()

    def _decode_chunks(self):
        """Move complete chunks from buf to body; True at the last chunk."""
        if not self.chunked:
            self.body += self.buf
            self.buf = b''
            return self.eof
        while not self.chunks_done:
            line_end = self.buf.find(b'\r\n')
            if line_end < 0:
                return False
            size = int(self.buf[:line_end].split(b';')[0], 16)
            if size == 0:
                # The last chunk (trailers, if any, are not read).
                self.chunks_done = True
                self.buf = b''
                return True
            if len(self.buf) < line_end + 2 + size + 2:
                return False
            self.body += self.buf[line_end + 2:line_end + 2 + size]
            self.buf = self.buf[line_end + 2 + size + 2:]
        return True

    # -- events ------------------------------------------------------------

    def _parse_one(self):
        """One dispatched event from body, or None if none is complete."""
        while True:
            m = re.search(rb'\r\n|\r|\n', self.body)
            if not m:
                return None
            # A CR at the very end may be the first half of a CRLF.
            if m.group() == b'\r' and m.end() == len(self.body) and not self.chunks_done:
                return None
            line = self.body[:m.start()].decode('utf-8')
            self.body = self.body[m.end():]
            if line == '':
                if self._fields:
                    ev, self._fields = self._fields, {}
                    return ev
                continue
            if line.startswith(':'):
                self.comments.append(line[1:].strip())
                continue
            k, _, v = line.partition(':')
            if v.startswith(' '):
                v = v[1:]
            if k in self._fields:
                raise AssertionError(f'field {k} twice in one event: {line!r}')
            self._fields[k] = v

    _fields = None

    def next_event(self, timeout=10.0):
        """The next event as {'id': int, 'event': str, 'data': parsed JSON,
        'at': monotonic arrival}; None at the end of the stream. Raises
        socket.timeout if none arrives in time."""
        if self._fields is None:
            self._fields = {}
        deadline = time.monotonic() + timeout
        while True:
            done = self._decode_chunks()
            ev = self._parse_one()
            if ev is not None:
                return self._check(ev)
            if done or self.eof:
                self.close()
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout('no event in time')
            self._fill(left)

    def _check(self, ev):
        tc = unittest.TestCase()
        tc.assertEqual(set(ev.keys()), {'id', 'event', 'data'}, ev)
        tc.assertRegex(ev['id'], r'^[1-9][0-9]*$', ev)
        i = int(ev['id'])
        if self.last_id is not None:
            tc.assertGreater(i, self.last_id, 'event ids increase')
        self.last_id = i
        data = strict_json(ev['data'].encode())
        tc.assertIsInstance(data, dict, ev)
        for t in self.d.tokens:
            tc.assertNotIn(t, ev['data'], 'session token in an event')
        return {'id': i, 'event': ev['event'], 'data': data, 'at': time.monotonic()}

    def events(self, timeout=10.0):
        """Every event up to the end of the stream."""
        out = []
        while True:
            ev = self.next_event(timeout)
            if ev is None:
                return out
            out.append(ev)

    def wait_for(self, name, timeout=10.0, where=None):
        """Events until one named name (for which where(data) holds); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next_event(max(0.01, deadline - time.monotonic()))
            if ev is None:
                raise AssertionError(f'stream ended before a {name} event')
            if ev['event'] == name and (where is None or where(ev['data'])):
                return ev

    def check_stream_headers(self):
        tc = unittest.TestCase()
        tc.assertEqual(self.status, 200)
        tc.assertEqual(self.headers.get('Content-Type'), 'text/event-stream; charset=utf-8')
        tc.assertEqual(self.headers.get('Cache-Control'), 'no-store')
        tc.assertEqual(self.headers.get('X-Accel-Buffering'), 'no')
        tc.assertEqual(self.headers.get('X-Content-Type-Options'), 'nosniff')
        tc.assertIsNone(self.headers.get('Content-Length'))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def check_slots_object(slots, ctx=''):
    """The "slots" object of the status object and of health (API.md 6)."""
    tc = unittest.TestCase()
    tc.assertIsInstance(slots, dict, ctx)
    tc.assertEqual(set(slots.keys()), SLOTS_KEYS, ctx)
    for k in SLOTS_KEYS:
        tc.assertTrue(is_int(slots[k]) and slots[k] >= 0, ctx)
    tc.assertTrue(1 <= slots['total'] <= 256, ctx)
    tc.assertEqual(slots['idle'] + slots['reserved'] + slots['running'], slots['total'], ctx)
    return slots


def check_status_object(obj, now=None):
    """The status object of API.md 6: exact keys, exact types, consistency."""
    tc = unittest.TestCase()
    ctx = json.dumps(obj)
    tc.assertIsInstance(obj, dict, ctx)
    tc.assertEqual(set(obj.keys()), STATUS_KEYS, ctx)
    tc.assertIn(obj['state'], ('idle', 'reserved', 'running'), ctx)
    for k in ('queue_length', 'max_length', 'reservation_seconds', 'heartbeat_seconds',
              'poll_after_seconds'):
        tc.assertTrue(is_int(obj[k]), f'{k} is not an integer: {ctx}')
        tc.assertGreaterEqual(obj[k], 0, ctx)
    tc.assertLessEqual(obj['queue_length'], obj['max_length'], ctx)
    tc.assertEqual(obj['poll_after_seconds'], max(1, obj['heartbeat_seconds'] // 3), ctx)
    slots = check_slots_object(obj['slots'], ctx)
    # API.md 5: the controller's state follows from its slots.
    tc.assertEqual(obj['state'], 'running' if slots['running'] else 'reserved' if slots['reserved'] else 'idle', ctx)
    for k in ('estimated_wait_seconds', 'average_query_seconds'):
        v = obj[k]
        tc.assertTrue(v is None or is_number(v), f'{k} is neither null nor a number: {ctx}')
        if v is not None:
            tc.assertGreaterEqual(v, 0, ctx)
    # API.md "Identity": the user a trusted proxy named, null without one.
    u = obj['user']
    tc.assertTrue(u is None or (isinstance(u, str) and 1 <= len(u.encode()) <= 256), ctx)
    # API.md 5, the wait range: null exactly when the wait is not known, and
    # ordered when it is.
    tc.assertIsInstance(obj['wait_known'], bool, ctx)
    wr = obj['estimated_wait_range_seconds']
    tc.assertEqual(wr is not None, obj['wait_known'], ctx)
    if wr is not None:
        tc.assertEqual(set(wr.keys()), {'p10', 'p50', 'p90'}, ctx)
        tc.assertTrue(all(is_number(wr[k]) for k in wr), ctx)
        tc.assertTrue(0 <= wr['p10'] <= wr['p50'] <= wr['p90'], ctx)
    rq = obj['running_query']
    if rq is not None:
        # API.md 11.4: the caller's own query, while it runs.
        tc.assertEqual(set(rq.keys()), {'id', 'step', 'phase'}, ctx)
        tc.assertRegex(rq['id'], QUERY_ID_RE, ctx)
        tc.assertTrue(is_int(rq['step']) and rq['step'] >= 0, ctx)
        tc.assertIn(rq['phase'], ('model', 'wiki', 'sandbox', 'cleanup'), ctx)
        tc.assertEqual(obj['state'], 'running', ctx)
    if obj['state'] == 'idle':
        # Promotion is immediate: never observably idle while a ticket waits.
        tc.assertEqual(obj['queue_length'], 0, ctx)
    t = obj['ticket']
    if t is not None:
        check_ticket_object(t, obj['heartbeat_seconds'], obj['reservation_seconds'], now)
        tc.assertGreaterEqual(obj['queue_length'], 1, ctx)
        tc.assertLess(t['position'], obj['queue_length'] + (0 if t['status'] == 'reserved' else 1), ctx)
        if t['status'] == 'reserved':
            tc.assertGreaterEqual(slots['reserved'], 1, ctx)
            tc.assertEqual(obj['estimated_wait_seconds'], 0, ctx)
        else:
            tc.assertNotEqual(obj['state'], 'idle', ctx)
    return obj


def check_ticket_object(t, hb, res, now=None):
    tc = unittest.TestCase()
    ctx = json.dumps(t)
    tc.assertIsInstance(t, dict, ctx)
    tc.assertEqual(set(t.keys()), TICKET_KEYS, ctx)
    tc.assertIsInstance(t['id'], str, ctx)
    tc.assertRegex(t['id'], TICKET_ID_RE, ctx)
    tc.assertIn(t['status'], ('waiting', 'reserved'), ctx)
    tc.assertTrue(is_int(t['position']), ctx)
    joined = parse_time(t['joined_at'])
    hb_exp = parse_time(t['heartbeat_expires_at'])
    tc.assertGreaterEqual(hb_exp, joined + hb - 0.01, ctx)
    if now is not None:
        tc.assertLessEqual(joined, now + 1.0, ctx)
        tc.assertGreater(hb_exp, now - 0.5, ctx)
        tc.assertLessEqual(hb_exp, now + hb + 1.0, ctx)
    if t['status'] == 'reserved':
        tc.assertEqual(t['position'], 0, ctx)
        tc.assertIsInstance(t['reservation_expires_at'], str, ctx)
        r = parse_time(t['reservation_expires_at'])
        tc.assertGreaterEqual(r, joined + res - 0.01, ctx)
        if now is not None:
            tc.assertLessEqual(r, now + res + 1.0, ctx)
    else:
        tc.assertGreaterEqual(t['position'], 1, ctx)
        tc.assertIsNone(t['reservation_expires_at'], ctx)


def check_set_cookie(tc, header, secure, max_age=2592000):
    """Exactly `wikiweb_session=<43 base64url>; Path=/; HttpOnly; SameSite=Lax;
    Max-Age=N` plus `Secure` when secure (attribute order free). Returns the token."""
    parts = [p.strip() for p in header.split(';')]
    name, _, value = parts[0].partition('=')
    tc.assertEqual(name, COOKIE_NAME, header)
    tc.assertRegex(value, TOKEN_RE, header)
    # 32 random bytes: 43 characters, the last one carrying 4 bits.
    tc.assertEqual(len(base64.urlsafe_b64decode(value + '=')), 32, header)
    want = {'Path=/', 'HttpOnly', 'SameSite=Lax', f'Max-Age={max_age}'}
    if secure:
        want.add('Secure')
    tc.assertEqual(sorted(parts[1:]), sorted(want), header)
    return value


def has_test_faults():
    """Whether WIKIWEBD has the test fault switches (wikiwebd-test has them)."""
    with open(WIKIWEBD, 'rb') as f:
        return b'WIKI_WEB_TEST_FAULTS' in f.read()


class DaemonTestCase(unittest.TestCase):
    """Base class: self.daemon(**env) starts a daemon stopped (and checked)
    at the end of the test."""

    maxDiff = None

    def daemon(self, socket_activation=True, args=(), notify=False, metrics=False, listen_host='127.0.0.1',
               **env):
        if 'WIKI_WEB_TEST_FAULTS' in env and not has_test_faults():
            self.skipTest(f'{WIKIWEBD} is built without the test fault switches (run build/wikiwebd-test)')
        d = Daemon(self, socket_activation=socket_activation, args=args, notify=notify, metrics=metrics,
                   listen_host=listen_host, **env)
        try:
            d.start()
        except BaseException:
            d.discard()
            raise
        self.addCleanup(d.stop)
        return d

    def assertError(self, r, code):
        check_error_envelope(r, code)

    def assertStatus(self, r, status):
        self.assertEqual(r.status, status, repr(r))

    def queue_length(self, d):
        """queue_length as seen by a fresh session (which gets no ticket)."""
        r = d.browser().status()
        self.assertStatus(r, 200)
        return check_status_object(r.json)['queue_length']

    def peek(self, d):
        r = d.browser().status()
        self.assertStatus(r, 200)
        return check_status_object(r.json)

    def wait_state(self, d, state, timeout=5.0):
        """Poll (from fresh sessions, which hold no ticket) until the
        controller is in `state`; returns the status object."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.peek(d)
            if s['state'] == state or time.monotonic() > deadline:
                self.assertEqual(s['state'], state, json.dumps(s))
                return s
            time.sleep(0.02)

    def wait_ticket(self, browser, status, timeout=5.0):
        """Poll browser's own status (a heartbeat too) until its ticket has
        `status`; returns the status object."""
        deadline = time.monotonic() + timeout
        while True:
            r = browser.status()
            self.assertStatus(r, 200)
            s = check_status_object(r.json)
            t = s['ticket']
            if (t and t['status'] == status) or time.monotonic() > deadline:
                self.assertIsNotNone(t, json.dumps(s))
                self.assertEqual(t['status'], status, json.dumps(s))
                return s
            time.sleep(0.02)


def _kill_live():
    for d in list(_LIVE):
        d.discard()


def _on_sigterm(signo, frame):
    _kill_live()
    os._exit(1)


def main():
    global WIKIWEBD
    # meson's timeout sends SIGTERM: leave no daemon behind.
    atexit.register(_kill_live)
    signal.signal(signal.SIGTERM, _on_sigterm)
    args = sys.argv[1:]
    if args and not args[0].startswith('-'):
        WIKIWEBD = os.path.abspath(args.pop(0))
    else:
        WIKIWEBD = os.environ.get('WIKIWEBD')
    if not WIKIWEBD or not os.access(WIKIWEBD, os.X_OK):
        print(f'wikiwebd executable not found ({WIKIWEBD!r}); pass it as the first argument',
              file=sys.stderr)
        sys.exit(1)
    if not os.access(SSA, os.X_OK):
        skip_or_fail('systemd-socket-activate not found (install the systemd package)')
    prog = unittest.main(argv=[sys.argv[0]] + args, exit=False, verbosity=2)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    if r.testsRun == 0:
        skip_or_fail('no test ran')
    sys.exit(0)
