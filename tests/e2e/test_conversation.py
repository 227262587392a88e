#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Conversations (API.md 7 and 9, docs/QUERY.md "Follow-ups"): the real
wikiwebd, the test MediaWiki 1.39 and the scripted model. What the model
is given for a follow-up (the earlier turns, the pages each read with
their revisions, the new question last); someone else's record, an
unknown one, a running one; a 12-turn chain of long answers under a small
context; the Markdown export (the order, the links); share links (read by
another session, revoked, a wrong token, a deleted record, the artifacts
through the share); with identity on, two signed-in people and an
anonymous request."""

import hashlib
import json
import os
import re
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import test_pipeline  # noqa: E402
from harness import API  # noqa: E402
from test_pipeline import PipelineBase, expected_source  # noqa: E402
from test_citations import fragment  # noqa: E402

USER = 'X-Remote-User'
QUOTE1 = 'The apple tree likes sun and well-drained soil.'
ANSWER1 = 'The apple tree likes sun [1].'
CITED1 = ANSWER1 + '\n\n[1] Apple: "' + QUOTE1 + '"'
QUOTE2 = 'Fruit production of the orchard, in kilograms per year.'
ANSWER2 = 'The orchard counts its fruit in kilograms [1].'
CITED2 = ANSWER2 + '\n\n[1] Fruit production: "' + QUOTE2 + '"'
TOKEN_RE = r'^sh_[0-9a-f]{64}$'


def read(title):
    return {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': title}}]}


def first_messages(llm):
    """The messages of the first model request of the last query."""
    return llm.chat_requests()[0]['messages']


class Conversation(PipelineBase):

    def ask_as(self, b, llm, script, question, **kw):
        llm.set_script(script)
        body = {'question': question}
        body.update(kw)
        return b.post(f'{API}/query', body, timeout=60)

    def test_follow_up_export_share(self):
        w = test_pipeline.wiki()
        llm = self.llm([])
        d = self.pipeline_daemon(llm)
        b = d.browser()
        apple = expected_source(w, 'Apple')
        fruit = expected_source(w, 'Fruit production')

        # Turn 1: a new conversation.
        r = self.ask_as(b, llm, [read('Apples'), {'answer': CITED1}], 'What does the apple tree like?')
        rec1 = self.check_record(d, b, r)
        self.assertIsNone(rec1['follow_up'])
        self.assertEqual(rec1['conversation'], rec1['id'])
        self.assertEqual(rec1['citations'][0]['status'], 'verified')

        # Turn 2 follows it: the model gets turn 1 (question, answer, the
        # page it read with its revision) before the new question, which
        # comes last; the previous pages are not read again up front.
        r = self.ask_as(b, llm, [read('Fruit production'), {'answer': CITED2}],
                        'And how is the fruit counted?', follow_up=rec1['id'])
        rec2 = self.check_record(d, b, r)
        self.assertEqual(rec2['follow_up'], rec1['id'])
        self.assertEqual(rec2['conversation'], rec1['id'])
        self.assertEqual(rec2['citations'][0]['status'], 'verified')
        msgs = first_messages(llm)
        self.assertEqual([m['role'] for m in msgs], ['system', 'user', 'assistant', 'user'], msgs)
        self.assertIn('follows earlier ones of the same conversation', msgs[0]['content'])
        self.assertEqual(msgs[1]['content'], 'What does the apple tree like?')
        self.assertTrue(msgs[2]['content'].startswith(ANSWER1), msgs[2])
        self.assertIn(f'"Apple" (revision {apple["revision_id"]})', msgs[2]['content'])
        self.assertEqual(msgs[3]['content'], 'And how is the fruit counted?')
        self.assertEqual(len([m for m in msgs if m['role'] == 'tool']), 0)

        # Turn 3 follows turn 2: both earlier turns, in order.
        r = self.ask_as(b, llm, [{'answer': 'Yes, both [1].\n\n[1] Apple: "' + QUOTE1 + '"'}],
                        'Both from the wiki?', follow_up=rec2['id'])
        rec3 = self.check_record(d, b, r)
        self.assertEqual(rec3['conversation'], rec1['id'])
        # Not read in this turn: not verified, as the prompt says.
        self.assertEqual(rec3['citations'][0]['status'], 'not_read')
        msgs = first_messages(llm)
        self.assertEqual([m['role'] for m in msgs],
                         ['system', 'user', 'assistant', 'user', 'assistant', 'user'], msgs)
        self.assertEqual(msgs[3]['content'], 'And how is the fruit counted?')
        self.assertIn(f'"Fruit production" (revision {fruit["revision_id"]})', msgs[4]['content'])
        self.assertEqual(msgs[5]['content'], 'Both from the wiki?')

        # Someone else's record, an unknown one, a malformed one: nothing
        # runs, no ticket, no record.
        other = d.browser()
        n_requests = len(llm.requests)
        for fid, status, code in ((rec1['id'], 404, 'query_not_found'),
                                  ('qr_' + '0' * 32, 404, 'query_not_found'),
                                  (rec1['id'].upper().replace('QR_', 'qr_'), 400, 'invalid_input'),
                                  (7, 400, 'invalid_input'), (None, 400, 'invalid_input'),
                                  (rec1['id'] + ' ', 400, 'invalid_input')):
            r = other.post(f'{API}/query', {'question': 'Mine?', 'follow_up': fid})
            self.assertStatus(r, status)
            self.assertError(r, code)
        self.assertEqual(len(llm.requests), n_requests)
        self.assertEqual(other.get(f'{API}/history').json['items'], [])
        self.assertFalse(other.status().json.get('ticket'))
        self.assertEqual(len(b.get(f'{API}/history').json['items']), 3)

        # The export: the conversation up to the record, in order, with the
        # verified citation's link to its revision and text fragment.
        r = b.get(f'{API}/history/{rec3["id"]}/export')
        self.assertStatus(r, 200)
        self.assertEqual(r.header('Content-Type'), 'text/markdown; charset=utf-8')
        self.assertEqual(r.header('Content-Disposition'), f'attachment; filename="conversation-{rec3["id"]}.md"')
        md = r.body.decode()
        heads = [md.index(f'## Question {i}') for i in (1, 2, 3)]
        self.assertEqual(heads, sorted(heads))
        self.assertIn('> What does the apple tree like?', md)
        self.assertLess(md.index(ANSWER1), md.index(ANSWER2))
        link = rec1['citations'][0]['url']
        self.assertTrue(link.endswith(fragment(QUOTE1)), link)
        self.assertIn(f'(<{link}>), verified', md)
        self.assertIn(f'(<{rec2["citations"][0]["url"]}>), verified', md)
        self.assertIn('Apple, not verified (not\\_read)', md)
        r = b.get(f'{API}/history/{rec1["id"]}/export')
        self.assertNotIn('## Question 2', r.body.decode())
        self.assertError(other.get(f'{API}/history/{rec3["id"]}/export'), 'query_not_found')

        # An artifact of turn 1, put into the store as the sandbox would.
        data = b'fruit,kg\napple,1410\n'
        aid = 'af_' + 'a' * 32
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                       ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                       (aid, rec1['id'], 'kg.csv', 'text/csv', len(data), hashlib.sha256(data).hexdigest(), data))
        db.close()

        # A share of turn 2: another session reads turns 1 and 2.
        r = b.post(f'{API}/history/{rec2["id"]}/share')
        self.assertStatus(r, 201)
        token = r.json['token']
        self.assertRegex(token, TOKEN_RE)
        self.assertEqual(r.json['url'], '/#/shared/' + token)
        shared = other.get(f'{API}/shared/{token}')
        self.assertStatus(shared, 200)
        turns = shared.json['turns']
        self.assertEqual([t['id'] for t in turns], [rec1['id'], rec2['id']])
        self.assertEqual(turns[1]['answer'], ANSWER2)
        self.assertEqual(turns[0]['citations'], rec1['citations'])
        self.assertEqual(shared.json['export_url'], f'{API}/shared/{token}/export')
        url = turns[0]['artifacts'][0]['download_url']
        self.assertEqual(url, f'{API}/shared/{token}/artifacts/{aid}')
        r = other.get(url)
        self.assertStatus(r, 200)
        self.assertEqual(r.body, data)
        # Not through the owner's path, and not an artifact outside the share.
        self.assertError(other.get(f'{API}/artifacts/{aid}'), 'artifact_not_found')
        self.assertError(other.get(f'{API}/shared/{token}/artifacts/af_{"b" * 32}'), 'artifact_not_found')
        md = other.get(shared.json['export_url'])
        self.assertStatus(md, 200)
        self.assertIn(f'[kg\\.csv](<{url}>)', md.body.decode())
        self.assertNotIn('Question 3', md.body.decode())

        # Only the digest is stored.
        with open(os.path.join(d.state_directory, 'history.sqlite3'), 'rb') as f:
            self.assertNotIn(token.encode(), f.read())
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        stored = db.execute('SELECT token_sha256 FROM shares').fetchall()
        db.close()
        self.assertEqual(stored, [(hashlib.sha256(token.encode()).digest(),)])

        # Wrong tokens: 404, as any unknown path.
        wrong = token[:-1] + ('0' if token[-1] != '0' else '1')
        self.assertError(other.get(f'{API}/shared/{wrong}'), 'not_found')
        self.assertError(other.get(f'{API}/shared/{token[:-1]}'), 'not_found')
        self.assertError(other.get(f'{API}/shared/{token.upper()}'), 'not_found')
        # Only the owner shares or revokes.
        self.assertError(other.post(f'{API}/history/{rec2["id"]}/share'), 'query_not_found')
        self.assertError(other.delete(f'{API}/history/{rec2["id"]}/share'), 'query_not_found')
        self.assertError(b.post(f'{API}/history/{rec2["id"]}/share', {'x': 1}), 'invalid_input')

        # Revoked: 404; a new link works until its record is deleted.
        self.assertStatus(b.delete(f'{API}/history/{rec2["id"]}/share'), 204)
        self.assertError(other.get(f'{API}/shared/{token}'), 'not_found')
        self.assertError(other.get(url), 'not_found')
        token2 = b.post(f'{API}/history/{rec2["id"]}/share').json['token']
        self.assertNotEqual(token2, token)
        self.assertStatus(other.get(f'{API}/shared/{token2}'), 200)
        self.assertStatus(b.delete(f'{API}/history/{rec2["id"]}'), 204)
        self.assertError(other.get(f'{API}/shared/{token2}'), 'not_found')
        # The chain ends where a turn was deleted.
        r = b.get(f'{API}/history/{rec3["id"]}/export')
        self.assertNotIn('## Question 2', r.body.decode())
        self.assertNotIn(ANSWER1, r.body.decode())
        self.check_no_secrets(d, [token2])

    def test_twelve_turns_small_context(self):
        """Long answers under a small context: every turn answers; the
        oldest turns leave first, the one before is always there (cut when
        it alone is too large), and no request is over the context."""
        context = 4096
        long = [('Turn %d: ' % i) + ('apples and pears ' * (180 if i != 10 else 900)) for i in range(12)]
        llm = self.llm([])
        d = self.pipeline_daemon(llm, WIKI_WEB_MODEL_CONTEXT_TOKENS=str(context))
        b = d.browser()
        prev = None
        for i in range(12):
            body = {'question': f'Question {i}?'}
            if prev:
                body['follow_up'] = prev
            llm.set_script([{'answer': long[i]}])
            r = b.post(f'{API}/query', body, timeout=60)
            rec = self.check_record(d, b, r)
            raw = llm.requests[-1]['raw']
            self.assertLessEqual(len(raw.encode()) / 4, context, i)
            msgs = json.loads(raw)['messages']
            self.assertEqual(msgs[-1]['content'], f'Question {i}?')
            if i > 0:
                # The turn just before is always there, right before.
                self.assertEqual(msgs[-3]['content'], f'Question {i - 1}?')
                self.assertTrue(msgs[-2]['content'].startswith(f'Turn {i - 1}: apples'), i)
            if i == 11:
                # Turn 10's answer alone is over the budget: cut, and
                # nothing older is there.
                self.assertIn('[… cut by wikiweb]', msgs[-2]['content'])
                self.assertEqual(len(msgs), 4)
            if i == 9:
                # The oldest left first: turn 0 is gone, turns 7 and 8 stay.
                contents = [m['content'] for m in msgs]
                self.assertNotIn('Question 0?', contents)
                self.assertIn('Question 7?', contents)
            prev = rec['id']
        self.assertEqual(rec['conversation'], b.get(f'{API}/history?limit=100').json['items'][-1]['id'])
        self.assertIn('older ones left out', d.log())


class SharedWithIdentity(harness.DaemonTestCase):
    """Identity on (the daemon's own loopback address is the trusted proxy),
    anonymous requests allowed elsewhere: a share is read by any signed-in
    person, never anonymously (403, before the token is looked at), and
    names nobody. No pipeline: the records are failed ones."""

    def test_two_people_and_anonymous(self):
        d = self.daemon(WIKI_WEB_TRUSTED_PROXIES='127.0.0.1', WIKI_WEB_REQUIRE_USER='false')
        alice, bob, anon = d.browser(), d.browser(), d.browser()
        A, B = {USER: 'alice-from-sales'}, {USER: 'bob'}

        r = alice.post(f'{API}/query', {'question': 'Who asked?'}, headers=A)
        self.assertError(r, 'execution_failed')
        qid = r.header('Wikiweb-Query-Id')
        self.wait_state(d, 'idle')

        r = alice.post(f'{API}/history/{qid}/share', headers=A)
        self.assertStatus(r, 201)
        token = r.json['token']

        r = bob.get(f'{API}/shared/{token}', headers=B)
        self.assertStatus(r, 200)
        self.assertEqual([t['question'] for t in r.json['turns']], ['Who asked?'])
        self.assertNotIn(b'alice', r.body.lower())
        self.assertNotIn(b'alice', bob.get(f'{API}/shared/{token}/export', headers=B).body.lower())

        # Anonymous: refused, a valid token or not.
        for t in (token, 'sh_' + '0' * 64):
            r = anon.get(f'{API}/shared/{t}')
            self.assertStatus(r, 403)
            self.assertError(r, 'origin_denied')
        self.assertStatus(anon.get(f'{API}/shared/{token}/export'), 403)

        # The record itself stays Alice's: Bob cannot export, follow, share.
        self.assertError(bob.get(f'{API}/history/{qid}/export', headers=B), 'query_not_found')
        r = bob.post(f'{API}/query', {'question': 'Bob follows?', 'follow_up': qid}, headers=B)
        self.assertError(r, 'query_not_found')
        self.assertError(bob.post(f'{API}/history/{qid}/share', headers=B), 'query_not_found')
        self.assertStatus(alice.get(f'{API}/history/{qid}/export', headers=A), 200)

        # A follow-up of a failed record is a query like any other.
        r = alice.post(f'{API}/query', {'question': 'Again?', 'follow_up': qid}, headers=A)
        self.assertError(r, 'execution_failed')
        self.wait_state(d, 'idle')
        rec = alice.get(f'{API}/history/{r.header("Wikiweb-Query-Id")}', headers=A).json
        self.assertEqual((rec['follow_up'], rec['conversation']), (qid, qid))


if __name__ == '__main__':
    test_pipeline.main()
