#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Self-test of tests/fixtures/fake_llm.py, the scripted model server the
end-to-end tests use: each flavor's reply and error shapes, the script
steps, the bearer check, the request record, the command line. Then every
reply it makes is read by wikiweb's own parser (llm-reply-filter, which
meson passes as the first argument), so the fake and the client cannot
drift apart unnoticed.

Standard library only (urllib). Everything listens on 127.0.0.1."""

import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'fixtures'))
import fake_llm  # noqa: E402

FILTER = None  # path of llm-reply-filter, from argv

CALLS = [{'name': 'wiki_search', 'arguments': {'query': 'apple', 'limit': 3}},
         {'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]

ID_RE = {
    'openai': re.compile(r'^call_[A-Za-z0-9]{24}$'),
    'vllm': re.compile(r'^chatcmpl-tool-[0-9a-f]{32}$'),
    'llamacpp': re.compile(r'^[A-Za-z0-9]{32}$'),
    'ollama': re.compile(r'^call_[a-z0-9]{8}$'),
}


def post(url, body, headers=None, timeout=10):
    """(status, headers, body bytes) of a POST; HTTP errors are results too."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method='POST',
                                 headers=dict({'Content-Type': 'application/json'}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, json.loads(r.read())


def chat(fake, body=None, headers=None):
    body = body or {'model': 'm', 'messages': [{'role': 'user', 'content': 'q'}], 'max_tokens': 100,
                    'stream': False}
    return post(fake.url + '/chat/completions', body, headers)


def parse(status, body):
    """wikiweb's reading of a reply (llm_parse_reply through the filter)."""
    out = subprocess.run([FILTER, str(status)], input=body, capture_output=True, check=True, timeout=30)
    return json.loads(out.stdout)


def parse_stream(body):
    """wikiweb's reading of a streamed reply (llm-stream through the filter)."""
    out = subprocess.run([FILTER, '--stream', '200'], input=body, capture_output=True, check=True, timeout=30)
    return json.loads(out.stdout)


def stream(fake, usage=True, body=None):
    """(status, headers, body bytes) of a streamed request; a cut stream
    gives what arrived."""
    body = body or {'model': 'm', 'messages': [{'role': 'user', 'content': 'q'}], 'max_tokens': 100,
                    'stream': True}
    if usage:
        body = dict(body, stream_options={'include_usage': True})
    c = http.client.HTTPConnection('127.0.0.1', fake.port, timeout=10)
    try:
        c.request('POST', '/v1/chat/completions', json.dumps(body), {'Content-Type': 'application/json'})
        r = c.getresponse()
        try:
            raw = r.read()
        except http.client.IncompleteRead as e:
            raw = e.partial
        return r.status, r.headers, raw
    finally:
        c.close()


def events(raw):
    """The data of each event of an event stream (LF line ends)."""
    return [line[6:] for line in raw.decode().split('\n') if line.startswith('data: ')]


class Flavors(unittest.TestCase):

    def test_tool_calls_and_answer_shapes(self):
        for flavor in fake_llm.FLAVORS:
            with self.subTest(flavor=flavor), fake_llm.FakeLLM([{'tool_calls': CALLS}, {'answer': 'Done [Apple].'}],
                                                               flavor=flavor) as fake:
                status, headers, raw = chat(fake)
                self.assertEqual(status, 200)
                self.assertEqual(headers['Content-Type'], 'application/json')
                r = json.loads(raw)
                choice = r['choices'][0]
                msg = choice['message']
                if flavor in ('openai', 'vllm'):
                    self.assertIsNone(msg['content'])
                else:
                    self.assertEqual(msg['content'], '')
                self.assertEqual(choice['finish_reason'], 'stop' if flavor == 'ollama' else 'tool_calls')
                self.assertEqual(len(msg['tool_calls']), 2)
                for c in msg['tool_calls']:
                    self.assertRegex(c['id'], ID_RE[flavor])
                    self.assertEqual(c['type'], 'function')
                    self.assertIsInstance(c['function']['arguments'], str)
                self.assertEqual(json.loads(msg['tool_calls'][0]['function']['arguments']),
                                 {'query': 'apple', 'limit': 3})
                self.assertIn('usage', r)

                seen = parse(status, raw)
                self.assertTrue(seen['ok'], seen)
                self.assertEqual([c['name'] for c in seen['tool_calls']], ['wiki_search', 'wiki_read'])
                self.assertEqual([c['id'] for c in seen['tool_calls']], [c['id'] for c in msg['tool_calls']])
                self.assertEqual(seen['usage'], [r['usage']['prompt_tokens'], r['usage']['completion_tokens']])

                status, _, raw = chat(fake)
                r = json.loads(raw)
                self.assertEqual(r['choices'][0]['message']['content'], 'Done [Apple].')
                self.assertEqual(r['choices'][0]['finish_reason'], 'stop')
                seen = parse(status, raw)
                self.assertEqual(seen['content'], 'Done [Apple].')
                self.assertEqual(seen['tool_calls'], [])

                # the script is over
                status, _, raw = chat(fake)
                self.assertEqual(status, 500)
                self.assertEqual(parse(status, raw)['code'], 'upstream_failed')

    def test_overrides(self):
        steps = [{'tool_calls': CALLS[1:]},
                 {'tool_calls': CALLS[1:], 'empty_ids': True, 'content_null': True},
                 {'answer': 'x', 'usage': False}]
        with fake_llm.FakeLLM(steps, flavor='ollama', object_arguments=True) as fake:
            _, _, raw = chat(fake)
            c = json.loads(raw)['choices'][0]['message']['tool_calls'][0]
            self.assertEqual(c['function']['arguments'], {'title': 'Apple'})  # an object
            self.assertEqual(parse(200, raw)['tool_calls'][0]['arguments'], '{"title":"Apple"}')

            _, _, raw = chat(fake)
            m = json.loads(raw)['choices'][0]['message']
            self.assertEqual(m['tool_calls'][0]['id'], '')
            self.assertIsNone(m['content'])
            seen = parse(200, raw)
            self.assertRegex(seen['tool_calls'][0]['id'], r'^ww[0-9]{7}$')  # generated by the client

            _, _, raw = chat(fake)
            self.assertNotIn('usage', json.loads(raw))
            self.assertIsNone(parse(200, raw)['usage'])

    def test_errors(self):
        expect = {
            # flavor: {kind: (status, code wikiweb maps it to, a piece of the raw body)}
            'openai': {'context': (400, 'model_context_exceeded', b'"context_length_exceeded"'),
                       'auth': (401, 'upstream_failed', b'invalid_api_key'),
                       'busy': (429, 'upstream_failed', b'rate_limit_exceeded'),
                       'not_found': (404, 'upstream_failed', b'model_not_found'),
                       'server': (500, 'upstream_failed', b'server_error')},
            'vllm': {'context': (400, 'model_context_exceeded', b'"object": "error"'),
                     'auth': (401, 'upstream_failed', b'{"error": "Unauthorized"}'),
                     'busy': (503, 'upstream_failed', b'"object": "error"'),
                     'not_found': (404, 'upstream_failed', b'does not exist'),
                     'server': (500, 'upstream_failed', b'InternalServerError')},
            'llamacpp': {'context': (400, 'model_context_exceeded', b'exceed_context_size_error'),
                         'auth': (401, 'upstream_failed', b'authentication_error'),
                         'busy': (503, 'upstream_failed', b'Loading model'),
                         'not_found': (404, 'upstream_failed', b'not_found_error'),
                         'server': (500, 'upstream_failed', b'server_error')},
            'ollama': {'context': (400, 'model_context_exceeded', b'longer than the context length'),
                       'auth': (401, 'upstream_failed', b'unauthorized'),
                       'busy': (503, 'upstream_failed', b'try again.  maximum pending'),
                       'not_found': (404, 'upstream_failed', b"model 'x' not found"),
                       'server': (500, 'upstream_failed', b'api_error')},
        }
        for flavor, kinds in expect.items():
            steps = [{'error': k} for k in kinds]
            with fake_llm.FakeLLM(steps, flavor=flavor) as fake:
                for kind, (status, code, piece) in kinds.items():
                    with self.subTest(flavor=flavor, kind=kind):
                        s, headers, raw = chat(fake)
                        self.assertEqual(s, status)
                        self.assertIn(piece, raw)
                        seen = parse(s, raw)
                        self.assertFalse(seen['ok'])
                        self.assertEqual(seen['code'], code, seen)
                        if flavor == 'openai' and kind == 'busy':
                            self.assertEqual(headers['Retry-After'], '2')
        # vLLM >= 0.10.1 nests the context error
        with fake_llm.FakeLLM([{'error': 'context', 'shape': 'nested'}], flavor='vllm') as fake:
            s, _, raw = chat(fake)
            self.assertIn('error', json.loads(raw))
            self.assertEqual(parse(s, raw)['code'], 'model_context_exceeded')


class Steps(unittest.TestCase):

    def test_length_oversized_raw_status(self):
        steps = [{'length': True},
                 {'oversized': 70000},
                 {'raw': '<html>bad gateway</html>', 'status': 200, 'content_type': 'text/html'},
                 {'status': 418, 'body': {'detail': 'teapot'}},
                 {'status': 502, 'body': 'plain text'}]
        with fake_llm.FakeLLM(steps, flavor='llamacpp') as fake:
            s, _, raw = chat(fake)
            self.assertEqual(json.loads(raw)['choices'][0]['finish_reason'], 'length')
            self.assertEqual(parse(s, raw)['code'], 'model_output_limit')
            s, _, raw = chat(fake)
            self.assertEqual(len(json.loads(raw)['choices'][0]['message']['content']), 70000)
            self.assertEqual(parse(s, raw)['code'], 'model_output_limit')  # the filter's budget is 65536
            s, h, raw = chat(fake)
            self.assertEqual((s, h['Content-Type'], raw), (200, 'text/html', b'<html>bad gateway</html>'))
            self.assertEqual(parse(s, raw)['code'], 'upstream_failed')
            s, _, raw = chat(fake)
            self.assertEqual(s, 418)
            self.assertIn('teapot', parse(s, raw)['message'])
            s, _, raw = chat(fake)
            self.assertEqual((s, raw), (502, b'plain text'))
            self.assertIn('HTTP 502: plain text', parse(s, raw)['message'])

    def test_delay_and_close(self):
        with fake_llm.FakeLLM([{'answer': 'slow', 'delay': 0.4}, {'close': True}, {'answer': 'after'},
                               {'answer': 'trickled', 'trickle': 0.4}]) as fake:
            t = time.monotonic()
            s, _, raw = chat(fake)
            self.assertGreaterEqual(time.monotonic() - t, 0.4)
            self.assertEqual(json.loads(raw)['choices'][0]['message']['content'], 'slow')
            with self.assertRaises((urllib.error.URLError, ConnectionError, OSError)):
                chat(fake)
            s, _, raw = chat(fake)
            self.assertEqual(json.loads(raw)['choices'][0]['message']['content'], 'after')
            t = time.monotonic()
            s, _, raw = chat(fake)
            self.assertGreaterEqual(time.monotonic() - t, 0.35)
            self.assertEqual(parse(s, raw)['content'], 'trickled')

    def test_bearer_and_record(self):
        with fake_llm.FakeLLM([{'answer': 'ok'}], flavor='vllm', api_key='sk-test-key') as fake:
            s, _, raw = chat(fake)  # no key: 401, no step used
            self.assertEqual((s, json.loads(raw)), (401, {'error': 'Unauthorized'}))
            s, _, raw = chat(fake, headers={'Authorization': 'Bearer wrong'})
            self.assertEqual(s, 401)
            body = {'model': 'm', 'messages': [{'role': 'user', 'content': 'q'}],
                    'tools': [{'type': 'function', 'function': {'name': 'wiki_read', 'parameters': {}}}],
                    'tool_choice': 'auto', 'max_tokens': 1234, 'stream': False}
            s, _, raw = chat(fake, body, headers={'Authorization': 'Bearer sk-test-key'})
            self.assertEqual(s, 200)
            self.assertEqual(len(fake.requests), 3)
            last = fake.requests[-1]
            self.assertEqual(last['headers']['authorization'], 'Bearer sk-test-key')
            self.assertNotIn('authorization', fake.requests[0]['headers'])
            self.assertEqual(last['path'], '/v1/chat/completions')
            self.assertEqual(last['body']['max_tokens'], 1234)
            self.assertEqual(fake.chat_requests()[-1]['tools'][0]['function']['name'], 'wiki_read')
            # usage counts the request: one token per 4 bytes
            self.assertEqual(json.loads(raw)['usage']['prompt_tokens'], len(json.dumps(body)) // 4)

    def test_other_paths(self):
        with fake_llm.FakeLLM([], flavor='ollama') as fake:
            s, models = get(fake.url + '/models')
            self.assertEqual(models['data'][0]['id'], 'llama3.1:8b')
            s, _, raw = post(f'http://127.0.0.1:{fake.port}/v1/completions', {})
            self.assertEqual(s, 404)


class Streams(unittest.TestCase):
    """The streamed replies: each flavor's shape, read by wikiweb's stream
    parser to the same calls, text and usage as the whole replies."""

    def test_each_flavor(self):
        for flavor in fake_llm.FLAVORS:
            for usage in (True, False):
                with self.subTest(flavor=flavor, usage=usage), \
                        fake_llm.FakeLLM([{'tool_calls': CALLS}, {'answer': 'Done [Apple].'}], flavor=flavor) as fake:
                    status, headers, raw = stream(fake, usage)
                    self.assertEqual(status, 200)
                    self.assertTrue(headers['Content-Type'].startswith('text/event-stream'))
                    self.assertEqual(headers['Transfer-Encoding'], 'chunked')
                    data = events(raw)
                    self.assertEqual(data[-1], '[DONE]')
                    chunks = [json.loads(d) for d in data[:-1]]
                    self.assertTrue(all(c['object'] == 'chat.completion.chunk' for c in chunks))
                    deltas = [c['choices'][0]['delta'] for c in chunks if c['choices']]
                    calls = [t for d in deltas for t in d.get('tool_calls', [])]
                    if flavor == 'ollama':
                        self.assertEqual(len(calls), 2)  # each call whole
                    else:
                        self.assertGreater(len(calls), 2)  # the arguments in pieces
                    finish = [c['choices'][0]['finish_reason'] for c in chunks if c['choices']]
                    self.assertEqual(finish[-1], 'stop' if flavor == 'ollama' else 'tool_calls')
                    has_usage = any(c.get('usage') for c in chunks)
                    self.assertEqual(has_usage, usage or flavor == 'llamacpp')

                    seen = parse_stream(raw)
                    self.assertTrue(seen['ok'], seen)
                    self.assertEqual([c['name'] for c in seen['tool_calls']], ['wiki_search', 'wiki_read'])
                    self.assertEqual(json.loads(seen['tool_calls'][0]['arguments']), {'query': 'apple', 'limit': 3})
                    self.assertEqual(seen['tools'], ['wiki_search', 'wiki_read'])
                    for c in seen['tool_calls']:
                        self.assertRegex(c['id'], ID_RE[flavor])
                    self.assertEqual(seen['usage'] is not None, usage or flavor == 'llamacpp')

                    status, _, raw = stream(fake, usage)
                    seen = parse_stream(raw)
                    self.assertEqual((seen['content'], seen['text']), ('Done [Apple].', 'Done [Apple].'))
                    self.assertEqual(seen['finish_reason'], 'stop')

    def test_splitting(self):
        steps = [{'tool_calls': CALLS, 'interleave': True, 'split': 5},
                 {'tool_calls': CALLS, 'no_index': True, 'split': 1},
                 {'tool_calls': CALLS, 'object_arguments': True},
                 {'answer': 'x' * 100, 'piece': 1}]
        for flavor in ('openai', 'ollama'):
            with self.subTest(flavor=flavor), fake_llm.FakeLLM(steps, flavor=flavor) as fake:
                for _ in range(3):
                    seen = parse_stream(stream(fake)[2])
                    self.assertTrue(seen['ok'], seen)
                    self.assertEqual([json.loads(c['arguments']) for c in seen['tool_calls']],
                                     [c['arguments'] for c in CALLS])
                seen = parse_stream(stream(fake)[2])
                self.assertEqual(seen['text'], 'x' * 100)

    def test_failures(self):
        expect = [
            ({'answer': 'a', 'stream_error': 'context'}, 'vllm', 'model_context_exceeded'),
            ({'answer': 'a', 'stream_error': 'context', 'shape': 'nested'}, 'vllm', 'model_context_exceeded'),
            ({'answer': 'a', 'stream_error': 'server'}, 'vllm', 'upstream_failed'),
            ({'answer': 'a', 'stream_error': 'server'}, 'llamacpp', 'upstream_failed'),
            ({'answer': 'a', 'stream_error': 'context', 'legacy': True}, 'llamacpp', 'model_context_exceeded'),
            ({'answer': 'a', 'stream_error': 'server'}, 'openai', 'upstream_failed'),
            ({'tool_calls': CALLS, 'cut': True}, 'openai', 'upstream_failed'),
            ({'answer': 'cut off', 'cut': True}, 'ollama', 'upstream_failed'),
            ({'length': True}, 'llamacpp', 'model_output_limit'),
            ({'oversized': 70000}, 'vllm', 'model_output_limit'),
        ]
        for step, flavor, code in expect:
            with self.subTest(step=step, flavor=flavor), fake_llm.FakeLLM([step], flavor=flavor) as fake:
                status, _, raw = stream(fake)
                self.assertEqual(status, 200)
                seen = parse_stream(raw)
                self.assertFalse(seen['ok'], seen)
                self.assertEqual(seen['code'], code, seen)
                if step.get('cut'):
                    self.assertNotIn('[DONE]', events(raw))
                    self.assertIn('ended before a finish_reason', seen['message'])
                if step.get('legacy'):
                    self.assertIn(b'\nerror: {', b'\n' + raw)

    def test_stall_and_not_streamed(self):
        with fake_llm.FakeLLM([{'answer': 'slow', 'stall': 0.4}, {'answer': 'whole', 'stream': False}]) as fake:
            t = time.monotonic()
            status, _, raw = stream(fake)
            self.assertGreaterEqual(time.monotonic() - t, 0.4)
            self.assertEqual(parse_stream(raw)['content'], 'slow')
            status, headers, raw = stream(fake)
            self.assertEqual(headers['Content-Type'], 'application/json')
            self.assertEqual(parse(status, raw)['content'], 'whole')

    def test_writes_noted(self):
        with fake_llm.FakeLLM([{'answer': 'abcdefghij', 'piece': 4, 'chunk_delay': 0.02}]) as fake:
            t0 = time.monotonic()
            stream(fake)
            t1 = time.monotonic()
            self.assertEqual([w[1] for w in fake.writes], ['abcd', 'efgh', 'ij'])
            times = [w[0] for w in fake.writes]
            self.assertTrue(t0 <= times[0] and times[-1] <= t1, (t0, times, t1))
            self.assertTrue(all(b - a >= 0.02 for a, b in zip(times, times[1:])), times)
            self.assertEqual(get(f'http://127.0.0.1:{fake.port}/__fake__/writes')[1], fake.writes)
            fake.set_script([])
            self.assertEqual(fake.writes, [])

    def test_refuse_stream_options(self):
        with fake_llm.FakeLLM([{'answer': 'ok'}], refuse_stream_options=True) as fake:
            status, _, raw = stream(fake, usage=True)
            self.assertEqual(status, 400)
            self.assertIn(b'Unrecognized request argument supplied: stream_options', raw)
            status, _, raw = stream(fake, usage=False)  # the step was not used up
            self.assertEqual(status, 200)
            self.assertEqual(parse_stream(raw)['content'], 'ok')
            self.assertEqual(len(fake.chat_requests()), 2)


class CommandLine(unittest.TestCase):

    def test_process(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, 'steps.json')
            portfile = os.path.join(tmp, 'port')
            record = os.path.join(tmp, 'record.json')
            with open(script, 'w') as f:
                json.dump([{'tool_calls': CALLS}], f)
            p = subprocess.Popen([sys.executable, os.path.join(HERE, '..', 'fixtures', 'fake_llm.py'),
                                  '--script', script, '--flavor', 'vllm', '--port-file', portfile,
                                  '--record', record], stdout=subprocess.PIPE, text=True)
            try:
                line = p.stdout.readline()
                m = re.match(r'^PORT (\d+)$', line.strip())
                self.assertTrue(m, line)
                port = int(m.group(1))
                with open(portfile) as f:
                    self.assertEqual(int(f.read()), port)
                base = f'http://127.0.0.1:{port}'
                s, _, raw = post(base + '/v1/chat/completions', {'model': 'm', 'messages': []})
                self.assertEqual(s, 200)
                self.assertRegex(json.loads(raw)['choices'][0]['message']['tool_calls'][0]['id'],
                                 ID_RE['vllm'])
                with open(record) as f:
                    self.assertEqual(json.load(f)[0]['body'], {'model': 'm', 'messages': []})
                # a new script at run time, in another flavor
                s, _, _ = post(base + '/__fake__/script', {'flavor': 'ollama', 'steps': [{'error': 'busy'}]})
                self.assertEqual(s, 200)
                s, _, raw = post(base + '/v1/chat/completions', {'model': 'm', 'messages': []})
                self.assertEqual(s, 503)
                self.assertIn(b'maximum pending requests exceeded', raw)
                s, reqs = get(base + '/__fake__/requests')
                self.assertEqual(len(reqs), 1)  # cleared with the new script
                s, _, _ = post(base + '/__fake__/script', {'steps': 'nope'})
                self.assertEqual(s, 400)
            finally:
                p.terminate()
                p.wait(10)
                p.stdout.close()


if __name__ == '__main__':
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print('usage: test_fake_llm.py /path/to/llm-reply-filter', file=sys.stderr)
        sys.exit(1)
    FILTER = sys.argv.pop(1)
    unittest.main(verbosity=2)
