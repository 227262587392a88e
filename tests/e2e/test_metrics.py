#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Metrics (API.md 12.3) against the real daemon: wikiwebd with a second
socket named "metrics" (as wikiwebd-metrics.socket passes it), scraped over
HTTP; Debian's promtool checks the text format, and a real Prometheus
scrapes it (OpenMetrics) and answers PromQL with exactly the counts of a
known sequence of queries. Loopback only; Prometheus's waits are bounded."""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402

API = '/api/v1'
OPENMETRICS_ACCEPT = ('application/openmetrics-text;version=1.0.0,application/openmetrics-text;'
                      'version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1')


def scrape(d, accept=None, path='/metrics', method='GET', port=None):
    conn = http.client.HTTPConnection('127.0.0.1', port or d.metrics_port, timeout=10)
    try:
        headers = {'Accept': accept} if accept else {}
        t0 = time.monotonic()
        conn.request(method, path, headers=headers)
        r = conn.getresponse()
        body = r.read().decode()
        return r.status, r.getheader('Content-Type'), body, time.monotonic() - t0
    finally:
        conn.close()


def samples(text):
    """{'name{labels}': value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            k, _, v = line.rpartition(' ')
            out[k] = float(v)
    return out


class MetricsTest(harness.DaemonTestCase):

    def llm(self, steps):
        f = fake_llm.FakeLLM(steps).start()
        self.addCleanup(f.stop)
        return f

    def metrics_daemon(self, llm, **env):
        # No wiki request is made by a model that answers at once; the URL
        # only has to be configured.
        return self.daemon(metrics=True, WIKI_WEB_WIKI_API_URL=llm.url.rsplit('/', 1)[0] + '/api.php',
                           WIKI_WEB_LLM_URL=llm.url, WIKI_WEB_LLM_MODEL='test-model', **env)

    def test_exposition(self):
        d = self.metrics_daemon(self.llm([{'answer': 'Forty-two.'}]))
        b = d.browser()
        self.assertStatus(b.post(API + '/query', {'question': 'What?'}, timeout=30), 200)

        status, ctype, text, _ = scrape(d)
        self.assertEqual(status, 200)
        self.assertEqual(ctype, 'text/plain; version=0.0.4; charset=utf-8')
        s = samples(text)
        self.assertEqual(s['wikiweb_up'], 1)
        self.assertEqual(s['wikiweb_queries_total{status="succeeded"}'], 1)
        self.assertEqual(s['wikiweb_state{state="idle"}'], 1)
        self.assertEqual((s['wikiweb_slots{state="idle"}'], s['wikiweb_slots{state="reserved"}'],
                          s['wikiweb_slots{state="running"}']), (1, 0, 0))
        self.assertEqual(s['wikiweb_admission_open'], 1)
        self.assertEqual(s['wikiweb_query_duration_seconds_count'], 1)
        self.assertGreater(s['wikiweb_model_tokens_total{kind="prompt"}'], 0)
        self.assertGreaterEqual(s['wikiweb_http_requests_total{code="200"}'], 2)
        self.assertGreaterEqual(s['wikiweb_http_connections'], 0)
        for name in ('process_cpu_seconds_total', 'process_open_fds', 'process_max_fds',
                     'process_resident_memory_bytes', 'process_virtual_memory_bytes',
                     'process_start_time_seconds'):
            self.assertIn(name, s)
        self.assertNotIn('# EOF', text)

        status, ctype, om, _ = scrape(d, accept=OPENMETRICS_ACCEPT)
        self.assertEqual(ctype, 'application/openmetrics-text; version=1.0.0; charset=utf-8')
        self.assertTrue(om.endswith('# EOF\n'), om[-200:])
        self.assertIn('# TYPE wikiweb_queries counter\n', om)
        self.assertIn('# UNIT wikiweb_query_duration_seconds seconds\n', om)

        # Only /metrics, only GET and HEAD; never on the API's socket.
        self.assertEqual(scrape(d, path='/')[0], 404)
        self.assertEqual(scrape(d, method='POST')[0], 405)
        self.assertEqual(scrape(d, method='HEAD')[0], 200)
        self.assertEqual(scrape(d, port=d.port)[0], 404)

        promtool = shutil.which('promtool')
        if not promtool:
            harness.skip_or_fail('promtool not installed (apt-get install prometheus)')
        p = subprocess.run([promtool, 'check', 'metrics'], input=text, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, f'promtool check metrics:\n{p.stdout}{p.stderr}')

    def test_counted_where_they_happen(self):
        """The model's tokens and time are counted as its reply arrives, the
        ticket's wait at the claim: a scrape while the query is still in
        its second model step already has them (API.md 12.3)."""
        first = {'tool_calls': [{'name': 'no_such_tool', 'arguments': {}}]}
        d = self.metrics_daemon(self.llm([first, {'delay': 4, 'answer': 'Forty-two.'}]))
        b = d.browser()
        result = {}
        t = threading.Thread(target=lambda: result.update(
            r=b.post(API + '/query', {'question': 'What?'}, timeout=30)))
        t.start()
        try:
            deadline = time.monotonic() + 3
            while True:
                s = samples(scrape(d)[2])
                if s['wikiweb_model_tokens_total{kind="prompt"}'] > 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertGreater(s['wikiweb_model_tokens_total{kind="prompt"}'], 0)
            self.assertGreater(s['wikiweb_query_phase_seconds_total{phase="model"}'], 0)
            self.assertIn('wikiweb_query_phase_seconds_total{phase="queue"}', s)
            self.assertEqual(s['wikiweb_queries_total{status="succeeded"}'], 0)
            self.assertEqual(s['wikiweb_state{state="running"}'], 1)
        finally:
            t.join()
        self.assertStatus(result['r'], 200)
        s = samples(scrape(d)[2])
        self.assertEqual(s['wikiweb_queries_total{status="succeeded"}'], 1)
        self.assertGreater(s['wikiweb_model_tokens_total{kind="completion"}'], 0)

    def test_no_metrics_socket(self):
        """Without wikiwebd-metrics.socket there is nothing to scrape."""
        d = self.daemon()
        self.assertEqual(d.browser().get('/metrics').status, 404)

    def test_prometheus_counts(self):
        """Two succeeded, one failed with a known code, one ticket expired:
        Prometheus's PromQL says exactly that."""
        prometheus = shutil.which('prometheus')
        if not prometheus:
            harness.skip_or_fail('prometheus not installed (apt-get install prometheus)')
        llm = self.llm([{'answer': 'One.'}, {'answer': 'Two.'}])
        d = self.metrics_daemon(llm, WIKI_WEB_QUEUE_RESERVATION_SECONDS='1',
                                WIKI_WEB_QUEUE_HEARTBEAT_SECONDS='5')
        b = d.browser()
        self.assertStatus(b.post(API + '/query', {'question': 'One?'}, timeout=30), 200)
        self.assertStatus(b.post(API + '/query', {'question': 'Two?'}, timeout=30), 200)
        # The script is exhausted: the model answers 500.
        r = b.post(API + '/query', {'question': 'Three?'}, timeout=30)
        self.assertGreaterEqual(r.status, 500, r)
        code = r.json['error']['code']
        # A ticket promoted at once whose reservation runs out.
        self.assertStatus(d.browser().join(), 201)
        deadline = time.monotonic() + 10
        while samples(scrape(d)[2])['wikiweb_tickets_removed_total{reason="reservation"}'] < 1:
            self.assertLess(time.monotonic(), deadline, 'the reservation did not expire')
            time.sleep(0.2)

        tmp = tempfile.mkdtemp(prefix='wikiweb-prometheus-')
        self.addCleanup(shutil.rmtree, tmp, True)
        with open(os.path.join(tmp, 'prometheus.yml'), 'w') as f:
            f.write('global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n'
                    'scrape_configs:\n  - job_name: wikiweb\n    static_configs:\n'
                    f'      - targets: ["127.0.0.1:{d.metrics_port}"]\n')
        web = harness.free_port()
        log = open(os.path.join(tmp, 'prometheus.log'), 'wb')
        p = subprocess.Popen([prometheus, '--config.file=' + os.path.join(tmp, 'prometheus.yml'),
                              '--storage.tsdb.path=' + os.path.join(tmp, 'data'),
                              f'--web.listen-address=127.0.0.1:{web}'],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

        def stop():
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.addCleanup(stop)

        def promql(q):
            url = f'http://127.0.0.1:{web}/api/v1/query?' + urllib.parse.urlencode({'query': q})
            with urllib.request.urlopen(url, timeout=5) as resp:
                doc = json.load(resp)
            assert doc['status'] == 'success', doc
            return {json.dumps(x['metric'], sort_keys=True): float(x['value'][1])
                    for x in doc['data']['result']}

        queries = {
            'sum(wikiweb_queries_total{status="succeeded"})': 2,
            'sum(wikiweb_queries_total{status="failed"})': 1,
            f'sum(wikiweb_queries_total{{status="failed",code="{code}"}})': 1,
            'sum(wikiweb_tickets_removed_total{reason=~"heartbeat|reservation"})': 1,
            'wikiweb_query_duration_seconds_count': 3,
            'up{job="wikiweb"}': 1,
        }
        deadline = time.monotonic() + 60
        got = {}
        while True:
            try:
                got = {q: sum(promql(q).values()) if promql(q) else None for q in queries}
            except OSError:
                got = {}
            if got == queries:
                break
            if time.monotonic() > deadline or p.poll() is not None:
                with open(os.path.join(tmp, 'prometheus.log')) as f:
                    self.fail(f'PromQL {got} != {queries}; prometheus log:\n{f.read()[-3000:]}')
            time.sleep(0.5)
        print(f'# PromQL: {got}', file=sys.stderr)


if __name__ == '__main__':
    harness.main()
