#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""WIKI_WEB_QUEUE_SLOTS (API.md 5) beside the model server's own capacity:
llama.cpp's GET /props says how many slots it serves; a server that
reports fewer than the setting gets a warning in the log naming both, one
that says nothing (or enough) gets none, and with one slot nothing is
asked."""

import os
import shutil
import sys
import tempfile
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


if __name__ == '__main__':
    harness.main()
