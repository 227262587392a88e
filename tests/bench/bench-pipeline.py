#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The query pipeline's own cost, on loopback, with the real wikiwebd, a real
MediaWiki (tests/fixtures/mediawiki.py) and the scripted model server
(tests/fixtures/fake_llm.py). Prints figures; exits 0 whatever they are
(2 when it cannot measure).

1. Overhead: QUERIES (50) queries whose scripted model reads one page and
   then answers. Per query: the end-to-end time over HTTP (client clock)
   minus the time the wiki and the model took (the record's timings_ms).
   Prints the median and p90. Target: median under 5 ms.
2. GET /api/v1/queue/status p99 while queries run back to back, next to the
   same with an idle slot, same run (STATUS_REQUESTS (1000) each, from a
   client in a process of its own): the ratio, in ROUNDS (3) rounds of an
   idle and a busy figure; prints each round and the median ratio with its
   spread. Target: at most 1.5. Within a round the idle and the busy
   requests alternate in BLOCKS (10) blocks each, so that a burst of
   unrelated load on the machine (other jobs, the host) falls on both
   figures alike rather than on one of them.

   A control is printed first: the same alternation without any query, a
   CPU burner at SCHED_IDLE running during the "busy" blocks instead. The
   daemon does nothing more in those blocks, so its ratio is what the
   machine alone does to the tail (on a small shared VM it is well above
   1): read the query figures next to it.

   This machine's CPUs also run the fixtures: MediaWiki's php, the fake
   model and the back-to-back query client, which a busy slot wakes and
   which then take the CPU from the daemon and the probe (on 2 CPUs, php
   alone keeps one busy). In production the wiki and the model run
   elsewhere. So the figure is taken three times and all are printed: with
   the fixtures at normal priority; with them at SCHED_IDLE (the daemon and
   the probe stay at normal priority); and with them at SCHED_IDLE and
   pinned to the last CPU, the daemon and the probe to the others, the
   closest this machine gets to "elsewhere" (a SCHED_IDLE php that the
   daemon's request wakes on the daemon's own CPU still delays the daemon
   by milliseconds at times: perf sched). The target is read against the
   last.

3. WIKI_WEB_WIKI_READ_AS=person against service, same run, same wiki
   (restricted=True, the extension WikiwebReadCheck loaded from the tree,
   both daemons logged in as the bot): READ_AS_QUERIES (30) queries each,
   alternating in blocks, one wiki_read per query. Prints the median wiki
   time per query of each mode and their difference: the read check's
   extra per tool call.

    tests/bench/bench-pipeline.py [path/to/wikiwebd]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', 'e2e'))
sys.path.insert(0, os.path.join(here, '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402
import mediawiki  # noqa: E402

QUERIES = int(os.environ.get('QUERIES', '50'))
STATUS_REQUESTS = int(os.environ.get('STATUS_REQUESTS', '1000'))
ROUNDS = int(os.environ.get('ROUNDS', '3'))
BLOCKS = int(os.environ.get('BLOCKS', '10'))
READ_ANSWER = [{'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
               {'answer': 'Apple is a fruit [Apple].'}]


def find_wikiwebd():
    if len(sys.argv) > 1:
        return os.path.abspath(sys.argv[1])
    root = os.path.abspath(os.path.join(here, '..', '..'))
    for b in ('build', 'build-e2e', 'build-main'):
        p = os.path.join(root, b, 'wikiwebd')
        if os.access(p, os.X_OK):
            return p
    return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs))) - 1))]


# The status client runs in a process of its own: in this one, the fake
# model server and the back-to-back query client hold the GIL, which would
# be measured as the daemon's latency. One connection per request, one
# session (the cookie of the first answer), as a polling front end does.
STATUS_PROBE = r"""
import http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
cookie = None
out = []
for i in range(n + 1):
    h = {'Cookie': cookie} if cookie else {}
    t0 = time.perf_counter()
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
    c.request('GET', '/api/v1/queue/status', headers=h)
    r = c.getresponse()
    r.read()
    c.close()
    dt = (time.perf_counter() - t0) * 1000
    if r.status != 200:
        sys.exit(f'status {r.status}')
    if cookie is None:
        cookie = r.getheader('Set-Cookie').split(';')[0]
    else:
        out.append(dt)
    time.sleep(0.002)
print(json.dumps(out))
"""


