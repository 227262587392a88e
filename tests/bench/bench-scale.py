#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The history at scale (docs/PERFORMANCE.md "The history at 10^6
records"): the real wikiwebd on a store of N records (default 10^6, about
1,780 bytes each), made directly with sqlite3 in the daemon's own schema in
one transaction. Prints the database's bytes per record, the query plans
of the store's upkeep, and for each operation /health's worst gap: a probe
in a process of its own asks GET /api/v1/health every 2 ms on a
keep-alive connection, and the worst time one answer took while the
operation ran is the longest the event loop stood still (target: 20 ms).

Beside the probe's figure, each operation's line says what the daemon
itself measured of its event loop (wikiweb_event_loop_busy_seconds, read
from its metrics socket before and after): how many of its iterations
took over 20 ms from wake-up to the next wait, the longest one's bucket,
and the same in the loop thread's CPU time. A probe's answer can take
longer than any iteration: it also waits for the probe's and the loop's
threads to get a CPU. The daemon's output goes through a pipe, as to
journald, not to a file on the disk the store writes.

Operations: GET /api/v1/history (the first page, and a deep cursor),
GET /api/v1/history/{id}, a person's 1,000 DELETE /api/v1/history/{id},
a person's erasure of their other 1,000 records (DELETE /api/v1/history),
an administrator's EraseUser of a person with 25,000 records (D-Bus, on a
private dbus-daemon), the unanswered report over 30 and 365 days, a
retention run that removes a year (WIKI_WEB_HISTORY_RETENTION_DAYS=365
over two years of records), and the start-up (exec to the first /health
answered; target: under 1 s), warm and with the database's pages dropped
from the page cache.

    tests/bench/bench-scale.py [N] [DIRECTORY] [path/to/wikiwebd]

DIRECTORY: where the store is made (kept; a store of N records made there
by an earlier run is used again). Default: a temporary one, removed after.
Not run by meson test (a benchmark: figures, not pass/fail); run it under
flock /tmp/wikiweb-heavy.lock. Exits 0 whatever the figures are, 2 when it
cannot measure."""

import hashlib
import hmac
import http.client
import json
import os
import random
import secrets
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', 'e2e'))

import harness  # noqa: E402

DAY_US = 86400 * 1000000
SPAN_DAYS = 730
TOPICS = 3000
PERSON_RECORDS = 2000
DELETES = 1000
LEAVER = 'leaver@example.org'
LEAVER_RECORDS = 25000
RUNNING = 5
EDITOR = 'editor'
WORDS = ('policy travel expense parking holiday badge laptop printer vpn wiki payroll pension leave '
         'office canteen meeting room booking password account access security training contract '
         'invoice budget approval manager team project release deadline backup server network').split()


def probe_main(port, out_path):
    """The /health probe: one request every 2 ms, until SIGTERM; then
    (send, answered) monotonic pairs to out_path."""
    samples = []
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
    open(out_path + '.ready', 'w').close()
    while not stop:
        t0 = time.monotonic()
        try:
            conn.request('GET', '/api/v1/health')
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
            time.sleep(0.01)
            continue
        samples.append((t0, time.monotonic()))
        time.sleep(0.002)
    with open(out_path, 'w') as f:
        json.dump(samples, f)


LIVE = []  # processes to end if the benchmark fails


class Probe:
    def __init__(self, port, tmp):
        self.path = os.path.join(tmp, f'probe-{port}.json')
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--probe', str(port), self.path],
                                     stdout=subprocess.DEVNULL)
        LIVE.append(self.proc)
        self.samples = None
        while not os.path.exists(self.path + '.ready'):
            time.sleep(0.01)
        time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        with open(self.path) as f:
            self.samples = json.load(f)
        return self

    def worst(self, t0, t1):
        """The longest answer of a probe request sent in [t0, t1], in ms,
        the median, the p99, the number of probes and how many took over
        20 ms."""
        lat = sorted((b - a) * 1000 for a, b in self.samples if t0 <= a <= t1 or t0 <= b <= t1)
        if not lat:
            return float('nan'), float('nan'), float('nan'), 0, 0
        return lat[-1], statistics.median(lat), lat[int(len(lat) * 0.99)], len(lat), sum(x > 20 for x in lat)


def seal(directory, key):
    """The key the history keeps: HMAC-SHA-256 with the installation's
    secret (STATE/user-key) of the session's key."""
    with open(os.path.join(directory, 'user-key'), 'rb') as f:
        return hmac.new(f.read(), key, hashlib.sha256).digest()


def session_key(directory, token):
    return seal(directory, hashlib.sha256(token.encode()).digest())


