#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Verified citations (docs/QUERY.md "Citations", API.md 9 and 11.2): the
real wikiwebd, the test MediaWiki 1.39 and the scripted model in each of its
four server dialects. A quote that matches exactly, one that matches only
after the normalization (across link markup, across bold), a made-up one
(not_found), a page never read (not_read), one too short; an answer without
citations; the stream's citations event; the permalink opened on the wiki;
the staleness of a record's sources after an edit of a cited page."""

import html
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402
import mediawiki  # noqa: E402
from harness import API  # noqa: E402
from test_metrics import samples, scrape  # noqa: E402
import test_pipeline  # noqa: E402
from test_pipeline import PipelineBase, expected_source  # noqa: E402

READ = [
    {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apples'}},
                    {'name': 'wiki_read', 'arguments': {'title': 'Orchard'}}]},
]

ANSWER_TEXT = 'The apple tree likes sun [1]; the orchard grows several fruits [2]; apples are fruit [3].'
CITED = ANSWER_TEXT + (
    '\n\nSources:\n'
    '[1] Apple: "The apple tree likes sun and well-drained soil."\n'
    '[2] Orchard: "The orchard grows fruit: Apple, Banana, Cherry and more."\n'
    '- [3] Apples: \u201cApple is a fruit. It is number 1 in the orchard inventory.\u201d\n'
    '[4] Apple: "Apples grow best on the moon, in low gravity."\n'
    '[5] Banana: "Banana is a fruit. It is number 2 in the orchard inventory."\n'
    '[6] Orchard: "Apple"\n')


def fragment(quote):
    """The text fragment of the Text Fragments specification for a quote,
    written here independently of the C encoder: every byte outside
    A-Z a-z 0-9 . _ ~ percent-encoded; more than 10 words as start,end."""
    def enc(s):
        safe = b'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~'
        return ''.join(chr(c) if c in safe else '%%%02X' % c for c in s.encode())
    words = quote.split(' ')
    if len(words) > 10:
        return '#:~:text=' + enc(' '.join(words[:5])) + ',' + enc(' '.join(words[-5:]))
    return '#:~:text=' + enc(quote)


