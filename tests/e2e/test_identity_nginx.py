#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md "Identity" behind a real nginx: HTTP basic authentication with
two users, `proxy_set_header X-Remote-User $remote_user`, the event streams
with `proxy_buffering off`.

nginx listens on 127.0.0.1 and connects to the daemon from 127.0.0.2
(`proxy_bind`), the only trusted proxy; the daemon listens on 127.0.0.1.
Skipped (77) without nginx. All traffic goes to loopback addresses."""

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import types

import harness

API = harness.API
PROXY = '127.0.0.2'
USERS = {'alice': 'apple-pie', 'bob': 'banana-split'}
NGINX = shutil.which('nginx') or '/usr/sbin/nginx'


class Nginx:
    """nginx in front of daemon d, on a free loopback port, in a directory
    of its own, in the foreground; stopped by stop()."""

    def __init__(self, d):
        self.d = d
        self.dir = os.path.join(d.tmp, 'nginx')
        os.makedirs(os.path.join(self.dir, 'logs'))
        with open(os.path.join(self.dir, 'htpasswd'), 'w') as f:
            for u, p in USERS.items():
                f.write(f'{u}:{{PLAIN}}{p}\n')
        self.port = harness.free_port()
        temp = os.path.join(self.dir, 'temp')
        conf = f'''
worker_processes 1;
error_log {self.dir}/logs/error.log info;
pid {self.dir}/nginx.pid;
{"user root;" if os.geteuid() == 0 else ""}
events {{ worker_connections 64; }}
http {{
    access_log {self.dir}/logs/access.log;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        location / {{
            auth_basic "wiki questions";
            auth_basic_user_file {self.dir}/htpasswd;
            proxy_pass http://127.0.0.1:{d.port};
            proxy_bind {PROXY};
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header Connection "";
            proxy_set_header X-Remote-User $remote_user;
            proxy_buffering off;
            proxy_read_timeout 60s;
        }}
    }}
}}
'''
        os.makedirs(temp)
        self.conf = os.path.join(self.dir, 'nginx.conf')
        with open(self.conf, 'w') as f:
            f.write(conf)
        with open(os.path.join(self.dir, 'logs', 'stderr'), 'wb') as err:
            self.proc = subprocess.Popen([NGINX, '-p', self.dir, '-c', self.conf, '-g', 'daemon off;'],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(('127.0.0.1', self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f'nginx did not start: {self.log()}')
                time.sleep(0.05)
        # What EventStream needs of a daemon, pointing at nginx.
        self.front = types.SimpleNamespace(listen_host='127.0.0.1', port=self.port,
                                           host=f'127.0.0.1:{self.port}', tokens=d.tokens)

    def log(self):
        out = ''
        for name in ('stderr', 'error.log'):
            try:
                with open(os.path.join(self.dir, 'logs', name), errors='replace') as f:
                    out += f.read()
            except FileNotFoundError:
                pass
        return out

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGQUIT)
            self.proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def auth(user, password=None):
    password = USERS[user] if password is None else password
    return 'Basic ' + base64.b64encode(f'{user}:{password}'.encode()).decode()


class Person:
    """One browser of one person through nginx: a cookie jar and the
    person's credentials."""

    def __init__(self, n, user, password=None):
        self.n = n
        self.user = user
        self.password = password
        self.cookie = None

    def request(self, method, path, body=None, headers=None, host=None):
        h = [('Authorization', auth(self.user, self.password))] + list((headers or {}).items())
        host = host or f'127.0.0.1:{self.n.port}'
        lines = [f'{method} {path} HTTP/1.1', f'Host: {host}', 'Connection: close']
        lines += [f'{k}: {v}' for k, v in h]
        if self.cookie:
            lines.append(f'Cookie: {harness.COOKIE_NAME}={self.cookie}')
        data = b''
        if body is not None:
            data = body.encode()
            lines += ['Content-Type: application/json', f'Content-Length: {len(data)}']
        with socket.create_connection(('127.0.0.1', self.n.port), timeout=10) as s:
            s.sendall(('\r\n'.join(lines) + '\r\n\r\n').encode() + data)
            r = harness.read_response(s, method, 10)
        for c in r.set_cookies():
            name, _, rest = c.partition('=')
            if name.strip() == harness.COOKIE_NAME:
                self.cookie = rest.split(';', 1)[0].strip()
                self.n.d.tokens.add(self.cookie)
        return r

    def stream(self, path, method='GET', body=None):
        h = {'Authorization': auth(self.user)}
        return harness.EventStream(self.n.front, path, method=method, cookie=self.cookie, headers=h, body=body)


