#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The history's life cycle (API.md 7 and 9, wikiwebd(8) "What is kept"):
a deleted record, a person's erased history and what retention removes
leave their text in no file of the state directory. The
real wikiwebd, the test MediaWiki and the scripted model."""

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
from harness import API  # noqa: E402
import test_pipeline  # noqa: E402
from test_pipeline import PipelineBase  # noqa: E402


DAY_USEC = 86400 * 1000000


def state_files(d):
    """Every file of the state directory (the database, its log and its
    shared memory), name → bytes."""
    out = {}
    for name in os.listdir(d.state_directory):
        p = os.path.join(d.state_directory, name)
        if os.path.isfile(p):
            with open(p, 'rb') as f:
                out[name] = f.read()
    return out


class LifecycleBase(PipelineBase):
    """Queries whose question and answer carry a marker, and where on
    disk a marker is."""

    def ask_marked(self, d, llm, b, marker, follow_up=None, headers=None):
        llm.set_script([{'answer': f'The answer is {marker}-answer.'}])
        body = {'question': f'What is {marker}-question?'}
        if follow_up:
            body['follow_up'] = follow_up
        r = b.post(API + '/query', body, timeout=60, headers=headers)
        self.assertStatus(r, 200)
        qid = r.header('Wikiweb-Query-Id')
        self.assertRegex(qid, harness.QUERY_ID_RE)
        self.wait_state(d, 'idle')
        return qid

    def holders(self, d, marker):
        """The files of the state directory that hold marker."""
        return sorted(n for n, data in state_files(d).items() if marker.encode() in data)


class Lifecycle(LifecycleBase):

    def test_delete_leaves_nothing_on_disk(self):
        llm = self.llm([])
        d = self.pipeline_daemon(llm)
        b = d.browser()
        marker, kept = 'lifecycle-7c1d0e', 'lifecycle-kept-52ab'
        qid = self.ask_marked(d, llm, b, marker)
        other = self.ask_marked(d, llm, b, kept)
        r = b.post(f'{API}/history/{qid}/feedback', {'rating': 'down', 'comment': f'{marker}-comment'})
        self.assertStatus(r, 200)
        rec = b.get(f'{API}/history/{qid}').json
        self.assertIn(f'{marker}-answer', rec['answer'])

        # The control: the text is on disk while the record is there.
        for part in ('question', 'answer', 'comment'):
            self.assertTrue(self.holders(d, f'{marker}-{part}'), part)

        self.assertStatus(b.delete(f'{API}/history/{qid}'), 204)
        for part in ('question', 'answer', 'comment'):
            self.assertEqual(self.holders(d, f'{marker}-{part}'), [], part)
        self.assertEqual(os.path.getsize(os.path.join(d.state_directory, 'history.sqlite3-wal')), 0)
        # The other record is untouched.
        self.assertTrue(self.holders(d, f'{kept}-answer'))
        self.assertEqual(b.get(f'{API}/history/{other}').json['id'], other)

    def test_erase_my_history(self):
        """DELETE /api/v1/history: every record of one person (a follow-up
        chain, feedback, a share link) and nothing of anyone else's; their
        text in no file of the state directory afterwards."""
        llm = self.llm([])
        d = self.pipeline_daemon(llm)
        a, b = d.browser(), d.browser()
        q1 = self.ask_marked(d, llm, a, 'erase-a1-6e0f')
        q2 = self.ask_marked(d, llm, a, 'erase-a2-6e0f', follow_up=q1)
        self.assertEqual(a.get(f'{API}/history/{q2}').json['follow_up'], q1)
        self.assertStatus(a.post(f'{API}/history/{q1}/feedback',
                                 {'rating': 'down', 'comment': 'erase-a1-6e0f-comment'}), 200)
        r = a.post(f'{API}/history/{q2}/share')
        self.assertStatus(r, 201)
        a_token = r.json['token']
        kept = self.ask_marked(d, llm, b, 'erase-b1-6e0f')
        r = b.post(f'{API}/history/{kept}/share')
        self.assertStatus(r, 201)
        b_token = r.json['token']
        self.assertStatus(b.get(f'{API}/shared/{a_token}'), 200)
        for part in ('question', 'answer', 'comment'):
            self.assertTrue(self.holders(d, f'erase-a1-6e0f-{part}'), part)

        self.assertStatus(a.delete(API + '/history'), 204)
        self.assertEqual(a.get(API + '/history').json['items'], [])
        for qid in (q1, q2):
            self.assertError(a.get(f'{API}/history/{qid}'), 'query_not_found')
        self.assertError(b.get(f'{API}/shared/{a_token}'), 'not_found')
        for m in ('erase-a1-6e0f', 'erase-a2-6e0f'):
            for part in ('question', 'answer'):
                self.assertEqual(self.holders(d, f'{m}-{part}'), [], (m, part))
        self.assertEqual(self.holders(d, 'erase-a1-6e0f-comment'), [])
        self.assertEqual(os.path.getsize(os.path.join(d.state_directory, 'history.sqlite3-wal')), 0)
        self.assertIn('History: a person erased their own history: 2 records and 0 artifacts.', d.log())
        # The other person's are untouched, their link too.
        self.assertEqual([i['id'] for i in b.get(API + '/history').json['items']], [kept])
        self.assertStatus(b.get(f'{API}/shared/{b_token}'), 200)
        self.assertTrue(self.holders(d, 'erase-b1-6e0f-answer'))
        # Nothing left: 204 again.
        self.assertStatus(a.delete(API + '/history'), 204)

    def test_erase_my_history_on_every_device(self):
        """With an identity, the person's records of every browser go, and
        nobody else's."""
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_TRUSTED_PROXIES='127.0.0.1', WIKI_WEB_REQUIRE_USER='false')
        alice, bob = {'X-Remote-User': 'alice'}, {'X-Remote-User': 'bob'}
        laptop, phone, other = d.browser(), d.browser(), d.browser()
        self.ask_marked(d, llm, laptop, 'erase-laptop-91b2', headers=alice)
        self.ask_marked(d, llm, phone, 'erase-phone-91b2', headers=alice)
        kept = self.ask_marked(d, llm, other, 'erase-bob-91b2', headers=bob)
        self.assertEqual(len(laptop.get(API + '/history', headers=alice).json['items']), 2)

        self.assertStatus(phone.delete(API + '/history', headers=alice), 204)
        self.assertEqual(laptop.get(API + '/history', headers=alice).json['items'], [])
        for m in ('erase-laptop-91b2', 'erase-phone-91b2'):
            self.assertEqual(self.holders(d, f'{m}-question'), [], m)
        self.assertEqual([i['id'] for i in other.get(API + '/history', headers=bob).json['items']], [kept])

    def test_rekey_of_a_file_keyed_by_name(self):
        """A history whose records are keyed by the unsalted SHA-256 of the
        person's name (schema 7) is re-keyed at the next start: the person
        still has their records, and neither the old key nor anything the
        name alone gives is in the file; the user key is made, mode 0600."""
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_TRUSTED_PROXIES='127.0.0.1', WIKI_WEB_REQUIRE_USER='false')
        alice = {'X-Remote-User': 'alice'}
        b = d.browser()
        qid = self.ask_marked(d, llm, b, 'rekey-3c77', headers=alice)
        d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(d.proc.wait(10), 0)
        harness._LIVE.discard(d)
        old = hashlib.sha256(b'wikiweb-user\0alice').digest()
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            db.execute('UPDATE queries SET session = ? WHERE id = ?', (old, qid))
        db.execute('DROP TABLE tokens')  # as a wikiwebd of schema 7 left it
        db.execute('PRAGMA user_version = 7')
        db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        db.close()
        os.unlink(os.path.join(d.state_directory, 'user-key'))
        self.assertTrue(any(old in data for data in state_files(d).values()))

        d.start()
        self.assertEqual([i['id'] for i in b.get(API + '/history', headers=alice).json['items']], [qid])
        self.assertFalse([n for n, data in state_files(d).items() if old in data])
        st = os.stat(os.path.join(d.state_directory, 'user-key'))
        self.assertEqual(st.st_mode & 0o7777, 0o600)
        self.assertEqual(st.st_size, 32)
        self.assertIn('schema version 7 updated to 10', d.log())

    def test_retention_removes_the_old_at_start(self):
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_HISTORY_RETENTION_DAYS='30')
        b = d.browser()
        self.assertEqual(b.get(API + '/health').json['history_retention_days'], 30)
        old = [self.ask_marked(d, llm, b, f'retention-old{i}-3d9a') for i in range(3)]
        new = [self.ask_marked(d, llm, b, f'retention-new{i}-3d9a') for i in range(2)]
        self.assertStatus(b.post(f'{API}/history/{old[0]}/feedback',
                                 {'rating': 'down', 'comment': 'retention-old0-3d9a-comment'}), 200)
        self.assertTrue(self.holders(d, 'retention-old1-3d9a-answer'))

        # Stopped, the old records are made 40 days old (and a new one 29).
        d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(d.proc.wait(10), 0)
        harness._LIVE.discard(d)
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        day = 86400 * 1000000
        with db:
            for qid in old:
                db.execute('UPDATE queries SET created_at = created_at - ? WHERE id = ?', (40 * day, qid))
            db.execute('UPDATE queries SET created_at = created_at - ? WHERE id = ?', (29 * day, new[0]))
        db.close()
        d.start()

        # The log holds both starts: the first run removed nothing.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and d.log().count('History retention (30 days)') < 2:
            time.sleep(0.1)
        runs = [line for line in d.log().splitlines() if line.startswith('History retention (30 days)')]
        self.assertEqual(len(runs), 2, runs)
        self.assertIn('0 records and 0 artifacts removed in', runs[0])
        self.assertIn('3 records and 0 artifacts removed in', runs[1])
        for qid in old:
            self.assertError(b.get(f'{API}/history/{qid}'), 'query_not_found')
        for qid in new:
            self.assertEqual(b.get(f'{API}/history/{qid}').json['id'], qid)
        for i in range(3):
            for part in ('question', 'answer'):
                self.assertEqual(self.holders(d, f'retention-old{i}-3d9a-{part}'), [], (i, part))
        self.assertEqual(self.holders(d, 'retention-old0-3d9a-comment'), [])
        self.assertTrue(self.holders(d, 'retention-new0-3d9a-answer'))

    def retention_runs(self, d):
        """The journal lines of the retention's runs so far."""
        return [line for line in d.log().splitlines() if line.startswith('History retention (30 days): ')]

    def wait_retention_removal(self, d, after, timeout=30):
        """The first run after the first `after` runs that removed
        something (the runs before it removed nothing)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runs = self.retention_runs(d)[after:]
            removed = [line for line in runs if ': 0 records and 0 artifacts removed in ' not in line]
            if removed:
                return removed[0]
            time.sleep(0.05)
        raise AssertionError(f'no retention run removed anything: {self.retention_runs(d)[after:]}')

    def test_retention_while_running(self):
        """Records aged in the database while the daemon runs, a running
        query among them: the next hourly run (made 3 s here) removes the
        finished ones with their artifact, feedback and share link, leaves
        the running one and the new ones; the running one then finishes
        into the history, and the run after removes it too. Nothing of
        what went is in a file of the state directory."""
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_HISTORY_RETENTION_DAYS='30', WIKI_WEB_TEST_FAULTS='1',
                                 WIKI_WEB_TEST_RETENTION_INTERVAL_MS='3000')
        self.assertIn("Test fault: the history's retention runs every 3000 ms.", d.log())
        b, other = d.browser(), d.browser()
        art, shared, new = (self.ask_marked(d, llm, b, f'retention-{m}-8b4e') for m in ('art', 'shared', 'new'))
        data = b'retention-file-8b4e\n' * 512  # 10 KiB: overflow pages of their own
        aid = 'af_%032x' % 0x8b4e
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'), timeout=10)
        with db:
            db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                       ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                       (aid, art, 'kg.txt', 'text/plain', len(data), hashlib.sha256(data).hexdigest(), data))
        db.close()
        self.assertEqual(b.get(f'{API}/artifacts/{aid}').body, data)
        self.assertStatus(b.post(f'{API}/history/{shared}/feedback',
                                 {'rating': 'down', 'comment': 'retention-shared-8b4e-comment'}), 200)
        r = b.post(f'{API}/history/{shared}/share')
        self.assertStatus(r, 201)
        token = r.json['token']
        r = b.post(f'{API}/history/{new}/share')
        self.assertStatus(r, 201)
        new_token = r.json['token']
        self.assertStatus(other.get(f'{API}/shared/{token}'), 200)

        # A query that runs until the model is let go.
        llm.set_script([{'answer': 'The answer is retention-running-8b4e-answer.', 'hold': 'running'}])
        out = {}
        t = threading.Thread(target=lambda: out.update(r=b.post(API + '/query', {
            'question': 'What is retention-running-8b4e-question?'}, timeout=60)), daemon=True)
        t.start()
        self.addCleanup(llm.release_all)
        deadline = time.monotonic() + 20
        while True:
            items = [i for i in b.get(API + '/history').json['items'] if 'retention-running-8b4e' in i['question']]
            if items and items[0]['status'] == 'running':
                running = items[0]['id']
                break
            self.assertLess(time.monotonic(), deadline, 'the query did not start')
            time.sleep(0.05)
        for m in ('art', 'shared', 'running'):
            self.assertTrue(self.holders(d, f'retention-{m}-8b4e-question'), m)
        self.assertTrue(self.holders(d, 'retention-file-8b4e'))
        self.assertTrue(self.holders(d, 'retention-shared-8b4e-comment'))

        # 40 days old, the running one too, while the daemon runs.
        before = len(self.retention_runs(d))
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'), timeout=10)
        with db:
            for qid in (art, shared, running):
                db.execute('UPDATE queries SET created_at = created_at - ? WHERE id = ?', (40 * DAY_USEC, qid))
        db.close()
        run = self.wait_retention_removal(d, before)
        self.assertIn(': 2 records and 1 artifact removed in ', run)
        after = len(self.retention_runs(d))

        # The running one is untouched, and finishes into the history.
        self.assertEqual(b.get(f'{API}/history/{running}').json['status'], 'running')
        llm.release('running')
        t.join(60)
        self.assertStatus(out['r'], 200)
        self.assertEqual(out['r'].header('Wikiweb-Query-Id'), running)
        rec = b.get(f'{API}/history/{running}')
        self.assertEqual(rec.status, 200, f'a run came first: {self.retention_runs(d)[after - 1:]}')
        self.assertEqual(rec.json['status'], 'succeeded')
        self.assertIn('retention-running-8b4e-answer', rec.json['answer'])
        self.assertTrue(self.holders(d, 'retention-running-8b4e-answer'))

        # What went: the records, the artifact, the share link, their text.
        for qid in (art, shared):
            self.assertError(b.get(f'{API}/history/{qid}'), 'query_not_found')
        self.assertError(b.get(f'{API}/artifacts/{aid}'), 'artifact_not_found')
        self.assertError(other.get(f'{API}/shared/{token}'), 'not_found')
        for m in ('art', 'shared'):
            for part in ('question', 'answer'):
                self.assertEqual(self.holders(d, f'retention-{m}-8b4e-{part}'), [], (m, part))
        self.assertEqual(self.holders(d, 'retention-file-8b4e'), [])
        self.assertEqual(self.holders(d, 'retention-shared-8b4e-comment'), [])
        # What stays: the new record and its link.
        self.assertEqual(b.get(f'{API}/history/{new}').json['id'], new)
        self.assertStatus(other.get(f'{API}/shared/{new_token}'), 200)

        # Finished and 40 days old, the run after removes it.
        run = self.wait_retention_removal(d, after)
        self.assertIn(': 1 record and 0 artifacts removed in ', run)
        self.assertError(b.get(f'{API}/history/{running}'), 'query_not_found')
        for part in ('question', 'answer'):
            self.assertEqual(self.holders(d, f'retention-running-8b4e-{part}'), [], part)
        self.assertEqual([i['id'] for i in b.get(API + '/history').json['items']], [new])
        self.assertTrue(self.holders(d, 'retention-new-8b4e-answer'))

    def test_retention_setting(self):
        for bad in ('-1', '36501', 'x', '1.5'):
            p = subprocess.run([harness.WIKIWEBD, '--check-config'], capture_output=True, text=True, timeout=10,
                               env={'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
                                    'WIKI_WEB_HISTORY_RETENTION_DAYS': bad})
            self.assertNotEqual(p.returncode, 0, p)
            self.assertIn('WIKI_WEB_HISTORY_RETENTION_DAYS', p.stderr, p)
        for good, shown in (('', '0'), ('0', '0'), ('36500', '36500')):
            env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin')}
            if good:
                env['WIKI_WEB_HISTORY_RETENTION_DAYS'] = good
            p = subprocess.run([harness.WIKIWEBD, '--check-config'], capture_output=True, text=True, timeout=10,
                               env=env)
            self.assertEqual(p.returncode, 0, p)
            self.assertIn(f'WIKI_WEB_HISTORY_RETENTION_DAYS={shown}', p.stdout.splitlines(), p.stdout)


if __name__ == '__main__':
    test_pipeline.main()
