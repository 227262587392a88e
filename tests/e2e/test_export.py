#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 9 "Export of a whole history": GET /api/v1/history/export, one
ZIP made as it is sent. Two people with records, a follow-up chain and
artifacts (put into the store as the sandbox keeps them, among them
hostile and duplicate names): every record of the person and nothing of
the other's, the Markdown equal to GET /history/{id}/export, records.json
equal to the listing, the artifacts equal to their downloads. An empty
history (a valid, empty ZIP); the other methods; a client that goes away
midway; a few hundred records with large artifacts under a bounded
resident size.

Query execution is not configured, so every query fails at once with
execution_failed: its record is complete all the same."""

import hashlib
import io
import json
import os
import socket
import sqlite3
import time
import zipfile

import harness

API = harness.API


def add_artifact(d, qid, name, data, n):
    """An artifact of qid, kept as the store keeps the sandbox's."""
    aid = 'af_%032x' % n
    db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
    with db:
        db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                   ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                   (aid, qid, name, 'application/octet-stream', len(data), hashlib.sha256(data).hexdigest(), data))
    db.close()
    return aid


def vm_kib(pid, field):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise AssertionError(f'no {field} for {pid}')


def daemon_pid(d):
    """The wikiwebd process (the socket activator execs it)."""
    return d.proc.pid


