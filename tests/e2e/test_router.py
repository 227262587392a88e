#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The several-model-servers recipe of docs/QUERY.md and wikiwebd(8):
WIKI_WEB_LLM_URL pointing at nginx with an upstream of two scripted model
servers (least_conn, proxy_buffering off). Queries spread over both, and
each query stream arrives whole and as it is written, not at once at the
end. Loopback only; nginx runs unprivileged with its files in a temporary
directory."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
from harness import API  # noqa: E402
from test_pipeline import PipelineBase, WIKIS  # noqa: E402

NGINX = shutil.which('nginx') or '/usr/sbin/nginx'
ANSWER = 'Apples come from the orchard; the wiki says 1410 kg were picked in 2023 [Apple].'
QUERIES = 4


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Router(PipelineBase):

    def nginx(self, backends):
        """nginx on a free loopback port in front of backends (ports); its
        base URL."""
        if not os.access(NGINX, os.X_OK):
            harness.skip_or_fail('nginx is not installed')
        d = tempfile.mkdtemp(prefix='wikiweb-router-')
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        port = free_port()
        servers = ''.join(f'                server 127.0.0.1:{p};\n' for p in backends)
        conf = os.path.join(d, 'nginx.conf')
        with open(conf, 'w') as f:
            f.write(f'''daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
        access_log off;
        client_body_temp_path {d}/body;
        proxy_temp_path {d}/proxy;
        fastcgi_temp_path {d}/fastcgi;
        uwsgi_temp_path {d}/uwsgi;
        scgi_temp_path {d}/scgi;
        upstream llm {{
                least_conn;
{servers}        }}
        server {{
                listen 127.0.0.1:{port};
                location / {{
                        proxy_pass http://llm;
                        proxy_http_version 1.1;
                        proxy_set_header Connection "";
                        proxy_buffering off;
                        proxy_read_timeout 300s;
                }}
        }}
}}
''')
        p = subprocess.Popen([NGINX, '-c', conf, '-p', d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def stop():
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.addCleanup(stop)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(('127.0.0.1', port), timeout=1).close()
                break
            except OSError:
                if p.poll() is not None or time.monotonic() > deadline:
                    with open(os.path.join(d, 'error.log')) as f:
                        raise AssertionError('nginx did not start: ' + f.read())
                time.sleep(0.05)
        return f'http://127.0.0.1:{port}/v1'

    def test_two_servers_behind_nginx(self):
        # Each answer is written in pieces 0.15 s apart: a buffering proxy
        # would hand it over at the end, all at once.
        steps = [{'answer': ANSWER, 'piece': 12, 'chunk_delay': 0.15}] * QUERIES
        a, b = self.llm(steps), self.llm(steps)
        url = self.nginx([a.port, b.port])
        d = self.pipeline_daemon(type('LLM', (), {'url': url})())
        for i in range(QUERIES):
            br = d.browser()
            br.status()
            s = harness.EventStream(d, API + '/query', method='POST', cookie=br.cookie,
                                    body={'question': f'How many apples, question {i}?'}, timeout=60)
            self.addCleanup(s.close)
            evs, at = [], []
            while True:
                ev = s.next_event(60)
                if ev is None:
                    break
                evs.append(ev)
                at.append(time.monotonic())
            kinds = [e['event'] for e in evs]
            self.assertEqual(kinds[0], 'query', kinds)
            self.assertEqual(kinds[-1], 'record', kinds)
            texts = [e for e in evs if e['event'] == 'text']
            self.assertEqual(''.join(e['data']['delta'] for e in texts), ANSWER)
            rec = evs[-1]['data']
            self.assertEqual((rec['status'], rec['answer']), ('succeeded', ANSWER), rec)
            # Streamed through: the text came in several events, spread
            # over the time the server took to write it (7 pieces, 0.15 s
            # apart), not all at the end.
            self.assertGreater(len(texts), 2, kinds)
            first_text = at[kinds.index('text')]
            self.assertGreater(at[-1] - first_text, 0.5, (kinds, at))
            self.wait_state(d, 'idle')
        # Spread over both servers, every request answered by one of them.
        na, nb = len(a.chat_requests()), len(b.chat_requests())
        self.assertEqual(na + nb, QUERIES, (na, nb))
        self.assertGreaterEqual(min(na, nb), 1, (na, nb))


if __name__ == '__main__':
    try:
        harness.main()
    finally:
        for w in WIKIS.values():
            w.stop()
