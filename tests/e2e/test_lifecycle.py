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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
from harness import API  # noqa: E402
import test_pipeline  # noqa: E402
from test_pipeline import PipelineBase  # noqa: E402


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


class Lifecycle(PipelineBase):

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