class IdentityBehindNginx(harness.DaemonTestCase):

    def setUp(self):
        if not os.path.exists(NGINX):
            harness.skip_or_fail('nginx is not installed (nginx-light)')

    def front(self, **env):
        d = self.daemon(WIKI_WEB_TRUSTED_PROXIES=PROXY + '/32', **env)
        n = Nginx(d)
        self.addCleanup(n.stop)
        return d, n

    def test_two_users_own_history(self):
        d, n = self.front()
        alice, bob = Person(n, 'alice'), Person(n, 'bob')
        # nginx itself refuses a wrong password.
        self.assertStatus(Person(n, 'alice', 'wrong').request('GET', API + '/queue/status'), 401)

        st = alice.request('GET', API + '/queue/status')
        self.assertStatus(st, 200)
        self.assertEqual(harness.check_status_object(st.json)['user'], 'alice')
        # A header the client sends is replaced by nginx's.
        st = bob.request('GET', API + '/queue/status', headers={'X-Remote-User': 'alice'})
        self.assertEqual(st.json['user'], 'bob')

        q = '{"question": "What is an apple?"}'
        r = alice.request('POST', API + '/query', body=q)
        self.assertError(r, 'execution_failed')
        alice_query = r.header('Wikiweb-Query-Id')
        r = bob.request('POST', API + '/query', body=q)
        bob_query = r.header('Wikiweb-Query-Id')
        # Each sees only their own history, on any device.
        laptop = Person(n, 'alice')
        r = laptop.request('GET', API + '/history')
        self.assertEqual([i['id'] for i in r.json['items']], [alice_query])
        r = bob.request('GET', API + '/history')
        self.assertEqual([i['id'] for i in r.json['items']], [bob_query])
        self.assertError(bob.request('GET', API + '/history/' + alice_query), 'query_not_found')
        # Bob with alice's cookie is still bob.
        bob.cookie = alice.cookie
        r = bob.request('GET', API + '/history')
        self.assertEqual([i['id'] for i in r.json['items']], [bob_query])
        self.assertNotEqual(bob.cookie, alice.cookie)
        self.assertIn(f'Query {alice_query} asked by user alice', d.log())

    def test_one_place_for_two_sessions(self):
        d, n = self.front()
        other = Person(n, 'bob')
        self.assertStatus(other.request('POST', API + '/queue/join'), 201)  # holds the slot
        phone, laptop = Person(n, 'alice'), Person(n, 'alice')
        r1 = phone.request('POST', API + '/queue/join')
        r2 = laptop.request('POST', API + '/queue/join')
        self.assertStatus(r1, 201)
        self.assertStatus(r2, 200)
        self.assertEqual(r1.json['ticket']['id'], r2.json['ticket']['id'])
        self.assertEqual(r2.json['queue_length'], 2)

    def test_streams_through_nginx(self):
        d, n = self.front()
        alice = Person(n, 'alice')
        self.assertStatus(alice.request('POST', API + '/queue/join'), 201)
        s = alice.stream(API + '/queue/events')
        try:
            self.assertEqual(s.status, 200)
            ev = s.wait_for('status', timeout=10)
            self.assertEqual(ev['data']['user'], 'alice')
        finally:
            s.close()
        # A query's stream arrives event by event and ends with its record.
        s = alice.stream(API + '/query', method='POST', body={'question': 'What is an apple?'})
        try:
            self.assertEqual(s.status, 200)
            names = [e['event'] for e in s.events(timeout=20)]
        finally:
            s.close()
        self.assertEqual(names[0], 'query', names)
        self.assertEqual(names[-1], 'record', names)
        # The record is alice's and nobody else's.
        r = alice.request('GET', API + '/history')
        self.assertEqual(len(r.json['items']), 1)
        self.assertEqual(len(Person(n, 'bob').request('GET', API + '/history').json['items']), 0)

    def test_rebinding_through_nginx(self):
        """nginx forwards the client's Host ($host, without its port): a
        page on a name resolving to the proxy is refused by the daemon,
        signed in or not, and a listed name works."""
        d, n = self.front(WIKI_WEB_ALLOWED_HOSTS='wiki.example.com')
        alice = Person(n, 'alice')
        evil = f'evil.example.com:{n.port}'
        for method, path, body in (('POST', API + '/queue/join', None),
                                   ('POST', API + '/query', '{"question": "What is an apple?"}'),
                                   ('GET', API + '/history', None),
                                   ('GET', '/', None)):
            r = alice.request(method, path, body=body, host=evil,
                              headers={'Origin': f'http://{evil}'} if method == 'POST' else None)
            self.assertError(r, 'origin_denied')
            self.assertEqual(r.json['error']['message'], 'Host not allowed')
            self.assertEqual(r.set_cookies(), [])
        self.assertEqual(alice.request('GET', API + '/history').json['items'], [])
        self.assertStatus(alice.request('GET', API + '/queue/status'), 200)
        self.assertStatus(alice.request('GET', API + '/queue/status', host=f'wiki.example.com:{n.port}'), 200)
        r = alice.request('POST', API + '/queue/join', host='WIKI.example.com',
                          headers={'Origin': 'http://wiki.example.com'})
        self.assertStatus(r, 201)
        self.assertIn('Host is no name of this daemon', d.log())


if __name__ == '__main__':
    harness.main()
