#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""WIKI_WEB_QUEUE_SLOTS (API.md 5).

Three slots with a scripted model that notes how many replies it is
writing at once: three sessions' queries run at once (their model calls
overlap at the model), a fourth waits and is promoted when the first
query's cleanup is confirmed, each query stream carries its own query's
text only, a session that already runs a query is busy, a stop and a
D-Bus Drain() with three running let all three finish, and CancelQuery
ends one of three (the D-Bus parts on a private dbus-daemon given to the
daemon as its system bus).

Then the slots beside the model server's own capacity: llama.cpp's GET
/props says how many slots it serves; a server that reports fewer than
the setting gets a warning in the log naming both, one that says nothing
(or enough) gets none, and with one slot nothing is asked."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402

# Configured so that the executor has a model client; no query runs, so
# the wiki (a closed loopback port) is never asked.
WIKI = 'http://127.0.0.1:9/w/api.php'
WARNING = 'WIKI_WEB_QUEUE_SLOTS'


class Slots(harness.DaemonTestCase):

    def tmp_dir(self):
        t = tempfile.mkdtemp(prefix='wikiweb-slots-')
        self.addCleanup(shutil.rmtree, t, True)
        return t

    def llm(self, **kw):
        f = fake_llm.FakeLLM([], flavor='llamacpp', **kw).start()
        self.addCleanup(f.stop)
        return f

    def props_requests(self, llm):
        with llm.lock:
            return [r for r in llm.requests if r['path'] == '/props']

    def start(self, llm, slots, **env):
        d = self.daemon(WIKI_WEB_WIKI_API_URL=WIKI, WIKI_WEB_LLM_URL=llm.url, WIKI_WEB_LLM_MODEL='m',
                        WIKI_WEB_QUEUE_SLOTS=slots, **env)
        # Any request: the daemon is up and its start-up check under way.
        self.assertStatus(d.browser().get(harness.API + '/health'), 200)
        return d

    def wait_for(self, cond, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.05)
        return cond()

    def test_fewer_slots_warns_naming_both(self):
        tmp = self.tmp_dir()
        key = os.path.join(tmp, 'llm-key')
        with open(key, 'w') as f:
            f.write('sk-slots-test-key')
        llm = self.llm(total_slots=2)
        d = self.start(llm, 4, WIKI_WEB_LLM_API_KEY_FILE=key)
        d.secrets.add('sk-slots-test-key')
        self.assertTrue(self.wait_for(lambda: 'total_slots=2' in d.log()), d.log())
        line = next(x for x in d.log().splitlines() if 'total_slots=2' in x)
        self.assertIn('WIKI_WEB_QUEUE_SLOTS=4', line)
        # Asked once, at the server's root, with the model key.
        reqs = self.props_requests(llm)
        self.assertEqual(len(reqs), 1, reqs)
        self.assertEqual(reqs[0]['headers'].get('authorization'), 'Bearer sk-slots-test-key')
        d.check_log_secrecy()

    def test_enough_slots_or_silence_no_warning(self):
        for total in (4, 8, None):
            with self.subTest(total_slots=total):
                llm = self.llm(total_slots=total)
                d = self.start(llm, 4)
                if total is not None:
                    self.assertTrue(self.wait_for(lambda: len(self.props_requests(llm)) == 1))
                else:
                    time.sleep(0.5)
                d.stop()
                self.assertNotIn('total_slots=', d.log())

    def test_one_slot_asks_nothing(self):
        llm = self.llm(total_slots=1)
        d = self.start(llm, 1)
        time.sleep(0.5)
        d.stop()
        self.assertEqual(self.props_requests(llm), [])


def answer(n):
    return f'Answer number {n} for its own session. Answer number {n}, again.'


class Overlap(fake_llm.FakeLLM):
    """Each request answered from its own question ("answer N slow|fast"),
    in pieces; notes how many replies are being written at once."""

    def __init__(self):
        super().__init__([], flavor='llamacpp')
        self.active = 0
        self.most = 0
        self.gate = threading.Lock()

    def _choose(self, request):
        msgs = request.get('messages') or []
        q = next((m.get('content') or '' for m in msgs if m.get('role') == 'user'), '')
        n = q.split()[1] if len(q.split()) > 1 else '0'
        delay = 0.1 if 'fast' in q else 0.35
        return {'answer': answer(n), 'piece': 10, 'chunk_delay': delay}

    def _reply(self, h, flavor, step, request, n):
        with self.gate:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            super()._reply(h, flavor, step, request, n)
        finally:
            with self.gate:
                self.active -= 1




