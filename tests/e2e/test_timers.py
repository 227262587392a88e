#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md section 5, expiry: driven by real timers, with 1-2 second settings.

"Expiry is driven by timers, not by the next request." These tests let the
deadlines pass while no request at all reaches the daemon, and only then
look. A promotion's time is visible afterwards: the promoted ticket's
reservation_expires_at is promotion time + RESERVATION_SECONDS. So a ticket
promoted by a timer shows a promotion time at the previous holder's
deadline, whereas one promoted lazily by the next request would show the
time of that request (which the tests put well after the deadline)."""

import time

import harness
from harness import check_status_object, parse_time

# How late a timer may fire (sd-event's default accuracy is 250 ms) plus
# scheduling noise; the late request comes after this.
LATE = 0.4


def sleep_until(t):
    """Sleep until wall-clock time t (epoch seconds)."""
    while True:
        left = t - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


class Timers(harness.DaemonTestCase):

    def assertPromotedAt(self, status, deadline, res):
        """status: the promoted holder's status object. Its promotion time
        (reservation_expires_at - RES) must be at `deadline`, give or take
        a late timer."""
        t = status['ticket']
        self.assertEqual((t['status'], t['position']), ('reserved', 0), status)
        promoted = parse_time(t['reservation_expires_at']) - res
        self.assertGreaterEqual(promoted, deadline - 0.05, status)
        self.assertLess(promoted, deadline + LATE, f'promoted {promoted - deadline:.3f} s after the '
                        f'deadline: by the next request, not by a timer? {status}')

    def test_waiting_tickets_expire_without_requests(self):
        """HEARTBEAT=1: tickets whose holders stop polling are gone after
        ~1 s; nothing but the timer happened in between."""
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=1, WIKI_WEB_QUEUE_RESERVATION_SECONDS=2)
        a, b, c = d.browser(), d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        sb = b.join().json
        self.assertEqual(sb['ticket']['status'], 'waiting')
        self.assertStatus(c.join(), 201)
        last_hb = max(parse_time(x.status().json['ticket']['heartbeat_expires_at']) for x in (a, b, c))
        sleep_until(last_hb + LATE + 0.2)  # no request at all meanwhile
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length']), ('idle', 0), s)
        for x in (a, b, c):
            self.assertIsNone(x.status().json['ticket'])
        # They can join again, as new tickets.
        r = b.join()
        self.assertStatus(r, 201)
        self.assertNotEqual(r.json['ticket']['id'], sb['ticket']['id'])

    def test_waiting_ticket_expires_while_others_poll(self):
        """Only the silent waiting ticket goes; the queue closes up behind it."""
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=1, WIKI_WEB_QUEUE_RESERVATION_SECONDS=2)
        a, b, c = d.browser(), d.browser(), d.browser()
        for x in (a, b, c):
            self.assertStatus(x.join(), 201)
        b_hb = parse_time(b.status().json['ticket']['heartbeat_expires_at'])
        while time.time() < b_hb + LATE:
            for x in (a, c):  # b stays silent
                x.status()
            time.sleep(0.2)
        sa, sc = check_status_object(a.status().json), check_status_object(c.status().json)
        self.assertEqual(sa['queue_length'], 2, sa)
        self.assertEqual(sa['ticket']['status'], 'reserved')
        self.assertEqual(sc['ticket']['position'], 1, sc)
        self.assertIsNone(b.status().json['ticket'])

    def test_reserved_ticket_heartbeat_expiry_promotes_next(self):
        """HEARTBEAT=2 < RESERVATION=3: the silent holder of the reservation is
        removed at its heartbeat deadline and the next ticket is promoted
        at that moment, with no request around it."""
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=2, WIKI_WEB_QUEUE_RESERVATION_SECONDS=3)
        a, b = d.browser(), d.browser()
        ta = a.join().json['ticket']
        self.assertEqual(ta['status'], 'reserved')
        a_hb = parse_time(ta['heartbeat_expires_at'])
        time.sleep(1.0)
        tb = b.join().json['ticket']
        self.assertEqual(tb['status'], 'waiting')
        b_hb = parse_time(tb['heartbeat_expires_at'])
        self.assertGreater(b_hb, a_hb + LATE + 0.3)
        # Silence from before a's deadline until well after it (b is still alive).
        check_at = min(a_hb + 2 * LATE, b_hb - 0.15)
        sleep_until(check_at)
        sb = check_status_object(b.status().json)
        self.assertAlmostEqual(time.time(), check_at, delta=0.3)
        self.assertPromotedAt(sb, a_hb, 3)
        self.assertEqual(sb['queue_length'], 1)
        self.assertIsNone(a.status().json['ticket'])

    def test_reservation_expires_while_holder_heartbeats(self):
        """HEARTBEAT=1, RESERVATION=2: the holder keeps polling but never
        claims; its reservation ends after 2 s and the next ticket is
        promoted by the timer (the last poll is before the deadline, the
        next request well after it)."""
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=1, WIKI_WEB_QUEUE_RESERVATION_SECONDS=2)
        a, b = d.browser(), d.browser()
        ta = a.join().json['ticket']
        self.assertStatus(b.join(), 201)
        res_a = parse_time(ta['reservation_expires_at'])
        while time.time() < res_a - 0.25:
            for x in (a, b):
                s = check_status_object(x.status().json)
                self.assertIsNotNone(s['ticket'], s)
            # Heartbeats never extend the reservation.
            self.assertEqual(a.last.json['ticket']['reservation_expires_at'], ta['reservation_expires_at'])
            time.sleep(0.2)
        last_b_hb = parse_time(b.last.json['ticket']['heartbeat_expires_at'])
        check_at = min(res_a + LATE + 0.2, last_b_hb - 0.1)
        sleep_until(check_at)
        sb = check_status_object(b.status().json)
        self.assertPromotedAt(sb, res_a, 2)
        # a lost its reservation: no ticket, and its query is now busy.
        self.assertIsNone(a.status().json['ticket'])
        self.assertError(a.query(), 'busy')
        # b holds it and can claim it.
        self.assertError(b.query(), 'execution_failed')

    def test_reservation_expiry_cascades_without_requests(self):
        """HEARTBEAT=2, RESERVATION=1: nobody claims; a's reservation ends at
        +1 s, b is promoted then (seen afterwards), and, as b does not
        claim either, its own reservation ends one second later, with no
        request around it."""
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=2, WIKI_WEB_QUEUE_RESERVATION_SECONDS=1)
        a, b = d.browser(), d.browser()
        ta = a.join().json['ticket']
        self.assertStatus(b.join(), 201)
        res_a = parse_time(ta['reservation_expires_at'])
        sleep_until(res_a + 0.6)
        sb = check_status_object(b.status().json)
        self.assertPromotedAt(sb, res_a, 1)
        self.assertIsNone(a.status().json['ticket'])
        self.assertEqual(sb['queue_length'], 1)
        # b does not claim: at its own reservation deadline the queue empties.
        res_b = parse_time(sb['ticket']['reservation_expires_at'])
        sleep_until(res_b + LATE)
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length']), ('idle', 0), s)
        self.assertIsNone(b.status().json['ticket'])

    def test_expiry_notified_at_the_deadline(self):
        """The daemon reports its state with sd_notify(STATUS=...) on every
        queue change. Listening on our own NOTIFY_SOCKET shows the expiry
        happen at the deadline while no request at all arrives."""
        d = self.daemon(notify=True, WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=1,
                        WIKI_WEB_QUEUE_RESERVATION_SECONDS=2)
        a, b = d.browser(), d.browser()
        t0 = time.time()
        ta = a.join().json['ticket']
        tb = b.join().json['ticket']
        time.sleep(0.1)
        if not d.notifications_between(t0, time.time()):
            self.skipTest('the daemon sends no STATUS= notification on a queue change')
        first = parse_time(ta['heartbeat_expires_at'])
        last = parse_time(tb['heartbeat_expires_at'])
        quiet_from = time.time()
        sleep_until(last + LATE + 0.3)
        seen = d.notifications_between(quiet_from, time.time())
        self.assertTrue(seen, 'no notification during the quiet period: expiry waits for a request')
        self.assertGreaterEqual(seen[0][0], first - 0.05, seen)
        self.assertLess(seen[0][0], last + LATE, seen)
        s = self.peek(d)
        self.assertEqual((s['state'], s['queue_length']), ('idle', 0), s)

    def test_claim_after_timer_promotion(self):
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=2, WIKI_WEB_QUEUE_RESERVATION_SECONDS=1)
        a, b = d.browser(), d.browser()
        ta = a.join().json['ticket']
        self.assertStatus(b.join(), 201)
        sleep_until(parse_time(ta['reservation_expires_at']) + 0.5)
        r = b.query()
        self.assertError(r, 'execution_failed')
        s = self.wait_state(d, 'idle')
        self.assertTrue(harness.is_number(s['average_query_seconds']), s)


if __name__ == '__main__':
    harness.main()