def status_latencies(d, n):
    p = subprocess.run([sys.executable, '-c', STATUS_PROBE, str(d.port), str(n)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f'status probe: {p.stderr.strip()}')
    return json.loads(p.stdout)


def sched_idle(tid):
    os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))


def fixtures_to_sched_idle(w):
    """MediaWiki's php (one process) and every thread of this process but
    the main one (the fake model's server and its handler threads; threads
    they start inherit the policy). The main thread starts the probe, which
    stays at normal priority, as does the daemon."""
    sched_idle(w.proc.pid)
    main = threading.main_thread().native_id
    for t in os.listdir('/proc/self/task'):
        if int(t) != main:
            sched_idle(int(t))


# The CPU the fixtures are pinned to in the last figures, and the others,
# for the daemon and the probe (None: not pinned).
FIXTURE_CPUS = None


def pin(tid, cpus):
    try:
        os.sched_setaffinity(tid, cpus)
    except ProcessLookupError:
        pass  # a thread that has just ended


def pin_apart(w, d):
    """Fixtures on the last CPU, the daemon (all its threads) and the probe
    (started from the main thread) on the others: the wiki and the model
    as if on another machine. Returns False with fewer than 2 CPUs."""
    global FIXTURE_CPUS
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return False
    FIXTURE_CPUS = {cpus[-1]}
    others = set(cpus[:-1])
    pin(w.proc.pid, FIXTURE_CPUS)
    main = threading.main_thread().native_id
    for t in os.listdir('/proc/self/task'):
        pin(int(t), others if int(t) == main else FIXTURE_CPUS)
    for t in os.listdir(f'/proc/{d.proc.pid}/task'):
        pin(int(t), others)
    return True


def unpin(cpus):
    global FIXTURE_CPUS
    FIXTURE_CPUS = None
    pin(0, cpus)


def busy_latencies(d, llm, idle_priority, n):
    """n status latencies while a thread runs queries back to back, and how
    many queries completed meanwhile."""
    stop = threading.Event()
    ran = [0]

    def back_to_back():
        if FIXTURE_CPUS:
            pin(0, FIXTURE_CPUS)
        if idle_priority:
            sched_idle(0)
        q = d.browser()
        while not stop.is_set():
            llm.set_script(READ_ANSWER)
            r = q.query('What is an apple?', timeout=60)
            if r.status == 200:
                ran[0] += 1

    th = threading.Thread(target=back_to_back)
    th.start()
    try:
        time.sleep(0.05)
        busy = status_latencies(d, n)
    finally:
        stop.set()
        th.join(60)
    return busy, ran[0]


BURNER = 'import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True:\n    pass\n'