class Citations(PipelineBase):

    def check_cited(self, w, rec):
        self.assertEqual(rec['answer'], ANSWER_TEXT)
        apple = expected_source(w, 'Apple')
        orchard = expected_source(w, 'Orchard')
        self.assertEqual(rec['sources'], [apple, orchard])
        index = w.base_url + '/index.php?oldid='
        c = rec['citations']
        self.assertEqual([x['n'] for x in c], [1, 2, 3, 4, 5, 6])
        for x in c:
            self.assertEqual(set(x), {'n', 'title', 'revision_id', 'quote', 'status', 'url', 'section'})
        # exact, under the heading "Growing"
        q1 = 'The apple tree likes sun and well-drained soil.'
        self.assertEqual(c[0], {'n': 1, 'title': 'Apple', 'revision_id': apple['revision_id'], 'quote': q1,
                                'status': 'verified', 'url': index + str(apple['revision_id']) + fragment(q1),
                                'section': 'Growing'})
        # only after the normalization: across [[…]] link markup
        q2 = 'The orchard grows fruit: Apple, Banana, Cherry and more.'
        self.assertEqual(c[1], {'n': 2, 'title': 'Orchard', 'revision_id': orchard['revision_id'], 'quote': q2,
                                'status': 'verified', 'url': index + str(orchard['revision_id']) + fragment(q2),
                                'section': None})
        # across bold ('''Apple'''), typographic quotes, a bullet, the title
        # asked for before the redirect; a long quote as start,end
        q3 = 'Apple is a fruit. It is number 1 in the orchard inventory.'
        self.assertEqual(c[2], {'n': 3, 'title': 'Apple', 'revision_id': apple['revision_id'], 'quote': q3,
                                'status': 'verified', 'url': index + str(apple['revision_id']) + fragment(q3),
                                'section': None})
        self.assertIn(',', fragment(q3))
        # made up: the page was read, the quote is not in it
        self.assertEqual(c[3], {'n': 4, 'title': 'Apple', 'revision_id': apple['revision_id'],
                                'quote': 'Apples grow best on the moon, in low gravity.', 'status': 'not_found',
                                'url': index + str(apple['revision_id']), 'section': None})
        # a page this query never read
        self.assertEqual(c[4], {'n': 5, 'title': 'Banana', 'revision_id': None,
                                'quote': 'Banana is a fruit. It is number 2 in the orchard inventory.',
                                'status': 'not_read', 'url': None, 'section': None})
        # too short to mean anything, though it occurs
        self.assertEqual(c[5]['status'], 'too_short')
        return c

    def test_each_dialect(self):
        llm = self.llm([])
        d = self.pipeline_daemon(llm, metrics=True)
        w = mediawiki_wiki()
        for flavor in fake_llm.FLAVORS:
            with self.subTest(flavor=flavor):
                llm.set_script(READ + [{'answer': CITED, 'piece': 7}], flavor=flavor)
                b, r = self.ask(d, question='Where do apples grow?')
                rec = self.check_record(d, b, r)
                self.check_cited(w, rec)
                # The system prompt asks for the lines.
                system = llm.chat_requests()[0]['messages'][0]['content']
                self.assertIn('[1] Page title: "exact quote"', system)
        # Counted: three verified, one of each other status per query.
        _, _, body, _ = scrape(d)
        m = samples(body)
        self.assertEqual(m['wikiweb_citations_total{status="verified"}'], 3 * len(fake_llm.FLAVORS))
        self.assertEqual(m['wikiweb_citations_total{status="not_found"}'], len(fake_llm.FLAVORS))
        self.assertEqual(m['wikiweb_citations_total{status="not_read"}'], len(fake_llm.FLAVORS))
        self.assertEqual(m['wikiweb_citations_total{status="too_short"}'], len(fake_llm.FLAVORS))

    def test_across_links_and_bold_each_dialect(self):
        # One quote across [[target|label]], [[target]]s, bold, a ref and
        # entities, on a page of a wiki of its own.
        w = mediawiki.Wiki().start()
        self.addCleanup(w.stop)
        rev = w.edit('Fruit basket', "A '''market basket''' holds [[Apple|red apples]] and ripe "
                                     "[[Banana]]s<ref>Seen in 2024.</ref> for the &quot;market&quot;.\n")
        quote = 'A market basket holds red apples and ripe Bananas for the "market".'
        llm = self.llm([])
        d = self.pipeline_daemon(llm, w=w)
        for flavor in fake_llm.FLAVORS:
            with self.subTest(flavor=flavor):
                llm.set_script([{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Fruit basket'}}]},
                                {'answer': 'Baskets hold fruit [1].\n\n**Citations:**\n'
                                           '* [1] Fruit basket: \u201c' + quote + '\u201d'}], flavor=flavor)
                b, r = self.ask(d, question='What is in a basket?')
                rec = self.check_record(d, b, r)
                self.assertEqual(rec['answer'], 'Baskets hold fruit [1].')
                self.assertEqual(rec['citations'], [{
                    'n': 1, 'title': 'Fruit basket', 'revision_id': rev, 'quote': quote, 'status': 'verified',
                    'url': w.base_url + '/index.php?oldid=%d' % rev + fragment(quote), 'section': None}])

    def test_permalink_opens_the_revision(self):
        # What a browser would fetch (the fragment stays in the browser): the
        # wiki's page of that revision, which shows the quoted text.
        llm = self.llm(READ + [{'answer': CITED}])
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        for c in rec['citations'][:3]:
            url, _, frag = c['url'].partition('#')
            self.assertTrue(frag.startswith(':~:text='), c)
            self.assertTrue(url.startswith('http://127.0.0.1:'), url)  # the fixture wiki, loopback
            with urllib.request.urlopen(url, timeout=30) as resp:
                page = resp.read().decode()
            text = html.unescape(re.sub(r'<[^>]*>', '', page))
            text = re.sub(r'\s+', ' ', text)
            self.assertIn(c['quote'], text, url)
            self.assertIn('revision as of', text.lower())

    def test_no_citations(self):
        llm = self.llm(READ + [{'answer': 'Apples grow on trees [Apple].\n\nSources: the wiki.'}])
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        self.assertEqual(rec['answer'], 'Apples grow on trees [Apple].\n\nSources: the wiki.')
        self.assertEqual(rec['citations'], [])
        # A failed query has none either.
        llm.set_script([{'error': 'context'}])
        b2, r2 = self.ask(d)
        failed = self.check_failed(d, b2, r2, 'model_context_exceeded')
        self.assertEqual(failed['citations'], [])

    def test_stream_event(self):
        d = self.pipeline_daemon(self.llm(READ + [{'answer': CITED, 'piece': 5}]))
        b = d.browser()
        b.status()
        s = harness.EventStream(d, API + '/query', method='POST', cookie=b.cookie,
                                body={'question': 'Where do apples grow?'})
        self.addCleanup(s.close)
        evs = s.events(timeout=60)
        names = [e['event'] for e in evs]
        self.assertEqual(names[-2:], ['citations', 'record'])
        self.assertEqual(names.count('citations'), 1)
        record = evs[-1]['data']
        self.assertEqual(evs[-2]['data'], {'citations': record['citations']})
        self.check_cited(mediawiki_wiki(), record)
        # The text streamed as the model wrote it, citation lines included;
        # the record's answer is without them.
        text = ''.join(e['data']['delta'] for e in evs if e['event'] == 'text')
        self.assertEqual(text, CITED.strip())
        self.assertEqual(record['answer'], ANSWER_TEXT)

    def test_history_keeps_them(self):
        llm = self.llm(READ + [{'answer': CITED}])
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        d.restart()
        again = b.get(API + '/history/' + rec['id'])
        self.assertStatus(again, 200)
        self.assertEqual(again.json['citations'], rec['citations'])
        listed = b.get(API + '/history')
        self.assertEqual(listed.json['items'][0]['citations'], rec['citations'])


class Staleness(PipelineBase):
    """GET /history/{id}/sources after an edit of a cited page, on a wiki of
    its own (the edit must not change what other tests read)."""

    def test_sources_changed_since(self):
        w = mediawiki.Wiki().start()
        self.addCleanup(w.stop)
        llm = self.llm(READ + [{'answer': CITED}])
        d = self.pipeline_daemon(llm, w=w)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        before = {s['title']: s['revision_id'] for s in rec['sources']}

        new_rev = w.edit('Apple', "'''Apple''' is a fruit. Its tree now likes shade.\n")
        self.assertNotEqual(new_rev, before['Apple'])
        t0 = time.monotonic()
        s = b.get(API + '/history/' + rec['id'] + '/sources')
        self.assertStatus(s, 200)
        self.assertLess(time.monotonic() - t0, 10)
        body = s.json
        self.assertEqual(set(body), {'id', 'checked_at', 'sources'})
        self.assertEqual(body['id'], rec['id'])
        harness.parse_time(body['checked_at'])
        self.assertEqual(body['sources'], [
            {'title': 'Apple', 'url': rec['sources'][0]['url'], 'revision_id': before['Apple'],
             'current_revision_id': new_rev, 'changed': True, 'missing': False},
            {'title': 'Orchard', 'url': rec['sources'][1]['url'], 'revision_id': before['Orchard'],
             'current_revision_id': before['Orchard'], 'changed': False, 'missing': False},
        ])
        # The record itself is unchanged: its citations stay verified
        # against the revision that was read.
        self.assertEqual(b.get(API + '/history/' + rec['id']).json, rec)

        # One check per session every 10 s: the next is refused, with when to retry.
        again = b.get(API + '/history/' + rec['id'] + '/sources')
        self.assertError(again, 'rate_limited')
        self.assertTrue(1 <= int(again.header('Retry-After')) <= 10, again)
        # Another session's record is not found, and costs nothing.
        other = d.browser().get(API + '/history/' + rec['id'] + '/sources')
        self.assertError(other, 'query_not_found')
        # Only GET.
        self.assertStatus(b.post(API + '/history/' + rec['id'] + '/sources', {}), 405)

    def test_no_sources_no_wiki_request(self):
        llm = self.llm([{'answer': 'I know nothing of that.'}])
        d = self.pipeline_daemon(llm)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        for _ in range(3):  # not counted against the session
            s = b.get(API + '/history/' + rec['id'] + '/sources')
            self.assertStatus(s, 200)
            self.assertEqual(s.json['sources'], [])

    def test_wiki_down(self):
        w = mediawiki.Wiki().start()
        llm = self.llm(READ + [{'answer': CITED}])
        d = self.pipeline_daemon(llm, w=w)
        b, r = self.ask(d)
        rec = self.check_record(d, b, r)
        w.stop()
        s = b.get(API + '/history/' + rec['id'] + '/sources', timeout=60)
        self.assertError(s, 'connectivity_failed')


def mediawiki_wiki():
    return test_pipeline.wiki()


if __name__ == '__main__':
    test_pipeline.main()
