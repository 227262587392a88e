#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How long a well-behaved client waits while hostile clients hold
connections (run by bench-slots.sh, which says how).

  bench-slots.py WIKIWEBD [LABEL]

Starts WIKIWEBD on a free loopback port with RLIMIT_NOFILE $NOFILE (16384,
as the unit's LimitNOFILE=), then for $DURATION seconds (30):
  - $SLOWLORIS (1100) connections from 127.0.0.1 send a request head one
    byte every 3 s, and reconnect (at most once a second) when dropped;
  - $IDLE (2000) connections, spread over 127.0.0.3..127.0.0.34 (63 per
    address, within the default per-address limit), send nothing, and
    reconnect likewise;
  - a well-behaved client on 127.0.0.2 asks GET /api/v1/health every
    0.1 s on a fresh connection, with a 5 s timeout.
Prints the client's waits (p50, p90, p99, max), its timeouts and errors,
and how many attacking connections were open at the end. Exits 0 whatever
the figures (2 when it cannot measure). Target: p99 under 1 s, no timeouts.
"""

import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

WIKIWEBD = sys.argv[1]
LABEL = sys.argv[2] if len(sys.argv) > 2 else WIKIWEBD
DURATION = float(os.environ.get('DURATION', '30'))
SLOWLORIS = int(os.environ.get('SLOWLORIS', '1100'))
IDLE = int(os.environ.get('IDLE', '2000'))
NOFILE = int(os.environ.get('NOFILE', '16384'))
IDLE_SOURCES = [f'127.0.0.{i}' for i in range(3, 35)]


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def health(port, timeout):
    s = socket.socket()
    try:
        s.bind(('127.0.0.2', 0))
        s.settimeout(timeout)
        s.connect(('127.0.0.1', port))
        s.sendall(b'GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')
        data = b''
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        return data.startswith(b'HTTP/1.1 200 ')
    finally:
        s.close()


class Attackers:
    """Non-blocking sockets in one selector; each slot reconnects at most
    once a second after its connection is dropped."""

    def __init__(self, port):
        self.port = port
        self.sel = selectors.DefaultSelector()
        self.slots = []  # [kind, source, sock or None, next_connect, bytes_sent]
        for i in range(SLOWLORIS):
            self.slots.append(['slow', '127.0.0.1', None, 0.0, 0])
        for i in range(IDLE):
            self.slots.append(['idle', IDLE_SOURCES[i % len(IDLE_SOURCES)], None, 0.0, 0])
        self.head = b'GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: '
        self.reconnects = 0

    def connect(self, slot, t):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind((slot[1], 0))
            s.connect_ex(('127.0.0.1', self.port))
        except OSError:
            s.close()
            slot[3] = t + 1.0
            return
        slot[2] = s
        slot[4] = 0
        self.sel.register(s, selectors.EVENT_READ, slot)

    def drop(self, slot, t):
        self.sel.unregister(slot[2])
        slot[2].close()
        slot[2] = None
        slot[3] = t + 1.0
        self.reconnects += 1

    def step(self, t, trickle):
        for slot in self.slots:
            if slot[2] is None and t >= slot[3]:
                self.connect(slot, t)
        for key, _ in self.sel.select(timeout=0):
            slot = key.data
            try:
                if key.fileobj.recv(4096) == b'':
                    self.drop(slot, t)
            except BlockingIOError:
                pass
            except OSError:
                self.drop(slot, t)
        if trickle:
            for slot in self.slots:
                if slot[0] == 'slow' and slot[2] is not None:
                    try:
                        chunk = self.head if slot[4] == 0 else b'a'
                        slot[2].send(chunk)
                        slot[4] += len(chunk)
                    except BlockingIOError:
                        pass
                    except OSError:
                        self.drop(slot, t)

    def open_count(self):
        return sum(1 for s in self.slots if s[2] is not None)

    def close(self):
        for slot in self.slots:
            if slot[2] is not None:
                slot[2].close()


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = SLOWLORIS + IDLE + 256
    if hard != resource.RLIM_INFINITY and hard < max(need, NOFILE):
        print(f'RLIMIT_NOFILE hard limit {hard} is below {max(need, NOFILE)}', file=sys.stderr)
        sys.exit(2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(need, NOFILE), hard))

    tmp = tempfile.mkdtemp(prefix='wikiweb-bench-slots.')
    port = free_port()
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'WIKI_WEB_STATE_DIRECTORY': tmp,
           'WIKI_WEB_COOKIE_SECURE': 'false'}

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, hard))
    log = open(os.path.join(tmp, 'wikiwebd.log'), 'wb')
    proc = subprocess.Popen([WIKIWEBD, '--listen', f'127.0.0.1:{port}'], env=env, stdout=log,
                            stderr=subprocess.STDOUT, preexec_fn=limit, start_new_session=True)
    attackers = None
    try:
        for _ in range(100):
            try:
                if health(port, 1.0):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            print('wikiwebd did not answer', file=sys.stderr)
            sys.exit(2)

        attackers = Attackers(port)
        waits, timeouts, errors = [], 0, 0
        t0 = time.monotonic()
        next_trickle = t0
        next_client = t0 + 2.0  # let the attackers connect first
        while time.monotonic() - t0 < DURATION:
            t = time.monotonic()
            trickle = t >= next_trickle
            if trickle:
                next_trickle = t + 3.0
            attackers.step(t, trickle)
            if t >= next_client:
                c0 = time.monotonic()
                try:
                    if not health(port, 5.0):
                        errors += 1
                    waits.append(time.monotonic() - c0)
                except socket.timeout:
                    timeouts += 1
                except OSError:
                    errors += 1
                next_client = time.monotonic() + 0.1
            time.sleep(0.01)
        held = attackers.open_count()
        rss = 0
        try:
            with open(f'/proc/{proc.pid}/status') as f:
                for line in f:
                    if line.startswith('VmRSS:'):
                        rss = int(line.split()[1])
        except OSError:
            pass
        if waits:
            print(f'{LABEL}: {len(waits)} answers, p50 {percentile(waits, 50) * 1000:.1f} ms, '
                  f'p90 {percentile(waits, 90) * 1000:.1f} ms, p99 {percentile(waits, 99) * 1000:.1f} ms, '
                  f'max {max(waits) * 1000:.1f} ms; {timeouts} timeouts (5 s), {errors} errors; '
                  f'attackers open at the end {held}/{SLOWLORIS + IDLE}, '
                  f'{attackers.reconnects} reconnects; wikiwebd RSS {rss // 1024} MiB')
        else:
            print(f'{LABEL}: no answer at all; {timeouts} timeouts (5 s), {errors} errors')
        verdict = 'meets' if waits and not timeouts and percentile(waits, 99) < 1.0 else 'MISSES'
        print(f'{LABEL}: {verdict} the target (p99 under 1 s, no timeouts)')
    finally:
        if attackers:
            attackers.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        subprocess.run(['rm', '-rf', tmp])


if __name__ == '__main__':
    main()
