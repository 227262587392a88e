#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md sections 5 and 6: the queue endpoints, driven over HTTP."""

import time

import harness
from harness import check_status_object, parse_time


class Queue(harness.DaemonTestCase):

    def test_status_without_ticket_defaults(self):
        d = self.daemon()
        b = d.browser()
        r = b.status()
        self.assertStatus(r, 200)
        s = check_status_object(r.json)
        self.assertEqual(s, {
            'state': 'idle', 'queue_length': 0, 'max_length': 100, 'ticket': None,
            'estimated_wait_seconds': 0, 'average_query_seconds': None,
            'reservation_seconds': 60, 'heartbeat_seconds': 30, 'poll_after_seconds': 10,
            'running_query': None, 'user': None,
            'slots': {'total': 1, 'idle': 1, 'reserved': 0, 'running': 0},
        })
        # A status call never creates a ticket.
        self.assertIsNone(b.status().json['ticket'])

    def test_slots_reserved_in_fifo_order(self):
        # API.md 5 with WIKI_WEB_QUEUE_SLOTS=3: the first three tickets each
        # get a slot at once, the fourth waits at position 1; a reserved
        # ticket leaving gives its slot to the first waiting one.
        d = self.daemon(WIKI_WEB_QUEUE_SLOTS=3)
        h = d.browser().get(harness.API + '/health').json
        self.assertEqual(h['slots'], {'total': 3, 'idle': 3, 'reserved': 0, 'running': 0})
        bs = [d.browser() for _ in range(4)]
        for i, b in enumerate(bs):
            s = check_status_object(b.join().json)
            self.assertEqual(s['queue_length'], i + 1)
        for b in bs[:3]:
            s = check_status_object(b.status().json)
            self.assertEqual((s['ticket']['status'], s['ticket']['position']), ('reserved', 0))
        s = check_status_object(bs[3].status().json)
        self.assertEqual((s['ticket']['status'], s['ticket']['position']), ('waiting', 1))
        self.assertEqual((s['state'], s['slots']), ('reserved', {'total': 3, 'idle': 0, 'reserved': 3, 'running': 0}))
        # Before any query finished the wait is unknown.
        self.assertIsNone(s['estimated_wait_seconds'])
        self.assertStatus(bs[1].leave(), 204)
        s = check_status_object(bs[3].status().json)
        self.assertEqual((s['ticket']['status'], s['ticket']['position']), ('reserved', 0))
        self.assertEqual(s['slots'], {'total': 3, 'idle': 0, 'reserved': 3, 'running': 0})
        self.assertStatus(bs[0].leave(), 204)
        s = check_status_object(bs[2].status().json)
        self.assertEqual(s['slots'], {'total': 3, 'idle': 1, 'reserved': 2, 'running': 0})
        h = d.browser().get(harness.API + '/health').json
        self.assertEqual(h['slots'], s['slots'])

    def test_settings_and_poll_after(self):
        for hb, poll in [(1, 1), (2, 1), (3, 1), (7, 2), (30, 10), (3600, 1200)]:
            d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=hb, WIKI_WEB_QUEUE_RESERVATION_SECONDS=9,
                            WIKI_WEB_QUEUE_MAX_LENGTH=5)
            s = check_status_object(d.browser().status().json)
            self.assertEqual((s['heartbeat_seconds'], s['poll_after_seconds']), (hb, poll))
            self.assertEqual((s['reservation_seconds'], s['max_length']), (9, 5))
            d.stop()

    def test_join_created_then_existing(self):
        d = self.daemon(WIKI_WEB_QUEUE_RESERVATION_SECONDS=60, WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=30)
        b = d.browser()
        now = time.time()
        r = b.join()
        self.assertStatus(r, 201)
        s = check_status_object(r.json, now)
        t = s['ticket']
        self.assertEqual((s['state'], s['queue_length']), ('reserved', 1))
        self.assertEqual((t['status'], t['position']), ('reserved', 0))
        self.assertEqual(s['estimated_wait_seconds'], 0)
        self.assertAlmostEqual(parse_time(t['joined_at']), now, delta=1.0)
        self.assertAlmostEqual(parse_time(t['heartbeat_expires_at']), now + 30, delta=1.0)
        self.assertAlmostEqual(parse_time(t['reservation_expires_at']), now + 60, delta=1.0)
        self.assertNotIn(b.cookie, t['id'])
        r = b.join()
        self.assertStatus(r, 200)
        s2 = check_status_object(r.json)
        self.assertEqual(s2['ticket']['id'], t['id'])
        self.assertEqual(s2['ticket']['joined_at'], t['joined_at'])
        self.assertEqual(s2['queue_length'], 1)
        # The status call sees the same ticket.
        s3 = check_status_object(b.status().json)
        self.assertEqual(s3['ticket']['id'], t['id'])

    def test_join_without_cookie_then_with_it(self):
        d = self.daemon()
        b = d.browser()
        self.assertIsNone(b.cookie)
        r = b.join()
        self.assertStatus(r, 201)
        self.assertIsNotNone(b.cookie)
        tid = r.json['ticket']['id']
        r = b.status()
        self.assertEqual(r.set_cookies(), [])
        self.assertEqual(r.json['ticket']['id'], tid)

    def test_positions_across_three_sessions(self):
        d = self.daemon()
        a, b, c = d.browser(), d.browser(), d.browser()
        ra, rb, rc = a.join(), b.join(), c.join()
        for r in (ra, rb, rc):
            self.assertStatus(r, 201)
        ids = {r.json['ticket']['id'] for r in (ra, rb, rc)}
        self.assertEqual(len(ids), 3)
        sa, sb, sc = (check_status_object(x.status().json) for x in (a, b, c))
        self.assertEqual([(s['ticket']['status'], s['ticket']['position']) for s in (sa, sb, sc)],
                         [('reserved', 0), ('waiting', 1), ('waiting', 2)])
        for s in (sa, sb, sc):
            self.assertEqual((s['state'], s['queue_length']), ('reserved', 3))
        self.assertIsNone(sb['ticket']['reservation_expires_at'])
        # No finished query yet: no estimate for waiting tickets or for others.
        self.assertEqual(sa['estimated_wait_seconds'], 0)
        self.assertIsNone(sb['estimated_wait_seconds'])
        self.assertIsNone(sc['estimated_wait_seconds'])
        self.assertIsNone(self.peek(d)['estimated_wait_seconds'])
        # join response positions, too
        self.assertEqual([r.json['ticket']['position'] for r in (ra, rb, rc)], [0, 1, 2])

    def test_leave_and_promotion(self):
        d = self.daemon(WIKI_WEB_QUEUE_RESERVATION_SECONDS=60)
        a, b, c, e = d.browser(), d.browser(), d.browser(), d.browser()
        for x in (a, b, c, e):
            self.assertStatus(x.join(), 201)
        # A waiting ticket leaves: those behind it move up.
        r = c.leave()
        self.assertStatus(r, 204)
        self.assertEqual(r.body, b'')
        self.assertIsNone(c.status().json['ticket'])
        self.assertEqual(check_status_object(e.status().json)['ticket']['position'], 2)
        # The reserved ticket leaves: the next one is promoted at once.
        now = time.time()
        self.assertStatus(a.leave(), 204)
        sb = check_status_object(b.status().json, now)
        self.assertEqual((sb['ticket']['status'], sb['ticket']['position']), ('reserved', 0))
        self.assertAlmostEqual(parse_time(sb['ticket']['reservation_expires_at']), now + 60, delta=1.0)
        self.assertEqual(sb['queue_length'], 2)
        se = check_status_object(e.status().json)
        self.assertEqual((se['ticket']['status'], se['ticket']['position']), ('waiting', 1))
        # Leaving twice, or without a ticket at all.
        r = a.leave()
        self.assertError(r, 'ticket_not_found')
        r = d.browser().leave()
        self.assertError(r, 'ticket_not_found')
        self.assertStatus(b.leave(), 204)
        self.assertStatus(e.leave(), 204)
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length']), ('idle', 0))
        # After leaving, a join creates a new ticket.
        r = a.join()
        self.assertStatus(r, 201)

    def test_queue_full(self):
        d = self.daemon(WIKI_WEB_QUEUE_MAX_LENGTH=2, WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=7)
        a, b, c = d.browser(), d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        r = c.join()
        self.assertError(r, 'queue_full')
        # No estimate exists yet: Retry-After is the heartbeat interval.
        self.assertEqual(r.header('Retry-After'), '7')
        s = check_status_object(c.status().json)
        self.assertIsNone(s['ticket'])
        self.assertEqual((s['queue_length'], s['max_length']), (2, 2))
        # Holders re-joining while full get their ticket back.
        self.assertStatus(a.join(), 200)
        self.assertStatus(b.join(), 200)
        self.assertStatus(b.leave(), 204)
        self.assertStatus(c.join(), 201)
        self.assertError(b.join(), 'queue_full')

    def test_queue_full_zero(self):
        d = self.daemon(WIKI_WEB_QUEUE_MAX_LENGTH=0)
        r = d.browser().join()
        self.assertError(r, 'queue_full')
        self.assertEqual(self.queue_length(d), 0)

    def test_heartbeat_refreshed_by_status_and_join(self):
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=30)
        a, b = d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        t0 = b.status().json['ticket']
        time.sleep(1.1)
        t1 = b.status().json['ticket']
        self.assertGreaterEqual(parse_time(t1['heartbeat_expires_at']) -
                                parse_time(t0['heartbeat_expires_at']), 1.0)
        self.assertEqual(t1['joined_at'], t0['joined_at'])
        time.sleep(0.5)
        t2 = b.join().json['ticket']
        self.assertGreaterEqual(parse_time(t2['heartbeat_expires_at']) -
                                parse_time(t1['heartbeat_expires_at']), 0.5)
        # A heartbeat does not extend a reservation.
        ra0 = a.status().json['ticket']['reservation_expires_at']
        time.sleep(0.2)
        self.assertEqual(a.status().json['ticket']['reservation_expires_at'], ra0)
        self.assertEqual(a.join().json['ticket']['reservation_expires_at'], ra0)

    def test_many_sessions_fifo(self):
        d = self.daemon(WIKI_WEB_QUEUE_MAX_LENGTH=50)
        browsers = [d.browser() for _ in range(50)]
        for i, x in enumerate(browsers):
            r = x.join()
            self.assertStatus(r, 201)
            self.assertEqual(r.json['ticket']['position'], i)
        self.assertError(d.browser().join(), 'queue_full')
        # Remove every other waiting ticket; positions stay dense and FIFO.
        for x in browsers[1::2]:
            self.assertStatus(x.leave(), 204)
        for i, x in enumerate(browsers[0::2]):
            s = check_status_object(x.status().json)
            self.assertEqual(s['ticket']['position'], i)
            self.assertEqual(s['queue_length'], 25)


if __name__ == '__main__':
    harness.main()
