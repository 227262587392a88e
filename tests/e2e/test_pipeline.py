#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The query pipeline end to end, outside systemd (as the quick start runs
it): the real wikiwebd, a real MediaWiki 1.39 (tests/fixtures/mediawiki.py)
and the scripted model server (tests/fixtures/fake_llm.py), all on
127.0.0.1. No sandbox here: run_python is not offered, health says
"sandbox": "unavailable", and queries answer from the wiki."""

import json
import os
import socket
import statistics
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402
import mediawiki  # noqa: E402

LLM_KEY = 'sk-test-0123456789abcdef-pipeline-key'
WIKIS = {}


def wiki(private=False):
    """One wiki per kind for the whole file (a copy of the template each)."""
    if private not in WIKIS:
        WIKIS[private] = mediawiki.Wiki(private=private).start()
    return WIKIS[private]


def expected_source(w, title):
    """(title after redirects, canonical URL, revision id) as the wiki's own
    API says."""
    params = {'action': 'query', 'titles': title, 'redirects': '1', 'prop': 'revisions|info',
              'rvprop': 'ids', 'inprop': 'url'}
    if w.private:
        raise AssertionError('use the public wiki for expectations')
    status, _, body = w.api(**params)
    page = json.loads(body)['query']['pages'][0]
    return {'title': page['title'], 'url': page.get('canonicalurl') or page['fullurl'],
            'revision_id': page['revisions'][0]['revid']}


SEARCH_READ_ANSWER = [
    {'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'orchard fruit', 'limit': 5}}]},
    {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apples'}},
                    {'name': 'wiki_read', 'arguments': {'title': 'Fruit production'}}]},
    {'answer': 'Apples produced 1410 kg in 2023 [Apple] [Fruit production].'},
]


class Pipeline(harness.DaemonTestCase):

    @classmethod
    def setUpClass(cls):
        why = mediawiki.available()
        if why:
            harness.skip_or_fail('no MediaWiki here: ' + why)

    def llm(self, steps, **kw):
        f = fake_llm.FakeLLM(steps, **kw).start()
        self.addCleanup(f.stop)
        return f

    def pipeline_daemon(self, llm, w=None, api_key=None, **env):
        w = w or wiki()
        settings = {
            'WIKI_WEB_WIKI_API_URL': w.api_url,
            'WIKI_WEB_LLM_URL': llm.url,
            'WIKI_WEB_LLM_MODEL': 'test-model',
        }
        tmp = self.tmp_dir()
        if api_key:
            p = os.path.join(tmp, 'llm-key')
            with open(p, 'w') as f:
                f.write(api_key)
            settings['WIKI_WEB_LLM_API_KEY_FILE'] = p
        if env.pop('bot', False):
            p = os.path.join(tmp, 'wiki-password')
            with open(p, 'w') as f:
                f.write(env.pop('bot_password', w.bot_password))
            settings['WIKI_WEB_WIKI_USERNAME'] = w.bot_user
            settings['WIKI_WEB_WIKI_PASSWORD_FILE'] = p
        settings.update(env)
        d = self.daemon(**settings)
        if api_key:
            d.secrets.add(api_key)
        if 'WIKI_WEB_WIKI_PASSWORD_FILE' in settings:
            d.secrets.add(open(settings['WIKI_WEB_WIKI_PASSWORD_FILE']).read())
        return d

    def tmp_dir(self):
        import tempfile
        import shutil
        t = tempfile.mkdtemp(prefix='wikiweb-pipeline-')
        self.addCleanup(shutil.rmtree, t, True)
        return t

    def ask(self, d, question='How many kilograms of apples did the orchard produce in 2023?', timeout=60, **kw):
        b = d.browser()
        body = {'question': question}
        body.update(kw)
        r = b.post('/api/v1/query', body, timeout=timeout)
        return b, r

    def check_record(self, d, b, r):
        """The 200 response is the record, and the history has the same."""
        self.assertStatus(r, 200)
        qid = r.header('Wikiweb-Query-Id')
        self.assertTrue(qid and qid.startswith('qr_'), r)
        rec = r.json
        self.assertEqual(rec['id'], qid)
        self.assertEqual(rec['status'], 'succeeded')
        h = b.get('/api/v1/history/' + qid)
        self.assertStatus(h, 200)
        self.assertEqual(h.json, rec)
        return rec

    def check_failed(self, d, b, r, code):
        self.assertError(r, code)
        qid = r.header('Wikiweb-Query-Id')
        self.assertTrue(qid and qid.startswith('qr_'), r)
        h = b.get('/api/v1/history/' + qid)
        self.assertStatus(h, 200)
        self.assertEqual(h.json['status'], 'failed')
        self.assertEqual(h.json['error']['code'], code, h.json)
        return h.json

    # -- the question answered --------------------------------------------

    def test_search_read_two_pages_answer(self):
        llm = self.llm(SEARCH_READ_ANSWER)
        d = self.pipeline_daemon(llm, api_key=LLM_KEY)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        self.assertEqual(rec['answer'], SEARCH_READ_ANSWER[2]['answer'])
        w = wiki()
        self.assertEqual(rec['sources'], [expected_source(w, 'Apples'), expected_source(w, 'Fruit production')])
        self.assertEqual(rec['sources'][0]['title'], 'Apple')  # through the redirect
        self.assertEqual(rec['error'], None)
        self.assertEqual(rec['artifacts'], [])
        # usage summed over the three replies (fake_llm reports usage per reply)
        reqs = llm.chat_requests()
        self.assertEqual(len(reqs), 3)
        self.assertEqual(rec['usage']['model'], 'test-model')
        self.assertGreater(rec['usage']['prompt_tokens'], 0)
        self.assertGreater(rec['usage']['completion_tokens'], 0)
        # fake_llm counts request_bytes // 4 prompt tokens per reply
        self.assertEqual(rec['usage']['prompt_tokens'],
                         sum(len(x['raw'].encode()) // 4 for x in llm.requests))
        t = rec['timings_ms']
        for k in ('queue', 'wiki', 'model', 'sandbox', 'cleanup', 'total'):
            self.assertTrue(harness.is_int(t[k]) and t[k] >= 0, t)
        self.assertGreaterEqual(t['total'], t['wiki'] + t['model'])
        # What the model was sent: the bearer key, tools without run_python,
        # the tool results in order, the redirect followed.
        for req in llm.requests:
            self.assertEqual(req['headers'].get('authorization'), 'Bearer ' + LLM_KEY)
        names = [t['function']['name'] for t in reqs[0]['tools']]
        self.assertEqual(sorted(names), ['wiki_read', 'wiki_search'])
        self.assertEqual(reqs[0]['model'], 'test-model')
        last = reqs[2]['messages']
        tool_msgs = [m for m in last if m['role'] == 'tool']
        self.assertEqual(len(tool_msgs), 3)
        search = json.loads(tool_msgs[0]['content'])
        self.assertTrue(any(x['title'] == 'Apple' for x in search['results']), search)
        apple = json.loads(tool_msgs[1]['content'])
        self.assertEqual(apple['title'], 'Apple')
        self.assertIn('orchard inventory', apple['content'])
        self.assertEqual(json.loads(tool_msgs[2]['content'])['title'], 'Fruit production')
        # health: no sandbox here, and the slot is free again
        hr = d.browser().get('/api/v1/health')
        self.assertEqual(hr.json['sandbox'], 'unavailable')
        self.assertEqual(hr.json['status'], 'ok')
        self.wait_state(d, 'idle')
        # the journal: one line per step with the query id, no question text
        log = d.log()
        qid = rec['id']
        self.assertIn(f'Query {qid}: step 1: model request', log)
        self.assertIn(f'Query {qid}: step 2: wiki_read done', log)
        self.assertNotIn('How many kilograms', log.replace('"question"', ''))
        self.assertNotIn(LLM_KEY, log)

    def test_requested_pages_read_first(self):
        llm = self.llm([{'answer': 'Cherry and Fig, see [Cherry] [Fig].'}])
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d, pages=['Cherry', 'Fig', 'No such page at all'])
        rec = self.check_record(d, b, r)
        w = wiki()
        self.assertEqual(rec['sources'], [expected_source(w, 'Cherry'), expected_source(w, 'Fig')])
        msgs = llm.chat_requests()[0]['messages']
        self.assertEqual([m['role'] for m in msgs[:2]], ['system', 'user'])
        tools = [json.loads(m['content']) for m in msgs if m['role'] == 'tool']
        self.assertEqual([t.get('title') for t in tools[:2]], ['Cherry', 'Fig'])
        self.assertEqual(tools[2], {'error': 'missing'})
        self.assertNotIn('authorization', llm.requests[0]['headers'])


if __name__ == '__main__':
    try:
        harness.main()
    finally:
        for w in WIKIS.values():
            w.stop()
