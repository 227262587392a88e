#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 11.2-11.4: the query stream, re-attaching to it, and the running
query in the status object, against the test MediaWiki and the scripted
model, read raw as Server-Sent Events (and with curl -N)."""

import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import API, check_status_object  # noqa: E402
from test_pipeline import PipelineBase, SEARCH_READ_ANSWER, wiki  # noqa: E402

QUESTION = {'question': 'How many kilograms of apples did the orchard produce in 2023?'}


class QueryStream(PipelineBase):

    def post_stream(self, d, b=None, **kw):
        b = b or d.browser()
        if b.cookie is None:
            b.status()
        s = harness.EventStream(d, API + '/query', method='POST', cookie=b.cookie, body=QUESTION, **kw)
        self.addCleanup(s.close)
        return b, s

    def wait_recorded(self, b, qid, timeout=60):
        """Poll the history until the query is no longer running; its record."""
        deadline = time.monotonic() + timeout
        while True:
            rec = b.get(API + '/history/' + qid).json
            if rec['status'] != 'running' or time.monotonic() > deadline:
                return rec
            time.sleep(0.1)

    def test_full_sequence(self):
        steps = [dict(SEARCH_READ_ANSWER[0], content='Let me search the wiki first.')] + SEARCH_READ_ANSWER[1:]
        d = self.pipeline_daemon(self.llm(steps))
        b, s = self.post_stream(d)
        s.check_stream_headers()
        qid = s.headers.get('Wikiweb-Query-Id')
        self.assertRegex(qid, harness.QUERY_ID_RE)
        evs = s.events(timeout=60)
        self.assertEqual([e['id'] for e in evs], list(range(1, len(evs) + 1)))
        # The model streams its text: a step's text comes as several
        # deltas, as the scripted model wrote its chunks.
        texts = {}
        for e in evs:
            if e['event'] == 'text':
                texts.setdefault(e['data']['step'], []).append(e['data']['delta'])
        self.assertEqual(sorted(texts), [1, 3])
        self.assertGreater(len(texts[3]), 1)
        self.assertEqual(''.join(texts[1]), 'Let me search the wiki first.')
        # Consecutive text events as one, for the order of the rest.
        evs = [e for i, e in enumerate(evs) if not (e['event'] == 'text' and evs[i - 1]['event'] == 'text')]
        names = [e['event'] for e in evs]
        self.assertEqual(names, [
            'query', 'step', 'text', 'tool', 'tool_result',
            'step', 'tool', 'tool_result', 'tool', 'tool_result',
            'step', 'text', 'phase', 'citations', 'record'])
        self.assertEqual(evs[0]['data']['id'], qid)
        self.assertEqual([e['data']['step'] for e in evs if e['event'] == 'step'], [1, 2, 3])
        self.assertEqual(evs[3]['data'], {'step': 1, 'call': 1, 'name': 'wiki_search',
                                          'arguments': {'query': 'orchard fruit', 'limit': 5}})
        r = evs[4]['data']
        self.assertEqual((r['step'], r['call'], r['name'], r['ok']), (1, 1, 'wiki_search', True))
        self.assertGreater(r['summary']['results'], 0)
        self.assertTrue(harness.is_int(r['duration_ms']))
        self.assertEqual([(e['data']['call'], e['data']['arguments']['title']) for e in evs[6:10:2]],
                         [(1, 'Apples'), (2, 'Fruit production')])
        read = evs[7]['data']['summary']
        self.assertEqual(set(read), {'title', 'url', 'revision_id'})
        self.assertEqual(evs[12]['data'], {'phase': 'cleanup'})
        record = evs[-1]['data']
        # The record's citations, just before it (none here).
        self.assertEqual(evs[-2]['data'], {'citations': record['citations']})
        self.assertEqual(record['citations'], [])
        self.assertEqual(record, b.get(API + '/history/' + qid).json)
        self.assertEqual(record['status'], 'succeeded')
        # The answer is the text of the last step.
        self.assertEqual(''.join(texts[3]), record['answer'])
        # A finished query re-attached: query, then record.
        again = b.stream(API + f'/history/{qid}/events').events()
        self.assertEqual([(e['id'], e['event']) for e in again], [(1, 'query'), (2, 'record')])
        self.assertEqual(again[1]['data'], record)

    def test_rejected_calls_have_events(self):
        # An unknown tool whose name would break the event's JSON if it were
        # pasted in, bad arguments, then a good call: each call has its tool
        # and tool_result, the rejected ones not ok with the error the model
        # was told.
        hostile = 'evil"}\n<script>' + 'x' * 100
        steps = [{'tool_calls': [{'name': hostile, 'arguments': {}},
                                 {'name': 'wiki_search', 'arguments': {'query': ''}},
                                 {'name': 'wiki_search', 'arguments': {'query': 'orchard fruit', 'limit': 5}}]},
                 {'answer': 'Done.'}]
        llm = self.llm(steps)
        d = self.pipeline_daemon(llm)
        b, s = self.post_stream(d)
        evs = s.events(timeout=60)
        tools = [e['data'] for e in evs if e['event'] in ('tool', 'tool_result')]
        self.assertEqual([(t['step'], t['call']) for t in tools],
                         [(1, 1), (1, 1), (1, 2), (1, 2), (1, 3), (1, 3)])
        self.assertEqual(tools[0], {'step': 1, 'call': 1, 'name': hostile[:64], 'arguments': {}})
        self.assertFalse(tools[1]['ok'])
        self.assertEqual(tools[1]['name'], hostile[:64])
        self.assertIn('unknown tool', tools[1]['summary']['error'])
        self.assertEqual(tools[2], {'step': 1, 'call': 2, 'name': 'wiki_search', 'arguments': {}})
        self.assertFalse(tools[3]['ok'])
        self.assertIn('query must be a string', tools[3]['summary']['error'])
        self.assertEqual(tools[4]['arguments'], {'query': 'orchard fruit', 'limit': 5})
        self.assertTrue(tools[5]['ok'])
        self.assertEqual(evs[-1]['event'], 'record')
        self.assertEqual(evs[-1]['data']['status'], 'succeeded')

    def test_long_answer_in_deltas(self):
        d = self.pipeline_daemon(self.llm([{'oversized': 100000}]), WIKI_WEB_MODEL_MAX_OUTPUT_BYTES=200000)
        b, s = self.post_stream(d)
        evs = s.events(timeout=60)
        texts = [e['data']['delta'] for e in evs if e['event'] == 'text']
        self.assertGreater(len(texts), 1)
        self.assertEqual(''.join(texts), evs[-1]['data']['answer'])

    def test_reattach_loses_nothing(self):
        steps = [dict(SEARCH_READ_ANSWER[0], content='Searching.')] + SEARCH_READ_ANSWER[1:]
        steps[1] = dict(steps[1], delay=1.5)
        d = self.pipeline_daemon(self.llm(steps))
        b, s = self.post_stream(d)
        qid = s.headers.get('Wikiweb-Query-Id')
        seen = [s.next_event(timeout=30) for _ in range(4)]  # query, step, text, tool
        last = seen[-1]['id']
        # A reload: the same session re-attaches from its last id.
        s2 = b.stream(API + f'/history/{qid}/events', headers={'Last-Event-ID': str(last)})
        s2.check_stream_headers()
        rest2 = s2.events(timeout=60)
        rest1 = s.events(timeout=60)
        self.assertEqual([(e['id'], e['event'], e['data']) for e in rest2],
                         [(e['id'], e['event'], e['data']) for e in rest1])
        self.assertEqual(rest2[0]['id'], last + 1)
        # A second tab from the start gets everything (text may be merged).
        full = b.stream(API + f'/history/{qid}/events').events()
        self.assertEqual([e['event'] for e in full], ['query', 'record'])  # it ended meanwhile

    def test_reattach_from_scratch_while_running(self):
        steps = [dict(SEARCH_READ_ANSWER[0], content='Searching.'), dict(SEARCH_READ_ANSWER[1], delay=1.5),
                 SEARCH_READ_ANSWER[2]]
        d = self.pipeline_daemon(self.llm(steps))
        b, s = self.post_stream(d)
        qid = s.headers.get('Wikiweb-Query-Id')
        s.wait_for('tool_result', timeout=30)
        tab = b.stream(API + f'/history/{qid}/events')
        mine = s.events(timeout=60)
        theirs = tab.events(timeout=60)
        self.assertEqual(theirs[0]['event'], 'query')
        self.assertEqual(theirs[-1]['data'], mine[-1]['data'])
        self.assertEqual(theirs[-1]['id'], mine[-1]['id'])
        # Another session: not its query.
        other = d.browser().stream(API + f'/history/{qid}/events')
        self.assertError(other.response, 'query_not_found')

    def test_status_running_query_and_other_session(self):
        steps = [dict(SEARCH_READ_ANSWER[0], delay=1.5)] + SEARCH_READ_ANSWER[1:]
        d = self.pipeline_daemon(self.llm(steps))
        b, s = self.post_stream(d)
        qid = s.headers.get('Wikiweb-Query-Id')
        s.wait_for('step')
        st = check_status_object(b.status().json)
        self.assertEqual(st['running_query'], {'id': qid, 'step': 1, 'phase': 'model'})
        self.assertIsNone(check_status_object(d.browser().status().json)['running_query'])
        other = d.browser().stream(API + f'/history/{qid}/events')
        self.assertError(other.response, 'query_not_found')
        s.events(timeout=60)
        self.assertIsNone(check_status_object(b.status().json)['running_query'])

    def test_disconnect_mid_stream_query_finishes(self):
        steps = [dict(SEARCH_READ_ANSWER[0], delay=1.0)] + SEARCH_READ_ANSWER[1:]
        d = self.pipeline_daemon(self.llm(steps))
        b, s = self.post_stream(d)
        qid = s.headers.get('Wikiweb-Query-Id')
        s.next_event()
        s.close()
        rec = self.wait_recorded(b, qid)
        self.assertEqual(rec['status'], 'succeeded')

    def test_never_reading_client_is_cut_query_goes_on(self):
        d = self.pipeline_daemon(self.llm([{'oversized': 3000000}]), WIKI_WEB_MODEL_MAX_OUTPUT_BYTES=4000000)
        b, s = self.post_stream(d, rcvbuf=4096)
        qid = s.headers.get('Wikiweb-Query-Id')
        # Never read; wait for the query to end.
        rec = self.wait_recorded(b, qid)
        self.assertEqual(rec['status'], 'succeeded')
        self.assertIn('event stream was closed', d.log())
        # What was read stops short of the record.
        evs = []
        try:
            while True:
                ev = s.next_event(timeout=5)
                if ev is None:
                    break
                evs.append(ev)
        except (ConnectionResetError, socket.timeout, ValueError):
            pass
        self.assertNotIn('record', [e['event'] for e in evs])

    def test_refused_before_admission(self):
        d = self.pipeline_daemon(self.llm(SEARCH_READ_ANSWER))
        b = d.browser()
        self.assertStatus(b.join(), 201)
        streams = [b.queue_events() for _ in range(8)]
        _, s = self.post_stream(d, b)
        self.assertError(s.response, 'rate_limited')
        # Nothing changed: the ticket is still reserved for b.
        self.assertEqual(check_status_object(b.status().json)['ticket']['status'], 'reserved')
        for q in streams:
            q.close()
        # Invalid input is the ordinary JSON error, not a stream.
        bad = harness.EventStream(d, API + '/query', method='POST', cookie=b.cookie, body={'question': ''})
        self.assertError(bad.response, 'invalid_input')

    def test_curl(self):
        curl = shutil.which('curl')
        if not curl:
            self.skipTest('no curl')
        d = self.pipeline_daemon(self.llm(SEARCH_READ_ANSWER))
        out = subprocess.run([curl, '-sN', '-H', 'Accept: text/event-stream', '-H', 'Content-Type: application/json',
                              '-d', '{"question": "How much fruit?"}', f'http://{d.host}{API}/query'],
                             capture_output=True, timeout=60).stdout.decode()
        self.assertTrue(out.startswith('id: 1\nevent: query\ndata: {"id":"qr_'), out[:200])
        self.assertIn('\nevent: record\ndata: {', out)
        self.assertTrue(out.endswith('}\n\n'))


if __name__ == '__main__':
    harness.main()
