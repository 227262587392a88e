#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The query pipeline end to end, outside systemd (as the quick start runs
it): the real wikiwebd, a real MediaWiki 1.39 (tests/fixtures/mediawiki.py)
and the scripted model server (tests/fixtures/fake_llm.py), all on
127.0.0.1. No sandbox here: run_python is not offered, health says
"sandbox": "unavailable", and queries answer from the wiki."""

import json
import os
import re
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


def main():
    """harness.main(), then stop the wikis the file started."""
    try:
        harness.main()
    finally:
        for w in WIKIS.values():
            w.stop()


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


class PipelineBase(harness.DaemonTestCase):

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
            with open(settings['WIKI_WEB_WIKI_PASSWORD_FILE']) as f:
                d.secrets.add(f.read())
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

    def check_no_secrets(self, d, secrets):
        """No secret and no session token in the history file or the log
        (responses are checked by the harness on every request)."""
        blob = b''
        for name in os.listdir(d.state_directory):
            if name.startswith('history'):
                with open(os.path.join(d.state_directory, name), 'rb') as f:
                    blob += f.read()
        self.assertIn(b'qr_', blob)  # the history is really there
        log = d.log()
        for s in list(secrets) + list(d.tokens):
            self.assertNotIn(s.encode(), blob, 'secret or token in the history file')
            self.assertNotIn(s, log, 'secret or token in the log')

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



class Answered(PipelineBase):

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
        # No sandbox here, and none coming: run_python not offered, at once.
        self.assertEqual(rec['sandbox'], 'unavailable')
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
        # No user manager here (none runs, none lingers): unavailable, so
        # the query did not wait for it.
        self.assertIn(f'Query {qid}: started: 0 requested pages, up to 8 steps, run_python not offered.', log)
        self.assertNotIn('for the sandbox to start', log)
        self.assertIn(f'Query {qid}: step 1: model request', log)
        self.assertIn(f'Query {qid}: step 2: wiki_read done', log)
        self.assertNotIn('How many kilograms', log.replace('"question"', ''))
        self.assertNotIn(LLM_KEY, log)
        self.check_no_secrets(d, [LLM_KEY])

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
        # No contact set: the User-Agent names the project only.
        ua = llm.requests[0]['headers'].get('user-agent', '')
        self.assertRegex(ua, r'^wikiweb/[0-9.]+ libcurl/')

    def test_titles_that_are_no_pages(self):
        """Another wiki's title, special pages and a virtual namespace are
        "missing" tool results, as the real wiki answers them, and the
        query goes on (API.md 8.6)."""
        odd = ['wikipedia:Payroll 2026', 'Special:AllPages', 'Special:Export/Apple',
               'Special:Redirect/page/1', 'Media:Foo.png']
        llm = self.llm([{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Special:AllPages'}}]},
                        {'answer': 'Cherry, see [Cherry].'}])
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d, pages=['Cherry'] + odd)
        rec = self.check_record(d, b, r)
        self.assertEqual(rec['sources'], [expected_source(wiki(), 'Cherry')])
        msgs = llm.chat_requests()[-1]['messages']
        tools = [json.loads(m['content']) for m in msgs if m['role'] == 'tool']
        self.assertEqual(tools[0].get('title'), 'Cherry')
        self.assertEqual(tools[1:], [{'error': 'missing'}] * (len(odd) + 1), tools)

    def test_user_agent_contact(self):
        """WIKI_WEB_USER_AGENT_CONTACT in the User-Agent the model server sees."""
        llm = self.llm([{'answer': 'Cherry, see [Cherry].'}])
        d = self.pipeline_daemon(llm, WIKI_WEB_USER_AGENT_CONTACT='wiki-admin@example.org')
        b, r = self.ask(d, pages=['Cherry'])
        self.check_record(d, b, r)
        for req in llm.requests:
            self.assertRegex(req['headers'].get('user-agent', ''),
                             r'^wikiweb/[0-9.]+ \(\+wiki-admin@example\.org\) libcurl/')


class Flavors(PipelineBase):

    def test_same_query_each_server_shape(self):
        """The same search, two reads (one through a redirect) and answer,
        with the reply shapes of OpenAI, vLLM, llama.cpp and Ollama (and
        Ollama's native object arguments, older llama.cpp's empty ids and
        a reply without usage)."""
        llm = self.llm([])
        d = self.pipeline_daemon(llm)
        w = wiki()
        want = [expected_source(w, 'Apples'), expected_source(w, 'Fruit production')]
        cases = [('openai', {}), ('vllm', {}), ('llamacpp', {}), ('ollama', {}),
                 ('ollama', {'object_arguments': True}), ('llamacpp', {'empty_ids': True}),
                 ('vllm', {'usage': False})]
        for flavor, opts in cases:
            with self.subTest(flavor=flavor, **opts):
                steps = [dict(x, **opts) for x in SEARCH_READ_ANSWER]
                llm.set_script(steps, flavor=flavor)
                b, r = self.ask(d)
                rec = self.check_record(d, b, r)
                self.assertEqual(rec['answer'], SEARCH_READ_ANSWER[2]['answer'])
                self.assertEqual(rec['sources'], want)
                if opts.get('usage') is False:
                    self.assertEqual(rec['usage']['prompt_tokens'], 0)
                else:
                    self.assertEqual(rec['usage']['prompt_tokens'],
                                     sum(len(x['raw'].encode()) // 4 for x in llm.requests))
                # the ids the daemon sent back pair each call with its result
                msgs = llm.chat_requests()[2]['messages']
                calls = [c['id'] for m in msgs if m['role'] == 'assistant' for c in m.get('tool_calls') or []]
                results = [m['tool_call_id'] for m in msgs if m['role'] == 'tool']
                self.assertEqual(calls, results)
                self.assertTrue(all(calls), calls)
                for m in msgs:
                    for c in m.get('tool_calls') or []:
                        self.assertIsInstance(c['function']['arguments'], str)  # Ollama demands it


class Errors(PipelineBase):

    def expect(self, d, llm, steps, code, flavor='openai', **kw):
        llm.set_script(steps, flavor=flavor)
        b, r = self.ask(d, **kw)
        return self.check_failed(d, b, r, code)

    def test_model_errors(self):
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_QUERY_MAX_STEPS=3)
        for flavor in fake_llm.FLAVORS:
            with self.subTest(context=flavor):
                self.expect(d, llm, [{'error': 'context'}], 'model_context_exceeded', flavor)
        with self.subTest(context='vllm nested'):
            self.expect(d, llm, [{'error': 'context', 'shape': 'nested'}], 'model_context_exceeded', 'vllm')
        with self.subTest('length'):
            self.expect(d, llm, [{'length': True}], 'model_output_limit')
        with self.subTest('oversized reply'):
            rec = self.expect(d, llm, [{'oversized': 70000}], 'model_output_limit')
        with self.subTest('500'):
            rec = self.expect(d, llm, [{'error': 'server'}], 'upstream_failed')
            self.assertIn('500', rec['error']['message'])
        with self.subTest('non-JSON'):
            self.expect(d, llm, [{'raw': '<html>oops</html>', 'status': 200, 'content_type': 'text/html'}],
                        'upstream_failed')
        with self.subTest('vLLM string 401'):
            self.expect(d, llm, [{'error': 'auth'}], 'upstream_failed', 'vllm')
        with self.subTest('closed connection'):
            self.expect(d, llm, [{'close': True}], 'upstream_failed')
        with self.subTest('empty answer'):
            self.expect(d, llm, [{'answer': ''}], 'upstream_failed')
        with self.subTest('step bound'):
            read = {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Kiwi'}}]}
            rec = self.expect(d, llm, [read, read, read], 'execution_failed')
            self.assertIn('3 steps', rec['error']['message'])
            reqs = llm.chat_requests()
            self.assertEqual(len(reqs), 3)
            self.assertIn('tools', reqs[1])
            self.assertNotIn('tools', reqs[2])  # the last step is sent without tools
            self.assertNotIn('tool_choice', reqs[2])
            # a failed query keeps its sources
            self.assertEqual([x['title'] for x in rec['sources']], ['Kiwi'])
        with self.subTest('unknown tool and bad arguments go back to the model'):
            llm.set_script([{'tool_calls': [{'name': 'rm_rf', 'arguments': {}},
                                            {'name': 'wiki_read', 'arguments': {'title': 5}},
                                            {'name': 'run_python', 'arguments': {'code': 'print(1)'}},
                                            {'name': 'wiki_search', 'arguments': '{not json'}]},
                            {'answer': 'I could not use the tools.'}])
            b, r = self.ask(d)
            rec = self.check_record(d, b, r)
            self.assertEqual(rec['answer'], 'I could not use the tools.')
            tools = [json.loads(m['content']) for m in llm.chat_requests()[1]['messages'] if m['role'] == 'tool']
            self.assertEqual(len(tools), 4)
            for t in tools:
                self.assertEqual(list(t), ['error'], t)
        self.wait_state(d, 'idle')

    def test_estimate_before_sending(self):
        llm = self.llm([{'answer': 'never asked'}])
        d = self.pipeline_daemon(llm, WIKI_WEB_MODEL_CONTEXT_TOKENS=256)
        b, r = self.ask(d, question='Why? ' * 300)
        self.check_failed(d, b, r, 'model_context_exceeded')
        self.assertEqual(llm.requests, [])  # the model was not called

    def test_response_over_cap(self):
        llm = self.llm([{'oversized': 5000}])
        d = self.pipeline_daemon(llm, WIKI_WEB_UPSTREAM_MAX_RESPONSE_BYTES=2048)
        b, r = self.ask(d)
        self.check_failed(d, b, r, 'upstream_response_too_large')

    def test_closed_port(self):
        port = harness.free_port()
        llm = self.llm([])
        llm.url = f'http://127.0.0.1:{port}/v1'
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        self.check_failed(d, b, r, 'connectivity_failed')

    def test_tls_self_signed(self):
        """A model URL over https whose certificate no CA signed: tls_failed."""
        import upstream_servers
        with upstream_servers.ScriptedServer(tls=True) as srv:
            llm = self.llm([])
            llm.url = srv.url('/v1').rstrip('/')
            d = self.pipeline_daemon(llm)
            b, r = self.ask(d)
            self.check_failed(d, b, r, 'tls_failed')

    def test_redirect_to_unnamed_loopback(self):
        """The model URL answers with a redirect to 127.0.0.2, which no
        setting names: destination_denied, and nothing reaches 127.0.0.2."""
        target = self.llm([{'answer': 'must not be reached'}])
        hits = []

        import http.server

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                hits.append(self.path)
                self.send_response(307)
                self.send_header('Location', f'http://127.0.0.2:{target.port}/v1/chat/completions')
                self.send_header('Content-Length', '0')
                self.end_headers()

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(('127.0.0.1', 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        llm = self.llm([])
        llm.url = f'http://127.0.0.1:{srv.server_address[1]}/v1'
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        self.check_failed(d, b, r, 'destination_denied')
        self.assertEqual(len(hits), 1)
        self.assertEqual(target.requests, [])

    def test_wiki_auth(self):
        pw = wiki(private=True)
        llm = self.llm([])
        with self.subTest('anonymous on a private wiki'):
            d = self.pipeline_daemon(llm, w=pw)
            llm.set_script([{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
                            {'answer': 'x'}])
            b, r = self.ask(d)
            self.check_failed(d, b, r, 'wiki_auth_failed')
        with self.subTest('wrong bot password'):
            d = self.pipeline_daemon(llm, w=pw, bot=True, bot_password='w' * 32)
            b, r = self.ask(d, pages=['Apple'])
            self.check_failed(d, b, r, 'wiki_auth_failed')
        with self.subTest('the right bot password reads the private wiki'):
            llm.set_script([{'answer': 'Apple is a fruit [Apple].'}])
            d = self.pipeline_daemon(llm, w=pw, bot=True, api_key=LLM_KEY)
            b, r = self.ask(d, pages=['Apples'])
            rec = self.check_record(d, b, r)
            self.assertEqual([x['title'] for x in rec['sources']], ['Apple'])
            self.check_no_secrets(d, [pw.bot_password, LLM_KEY])

    def test_deadline(self):
        llm = self.llm([{'delay': 5, 'answer': 'too late'}])
        d = self.pipeline_daemon(llm, WIKI_WEB_QUERY_TIMEOUT_SECONDS=1)
        t0 = time.monotonic()
        b, r = self.ask(d)
        took = time.monotonic() - t0
        self.check_failed(d, b, r, 'query_timeout')
        self.assertLess(took, 3.5)
        self.wait_state(d, 'idle')


class Streamed(PipelineBase):
    """The model's replies as streams: every server's
    shape, failures inside the stream, the idle timeout, and a server that
    refuses stream_options."""

    def test_each_flavor(self):
        llm = self.llm([])
        d = self.pipeline_daemon(llm)
        steps = [dict(SEARCH_READ_ANSWER[0], split=7),
                 dict(SEARCH_READ_ANSWER[1], interleave=True, split=4),
                 dict(SEARCH_READ_ANSWER[2], piece=3)]
        for flavor in fake_llm.FLAVORS:
            with self.subTest(flavor=flavor):
                llm.set_script(steps, flavor=flavor)
                b, r = self.ask(d)
                rec = self.check_record(d, b, r)
                self.assertEqual(rec['answer'], SEARCH_READ_ANSWER[2]['answer'])
                self.assertEqual([x['title'] for x in rec['sources']], ['Apple', 'Fruit production'])
                reqs = llm.chat_requests()
                self.assertEqual(len(reqs), 3)
                for q in reqs:
                    self.assertIs(q['stream'], True)
                    self.assertEqual(q['stream_options'], {'include_usage': True})
                # usage from the streams: one token per 4 request bytes per reply
                self.assertEqual(rec['usage']['prompt_tokens'],
                                 sum(len(x['raw'].encode()) // 4 for x in llm.requests))
        log = d.log()
        self.assertIn('bytes, streamed.', log)
        self.wait_state(d, 'idle')

    def test_without_usage_and_whole_answers(self):
        llm = self.llm([dict(SEARCH_READ_ANSWER[0], usage=False), dict(SEARCH_READ_ANSWER[1], stream=False),
                        dict(SEARCH_READ_ANSWER[2], usage=False)], flavor='ollama')
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        self.assertEqual(rec['answer'], SEARCH_READ_ANSWER[2]['answer'])
        # only the whole answer had usage
        self.assertEqual(rec['usage']['prompt_tokens'], len(llm.requests[1]['raw'].encode()) // 4)

    def test_failures_in_the_stream(self):
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_MODEL_MAX_OUTPUT_BYTES=1024)
        cases = [
            ('error in 200, vLLM', [{'answer': 'x', 'stream_error': 'server'}], 'vllm', 'upstream_failed',
             'Internal Server Error'),
            ('error in 200, llama.cpp', [{'answer': 'x', 'stream_error': 'server'}], 'llamacpp',
             'upstream_failed', 'Internal Server Error'),
            ('context in 200, old llama.cpp', [{'answer': 'x', 'stream_error': 'context', 'legacy': True}],
             'llamacpp', 'model_context_exceeded', 'context size'),
            ('cut stream', [{'tool_calls': SEARCH_READ_ANSWER[1]['tool_calls'], 'cut': True}], 'openai',
             'upstream_failed', 'ended before a finish_reason'),
            ('budget', [{'oversized': 5000, 'piece': 100}], 'openai', 'model_output_limit', 'at most 1024'),
            ('length', [{'length': True}], 'vllm', 'model_output_limit', 'length'),
        ]
        for name, steps, flavor, code, needle in cases:
            with self.subTest(name):
                llm.set_script(steps, flavor=flavor)
                b, r = self.ask(d)
                rec = self.check_failed(d, b, r, code)
                self.assertIn(needle, rec['error']['message'])
        self.wait_state(d, 'idle')

    def test_idle_timeout(self):
        # A 6 s query has a 3 s idle timeout between chunks.
        llm = self.llm([{'answer': 'slow but steady', 'stall': 1}, {'answer': 'stuck', 'stall': 5}])
        d = self.pipeline_daemon(llm, WIKI_WEB_QUERY_TIMEOUT_SECONDS=6)
        b, r = self.ask(d)
        self.assertEqual(self.check_record(d, b, r)['answer'], 'slow but steady')
        t0 = time.monotonic()
        b, r = self.ask(d)
        took = time.monotonic() - t0
        rec = self.check_failed(d, b, r, 'upstream_failed')
        self.assertIn('sent nothing for 3 s', rec['error']['message'])
        self.assertGreater(took, 2.5)
        self.assertLess(took, 5)
        self.wait_state(d, 'idle')

    def test_stream_options_refused_once(self):
        llm = self.llm([{'answer': 'first'}, {'answer': 'second'}], refuse_stream_options=True)
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        self.assertEqual(self.check_record(d, b, r)['answer'], 'first')
        b, r = self.ask(d)
        self.assertEqual(self.check_record(d, b, r)['answer'], 'second')
        reqs = llm.chat_requests()
        # refused once, sent again without; the next query never tries
        self.assertEqual(len(reqs), 3)
        self.assertIn('stream_options', reqs[0])
        self.assertNotIn('stream_options', reqs[1])
        self.assertNotIn('stream_options', reqs[2])
        self.assertEqual(reqs[0]['messages'], reqs[1]['messages'])
        self.assertTrue(all(q['stream'] is True for q in reqs))
        self.assertEqual(d.log().count('refused stream_options'), 1)


class Slot(PipelineBase):

    def test_busy_and_disconnect(self):
        """A second session gets busy while a query runs; the first client
        hangs up, the query still runs to the end and is recorded."""
        llm = self.llm([{'delay': 1.5, 'answer': 'Apple [Apple].'}])
        d = self.pipeline_daemon(llm)
        first = d.browser()
        first.status()  # a session cookie
        body = json.dumps({'question': 'What is an apple?'}).encode()
        s = socket.create_connection(('127.0.0.1', d.port))
        s.sendall(b'POST /api/v1/query HTTP/1.1\r\nHost: %s\r\nCookie: wikiweb_session=%s\r\n'
                  b'Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s'
                  % (d.host.encode(), first.cookie.encode(), len(body), body))
        self.wait_state(d, 'running')
        r = d.browser().query()
        self.assertError(r, 'busy')
        self.assertTrue(int(r.header('Retry-After')) >= 1)
        s.close()  # the client goes away
        self.wait_state(d, 'idle', timeout=10)
        h = first.get('/api/v1/history')
        self.assertStatus(h, 200)
        items = h.json['items']
        self.assertEqual(len(items), 1)
        self.assertEqual(items[0]['status'], 'succeeded')
        self.assertEqual(items[0]['answer'], 'Apple [Apple].')

    def test_queue_status_fast_while_model_is_slow(self):
        """The event loop stays free: while the model server is slow
        (5 steps of 0.4 s each, one request in flight at a time, as a query
        runs them), GET /queue/status answers in under 10 ms."""
        read = {'delay': 0.4, 'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Kiwi'}}]}
        llm = self.llm([read] * 4 + [{'delay': 0.4, 'answer': 'Kiwi [Kiwi].'}])
        d = self.pipeline_daemon(llm)
        result = {}

        def run():
            result['r'] = d.browser().query(timeout=30)

        t = threading.Thread(target=run)
        t.start()
        self.wait_state(d, 'running')
        times = []
        b = d.browser()
        while t.is_alive() and len(times) < 200:
            t0 = time.perf_counter()
            r = b.status()
            times.append(time.perf_counter() - t0)
            self.assertStatus(r, 200)
            time.sleep(0.005)
        t.join()
        self.assertStatus(result['r'], 200)
        self.assertGreater(len(times), 20)
        times.sort()
        med, worst = statistics.median(times) * 1000, times[-1] * 1000
        p99 = times[int(len(times) * 0.99) - 1] * 1000
        print(f'\nqueue/status while the model is slow: {len(times)} requests, median {med:.2f} ms, '
              f'p99 {p99:.2f} ms, max {worst:.2f} ms', file=sys.stderr)
        self.assertLess(med, 10.0)

class SandboxStart(PipelineBase):
    """A query claimed while the sandbox is starting (as the query whose
    connection starts the daemon is) waits for it, bounded; the fault switch
    WIKI_WEB_TEST_SANDBOX_STARTING_MS holds the sandbox "starting" (there is
    no user manager here: after the switch, the sandbox is unavailable)."""

    def wait_line(self, d, qid):
        lines = [x for x in d.log().splitlines() if f'Query {qid}: waited ' in x]
        self.assertEqual(len(lines), 1, d.log())
        return lines[0], int(re.search(r'waited (\d+) ms for the sandbox to start', lines[0]).group(1))

    def test_waits_until_the_sandbox_has_started(self):
        """Held starting for 2 s: the query waits, in the phase "sandbox" (step 0), and goes on as soon as
        the Sandbox announces its state (here: unavailable), long before the 10 s bound."""
        llm = self.llm([{'answer': 'Cherry, see [Cherry].'}])
        d = self.pipeline_daemon(llm, WIKI_WEB_TEST_FAULTS=1, WIKI_WEB_TEST_SANDBOX_STARTING_MS=2000)
        t0 = time.monotonic()
        b = d.browser()
        b.status()  # a session, shared by the query and the polls
        out = {}
        t = threading.Thread(target=lambda: out.setdefault('r', b.post(
            '/api/v1/query', {'question': 'Cherries?', 'pages': ['Cherry']}, timeout=60)))
        t.start()
        st = None
        while t.is_alive() and time.monotonic() - t0 < 1.0:
            st = harness.check_status_object(b.status().json)
            if st['running_query']:
                break
            time.sleep(0.02)
        self.assertTrue(st and st['running_query'], st)
        self.assertEqual(st['running_query']['phase'], 'sandbox', st)
        self.assertEqual(st['running_query']['step'], 0, st)
        health = b.get('/api/v1/health').json
        self.assertEqual(health['sandbox'], 'starting', health)
        self.assertEqual(health['execution'], 'ok', health)
        self.assertEqual(health['missing_settings'], [], health)
        self.assertEqual(llm.chat_requests(), [])  # the model is not asked while it waits
        t.join(60)
        took = time.monotonic() - t0
        rec = self.check_record(d, b, out['r'])
        self.assertEqual(rec['answer'], 'Cherry, see [Cherry].')
        self.assertEqual(rec['sandbox'], 'unavailable')
        health = b.get('/api/v1/health').json
        self.assertEqual(health['sandbox'], 'unavailable', health)
        self.assertEqual([s['title'] for s in rec['sources']], ['Cherry'])
        names = [x['function']['name'] for x in llm.chat_requests()[0]['tools']]
        self.assertEqual(sorted(names), ['wiki_read', 'wiki_search'])
        line, waited = self.wait_line(d, rec['id'])
        self.assertIn('unavailable', line)
        self.assertIn('run_python not offered', line)
        self.assertGreaterEqual(waited, 1500, line)
        self.assertLess(waited, 5000, line)
        self.assertLess(took, 8, 'the wait did not end with the announcement')
        self.assertGreaterEqual(rec['timings_ms']['sandbox'], waited, rec)
        self.assertIn('Sandbox starting, a query waits for it', d.log())

    def test_gives_up_after_the_bound(self):
        """Held starting for longer than the bound: after 10 s the query goes on without run_python, is
        answered from the wiki, and its record says "sandbox": "starting"."""
        steps = [{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Fig'}}]},
                 {'answer': 'Figs, see [Fig].'}]
        llm = self.llm(steps)
        d = self.pipeline_daemon(llm, WIKI_WEB_TEST_FAULTS=1, WIKI_WEB_TEST_SANDBOX_STARTING_MS=60000)
        t0 = time.monotonic()
        b, r = self.ask(d, question='Figs?')
        took = time.monotonic() - t0
        rec = self.check_record(d, b, r)
        self.assertEqual(rec['answer'], 'Figs, see [Fig].')
        self.assertEqual(rec['sandbox'], 'starting')
        self.assertEqual([s['title'] for s in rec['sources']], ['Fig'])
        reqs = llm.chat_requests()
        self.assertEqual(len(reqs), 2)
        names = [x['function']['name'] for x in reqs[0]['tools']]
        self.assertEqual(sorted(names), ['wiki_read', 'wiki_search'])
        self.assertNotIn('run_python', reqs[0]['messages'][0]['content'])
        line, waited = self.wait_line(d, rec['id'])
        self.assertIn('still starting, gave up', line)
        self.assertIn('run_python not offered', line)
        self.assertGreaterEqual(waited, 9900, line)
        self.assertLess(waited, 11000, line)
        self.assertGreaterEqual(took, 9.9)
        self.assertGreaterEqual(rec['timings_ms']['sandbox'], 9900, rec)
        # The history says the same.
        h = b.get('/api/v1/history/' + rec['id'])
        self.assertEqual(h.json['sandbox'], 'starting')

    def test_wait_never_past_the_deadline(self):
        """A query timeout shorter than the bound ends the wait: query_timeout at the deadline, the model
        never asked, the record says the sandbox was still starting."""
        llm = self.llm([{'answer': 'never'}])
        d = self.pipeline_daemon(llm, WIKI_WEB_TEST_FAULTS=1, WIKI_WEB_TEST_SANDBOX_STARTING_MS=60000,
                                 WIKI_WEB_QUERY_TIMEOUT_SECONDS=2)
        t0 = time.monotonic()
        b, r = self.ask(d, question='Anything?')
        took = time.monotonic() - t0
        rec = self.check_failed(d, b, r, 'query_timeout')
        self.assertEqual(rec['sandbox'], 'starting')
        self.assertEqual(llm.chat_requests(), [])
        self.assertLess(took, 6)
        self.assertGreaterEqual(took, 1.9)
        line, waited = self.wait_line(d, rec['id'])
        self.assertGreaterEqual(waited, 1900, line)
        self.assertLess(waited, 3000, line)


if __name__ == '__main__':
    main()