class Export(harness.DaemonTestCase):

    def ask(self, d, b, question, follow_up=None):
        body = {'question': question}
        if follow_up:
            body['follow_up'] = follow_up
        r = b.post(f'{API}/query', body)
        self.assertError(r, 'execution_failed')
        self.wait_state(d, 'idle')
        return r.header('Wikiweb-Query-Id')

    def listing(self, b):
        items, cursor = [], None
        while True:
            r = b.get(f'{API}/history?limit=100' + (f'&cursor={cursor}' if cursor else ''))
            self.assertStatus(r, 200)
            items += r.json['items']
            cursor = r.json['next_cursor']
            if not cursor:
                return items

    def export(self, b):
        r = b.get(f'{API}/history/export', timeout=60)
        self.assertStatus(r, 200)
        self.assertEqual(r.header('Content-Type'), 'application/zip')
        self.assertRegex(r.header('Content-Disposition'),
                         r'^attachment; filename="wikiweb-history-\d{4}-\d\d-\d\d\.zip"$')
        self.assertEqual(r.header('Content-Security-Policy'), 'sandbox')
        z = zipfile.ZipFile(io.BytesIO(r.body))
        self.assertIsNone(z.testzip())
        return z

    def check_export(self, b, z):
        """The ZIP holds b's history as the API shows it, and nothing else."""
        items = self.listing(b)
        names = z.namelist()
        self.assertEqual(len(names), len(set(names)), names)
        for n in names:
            self.assertFalse(n.startswith('/') or '\\' in n or '..' in n.split('/'), n)
        self.assertEqual(json.loads(z.read('records.json')), items)

        followed = {x['follow_up'] for x in items if x['follow_up']}
        leaves = [x['id'] for x in items if x['id'] not in followed]
        mds = sorted(n for n in names if n.startswith('conversations/'))
        self.assertEqual(mds, sorted(f'conversations/{i}.md' for i in leaves))
        for i in leaves:
            self.assertEqual(z.read(f'conversations/{i}.md'), b.get(f'{API}/history/{i}/export').body, i)

        arts = [n for n in names if n.startswith('artifacts/')]
        expected = 0
        for x in items:
            for a in x['artifacts']:
                expected += 1
                got = [n for n in arts if n.startswith(f'artifacts/{x["id"]}/')
                       and z.getinfo(n).file_size == a['size_bytes']
                       and hashlib.sha256(z.read(n)).hexdigest() == a['sha256']]
                self.assertTrue(got, (a, arts))
                self.assertEqual(z.read(got[0]), b.get(a['download_url']).body)
        self.assertEqual(len(arts), expected)
        self.assertEqual(len(names), 1 + len(leaves) + expected)
        return items

    def test_two_people(self):
        d = self.daemon()
        alice, bob = d.browser(), d.browser()
        q1 = self.ask(d, alice, 'What does the apple tree like?')
        q2 = self.ask(d, alice, 'And the pear?', follow_up=q1)
        q3 = self.ask(d, alice, 'And the plum?', follow_up=q2)
        q4 = self.ask(d, alice, 'Who owns the orchard?')
        qb = self.ask(d, bob, "Bob's own question")
        self.assertEqual(alice.get(f'{API}/history/{q3}').json['conversation'], q1)

        big = os.urandom(300 * 1024)  # several pieces, not compressible
        add_artifact(d, q1, 'kg.csv', b'fruit,kg\napple,1410\n', 1)
        add_artifact(d, q1, 'kg.csv', b'fruit,kg\npear,12\n', 2)  # the same name again
        add_artifact(d, q3, '../../etc/passwd', b'not a passwd', 3)
        add_artifact(d, q3, 'Zürich.txt', 'Grüezi'.encode(), 4)
        add_artifact(d, q4, 'big.bin', big, 5)
        add_artifact(d, q4, '', b'empty name', 6)
        add_artifact(d, qb, 'bob.txt', b"Bob's file", 7)

        z = self.export(alice)
        items = self.check_export(alice, z)
        self.assertEqual([x['id'] for x in items], [q4, q3, q2, q1])
        names = z.namelist()
        self.assertEqual(sorted(n for n in names if n.startswith('conversations/')),
                         sorted([f'conversations/{q3}.md', f'conversations/{q4}.md']))
        self.assertIn(f'artifacts/{q1}/kg.csv', names)
        self.assertIn(f'artifacts/{q1}/af_{2:032x}-kg.csv', names)
        self.assertIn(f'artifacts/{q3}/.._.._etc_passwd', names)
        self.assertIn(f'artifacts/{q3}/Zürich.txt', names)
        self.assertIn(f'artifacts/{q4}/file', names)
        self.assertEqual(z.read(f'artifacts/{q4}/big.bin'), big)
        # Nothing of Bob's.
        self.assertNotIn(qb, json.dumps([z.read(n).decode('utf-8', 'replace') for n in names if
                                         not n.endswith('.bin')]))
        self.assertFalse([n for n in names if 'bob' in n.lower()])

        # A record running when the export is asked for is in none of its
        # parts, and the turn it follows ends its conversation there.
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            db.execute("UPDATE queries SET status = 'running', finished_at = NULL WHERE id = ?", (q3,))
        db.close()
        z = self.export(alice)
        self.assertEqual([x['id'] for x in json.loads(z.read('records.json'))], [q4, q2, q1])
        self.assertEqual(sorted(n for n in z.namelist() if not n.startswith(f'artifacts/{q1}/')
                                and not n.startswith(f'artifacts/{q4}/')),
                         sorted(['records.json', f'conversations/{q2}.md', f'conversations/{q4}.md']))
        self.assertEqual(z.read(f'conversations/{q2}.md'), alice.get(f'{API}/history/{q2}/export').body)

        zb = self.export(bob)
        self.assertEqual([x['id'] for x in self.check_export(bob, zb)], [qb])
        self.assertNotIn(q1, zb.read('records.json').decode())

    def test_identity_every_device(self):
        """With an identity, the person's records from every device; an
        anonymous session's only its own."""
        d = self.daemon(WIKI_WEB_TRUSTED_PROXIES='127.0.0.1', WIKI_WEB_REQUIRE_USER='false')
        laptop, phone, other, anon = d.browser(), d.browser(), d.browser(), d.browser()
        A, B = {'X-Remote-User': 'alice-from-sales'}, {'X-Remote-User': 'bob'}
        ids = []
        for b, h, q in ((laptop, A, 'From the laptop'), (phone, A, 'From the phone'), (other, B, "Bob's"),
                        (anon, {}, 'Anonymous')):
            r = b.post(f'{API}/query', {'question': q}, headers=h)
            self.assertError(r, 'execution_failed')
            self.wait_state(d, 'idle')
            ids.append(r.header('Wikiweb-Query-Id'))
        for b, h, want in ((phone, A, ids[1::-1]), (other, B, [ids[2]]), (anon, {}, [ids[3]])):
            r = b.get(f'{API}/history/export', headers=h)
            self.assertStatus(r, 200)
            z = zipfile.ZipFile(io.BytesIO(r.body))
            self.assertEqual([x['id'] for x in json.loads(z.read('records.json'))], want)
            self.assertNotIn(b'alice', b''.join(z.read(n) for n in z.namelist()).lower())

    def test_empty_and_methods(self):
        d = self.daemon()
        b = d.browser()
        z = self.export(b)
        self.assertEqual(z.namelist(), ['records.json'])
        self.assertEqual(json.loads(z.read('records.json')), [])
        for method in ('POST', 'DELETE', 'PUT'):
            r = b.request(method, f'{API}/history/export')
            self.assertError(r, 'method_not_allowed')
            self.assertStatus(r, 405)
            self.assertEqual(r.header('Allow'), 'GET')
        # HEAD is refused too (a head without its archive says nothing).
        with socket.create_connection(('127.0.0.1', d.port), timeout=5) as s:
            s.sendall(f'HEAD {API}/history/export HTTP/1.1\r\nHost: {d.host}\r\nConnection: close\r\n\r\n'
                      .encode())
            head = b''
            while b'\r\n\r\n' not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
        self.assertTrue(head.startswith(b'HTTP/1.1 405'), head)
        self.assertIn(b'\r\nAllow: GET\r\n', head)

    def test_large_history_bounded_and_client_gone(self):
        # Under ASan, freed memory waits in its quarantine (256 MiB) before
        # it is used again: a small one, so that the size measures what
        # the export holds.
        asan = os.environ.get('ASAN_OPTIONS')
        d = self.daemon(**({'ASAN_OPTIONS': asan + ':quarantine_size_mb=4:thread_local_quarantine_size_kb=256'}
                           if asan else {}))
        b = d.browser()
        ids = [self.ask(d, b, f'Question {i}') for i in range(300)]
        # 300 records, 60 of them with 512 KiB each: 30 MiB of artifacts.
        piece = os.urandom(512 * 1024)
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            for n, qid in enumerate(ids[::5]):
                data = piece[n:] + piece[:n]
                db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                           ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                           ('af_%032x' % (100 + n), qid, 'part.bin', 'application/octet-stream', len(data),
                            hashlib.sha256(data).hexdigest(), data))
        db.close()
        pid = daemon_pid(d)

        # A client that reads a little and goes away, twice: the daemon
        # stays up and serves the next request.
        for _ in range(2):
            s = socket.create_connection(('127.0.0.1', d.port))
            s.sendall(f'GET {API}/history/export HTTP/1.1\r\nHost: {d.host}\r\n'
                      f'Cookie: {harness.COOKIE_NAME}={b.cookie}\r\n\r\n'.encode())
            got = s.recv(65536)
            self.assertTrue(got.startswith(b'HTTP/1.1 200'), got[:100])
            s.close()
        self.assertStatus(b.get(f'{API}/health'), 200)

        # Once to fill the store's page cache (its cache_size, 16 MiB),
        # then measured: what the export itself holds.
        self.export(b)
        with open(f'/proc/{pid}/clear_refs', 'w') as f:
            f.write('5')  # the peak resident size starts again from here
        before = vm_kib(pid, 'VmRSS')
        t0 = time.monotonic()
        z = self.export(b)
        elapsed = time.monotonic() - t0
        peak = vm_kib(pid, 'VmHWM')
        self.assertEqual(len(json.loads(z.read('records.json'))), 300)
        arts = [n for n in z.namelist() if n.startswith('artifacts/')]
        self.assertEqual(len(arts), 60)
        total = sum(z.getinfo(n).file_size for n in arts)
        # Made as it is sent: the daemon's resident size grew by far less
        # than the 30 MiB it sent (a page, a piece and the compressor's
        # state; ASan's quarantine and redzones add some).
        limit = 16 * 1024 if asan else 8 * 1024
        self.assertLess(peak - before, limit, (before, peak, total, elapsed))
        print(f'export: {total >> 20} MiB of artifacts in {elapsed:.2f} s; '
              f'VmRSS {before} KiB before, VmHWM {peak} KiB during')
        self.assertStatus(b.get(f'{API}/health'), 200)


if __name__ == '__main__':
    harness.main()
