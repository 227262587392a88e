#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md section 7 (POST /api/v1/query): validation limits and the claim.

Query execution is not configured in these tests, so a request that passes
validation and admission ends as 500 execution_failed with a
Wikiweb-Query-Id header: that is how a test sees "accepted"."""

import json

import harness


class Query(harness.DaemonTestCase):

    def accepted(self, d, b, body, **kw):
        """Post a body that must pass validation; the controller is idle, so
        it is claimed and fails in execution. Waits for idle again."""
        if isinstance(body, dict):
            body = json.dumps(body, ensure_ascii=False).encode()
        r = b.query(body=body, **kw)
        self.assertError(r, 'execution_failed')
        qid = r.header('Wikiweb-Query-Id')
        self.assertIsNotNone(qid, r)
        self.assertRegex(qid, harness.QUERY_ID_RE)
        self.wait_state(d, 'idle')
        return qid

    def rejected(self, b, body, **kw):
        if isinstance(body, dict):
            body = json.dumps(body, ensure_ascii=False).encode()
        r = b.query(body=body, **kw)
        self.assertEqual(r.status, 400, f'{body[:80]!r}: {r!r}')
        self.assertError(r, 'invalid_input')
        self.assertIsNone(r.header('Wikiweb-Query-Id'), r)

    def test_question_length_limits(self):
        d = self.daemon()
        b = d.browser()
        ids = set()
        ids.add(self.accepted(d, b, {'question': 'q'}))
        ids.add(self.accepted(d, b, {'question': 'x' * 4000}))
        ids.add(self.accepted(d, b, {'question': ' \t\n' + 'x' * 4000 + ' \n\t '}))
        # Characters, not bytes: 4000 two-byte and four-byte characters.
        ids.add(self.accepted(d, b, {'question': '\u00e9' * 4000}))
        ids.add(self.accepted(d, b, {'question': '\U0001F34E' * 4000}))
        ids.add(self.accepted(d, b, {'question': 'caf\u00e9 \u2013 \u00fcber'}))
        self.assertEqual(len(ids), 6, 'query ids are unique')
        self.rejected(b, {'question': 'x' * 4001})
        self.rejected(b, {'question': '\u00e9' * 4001})
        self.rejected(b, {'question': ''})
        self.rejected(b, {'question': '   '})
        self.rejected(b, {'question': '\t\r\n '})
        s = self.peek(d)
        self.assertEqual(s['queue_length'], 0)

    def test_pages_limits(self):
        d = self.daemon()
        b = d.browser()
        self.accepted(d, b, {'question': 'q', 'pages': []})
        self.accepted(d, b, {'question': 'q', 'pages': ['Apple']})
        self.accepted(d, b, {'question': 'q', 'pages': [f'Page {i}' for i in range(20)]})
        self.accepted(d, b, {'question': 'q', 'pages': ['a' * 255]})
        self.accepted(d, b, {'question': 'q', 'pages': ['\u00e9' * 127 + 'a']})  # 255 bytes
        self.rejected(b, {'question': 'q', 'pages': [f'Page {i}' for i in range(21)]})
        self.rejected(b, {'question': 'q', 'pages': ['a' * 256]})
        self.rejected(b, {'question': 'q', 'pages': ['\u00e9' * 128]})  # 128 chars, 256 bytes
        self.rejected(b, {'question': 'q', 'pages': ['']})
        self.rejected(b, {'question': 'q', 'pages': ['A', 2]})
        self.rejected(b, {'question': 'q', 'pages': [['A']]})
        self.rejected(b, {'question': 'q', 'pages': 'A'})

    def test_execution_failed_envelope(self):
        d = self.daemon()
        b = d.browser()
        r = b.query()
        self.assertStatus(r, 500)
        self.assertError(r, 'execution_failed')
        self.assertRegex(r.header('Wikiweb-Query-Id') or '', harness.QUERY_ID_RE)
        # The query id is not the session token nor derived from the ticket.
        self.assertNotIn(b.cookie, r.header('Wikiweb-Query-Id'))

    def test_implicit_claim_when_idle(self):
        d = self.daemon()
        b = d.browser()
        s = self.peek(d)
        self.assertIsNone(s['average_query_seconds'])
        r = b.query()
        self.assertError(r, 'execution_failed')
        s = self.wait_state(d, 'idle')
        self.assertEqual(s['queue_length'], 0)
        self.assertTrue(harness.is_number(s['average_query_seconds']), s)
        self.assertIsNone(b.status().json['ticket'])
        # Another implicit claim right after works as well.
        r = b.query()
        self.assertError(r, 'execution_failed')

    def test_claim_when_reserved_for_you(self):
        d = self.daemon()
        a, b = d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        r = a.query()
        self.assertError(r, 'execution_failed')
        self.assertRegex(r.header('Wikiweb-Query-Id') or '', harness.QUERY_ID_RE)
        # The claim removed a's ticket; the finish promoted b.
        self.assertIsNone(a.status().json['ticket'])
        s = self.wait_ticket(b, 'reserved')
        self.assertEqual(s['queue_length'], 1)
        r = b.query()
        self.assertError(r, 'execution_failed')
        s = self.wait_state(d, 'idle')
        self.assertEqual(s['queue_length'], 0)

    def test_busy_keeps_waiting_ticket(self):
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=7)
        a, b, c = d.browser(), d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        r = b.query()
        self.assertError(r, 'busy')
        # No estimate yet (no finished query): Retry-After is the heartbeat interval.
        self.assertEqual(r.header('Retry-After'), '7')
        t = b.status().json['ticket']
        self.assertEqual((t['status'], t['position']), ('waiting', 1))
        r = c.query()
        self.assertError(r, 'busy')
        self.assertIsNone(c.status().json['ticket'], 'busy must not create a ticket')
        self.assertEqual(self.queue_length(d), 2)

    def test_queue_full_with_max_length_zero(self):
        d = self.daemon(WIKI_WEB_QUEUE_MAX_LENGTH=0, WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=5)
        b = d.browser()
        r = b.query()
        self.assertError(r, 'queue_full')  # with Retry-After >= 1 (checked by the harness)
        self.assertIsNone(r.header('Wikiweb-Query-Id'))
        r = b.join()
        self.assertError(r, 'queue_full')
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length'], s['max_length'], s['average_query_seconds']),
                         ('idle', 0, 0, None))

    def test_estimates_after_a_finished_query(self):
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=30)
        a, b, c = d.browser(), d.browser(), d.browser()
        self.assertError(a.query(), 'execution_failed')
        s = self.wait_state(d, 'idle')
        avg = s['average_query_seconds']
        self.assertTrue(harness.is_number(avg), s)
        self.assertEqual(s['estimated_wait_seconds'], 0)  # idle, no ticket
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        self.assertStatus(c.join(), 201)
        sa, sb, sc = (harness.check_status_object(x.status().json) for x in (a, b, c))
        self.assertEqual(sa['estimated_wait_seconds'], 0)
        # reserved for someone else: base = avg; estimate = base + (p - 1) * avg
        self.assertAlmostEqual(sb['estimated_wait_seconds'], avg, delta=0.0025)
        self.assertAlmostEqual(sc['estimated_wait_seconds'], 2 * avg, delta=0.0025)
        # A caller without a ticket: position waiting + 1 = 3.
        s = self.peek(d)
        self.assertAlmostEqual(s['estimated_wait_seconds'], 3 * avg, delta=0.0025)
        if 3 * avg < 0.5:
            r = d.browser().query()
            self.assertError(r, 'busy')
            self.assertEqual(r.header('Retry-After'), '1')
        # The second sample enters the EMA: avg2 = 0.2 d + 0.8 avg.
        self.assertError(a.query(), 'execution_failed')
        s = self.wait_ticket(b, 'reserved')
        self.assertTrue(harness.is_number(s['average_query_seconds']), s)


if __name__ == '__main__':
    harness.main()