def user_key(directory, name):
    return seal(directory, hashlib.sha256(b'wikiweb-user\0' + name.encode()).digest())


def make_schema(directory, wikiwebd):
    """An empty store in the daemon's own schema: the daemon makes it."""
    d = harness.Daemon(None, socket_activation=False, WIKI_WEB_STATE_DIRECTORY=directory,
                       WIKI_WEB_LOG_LEVEL='4')
    d.start()
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(30)


def fill(directory, n, person_token):
    """n records over SPAN_DAYS days, in time order, in one transaction;
    PERSON_RECORDS of them the person's (spread over the last 300 days),
    LEAVER_RECORDS the leaver's (spread over the last 300 days too),
    RUNNING still running at the end."""
    rnd = random.Random(42)
    now_us = int(time.time() * 1000000)
    start = now_us - SPAN_DAYS * DAY_US
    person = session_key(directory, person_token)
    leaver = user_key(directory, LEAVER)
    sessions = [hashlib.sha256(b'session %d' % i).digest() for i in range(1000)]
    person_every = max(1, int(n * 300 / SPAN_DAYS) // PERSON_RECORDS)
    person_from = n - person_every * PERSON_RECORDS
    leaver_every = max(1, int(n * 300 / SPAN_DAYS) // LEAVER_RECORDS)
    leaver_from = n - leaver_every * LEAVER_RECORDS
    zipf = [1.0 / (i + 1) for i in range(TOPICS)]
    topics = rnd.choices(range(TOPICS), weights=zipf, k=n)
    answer_words = ' '.join(rnd.choice(WORDS) for _ in range(400))
    db = sqlite3.connect(os.path.join(directory, 'history.sqlite3'), isolation_level=None)
    db.execute('PRAGMA journal_mode = DELETE')
    db.execute('PRAGMA synchronous = OFF')
    db.execute('PRAGMA cache_size = -262144')
    db.execute('BEGIN')

    def rows():
        for i in range(n):
            t = topics[i]
            w = (t * 7 + i % 3) % len(WORDS)
            words = [WORDS[t % len(WORDS)], WORDS[(t // 7) % len(WORDS)], WORDS[w], f'topic{t}']
            question = f'How does the {words[0]} {words[1]} work for {words[2]} in topic {t}, and who approves it?'
            key = ' '.join(sorted(set(words)))
            created = start + i * (SPAN_DAYS * DAY_US) // n
            is_person = i >= person_from and (i - person_from) % person_every == 0
            is_leaver = not is_person and i >= leaver_from and (i - leaver_from) % leaver_every == min(1, leaver_every - 1)
            session = person if is_person else leaver if is_leaver else sessions[i % len(sessions)]
            status = 'running' if i >= n - RUNNING else 'succeeded'
            off = rnd.randrange(0, 800)
            answer = (f'The {words[0]} {words[1]} works like this [1]. ' + answer_words[off:off + 400]) \
                if status == 'succeeded' else None
            title = f'{words[0].title()} {words[1]} {t}'
            sources = json.dumps([{'title': title, 'revision_id': 1000 + t, 'url':
                                   f'https://wiki.example/w/index.php?title={title.replace(" ", "_")}&oldid={1000 + t}'},
                                  {'title': f'{title} (FAQ)', 'revision_id': 2000 + t, 'url':
                                   f'https://wiki.example/w/index.php?oldid={2000 + t}'}])
            citations = json.dumps([{'n': 1, 'title': title, 'quote': answer_words[off:off + 80],
                                     'status': 'verified', 'section': None}])
            searches = json.dumps([{'query': f'{words[0]} {words[1]}', 'results': rnd.randrange(0, 5)}])
            signals = rnd.choice((0, 0, 1, 2, 3, 2)) if status == 'succeeded' else 0
            yield (f'qr_{i:032x}', session, status, question, answer, sources if answer else '[]',
                   1200, 3000, 20000, 0, 2, 25000, 'test-model', 3000, 400, created,
                   created + 25000000 if answer else None, 'offered', citations if answer else '[]',
                   searches, key if answer else None, signals, f'qr_{i:032x}')

    db.executemany(
        'INSERT INTO queries (id, session, status, question, answer, sources, queue_ms, wiki_ms, model_ms,'
        ' sandbox_ms, cleanup_ms, total_ms, model, prompt_tokens, completion_tokens, created_at, finished_at,'
        ' sandbox, citations, searches, wording_key, signals, conversation)'
        ' VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', rows())
    # Feedback on 10% of the records, 40% of it "down".
    fb = ((f'qr_{i:032x}', 'down' if rnd.random() < 0.4 else 'up', 'wrong', None,
           start + i * (SPAN_DAYS * DAY_US) // n + 60000000) for i in range(0, n - RUNNING, 10))
    db.executemany('INSERT INTO feedback (query_id, rating, reason, comment, rated_at) VALUES (?, ?, ?, ?, ?)', fb)
    db.execute('COMMIT')
    db.execute('PRAGMA journal_mode = WAL')
    db.execute('ANALYZE')
    db.close()


def plans(path):
    """The query plans of the store's upkeep at this size."""
    db = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    since = int(time.time() * 1000000) - 30 * DAY_US
    statements = {
        'recover (start)': ("UPDATE queries SET status = 'failed' WHERE status = 'running'", ()),
        'a person\'s running records (erasure)': ("SELECT id FROM queries INDEXED BY queries_running"
                                                    " WHERE status = 'running' AND session = ?", (b'x' * 32,)),
        'retention batch': ("SELECT id FROM queries WHERE created_at < ? AND status != 'running'"
                            " ORDER BY created_at, id LIMIT 100", (since,)),
        'report, signals': ("SELECT wording_key, count(*), min(created_at), max(created_at),"
                            " sum((signals & 1) != 0), sum((signals & 2) != 0), sum((signals & 4) != 0)"
                            " FROM queries INDEXED BY queries_by_finished"
                            " WHERE wording_key IS NOT NULL AND finished_at >= ?1 AND signals != 0"
                            " GROUP BY wording_key", (since,)),
        'report, rated down': ("SELECT q.wording_key, count(*) FROM feedback f CROSS JOIN queries q"
                               " ON q.id = f.query_id WHERE f.rating = 'down' AND f.rated_at >= ?1"
                               " AND q.wording_key IS NOT NULL AND q.finished_at >= ?1 GROUP BY q.wording_key",
                               (since,)),
    }
    for name, (sql, args) in statements.items():
        rows = db.execute('EXPLAIN QUERY PLAN ' + sql, args).fetchall()
        print(f'  plan of {name}: ' + '; '.join(r[3] for r in rows))
    db.close()


def start_daemon(directory, wikiwebd, metrics=False, **env):
    """The daemon on the store; with metrics, socket-activated with a
    metrics socket as wikiwebd-metrics.socket gives it (d.metrics_port).
    Its output goes through a pipe to its log file. Returns it and the
    time from exec to the first /health answered."""
    settings = dict(WIKI_WEB_STATE_DIRECTORY=directory, WIKI_WEB_LOG_LEVEL='6',
                    WIKI_WEB_TRUSTED_PROXIES='127.0.0.1/32', WIKI_WEB_REQUIRE_USER='false',
                    WIKI_WEB_EDITORS=EDITOR)
    settings.update(env)
    d = harness.Daemon(None, socket_activation=metrics, metrics=metrics, **settings)
    port = harness.free_port()
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin')}
    env.update(d.env)
    cmd = d._command(port) if metrics else [wikiwebd, '--listen', f'127.0.0.1:{port}']
    t0 = time.monotonic()
    d.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env, start_new_session=True)
    LIVE.append(d.proc)

    def copy(src, path):
        with open(path, 'ab', buffering=0) as log:
            for line in src:
                log.write(line)
    threading.Thread(target=copy, args=(d.proc.stdout, d.log_path), daemon=True).start()
    d.port = port
    while True:
        if d.proc.poll() is not None:
            sys.exit(f'wikiwebd exited: {d.log()}')
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=5)
            c.request('GET', '/api/v1/health')
            c.getresponse().read()
            c.close()
            break
        except OSError:
            time.sleep(0.002)
    return d, (time.monotonic() - t0) * 1000


def loop_busy(d):
    """The daemon's wikiweb_event_loop_busy_seconds and _cpu_seconds
    histograms: {family: {le: cumulative count}}."""
    c = http.client.HTTPConnection('127.0.0.1', d.metrics_port, timeout=30)
    c.request('GET', '/metrics')
    text = c.getresponse().read().decode()
    c.close()
    out = {'wall': {}, 'cpu': {}}
    for line in text.splitlines():
        for kind, family in (('wall', 'wikiweb_event_loop_busy_seconds_bucket{le="'),
                             ('cpu', 'wikiweb_event_loop_busy_cpu_seconds_bucket{le="')):
            if line.startswith(family):
                le, value = line[len(family):].split('"} ')
                out[kind][float(le)] = float(value)
    return out


def busy_between(a, b):
    """What the loop measured between two loop_busy() readings: for the
    wall clock and the CPU time, the iterations, how many took over 20 ms
    and the bucket of the longest."""
    parts = []
    for kind in ('wall', 'cpu'):
        bounds = sorted(b[kind])
        delta = {le: b[kind][le] - a[kind].get(le, 0) for le in bounds}
        total = delta[float('inf')]
        over = total - delta[0.02]
        longest = next(le for le in bounds if delta[le] == total)
        below = max([x for x in bounds if x < longest], default=0)
        span = f'{below * 1000:g}-{longest * 1000:g} ms' if longest != float('inf') else f'over {below * 1000:g} ms'
        parts.append(f'{kind} {over:.0f} over 20 ms, longest {span}' + (f' of {total:.0f} iterations'
                                                                      if kind == 'wall' else ''))
    return 'loop: ' + '; '.join(parts)


def private_bus(tmp):
    """A dbus-daemon of this run's own (as the e2e suite's); its address."""
    address, p = harness.private_bus(tmp)
    LIVE.append(p)
    return address


def stop_daemon(d):
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(60)


def drop_cache(path):
    for p in (path, path + '-wal', path + '-shm'):
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--probe':
        probe_main(int(sys.argv[2]), sys.argv[3])
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
    keep = len(sys.argv) > 2
    directory = sys.argv[2] if keep else tempfile.mkdtemp(prefix='wikiweb-bench-scale-')
    wikiwebd = os.path.abspath(sys.argv[3] if len(sys.argv) > 3 else os.environ.get('WIKIWEBD') or
                               os.path.join(here, '..', '..', 'build', 'wikiwebd'))
    harness.WIKIWEBD = wikiwebd
    tmp = tempfile.mkdtemp(prefix='wikiweb-bench-scale-run-')
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, 'history.sqlite3')
    token_file = os.path.join(directory, 'bench-token')
    try:
        made = os.path.exists(token_file) and sqlite3.connect(path).execute(
            'SELECT count(*) FROM queries').fetchone()[0] == n
        if not made:
            for p in (path, path + '-wal', path + '-shm', token_file):
                if os.path.exists(p):
                    os.unlink(p)
            token = secrets.token_urlsafe(32)
            with open(token_file, 'w') as f:
                f.write(token)
            make_schema(directory, wikiwebd)
            t = time.monotonic()
            fill(directory, n, token)
            print(f'filled {n} records in {time.monotonic() - t:.0f} s')
        with open(token_file) as f:
            token = f.read()
        records = sqlite3.connect(path).execute('SELECT count(*) FROM queries').fetchone()[0]
        size = os.path.getsize(path)
        print(f'history: {records} records, {size / 1e9:.2f} GB, {size / records:.0f} bytes per record')
        plans(path)

        # Start-up: warm, and with the file's pages dropped.
        ups = {}
        for kind in ('warm', 'cold'):
            if kind == 'cold':
                drop_cache(path)
            d, ms = start_daemon(directory, wikiwebd)
            ups[kind] = ms
            stop_daemon(d)
        print(f'start-up (exec to the first /health answer): warm {ups["warm"]:.0f} ms, '
              f'page cache dropped {ups["cold"]:.0f} ms (target: under 1000 ms)')

        bus = private_bus(tmp)
        d, _ = start_daemon(directory, wikiwebd, metrics=True, DBUS_SYSTEM_BUS_ADDRESS=bus)
        probe = Probe(d.port, tmp)
        conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=120)
        cookie = {'Cookie': f'wikiweb_session={token}'}
        phases = []

        def call(method, target, headers=None):
            conn.request(method, target, headers={**cookie, **(headers or {})})
            r = conn.getresponse()
            return r.status, r.read()

        def phase(name, fn):
            before = loop_busy(d)
            t0 = time.monotonic()
            detail = fn()
            t1 = time.monotonic()
            phases.append((name, t0, t1, detail, busy_between(before, loop_busy(d))))

        def first_pages():
            for _ in range(50):
                st, body = call('GET', '/api/v1/history?limit=20')
                assert st == 200, body[:200]
            return json.loads(body)

        # The machine's own noise: nothing asked but the probe.
        phase('nothing (the probe alone, 10 s: the machine\'s noise)', lambda: time.sleep(10))
        page = {}
        phase('GET /history, first page (x50)', lambda: page.setdefault('first', first_pages()))

        # The person's oldest page, found once.
        cursor, pages = None, 0
        while True:
            st, body = call('GET', '/api/v1/history?limit=100' + (f'&cursor={cursor}' if cursor else ''))
            p = json.loads(body)
            if not p['next_cursor']:
                break
            cursor = p['next_cursor']
            pages += 1

        def deep():
            for _ in range(50):
                st, body = call('GET', f'/api/v1/history?limit=20&cursor={cursor}')
                assert st == 200
            return f'{pages * 100} records deep'
        phase('GET /history, deep cursor (x50)', deep)

        ids = [r['id'] for r in page['first']['items']]

        def gets():
            for i in range(200):
                st, _ = call('GET', f'/api/v1/history/{ids[i % len(ids)]}')
                assert st == 200
        phase('GET /history/{id} (x200)', gets)

        db = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
        mine = [r[0] for r in db.execute(
            "SELECT id FROM queries WHERE session = ? AND status != 'running' ORDER BY seq LIMIT ?",
            (session_key(directory, token), DELETES))]
        theirs = db.execute('SELECT count(*) FROM queries WHERE session = ?',
                            (user_key(directory, LEAVER),)).fetchone()[0]
        db.close()

        def deletes():
            bad = 0
            for qid in mine:
                st, _ = call('DELETE', f'/api/v1/history/{qid}')
                bad += st != 204
            return f'{len(mine) - bad} deleted'
        phase(f'a person\'s {DELETES} DELETE /history/{{id}}', deletes)

        db = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
        left = db.execute('SELECT count(*) FROM queries WHERE session = ?',
                          (session_key(directory, token),)).fetchone()[0]
        db.close()

        def erase_mine():
            st, body = call('DELETE', '/api/v1/history')
            assert st == 204, body[:300]
            assert not json.loads(call('GET', '/api/v1/history?limit=100')[1])['items']
            return f'{left} records erased'
        phase(f'a person\'s erasure, DELETE /history (their other {left} records)', erase_mine)

        def erase_user():
            r = subprocess.run(['busctl', f'--address={bus}', '--timeout=3600', 'call', 'org.wikiweb.Queue1',
                                '/org/wikiweb/Queue1', 'org.wikiweb.Queue1', 'EraseUser', 's', LEAVER],
                               capture_output=True, text=True, timeout=3700)
            assert r.returncode == 0, r.stderr
            return f'EraseUser answered "{r.stdout.strip()}" ({theirs} records were theirs)'
        phase(f'an administrator\'s EraseUser of {theirs} records (D-Bus)', erase_user)

        for days in (30, 365):
            def report(days=days):
                st, body = call('GET', f'/api/v1/reports/unanswered?days={days}', {'X-Remote-User': EDITOR})
                assert st == 200, body[:300]
                groups = json.loads(body).get('groups', [])
                return f'{len(groups)} groups, {sum(g.get("count", 0) for g in groups)} records in them'
            phase(f'report over {days} days', report)

        probe.stop()
        stop_daemon(d)
        for name, t0, t1, detail, busy in phases:
            worst, median, p99, k, over = probe.worst(t0, t1)
            print(f'  {name}: {(t1 - t0) * 1000:.0f} ms; /health worst {worst:.1f} ms, p99 {p99:.1f} ms, '
                  f'median {median:.1f} ms, {over} of {k} probes over 20 ms'
                  f'{"; " + str(detail) if isinstance(detail, (str, int)) else ""}; {busy}')

        # A retention run that removes a year.
        before = sqlite3.connect(path).execute('SELECT count(*) FROM queries').fetchone()[0]
        d, _ = start_daemon(directory, wikiwebd, metrics=True, WIKI_WEB_HISTORY_RETENTION_DAYS='365')
        probe = Probe(d.port, tmp)
        zero = {'wall': {}, 'cpu': {}}
        t0 = time.monotonic()
        while 'History retention (365 days)' not in d.log():
            if time.monotonic() - t0 > 3600:
                sys.exit('the retention run did not end in an hour')
            time.sleep(0.2)
        t1 = time.monotonic()
        busy = busy_between(zero, loop_busy(d))
        probe.stop()
        stop_daemon(d)
        line = [x for x in d.log().splitlines() if 'History retention (365 days)' in x][-1]
        after = sqlite3.connect(path).execute('SELECT count(*) FROM queries').fetchone()[0]
        worst, median, p99, k, over = probe.worst(t0 - 0.3, t1)
        print(f'  retention run removing a year: {before - after} records; /health worst {worst:.1f} ms, '
              f'p99 {p99:.1f} ms, median {median:.1f} ms, {over} of {k} probes over 20 ms; '
              f'journal: {line.split("History retention")[1].strip()}; {busy} (since the start)')
        size = os.path.getsize(path)
        print(f'history after: {after} records, {size / 1e9:.2f} GB')
    finally:
        for p in LIVE:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, True)
        if not keep:
            shutil.rmtree(directory, True)


if __name__ == '__main__':
    main()
