#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""API.md 11.1: the queue stream, read raw as Server-Sent Events."""

import socket
import statistics
import subprocess
import shutil
import threading
import time

import harness
from harness import API, check_status_object


class QueueStream(harness.DaemonTestCase):

    def joined_stream(self, **env):
        """A daemon, a browser with a ticket, and its queue stream past the
        first status event."""
        d = self.daemon(**env)
        b = d.browser()
        self.assertStatus(b.join(), 201)
        s = b.queue_events()
        self.addCleanup(s.close)
        self.assertEqual(s.next_event()['event'], 'status')
        return d, b, s

    def test_no_ticket_no_stream(self):
        d = self.daemon()
        s = d.browser().queue_events()
        self.assertIsNotNone(s.response)
        self.assertError(s.response, 'ticket_not_found')

    def test_first_status_headers_and_removed(self):
        d = self.daemon()
        b = d.browser()
        self.assertStatus(b.join(), 201)
        s = b.queue_events()
        s.check_stream_headers()
        self.assertEqual(s.headers.get('Transfer-Encoding'), 'chunked')
        ev = s.next_event()
        self.assertEqual((ev['id'], ev['event']), (1, 'status'))
        st = check_status_object(ev['data'])
        self.assertEqual(st['ticket']['status'], 'reserved')
        # The status object of a poll, but for the heartbeat deadline.
        polled = check_status_object(b.status().json)
        polled['ticket']['heartbeat_expires_at'] = st['ticket']['heartbeat_expires_at']
        self.assertEqual(st, polled)
        self.assertStatus(b.leave(), 204)
        ev = s.next_event()
        self.assertEqual((ev['id'], ev['event'], ev['data']), (2, 'removed', {'reason': 'left'}))
        # The stream ends after `removed`.
        self.assertIsNone(s.next_event(timeout=5))
        self.assertTrue(s.chunks_done)
        s.close()

    def test_promotion_is_pushed_within_50ms(self):
        d = self.daemon()
        a, b = d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        s = b.queue_events()
        first = check_status_object(s.next_event()['data'])
        self.assertEqual((first['ticket']['status'], first['ticket']['position']), ('waiting', 1))
        lags = []
        for _ in range(5):
            t0 = time.monotonic()
            self.assertStatus(a.leave(), 204)
            ev = s.wait_for('status', where=lambda x: x['ticket']['status'] == 'reserved')
            lags.append(ev['at'] - t0)
            st = check_status_object(ev['data'])
            self.assertEqual(st['ticket']['position'], 0)
            # Back to waiting: b leaves and joins behind a again.
            self.assertStatus(a.join(), 201)
            self.assertStatus(b.leave(), 204)
            self.assertEqual(s.wait_for('removed')['data'], {'reason': 'left'})
            s.close()
            self.assertStatus(b.join(), 201)
            self.assertStatus(a.leave(), 204)
            self.assertStatus(a.join(), 201)
            self.assertStatus(b.leave(), 204)
            self.assertStatus(b.join(), 201)
            s = b.queue_events()
            self.assertEqual(check_status_object(s.next_event()['data'])['ticket']['status'], 'waiting')
        s.close()
        # From the DELETE's request to the event: the promotion itself is
        # immediate (API.md 11.1: within 50 ms).
        self.assertLess(max(lags), 0.05, lags)

    def test_changes_for_the_caller(self):
        d = self.daemon()
        a, b, c = d.browser(), d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        s = b.queue_events()
        self.assertEqual(s.next_event()['data']['queue_length'], 2)
        # Someone joins behind: the queue length changed.
        self.assertStatus(c.join(), 201)
        st = s.wait_for('status')['data']
        self.assertEqual((st['queue_length'], st['ticket']['position']), (3, 1))
        # Polls (heartbeats) change nothing the stream reports.
        for _ in range(3):
            b.status()
            a.status()
        self.assertStatus(c.leave(), 204)
        st = s.next_event()['data']
        self.assertEqual(st['queue_length'], 2)
        self.assertEqual(s.last_id, 3)
        s.close()

    def test_status_coalesced_under_churn_promotion_at_once(self):
        """API.md 11.1: at most one status event per 250 ms per stream, the
        latest state winning; a promotion is not held back."""
        d = self.daemon()
        a, b = d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        s = b.queue_events()
        self.addCleanup(s.close)
        self.assertEqual(s.next_event()['data']['ticket']['position'], 1)

        # Churn behind b for 2 s: every join and leave changes its queue
        # length; a reader notes each event's arrival.
        got, stop = [], threading.Event()

        def read():
            while not stop.is_set():
                try:
                    ev = s.next_event(timeout=0.1)
                except socket.timeout:
                    continue
                if ev is None:
                    return
                got.append(ev)

        reader = threading.Thread(target=read)
        reader.start()
        churners = [d.browser() for _ in range(4)]
        changes, t_end = 0, time.monotonic() + 2.0
        t_start = time.monotonic()
        while time.monotonic() < t_end:
            for c in churners:
                self.assertStatus(c.join(), 201)
                changes += 1
            for c in churners:
                self.assertStatus(c.leave(), 204)
                changes += 1
        churn_s = time.monotonic() - t_start
        time.sleep(0.5)  # the held-back last state goes out at the interval's end
        stop.set()
        reader.join()
        statuses = [e for e in got if e['event'] == 'status']
        self.assertEqual(len(statuses), len(got), [e['event'] for e in got])
        gaps = [y['at'] - x['at'] for x, y in zip(statuses, statuses[1:])]
        rate = len(statuses) / churn_s
        self.assertGreater(changes, 40, 'too little churn to test anything')
        # At most ~4 a second (the first may follow the stream's first
        # event at once), spaced by the interval: on average, and each gap
        # less the jitter of this reader's arrival times (the thread
        # shares the interpreter with the churn).
        self.assertLessEqual(len(statuses), churn_s / 0.25 + 2, (len(statuses), changes, churn_s))
        self.assertGreaterEqual(len(statuses), 3, 'too few status events during the churn')
        self.assertGreaterEqual(statistics.mean(gaps), 0.24, gaps)
        self.assertGreater(min(gaps), 0.15, gaps)
        # The latest state won: the churn ended with the queue at 2.
        last = check_status_object(statuses[-1]['data'])
        self.assertEqual((last['queue_length'], last['ticket']['position']), (2, 1))
        print(f'# {changes} queue changes in {churn_s:.2f} s: {len(statuses)} status events '
              f'({rate:.1f}/s), gaps {min(gaps) * 1e3:.0f}-{max(gaps) * 1e3:.0f} ms')

        # A promotion inside a held-back interval: out at once.
        c = churners[0]
        self.assertStatus(c.join(), 201)
        self.assertEqual(s.wait_for('status')['data']['queue_length'], 3)
        self.assertStatus(c.leave(), 204)  # held back: the interval runs
        t0 = time.monotonic()
        self.assertStatus(a.leave(), 204)
        ev = s.wait_for('status', where=lambda x: x['ticket']['status'] == 'reserved')
        lag = ev['at'] - t0
        st = check_status_object(ev['data'])
        self.assertEqual((st['ticket']['position'], st['queue_length']), (0, 1))
        self.assertLess(lag, 0.05, lag)
        # A removal too.
        t0 = time.monotonic()
        self.assertStatus(b.leave(), 204)
        ev = s.wait_for('removed')
        self.assertLess(ev['at'] - t0, 0.05)

    def test_claim_removes(self):
        d, b, s = self.joined_stream()
        r = b.query()  # not configured: fails, but the claim happened
        self.assertIsNotNone(r.header('Wikiweb-Query-Id'))
        self.assertEqual(s.wait_for('removed')['data'], {'reason': 'claimed'})
        self.assertIsNone(s.next_event(timeout=5))

    def test_reservation_expiry_removes(self):
        d, b, s = self.joined_stream(WIKI_WEB_QUEUE_RESERVATION_SECONDS=1, WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=30)
        ev = s.wait_for('removed', timeout=5)
        self.assertEqual(ev['data'], {'reason': 'reservation'})

    def test_open_stream_is_the_heartbeat(self):
        hb = 2
        d = self.daemon(WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=hb)
        a, b = d.browser(), d.browser()
        self.assertStatus(a.join(), 201)
        self.assertStatus(b.join(), 201)
        s = b.queue_events()
        s.next_event()
        # a holds its ticket by polling; b only by its open stream.
        t_end = time.monotonic() + 3 * hb
        while time.monotonic() < t_end:
            a.status()
            time.sleep(0.3)
        st = check_status_object(self.peek(d))
        self.assertEqual(st['queue_length'], 2)
        # Nothing was removed; the ticket's heartbeat deadline reads as a
        # poll's would.
        with self.assertRaises(socket.timeout):
            s.next_event(timeout=0.3)
        st = check_status_object(b.status().json, time.time())
        self.assertEqual(st['ticket']['status'], 'waiting')
        # Closed: the ordinary deadline runs from then.
        s.close()
        time.sleep(0.3)
        self.assertEqual(self.queue_length(d), 2)
        deadline = time.monotonic() + hb + 2
        while self.queue_length(d) == 2 and time.monotonic() < deadline:
            a.status()
            time.sleep(0.1)
        self.assertEqual(self.queue_length(d), 1)
        self.assertIsNone(b.status().json['ticket'])

    def test_client_gone_is_noticed_at_once(self):
        # Eight streams, all closed by the client: the session may open
        # eight more at once (the server noticed each close while waiting).
        d = self.daemon()
        b = d.browser()
        self.assertStatus(b.join(), 201)
        for _ in range(3):
            streams = [b.queue_events() for _ in range(8)]
            for s in streams:
                s.check_stream_headers()
                s.next_event()
                s.close()
            time.sleep(0.2)
        s = b.queue_events()
        s.check_stream_headers()
        s.close()

    def test_nine_streams_one_429(self):
        d = self.daemon()
        b, other = d.browser(), d.browser()
        self.assertStatus(b.join(), 201)
        self.assertStatus(other.join(), 201)
        streams = [b.queue_events() for _ in range(8)]
        for s in streams:
            s.check_stream_headers()
        ninth = b.queue_events()
        self.assertIsNotNone(ninth.response)
        self.assertError(ninth.response, 'rate_limited')
        self.assertEqual(ninth.response.json['error']['message'], 'Too many open event streams')
        # Another session is not limited by it.
        s = other.queue_events()
        s.check_stream_headers()
        # Every stream still works.
        for st in streams:
            self.assertEqual(st.next_event()['event'], 'status')
        self.assertStatus(other.leave(), 204)
        for st in streams:
            self.assertEqual(st.wait_for('status')['data']['queue_length'], 1)
        for st in streams + [s]:
            st.close()

    def test_streams_count_against_the_per_address_limit(self):
        d = self.daemon(WIKI_WEB_HTTP_MAX_CONNECTIONS_PER_IP=3)
        b = d.browser()
        self.assertStatus(b.join(), 201)
        streams = [b.queue_events() for _ in range(3)]
        for s in streams:
            s.check_stream_headers()
        # A fourth connection from the same address is refused (closed
        # without an answer) while the three streams are open.
        with socket.create_connection(('127.0.0.1', d.port), timeout=5) as c:
            c.sendall(b'GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')
            try:
                data = c.recv(100)
            except ConnectionResetError:
                data = b''
            self.assertEqual(data, b'')
        streams[0].close()
        time.sleep(0.2)
        self.assertStatus(d.browser().status(), 200)
        for s in streams[1:]:
            s.close()

    def test_keepalive_comment(self):
        d, b, s = self.joined_stream()
        t0 = time.monotonic()
        with self.assertRaises(socket.timeout):
            s.next_event(timeout=17)
        self.assertEqual(s.comments[:1], ['keep-alive'])
        # After 15 s (the timer coalesces within a second).
        self.assertGreater(time.monotonic() - t0, 14)
        s.close()

    def test_stop_ends_the_stream(self):
        d, b, s = self.joined_stream()
        t0 = time.monotonic()
        d.stop()
        # The stream was ended (the last chunk), not cut, and quickly.
        self.assertIsNone(s.next_event(timeout=5))
        self.assertTrue(s.chunks_done)
        self.assertLess(time.monotonic() - t0, 3)

    def test_curl_reads_it(self):
        curl = shutil.which('curl')
        if not curl:
            self.skipTest('no curl')
        d = self.daemon()
        b = d.browser()
        self.assertStatus(b.join(), 201)
        p = subprocess.Popen([curl, '-sN', '--cookie', f'wikiweb_session={b.cookie}',
                              f'http://{d.host}{API}/queue/events'], stdout=subprocess.PIPE)
        time.sleep(0.5)
        self.assertStatus(b.leave(), 204)
        out, _ = p.communicate(timeout=5)
        self.assertEqual(p.returncode, 0)
        text = out.decode()
        self.assertTrue(text.startswith('id: 1\nevent: status\ndata: {'), text)
        self.assertTrue(text.endswith('id: 2\nevent: removed\ndata: {"reason":"left"}\n\n'), text)


if __name__ == '__main__':
    harness.main()
