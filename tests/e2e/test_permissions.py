#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md "Whose permissions": with WIKI_WEB_WIKI_READ_AS=person a query
uses only what the asking person may read, as the real MediaWiki (1.39, or
1.43 LTS with WIKIWEB_MEDIAWIKI_VERSION=1.43: meson's e2e-permissions-mw143)
decides it through the extension WikiwebReadCheck loaded from the tree
(packaging/mediawiki/), at the moment of use, and fails closed. "Whose
name": the sign-on's name mapped to the wiki account, by a confirmed
e-mail address (WIKI_WEB_WIKI_USER_FROM=email) or by stripping a Kerberos
realm or a Windows domain. On 1.43 the wiki runs with
$wgDevelopmentWarnings, and any notice the extension caused fails the file.

One wiki for the whole file (tests/fixtures/mediawiki.py, restricted=True:
the namespace Payroll and the titles under HR/ readable by the group
"payroll" only, through a getUserPermissionsErrors hook as Lockdown does;
Vault/ by sysop only, so not by the service account either). Alice is
outside the group, Bob is moved in and out of it between questions, and
an anonymous person asks too. The people are told apart by the trusted
proxy's header (the test client is the proxy, 127.0.0.1). Every request
the scripted model receives is searched for the restricted pages' text.

All traffic goes to loopback addresses only."""

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import http.cookiejar

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import mediawiki  # noqa: E402
from harness import API  # noqa: E402
from test_metrics import samples, scrape  # noqa: E402
from test_pipeline import PipelineBase  # noqa: E402

USER = 'X-Remote-User'
MARKERS = mediawiki.RESTRICTED_MARKERS

_WIKI = None


def wiki():
    global _WIKI
    if _WIKI is None:
        _WIKI = mediawiki.Wiki(restricted=True).start()
    return _WIKI


def read(title):
    return {'name': 'wiki_read', 'arguments': {'title': title}}


# One conversation: a search whose first hits are restricted, reads of a
# public redirect into a restricted page, of restricted pages directly,
# of a page that does not exist and of a public page; the answer cites a
# restricted page and a public one.
SCRIPT = [
    {'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'zanzibarquokka', 'limit': 1}}]},
    {'tool_calls': [read('Salary table'), read('Payroll:Salaries'), read('Case seventeen'),
                    read('No such page at all'), read('Quokka notice')]},
    {'answer': 'The festival is public [1]; the salary is known [2].\n\n'
               '[1] Quokka notice: "The zanzibarquokka festival is public and open to everyone."\n'
               '[2] Payroll:Salaries: "The director\'s salary is 98765 kroner a month."'},
]
PAGES = ['HR/Case 17', 'Apple']


def tool_results(request):
    """The tool results of a chat request, in order, as JSON."""
    out = []
    for m in request['messages']:
        if m.get('role') == 'tool':
            out.append(json.loads(m['content']))
    return out


class Permissions(PipelineBase):

    @classmethod
    def tearDownClass(cls):
        global _WIKI
        if _WIKI:
            notices = _WIKI.deprecations()
            _WIKI.stop()
            _WIKI = None
            if notices:
                raise AssertionError('the extension caused PHP notices on MediaWiki %s:\n%s'
                                     % (mediawiki.VERSION, '\n'.join(notices[:20])))

    def person_daemon(self, llm, **env):
        w = wiki()
        settings = dict(WIKI_WEB_WIKI_READ_AS='person', WIKI_WEB_TRUSTED_PROXIES='127.0.0.1/32',
                        WIKI_WEB_REQUIRE_USER='false', metrics=True, bot=True)
        settings.update(env)
        return self.pipeline_daemon(llm, w, **settings)

    def ask_as(self, d, user, script_llm, question='What is known about the quokka and the salary?', pages=PAGES):
        b = d.browser()
        headers = {USER: user} if user else None
        body = {'question': question}
        if pages:
            body['pages'] = pages
        r = b.post(API + '/query', body, headers=headers, timeout=60)
        return b, r, headers

    def assertClean(self, llm):
        """Nothing of a restricted page in any request the model received."""
        reqs = llm.chat_requests()
        self.assertTrue(reqs)
        for body in reqs:
            text = json.dumps(body, ensure_ascii=False)
            for m in MARKERS:
                self.assertNotIn(m, text, 'restricted text reached the model')

    def check_outsider(self, d, llm, b, r, headers):
        rec = self.check_record_as(b, r, headers)
        self.assertClean(llm)
        reqs = llm.chat_requests()
        # The search: one hit asked for, one readable hit given, though the
        # wiki ranks a restricted one with it.
        search = tool_results(reqs[1])[-1]
        self.assertEqual([h['title'] for h in search['results']], ['Quokka notice'], search)
        # Each withheld read is exactly a missing page's result.
        reads = tool_results(reqs[2])[-5:]
        missing = reads[3]
        self.assertEqual(reads[0], missing)
        self.assertEqual(reads[1], missing)
        self.assertEqual(reads[2], missing)
        self.assertIn('zanzibarquokka festival', json.dumps(reads[4]))
        # The request's pages: HR/Case 17 withheld, Apple read.
        preload = tool_results(reqs[0])
        self.assertEqual(preload[0], missing)
        self.assertIn('Apple', json.dumps(preload[1]))
        self.assertEqual([s['title'] for s in rec['sources']], ['Apple', 'Quokka notice'])
        c = {x['title']: x['status'] for x in rec['citations']}
        self.assertEqual(c, {'Quokka notice': 'verified', 'Payroll:Salaries': 'not_read'})
        for m in MARKERS:
            self.assertNotIn(m, json.dumps(rec['sources']) + rec['answer'].replace('98765 kroner', ''))
        return rec

    def check_record_as(self, b, r, headers):
        self.assertStatus(r, 200)
        rec = r.json
        self.assertEqual(rec['status'], 'succeeded', rec)
        # The check's time is wiki time, counted once.
        t = rec['timings_ms']
        self.assertLessEqual(t['wiki'] + t['model'], t['total'] + 2, t)
        h = b.get(API + '/history/' + rec['id'], headers=headers)
        self.assertStatus(h, 200)
        self.assertEqual(h.json, rec)
        return rec

    def withheld(self, d):
        _, _, body, _ = scrape(d)
        m = samples(body)
        return (m['wikiweb_wiki_pages_withheld_total{from="search"}'],
                m['wikiweb_wiki_pages_withheld_total{from="read"}'],
                m['wikiweb_wiki_read_checks_total{outcome="answered"}'],
                m['wikiweb_wiki_read_checks_total{outcome="failed"}'])

    def test_people_and_a_group_change(self):
        w = wiki()
        w.set_groups('Bob', [])
        llm = self.llm(SCRIPT)
        d = self.person_daemon(llm)
        h = d.browser().get(API + '/health')
        self.assertEqual(h.json['wiki_read_as'], 'person')
        # The daemon's own check at start: answered.
        deadline = time.monotonic() + 10
        while h.json['wiki_read_check'] != 'ok' and time.monotonic() < deadline:
            time.sleep(0.1)
            h = d.browser().get(API + '/health')
        self.assertEqual(h.json['wiki_read_check'], 'ok')
        # Alice (outside the group) and an anonymous person.
        for user in ('Alice', None):
            with self.subTest(user=user):
                llm.set_script(SCRIPT)
                b, r, headers = self.ask_as(d, user, llm)
                self.check_outsider(d, llm, b, r, headers)
        s0, r0, a0, f0 = self.withheld(d)
        # Per query: 1 search hit, 4 reads (3 tool calls, 1 requested page).
        self.assertEqual((s0, r0, f0), (2, 8, 0))
        # One check per tool call that returned something, none across queries.
        self.assertEqual(a0, 2 * (1 + 4 + 1 + 1))
        # Bob, outside, then inside the group: the change counts at once.
        llm.set_script(SCRIPT)
        b, r, headers = self.ask_as(d, 'Bob', llm)
        self.check_outsider(d, llm, b, r, headers)
        w.set_groups('Bob', ['payroll'])
        llm.set_script(SCRIPT)
        b, r, headers = self.ask_as(d, 'bob', llm)  # MediaWiki normalises the name
        rec = self.check_record_as(b, r, headers)
        text = json.dumps(llm.chat_requests(), ensure_ascii=False)
        for m in ('98765', 'quetzalhrcase', 'Confidential case'):
            self.assertIn(m, text)
        self.assertNotIn('quetzalvault', text)
        self.assertEqual([s['title'] for s in rec['sources']],
                         ['HR/Case 17', 'Apple', 'Payroll:Salaries', 'Quokka notice'])
        c = {x['title']: x['status'] for x in rec['citations']}
        self.assertEqual(c, {'Quokka notice': 'verified', 'Payroll:Salaries': 'verified'})
        # The sources again, for Bob once he has left the group: the
        # restricted ones read as missing pages now.
        w.set_groups('Bob', [])
        answered = self.withheld(d)[2]
        s = b.get(API + '/history/' + rec['id'] + '/sources', headers=headers)
        self.assertStatus(s, 200)
        # One check of the four titles, counted once.
        self.assertEqual(self.withheld(d)[2], answered + 1)
        now = {x['title']: x['missing'] for x in s.json['sources']}
        self.assertEqual(now, {'HR/Case 17': True, 'Apple': False, 'Payroll:Salaries': True,
                               'Quokka notice': False})
        # No title of a withheld page in the journal.
        log = d.log()
        for t in ('Payroll:Salaries', 'HR/Case 17', 'Case seventeen', 'Salary table', 'Payroll%3ASalaries',
                  'Case%2017', 'Case_17'):
            self.assertNotIn(t, log)
        self.assertIn('withheld', log)

    def check_insider(self, d, llm, user):
        """user asks SCRIPT and gets the group's pages (Bob's, in payroll)."""
        llm.set_script(SCRIPT)
        b, r, headers = self.ask_as(d, user, llm)
        rec = self.check_record_as(b, r, headers)
        text = json.dumps(llm.chat_requests(), ensure_ascii=False)
        for m in ('98765', 'quetzalhrcase', 'Confidential case'):
            self.assertIn(m, text)
        self.assertNotIn('quetzalvault', text)
        self.assertEqual([s['title'] for s in rec['sources']],
                         ['HR/Case 17', 'Apple', 'Payroll:Salaries', 'Quokka notice'])
        return rec

    def ask_outsider(self, d, llm, user):
        llm.set_script(SCRIPT)
        b, r, headers = self.ask_as(d, user, llm)
        return self.check_outsider(d, llm, b, r, headers)

    def test_sign_on_by_email(self):
        """WIKI_WEB_WIKI_USER_FROM=email: the one account that holds the
        address confirmed, the domain in any case; an unconfirmed copy on
        an account in the group counts for nothing; an address nobody holds
        is an anonymous reader; one held by two accounts is refused before
        anything of the wiki reaches the model; an address that moves to
        another account counts at the next question."""
        w = wiki()
        for u in mediawiki.PERSONS:
            self.addCleanup(w.set_email, u, None)
            self.addCleanup(w.set_groups, u, [])
        w.set_groups('Bob', ['payroll'])
        w.set_groups('Eve', ['payroll'])
        w.set_email('Bob', 'bob@Corp.Example')
        w.set_email('Alice', 'alice@corp.example')
        w.set_email('Eve', 'alice@corp.example', confirmed=False)
        w.set_email('Carol', 'shared@corp.example')
        w.set_email('Dave', 'shared@corp.example')
        llm = self.llm(SCRIPT)
        d = self.person_daemon(llm, WIKI_WEB_WIKI_USER_FROM='email')
        self.check_insider(d, llm, 'bob@CORP.example')
        self.assertIn('read as the wiki account Bob.', d.log())
        # Eve, in the group, holds Alice's address unconfirmed: Alice's permissions.
        self.ask_outsider(d, llm, 'alice@corp.example')
        self.assertIn('read as the wiki account Alice.', d.log())
        # Nobody's address, and Eve's unconfirmed one alone: anonymous readers.
        self.ask_outsider(d, llm, 'nobody@corp.example')
        w.set_email('Alice', None)
        self.ask_outsider(d, llm, 'alice@corp.example')
        # Two accounts hold one address: refused, and nothing of the wiki reaches the model.
        for pages in (['Apple'], None):
            with self.subTest(pages=pages):
                llm.set_script([{'tool_calls': [read('Payroll:Salaries')]}, {'answer': 'never'}])
                b, r, headers = self.ask_as(d, 'shared@corp.example', llm, pages=pages)
                self.assertStatus(r, 403)
                self.assertError(r, 'wiki_auth_failed')
                self.assertIn('more than one wiki account', r.json['error']['message'])
                reqs = llm.chat_requests()
                self.assertEqual(len(reqs), 0 if pages else 1)
                for req in reqs:
                    self.assertEqual(tool_results(req), [])
        log = d.log()
        self.assertIn('more than one wiki account', log)
        for name in ('Carol', 'Dave'):
            self.assertNotIn(name, log)
        # The address moves from Alice to Bob: the next question is Bob's.
        w.set_email('Alice', 'mover@corp.example')
        self.ask_outsider(d, llm, 'mover@corp.example')
        w.set_email('Alice', None)
        w.set_email('Bob', 'mover@corp.example')
        self.check_insider(d, llm, 'mover@corp.example')
        # The mode and the lists in --check-config.
        env = dict(os.environ, WIKI_WEB_WIKI_USER_FROM='email')
        p = subprocess.run([harness.WIKIWEBD, '--check-config'], env=env, capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_WIKI_USER_FROM=email', p.stdout.splitlines())
        for bad in (dict(WIKI_WEB_WIKI_USER_FROM='mail'),
                    dict(WIKI_WEB_WIKI_USER_FROM='email', WIKI_WEB_WIKI_USER_STRIP_SUFFIXES='@corp.example'),
                    dict(WIKI_WEB_WIKI_USER_STRIP_SUFFIXES='corp.example'),
                    dict(WIKI_WEB_WIKI_USER_STRIP_PREFIXES='CORP')):
            p = subprocess.run([harness.WIKIWEBD, '--check-config'], env=dict(os.environ, **bad),
                               capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            self.assertNotEqual(p.returncode, 0, (bad, p))
            self.assertIn(sorted(bad)[-1] if len(bad) > 1 else list(bad)[0], p.stderr)

    def test_sign_on_principal(self):
        """Kerberos principals and Windows names: the configured realm and
        domain are stripped (in any case); another realm is not, and a name
        with "@" is never a wiki account."""
        w = wiki()
        w.set_groups('Bob', ['payroll'])
        self.addCleanup(w.set_groups, 'Bob', [])
        llm = self.llm(SCRIPT)
        d = self.person_daemon(llm, WIKI_WEB_WIKI_USER_STRIP_SUFFIXES='@OTHER.TEST, @CORP.EXAMPLE',
                               WIKI_WEB_WIKI_USER_STRIP_PREFIXES='CORP\\')
        for user in ('bob@CORP.EXAMPLE', 'CORP\\bob', 'corp\\bob@Corp.Example'):
            with self.subTest(user=user):
                self.check_insider(d, llm, user)
        for user in ('bob@ELSEWHERE.EXAMPLE', 'OTHER\\bob'):
            with self.subTest(user=user):
                self.ask_outsider(d, llm, user)
        self.assertIn('read as an anonymous reader of the wiki.', d.log())

    def test_private_wiki(self):
        w = wiki()
        llm = self.llm([])
        d = self.person_daemon(llm)
        w.set_switch('private', True)
        try:
            for user, readable in ((None, False), ('Alice', True)):
                with self.subTest(user=user):
                    llm.set_script([{'tool_calls': [read('Apple')]}, {'answer': 'Done.'}])
                    b, r, headers = self.ask_as(d, user, llm, pages=None)
                    rec = self.check_record_as(b, r, headers)
                    result = tool_results(llm.chat_requests()[1])[0]
                    self.assertEqual('error' not in result, readable, result)
                    self.assertEqual(len(rec['sources']), 1 if readable else 0)
        finally:
            w.set_switch('private', False)

    def test_fail_closed(self):
        w = wiki()
        llm = self.llm([])
        w.set_switch('readcheck-unloaded', True)
        try:
            d = self.person_daemon(llm)
            for switch, name in (('readcheck-unloaded', 'WikiwebReadCheck'),
                                 ('readcheck-revoked', 'wikiweb-readcheck')):
                with self.subTest(switch=switch):
                    w.set_switch('readcheck-unloaded', switch == 'readcheck-unloaded')
                    w.set_switch('readcheck-revoked', switch == 'readcheck-revoked')
                    # A requested page: nothing reaches the model at all.
                    llm.set_script([{'answer': 'never'}])
                    b, r, headers = self.ask_as(d, 'Alice', llm, pages=['Apple'])
                    self.assertStatus(r, 403)
                    self.assertError(r, 'wiki_auth_failed')
                    self.assertIn(name, r.json['error']['message'])
                    self.assertIn('WIKI_WEB_WIKI_READ_AS', r.json['error']['message'])
                    self.assertEqual(llm.chat_requests(), [])
                    # A read the model asks for: its result never comes.
                    llm.set_script([{'tool_calls': [read('Apple')]}, {'answer': 'never'}])
                    b, r, headers = self.ask_as(d, 'Alice', llm, pages=None)
                    self.assertStatus(r, 403)
                    self.assertEqual(len(llm.chat_requests()), 1)
            # The daemon started while the wiki could not answer: health says so.
            self.assertEqual(d.browser().get(API + '/health').json['wiki_read_check'], 'failed')
            self.assertGreaterEqual(self.withheld(d)[3], 4)
        finally:
            w.set_switch('readcheck-unloaded', False)
            w.set_switch('readcheck-revoked', False)

    def test_shared_conversation(self):
        """A shared conversation (API.md 9 "Share") is shown only to a
        person who may read every one of its sources, as the wiki says at
        the moment of reading: Bob, in the group, shares a turn that read a
        restricted page; Alice, outside it, gets 404 for the view, its
        export and its files, as for a wrong token; Bob gets it until he
        leaves the group."""
        w = wiki()
        w.set_groups('Bob', ['payroll'])
        self.addCleanup(w.set_groups, 'Bob', [])
        llm = self.llm([{'tool_calls': [read('Payroll:Salaries'), read('Apple')]},
                        {'answer': 'It is in the payroll.'}])
        d = self.person_daemon(llm)
        bob = {USER: 'Bob'}
        b, r, _ = self.ask_as(d, 'Bob', llm, question='Where is the salary?', pages=None)
        rec = self.check_record_as(b, r, bob)
        self.assertEqual([s['title'] for s in rec['sources']], ['Payroll:Salaries', 'Apple'])
        token = b.post(f'{API}/history/{rec["id"]}/share', headers=bob).json['token']
        a = d.browser()
        for path in ('', '/export', '/artifacts/af_' + '0' * 32):
            r = a.get(f'{API}/shared/{token}{path}', headers={USER: 'Alice'})
            self.assertStatus(r, 404)
            self.assertError(r, 'not_found')
        self.assertNotIn(b'98765', r.body)
        r = b.get(f'{API}/shared/{token}', headers=bob)
        self.assertStatus(r, 200)
        self.assertEqual(r.json['turns'][0]['answer'], 'It is in the payroll.')
        w.set_groups('Bob', [])
        self.assertError(b.get(f'{API}/shared/{token}', headers=bob), 'not_found')

    def test_share_outlives_its_first_turn(self):
        """A share is checked against every title that reached the models
        of the turns it shows, including the turns given to them as
        conversation: Bob, in the group, reads a restricted page, follows
        up with a turn that reads nothing, and shares the follow-up.
        Alice, outside the group, gets 404 for the view and its export,
        also after Bob deletes the first turn, for a share made after the
        deletion, and for a share of a turn more than 100 turns on."""
        w = wiki()
        w.set_groups('Bob', ['payroll'])
        self.addCleanup(w.set_groups, 'Bob', [])
        llm = self.llm([{'tool_calls': [read('Payroll:Salaries')]}, {'answer': 'It is 98765 kroner.'}])
        d = self.person_daemon(llm)
        bob = {USER: 'Bob'}
        b = d.browser()
        r = b.post(API + '/query', {'question': 'Where is the salary?'}, headers=bob, timeout=60)
        first = self.check_record_as(b, r, bob)
        self.assertEqual([s['title'] for s in first['sources']], ['Payroll:Salaries'])

        def follow(rec_id, answer='It is still 98765 kroner.'):
            llm.set_script([{'answer': answer}])
            r = b.post(API + '/query', {'question': 'Say it again?', 'follow_up': rec_id}, headers=bob, timeout=60)
            self.assertStatus(r, 200)
            self.assertEqual(r.json['sources'], [])
            return r.json['id']

        second = follow(first['id'])
        # A file of the follow-up (its run_python would write it from the
        # conversation), put into the store as the sandbox would.
        data = b'salary\n98765\n'
        aid = 'af_' + 'c' * 32
        db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
        with db:
            db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                       ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                       (aid, second, 'salary.csv', 'text/csv', len(data), hashlib.sha256(data).hexdigest(), data))
        db.close()
        alice = d.browser()

        def shown_to_alice(token):
            for path in ('', '/export', '/artifacts/' + aid):
                r = alice.get(f'{API}/shared/{token}{path}', headers={USER: 'Alice'})
                self.assertStatus(r, 404)
                self.assertError(r, 'not_found')
                self.assertNotIn(b'98765', r.body)

        token = b.post(f'{API}/history/{second}/share', headers=bob).json['token']
        shown_to_alice(token)
        self.assertStatus(b.delete(f'{API}/history/{first["id"]}', headers=bob), 204)
        shown_to_alice(token)
        token2 = b.post(f'{API}/history/{second}/share', headers=bob).json['token']
        shown_to_alice(token2)
        # Bob, who may read it, still sees the turn and its file.
        self.assertStatus(b.get(f'{API}/shared/{token2}', headers=bob), 200)
        r = b.get(f'{API}/shared/{token2}/artifacts/{aid}', headers=bob)
        self.assertStatus(r, 200)
        self.assertEqual(r.body, data)

        # A chain longer than the turns read back (100).
        last = second
        for _ in range(101):
            last = follow(last, 'Again.')
        token3 = b.post(f'{API}/history/{last}/share', headers=bob).json['token']
        shown_to_alice(token3)
        self.assertStatus(b.get(f'{API}/shared/{token3}', headers=bob), 200)

    def test_follow_up_after_lost_access(self):
        """A follow-up is checked like a read (API.md 7): Bob, in the
        group, asks from a restricted page and follows up (the model is
        given the earlier turn); then he leaves the group and follows up
        on his own records: the turns that read the page, and the one
        given it, are left out of what the model receives, and the new
        record's notes say so, naming no page."""
        w = wiki()
        w.set_groups('Bob', ['payroll'])
        self.addCleanup(w.set_groups, 'Bob', [])
        llm = self.llm([{'tool_calls': [read('Payroll:Salaries')]}, {'answer': 'It is 98765 kroner.'}])
        d = self.person_daemon(llm)
        bob = {USER: 'Bob'}
        b = d.browser()
        r = b.post(API + '/query', {'question': 'Where is the salary?'}, headers=bob, timeout=60)
        first = self.check_record_as(b, r, bob)
        self.assertEqual(first['notes'], [])

        def follow(rec_id):
            llm.set_script([{'answer': 'I cannot say.'}])
            r = b.post(API + '/query', {'question': 'Say it again?', 'follow_up': rec_id}, headers=bob, timeout=60)
            return self.check_record_as(b, r, bob)

        # Still in the group: the earlier turn is given, nothing noted.
        second = follow(first['id'])
        self.assertEqual(second['notes'], [])
        self.assertIn('98765', json.dumps(llm.chat_requests()))

        w.set_groups('Bob', [])
        third = follow(first['id'])
        self.assertClean(llm)
        self.assertEqual(third['follow_up'], first['id'])
        self.assertEqual(len(third['notes']), 1, third)
        self.assertIn('1 earlier turn', third['notes'][0])
        self.assertIn('left out', third['notes'][0])
        self.assertNotIn('Payroll', third['notes'][0])
        # The turn given the restricted one is left out with it.
        fourth = follow(second['id'])
        self.assertClean(llm)
        self.assertIn('2 earlier turns', fourth['notes'][0])
        self.assertEqual(b.get(API + '/history/' + fourth['id'], headers=bob).json['notes'], fourth['notes'])
        # A check that cannot be made refuses the follow-up before admission.
        self.addCleanup(w.set_switch, 'readcheck-revoked', False)
        w.set_switch('readcheck-revoked', True)
        llm.set_script([{'answer': 'never'}])
        n = len(b.get(API + '/history', headers=bob).json['items'])
        r = b.post(API + '/query', {'question': 'Again?', 'follow_up': first['id']}, headers=bob, timeout=60)
        self.assertStatus(r, 403)
        self.assertError(r, 'wiki_auth_failed')
        self.assertIn('WIKI_WEB_WIKI_READ_AS', r.json['error']['message'])
        self.assertEqual(llm.chat_requests(), [])
        self.assertEqual(len(b.get(API + '/history', headers=bob).json['items']), n)

    def test_unanswered_report(self):
        """The unanswered report (API.md 9.2) shows an editor only the
        pages they may read, as the wiki says when they read the report:
        Bob, in the group, asks a question whose answer cites nothing after
        reading a restricted page and a public one. Eve, an editor outside
        the group, sees the public page only, in JSON and CSV; Bob, an
        editor too, sees both until he leaves the group. The check fails
        closed, as a query's does."""
        w = wiki()
        w.set_groups('Bob', ['payroll'])
        self.addCleanup(w.set_groups, 'Bob', [])
        llm = self.llm([{'tool_calls': [read('Payroll:Salaries'), read('Apple')]},
                        {'answer': 'Nobody knows.'}])
        d = self.person_daemon(llm, WIKI_WEB_EDITORS='Eve,Bob')
        b, r, _ = self.ask_as(d, 'Bob', llm, question='Where is the salary?', pages=None)
        rec = self.check_record_as(b, r, {USER: 'Bob'})
        self.assertEqual([s['title'] for s in rec['sources']], ['Payroll:Salaries', 'Apple'])
        withheld0 = samples(scrape(d)[2])['wikiweb_wiki_pages_withheld_total{from="report"}']

        def report(user, query=''):
            r = d.browser().get(API + '/reports/unanswered' + query, headers={USER: user})
            self.assertStatus(r, 200)
            return r

        def pages(user):
            groups = report(user).json['groups']
            self.assertEqual([g['question'] for g in groups], ['Where is the salary?'])
            return [p['title'] for p in groups[0]['pages']]

        self.assertEqual(pages('Eve'), ['Apple'])
        csv = report('Eve', '?format=csv').body.decode()
        self.assertIn('Apple (1)', csv)
        self.assertNotIn('Payroll', csv)
        self.assertEqual(sorted(pages('Bob')), ['Apple', 'Payroll:Salaries'])
        w.set_groups('Bob', [])
        self.assertEqual(pages('Bob'), ['Apple'])
        withheld = samples(scrape(d)[2])['wikiweb_wiki_pages_withheld_total{from="report"}']
        self.assertEqual(withheld - withheld0, 3)
        # The journal counts them, never names them.
        self.assertIn('pages withheld from the editor reading it: 1', d.log())
        self.assertNotIn('Payroll:Salaries', d.log())
        # Fail closed: no report while the wiki cannot answer the check.
        w.set_switch('readcheck-unloaded', True)
        try:
            r = d.browser().get(API + '/reports/unanswered', headers={USER: 'Eve'})
            self.assertStatus(r, 403)
            self.assertError(r, 'wiki_auth_failed')
            self.assertIn('WikiwebReadCheck', r.json['error']['message'])
            self.assertNotIn(b'Payroll', r.body)
        finally:
            w.set_switch('readcheck-unloaded', False)

    def test_report_search_counts(self):
        """A search's result count in the unanswered report is what it
        found for the person who asked: Bob, in the group, finds the
        restricted hits too. Neither Eve, an editor outside the group, nor
        Bob reading the report is shown that count (null): the reader's own
        is not known without searching again."""
        w = wiki()
        w.set_groups('Bob', ['payroll'])
        self.addCleanup(w.set_groups, 'Bob', [])
        llm = self.llm([{'tool_calls': [{'name': 'wiki_search',
                                         'arguments': {'query': 'zanzibarquokka', 'limit': 5}}]},
                        {'answer': 'Nobody knows.'}])
        d = self.person_daemon(llm, WIKI_WEB_EDITORS='Eve,Bob')
        b, r, _ = self.ask_as(d, 'Bob', llm, question='Where is the quokka?', pages=None)
        self.check_record_as(b, r, {USER: 'Bob'})
        found = tool_results(llm.chat_requests()[1])[-1]['results']
        self.assertGreaterEqual(len(found), 2, found)
        for user in ('Eve', 'Bob'):
            with self.subTest(user=user):
                r = d.browser().get(API + '/reports/unanswered', headers={USER: user})
                self.assertStatus(r, 200)
                groups = [g for g in r.json['groups'] if g['question'] == 'Where is the quokka?']
                self.assertEqual(len(groups), 1, r.json)
                self.assertEqual(groups[0]['searches'],
                                 [{'query': 'zanzibarquokka', 'results': None, 'count': 1}])

    def test_service_mode(self):
        """Today's behaviour, and the fault fixed in every mode: a page the
        service account may not read is a tool result, not a failed query."""
        llm = self.llm([{'tool_calls': [read('Vault/Keys'), read('No such page at all')]},
                        {'answer': 'Nothing.'}])
        # Trusted proxies and the mode left to its default: a warning names it.
        d = self.pipeline_daemon(llm, wiki(), bot=True, WIKI_WEB_TRUSTED_PROXIES='127.0.0.2/32',
                                 WIKI_WEB_REQUIRE_USER='false')
        self.assertIn('WIKI_WEB_WIKI_READ_AS is not', d.log())
        b, r = self.ask(d, question='What is in the vault?')
        rec = self.check_record(d, b, r)
        results = tool_results(llm.chat_requests()[1])
        self.assertEqual(results[0], results[1])
        self.assertEqual(rec['sources'], [])
        self.assertNotIn('quetzalvault', json.dumps(llm.chat_requests()))
        h = d.browser().get(API + '/health').json
        self.assertEqual(h['wiki_read_as'], 'service')
        self.assertNotIn('wiki_read_check', h)
        # --check-config: the mode shown, and an invalid one named.
        env = dict(os.environ, WIKI_WEB_WIKI_READ_AS='person')
        p = subprocess.run([harness.WIKIWEBD, '--check-config'], env=env, capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_WIKI_READ_AS=person', p.stdout.splitlines())
        env['WIKI_WEB_WIKI_READ_AS'] = 'Person'
        p = subprocess.run([harness.WIKIWEBD, '--check-config'], env=env, capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p)
        self.assertIn('WIKI_WEB_WIKI_READ_AS', p.stderr)

    def test_titles_that_are_no_pages(self):
        """In person mode too, another wiki's title, special pages and
        Media: are the missing page's tool result, and the query answers."""
        odd = ['wikipedia:Payroll 2026', 'Special:AllPages', 'Special:Export/Apple', 'Special:Redirect/page/1',
               'Media:Foo.png']
        llm = self.llm([{'tool_calls': [read(t) for t in odd + ['No such page at all']]},
                        {'answer': 'Nothing.'}])
        d = self.person_daemon(llm)
        b, r, headers = self.ask_as(d, 'Alice', llm, question='What is on the special pages?', pages=None)
        rec = self.check_record_as(b, r, headers)
        results = tool_results(llm.chat_requests()[1])
        self.assertEqual(results, [results[-1]] * len(results), results)
        self.assertEqual(rec['sources'], [])

    def test_extension_api(self):
        """The extension's answers, asked directly: a named user, an unknown
        user, no user, and a caller without the right."""
        w = wiki()
        jar = http.cookiejar.CookieJar()
        op = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

        def api(post=False, **p):
            p.update(format='json', formatversion='2')
            data = urllib.parse.urlencode(p)
            r = op.open(w.api_url, data.encode()) if post else op.open(w.api_url + '?' + data)
            return r.headers.get('MediaWiki-API-Error'), json.load(r)

        titles = 'Apple|Payroll:Salaries|Salary table|HR/Case 17|Special:Version|Vault/Keys'
        code, body = api(action='wikiwebreadcheck', user='Alice', titles=titles)
        self.assertEqual(code, 'permissiondenied')  # an anonymous caller lacks the right
        tok = api(action='query', meta='tokens', type='login')[1]['query']['tokens']['logintoken']
        login = api(True, action='login', lgname=w.bot_user, lgpassword=w.bot_password, lgtoken=tok)[1]
        self.assertEqual(login['login']['result'], 'Success')
        w.set_groups('Bob', ['payroll'])
        expect = {
            'Alice': [True, False, False, False, False, False],
            'bob': [True, True, True, True, False, False],
            'Nobody Registered': [True, False, False, False, False, False],
            '': [True, False, False, False, False, False],
            'Admin': [True, False, False, False, False, True],
        }
        for user, readable in expect.items():
            code, body = api(action='wikiwebreadcheck', user=user, titles=titles)
            self.assertIsNone(code, body)
            rc = body['wikiwebreadcheck']
            self.assertEqual([p['readable'] for p in rc['pages']], readable, (user, rc))
            self.assertEqual([p['title'] for p in rc['pages']], titles.split('|'))
            self.assertEqual(rc['anonymous'], user in ('', 'Nobody Registered'))
            self.assertNotIn('email', rc)
        self.assertEqual(rc['pages'][2]['target'], 'Payroll:Salaries')
        # By address: one confirmed holder, none, or several (never named).
        self.addCleanup(w.set_email, 'Carol', None)
        self.addCleanup(w.set_email, 'Dave', None)
        self.addCleanup(w.set_email, 'Bob', None)
        w.set_email('Bob', 'bob@Corp.Example')
        w.set_email('Carol', 'two@corp.example')
        w.set_email('Dave', 'two@corp.example')
        w.set_email('Alice', 'half@corp.example', confirmed=False)
        self.addCleanup(w.set_email, 'Alice', None)
        for email, user, accounts, readable in (
                ('bob@corp.EXAMPLE', 'Bob', 'one', [True, True, True, True, False, False]),
                ('Bob@corp.example', '', 'none', expect['']),
                ('half@corp.example', '', 'none', expect['']),
                ('b_b@corp.example', '', 'none', expect['']),
                ('two@corp.example', '', 'several', [False] * 6),
                ('not an address', '', 'none', expect[''])):
            code, body = api(action='wikiwebreadcheck', email=email, titles=titles)
            self.assertIsNone(code, body)
            rc = body['wikiwebreadcheck']
            self.assertEqual((rc['user'], rc['anonymous'], rc['email']), (user, not user, accounts), email)
            self.assertEqual([p['readable'] for p in rc['pages']], readable, (email, rc))
            self.assertNotIn('Carol', json.dumps(body))
        code, _ = api(action='wikiwebreadcheck', user='Bob', email='bob@corp.example', titles='Apple')
        self.assertEqual(code, 'invalidparammix')
        code, _ = api(action='wikiwebreadcheck', user='Alice', titles='|'.join('T%d' % i for i in range(51)))
        self.assertEqual(code, 'toomanyvalues')
        w.set_groups('Bob', [])


if __name__ == '__main__':
    try:
        harness.main()
    finally:
        if _WIKI:
            _WIKI.stop()
