#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The history's life cycle (API.md 7, wikiwebd(8) "What is kept"): a
deleted record leaves its text in no file of the state directory. The
real wikiwebd, the test MediaWiki and the scripted model."""

import os
import sys

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

    def ask_marked(self, d, llm, b, marker):
        llm.set_script([{'answer': f'The answer is {marker}-answer.'}])
        r = b.post(API + '/query', {'question': f'What is {marker}-question?'}, timeout=60)
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


if __name__ == '__main__':
    test_pipeline.main()
