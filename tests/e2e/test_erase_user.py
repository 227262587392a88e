#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An administrator's erasure (API.md 12.1 EraseUser, wikiwebd(8) "Erasing
a person"): over the real D-Bus (a private dbus-daemon; the caller is
root, whom polkit is not asked about; the system suite runs it under the
real polkitd), every record of the person on every device goes with its
feedback, share links, files and access tokens, the query they wait for
is cancelled, nothing of anyone else's is touched, and the erased text is
in no file of the state directory. The real wikiwebd, the test MediaWiki
and the scripted model."""

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
from harness import API  # noqa: E402
from test_identity import request  # noqa: E402
from test_lifecycle import LifecycleBase  # noqa: E402
import test_pipeline  # noqa: E402

ALICE = {'X-Remote-User': 'alice'}
BOB = {'X-Remote-User': 'bob'}
ARTIFACT_BYTES = 3000


class EraseUser(LifecycleBase):

    def bus(self):
        """A private dbus-daemon; its address."""
        if not shutil.which('dbus-daemon') or not shutil.which('busctl'):
            harness.skip_or_fail('dbus-daemon or busctl is missing')
        d = tempfile.mkdtemp(prefix='wikiweb-erase-bus-')
        self.addCleanup(shutil.rmtree, d, True)
        address, p = harness.private_bus(d)

        def stop():
            p.terminate()
            p.wait(10)
        self.addCleanup(stop)
        return address

    def erase(self, bus, name):
        return subprocess.run(['busctl', f'--address={bus}', '--timeout=60', 'call', 'org.wikiweb.Queue1',
                               '/org/wikiweb/Queue1', 'org.wikiweb.Queue1', 'EraseUser', 's', name],
                              capture_output=True, text=True, timeout=90)

    def ask_held(self, llm, b, marker, headers, hold):
        """A query the model holds (release(hold) lets it answer): its
        thread, and out['r'] its response once it ends."""
        llm.set_script([{'answer': f'The answer is {marker}-answer.', 'hold': hold}])
        out = {}
        t = threading.Thread(target=lambda: out.setdefault('r', b.post(
            API + '/query', {'question': f'What is {marker}-question?'}, timeout=60, headers=headers)))
        t.start()
        return t, out

    def test_erase_user_over_dbus(self):
        bus = self.bus()
        llm = self.llm([])
        d = self.pipeline_daemon(llm, DBUS_SYSTEM_BUS_ADDRESS=bus, WIKI_WEB_TRUSTED_PROXIES='127.0.0.1',
                                 WIKI_WEB_REQUIRE_USER='false', WIKI_WEB_TEST_FAULTS='1',
                                 WIKI_WEB_TEST_ARTIFACT_BYTES=str(ARTIFACT_BYTES))
        laptop, phone, other = d.browser(), d.browser(), d.browser()
        q1 = self.ask_marked(d, llm, laptop, 'eraseuser-a1-5b3e', headers=ALICE)
        q2 = self.ask_marked(d, llm, phone, 'eraseuser-a2-5b3e', follow_up=q1, headers=ALICE)
        self.assertStatus(laptop.post(f'{API}/history/{q1}/feedback',
                                      {'rating': 'down', 'comment': 'eraseuser-a1-5b3e-comment'}, headers=ALICE), 200)
        r = phone.post(f'{API}/history/{q2}/share', headers=ALICE)
        self.assertStatus(r, 201)
        share = r.json['token']
        r = laptop.post(API + '/tokens', {'name': 'assistant'}, headers=ALICE)
        self.assertStatus(r, 201)
        token = r.json['token']
        d.secrets.add(token)
        bearer = [('Authorization', 'Bearer ' + token)]
        self.assertStatus(request(d, 'GET', API + '/history', bearer, source='127.0.0.3'), 200)
        artifact = laptop.get(f'{API}/history/{q1}', headers=ALICE).json['artifacts'][0]['download_url']
        self.assertStatus(laptop.get(artifact, headers=ALICE), 200)
        kept = self.ask_marked(d, llm, other, 'eraseuser-b1-5b3e', headers=BOB)
        self.assertStatus(other.get(f'{API}/shared/{share}', headers=BOB), 200)
        for part in ('question', 'answer', 'comment'):
            self.assertTrue(self.holders(d, f'eraseuser-a1-5b3e-{part}'), part)

        # Bob's query runs (the model holds its answer); Alice waits behind it.
        running, out = self.ask_held(llm, other, 'eraseuser-b2-5b3e', BOB, 'bob')
        self.wait_state(d, 'running')
        self.assertStatus(laptop.join(headers=ALICE), 201)
        self.assertEqual(laptop.status(headers=ALICE).json['ticket']['status'], 'waiting')

        r = self.erase(bus, 'alice')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), 't 2')
        # Checkpointed (TRUNCATE) before the reply; Bob's run writes again only at its end.
        self.assertEqual(os.path.getsize(os.path.join(d.state_directory, 'history.sqlite3-wal')), 0)
        # Her ticket is gone from the queue.
        self.assertIsNone(laptop.status(headers=ALICE).json['ticket'])
        # Bob's run goes on and ends as it would have.
        llm.release('bob')
        running.join(60)
        self.assertStatus(out['r'], 200)

        self.assertEqual(phone.get(API + '/history', headers=ALICE).json['items'], [])
        for qid in (q1, q2):
            self.assertError(laptop.get(f'{API}/history/{qid}', headers=ALICE), 'query_not_found')
        self.assertError(other.get(f'{API}/shared/{share}', headers=BOB), 'not_found')
        self.assertStatus(laptop.get(artifact, headers=ALICE), 404)
        r = request(d, 'GET', API + '/history', bearer, source='127.0.0.3')
        self.assertStatus(r, 401)
        self.assertError(r, 'invalid_token')
        for m in ('eraseuser-a1-5b3e', 'eraseuser-a2-5b3e'):
            for part in ('question', 'answer'):
                self.assertEqual(self.holders(d, f'{m}-{part}'), [], (m, part))
        self.assertEqual(self.holders(d, 'eraseuser-a1-5b3e-comment'), [])
        db = sqlite3.connect(f'file:{os.path.join(d.state_directory, "history.sqlite3")}?mode=ro', uri=True)
        try:
            self.assertEqual(db.execute('SELECT count(*) FROM artifacts WHERE query_id IN (?, ?)',
                                        (q1, q2)).fetchone()[0], 0)
            self.assertEqual(db.execute('SELECT count(*) FROM tokens').fetchone()[0], 0)
        finally:
            db.close()
        line = [x for x in d.log().splitlines() if 'erased the history of alice' in x]
        self.assertEqual(len(line), 1, line)
        self.assertIn('2 records, 2 artifacts, 1 access token', line[0])
        self.assertNotIn('eraseuser-a', d.log())

        # Bob's records, link and files are untouched.
        items = [i['id'] for i in other.get(API + '/history', headers=BOB).json['items']]
        self.assertEqual(items[1:], [kept])
        self.assertTrue(self.holders(d, 'eraseuser-b1-5b3e-answer'))
        rec = other.get(f'{API}/history/{kept}', headers=BOB).json
        self.assertStatus(other.get(rec['artifacts'][0]['download_url'], headers=BOB), 200)

        # Nobody left of that name: 0, and a bad name is refused.
        r = self.erase(bus, 'alice')
        self.assertEqual((r.returncode, r.stdout.strip()), (0, 't 0'), r.stderr)
        r = self.erase(bus, 'bad\x01name')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('valid identity name', r.stderr)

    def test_erase_user_while_their_query_runs(self):
        """EraseUser while the person's own query runs (the model holds its
        answer): it is cancelled, and the reply comes once its record is
        durable, counting it, never at the 60 s bound."""
        bus = self.bus()
        llm = self.llm([])
        self.addCleanup(llm.release_all)
        d = self.pipeline_daemon(llm, DBUS_SYSTEM_BUS_ADDRESS=bus, WIKI_WEB_TRUSTED_PROXIES='127.0.0.1',
                                 WIKI_WEB_REQUIRE_USER='false')
        b = d.browser()
        running, out = self.ask_held(llm, b, 'eraseuser-run-7c1d', ALICE, 'alice')
        self.wait_state(d, 'running')
        started = time.monotonic()
        r = self.erase(bus, 'alice')
        took = time.monotonic() - started
        running.join(30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), 't 1')
        self.assertLess(took, 30)
        print(f'# EraseUser answered {took:.3f} s after its call', file=sys.stderr)
        # Her query was answered as cancelled, before or with the erasure's reply.
        self.assertFalse(running.is_alive())
        self.assertError(out['r'], 'execution_failed')
        self.assertEqual(b.get(API + '/history', headers=ALICE).json['items'], [])
        line = [x for x in d.log().splitlines() if 'erased the history of alice' in x]
        self.assertEqual(len(line), 1, line)
        self.assertIn('1 record, 0 artifacts, 0 access tokens; 1 running query cancelled.', line[0])
        for part in ('question', 'answer'):
            self.assertEqual(self.holders(d, f'eraseuser-run-7c1d-{part}'), [], part)


if __name__ == '__main__':
    test_pipeline.main()