def control_latencies(d):
    """A control round: idle-slot latencies alternating with idle-slot
    latencies while a CPU burner at SCHED_IDLE runs."""
    idle, burning = [], []
    for _ in range(BLOCKS):
        idle += status_latencies(d, STATUS_REQUESTS // BLOCKS)
        p = subprocess.Popen([sys.executable, '-c', BURNER])
        try:
            time.sleep(0.05)
            burning += status_latencies(d, STATUS_REQUESTS // BLOCKS)
        finally:
            p.kill()
            p.wait()
    return idle, burning


def round_latencies(d, llm, idle_priority):
    """One round: STATUS_REQUESTS idle and as many busy latencies, taken in
    alternating blocks; and how many queries ran."""
    idle, busy, ran = [], [], 0
    for _ in range(BLOCKS):
        idle += status_latencies(d, STATUS_REQUESTS // BLOCKS)
        b, k = busy_latencies(d, llm, idle_priority, STATUS_REQUESTS // BLOCKS)
        busy += b
        ran += k
    if ran == 0:
        raise RuntimeError('no query ran while the busy figures were taken')
    return idle, busy, ran


def measure_overhead(d, llm, where):
    llm.set_script(READ_ANSWER * (QUERIES + 1))
    b = d.browser()
    # one warm-up query (connections, the wiki's caches)
    r = b.query('What is an apple?', timeout=60)
    assert r.status == 200, r
    overhead, recorded = [], []
    for _ in range(QUERIES):
        t0 = time.perf_counter()
        r = b.query('What is an apple?', timeout=60)
        e2e = (time.perf_counter() - t0) * 1000
        assert r.status == 200, r
        t = r.json['timings_ms']
        overhead.append(e2e - t['wiki'] - t['model'])
        recorded.append(t['total'] - t['wiki'] - t['model'])
    print(f'pipeline overhead, state directory on {where}, {QUERIES} queries (one wiki_read, then '
          f'the answer; end to end over HTTP minus wiki and model time):')
    print(f'  median {statistics.median(overhead):.2f} ms, p90 {pct(overhead, 90):.2f} ms, '
          f'min {min(overhead):.2f} ms (target: median < 5 ms)')
    print(f'  inside the daemon (record: total - wiki - model, whole ms): '
          f'median {statistics.median(recorded):.1f} ms')


READ_AS_QUERIES = int(os.environ.get('READ_AS_QUERIES', '30'))


def measure_read_as():
    """The read check's cost per tool call: person mode against service
    mode on one wiki, queries alternating in blocks of five."""
    w = mediawiki.Wiki(restricted=True).start()
    llm = fake_llm.FakeLLM([]).start()
    tmp = tempfile.mkdtemp(prefix='wikiweb-bench-')
    daemons = {}
    try:
        pw = os.path.join(tmp, 'wiki-password')
        with open(pw, 'w') as f:
            f.write(w.bot_password)
        for mode in ('service', 'person'):
            daemons[mode] = harness.Daemon(
                None, WIKI_WEB_WIKI_API_URL=w.api_url, WIKI_WEB_LLM_URL=llm.url, WIKI_WEB_LLM_MODEL='bench',
                WIKI_WEB_LOG_LEVEL='6', WIKI_WEB_WIKI_USERNAME=w.bot_user, WIKI_WEB_WIKI_PASSWORD_FILE=pw,
                WIKI_WEB_WIKI_READ_AS=mode).start()
        wiki_ms = {m: [] for m in daemons}
        e2e_ms = {m: [] for m in daemons}
        llm.set_script(READ_ANSWER * (2 * READ_AS_QUERIES + 2))
        for m, d in daemons.items():  # warm-up
            assert d.browser().query('What is an apple?', timeout=60).status == 200
        for block in range(READ_AS_QUERIES // 5):
            for m, d in daemons.items():
                b = d.browser()
                for _ in range(5):
                    t0 = time.perf_counter()
                    r = b.query('What is an apple?', timeout=60)
                    e2e_ms[m].append((time.perf_counter() - t0) * 1000)
                    assert r.status == 200, r
                    wiki_ms[m].append(r.json['timings_ms']['wiki'])
        s, p = statistics.median(wiki_ms['service']), statistics.median(wiki_ms['person'])
        print(f'WIKI_WEB_WIKI_READ_AS, {len(wiki_ms["person"])} queries each, one wiki_read per query '
              f'(a bot login each query, then the read; person mode also the check):')
        print(f'  wiki time per query: service median {s:.1f} ms, person median {p:.1f} ms; '
              f'the check adds {p - s:.1f} ms per tool call')
        print(f'  end to end: service median {statistics.median(e2e_ms["service"]):.1f} ms, '
              f'person median {statistics.median(e2e_ms["person"]):.1f} ms')
        # The check alone, next to a read, as the bot, alternating.
        import http.cookiejar
        import urllib.parse
        import urllib.request
        op = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        def get(**p):
            p.update(format='json', formatversion='2')
            t0 = time.perf_counter()
            with op.open(w.api_url + '?' + urllib.parse.urlencode(p)) as r:
                body = json.load(r)
            return (time.perf_counter() - t0) * 1000, body

        tok = get(action='query', meta='tokens', type='login')[1]['query']['tokens']['logintoken']
        with op.open(w.api_url, urllib.parse.urlencode(dict(
                action='login', lgname=w.bot_user, lgpassword=w.bot_password, lgtoken=tok,
                format='json')).encode()) as r:
            assert json.load(r)['login']['result'] == 'Success'
        check, read = [], []
        for _ in range(READ_AS_QUERIES):
            check.append(get(action='wikiwebreadcheck', user='Alice', titles='Apple')[0])
            read.append(get(action='query', prop='revisions|info', titles='Apple', rvslots='main',
                            rvprop='content|ids', inprop='url', redirects='1')[0])
        print(f'  one request alone, {READ_AS_QUERIES} each, alternating: the check median '
              f'{statistics.median(check):.1f} ms, a read median {statistics.median(read):.1f} ms')
    finally:
        for d in daemons.values():
            d.discard()
        llm.stop()
        w.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def print_round(i, idle, busy, what):
    p_idle, p_busy = pct(idle, 99), pct(busy, 99)
    print(f'    round {i + 1}: idle median {statistics.median(idle):.3f} ms, p99 {p_idle:.3f} ms; '
          f'{what} median {statistics.median(busy):.3f} ms, p99 {p_busy:.3f} ms; '
          f'ratio {p_busy / p_idle:.2f}')
    return p_busy / p_idle


def print_ratios(ratios):
    print(f'    p99 ratio busy/idle: median {statistics.median(ratios):.2f} '
          f'(min {min(ratios):.2f}, max {max(ratios):.2f} over {len(ratios)} rounds; target <= 1.5)')


def measure_status(d, llm, w, where):
    print(f'GET /api/v1/queue/status, {STATUS_REQUESTS} requests per figure ({BLOCKS} blocks alternating idle '
          f'and busy), state directory on {where}:')
    if where == 'disk':
        print('  control, no query: the "busy" blocks with a CPU burner at SCHED_IDLE instead (the machine\'s '
              'own floor):')
        ratios = []
        for i in range(ROUNDS):
            idle, burning = control_latencies(d)
            ratios.append(print_round(i, idle, burning, 'burner'))
        print(f'    p99 ratio: median {statistics.median(ratios):.2f} '
              f'(min {min(ratios):.2f}, max {max(ratios):.2f} over {ROUNDS} rounds)')
    all_cpus = os.sched_getaffinity(0)
    for fixtures in ('normal', 'idle', 'apart'):
        if fixtures == 'normal':
            print('  fixtures (php, fake model, query client) at normal priority:')
        elif fixtures == 'idle':
            fixtures_to_sched_idle(w)
            print('  fixtures at SCHED_IDLE, the daemon and the probe at normal priority '
                  '(in production the wiki and the model run elsewhere):')
        else:
            if not pin_apart(w, d):
                print('  (one CPU: no figures with the fixtures on a CPU of their own)')
                continue
            print(f'  fixtures at SCHED_IDLE and on CPU {min(FIXTURE_CPUS)} only, the daemon and the probe on '
                  f'the other CPUs:')
        ratios = []
        try:
            for i in range(ROUNDS):
                idle, busy, ran = round_latencies(d, llm, fixtures != 'normal')
                ratios.append(print_round(i, idle, busy, f'busy ({ran} queries)'))
        finally:
            if fixtures == 'apart':
                unpin(all_cpus)
        print_ratios(ratios)


def main():
    wikiwebd = find_wikiwebd()
    if not wikiwebd:
        print('wikiwebd not found; pass its path', file=sys.stderr)
        return 2
    why = mediawiki.available()
    if why:
        print('no MediaWiki: ' + why, file=sys.stderr)
        return 2
    harness.WIKIWEBD = wikiwebd
    if os.environ.get('READ_AS_ONLY'):
        measure_read_as()
        return 0
    shm = tempfile.mkdtemp(prefix='wikiweb-bench-', dir='/dev/shm') if os.path.isdir('/dev/shm') else None
    try:
        # The history syncs once per query (an fdatasync() of its WAL, up
        # to ~4 ms on this machine's disk, on a worker thread; the answer
        # waits for it): measured once with the state directory on disk and
        # once on tmpfs, where it is free, to tell the history's share from
        # the pipeline's own. Each with fixtures of its own (the last
        # figures lower their priority).
        for where, state in (('disk', None), ('tmpfs', shm)):
            if where == 'tmpfs' and not state:
                continue
            w = mediawiki.Wiki().start()
            llm = fake_llm.FakeLLM([]).start()
            d = None
            try:
                env = dict(WIKI_WEB_WIKI_API_URL=w.api_url, WIKI_WEB_LLM_URL=llm.url,
                           WIKI_WEB_LLM_MODEL='bench', WIKI_WEB_LOG_LEVEL='6')
                if state:
                    env['WIKI_WEB_STATE_DIRECTORY'] = state
                d = harness.Daemon(None, **env).start()
                measure_overhead(d, llm, where)
                measure_status(d, llm, w, where)
            finally:
                if d:
                    d.discard()
                llm.stop()
                w.stop()
        measure_read_as()
    finally:
        if shm:
            shutil.rmtree(shm, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
