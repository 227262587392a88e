#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md sections 7 and 9: every query is recorded in the history; the
history and artifact endpoints; recovery of records left running by a
crash.

Query execution is not configured in these tests, so every query ends as
failed with execution_failed: its record says so. Artifacts are written
into the store's SQLite file directly (the sandbox that makes them is not
built yet), which exercises the download path as it will be used."""

import hashlib
import json
import os
import sqlite3
import threading
import time

import harness

API = harness.API
RECORD_KEYS = {'id', 'status', 'question', 'answer', 'sources', 'citations', 'artifacts', 'error',
               'timings_ms', 'usage', 'sandbox', 'created_at', 'finished_at', 'feedback', 'follow_up', 'conversation',
               'notes'}
TIMING_KEYS = {'queue', 'wiki', 'model', 'sandbox', 'cleanup', 'total'}


def check_record(tc, rec, now=None):
    ctx = json.dumps(rec)
    tc.assertEqual(set(rec.keys()), RECORD_KEYS, ctx)
    tc.assertRegex(rec['id'], r'^qr_[0-9a-f]{32}$', ctx)
    tc.assertIn(rec['status'], ('running', 'succeeded', 'failed'), ctx)
    tc.assertIsInstance(rec['question'], str, ctx)
    tc.assertIsInstance(rec['sources'], list, ctx)
    tc.assertIsInstance(rec['citations'], list, ctx)
    tc.assertIsInstance(rec['artifacts'], list, ctx)
    tc.assertEqual(set(rec['timings_ms'].keys()), TIMING_KEYS, ctx)
    for v in rec['timings_ms'].values():
        tc.assertTrue(harness.is_int(v) and v >= 0, ctx)
    tc.assertEqual(set(rec['usage'].keys()), {'model', 'prompt_tokens', 'completion_tokens'}, ctx)
    created = harness.parse_time(rec['created_at'])
    if now is not None:
        tc.assertLess(abs(created - now), 30, ctx)
    tc.assertIn(rec['sandbox'], (None, 'offered', 'unavailable', 'starting'), ctx)
    # API.md 9.1: null until the asker rates it.
    if rec['feedback'] is not None:
        tc.assertEqual(set(rec['feedback']), {'rating', 'reason', 'comment', 'rated_at'}, ctx)
        tc.assertIn(rec['feedback']['rating'], ('up', 'down'), ctx)
    if rec['status'] == 'running':
        tc.assertIsNone(rec['finished_at'], ctx)
        tc.assertIsNone(rec['error'], ctx)
        tc.assertIsNone(rec['sandbox'], ctx)
    else:
        tc.assertGreaterEqual(harness.parse_time(rec['finished_at']), created - 0.001, ctx)
    if rec['status'] == 'failed':
        tc.assertEqual(set(rec['error'].keys()), {'code', 'message'}, ctx)
        tc.assertIn(rec['error']['code'], harness.ERRORS, ctx)
        tc.assertIsNone(rec['answer'], ctx)
    return rec


class History(harness.DaemonTestCase):

    def run_query(self, d, b, question):
        r = b.query(question)
        self.assertError(r, 'execution_failed')
        qid = r.header('Wikiweb-Query-Id')
        self.assertRegex(qid, harness.QUERY_ID_RE, r)
        self.wait_state(d, 'idle')
        return qid

    def test_failed_query_is_recorded(self):
        d = self.daemon()
        b = d.browser()
        t0 = time.time()
        qid = self.run_query(d, b, '  Which apples are red?\n')
        r = b.get(f'{API}/history/{qid}')
        self.assertStatus(r, 200)
        rec = check_record(self, r.json, now=t0)
        self.assertEqual(rec['id'], qid)
        self.assertEqual(rec['status'], 'failed')
        # Stored as validated: trimmed of surrounding whitespace.
        self.assertEqual(rec['question'], 'Which apples are red?')
        self.assertEqual(rec['error'], {'code': 'execution_failed',
                                        'message': 'query execution is not configured: WIKI_WEB_WIKI_API_URL, '
                                                   'WIKI_WEB_LLM_URL and WIKI_WEB_LLM_MODEL are not set '
                                                   '(see "Quick start" in the README)'})
        self.assertEqual(rec['sources'], [])
        self.assertEqual(rec['artifacts'], [])
        self.assertGreaterEqual(rec['timings_ms']['total'], rec['timings_ms']['queue'])
        # HEAD: same status, no body.
        r = b.request('HEAD', f'{API}/history/{qid}')
        self.assertStatus(r, 200)

    def test_queue_time_is_recorded(self):
        d = self.daemon(WIKI_WEB_TEST_FAULTS=1, WIKI_WEB_TEST_QUERY_DELAY_MS=1500)
        a, b = d.browser(), d.browser()
        done = {}
        t = threading.Thread(target=lambda: done.setdefault('r', a.query('first')))
        t.start()
        self.wait_state(d, 'running')
        self.assertStatus(b.join(), 201)
        t.join(10)
        self.wait_ticket(b, 'reserved')
        qid = None
        r = b.query('second')
        self.assertError(r, 'execution_failed')
        qid = r.header('Wikiweb-Query-Id')
        rec = b.get(f'{API}/history/{qid}').json
        # b's ticket waited for a's query (about 1.5 s) before the claim.
        self.assertGreaterEqual(rec['timings_ms']['queue'], 500, rec)
        self.assertGreaterEqual(rec['timings_ms']['total'], rec['timings_ms']['queue'] + 1000, rec)
        self.assertEqual(done['r'].status, 500)

    def test_sessions_are_separate(self):
        d = self.daemon()
        a, b = d.browser(), d.browser()
        qid = self.run_query(d, a, 'mine')
        self.assertError(b.get(f'{API}/history/{qid}'), 'query_not_found')
        self.assertError(b.delete(f'{API}/history/{qid}'), 'query_not_found')
        r = b.get(f'{API}/history')
        self.assertStatus(r, 200)
        self.assertEqual(r.json, {'items': [], 'next_cursor': None})
        # Still there for its owner.
        self.assertStatus(a.get(f'{API}/history/{qid}'), 200)
        # A fresh browser (no cookie) sees nothing either.
        self.assertEqual(d.browser().get(f'{API}/history').json['items'], [])

    def test_listing_and_cursor(self):
        d = self.daemon()
        b = d.browser()
        ids = [self.run_query(d, b, f'question {i}') for i in range(5)]
        newest_first = list(reversed(ids))

        r = b.get(f'{API}/history')
        self.assertStatus(r, 200)
        self.assertEqual(set(r.json.keys()), {'items', 'next_cursor'})
        self.assertEqual([x['id'] for x in r.json['items']], newest_first)
        self.assertIsNone(r.json['next_cursor'])
        for x in r.json['items']:
            check_record(self, x)

        seen, cursor = [], None
        for _ in range(10):
            path = f'{API}/history?limit=2' + (f'&cursor={cursor}' if cursor else '')
            r = b.get(path)
            self.assertStatus(r, 200)
            self.assertLessEqual(len(r.json['items']), 2)
            seen += [x['id'] for x in r.json['items']]
            cursor = r.json['next_cursor']
            if cursor is None:
                break
            self.assertIsInstance(cursor, str)
        self.assertEqual(seen, newest_first)

        r = b.get(f'{API}/history?limit=1')
        self.assertEqual([x['id'] for x in r.json['items']], newest_first[:1])
        r = b.get(f'{API}/history?limit=100')
        self.assertEqual(len(r.json['items']), 5)

    def test_hostile_listing_arguments(self):
        d = self.daemon()
        b = d.browser()
        self.run_query(d, b, 'q')
        for bad in ('limit=0', 'limit=101', 'limit=-1', 'limit=abc', 'limit=', 'limit=1e2',
                    'limit=%2B5', 'limit=%205', 'limit=007', 'limit=99999999999999999999999',
                    'cursor=', 'cursor=0', 'cursor=abc', 'cursor=-1',
                    'cursor=9223372036854775808', "cursor=1%27%20OR%201%3D1",
                    'cursor=' + 'A' * 5000):
            r = b.get(f'{API}/history?{bad}')
            self.assertError(r, 'invalid_input')
        # Unknown arguments are ignored, as on the web at large.
        self.assertStatus(b.get(f'{API}/history?foo=bar'), 200)
        # Ids are strictly "qr_" + 32 lowercase hex digits.
        for bad in ('qr_', 'qr_' + 'A' * 32, 'qr_' + '0' * 31, 'qr_' + '0' * 33, '..%2F..',
                    'qr_' + '0' * 32 + '/'):
            self.assertError(b.get(f'{API}/history/{bad}'), 'not_found')
        self.assertError(b.get(f'{API}/history/qr_' + '0' * 32), 'query_not_found')

    def test_delete(self):
        d = self.daemon()
        b = d.browser()
        keep = self.run_query(d, b, 'keep')
        gone = self.run_query(d, b, 'gone')
        r = b.delete(f'{API}/history/{gone}')
        self.assertStatus(r, 204)
        self.assertError(b.get(f'{API}/history/{gone}'), 'query_not_found')
        self.assertError(b.delete(f'{API}/history/{gone}'), 'query_not_found')
        self.assertEqual([x['id'] for x in b.get(f'{API}/history').json['items']], [keep])

    def test_running_record_and_crash_recovery(self):
        d = self.daemon(WIKI_WEB_TEST_FAULTS=1, WIKI_WEB_TEST_QUERY_DELAY_MS=30000)
        b = d.browser()
        b.status()  # the session cookie, before the query's response that never comes
        threading.Thread(target=lambda: self._ignore(lambda: b.query('slow', timeout=60)),
                         daemon=True).start()
        self.wait_state(d, 'running')
        # Written as running before execution starts.
        items = b.get(f'{API}/history').json['items']
        self.assertEqual(len(items), 1)
        rec = check_record(self, items[0])
        self.assertEqual(rec['status'], 'running')
        qid = rec['id']
        # Not deletable while its outcome is still to be written.
        self.assertError(b.delete(f'{API}/history/{qid}'), 'busy')

        d.restart(hard=True)
        self.assertIn('1 query was still running when the service last stopped; recorded it as failed', d.log())
        r = b.get(f'{API}/history/{qid}')
        self.assertStatus(r, 200)
        rec = check_record(self, r.json)
        self.assertEqual(rec['status'], 'failed')
        self.assertEqual(rec['error']['code'], 'execution_failed')
        self.assertIsNotNone(rec['finished_at'])
        # Now it can go.
        self.assertStatus(b.delete(f'{API}/history/{qid}'), 204)

    def test_history_survives_restart(self):
        d = self.daemon()
        b = d.browser()
        qid = self.run_query(d, b, 'persist me')
        before = b.get(f'{API}/history/{qid}').json
        d.restart()
        self.assertEqual(b.get(f'{API}/history/{qid}').json, before)
        self.assertNotIn('recorded them as failed', d.log())

    @staticmethod
    def _ignore(f):
        try:
            f()
        except Exception:
            pass

    def test_artifact_download(self):
        d = self.daemon()
        a, other = d.browser(), d.browser()
        qid = self.run_query(d, a, 'make a table')
        data = b'name,colour\napple,red\n\x00binary\xff'
        sha = hashlib.sha256(data).hexdigest()
        aid = 'af_' + '1' * 32
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                       ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                       (aid, qid, 'Äpfel table "1".csv', 'text/csv', len(data), sha, data))
        db.close()

        rec = a.get(f'{API}/history/{qid}').json
        self.assertEqual(rec['artifacts'], [{
            'id': aid, 'name': 'Äpfel table "1".csv', 'media_type': 'text/csv',
            'size_bytes': len(data), 'sha256': sha, 'download_url': f'{API}/artifacts/{aid}'}])

        r = a.get(f'{API}/artifacts/{aid}')
        self.assertStatus(r, 200)
        self.assertEqual(r.body, data)
        self.assertEqual(r.header('Content-Type'), 'text/csv')
        self.assertEqual(r.header('Content-Length'), str(len(data)))
        self.assertEqual(r.header('Content-Disposition'),
                         "attachment; filename*=UTF-8''%C3%84pfel%20table%20%221%22.csv")
        self.assertEqual(r.header('ETag'), f'"{sha}"')
        self.assertEqual(r.header('Content-Security-Policy'), 'sandbox')

        r = a.request('HEAD', f'{API}/artifacts/{aid}')
        self.assertStatus(r, 200)
        self.assertEqual(r.header('Content-Length'), str(len(data)))
        self.assertEqual(r.body, b'')

        self.assertError(other.get(f'{API}/artifacts/{aid}'), 'artifact_not_found')
        self.assertError(a.get(f'{API}/artifacts/af_' + '2' * 32), 'artifact_not_found')
        self.assertError(a.get(f'{API}/artifacts/af_' + 'G' * 32), 'not_found')

        # A media type that would break the header is not passed on.
        evil = 'af_' + '3' * 32
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                       ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                       (evil, qid, 'x\r\nSet-Cookie: a=b', 'text/html\r\nX-Evil: 1', 1, sha, b'x'))
        db.close()
        r = a.get(f'{API}/artifacts/{evil}')
        self.assertStatus(r, 200)
        self.assertEqual(r.header('Content-Type'), 'application/octet-stream')
        self.assertIsNone(r.header('X-Evil'))
        self.assertEqual(r.header('Content-Disposition'),
                         "attachment; filename*=UTF-8''x%0D%0ASet-Cookie%3A%20a%3Db")

        # Deleting the record deletes its artifacts.
        self.assertStatus(a.delete(f'{API}/history/{qid}'), 204)
        self.assertError(a.get(f'{API}/artifacts/{aid}'), 'artifact_not_found')

    def test_no_state_directory(self):
        d = harness.Daemon(self, socket_activation=False, WIKI_WEB_STATE_DIRECTORY=None)
        try:
            with self.assertRaises(AssertionError) as cm:
                d.start(timeout=5)
            self.assertIn('No state directory', str(cm.exception))
        finally:
            d.discard()

    def test_unusable_store_stops_startup(self):
        d = harness.Daemon(self, socket_activation=False)
        try:
            with open(os.path.join(d.state_directory, 'history.sqlite3'), 'wb') as f:
                f.write(b'this is not a database, but it is a long enough file to be read' * 64)
            with self.assertRaises(AssertionError) as cm:
                d.start(timeout=5)
            self.assertIn('history', str(cm.exception).lower())
        finally:
            d.discard()


if __name__ == '__main__':
    harness.main()
