#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 9.1 and 9.2: feedback on answers, and the report of what the
wiki could not answer, for the wiki's editors. The real wikiwebd, the test
MediaWiki and the scripted model; the daemon trusts 127.0.0.1 as its
proxy, so every request of a test names its user in X-Remote-User (or is
anonymous). One daemon for the whole story: each signal, the grouping of
wordings, what is not listed, privacy, editor-only access, the CSV, the
metrics, and feedback's hostile input."""

import csv
import io
import os
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
from harness import API  # noqa: E402
from test_metrics import samples, scrape  # noqa: E402
import test_pipeline  # noqa: E402
from test_pipeline import PipelineBase  # noqa: E402

USERS = ('alice', 'bob', 'carol', 'dave')
EDITOR = 'editor'

NO_PAGE = [{'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'parking policy', 'limit': 5}}]},
           {'answer': 'The wiki has no page about parking.'}]
APPLE_OK = [{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
            {'answer': 'Apple trees like sun [1].\n\n[1] Apple: "The apple tree likes sun and well-drained soil."'}]
APPLE_MADE_UP = [{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
                 {'answer': 'Apples grow on the moon [1].\n\n[1] Apple: "Apples grow best on the moon, in low '
                            'gravity."'}]
ORCHARD_OK = [{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Orchard'}}]},
              {'answer': 'Apples and more [1].\n\n[1] Orchard: "The orchard grows fruit: Apple, Banana, Cherry '
                         'and more."'}]
# Two steps allowed: the model still asks for a tool in the last one.
TRAVEL_FAILS = [{'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'travel policy', 'limit': 5}}]},
                {'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'travel rules', 'limit': 5}}]}]
MODEL_FAILS = [{'error': 'server'}]


class Report(PipelineBase):

    def call(self, d, method, path, user=None, body=None, **kw):
        b = self.browsers.setdefault(user, d.browser())
        headers = kw.pop('headers', {})
        if user:
            headers['X-Remote-User'] = user
        return b.request(method, path, body=body, headers=headers, **kw)

    def ask(self, d, llm, user, question, script, ok=True):
        llm.set_script(script)
        r = self.call(d, 'POST', API + '/query', user, {'question': question}, timeout=60)
        self.assertEqual(r.status, 200 if ok else r.status, r)
        if not ok:
            self.assertGreaterEqual(r.status, 400, r)
        qid = r.header('Wikiweb-Query-Id')
        self.assertRegex(qid, harness.QUERY_ID_RE)
        self.wait_state(d, 'idle')
        return qid

    def feedback(self, d, qid, user, body, **kw):
        return self.call(d, 'POST', f'{API}/history/{qid}/feedback', user, body, **kw)

    def report(self, d, user=EDITOR, query=''):
        return self.call(d, 'GET', API + '/reports/unanswered' + query, user)

    def test_feedback_and_report(self):
        self.browsers = {}
        llm = self.llm([])
        w = test_pipeline.wiki()
        d = self.pipeline_daemon(llm, w=w, metrics=True, WIKI_WEB_TRUSTED_PROXIES='127.0.0.1/32',
                                 WIKI_WEB_REQUIRE_USER='false', WIKI_WEB_EDITORS=f'{EDITOR}, Ed Two',
                                 WIKI_WEB_QUERY_MAX_STEPS='2')

        # A running record cannot be rated: there is no answer yet (409).
        llm.set_script([{'answer': 'late', 'hold': 'h'}])
        t = threading.Thread(target=lambda: self.call(d, 'POST', API + '/query', 'dave', {'question': 'Hold on?'},
                                                      timeout=60))
        t.start()
        self.wait_state(d, 'running')
        running = self.call(d, 'GET', API + '/history', 'dave').json['items'][0]
        self.assertEqual(running['status'], 'running')
        self.assertIsNone(running['feedback'])
        r = self.feedback(d, running['id'], 'dave', {'rating': 'up'})
        self.assertError(r, 'busy')
        self.assertTrue(r.header('Retry-After'))
        llm.release('h')
        t.join(30)
        self.wait_state(d, 'idle')

        parking1 = self.ask(d, llm, 'alice', 'What is the parking policy?', NO_PAGE)
        parking2 = self.ask(d, llm, 'bob', 'Parking policy for visitors?', NO_PAGE)
        apple_up = self.ask(d, llm, 'alice', 'Where do apples grow?', APPLE_OK)
        apple_bad = self.ask(d, llm, 'bob', 'Where do the apples grow?', APPLE_MADE_UP)
        orchard = self.ask(d, llm, 'bob', 'What does the orchard grow?', ORCHARD_OK)
        self.ask(d, llm, 'carol', 'What is the travel policy?', TRAVEL_FAILS, ok=False)
        self.ask(d, llm, 'carol', 'How tall is a zebra?', MODEL_FAILS, ok=False)

        # -- feedback --------------------------------------------------------
        rec = self.call(d, 'GET', f'{API}/history/{parking1}', 'alice').json
        self.assertIsNone(rec['feedback'])
        # Only on the asker's own records: anybody else's is not found.
        for user in ('bob', None, EDITOR):
            self.assertError(self.feedback(d, parking1, user, {'rating': 'down'}), 'query_not_found')
        self.assertError(self.feedback(d, 'qr_' + '0' * 32, 'alice', {'rating': 'down'}), 'query_not_found')
        # Hostile and wrong bodies: 400, nothing kept.
        for body in ({}, {'rating': 'meh'}, {'rating': 'UP'}, {'rating': None}, {'rating': 1},
                     {'rating': 'up', 'reason': 'wrong'}, {'rating': 'down', 'reason': 'bad'},
                     {'rating': 'down', 'reason': None}, {'rating': 'down', 'extra': 1},
                     {'rating': 'down', 'comment': 'x' * 1001}, {'rating': 'down', 'comment': 5},
                     {'rating': 'down', 'comment': 'bell \u0007'}, {'rating': 'down', 'comment': 'nul \u0000'},
                     {'rating': 'down\u0000'}, ['down'], 'down',
                     '{"rating": "up", "rating": "down"}', '{"rating": "up"} x', '{"rating": "up"',
                     b'{"rating": "\xff"}', '{"rating": "up", "comment": "\\ud800"}'):
            with self.subTest(body=body):
                self.assertError(self.feedback(d, parking1, 'alice', body), 'invalid_input')
        self.assertError(self.feedback(d, parking1, 'alice', {'rating': 'up'}, content_type='text/plain'),
                         'invalid_input')
        r = self.call(d, 'GET', f'{API}/history/{parking1}/feedback', 'alice')
        self.assertError(r, 'method_not_allowed')
        self.assertEqual(r.header('Allow'), 'POST')
        self.assertIsNone(self.call(d, 'GET', f'{API}/history/{parking1}', 'alice').json['feedback'])
        # 1000 characters are code points, not bytes.
        r = self.feedback(d, parking1, 'alice', {'rating': 'down', 'reason': 'wrong', 'comment': '\u00e9' * 1000})
        self.assertStatus(r, 200)
        self.assertEqual(r.json['feedback']['comment'], '\u00e9' * 1000)
        # A second rating replaces the first.
        r = self.feedback(d, parking1, 'alice', {'rating': 'up'})
        self.assertStatus(r, 200)
        self.assertEqual(r.json['id'], parking1)
        fb = r.json['feedback']
        self.assertEqual((fb['rating'], fb['reason'], fb['comment']), ('up', None, None))
        harness.parse_time(fb['rated_at'])
        r = self.feedback(d, parking1, 'alice', {'rating': 'down', 'reason': 'not_what_i_asked',
                                                  'comment': '  Nothing about visitors.\n'})
        self.assertEqual(r.json['feedback']['comment'], 'Nothing about visitors.')
        self.assertEqual(self.call(d, 'GET', f'{API}/history/{parking1}', 'alice').json['feedback'],
                         r.json['feedback'])
        # The same from the user's listing.
        items = self.call(d, 'GET', API + '/history', 'alice').json['items']
        self.assertEqual([i['feedback'] for i in items if i['id'] == parking1], [r.json['feedback']])
        self.assertStatus(self.feedback(d, apple_up, 'alice', {'rating': 'up', 'comment': 'Thanks'}), 200)
        self.assertStatus(self.feedback(d, orchard, 'bob', {
            'rating': 'down', 'reason': 'incomplete', 'comment': '=HYPERLINK("http://127.0.0.1/x","click")'}), 200)

        # -- who may read the report ------------------------------------------
        for user in (None, 'alice', 'Editor', 'editor '):
            with self.subTest(user=user):
                r = self.report(d, user)
                self.assertError(r, 'origin_denied')
                # GET /reports lists none for them, without refusing.
                r = self.call(d, 'GET', API + '/reports', user)
                self.assertStatus(r, 200)
                self.assertEqual(r.json, {'reports': []})
        for user in (EDITOR, 'Ed Two'):
            with self.subTest(user=user):
                self.assertEqual(self.call(d, 'GET', API + '/reports', user).json, {'reports': ['unanswered']})
        for q in ('?days=0', '?days=366', '?days=abc', '?days=01', '?days=-1', '?days=+5', '?days=',
                  '?format=xml'):
            with self.subTest(q=q):
                self.assertError(self.report(d, query=q), 'invalid_input')
        self.assertStatus(self.report(d, 'Ed Two', '?days=365'), 200)
        self.assertStatus(self.call(d, 'HEAD', API + '/reports/unanswered', EDITOR), 200)

        # -- what it says ---------------------------------------------------
        r = self.report(d)
        self.assertStatus(r, 200)
        rep = r.json
        self.assertEqual(set(rep), {'since', 'days', 'records', 'groups'})
        self.assertEqual(rep['days'], 30)
        self.assertLess(abs(harness.parse_time(rep['since']) - (time.time() - 30 * 86400)), 60)
        groups = rep['groups']
        by_q = {}
        for g in groups:
            self.assertEqual(set(g), {'question', 'wordings', 'count', 'first_asked', 'last_asked', 'signals',
                                      'searches', 'pages', 'new_page_url'}, g)
            for wording in g['wordings']:
                by_q[wording] = g
        # Two wordings of one question: one group, most asked first.
        parking = by_q['What is the parking policy?']
        self.assertIs(by_q['Parking policy for visitors?'], parking)
        self.assertIs(groups[0], parking)
        self.assertEqual(parking['count'], 2)
        self.assertIn(parking['question'], parking['wordings'])
        self.assertLessEqual(harness.parse_time(parking['first_asked']), harness.parse_time(parking['last_asked']))
        self.assertEqual(parking['signals'], {
            'no_sources': 2, 'unverified': 2,
            'negative_feedback': {'count': 1, 'reasons': {'not_what_i_asked': 1},
                                  'comments': ['Nothing about visitors.']},
            'failed': {'count': 0, 'codes': {}}})
        self.assertEqual(parking['searches'], [{'query': 'parking policy', 'results': 0, 'count': 2}])
        self.assertEqual(parking['pages'], [])
        self.assertEqual(parking['new_page_url'], w.base_url + '/index.php?title=parking_policy&action=edit')
        # The up-rated answer with a verified citation is not listed; the
        # same question answered with a quote not on its page is.
        apples = by_q['Where do the apples grow?']
        self.assertNotIn('Where do apples grow?', by_q)
        self.assertEqual(apples['count'], 1)
        self.assertEqual(apples['signals']['unverified'], 1)
        self.assertEqual(apples['signals']['no_sources'], 0)
        self.assertEqual([p['title'] for p in apples['pages']], ['Apple'])
        self.assertTrue(apples['pages'][0]['url'].startswith(w.base_url), apples)
        # A verified answer its asker rated down.
        orch = by_q['What does the orchard grow?']
        self.assertEqual(orch['signals']['negative_feedback'], {
            'count': 1, 'reasons': {'incomplete': 1}, 'comments': ['=HYPERLINK("http://127.0.0.1/x","click")']})
        self.assertEqual((orch['signals']['unverified'], orch['signals']['no_sources']), (0, 0))
        # Failed in a way that says the wiki lacks it: listed with its code;
        # the model's failure is not the wiki's and is not listed.
        travel = by_q['What is the travel policy?']
        self.assertEqual(travel['signals']['failed'], {'count': 1, 'codes': {'execution_failed': 1}})
        self.assertEqual([s['query'] for s in travel['searches']], ['travel policy'])
        self.assertNotIn('How tall is a zebra?', by_q)
        # Answered without reading a page: no sources, nothing verified.
        self.assertEqual(by_q['Hold on?']['signals']['no_sources'], 1)
        self.assertEqual(rep['records'], sum(g['count'] for g in groups))
        # Names nobody: no user, session or record id.
        for s in USERS + (parking1, parking2, apple_bad, orchard) + tuple(d.tokens):
            self.assertNotIn(s, r.body.decode(), s)

        # -- the CSV ----------------------------------------------------------
        r = self.report(d, query='?format=csv&days=7')
        self.assertStatus(r, 200)
        self.assertEqual(r.header('Content-Type'), 'text/csv; charset=utf-8')
        self.assertIn('attachment', r.header('Content-Disposition'))
        rows = list(csv.reader(io.StringIO(r.body.decode(), newline='')))
        self.assertEqual(rows[0][:4], ['question', 'count', 'first_asked', 'last_asked'])
        self.assertEqual(len(rows), 1 + len(groups))
        orch_row = [x for x in rows if x[0] == 'What does the orchard grow?'][0]
        # A formula is shown as text, never run.
        self.assertEqual(orch_row[-1], '\'=HYPERLINK("http://127.0.0.1/x","click")')
        self.assertEqual(orch_row[11], 'incomplete (1)')
        for s in USERS:
            self.assertNotIn(s, r.body.decode())

        # -- the counters -----------------------------------------------------
        _, _, body, _ = scrape(d)
        m = samples(body)
        self.assertEqual(m['wikiweb_feedback_total{rating="up"}'], 2)
        self.assertEqual(m['wikiweb_feedback_total{rating="down"}'], 3)
        self.assertEqual(m['wikiweb_unanswered_total{signal="negative_feedback"}'], 3)
        self.assertGreaterEqual(m['wikiweb_unanswered_total{signal="no_sources"}'], 2)
        self.assertEqual(m['wikiweb_unanswered_total{signal="failed"}'], 1)

        # -- deleting a record deletes its feedback ----------------------------
        self.assertStatus(self.call(d, 'DELETE', f'{API}/history/{orchard}', 'bob'), 204)
        rep = self.report(d).json
        self.assertNotIn('What does the orchard grow?', [w for g in rep['groups'] for w in g['wordings']])
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        try:
            self.assertEqual(db.execute('SELECT count(*) FROM feedback WHERE query_id = ?', (orchard,)).fetchone(),
                             (0,))
            self.assertEqual(db.execute('SELECT count(*) FROM feedback').fetchone(), (2,))
        finally:
            db.close()

    def test_editors_need_trusted_proxies(self):
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'WIKI_WEB_EDITORS': 'editor'}
        for k in ('ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'):
            if k in os.environ:
                env[k] = os.environ[k]
        p = subprocess.run([harness.WIKIWEBD, '--check-config'], env=env, capture_output=True, text=True,
                           timeout=10)
        self.assertNotEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_EDITORS', p.stderr)
        self.assertIn('WIKI_WEB_TRUSTED_PROXIES', p.stderr)
        env['WIKI_WEB_TRUSTED_PROXIES'] = '127.0.0.1'
        env['WIKI_WEB_EDITORS'] = ' editor , Ed Two ,'
        p = subprocess.run([harness.WIKIWEBD, '--check-config'], env=env, capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_EDITORS=editor,Ed Two', p.stdout.splitlines())


if __name__ == '__main__':
    test_pipeline.main()