class ThreeSlots(harness.DaemonTestCase):

    def tmp_dir(self):
        t = tempfile.mkdtemp(prefix='wikiweb-slots-')
        self.addCleanup(shutil.rmtree, t, True)
        return t

    def bus(self):
        """A private dbus-daemon; its address."""
        if not shutil.which('dbus-daemon') or not shutil.which('busctl'):
            harness.skip_or_fail('dbus-daemon or busctl is missing')
        address, p = harness.private_bus(self.tmp_dir())

        def stop():
            p.terminate()
            p.wait(10)
        self.addCleanup(stop)
        return address

    def busctl(self, address, *args):
        return subprocess.run(['busctl', f'--address={address}', *args], capture_output=True, text=True,
                              timeout=30)

    def start(self, bus=None, **env):
        self.model = Overlap().start()
        self.addCleanup(self.model.stop)
        if bus:
            env['DBUS_SYSTEM_BUS_ADDRESS'] = bus
        return self.daemon(WIKI_WEB_WIKI_API_URL=WIKI, WIKI_WEB_LLM_URL=self.model.url, WIKI_WEB_LLM_MODEL='m',
                           WIKI_WEB_QUEUE_SLOTS=3, **env)

    def ask_stream(self, d, n, speed='slow'):
        b = d.browser()
        b.status()
        s = harness.EventStream(d, harness.API + '/query', method='POST', cookie=b.cookie,
                                body={'question': f'answer {n} {speed}'}, timeout=60)
        self.addCleanup(s.close)
        return b, s

    def first_event(self, s):
        ev = s.next_event(30)
        self.assertEqual(ev['event'], 'query', ev)
        return ev['data']['id']

    def rest(self, s):
        evs = s.events(timeout=60)
        self.assertEqual(evs[-1]['event'], 'record', evs)
        return evs

    def test_three_at_once_fourth_promoted(self):
        d = self.start()
        runs = [self.ask_stream(d, n, 'fast' if n == 1 else 'slow') for n in (1, 2, 3)]
        qids = [self.first_event(s) for _, s in runs]
        self.assertEqual(len(set(qids)), 3)
        st = check_status(d.browser())
        self.assertEqual(st['slots'], {'total': 3, 'idle': 0, 'reserved': 0, 'running': 3})
        # One running query per session.
        self.assertError(runs[1][0].query('again'), 'busy')
        # A fourth waits.
        b4 = d.browser()
        st = check_status_json(b4.join())
        self.assertEqual((st['ticket']['status'], st['ticket']['position']), ('waiting', 1))
        # The first ends: its slot goes to the fourth, the others still run.
        evs1 = self.rest(runs[0][1])
        st = check_status_json(b4.status())
        self.assertEqual(st['ticket']['status'], 'reserved', st)
        self.assertEqual(st['slots']['running'], 2, st)
        r4 = [None]
        t4 = threading.Thread(target=lambda: r4.__setitem__(0, b4.query('answer 4 fast', timeout=60)))
        t4.start()
        evs = [evs1] + [self.rest(s) for _, s in runs[1:]]
        t4.join(60)
        self.assertStatus(r4[0], 200)
        self.assertEqual(r4[0].json['answer'], answer(4))
        # Each stream carries its own query only.
        for n, (qid, e) in enumerate(zip(qids, evs), start=1):
            text = ''.join(x['data']['delta'] for x in e if x['event'] == 'text')
            self.assertEqual(text, answer(n))
            self.assertEqual(e[-1]['data']['id'], qid)
            self.assertEqual(e[-1]['data']['status'], 'succeeded')
        # The model wrote three replies at once, never four.
        self.assertEqual(self.model.most, 3)
        self.wait_state(d, 'idle')

    def test_stop_with_three_running(self):
        d = self.start()
        runs = [self.ask_stream(d, n) for n in (1, 2, 3)]
        for _, s in runs:
            self.first_event(s)
        d.proc.send_signal(__import__('signal').SIGTERM)
        for _, s in runs:
            self.assertEqual(self.rest(s)[-1]['data']['status'], 'succeeded')
        self.assertEqual(d.wait_exit(30), 0)
        self.assertEqual(self.model.most, 3)

    def test_drain_and_cancel_one_of_three(self):
        bus = self.bus()
        d = self.start(bus=bus)
        runs = [self.ask_stream(d, n) for n in (1, 2, 3)]
        qids = [self.first_event(s) for _, s in runs]
        r = self.busctl(bus, 'get-property', 'org.wikiweb.Queue1', '/org/wikiweb/Queue1', 'org.wikiweb.Queue1',
                        'RunningQueries')
        self.assertEqual(r.returncode, 0, r.stderr)
        for q in qids:
            self.assertIn(q, r.stdout)
        r = self.busctl(bus, 'call', 'org.wikiweb.Queue1', '/org/wikiweb/Queue1', 'org.wikiweb.Queue1', 'Drain')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertError(d.browser().join(), 'queue_full')
        r = self.busctl(bus, 'call', 'org.wikiweb.Queue1', '/org/wikiweb/Queue1', 'org.wikiweb.Queue1',
                        'CancelQuery', 's', qids[1])
        self.assertEqual(r.returncode, 0, r.stderr)
        recs = [self.rest(s)[-1]['data'] for _, s in runs]
        self.assertEqual([x['status'] for x in recs], ['succeeded', 'failed', 'succeeded'])
        self.assertEqual(recs[1]['error']['code'], 'execution_failed')
        self.assertEqual(recs[1]['error']['message'], 'Cancelled by an administrator')
        self.wait_state(d, 'idle')


def check_status(b):
    return check_status_json(b.status())


def check_status_json(r):
    assert r.status in (200, 201), r
    return harness.check_status_object(r.json)


if __name__ == '__main__':
    harness.main()
