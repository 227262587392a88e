#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The store under faults (wikiwebd(8) "When the disk fills", "When the
database is damaged"): the state directory on a small tmpfs, filled at
each point of a query's life; damaged files at start.

Needs root (mount); a skip otherwise. The tmpfs is unmounted in teardown,
also when a test fails."""

import errno
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402

TMPFS_BYTES = 768 * 1024
ANSWER = 'Apples. ' + 'x' * (60 * 1000)


class Tmpfs:
    """A small tmpfs under a temporary directory, and a ballast file that
    fills it."""

    def __init__(self, size):
        self.top = tempfile.mkdtemp(prefix='wikiweb-storage-')
        self.path = os.path.join(self.top, 'state')
        os.mkdir(self.path)
        subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size},mode=0755', 'tmpfs', self.path],
                       check=True, capture_output=True)
        self.ballast = os.path.join(self.path, 'ballast')

    def fill(self):
        """Write the ballast until the file system is full."""
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            for size in (65536, 4096, 512, 1):
                while True:
                    try:
                        os.write(fd, b'\0' * size)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)

    def free(self):
        try:
            os.unlink(self.ballast)
        except FileNotFoundError:
            pass

    def close(self):
        subprocess.run(['umount', '-l', self.path], capture_output=True)
        shutil.rmtree(self.top, True)


def can_mount():
    if os.geteuid() != 0:
        return False
    try:
        t = Tmpfs(64 * 1024)
    except (subprocess.CalledProcessError, OSError):
        return False
    t.close()
    return True


class StorageBase(harness.DaemonTestCase):

    def setUp(self):
        if not can_mount():
            self.skipTest('needs root and tmpfs mounts')
        self.fs = Tmpfs(TMPFS_BYTES)
        self.addCleanup(self.fs.close)

    def llm(self, steps):
        f = fake_llm.FakeLLM(steps).start()
        self.addCleanup(f.stop)
        return f

    def storage_daemon(self, llm, **env):
        settings = {
            'WIKI_WEB_STATE_DIRECTORY': self.fs.path,
            # Nothing answers there: the model answers without reading.
            'WIKI_WEB_WIKI_API_URL': f'http://127.0.0.1:{harness.free_port()}/w/api.php',
            'WIKI_WEB_LLM_URL': llm.url,
            'WIKI_WEB_LLM_MODEL': 'test-model',
            'WIKI_WEB_STATE_MIN_FREE_BYTES': '0',
            'WIKI_WEB_LOG_LEVEL': '6',
        }
        settings.update(env)
        d = self.daemon(**settings)
        # Before the daemon's stop (cleanups run last first): no query waits on the model.
        self.addCleanup(llm.release_all)
        return d

    def health(self, d):
        r = d.browser().get('/api/v1/health')
        self.assertStatus(r, 200)
        return r.json

    def wait_storage(self, d, state, timeout=45):
        deadline = time.monotonic() + timeout
        while True:
            h = self.health(d)
            if h['storage'] == state:
                return h
            if time.monotonic() > deadline:
                self.fail(f'storage stayed {h["storage"]!r} ({h.get("storage_cause")!r}), not {state!r}')
            time.sleep(0.2)

    def stored(self, qid):
        """The record as it is in the file, read by SQLite itself."""
        db = sqlite3.connect(f'file:{self.fs.path}/history.sqlite3?mode=ro', uri=True)
        try:
            row = db.execute('SELECT status, answer FROM queries WHERE id = ?', (qid,)).fetchone()
        finally:
            db.close()
        return row

    def ask_in_thread(self, b, body):
        out = {}

        def run():
            out['r'] = b.post('/api/v1/query', body, timeout=60)
        t = threading.Thread(target=run)
        t.start()
        return t, out

    def wait_asked(self, llm, n=1, timeout=10):
        """Until the model has been asked n times (the query runs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with llm.lock:
                if len(llm.requests) >= n:
                    return
            time.sleep(0.05)
        self.fail('the query did not reach the model')

    def journal_lines(self, d, word='History store:'):
        return [line for line in d.log().splitlines() if word in line]

    def assert_answer_or_unavailable(self, r):
        if r.status == 503:
            self.assertError(r, 'storage_unavailable')
            self.assertIn('no space left on the state directory', r.json['error']['message'])
            self.assertRegex(r.header('Retry-After') or '', r'^[0-9]+$')
            return False
        self.assertStatus(r, 200)
        self.assertEqual(r.json['status'], 'succeeded', r.json)
        self.assertEqual(r.json['answer'], ANSWER)
        return True


class DiskFills(StorageBase):

    def test_before_the_question(self):
        """Full before the question: storage_unavailable (or the answer,
        when SQLite still had room), one line at the start and one at the
        end of the condition however many are refused, and queries again
        once space is freed."""
        d = self.storage_daemon(self.llm([{'answer': ANSWER}] * 4))
        b = d.browser()
        self.fs.fill()
        refused = 0
        answered = 0
        for _ in range(40):
            r = b.post('/api/v1/query', {'question': 'What is an apple?'}, timeout=60)
            if self.assert_answer_or_unavailable(r):
                answered += 1
                self.fs.fill()
            else:
                refused += 1
        self.assertGreater(refused, 30)
        r = b.join()
        self.assertError(r, 'storage_unavailable')
        h = self.health(d)
        self.assertEqual(h['status'], 'degraded')
        self.assertEqual(h['storage'], 'degraded')
        self.assertIn('no space left on the state directory', h['storage_cause'])
        # Reads go on.
        self.assertStatus(b.get('/api/v1/history'), 200)

        self.fs.free()
        self.wait_storage(d, 'ok')
        r = b.post('/api/v1/query', {'question': 'What is an apple?'}, timeout=60)
        self.assertStatus(r, 200)
        lines = self.journal_lines(d)
        if os.environ.get('WIKIWEB_SHOW_JOURNAL'):
            print('\n'.join(lines), file=sys.stderr)
        self.assertLessEqual(len(lines), 12, '\n'.join(lines))
        self.assertTrue(any('new queries are refused' in line for line in lines), lines)
        self.assertTrue(any('writes land again' in line and 'refused meanwhile' in line for line in lines),
                        lines)

    def test_between_question_and_answer(self):
        """Full while the model thinks: the asker gets the answer, the
        record reads as it will be stored, health is degraded, and once
        space is freed the record lands without a restart."""
        llm = self.llm([{'answer': ANSWER, 'hold': 'answer'}])
        d = self.storage_daemon(llm)
        b = d.browser()
        t, out = self.ask_in_thread(b, {'question': 'What is an apple?'})
        self.wait_asked(llm)
        self.fs.fill()
        llm.release('answer')
        t.join(60)
        r = out['r']
        self.assertStatus(r, 200)
        self.assertEqual(r.json['status'], 'succeeded')
        self.assertEqual(r.json['answer'], ANSWER)
        qid = r.json['id']

        h = self.health(d)
        self.assertEqual(h['storage'], 'degraded', h)
        self.assertIn('no space left', h['storage_cause'])
        # The history shows it ended; it is not "running".
        g = b.get(f'/api/v1/history/{qid}')
        self.assertStatus(g, 200)
        self.assertEqual(g.json['status'], 'succeeded')
        self.assertEqual(self.stored(qid)[0], 'running')

        self.fs.free()
        self.wait_storage(d, 'ok')
        self.assertEqual(self.stored(qid), ('succeeded', ANSWER))
        self.assertTrue(any(f'the outcome of query {qid} is stored at last' in line
                            for line in self.journal_lines(d)))

    def test_artifact_waits_with_the_outcome(self):
        """Full while the model thinks, with a file to keep: the answer is
        given, the file waits with the outcome (held open, not dropped),
        and once space is freed both land without a restart."""
        size = 40000
        llm = self.llm([{'answer': ANSWER, 'hold': 'answer'}])
        d = self.storage_daemon(llm, WIKI_WEB_TEST_FAULTS='1', WIKI_WEB_TEST_ARTIFACT_BYTES=str(size))
        b = d.browser()
        t, out = self.ask_in_thread(b, {'question': 'What is an apple?'})
        self.wait_asked(llm)
        self.fs.fill()
        llm.release('answer')
        t.join(60)
        r = out['r']
        self.assertStatus(r, 200)
        self.assertEqual(r.json['answer'], ANSWER)
        qid = r.json['id']
        self.assertEqual(self.stored(qid)[0], 'running')
        self.assertEqual(self.wait_storage(d, 'degraded')['storage'], 'degraded')

        self.fs.free()
        self.wait_storage(d, 'ok')
        self.assertEqual(self.stored(qid), ('succeeded', ANSWER))
        rec = b.get(f'/api/v1/history/{qid}').json
        self.assertEqual([(a['name'], a['size_bytes']) for a in rec['artifacts']], [('test.txt', size)])
        got = b.get(rec['artifacts'][0]['download_url'])
        self.assertStatus(got, 200)
        self.assertEqual(got.body, b'x' * size)
        self.assertTrue(any('with its files' in line for line in self.journal_lines(d)))

    def test_during_a_follow_up(self):
        """Full during a follow-up: it is answered or refused, never lost."""
        llm = self.llm([{'answer': ANSWER}, {'answer': ANSWER, 'hold': 'second'}])
        d = self.storage_daemon(llm)
        b = d.browser()
        r = b.post('/api/v1/query', {'question': 'What is an apple?'}, timeout=60)
        self.assertStatus(r, 200)
        first = r.json['id']
        t, out = self.ask_in_thread(b, {'question': 'And a pear?', 'follow_up': first})
        self.wait_asked(llm, 2)
        self.fs.fill()
        llm.release('second')
        t.join(60)
        self.assertTrue(self.assert_answer_or_unavailable(out['r']))
        self.assertEqual(out['r'].json['follow_up'], first)
        qid = out['r'].json['id']
        # A follow-up of it is not refused as "still running".
        r = b.post('/api/v1/query', {'question': 'And a plum?', 'follow_up': qid}, timeout=60)
        self.assertError(r, 'storage_unavailable')
        self.fs.free()
        self.wait_storage(d, 'ok')
        self.assertEqual(self.stored(qid), ('succeeded', ANSWER))

    def test_during_a_share(self):
        """Full when a share is made: storage_unavailable, then it works."""
        d = self.storage_daemon(self.llm([{'answer': ANSWER}]))
        b = d.browser()
        r = b.post('/api/v1/query', {'question': 'What is an apple?'}, timeout=60)
        self.assertStatus(r, 200)
        qid = r.json['id']
        self.fs.fill()
        shared = None
        for _ in range(5):
            r = b.post(f'/api/v1/history/{qid}/share')
            if r.status == 201:
                shared = r
                self.fs.fill()
                continue
            self.assertError(r, 'storage_unavailable')
            break
        self.fs.free()
        self.wait_storage(d, 'ok')
        r = b.post(f'/api/v1/history/{qid}/share')
        self.assertStatus(r, 201)
        del shared

    def test_stop_before_it_lands(self):
        """The daemon stops while the outcome waits: the record is failed
        with a reason that is true, never "running"."""
        llm = self.llm([{'answer': ANSWER, 'hold': 'answer'}])
        d = self.storage_daemon(llm)
        b = d.browser()
        t, out = self.ask_in_thread(b, {'question': 'What is an apple?'})
        self.wait_asked(llm)
        self.fs.fill()
        llm.release('answer')
        t.join(60)
        self.assertStatus(out['r'], 200)
        qid = out['r'].json['id']
        d.proc.send_signal(signal.SIGTERM)
        d.proc.wait(10)
        lines = self.journal_lines(d)
        self.assertEqual(d.wait_exit(), 0)
        self.assertTrue(any(qid in line and ('lost' in line or 'recorded as failed' in line
                                             or 'stored at last' in line) for line in lines), lines)
        self.fs.free()
        d2 = self.storage_daemon(llm)
        status, _ = self.stored(qid)
        self.assertIn(status, ('failed', 'succeeded'))
        self.assertEqual(self.health(d2)['storage'], 'ok')


class Damaged(harness.DaemonTestCase):

    def start_fails(self, prepare):
        tmp = tempfile.mkdtemp(prefix='wikiweb-damaged-')
        self.addCleanup(shutil.rmtree, tmp, True)
        prepare(os.path.join(tmp, 'history.sqlite3'))
        d = harness.Daemon(self, WIKI_WEB_STATE_DIRECTORY=tmp)
        try:
            with self.assertRaises(Exception):
                d.start(timeout=5)
            log = d.log()
        finally:
            d.discard()
        return log

    def test_zero_bytes(self):
        log = self.start_fails(lambda p: open(p, 'wb').close())
        self.assertIn('exists but is empty (0 bytes)', log)

    def test_garbage_header(self):
        def garbage(p):
            with open(p, 'wb') as f:
                f.write(b'garbage, not SQLite' * 300)
        log = self.start_fails(garbage)
        self.assertIn('is not an SQLite database', log)

    def test_other_application(self):
        def other(p):
            db = sqlite3.connect(p)
            db.execute('CREATE TABLE contacts (name TEXT)')
            db.commit()
            db.close()
        log = self.start_fails(other)
        self.assertIn("another application's SQLite database", log)

    def test_damaged_index_page(self):
        """A damaged page of the id index: the start goes on, quick_check
        finds it, health is failed, and queries are refused in words."""
        tmp = tempfile.mkdtemp(prefix='wikiweb-damaged-')
        self.addCleanup(shutil.rmtree, tmp, True)
        p = os.path.join(tmp, 'history.sqlite3')
        d = self.daemon(WIKI_WEB_STATE_DIRECTORY=tmp)
        b = d.browser()
        for _ in range(30):
            b.post('/api/v1/query', {'question': 'What is an apple? ' + 'y' * 500})
            deadline = time.monotonic() + 5
            while b.status().json.get('query') and time.monotonic() < deadline:
                time.sleep(0.02)
        d.stop()
        db = sqlite3.connect(p)
        db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_queries_1'").fetchone()[0]
        size = db.execute('PRAGMA page_size').fetchone()[0]
        db.close()
        with open(p, 'r+b') as f:
            f.seek((page - 1) * size)
            f.write(b'\x5a' * 200)
        d2 = self.daemon(WIKI_WEB_STATE_DIRECTORY=tmp)
        deadline = time.monotonic() + 10
        while True:
            h = d2.browser().get('/api/v1/health').json
            if h['storage'] == 'failed' or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(h['storage'], 'failed', h)
        self.assertIn('is damaged', h['storage_cause'])
        self.assertIn('When the database is damaged', h['storage_cause'])
        r = d2.browser().post('/api/v1/query', {'question': 'What is an apple?'})
        self.assertError(r, 'storage_unavailable')
        self.assertIn('damaged', r.json['error']['message'])


if __name__ == '__main__':
    harness.main()
