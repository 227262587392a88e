#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The web page (API.md 13), served by the real wikiwebd and used
in a real browser: Debian's chromium, headless, driven by python3-selenium
through chromedriver, against the test MediaWiki (tests/fixtures/mediawiki.py)
and the scripted model (tests/fixtures/fake_llm.py), all on 127.0.0.1.

Run with Debian's /usr/bin/python3 (python3-selenium lives there): meson
does. Skips (77) without chromium, chromium-driver or python3-selenium,
unless WIKIWEB_TEST_NO_SKIP=1. Screenshots go to $WIKIWEB_SCREENSHOT_DIR
(meson: build/meson-logs/screenshots), else to a temporary directory that
is printed.

What a person does is done with the keyboard and the mouse, and what they
would see is read from the DOM while it happens."""

import base64
import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import socketserver
import sqlite3
import struct
import sys
import tempfile
import threading
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'fixtures'))

import harness  # noqa: E402
import fake_llm  # noqa: E402
import mediawiki  # noqa: E402

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
# axe-core, from the npm registry at the version tests/e2e/package-lock.json
# pins (packaging/install-deps.sh runs npm ci): injected into the page.
AXE = os.path.join(HERE, 'node_modules', 'axe-core', 'axe.min.js')
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
FILES = {'/': 'text/html; charset=utf-8', '/app.js': 'text/javascript; charset=utf-8',
         '/markdown.js': 'text/javascript; charset=utf-8', '/style.css': 'text/css; charset=utf-8',
         '/favicon.svg': 'image/svg+xml', '/i18n.js': 'text/javascript; charset=utf-8'}
# The catalogs, one a language (docs/WEB.md "Languages").
I18N = os.path.join(HERE, '..', '..', 'src', 'www', 'i18n')
FILES.update({f'/i18n/{n}': 'application/json' for n in sorted(os.listdir(I18N)) if n.endswith('.json')})

SHOTS = os.environ.get('WIKIWEB_SCREENSHOT_DIR') or tempfile.mkdtemp(prefix='wikiweb-screenshots-')
os.makedirs(SHOTS, exist_ok=True)
WIKI = None


def wiki():
    global WIKI
    if WIKI is None:
        WIKI = mediawiki.Wiki().start()
    return WIKI


def expected_source(title):
    """(title after redirects, canonical URL, revision id) as the wiki says."""
    _, _, body = wiki().api(action='query', titles=title, redirects='1', prop='revisions|info',
                            rvprop='ids', inprop='url')
    page = json.loads(body)['query']['pages'][0]
    return {'title': page['title'], 'url': page.get('canonicalurl') or page['fullurl'],
            'revision_id': page['revisions'][0]['revid']}


def browser_missing():
    try:
        import selenium  # noqa: F401
    except ImportError:
        return f'python3-selenium is not installed for {sys.executable} (run this with /usr/bin/python3)'
    for p, pkg in ((CHROMIUM, 'chromium'), (CHROMEDRIVER, 'chromium-driver')):
        if not os.access(p, os.X_OK):
            return f'{p} not found (install {pkg})'
    if not os.path.exists(AXE):
        return f'{AXE} not found (run packaging/install-deps.sh, or npm ci in tests/e2e)'
    return None


def get(d, path, headers=None, method='GET'):
    """A plain request to the daemon: (status, headers, body)."""
    c = http.client.HTTPConnection('127.0.0.1', d.port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.msg, r.read()
    finally:
        c.close()


FETCH_RECORDER = """
    (() => {
      const f = window.fetch;
      window.__fetches = [];
      window.fetch = function (url, init) {
        window.__fetches.push([(init && init.method) || 'GET', String(url)]);
        return f.apply(this, arguments);
      };
    })();"""


class Chrome:
    """One headless Chromium with a fresh profile: its own cookie jar, its
    own download folder, its console log kept."""

    def __init__(self, tc, width=1100, height=1000, lang=None):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.tc = tc
        self.profile = tempfile.mkdtemp(prefix='wikiweb-chrome-')
        self.downloads = os.path.join(self.profile, 'downloads')
        os.mkdir(self.downloads)
        o = webdriver.ChromeOptions()
        o.binary_location = CHROMIUM
        # Root in a container: no sandbox of Chromium's own; and nothing
        # that would try the (closed) network.
        for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                  '--disable-background-networking', '--disable-component-update', '--disable-sync',
                  '--disable-dev-shm-usage', '--disable-features=Translate,OptimizationHints,MediaRouter',
                  f'--window-size={width},{height}', f'--user-data-dir={self.profile}'):
            o.add_argument(a)
        prefs = {'download.default_directory': self.downloads, 'download.prompt_for_download': False}
        if lang:
            # The browser's language, as a person's system sets it.
            o.add_argument(f'--lang={lang}')
            prefs['intl.accept_languages'] = lang
        o.add_experimental_option('prefs', prefs)
        o.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
        self.driver.execute_cdp_cmd('Browser.setDownloadBehavior',
                                    {'behavior': 'allow', 'downloadPath': self.downloads})
        # Every fetch() of the page, from the first script of each document
        # on (a reload too): which requests it made, in order.
        self.driver.execute_cdp_cmd('Page.addScriptToEvaluateOnNewDocument', {'source': FETCH_RECORDER})
        # The viewport exactly (a window is never narrower than about 500
        # px): what a phone of that width shows.
        self.driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride',
                                    {'width': width, 'height': height, 'deviceScaleFactor': 1, 'mobile': False})
        self.log = []
        tc.addCleanup(self.quit)

    def quit(self):
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    def open(self, d, path='/'):
        self.driver.get(f'http://127.0.0.1:{d.port}{path}')
        self.wait(lambda: self.js('return document.readyState') == 'complete', what='the page loads')
        return self

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, cond, timeout=30, what='a condition'):
        """cond()'s first true value, polled every 50 ms; on a timeout, a
        screenshot and the page's text in the failure."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(lambda _: cond())
        except TimeoutException:
            self.shot('timeout')
            raise AssertionError(f'timed out after {timeout} s waiting for {what}; '
                                 f'page text:\n{self.text("body")}\nconsole: {self.console()}') from None

    def find(self, css):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def finds(self, css):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self, css):
        return self.js('const e = document.querySelector(arguments[0]); return e ? e.innerText : null', css)

    def console(self):
        self.log += self.driver.get_log('browser')
        return self.log

    def check_console(self, allow=()):
        """No error in the console, except messages matching one of allow."""
        bad = [e for e in self.console() if e['level'] in ('SEVERE', 'ERROR')
               and not any(re.search(a, e['message']) for a in allow)]
        self.tc.assertEqual(bad, [], 'errors in the browser console')

    def shot(self, name, full=False, css=None):
        """A screenshot into SHOTS: the window; full: the whole page; css:
        the element it selects (the README's picture)."""
        path = os.path.join(SHOTS, name + '.png')
        if full or css:
            if css:
                r = self.js("const r = document.querySelector(arguments[0]).getBoundingClientRect();"
                            " return {x: r.left + scrollX - 8, y: r.top + scrollY - 8,"
                            " width: r.width + 16, height: r.height + 16}", css)
            else:
                size = self.driver.execute_cdp_cmd('Page.getLayoutMetrics', {})['cssContentSize']
                r = {'x': 0, 'y': 0, 'width': size['width'], 'height': size['height']}
            shot = self.driver.execute_cdp_cmd('Page.captureScreenshot', {
                'format': 'png', 'captureBeyondViewport': True, 'clip': dict(r, scale=1)})
            with open(path, 'wb') as f:
                f.write(base64.b64decode(shot['data']))
        else:
            self.driver.save_screenshot(path)
        print(f'screenshot: {path}', file=sys.stderr)
        return path

    def axe(self, state):
        """axe-core on the page as it is now: no violation of any rule
        (WCAG 2.x A and AA, and axe's best practices). Injected through
        WebDriver, which the page's CSP does not govern."""
        if not self.js('return !!window.axe'):
            with open(AXE, encoding='utf-8') as f:
                self.js(f.read())
        self.driver.set_script_timeout(60)
        found = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            " axe.run(document, {resultTypes: ['violations']})"
            "  .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
            "    nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)}))))"
            "  .catch(e => done([{id: 'axe-error', help: String(e)}]));")
        self.tc.assertEqual(found, [], f'axe-core violations in the state "{state}"')
        self.axed = getattr(self, 'axed', []) + [state]
        return found

    def fetches(self):
        """[method, path] of each fetch() since the document loaded."""
        return self.js('return window.__fetches || []')

    def cookie(self):
        for c in self.driver.get_cookies():
            if c['name'] == harness.COOKIE_NAME:
                return c['value']
        return None

    def ask(self, question, pages=()):
        """Type the question (and pages) and press Ask, as a person does."""
        q = self.find('#question')
        q.clear()
        q.send_keys(question)
        p = self.find('#pages')
        p.clear()
        if pages:
            p.send_keys('\n'.join(pages))
        self.find('#ask-button').click()

    def wait_answer(self, timeout=60):
        """Until the record is shown: the answer or the failure."""
        self.wait(lambda: self.js("return document.getElementById('live').classList.contains('done')"
                                  " || !document.getElementById('failure').hidden"),
                  timeout, 'the query record on the page')


class Listener:
    """An HTTP server on another loopback port (another origin): records
    every request it gets. A hostile answer points there."""

    def __init__(self, tc):
        self.requests = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.requests.append(self.path)
                self.send_response(200)
                self.send_header('Content-Type', 'image/png')
                self.send_header('Content-Length', '0')
                self.end_headers()

            do_POST = do_GET

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = S(('127.0.0.1', 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        tc.addCleanup(self.stop)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def add_artifact(d, qid, name, media_type, data, n):
    """An artifact of query qid, written into the store as the pipeline
    would have (the e2e daemon has no sandbox to make one)."""
    aid = 'af_' + f'{n:x}' * 32
    db = sqlite3.connect(os.path.join(d.state_directory, 'history.sqlite3'))
    with db:
        db.execute('INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)'
                   ' VALUES (?, ?, ?, ?, ?, ?, ?)',
                   (aid, qid, name, media_type, len(data), hashlib.sha256(data).hexdigest(), data))
    db.close()
    return aid


def png(width, height, pixel):
    """A PNG (8-bit RGB) whose pixel(x, y) is an (r, g, b) tuple."""
    raw = b''.join(b'\0' + b''.join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))

    def chunk(kind, data):
        return (struct.pack('>I', len(data)) + kind + data
                + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))


def bar_chart(x, y):
    """Three bars (1, 2, 3) on white: what a run_python plot might leave."""
    for k, colour in enumerate(((47, 93, 138), (213, 94, 0), (0, 158, 115))):
        left = 20 + k * 50
        if left <= x < left + 35 and y >= 90 - 25 * (k + 1):
            return colour
    return (255, 255, 255)


CHART = png(170, 100, bar_chart)

ANSWER = """Apples are number **1** in the orchard inventory, bananas number *2* [Apple] [Banana].

| fruit | number | harvest month |
|---|---:|---:|
| Apple | 1 | 1 |
| Banana | 2 | 2 |

- Both like sun and well-drained soil.
- The `wiki_read` tool read both pages.

More on [the wiki's main page]({base}/index.php/Main_Page)."""

SEARCH_READ_ANSWER = [
    {'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'orchard fruit', 'limit': 5}}]},
    {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
    {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Banana'}}]},
    {'answer': ANSWER},
]


class PageServing(harness.DaemonTestCase):
    """The files, their headers, and WIKI_WEB_UI=false: plain HTTP."""

    def test_files_and_headers(self):
        d = self.daemon()
        etags = set()
        for path, media_type in FILES.items():
            status, h, body = get(d, path)
            self.assertEqual(status, 200, path)
            self.assertEqual(h['Content-Type'], media_type, path)
            self.assertEqual(h['Content-Security-Policy'], CSP, path)
            self.assertEqual(h['Cache-Control'], 'no-cache', path)
            self.assertEqual(h['X-Content-Type-Options'], 'nosniff', path)
            self.assertEqual(h['Vary'], 'Accept-Encoding', path)
            self.assertIsNone(h['Content-Encoding'], 'asked for nothing: the bytes as they are')
            self.assertEqual(h['ETag'], '"' + hashlib.sha256(body).hexdigest() + '"', path)
            self.assertEqual(h['Content-Length'], str(len(body)), path)
            self.assertIsNone(h['Set-Cookie'], 'the page itself makes no session')
            etags.add(h['ETag'])
            # Revalidation: the same bytes, so 304 and no body.
            status, h2, body2 = get(d, path, {'If-None-Match': h['ETag']})
            self.assertEqual((status, body2), (304, b''), path)
            self.assertEqual(h2['ETag'], h['ETag'])
            self.assertEqual(h2['Content-Security-Policy'], CSP)
            status, _, body2 = get(d, path, {'If-None-Match': 'W/"other", ' + h['ETag']})
            self.assertEqual(status, 304, path)
            status, _, body2 = get(d, path, {'If-None-Match': '"other"'})
            self.assertEqual((status, body2), (200, body), path)
            status, h2, body2 = get(d, path, method='HEAD')
            self.assertEqual((status, body2, h2['Content-Length']), (200, b'', str(len(body))), path)
        self.assertEqual(len(etags), len(FILES))

        # Compressed at build time: the same bytes through gzip, with an ETag
        # of their own, to a client that takes gzip; not to one that refuses it.
        saved = 0
        for path in FILES:
            _, _, plain = get(d, path)
            etag = '"' + hashlib.sha256(plain).hexdigest() + '-gzip"'
            for ae in ('gzip, deflate, br', 'br;q=1.0, gzip;q=0.5', '*'):
                status, h, body = get(d, path, {'Accept-Encoding': ae})
                self.assertEqual(status, 200, path)
                if path == '/favicon.svg' and h['Content-Encoding'] is None:
                    continue  # too small to gain
                self.assertEqual(h['Content-Encoding'], 'gzip', (path, ae))
                self.assertEqual(h['Vary'], 'Accept-Encoding', path)
                self.assertEqual(h['ETag'], etag, path)
                self.assertEqual(h['Content-Length'], str(len(body)), path)
                self.assertEqual(zlib.decompress(body, 16 + zlib.MAX_WBITS), plain, path)
                self.assertLess(len(body), len(plain), path)
            saved += len(plain) - len(body)
            status, h2, body2 = get(d, path, {'Accept-Encoding': 'gzip', 'If-None-Match': h['ETag']})
            self.assertEqual((status, body2, h2['ETag']), (304, b'', h['ETag']), path)
            self.assertEqual(h2['Vary'], 'Accept-Encoding', path)
            # The other representation's ETag does not match this one.
            status, _, _ = get(d, path, {'Accept-Encoding': 'identity', 'If-None-Match': h['ETag']})
            self.assertEqual(status, 200, path)
            for ae in ('identity', 'gzip;q=0', 'gzip;q=0, *', 'br', 'gzip;q=2', 'x' * 4000):
                status, h, body = get(d, path, {'Accept-Encoding': ae})
                self.assertEqual((status, h['Content-Encoding'], body), (200, None, plain), (path, ae[:20]))
        print(f'gzip saves {saved} bytes of the page\'s files', file=sys.stderr)
        self.assertGreater(saved, 30000)

        status, h, body = get(d, '/?question=x')
        self.assertEqual(status, 200, 'a query string does not change the path')
        # Nothing else is served: no directory, no other name.
        for path in ('/index.html', '/app.js/', '/www/app.js', '/../meson.build', '/%2e%2e/meson.build',
                     '/favicon.ico', '/embed.py', '//app.js', '/APP.JS', '/i18n/', '/i18n', '/i18n/xx.json',
                     '/i18n/../app.js', '/en.json', '/i18n/glossary.json'):
            status, h, body = get(d, path)
            self.assertEqual(status, 404, path)
            self.assertEqual(json.loads(body)['error']['code'], 'not_found', path)
            self.assertEqual(h['Cache-Control'], 'no-store', path)
        status, h, body = get(d, '/', method='POST')
        self.assertEqual(status, 405)
        self.assertEqual(h['Allow'], 'GET, HEAD')
        # The API is untouched: no-store, JSON.
        status, h, body = get(d, '/api/v1/health')
        self.assertEqual((status, h['Cache-Control']), (200, 'no-store'))
        self.assertIsNone(h['Content-Security-Policy'])

    def test_ui_false(self):
        d = self.daemon(WIKI_WEB_UI='false')
        for path in FILES:
            status, h, body = get(d, path)
            self.assertEqual(status, 404, path)
            self.assertEqual(json.loads(body)['error']['code'], 'not_found', path)
        self.assertStatus(d.browser().get('/api/v1/health'), 200)
        d2 = self.daemon(WIKI_WEB_UI='true')
        self.assertEqual(get(d2, '/')[0], 200)


class PageBase(harness.DaemonTestCase):

    @classmethod
    def setUpClass(cls):
        why = browser_missing() or mediawiki.available()
        if why:
            harness.skip_or_fail(why)

    def llm(self, steps):
        f = fake_llm.FakeLLM(steps).start()
        self.addCleanup(f.stop)
        return f

    def page_daemon(self, steps, **env):
        llm = self.llm(steps)
        settings = {'WIKI_WEB_WIKI_API_URL': wiki().api_url, 'WIKI_WEB_LLM_URL': llm.url,
                    'WIKI_WEB_LLM_MODEL': 'test-model'}
        settings.update(env)
        d = self.daemon(**settings)
        d.llm = llm
        # Steps held by a test that failed reply, so the daemon can stop.
        self.addCleanup(llm.release_all)
        return d

    def chrome(self, d=None, **kw):
        c = Chrome(self, **kw)
        if d:
            c.open(d)
        return c

    @staticmethod
    def streams(d):
        """Whether this daemon has the event streams of API.md 11: without
        a ticket, GET /queue/events is ticket_not_found there, not_found
        (no such path) before."""
        status, _, body = get(d, '/api/v1/queue/events')
        return json.loads(body)['error']['code'] != 'not_found' if status == 404 else True


class Answered(PageBase):

    def test_ask_answer_sources_artifacts(self):
        """Ask from the page; the answer renders with its Markdown, the
        sources carry their revisions; artifacts: a CSV as a table that
        downloads byte-exact, an image inline."""
        base = wiki().api_url.rsplit('/', 1)[0]
        d = self.page_daemon([dict(s) for s in SEARCH_READ_ANSWER[:3]] +
                             [{'answer': ANSWER.replace('{base}', base), 'delay': 2}])
        c = self.chrome(d)
        c.ask('Which fruits come first in the orchard inventory, and when are they harvested?')
        # While the model writes, the store gets the files the sandbox would
        # have left (the e2e daemon has none); the record then lists them.
        qid = c.wait(lambda: c.js("return JSON.parse(sessionStorage.getItem('wikiweb.running'))"),
                     what='the running query id')
        self.assertRegex(qid, r'^qr_[0-9a-f]{32}$')
        csv = 'fruit,number,note\r\nApple,1,"red, or green"\r\n"Banana",2,"a ""long"" one"\r\nÄpfel,3,\r\n'.encode()
        add_artifact(d, qid, 'fruit table.csv', 'text/csv', csv, 1)
        add_artifact(d, qid, 'chart.png', 'image/png', CHART, 2)
        add_artifact(d, qid, 'notes.bin', 'application/octet-stream', b'\x00\x01\xff', 3)
        c.wait_answer()

        self.assertEqual(c.find('#failure').get_attribute('hidden'), 'true')
        answer = c.find('#answer')
        self.assertIn('Apples are number 1 in the orchard inventory', answer.text)
        self.assertEqual(c.text('#answer strong'), '1')
        self.assertEqual(c.text('#answer em'), '2')
        rows = c.js("return [...document.querySelectorAll('#answer table tr')]"
                    ".map(r => [...r.cells].map(x => x.textContent))")
        self.assertEqual(rows, [['fruit', 'number', 'harvest month'], ['Apple', '1', '1'], ['Banana', '2', '2']])
        self.assertEqual(c.js("return document.querySelector('#answer td:nth-child(2)').className"), 'align-right')
        self.assertEqual(len(c.finds('#answer li')), 2)
        self.assertEqual(c.text('#answer li code'), 'wiki_read')
        self.assertEqual(c.js("return document.querySelector('#answer a').href"), f'{base}/index.php/Main_Page')

        sources = c.js("return [...document.querySelectorAll('#sources li')].map(li => "
                       "({title: li.querySelector('a').textContent, url: li.querySelector('a').href,"
                       " rev: li.querySelector('.rev').textContent}))")
        want = [expected_source('Apple'), expected_source('Banana')]
        self.assertEqual(sources, [{'title': s['title'], 'url': s['url'], 'rev': f'revision {s["revision_id"]}'}
                                   for s in want])

        c.wait(lambda: c.js("return document.querySelectorAll('#artifacts table tr').length") == 4,
               what='the CSV table')
        rows = c.js("return [...document.querySelectorAll('#artifacts table tr')]"
                    ".map(r => [...r.cells].map(x => x.textContent))")
        self.assertEqual(rows, [['fruit', 'number', 'note'], ['Apple', '1', 'red, or green'],
                                ['Banana', '2', 'a "long" one'], ['Äpfel', '3', '']])
        c.wait(lambda: c.js("const i = document.querySelector('#artifacts img');"
                            " return i && i.complete && i.naturalWidth === 170"), what='the image inline')
        links = c.js("return [...document.querySelectorAll('#artifacts a.download')].map(a => a.textContent)")
        self.assertEqual(links, ['Download fruit table.csv', 'Download chart.png', 'Download notes.bin'])
        # The history has it, newest first.
        c.wait(lambda: c.finds('#history-list li'), what='the history')
        self.assertEqual(c.text('#history-list li .q'),
                         'Which fruits come first in the orchard inventory, and when are they harvested?')
        self.assertEqual(c.js("return document.querySelector('#history-list li').dataset.id"), qid)
        c.shot('answer', full=True)
        c.axe('answered with files and sources')
        c.shot('answer-section', css='#query')  # docs/web-page.png

        c.find('#artifacts a.download').click()
        path = os.path.join(c.downloads, 'fruit table.csv')
        c.wait(lambda: os.path.exists(path) and not any(n.endswith('.crdownload') for n in os.listdir(c.downloads)),
               what='the download')
        with open(path, 'rb') as f:
            self.assertEqual(f.read(), csv)

        # Opened again from the history: the same record.
        c.find('#history-list li button.open').click()
        c.wait(lambda: c.js("return document.querySelectorAll('#artifacts table tr').length") == 4,
               what='the CSV table of the reopened record')
        self.assertEqual(c.text('#answer strong'), '1')
        self.assertEqual(len(c.finds('#sources li')), 2)
        c.check_console()

    def test_failed_query_shows_its_code(self):
        d = self.page_daemon([{'error': 'server'}])
        c = self.chrome(d)
        c.ask('What happens when the model fails?')
        c.wait_answer()
        failure = c.text('#failure')
        self.assertIn('The query failed:', failure)
        self.assertIn('(upstream_failed)', failure)
        c.axe('failed')
        c.wait(lambda: c.js("const li = document.querySelector('#history-list li'); return li && li.dataset.status")
               == 'failed', what='the failed query in the history')
        # Through the query stream the failure is a record, not an HTTP error.
        c.check_console()

    def test_answer_without_python_says_so(self):
        """A query that gave up waiting for a starting sandbox (the record's
        "sandbox": "starting") says under its answer that it was made
        without Python."""
        d = self.page_daemon([{'answer': 'From the wiki alone.'}, {'answer': 'Again.'}],
                             WIKI_WEB_TEST_FAULTS='1', WIKI_WEB_TEST_SANDBOX_STARTING_MS='60000')
        c = self.chrome(d)
        c.ask('Can you compute it?')
        c.wait_answer(timeout=60)
        self.assertIn('From the wiki alone.', c.text('#answer'))
        self.assertIn('answered without Python: the sandbox was still starting', c.text('#record-meta'))
        c.shot('answer-without-python', css='#query')
        c.check_console()

    def test_error_before_admission(self):
        """An error the API gives (here queue_full: no queue at all) is shown
        as its message and code; nothing is left running."""
        d = self.page_daemon([], WIKI_WEB_QUEUE_MAX_LENGTH=0)
        c = self.chrome(d)
        c.ask('Is there room?')
        c.wait(lambda: c.text('#errors'), what='the error')
        self.assertIn('The queue is full', c.text('#errors'))
        self.assertIn('(queue_full)', c.text('#errors'))
        self.assertIsNone(c.find('#ask-button').get_attribute('disabled'))
        c.axe('an API error before admission')
        # Client-side checks have their messages too, and put the focus there.
        c.find('#question').clear()
        c.find('#ask-button').click()
        c.wait(lambda: 'Write a question first.' in (c.text('#errors') or ''), what='the empty question')
        self.assertEqual(c.js('return document.activeElement.id'), 'question')
        c.axe('a check of the form')
        c.check_console((r'/api/v1/query .*503',))


HOSTILE = """Intro <img src=x onerror="window.__pwned = 1"> and <b>bold?</b>

<script>window.__pwned = 2</script>

[click me](javascript:window.__pwned=3) and [data](data:text/html,<script>window.__pwned=4</script>)

[elsewhere](http://127.0.0.1:{port}/md-link) and <a href="http://127.0.0.1:{port}/raw-a">raw</a>

![pixel](http://127.0.0.1:{port}/md-image.png)

<img src="http://127.0.0.1:{port}/raw-img.png"> <iframe src="http://127.0.0.1:{port}/frame"></iframe>

<style>body {{ background: url(http://127.0.0.1:{port}/css) }}</style>
<link rel="stylesheet" href="http://127.0.0.1:{port}/link.css">

| a | b |
|---|---|
| <img src=x onerror="window.__pwned = 5"> | [j](javascript:window.__pwned=6) |

`<svg onload="window.__pwned = 7">` and **<svg/onload=window.__pwned=8>**
"""


class Hostile(PageBase):

    def test_hostile_answer_is_inert(self):
        """Markup in the model's answer (and in the question) stays text: no
        script runs, nothing is loaded from another origin, live or when
        the record is opened again from the history after a reload."""
        other = Listener(self)
        answer = HOSTILE.format(port=other.port)
        d = self.page_daemon([{'answer': answer}])
        c = self.chrome(d)
        question = 'Is <img src=x onerror="window.__pwned = 9"> a <script>window.__pwned=10</script> question?'
        c.ask(question)
        c.wait_answer()

        def check():
            self.assertIsNone(c.js('return window.__pwned === undefined ? null : window.__pwned'))
            self.assertEqual(c.js("return document.querySelectorAll('#query img, #query script, #query iframe,"
                                  " #query style, #query link, #query svg:not(.icon), #query b,"
                                  " #history img').length"), 0)
            # The only drawings are the page's own: the rating's two icons.
            self.assertEqual(c.js("return [...document.querySelectorAll('#query svg')]"
                                  ".map(s => s.closest('button').id)"), ['feedback-up', 'feedback-down'])
            # The only links made are http: ones (the Markdown link, and the
            # URL inside the CSS as a bare URL), and they load nothing by
            # themselves: nothing was turned into an element that would.
            links = c.js("return [...document.querySelectorAll('#answer a')]"
                         ".map(a => [a.href, a.rel, a.target, a.textContent])")
            self.assertEqual(links, [
                [f'http://127.0.0.1:{other.port}/md-link', 'noopener noreferrer nofollow', '_blank',
                 f'elsewhere (127.0.0.1:{other.port})'],
                [f'http://127.0.0.1:{other.port}/css', 'noopener noreferrer nofollow', '_blank',
                 f'http://127.0.0.1:{other.port}/css']])
            text = c.text('#answer')
            for s in ('<img src=x onerror="window.__pwned = 1">', '<script>window.__pwned = 2</script>',
                      'click me', '<svg onload="window.__pwned = 7">', '<svg/onload=window.__pwned=8>'):
                self.assertIn(s, text)
            self.assertNotIn('javascript:', c.js("return [...document.querySelectorAll('a')].map(a => a.href)"
                                                 ".join(' ')"))
            self.assertEqual(c.text('#query-question'), question)
            c.wait(lambda: question in (c.text('#history-list') or ''), what='the question in the history')

        check()
        time.sleep(0.5)  # anything the answer could have started has had time to leave
        self.assertEqual(other.requests, [])

        # Again from the history, after a reload.
        c.driver.refresh()
        c.wait(lambda: c.finds('#history-list li button.open'), what='the history')
        c.find('#history-list li button.open').click()
        c.wait_answer()
        check()
        time.sleep(0.5)
        self.assertEqual(other.requests, [])
        c.check_console()
        c.shot('hostile', full=True)


class History(PageBase):

    def test_history_more_open_delete(self):
        """Newest first, ten at a time and more on demand; an earlier record
        opens, and its address (/#/history/<id>, ask_wiki's record_url)
        opens it again, also after a reload; one not there or another
        person's says not found; a deleted one is gone from the page and
        the API."""
        n = 13
        d = self.page_daemon([{'answer': f'Answer number {i}.'} for i in range(n + 1)])
        c = self.chrome(d)
        # The page made the session: ask through the API with its cookie.
        c.wait(c.cookie, what='the session cookie')
        b = d.browser(cookie=c.cookie())
        ids = []
        for i in range(n):
            r = b.query(f'Question number {i}?')
            self.assertStatus(r, 200)
            ids.append(r.json['id'])
        c.driver.refresh()
        c.wait(lambda: len(c.finds('#history-list li')) == 10, what='ten entries')
        self.assertEqual([e.get_attribute('data-id') for e in c.finds('#history-list li')], ids[::-1][:10])
        more = c.find('#history-more')
        self.assertTrue(more.is_displayed())
        more.click()
        c.wait(lambda: len(c.finds('#history-list li')) == n, what='all entries')
        self.assertFalse(c.find('#history-more').is_displayed())
        self.assertEqual([e.get_attribute('data-id') for e in c.finds('#history-list li')], ids[::-1])

        # Open the oldest.
        c.find(f'#history-list li[data-id="{ids[0]}"] button.open').click()
        c.wait(lambda: c.text('#answer') == 'Answer number 0.', what='the oldest record')
        self.assertEqual(c.text('#query-question'), 'Question number 0?')
        self.assertEqual(c.js('return document.activeElement.id'), 'query-title')
        page = f'http://127.0.0.1:{d.port}/'
        self.assertEqual(c.driver.current_url, f'{page}#/history/{ids[0]}')

        # The record's address, opened directly: the record, the keyboard
        # on its title; a reload keeps it.
        c.driver.get(f'{page}#/history/{ids[2]}')
        c.wait(lambda: c.text('#answer') == 'Answer number 2.', what='the record at its address')
        c.driver.refresh()
        c.wait(lambda: c.text('#answer') == 'Answer number 2.', what='the record after a reload')
        self.assertEqual(c.text('#query-question'), 'Question number 2?')
        self.assertEqual(c.js('return document.activeElement.id'), 'query-title')
        self.assertEqual(c.driver.current_url, f'{page}#/history/{ids[2]}')
        c.shot('history-record')
        c.axe('a record at its address')

        # Another person's record, and one that never was: not found.
        other = d.browser().query('Whose question is this?')
        self.assertStatus(other, 200)
        with open(os.path.join(I18N, 'en.json'), encoding='utf-8') as f:
            en = json.load(f)
        for absent in (other.json['id'], 'qr_' + '0' * 32):
            c.driver.get(f'{page}#/history/{absent}')
            c.driver.refresh()
            c.wait(lambda: c.text('#errors'), what='not found')
            self.assertIn(en['error.query_not_found'], c.text('#errors'))
            self.assertFalse(c.find('#query').is_displayed())
        c.shot('history-record-not-found')
        c.axe('a record not found')
        c.driver.get(f'{page}#/history/{ids[0]}')
        c.wait(lambda: c.text('#answer') == 'Answer number 0.', what='the oldest record again')
        c.find('#history-more').click()
        c.wait(lambda: len(c.finds('#history-list li')) == n, what='all entries again')

        # Delete it (the one shown) and another.
        c.find(f'#history-list li[data-id="{ids[0]}"] button.delete').click()
        c.wait(lambda: not c.finds(f'#history-list li[data-id="{ids[0]}"]'), what='the entry to go')
        self.assertFalse(c.find('#query').is_displayed())
        c.find(f'#history-list li[data-id="{ids[5]}"] button.delete').click()
        c.wait(lambda: not c.finds(f'#history-list li[data-id="{ids[5]}"]'), what='the entry to go')
        # The keyboard stays in the list: on the next entry.
        self.assertEqual(c.js('return document.activeElement.closest("li").dataset.id'), ids[4])
        for gone in (ids[0], ids[5]):
            self.assertError(b.get(f'/api/v1/history/{gone}'), 'query_not_found')
        self.assertEqual(len(b.get('/api/v1/history?limit=100').json['items']), n - 2)
        self.assertEqual(c.driver.current_url, page)
        c.check_console(allow=[r'404'])


class WholeHistory(PageBase):

    def test_download_and_delete_history(self):
        """"Download my history" gets the ZIP of GET /api/v1/history/export;
        "Delete my history" asks first in a modal dialog (the focus on
        Cancel, Escape cancels and nothing is sent, the focus back on the
        button), then sends DELETE /api/v1/history: 409 busy while a query
        of the person's runs is said so; 204 empties the list. Once the
        daemon has DELETE /api/v1/history; before, the request and the
        error shown are checked. axe-core in the dialog."""
        d = self.page_daemon([{'answer': 'The first answer.'}, {'answer': 'The second answer.'},
                              {'answer': 'Held.', 'hold': 'busy'}])
        c = self.chrome(d)
        c.wait(c.cookie, what='the session cookie')
        b = d.browser(cookie=c.cookie())
        ids = [b.query(q).json['id'] for q in ('First question?', 'Second question?')]
        c.driver.refresh()
        c.wait(lambda: len(c.finds('#history-list li')) == 2, what='two entries')
        self.assertTrue(c.find('#history-actions').is_displayed())
        c.axe('the history with its download and deletion')

        # The download: the browser saves the ZIP under its name.
        link = c.find('#history-download')
        self.assertEqual(link.get_attribute('href'), f'http://127.0.0.1:{d.port}/api/v1/history/export')
        self.assertIsNotNone(link.get_attribute('download'))
        link.click()

        def saved():
            names = [n for n in os.listdir(c.downloads) if n.endswith('.zip')]
            return names[0] if names else None
        name = c.wait(saved, what='the history downloaded')
        self.assertRegex(name, r'^wikiweb-history-\d{4}-\d\d-\d\d\.zip$')
        import zipfile
        with zipfile.ZipFile(os.path.join(c.downloads, name)) as z:
            self.assertEqual({r['id'] for r in json.loads(z.read('records.json'))}, set(ids))

        # The confirmation: modal, the focus on Cancel; Escape cancels.
        n_fetches = len(c.fetches())
        c.find('#history-erase').click()
        c.wait(lambda: c.js("return document.getElementById('erase-dialog').open"), what='the dialog')
        self.assertEqual(c.js('return document.activeElement.id'), 'erase-cancel')
        self.assertTrue(c.js("return document.getElementById('erase-dialog').matches(':modal')"))
        c.axe('the deletion asked to be confirmed')
        c.shot('history-erase-dialog')
        from selenium.webdriver.common.keys import Keys
        c.find('#erase-cancel').send_keys(Keys.ESCAPE)
        c.wait(lambda: not c.js("return document.getElementById('erase-dialog').open"), what='the dialog to close')
        self.assertEqual(c.js('return document.activeElement.id'), 'history-erase')
        # Cancel closes it too; neither sends anything.
        c.find('#history-erase').click()
        c.find('#erase-cancel').click()
        self.assertFalse(c.js("return document.getElementById('erase-dialog').open"))
        self.assertEqual(c.fetches()[n_fetches:], [])

        status, _, _ = get(d, '/api/v1/history', method='DELETE')
        if status == 405:
            # Before DELETE /api/v1/history: the request is made, the error said.
            c.find('#history-erase').click()
            c.find('#erase-confirm').click()
            c.wait(lambda: c.text('#errors'), what='the error')
            self.assertIn(['DELETE', '/api/v1/history'], c.fetches())
            self.assertEqual(len(c.finds('#history-list li')), 2)
            c.check_console(allow=['405'])
            return

        # Busy: a query of the person's runs.
        t = threading.Thread(target=lambda: b.query('Third question?', timeout=60))
        t.start()
        self.addCleanup(t.join, 60)
        self.addCleanup(d.llm.release, 'busy')
        c.wait(lambda: b.get('/api/v1/history').json['items'][0]['status'] == 'running', what='a running query')
        c.find('#history-erase').click()
        c.find('#erase-confirm').click()
        c.wait(lambda: c.text('#history-erase-status'), what='the busy notice')
        self.assertIn('still being answered', c.text('#history-erase-status'))
        self.assertFalse(c.js("return document.getElementById('erase-dialog').open"))
        self.assertEqual(c.js('return document.activeElement.id'), 'history-erase')
        c.shot('history-erase-busy')
        d.llm.release('busy')
        t.join(60)

        # Deleted: the list empties, the focus on its heading.
        c.find('#history-erase').click()
        c.find('#erase-confirm').click()
        c.wait(lambda: not c.finds('#history-list li'), what='the list to empty')
        self.assertTrue(c.find('#history-empty').is_displayed())
        self.assertFalse(c.find('#history-actions').is_displayed())
        self.assertEqual(c.js('return document.activeElement.id'), 'history-title')
        self.assertEqual(c.text('#history-erase-status'), 'Your history has been deleted.')
        self.assertEqual(b.get('/api/v1/history').json['items'], [])
        c.axe('the history deleted')
        c.shot('history-erased')
        c.check_console(allow=['409'])


class Conversations(PageBase):

    def test_follow_up_export_share(self):
        """One browser: an answer, "Ask a follow-up" under it, the
        conversation as turns and as one entry of the history, "Download as
        Markdown", "Copy link" and the read-only shared view at its URL (the
        same browser: the link works for anyone who has it without
        identity), a wrong link; axe-core in each new state."""
        quote = 'The apple tree likes sun and well-drained soil.'
        d = self.page_daemon([
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apples'}}]},
            {'answer': 'The apple tree likes **sun** [1].\n\n[1] Apple: "' + quote + '"'},
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}]},
            {'answer': 'In month 1 [1].\n\n[1] Apple: "Harvest usually happens in month 1."'},
        ])
        c = self.chrome(d)
        c.ask('What does the apple tree like?')
        c.wait_answer()
        # The history is reloaded after the answer, not with it: wait for it.
        c.wait(lambda: c.text('#history-list li .q') == 'What does the apple tree like?', what='the first record')
        first = c.js("return document.querySelector('#history-list li').dataset.id")
        self.assertRegex(first, harness.QUERY_ID_RE)
        c.wait(lambda: c.find('#follow-form').is_displayed(), what='the follow-up form')
        self.assertTrue(c.find('#conversation-actions').is_displayed())
        self.assertFalse(c.find('#turns-section').is_displayed())
        c.axe('an answer with its conversation actions')

        # The follow-up, typed under the answer.
        c.find('#follow-question').send_keys('And when is it harvested?')
        c.find('#follow-button').click()
        c.wait(lambda: c.text('#query-question') == 'And when is it harvested?' and
               c.js("return document.getElementById('live').classList.contains('done')"),
               what='the follow-up answer')
        c.wait(lambda: c.find('#turns-section').is_displayed(), what='the earlier turn')
        turns = c.js("return [...document.querySelectorAll('#turns > li')].map(li =>"
                     " [li.querySelector('.turn-question').textContent, li.querySelector('.answer').textContent])")
        self.assertEqual(turns, [['What does the apple tree like?', 'The apple tree likes sun [1].']])
        self.assertIn('In month 1', c.text('#answer'))
        self.assertEqual(c.js("return document.querySelector('#citations li').dataset.status"), 'verified')
        self.assertEqual(c.find('#follow-question').get_attribute('value'), '')
        # The model got the first turn before the new question.
        msgs = d.llm.chat_requests()[-2]['messages']
        self.assertEqual([m['content'] for m in msgs if m['role'] == 'user'],
                         ['What does the apple tree like?', 'And when is it harvested?'])
        # One entry in the history: the conversation's newest question.
        c.wait(lambda: c.text('#history-list li .q') == 'And when is it harvested?', what='the history entry')
        self.assertEqual(len(c.finds('#history-list li')), 1)
        self.assertEqual(c.text('#history-list li .badge.conversation'), 'conversation')
        second = c.js("return document.querySelector('#history-list li').dataset.id")
        self.assertEqual(c.js("return document.querySelector('#history-list li').dataset.conversation"), first)
        c.shot('conversation', full=True)
        c.axe('a follow-up with its earlier turn')

        # Download as Markdown: both turns, in order.
        c.find('#export-link').click()
        path = os.path.join(c.downloads, f'conversation-{second}.md')
        c.wait(lambda: os.path.exists(path) and not any(n.endswith('.crdownload') for n in os.listdir(c.downloads)),
               what='the Markdown download')
        with open(path, encoding='utf-8') as f:
            md = f.read()
        self.assertLess(md.index('> What does the apple tree like?'), md.index('> And when is it harvested?'))
        self.assertIn('#:~:text=', md)

        # Copy link: the link is shown (and copied where the browser lets it).
        c.find('#share-button').click()
        c.wait(lambda: c.find('#share-line').is_displayed(), what='the share link')
        url = c.find('#share-url').get_attribute('value')
        self.assertRegex(url, rf'^http://127\.0\.0\.1:{d.port}/#/shared/sh_[0-9a-f]{{64}}$')
        self.assertTrue(c.find('#unshare-button').is_displayed())
        c.axe('a share link shown')

        # The shared view at its URL: read-only, both turns, no form.
        c.driver.get(url)
        c.wait(lambda: len(c.finds('#shared-turns > li')) == 2, what='the shared conversation')
        self.assertFalse(c.find('#ask').is_displayed())
        self.assertFalse(c.find('#history').is_displayed())
        self.assertEqual(c.js("return [...document.querySelectorAll('#shared-turns .turn-question')].map(h => h.textContent)"),
                         ['What does the apple tree like?', 'And when is it harvested?'])
        self.assertEqual(c.js("return [...document.querySelectorAll('#shared-turns .citation')].map(x => x.id)"),
                         ['cite-1-1', 'cite-2-1'])
        self.assertTrue(c.find('#shared-export').is_displayed())
        self.assertEqual(c.js('return document.activeElement.id'), 'shared-title')
        c.shot('shared', full=True)
        c.axe('a shared conversation')

        # In Arabic, switched on the shared view: its words from the
        # catalog, right to left, the conversation still there.
        from selenium.webdriver.support.ui import Select
        with open(os.path.join(I18N, 'ar.json'), encoding='utf-8') as f:
            ar = json.load(f)
        Select(c.find('#language-select')).select_by_value('ar')
        c.wait(lambda: c.js('return document.documentElement.dir') == 'rtl' and
               c.text('#shared-title') == ar['shared.title'], what='the shared view in Arabic')
        c.wait(lambda: len(c.finds('#shared-turns > li')) == 2, what='the turns after the switch')
        self.assertEqual(c.text('#shared-export'), ar['conversation.download'])
        c.shot('shared-ar', full=True)
        c.axe('a shared conversation in Arabic')

        # A wrong link says so (in the language chosen).
        c.driver.get(url[:-1] + ('0' if url[-1] != '0' else '1'))
        c.wait(lambda: c.text('#shared-error'), what='the wrong link')
        self.assertEqual(c.text('#shared-error'), ar['shared.not_found'])
        c.axe('a wrong share link')
        c.check_console(allow=[r'404'])


class Usable(PageBase):

    def test_narrow_keyboard_dark(self):
        """360 px wide without sideways scrolling; asked by keyboard alone,
        in a sensible focus order with a visible focus; labels and live
        regions; the dark scheme when the system prefers it."""
        d = self.page_daemon([{'answer': 'Short answer.\n\n| a | very long column heading | another long one |'
                                         ' and a third |\n|---|---|---|---|\n| 1 | 2 | 3 | 4 |'}])
        c = self.chrome(d, width=360, height=800)
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        self.assertEqual(c.js('return window.innerWidth'), 360)
        self.assertLessEqual(c.js('return document.documentElement.scrollWidth'), 360)
        # Every control has a label; the live parts are announced.
        for ctl in ('question', 'pages'):
            self.assertEqual(c.js(f"return document.querySelector('label[for={ctl}]').textContent.length > 0"), True)
        # One live region for what is told once (the turn, the answer); the
        # status line and the steps, which change often, are not live.
        self.assertEqual(c.find('#announce').get_attribute('aria-live'), 'polite')
        self.assertIsNone(c.find('#status').get_attribute('aria-live'))
        self.assertIsNone(c.find('#steps').get_attribute('role'))
        self.assertEqual(c.find('#errors').get_attribute('role'), 'alert')

        def keys(*seq):
            a = ActionChains(c.driver)
            for k in seq:
                if isinstance(k, tuple):  # (modifier, key)
                    a.key_down(k[0]).send_keys(k[1]).key_up(k[0])
                else:
                    a.send_keys(k)
            a.perform()

        def focused():
            return c.js('const e = document.activeElement; return e.id || e.className')

        order = []
        for _ in range(5):
            keys(Keys.TAB)
            order.append(focused())
        # The header's language switcher, which the skip link skips.
        self.assertEqual(order, ['skip', 'language-select', 'question', 'pages', 'ask-button'])
        keys((Keys.SHIFT, Keys.TAB), (Keys.SHIFT, Keys.TAB))
        self.assertEqual(focused(), 'question')
        # The focus is seen: an outline on the focused control.
        outline = c.js('const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth]')
        self.assertEqual(outline[0], 'solid')
        self.assertNotEqual(outline[1], '0px')
        # Ask with the keyboard: Ctrl+Enter in the question.
        keys('What is short?', (Keys.CONTROL, Keys.ENTER))
        c.wait_answer()
        self.assertEqual(c.text('#query-question'), 'What is short?')
        self.assertEqual(c.text('#answer p'), 'Short answer.')
        # A wide table scrolls inside its box, not the page.
        self.assertLessEqual(c.js('return document.documentElement.scrollWidth'),
                             c.js('return window.innerWidth'))
        c.shot('narrow-360', full=True)

        light = c.js('return getComputedStyle(document.body).backgroundColor')
        c.driver.execute_cdp_cmd('Emulation.setEmulatedMedia',
                                 {'features': [{'name': 'prefers-color-scheme', 'value': 'dark'}]})
        dark = c.js('return getComputedStyle(document.body).backgroundColor')
        self.assertEqual(light, 'rgb(255, 255, 255)')
        self.assertEqual(dark, 'rgb(15, 20, 25)')
        c.shot('narrow-360-dark', full=True)
        c.check_console()


# Records every value the status line's data-state takes (a mutation
# observer sees each change, even two in one task).
WATCH_STATES = """
    window.__states = [];
    new MutationObserver((records) => {
      for (const r of records) window.__states.push([r.oldValue, r.target.dataset.position || null]);
    }).observe(document.getElementById('status'),
               {attributes: true, attributeFilter: ['data-state'], attributeOldValue: true});"""


MAINTENANCE = """
    (() => {
      const f = window.fetch;
      window.fetch = function (url, init) {
        if (String(url) === '/api/v1/queue/join')
          return Promise.resolve(new Response(JSON.stringify({error: {code: 'queue_full',
              message: 'The queue is closed for maintenance'}}),
            {status: 503, headers: {'Content-Type': 'application/json', 'Retry-After': '60'}}));
        return f.apply(this, arguments);
      };
    })();"""


class Accessible(PageBase):
    """axe-core finds nothing in any state of the page: empty, running with
    steps, waiting, reserved, answered (with the history), closed for
    maintenance. (Answered with files and sources, failed, and the errors
    are checked in Answered, the queue's removal in Queue.)"""

    def test_states(self):
        d = self.page_daemon([dict(s) for s in SEARCH_READ_ANSWER[:3]] +
                             [{'answer': ANSWER.replace('{base}', 'http://127.0.0.1'), 'hold': 'first'},
                              {'answer': 'The second answer.'}])
        first = self.chrome(d)
        first.wait(lambda: 'health' in str(first.fetches()), what='the health check')
        self.assertFalse(first.find('#setup').is_displayed())
        first.axe('empty')
        first.ask('Which fruits come first?')
        first.wait(lambda: len(first.finds('#steps li.step')) >= 3, what='three steps')
        first.axe('running with steps')
        second = self.chrome(d)
        second.ask('The second question?')
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'waiting',
                    what='the second session queued')
        # Without its question kept, the turn is shown and waits for one.
        second.js("localStorage.removeItem('wikiweb.pending')")
        second.axe('waiting')
        d.llm.release('first')
        first.wait_answer()
        first.wait(lambda: first.finds('#history-list li'), what='the history')
        first.axe('answered, with the history')
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'reserved',
                    what='the second session reserved')
        second.axe('reserved')
        second.shot('reserved')
        # A third asks while admission is closed (the 503 of a drain, API.md 12.1).
        third = self.chrome(d)
        third.js(MAINTENANCE)
        third.ask('A third question?')
        third.wait(lambda: 'maintenance' in (third.text('#errors') or ''), what='the maintenance error')
        third.axe('closed for maintenance')
        third.shot('maintenance')
        for c in (first, second, third):
            c.check_console((r'/api/v1/queue/join .*503',))


TURN_RECORDER = """
    (() => {
      window.__notes = [];
      window.__states = [];
      const N = window.Notification;
      if (N)
        window.Notification = class extends N {
          constructor(title, opts) {
            super(title, opts);
            window.__notes.push([title, (opts && opts.body) || '', document.title]);
          }
        };
      new MutationObserver((records) => {
        for (const r of records)
          if (r.target.id === 'status') window.__states.push([r.target.dataset.state, r.target.dataset.position || null]);
      }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-state', 'data-position']});
      // What the live region says, each time it says something.
      window.__said = [];
      new MutationObserver((records) => {
        for (const r of records)
          if (r.target.id === 'announce' && r.target.textContent) window.__said.push(r.target.textContent);
      }).observe(document, {subtree: true, childList: true});
    })();"""


class Turn(PageBase):
    """Waiting, told honestly: "Notify me when it's my turn" with the
    permission granted (a notification, the title) and refused (the title
    and a banner); a reload keeps the place ("Reconnecting…", then the same
    position)."""

    def waiter(self, d, permission):
        c = self.chrome()
        origin = f'http://127.0.0.1:{d.port}'
        if permission == 'granted':
            c.driver.execute_cdp_cmd('Browser.grantPermissions', {'origin': origin, 'permissions': ['notifications']})
        else:
            c.driver.execute_cdp_cmd('Browser.setPermission', {'origin': origin, 'permission': {'name': 'notifications'},
                                                               'setting': 'denied'})
        c.driver.execute_cdp_cmd('Page.addScriptToEvaluateOnNewDocument', {'source': TURN_RECORDER})
        return c.open(d)

    def state(self, c):
        return c.js("const s = document.getElementById('status'); return [s.dataset.state, s.dataset.position || null]")

    def test_turn_is_told_and_reload_keeps_place(self):
        d = self.page_daemon([{'answer': f'Warm-up {i}.'} for i in range(10)] +
                             [{'answer': 'The first answer.', 'hold': 'first'},
                              {'answer': 'The second answer.', 'hold': 'second'},
                              {'answer': 'The third answer.', 'hold': 'third'}])
        # Ten queries first: the daemon knows enough durations for a range.
        warm = d.browser()
        for i in range(10):
            self.assertStatus(warm.query(question=f'Warm-up {i}?'), 200)
        first = self.chrome(d)
        first.ask('The first question?')
        self.wait_state(d, 'running')
        second = self.waiter(d, 'granted')
        title = second.js('return document.title')
        second.ask('The second question?')
        second.wait(lambda: self.state(second) == ['waiting', '1'], what='the second at position 1')
        third = self.waiter(d, 'denied')
        third.ask('The third question?')
        third.wait(lambda: self.state(third) == ['waiting', '2'], what='the third at position 2')
        self.assertIn('You have waited', third.text('#status'))
        # The range in words (API.md 5): "usually … to …, most likely about …"
        # or, when it is narrow, "about …".
        self.assertRegex(third.text('#status'),
                         r'Expected wait: (usually \d+ (sec|min|hr) to \d+ (sec|min|hr), most likely about|about)'
                         r' \d+(\.5)? (sec|min|hr)\.')
        for c in (second, third):
            self.assertTrue(c.find('#notify-button').is_displayed())
            c.find('#notify-button').click()
            c.wait(lambda: c.text('#notify-hint'), what='the answer to the permission')
        self.assertIn('You will get a notification', second.text('#notify-hint'))
        self.assertIn('Notifications are not allowed', third.text('#notify-hint'))
        third.axe('waiting, notifications refused')
        third.shot('waiting')

        # A reload keeps the place: "Reconnecting…", then the same position,
        # and the choice to be notified.
        third.driver.refresh()
        third.wait(lambda: self.state(third) == ['waiting', '2'], what='the third at position 2 after a reload')
        states = third.js('return window.__states')
        self.assertIn(['reconnecting', None], states)
        self.assertLess(states.index(['reconnecting', None]), states.index(['waiting', '2']), states)
        self.assertEqual(third.find('#notify-button').get_attribute('aria-pressed'), 'true')
        self.assertEqual(third.js("return JSON.parse(localStorage.getItem('wikiweb.pending')).question"),
                         'The third question?')

        # The second's turn: a notification (the title already says so), then
        # its answer, and the title is back.
        d.llm.release('first')
        second.wait(lambda: second.js('return window.__notes.length') > 0, timeout=30, what='the notification')
        notes = second.js('return window.__notes')
        self.assertEqual(notes[0][0], 'wikiweb: your turn')
        self.assertTrue(notes[0][2].startswith('(Your turn) '), notes)
        self.assertFalse(second.find('#banner').is_displayed())
        d.llm.release('second')
        second.wait_answer()
        self.assertEqual(second.text('#answer'), 'The second answer.')
        self.assertEqual(second.js('return document.title'), title)
        self.assertEqual(len(second.js('return window.__notes')), 1, 'told once')
        # A screen reader is told the turn and the answer, once each, and
        # nothing else (not each status, step or piece of the answer). The
        # live region is filled 50 ms after it is cleared (app.js announce()),
        # so the answer's line may come a moment after the answer is shown.
        second.wait(lambda: len(second.js('return window.__said')) >= 2, timeout=10,
                    what='the answer said by the live region')
        time.sleep(0.3)  # anything said after it would be counted too
        self.assertEqual(second.js('return window.__said'),
                         ['It is your turn.', 'The answer to “The second question?” is ready.'])

        # The third, refused: no notification, the title and a banner.
        third.wait(lambda: third.js('return document.title').startswith('(Your turn) '), timeout=30,
                   what='the title of the third')
        self.assertEqual(third.js('return window.__notes'), [])
        self.assertTrue(third.find('#banner').is_displayed())
        self.assertEqual(third.text('#banner'), 'It is your turn.')
        third.shot('turn-banner')
        third.axe('your turn, with the banner')
        d.llm.release('third')
        third.wait_answer()
        self.assertEqual(third.text('#answer'), 'The third answer.')
        self.assertEqual(third.js('return document.title'), title)
        self.assertFalse(third.find('#banner').is_displayed())
        for c in (first, second, third):
            c.check_console()


class Cutter:
    """A TCP forwarder on another loopback port in front of the daemon,
    whose connections the test can cut at once (a dropped connection), and
    which can refuse new ones for a while."""

    def __init__(self, tc, port):
        import socket
        self.target = port
        self.lsock = socket.socket()
        self.lsock.bind(('127.0.0.1', 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.conns = []
        self.refusing = False
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()
        tc.addCleanup(self.stop)

    def accept(self):
        import socket
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.refusing:
                c.close()
                continue
            u = socket.create_connection(('127.0.0.1', self.target))
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(a, b):
        import socket
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        import socket
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def stop(self):
        self.lsock.close()
        self.cut()


class Dropped(PageBase):
    """The connection drops while waiting (cut in between): the page says
    "Reconnecting…" while it cannot reach the daemon, and then shows the
    same position."""

    def test_dropped_connection_keeps_place(self):
        d = self.page_daemon([{'answer': 'The first answer.', 'hold': 'first'}, {'answer': 'The second answer.'}])
        first = self.chrome(d)
        first.ask('The first question?')
        self.wait_state(d, 'running')
        cutter = Cutter(self, d.port)
        second = self.chrome()
        second.driver.get(f'http://127.0.0.1:{cutter.port}/')
        second.wait(lambda: second.js('return document.readyState') == 'complete', what='the page loads')
        second.ask('The second question?')
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'waiting',
                    what='the second queued')
        cutter.refusing = True
        cutter.cut()
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'reconnecting',
                    what='"Reconnecting…"')
        self.assertEqual(second.text('#status'), 'Reconnecting…')
        second.shot('reconnecting')
        time.sleep(2)
        cutter.refusing = False
        second.wait(lambda: second.js("const s = document.getElementById('status');"
                                      " return s.dataset.state + ' ' + s.dataset.position") == 'waiting 1',
                    what='the same position again')
        self.assertEqual(self.peek(d)['queue_length'], 1, 'the same ticket, not a new one')
        d.llm.release('first')
        second.wait_answer()
        self.assertEqual(second.text('#answer'), 'The second answer.')
        first.check_console()
        second.check_console((r'queue/events', r'Failed to fetch', r'ERR_'))


class NotConfigured(PageBase):
    """A daemon without a wiki or a model: the page names the missing
    settings and points to the README instead of offering a form."""

    def test_notice_instead_of_form(self):
        d = self.daemon(WIKI_WEB_LLM_URL='http://127.0.0.1:9/v1')
        c = self.chrome(d)
        c.wait(lambda: c.find('#setup').is_displayed(), what='the notice')
        text = c.text('#setup')
        self.assertIn('WIKI_WEB_WIKI_API_URL', text)
        self.assertIn('WIKI_WEB_LLM_MODEL', text)
        self.assertNotIn('WIKI_WEB_LLM_URL', text)
        self.assertIn('Quick start', text)
        self.assertFalse(c.find('#ask-form').is_displayed())
        c.axe('not configured')
        c.shot('not-configured')
        c.check_console()


class Queue(PageBase):

    def test_two_sessions_queue(self):
        """The first session asks; the second, asking while the first runs,
        sees itself queued with its position, then its turn, asks by itself
        and gets its answer."""
        d = self.page_daemon([{'answer': 'The first answer.', 'delay': 4}, {'answer': 'The second answer.'}])
        first, second = self.chrome(d), self.chrome(d)
        second.js(WATCH_STATES)
        first.ask('The first question?')
        self.wait_state(d, 'running')
        second.ask('The second question?')
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'waiting',
                    what='the second session queued')
        status = second.text('#status')
        self.assertIn('you are number 1 in the queue', status)
        self.assertIn('Expected wait: no estimate yet.', status)
        self.assertIn('You have waited', status)
        self.assertEqual(second.js("return document.getElementById('status').dataset.position"), '1')
        self.assertTrue(second.find('#leave-button').is_displayed())
        second.shot('queued')

        first.wait_answer()
        self.assertEqual(first.text('#answer'), 'The first answer.')
        second.wait_answer()
        self.assertEqual(second.text('#answer'), 'The second answer.')
        self.assertEqual(second.text('#query-question'), 'The second question?')
        states = second.js('return window.__states.map(s => s[0]).concat([document.getElementById("status")'
                           '.dataset.state])')
        # Queued (at position 1), then reserved, then asking, then done.
        compact = [x for i, x in enumerate(states) if x and (i == 0 or x != states[i - 1])]
        self.assertEqual(compact[:3], ['waiting', 'reserved', 'asking'], states)
        self.assertFalse(second.find('#leave-button').is_displayed())
        # It followed the queue through the queue stream (API.md 11.1), not
        # by polling, and asked through the query stream (11.2).
        fetches = second.fetches()
        joined = fetches.index(['POST', '/api/v1/queue/join'])
        self.assertIn(['GET', '/api/v1/queue/events'], fetches[joined:])
        self.assertNotIn(['GET', '/api/v1/queue/status'], fetches[joined:])
        self.assertEqual(fetches[-3:-1], [['GET', '/api/v1/queue/events'], ['POST', '/api/v1/query']])
        for c in (first, second):
            c.check_console()

    def test_all_slots_busy(self):
        """With two admission slots, two questions run at once; a third
        waits, and the page says that every slot is busy, then that a slot
        (not "the slot") is reserved for it."""
        d = self.page_daemon([{'answer': 'One.', 'hold': 'one'}, {'answer': 'Two.', 'hold': 'two'},
                              {'answer': 'Three.'}], WIKI_WEB_QUEUE_SLOTS='2')
        first, second, third = self.chrome(d), self.chrome(d), self.chrome(d)
        third.js(WATCH_STATES)
        first.ask('The first question?')
        second.ask('The second question?')
        deadline = time.monotonic() + 20
        while self.peek(d)['slots']['running'] < 2:
            self.assertLess(time.monotonic(), deadline, 'two queries running')
            time.sleep(0.1)
        third.ask('The third question?')
        third.wait(lambda: third.js("return document.getElementById('status').dataset.state") == 'waiting',
                   what='the third session queued')
        self.assertIn('All 2 slots are busy: you are number 1 in the queue', third.text('#status'))
        third.shot('queued-two-slots')
        d.llm.release('one')
        third.wait_answer()
        self.assertEqual(third.text('#answer'), 'Three.')
        d.llm.release('two')
        second.wait_answer()
        for c in (first, second, third):
            c.check_console()

    def test_leave_the_queue(self):
        # The first answer is held until the second has left: under load a
        # fixed delay could end first, and the second's turn hide the button.
        d = self.page_daemon([{'answer': 'The first answer.', 'hold': 'first'}])
        first, second = self.chrome(d), self.chrome(d)
        first.ask('The first question?')
        self.wait_state(d, 'running')
        second.ask('The second question?')
        second.wait(lambda: second.find('#leave-button').is_displayed(), what='queued')
        second.find('#leave-button').click()
        second.wait(lambda: 'You left the queue.' in (second.text('#status') or ''), what='left')
        self.assertEqual(self.peek(d)['queue_length'], 0)
        d.llm.release('first')
        first.wait_answer()
        time.sleep(2.5)  # the second does not ask after all
        self.assertEqual(len(d.llm.chat_requests()), 1)
        for c in (first, second):
            c.check_console()


class Reload(PageBase):

    def test_reload_reattaches(self):
        """A reload in the middle of a query finds it again and shows it to
        its end."""
        d = self.page_daemon([
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}], 'delay': 1},
            {'answer': 'The answer, **after** the reload.', 'delay': 4}])
        c = self.chrome(d)
        c.ask('A slow question?')
        c.wait(lambda: c.js("return sessionStorage.getItem('wikiweb.running')"), what='the query known')
        c.driver.refresh()
        c.wait(lambda: 'Re-attached' in (c.text('#steps') or ''), what='the page to re-attach')
        self.assertEqual(c.text('#query-question'), 'A slow question?')
        self.assertEqual(self.peek(d)['state'], 'running', 'the reload did not end the query')
        c.wait_answer()
        self.assertEqual(c.text('#answer'), 'The answer, after the reload.')
        self.assertEqual(c.text('#answer strong'), 'after')
        self.assertEqual(c.text('#sources li a'), 'Apple')
        self.assertIsNone(c.js("return sessionStorage.getItem('wikiweb.running')"))
        self.assertIsNone(c.find('#ask-button').get_attribute('disabled'))
        # Through the re-attaching stream (API.md 11.3): the steps before the
        # reload are shown again, in order.
        qid = c.js("return document.querySelector('#history-list li').dataset.id")
        self.assertIn(['GET', f'/api/v1/history/{qid}/events'], c.fetches())
        self.assertEqual(c.js("return [...document.querySelectorAll('#steps li.step')].map(li => li.dataset.step)"),
                         ['1', '2'])
        self.assertIn('Reading “Apple”', c.text('#steps'))
        c.check_console()

    def test_reload_finds_the_ticket(self):
        """A reload while queued finds the ticket again, with the question,
        and asks it when the turn comes."""
        d = self.page_daemon([{'answer': 'The first answer.', 'delay': 4}, {'answer': 'The second answer.'}])
        first, second = self.chrome(d), self.chrome(d)
        first.ask('The first question?')
        self.wait_state(d, 'running')
        second.ask('The second question?')
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'waiting',
                    what='queued')
        second.driver.refresh()
        second.wait(lambda: second.js("return document.getElementById('status').dataset.state") == 'waiting',
                    what='queued again after the reload')
        self.assertEqual(second.find('#question').get_attribute('value'), 'The second question?')
        second.wait_answer()
        self.assertEqual(second.text('#answer'), 'The second answer.')
        for c in (first, second):
            c.check_console()


# Records what #steps and #answer show at each change, with the time:
# [ms, facts, answer text, done] where facts flattens the steps into
# "step N", "call NAME ARG", "result NAME TEXT".
WATCH_LIVE = """
    window.__snaps = [];
    const snap = () => {
      const facts = [];
      for (const li of document.querySelectorAll('#steps > li.step')) {
        facts.push('step ' + li.dataset.step);
        for (const c of li.querySelectorAll('li.call')) {
          facts.push('call ' + c.querySelector('.what').textContent);
          const r = c.querySelector('.result');
          if (r) facts.push('result ' + r.textContent.replace(/ in [0-9.]+ m?s$/, ''));
        }
      }
      window.__snaps.push([performance.now(), facts, document.getElementById('answer').textContent,
                           document.getElementById('live').classList.contains('done')]);
    };
    new MutationObserver(snap).observe(document.getElementById('query'),
                                       {childList: true, subtree: true, characterData: true, attributes: true});"""


class Live(PageBase):
    """The query stream (API.md 11.2) as the page shows it."""

    def test_steps_appear_live(self):
        """Each step, search, page read and the answer appear in order while
        the query runs, read from the DOM as it changes; what a step wrote
        before its tool calls is folded away under it; a streamed answer
        grows on the page."""
        d = self.page_daemon([
            {'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'orchard fruit'}}],
             'content': 'Let me search the wiki first.', 'delay': 0.8},
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apple'}}], 'delay': 0.8},
            {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'No such page at all'}}], 'delay': 0.8},
            {'answer': 'Apples come **first**, then bananas. ' * 6, 'delay': 0.8, 'chunk_delay': 0.4}])
        self.assertTrue(self.streams(d), 'this daemon has no event streams')
        c = self.chrome(d)
        c.js(WATCH_LIVE)
        c.ask('Which fruit comes first?')
        c.wait_answer()
        snaps = c.js('return window.__snaps')
        final = snaps[-1][1]
        apple = expected_source('Apple')
        self.assertEqual(final, [
            'step 1', 'call Searching the wiki for “orchard fruit”', 'result : 5 results',
            'step 2', 'call Reading “Apple”', f'result : read Apple (revision {apple["revision_id"]})',
            'step 3', 'call Reading “No such page at all”', 'result : no such page',
            'step 4'])
        done_at = next(t for t, _, _, done in snaps if done)
        seen = []
        for t, facts, _, done in snaps:
            # Every picture on the way is the beginning of the final one.
            self.assertEqual(facts, final[:len(facts)], snaps)
            if not done and (not seen or facts != seen[-1][1]):
                seen.append((t, facts))
        # Each fact appeared on its own, during the run: the model's steps
        # are 0.8 s apart, so the first read came well before the end.
        self.assertGreaterEqual(len(seen), 8, seen)
        first_read = next(t for t, facts in seen if len(facts) >= 6)
        self.assertGreater(done_at - first_read, 1000, seen)

        # The link of the page read, and step 1's thinking aloud, folded.
        link = c.js("return [...document.querySelectorAll('#steps li.call a')].map(a => [a.textContent, a.href])")
        self.assertEqual(link, [['Apple', apple['url']]])
        self.assertEqual(c.js("const d = document.querySelector('#steps li.step details');"
                              " return [d.open, d.textContent]"),
                         [False, 'What the model wroteLet me search the wiki first.'])
        answer = 'Apples come first, then bananas. ' * 6
        self.assertEqual(c.text('#answer'), answer.strip())
        self.assertNotIn('Let me search', c.text('#answer'))
        # The answer as the model wrote it: the model streamed it (in pieces
        # 0.4 s apart), and the page showed it growing before the record.
        self.assertTrue(all(r.get('stream') for r in d.llm.chat_requests()), 'the model was not asked to stream')
        partial = {a for _, _, a, done in snaps if not done and a and a.strip() != answer.strip()}
        self.assertGreaterEqual(len(partial), 2, 'the answer was not shown growing')
        for a in partial:
            self.assertTrue(answer.startswith(a[:10]), a)
        c.shot('live', full=True)
        c.check_console()


    def test_rejected_calls_shown_as_text(self):
        """A call the daemon refuses (an unknown tool whose name is markup,
        bad arguments) shows as a call and its refusal, the name as text."""
        hostile = '<img src=x onerror="window.__pwned=1">'
        d = self.page_daemon([
            {'tool_calls': [{'name': hostile, 'arguments': {}},
                            {'name': 'wiki_search', 'arguments': {'query': ''}}]},
            {'answer': 'Nothing to compute.'}])
        c = self.chrome(d)
        c.js(WATCH_LIVE)
        c.ask('Delete the wiki?')
        c.wait_answer()
        final = c.js('return window.__snaps')[-1][1]
        self.assertEqual(final[:3], ['step 1', f'call Calling {hostile}', final[2]])
        self.assertTrue(final[2].startswith('result : refused: unknown tool'), final)
        self.assertEqual(final[3], 'call Searching the wiki for “”')
        self.assertTrue(final[4].startswith('result : refused: query must be a string'), final)
        self.assertIsNone(c.js('return window.__pwned || null'))
        self.assertEqual(c.js("return document.querySelectorAll('#steps img').length"), 0)
        c.shot('rejected-calls', css='#query')
        c.check_console()


class Markdown(PageBase):
    """The renderer alone, in the browser (markdown.js), on the page as served."""

    CASES = [
        ('plain', 'Hello', '<p>Hello</p>'),
        ('paragraphs', 'a\nb\n\nc', '<p>a b</p><p>c</p>'),
        ('emphasis', '*a* _b_ **c** __d__ ***e*** ~~f~~',
         '<p><em>a</em> <em>b</em> <strong>c</strong> <strong>d</strong> <strong><em>e</em></strong> <del>f</del></p>'),
        ('intraword underscore', 'snake_case_name and 2*3*4', '<p>snake_case_name and 2<em>3</em>4</p>'),
        ('unclosed', '**a and *b', '<p>**a and *b</p>'),
        ('code', 'use `a <b>` and ``x`y``', '<p>use <code>a &lt;b&gt;</code> and <code>x`y</code></p>'),
        ('fence', '```python\nprint("<b>")\n```', '<pre><code>print("&lt;b&gt;")</code></pre>'),
        ('unclosed fence', '~~~\nx', '<pre><code>x</code></pre>'),
        ('headings', '# A\n### B #', '<h3>A</h3><h5>B</h5>'),
        ('bullets', '- a\n- b *c*\n* d', '<ul><li>a</li><li>b <em>c</em></li><li>d</li></ul>'),
        ('numbers', '3. a\n4. b', '<ol start="3"><li>a</li><li>b</li></ol>'),
        ('nested', '- a\n  - b\n  - c\n- d', '<ul><li>a<ul><li>b</li><li>c</li></ul></li><li>d</li></ul>'),
        ('loose', '- a\n\n- b', '<ul><li><p>a</p></li><li><p>b</p></li></ul>'),
        ('table', '| a | b |\n|:-:|--|\n| `x|y` | \\| |',
         '<div class="table-wrap"><table><thead><tr><th class="align-center" scope="col">a</th>'
         '<th scope="col">b</th></tr></thead><tbody><tr><td class="align-center"><code>x|y</code></td>'
         '<td>|</td></tr></tbody></table></div>'),
        ('quote', '> a\n> b', '<blockquote><p>a b</p></blockquote>'),
        ('rule', 'a\n\n---\n\nb', '<p>a</p><hr><p>b</p>'),
        ('break', 'a  \nb', '<p>a<br>b</p>'),
        ('escapes', '\\*a\\* \\<b>', '<p>*a* &lt;b&gt;</p>'),
        ('link', '[a *b*](https://x.example/p?q=1&r=2 "t")',
         '<p><a href="https://x.example/p?q=1&amp;r=2" rel="noopener noreferrer nofollow" target="_blank" '
         'title="https://x.example/p?q=1&amp;r=2">a <em>b</em> <span class="link-host">(x.example)</span></a></p>'),
        ('link whose text is its URL', '[https://x.example/a](https://x.example/a) [http://y.example](http://y.example)',
         '<p><a href="https://x.example/a" rel="noopener noreferrer nofollow" target="_blank">https://x.example/a</a> '
         '<a href="http://y.example/" rel="noopener noreferrer nofollow" target="_blank">http://y.example</a></p>'),
        ('link with a port', '[p](http://x.example:8080/)',
         '<p><a href="http://x.example:8080/" rel="noopener noreferrer nofollow" target="_blank" '
         'title="http://x.example:8080/">p <span class="link-host">(x.example:8080)</span></a></p>'),
        ('link to another name', '[https://bank.example/](https://evil.example/)',
         '<p><a href="https://evil.example/" rel="noopener noreferrer nofollow" target="_blank" '
         'title="https://evil.example/">https://bank.example/ <span class="link-host">(evil.example)</span></a></p>'),
        ('reference definition', 'a\n[1]: http://evil.example/?d=x "t"\n  [x y]: <https://e.example>',
         '<p>a</p><p class="ref-definition">[1]: http://evil.example/?d=x "t"</p>'
         '<p class="ref-definition">[x y]: &lt;https://e.example&gt;</p>'),
        ('no reference definition', '[1]: *a* note', '<p>[1]: <em>a</em> note</p>'),
        ('autolinks', '<http://x.example/> and https://y.example/a_(b).',
         '<p><a href="http://x.example/" rel="noopener noreferrer nofollow" target="_blank">http://x.example/</a>'
         ' and <a href="https://y.example/a_(b)" rel="noopener noreferrer nofollow" target="_blank">'
         'https://y.example/a_(b)</a>.</p>'),
        ('javascript link', '[a](javascript:alert(1))', '<p>a</p>'),
        ('other schemes', '[a](data:text/html,x) [b](/relative) [c](ftp://x) [d](//x.example)',
         '<p>a b c d</p>'),
        ('image', '![alt text](https://x.example/i.png)', '<p>alt text</p>'),
        ('html', '<img src=x onerror=alert(1)><script>alert(2)</script>',
         '<p>&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;</p>'),
        ('html block', '<div>\n<b>x</b>\n</div>', '<p>&lt;div&gt; &lt;b&gt;x&lt;/b&gt; &lt;/div&gt;</p>'),
        ('entity', '&lt;b&gt; &amp;', '<p>&amp;lt;b&amp;gt; &amp;amp;</p>'),
        ('crlf', 'a\r\nb\r\n\r\nc', '<p>a b</p><p>c</p>'),
        ('empty', '', ''),
    ]

    def test_renderer(self):
        d = self.daemon()
        c = self.chrome(d)
        got = c.js("""
            return arguments[0].map(([name, src]) => {
              const div = document.createElement('div');
              div.appendChild(window.WikiwebMarkdown.render(src));
              return [name, div.innerHTML];
            });""", [[n, s] for n, s, _ in self.CASES])
        for (name, html), (_, src, want) in zip(got, self.CASES):
            self.assertEqual(html, want, f'{name}: {src!r}')

        # Whatever the input, only the elements and attributes of the subset.
        allowed = c.js("""
            const ok = new Set(['P','EM','STRONG','DEL','CODE','PRE','H3','H4','H5','H6','UL','OL','LI','TABLE',
              'THEAD','TBODY','TR','TH','TD','DIV','BLOCKQUOTE','HR','BR','A','SPAN']);
            const attrs = new Set(['href','rel','target','class','scope','start','title']);
            const bad = [];
            let seed = 1;
            const rnd = (n) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
            const bits = ['<', '>', '*', '_', '`', '[', ']', '(', ')', '|', '-', '#', '\\n', '\\n\\n', ' ', '!',
              'javascript:', 'http://a.example/', 'x', '1.', '>', '~~', '\\\\', '"', '<img src=x onerror=y>',
              '<script>', '    ', '```'];
            for (let i = 0; i < 3000; i++) {
              let s = '';
              for (let k = rnd(40); k > 0; k--) s += bits[rnd(bits.length)];
              const div = document.createElement('div');
              div.appendChild(window.WikiwebMarkdown.render(s));
              for (const e of div.querySelectorAll('*')) {
                if (!ok.has(e.tagName)) bad.push([s, e.tagName]);
                for (const a of e.attributes) if (!attrs.has(a.name)) bad.push([s, a.name]);
                if (e.tagName === 'A' && !/^https?:/.test(e.getAttribute('href'))) bad.push([s, e.href]);
              }
            }
            return bad.slice(0, 5);""")
        self.assertEqual(allowed, [])
        self.assertIsNone(c.js('return window.__pwned === undefined ? null : 1'))
        c.check_console()


LINK_ANSWER = ('See [Payroll policy on the wiki](http://evil.example.com/x?d=S8099-LABEL) and '
               '[the apple page]({wiki}/index.php/Apple), or https://bare.example/p.\n\n'
               '[1]: http://evil.example.com/ref?d=S8099-REF\n')


class Links(PageBase):
    """Links that say where they go (docs/WEB.md), in all six languages: a
    labelled link shows its host beside the label and its URL as its
    title, in the language's words; a link to the wiki looks as before; a
    bare URL shows itself; a reference definition is text, no link."""

    LANGS = (('en-US', 'en'), ('de-DE', 'de'), ('fr-FR', 'fr'), ('es-ES', 'es'), ('ja', 'ja'), ('ar', 'ar'))

    def test_links_show_their_host(self):
        w = wiki()
        answer = LINK_ANSWER.replace('{wiki}', w.api_url.rsplit('/', 1)[0])
        steps = []
        for _ in self.LANGS:
            steps += CITED_READ + [{'answer': answer}]
        d = self.page_daemon(steps)
        for tag, lang in self.LANGS:
            with self.subTest(lang=tag):
                with open(os.path.join(I18N, lang + '.json'), encoding='utf-8') as f:
                    cat = json.load(f)
                c = Chrome(self, width=800, height=700, lang=tag)
                c.open(d)
                c.wait(lambda: c.js('return document.documentElement.lang') == lang, what=f'<html lang="{lang}">')
                c.ask('Where is the payroll policy?')
                c.wait_answer()
                links = c.js("return [...document.querySelectorAll('#answer a[href^=\"http\"]')].map(a => "
                             "[a.getAttribute('href'), a.textContent, a.title, !!a.querySelector('.link-host')])")
                wiki_url = answer.split('(')[2].split(')')[0]
                self.assertEqual(links, [
                    ['http://evil.example.com/x?d=S8099-LABEL',
                     'Payroll policy on the wiki ' + cat['answer.link_host'].replace('{host}', 'evil.example.com'),
                     cat['answer.link_title'].replace('{url}', 'http://evil.example.com/x?d=S8099-LABEL'), True],
                    [wiki_url, 'the apple page', '', False],
                    ['https://bare.example/p', 'https://bare.example/p', '', False],
                ])
                ref = c.js("const p = document.querySelector('#answer .ref-definition');"
                           " return p && [p.textContent, p.querySelectorAll('a').length]")
                self.assertEqual(ref, ['[1]: http://evil.example.com/ref?d=S8099-REF', 0])
                c.shot('links-' + lang, css='#answer')
                c.check_console()
                c.quit()


class SignedIn(harness.DaemonTestCase):
    """API.md "Identity": behind a trusted proxy the page says who is
    signed in. Chromium itself plays the proxy here: it connects from
    127.0.0.1, the trusted address, and sends the user header with every
    request (CDP's Network.setExtraHTTPHeaders)."""

    @classmethod
    def setUpClass(cls):
        why = browser_missing()
        if why:
            harness.skip_or_fail(why)

    def test_signed_in_as(self):
        d = self.daemon(WIKI_WEB_TRUSTED_PROXIES='127.0.0.1')
        c = Chrome(self)
        c.driver.execute_cdp_cmd('Network.enable', {})
        # Markup in the name stays text.
        name = 'Zoe <b>Unal</b> & co'
        c.driver.execute_cdp_cmd('Network.setExtraHTTPHeaders', {'headers': {'X-Remote-User': name}})
        c.open(d)
        c.wait(lambda: c.js("return !document.getElementById('signed-in').hidden"), what='"Signed in as"')
        self.assertEqual(c.text('#signed-in'), 'Signed in as ' + name)
        self.assertEqual(c.finds('#signed-in b'), [])
        c.check_console()
        # Without an identity (no trusted proxy set) the line stays hidden.
        d2 = self.daemon()
        c2 = Chrome(self).open(d2)
        c2.wait(lambda: c2.js("return window.__fetches.some((f) => f[1].endsWith('/queue/status'))"),
                what='the first status')
        time.sleep(0.3)
        self.assertTrue(c2.js("return document.getElementById('signed-in').hidden"))
        self.assertTrue(c2.js("return document.getElementById('tokens').hidden"))
        c2.check_console()

    def test_access_tokens(self):
        """API.md "Access tokens" on the page: the panel of a signed-in
        person, a token made and shown once, used, listed and revoked;
        axe-core in each state."""
        d = self.daemon(WIKI_WEB_TRUSTED_PROXIES='127.0.0.1', WIKI_WEB_TOKEN_MAX_DAYS='30')
        c = Chrome(self)
        c.driver.execute_cdp_cmd('Network.enable', {})
        c.driver.execute_cdp_cmd('Network.setExtraHTTPHeaders', {'headers': {'X-Remote-User': 'alice'}})
        c.open(d)
        c.wait(lambda: c.js("return !document.getElementById('tokens').hidden"), what='the tokens panel')
        c.wait(lambda: c.text('#tokens-status') == 'You have no access tokens.', what='no tokens yet')
        # WIKI_WEB_TOKEN_MAX_DAYS=30: no longer life is offered.
        self.assertEqual(c.js("return [...document.querySelectorAll('#token-days option')]"
                              ".filter((o) => !o.disabled).map((o) => o.value)"), ['7', '30'])
        c.axe('no access tokens')
        c.find('#token-create').click()
        c.wait(lambda: c.text('#tokens-status') == 'Give the token a name first.', what='a name asked for')
        c.find('#token-name').send_keys('Claude Desktop')
        c.find('#token-create').click()
        c.wait(lambda: c.js("return !document.getElementById('token-new').hidden"), what='the new token')
        token = c.js("return document.getElementById('token-value').value")
        d.secrets.add(token)
        self.assertRegex(token, r'^wwp_[A-Za-z0-9_-]{43}$')
        c.wait(lambda: len(c.finds('#tokens-list li')) == 1, what='the token listed')
        self.assertIn('Claude Desktop', c.text('#tokens-list'))
        self.assertIn('never used', c.text('#tokens-list'))
        self.assertNotIn(token, c.text('#tokens-list'))
        c.find('#token-copy').click()
        c.axe('a new access token shown once')
        c.shot('access-tokens', css='#tokens')
        # Used by an assistant: the person, as the list then says.
        status, _, body = get(d, '/api/v1/queue/status', {'Authorization': 'Bearer ' + token})
        self.assertEqual((status, json.loads(body)['user']), (200, 'alice'))
        c.open(d)
        c.wait(lambda: 'last used' in c.text('#tokens-list'), what='its last use')
        self.assertTrue(c.js("return document.getElementById('token-new').hidden"), 'shown only once')
        self.assertNotIn(token, c.js('return document.body.innerHTML'))
        revoke = c.find('#tokens-list button')
        self.assertEqual(revoke.get_attribute('aria-label'), 'Revoke the token Claude Desktop')
        revoke.click()
        c.wait(lambda: c.text('#tokens-status') == 'You have no access tokens.', what='the token revoked')
        status, _, _ = get(d, '/api/v1/queue/status', {'Authorization': 'Bearer ' + token})
        self.assertEqual(status, 401)
        c.check_console()


class Feedback(PageBase):
    """API.md 9.1 and 9.2 on the page, in one browser session of a person
    who is one of the wiki's editors: the notice beside the form, rating
    an answer (not useful, with a reason and a comment), and the editors'
    report with the question, its comment, the search, the link that
    creates the page on the wiki and the CSV download."""

    def test_rate_and_report(self):
        d = self.page_daemon(
            [{'tool_calls': [{'name': 'wiki_search', 'arguments': {'query': 'parking policy', 'limit': 5}}]},
             {'answer': 'The wiki has no page about parking.'}],
            WIKI_WEB_TRUSTED_PROXIES='127.0.0.1', WIKI_WEB_EDITORS='Eda Editor')
        c = Chrome(self)
        c.driver.execute_cdp_cmd('Network.enable', {})
        # Somebody who is not an editor: GET /reports lists none, no report.
        c.driver.execute_cdp_cmd('Network.setExtraHTTPHeaders', {'headers': {'X-Remote-User': 'Bob'}})
        c.open(d)
        self.assertIn('without your name', c.text('#report-notice'))
        c.wait(lambda: c.js("return window.__fetches.some((f) => f[1].endsWith('/api/v1/reports'))"),
               what="the probe for the editors' report")
        time.sleep(0.5)
        self.assertTrue(c.js("return document.getElementById('report').hidden"))
        self.assertFalse(c.js("return window.__fetches.some((f) => f[1].includes('/reports/unanswered'))"))
        # The same browser as an editor.
        c.driver.execute_cdp_cmd('Network.setExtraHTTPHeaders', {'headers': {'X-Remote-User': 'Eda Editor'}})
        c.open(d)
        # An editor: the report is there, empty so far.
        c.wait(lambda: c.js("return !document.getElementById('report').hidden"), what="the editors' report")
        c.wait(lambda: c.text('#report-status') == 'Nothing to show for this period.', what='the empty report')
        c.ask('What is the parking policy?')
        c.wait_answer()
        c.wait(lambda: c.js("return !document.getElementById('feedback-section').hidden"), what='the rating buttons')
        self.assertEqual(c.find('#feedback-down').get_attribute('aria-pressed'), 'false')
        c.find('#feedback-down').click()
        c.wait(lambda: c.js("return !document.getElementById('feedback-form').hidden"), what='the reason form')
        from selenium.webdriver.support.ui import Select
        Select(c.find('#feedback-reason')).select_by_value('incomplete')
        c.find('#feedback-comment').send_keys('=Nothing <b>about</b> visitors')
        c.axe('rating')
        c.find('#feedback-send').click()
        c.wait(lambda: c.find('#feedback-down').get_attribute('aria-pressed') == 'true', what='the rating kept')
        self.assertIn('Thank you', c.text('#feedback-status'))
        c.shot('feedback')
        # The record says so.
        rec = json.loads(get(d, '/api/v1/history', {'X-Remote-User': 'Eda Editor'})[2])['items'][0]
        self.assertEqual(rec['feedback']['reason'], 'incomplete')
        # The report, again: the question with its signals and comment, as text.
        Select(c.find('#report-days')).select_by_value('7')
        c.wait(lambda: c.finds('#report-groups li.report-group'), what='a group in the report')
        group = c.text('#report-groups li.report-group')
        self.assertIn('What is the parking policy?', group)
        self.assertIn('Times asked: 1', group)
        self.assertIn('No page found: 1', group)
        self.assertIn('Rated not useful: 1', group)
        self.assertIn('=Nothing <b>about</b> visitors', group)
        self.assertIn('parking policy (results: 0)', group)
        self.assertEqual(c.finds('#report-groups b'), [])
        self.assertNotIn('Eda', group)
        create = c.find('#report-groups a[href*="action=edit"]')
        self.assertEqual(create.get_attribute('href'),
                         wiki().api_url.rsplit('/', 1)[0] + '/index.php?title=parking_policy&action=edit')
        self.assertEqual(c.find('#report-csv').get_attribute('href'),
                         f'http://127.0.0.1:{d.port}/api/v1/reports/unanswered?format=csv&days=7')
        c.axe('report')
        c.shot('report', full=True)
        # The link's file, fetched as the page's own requests are (CDP's
        # extra header, standing in for the proxy, does not reach the
        # browser's download manager).
        c.driver.set_script_timeout(30)
        got = c.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            " fetch(document.getElementById('report-csv').href).then(async (r) =>"
            "  done([r.status, r.headers.get('Content-Type'), r.headers.get('Content-Disposition'), await r.text()]));")
        self.assertEqual(got[:3], [200, 'text/csv; charset=utf-8', 'attachment; filename="unanswered.csv"'])
        self.assertEqual(c.find('#report-csv').get_attribute('download'), '')
        text = got[3]
        self.assertIn('"What is the parking policy?"', text)
        self.assertIn('"\'=Nothing <b>about</b> visitors"', text)
        # Nothing failed, Bob's probe included.
        c.check_console()


CITED_READ = [
    {'tool_calls': [{'name': 'wiki_read', 'arguments': {'title': 'Apples'}},
                    {'name': 'wiki_read', 'arguments': {'title': 'Orchard'}}]},
]
CITED_ANSWER = ('The apple tree likes sun [1]; the orchard grows several fruits [2]. '
                'Apples grow on the moon [3], and bananas are yellow [4].\n\n'
                'Sources:\n'
                '[1] Apple: "The apple tree likes sun and well-drained soil."\n'
                '[2] Orchard: "The orchard grows fruit: Apple, Banana, Cherry and more."\n'
                '[3] Apple: "Apples grow best on the moon, <b>in low gravity</b>."\n'
                '[4] Banana: "Banana is a fruit. It is number 2 in the orchard inventory."\n')


class Citations(PageBase):
    """The citations on the page: each [n] links to its citation; a citation
    shows its quote, page, revision and plainly whether it was verified; a
    verified one opens the wiki at that revision with the quote; an old
    answer says which sources changed since. On a wiki of its own: the test
    edits a page."""

    def test_citations_and_staleness(self):
        w = mediawiki.Wiki().start()
        self.addCleanup(w.stop)
        d = self.page_daemon(CITED_READ + [{'answer': CITED_ANSWER}], WIKI_WEB_WIKI_API_URL=w.api_url)
        c = self.chrome(d)
        c.ask('Where do apples grow?')
        c.wait_answer()

        # The answer without its citation lines, each [n] a link to its citation.
        answer = c.text('#answer')
        self.assertNotIn('Sources:', answer)
        self.assertNotIn('well-drained', answer)
        markers = c.js("return [...document.querySelectorAll('#answer a.cite')]"
                       ".map(a => [a.textContent, a.getAttribute('href')])")
        self.assertEqual(markers, [[f'[{n}]', f'#cite-{n}'] for n in (1, 2, 3, 4)])
        items = c.js("return [...document.querySelectorAll('#citations li')].map(li => ({id: li.id,"
                     " cls: li.className, status: li.dataset.status, quote: li.querySelector('q').textContent,"
                     " text: li.innerText, links: [...li.querySelectorAll('a')].map(a => a.href)}))")
        self.assertEqual([(i['id'], i['status']) for i in items],
                         [('cite-1', 'verified'), ('cite-2', 'verified'), ('cite-3', 'not_found'),
                          ('cite-4', 'not_read')])
        _, _, body = w.api(action='query', titles='Apple|Orchard', prop='info')
        revs = {p['title']: p['lastrevid'] for p in json.loads(body)['query']['pages']}
        for i, (title, quote) in enumerate([('Apple', 'The apple tree likes sun and well-drained soil.'),
                                            ('Orchard', 'The orchard grows fruit: Apple, Banana, Cherry and more.')]):
            self.assertEqual(items[i]['cls'], 'citation verified')
            self.assertEqual(items[i]['quote'], quote)
            self.assertIn(f'{title}, revision {revs[title]}', items[i]['text'])
            self.assertIn(f'quoted exactly from revision {revs[title]}', items[i]['text'])
            self.assertEqual(len(items[i]['links']), 1)
            self.assertTrue(items[i]['links'][0].startswith(f'{w.base_url}/index.php?oldid={revs[title]}#:~:text='),
                            items[i]['links'][0])
        # Never styled as verified: no "verified" class, no check mark, the
        # warning in words; the model's markup in its quote is text.
        for i in (2, 3):
            self.assertEqual(items[i]['cls'], 'citation unverified')
            self.assertIn('Not verified', items[i]['text'])
            self.assertNotIn('quoted exactly', items[i]['text'])
            self.assertNotIn('\u2713', items[i]['text'])
        self.assertIn("the model\u2019s quote is not in the page it read (revision %d)" % revs['Apple'],
                      items[2]['text'])
        self.assertEqual(items[2]['quote'], 'Apples grow best on the moon, <b>in low gravity</b>.')
        self.assertEqual(c.js("return document.querySelectorAll('#citations q b').length"), 0)
        self.assertIn('the model cites a page it never read', items[3]['text'])
        self.assertEqual(items[3]['links'], [])
        colours = c.js("return [...document.querySelectorAll('#citations li')].map(li =>"
                       " getComputedStyle(li).borderLeftStyle + ' ' + getComputedStyle(li).borderLeftColor)")
        self.assertEqual(colours[0], colours[1])
        self.assertNotEqual(colours[2], colours[0])
        self.assertEqual(colours[2], colours[3])
        c.shot('citations', css='#query')

        # A marker leads to its citation.
        c.find('#answer a.cite[href="#cite-3"]').click()
        c.wait(lambda: c.js('return location.hash') == '#cite-3', what='the citation in the URL')

        # Following a verified citation opens the wiki at that oldid, and the
        # page shows the quoted text.
        before = set(c.driver.window_handles)
        c.find('#cite-2 .cite-status a').click()
        c.wait(lambda: len(c.driver.window_handles) == len(before) + 1, what='the wiki in a new tab')
        main = c.driver.current_window_handle
        c.driver.switch_to.window((set(c.driver.window_handles) - before).pop())
        c.wait(lambda: 'oldid=' in c.driver.current_url and c.js('return document.readyState') == 'complete',
               what='the wiki page')
        self.assertIn(f'oldid={revs["Orchard"]}', c.driver.current_url)
        self.assertIn('The orchard grows fruit: Apple, Banana, Cherry and more.',
                      re.sub(r'\s+', ' ', c.text('#mw-content-text')))
        c.shot('citation-wiki')
        c.driver.close()
        c.driver.switch_to.window(main)

        # The page changes on the wiki; the answer, opened again from the
        # history, says which source changed since.
        new_rev = w.edit('Apple', "'''Apple''' is a fruit. Its tree now likes shade.\n")
        c.find('#history-list li button.open').click()
        c.wait(lambda: not c.find('#sources-stale').get_attribute('hidden'), what='the staleness note')
        self.assertEqual(c.text('#sources-stale'), '1 source has changed on the wiki since this answer.')
        changed = c.js("return [...document.querySelectorAll('#sources li')].map(li =>"
                       " [li.dataset.title, (li.querySelector('.changed') || {}).textContent || null])")
        self.assertEqual(changed, [['Apple', f'changed since (now revision {new_rev})'], ['Orchard', None]])
        # The citations are still those of the revision read.
        self.assertEqual(c.js("return document.querySelector('#cite-1').className"), 'citation verified')
        c.shot('citations-stale', css='#query')
        # The wiki's own page (its tab) may log what it lacks; the page, nothing.
        c.check_console(allow=[re.escape(w.base_url)])



class Languages(PageBase):
    """The page in the browser's language (docs/WEB.md "Languages"):
    chromium with --lang=de-DE, fr-FR, es-ES, ja and ar, one browser each on
    one daemon.
    In each: the idle form with a check of the form, the waiting page with
    the turn's notification and title, an answer with citations, a failed
    query, the history; the words those of that language's catalog, <html
    lang> and dir right (Arabic right to left, its layout mirrored), axe-core
    0 violations. The Arabic browser then switches to English on the page,
    and the choice outlasts a reload."""

    CASES = (('de-DE', 'de', 'ltr'), ('fr-FR', 'fr', 'ltr'), ('es-ES', 'es', 'ltr'), ('ja', 'ja', 'ltr'),
             ('ar', 'ar', 'rtl'))

    def test_languages(self):
        # The languages are the page's bytes, the same under the sanitizers;
        # the daemon's paths they use are those of the tests above, which
        # run there too. Once is enough for CI's time budget.
        if os.environ.get('ASAN_OPTIONS') and os.environ.get('WIKIWEB_TEST_LANGUAGES') != '1':
            self.skipTest('the page in other languages: once, in the build without sanitizers '
                          '(WIKIWEB_TEST_LANGUAGES=1 runs it here too)')
        steps = []
        for _, lang, _ in self.CASES:
            steps += [{'answer': 'Held.', 'hold': 'hold-' + lang}] + CITED_READ + [{'answer': CITED_ANSWER},
                                                                               {'error': 'server'}]
        d = self.page_daemon(steps)
        with open(os.path.join(I18N, 'en.json'), encoding='utf-8') as f:
            en = json.load(f)
        for tag, lang, direction in self.CASES:
            with self.subTest(lang=tag):
                self.one_language(d, en, tag, lang, direction)

    @staticmethod
    def pieces(message):
        """The fixed words of a message: its text between placeholders."""
        return [p for p in re.split(r'\{[a-z_]+\}', message) if p.strip(' ()（）.。:：،')]

    def says(self, text, message, what):
        for p in self.pieces(message):
            self.assertIn(p, text, what)

    def one_language(self, d, en, tag, lang, direction):
        with open(os.path.join(I18N, lang + '.json'), encoding='utf-8') as f:
            cat = json.load(f)
        # Someone else holds the slot: this browser will wait.
        holder = threading.Thread(target=lambda: d.browser().query(question='Hold the slot.', timeout=60), daemon=True)
        holder.start()
        self.addCleanup(holder.join, 30)
        self.wait_state(d, 'running')

        c = Chrome(self, width=800, height=900, lang=tag)
        origin = f'http://127.0.0.1:{d.port}'
        c.driver.execute_cdp_cmd('Browser.grantPermissions', {'origin': origin, 'permissions': ['notifications']})
        c.driver.execute_cdp_cmd('Page.addScriptToEvaluateOnNewDocument', {'source': TURN_RECORDER})
        c.open(d)
        self.assertEqual(c.js('return navigator.language'), tag, 'the browser speaks the language')
        c.wait(lambda: c.js('return document.documentElement.lang') == lang, what=f'<html lang="{lang}">')
        self.assertEqual(c.js('return document.documentElement.dir'), direction)
        self.assertEqual(c.js('return document.title'), cat['page.title'])
        self.assertEqual(c.text('#ask-title'), cat['form.title'])
        self.assertEqual(c.text('#history-title'), cat['history.title'])
        self.assertEqual(c.find('#language-select').get_attribute('value'), lang)
        self.assertEqual(c.js("return document.querySelector('meta[name=description]').content"), cat['page.description'])
        fetched = [p for _, p in c.fetches() if p.startswith('/i18n/')]
        self.assertEqual(fetched, [f'/i18n/{lang}.json'], 'only the chosen catalog is fetched')
        # The idle form, and a check of the form in words of the language.
        c.find('#ask-button').click()
        c.wait(lambda: cat['form.empty'] in (c.text('#errors') or ''), what='the empty question, translated')
        self.assertNotIn(en['form.empty'], c.text('body'))
        c.axe(f'{lang}: the idle form with a check')

        # Waiting: the status line, the wait, the notification's hint.
        c.ask('Where do apples grow?')
        c.wait(lambda: c.js("return document.getElementById('status').dataset.state") == 'waiting',
               what='the waiting page')
        status = c.text('#status')
        self.says(status, cat['queue.busy']['one'] if 'one' in cat['queue.busy'] else cat['queue.busy']['other'],
                  'the busy slot')
        self.says(status, cat['queue.waiting'], 'the position')
        # Which of the wait's sentences depends on the durations of the
        # queries before (after a few, a range): each is the catalog's.
        self.assertTrue(any(p in status for k in ('queue.wait_unknown', 'queue.wait_about', 'queue.wait_range')
                            for p in self.pieces(cat[k])), status)
        self.assertIn(cat['queue.hint_pending'], status)
        self.assertNotIn('You have waited', status)
        c.find('#notify-button').click()
        c.wait(lambda: c.text('#notify-hint') == cat['notify.granted'], what='the notification hint, translated')
        c.axe(f'{lang}: waiting')

        # The turn: a notification and the title in the language; then the
        # answer with its citations.
        d.llm.release('hold-' + lang)
        c.wait(lambda: c.js('return window.__notes.length') > 0, what='the notification')
        note = c.js('return window.__notes')[0]
        self.assertEqual(note[0], cat['turn.notification'])
        self.assertEqual(note[1], cat['turn.notification_asking'])
        self.assertEqual(note[2], cat['turn.title'].replace('{title}', cat['page.title']))
        c.wait_answer()
        # The record is shown a moment before the query's end resets the title.
        c.wait(lambda: c.js('return document.title') == cat['page.title'], what='the title back')
        self.assertEqual(c.js('return window.__said')[0], cat['turn.now'])
        c.wait(lambda: len(c.js('return window.__said')) >= 2, what='the answer announced')
        self.assertEqual(c.js('return window.__said')[1], cat['answer.ready'].replace('{question}', 'Where do apples grow?'))
        self.assertEqual(c.text('#citations-title'), cat['answer.citations_title'])
        self.assertEqual(c.text('#sources-title'), cat['answer.sources_title'])
        items = c.js("return [...document.querySelectorAll('#citations li')].map(li => [li.dataset.status, li.innerText,"
                     " li.querySelector('a.cite, .cite-status a') && li.querySelector('.cite-status a').textContent])")
        self.assertEqual([i[0] for i in items], ['verified', 'verified', 'not_found', 'not_read'])
        for i in (0, 1):
            self.says(items[i][1], cat['citation.verified'], 'verified')
            self.says(items[i][1], cat['citation.where_revision'], 'the page and revision')
        self.says(items[2][1], cat['citation.not_found'], 'not found')
        self.assertIn(cat['citation.not_read'], items[3][1])
        self.assertEqual(c.js("return document.querySelector('#answer a.cite').getAttribute('aria-label')"),
                         cat['citation.marker'].replace('{n}', '1'))
        rev = c.text('#sources li .rev')
        self.says(rev, cat['source.revision'], 'a source\'s revision')
        self.says(c.text('#record-meta'), cat['meta.asked'], 'when it was asked')
        # The steps: the model's reads, in words of the language.
        self.says(c.text('#steps'), cat['step.read'], 'a read step')
        # The layout follows the direction: the citation's bar on the
        # inline start (right in Arabic), the switcher at the line's end.
        bars = c.js("const s = getComputedStyle(document.querySelector('#citations li'));"
                    " return [s.borderLeftStyle, s.borderRightStyle]")
        self.assertEqual(bars, ['none', 'solid'] if direction == 'rtl' else ['solid', 'none'])
        h1, switch = c.js("return ['h1', '#language'].map(q => document.querySelector(q).getBoundingClientRect().left)")
        self.assertTrue(switch < h1 if direction == 'rtl' else switch > h1, (h1, switch))
        self.assertLessEqual(c.js('return document.documentElement.scrollWidth'), c.js('return window.innerWidth'))
        c.axe(f'{lang}: an answer with citations')
        shot = c.shot(f'language-{lang}', full=True)
        self.assertTrue(os.path.getsize(shot) > 0)

        # A failed query: the code's words from the catalog, the server's
        # message beside them in English, the code.
        c.ask('What happens when the model fails?')
        c.wait(lambda: not c.find('#failure').get_attribute('hidden'), what='the failure')
        failure = c.text('#failure')
        self.says(failure, cat['answer.failed'], 'the failure')
        self.assertIn(cat['error.upstream_failed'], failure)
        self.assertIn('(upstream_failed)', failure)
        detail = c.js("const d = document.querySelector('#failure .detail'); return d && [d.lang, d.textContent]")
        self.assertEqual(detail[0], 'en', 'the server\'s message beside, marked as English')
        self.assertIn(detail[1], failure)
        # The history: two records, their state and time in the language.
        c.wait(lambda: len(c.finds('#history-list li')) == 2 and
               c.js("return document.querySelector('#history-list li').dataset.status") == 'failed',
               what='the history')
        badges = c.js("return [...document.querySelectorAll('#history-list .badge')].map(b => b.textContent)")
        self.assertEqual(badges, [cat['history.status.failed'], cat['history.status.succeeded']])
        self.assertEqual(c.js("return document.querySelector('#history-list .delete').textContent"), cat['history.delete'])
        # When, in the language's words: "vor 5 Sekunden", the date in its title.
        when, title = c.js("const t = document.querySelector('#history-list .when time'); return [t.textContent, t.title]")
        said = c.js("const f = new Intl.RelativeTimeFormat(arguments[0], {numeric: 'auto'});"
                    " return [...Array(300).keys()].map(n => f.format(-n, 'second'))", lang)
        self.assertIn(when, said)
        created = d.browser(cookie=c.cookie()).get('/api/v1/history?limit=1').json['items'][0]['created_at']
        self.assertEqual(title, c.js("return new Intl.DateTimeFormat(arguments[0], {dateStyle: 'medium', timeStyle: 'short'})"
                                     ".format(new Date(arguments[1]))", lang, created))
        c.axe(f'{lang}: failed, with the history')

        if direction == 'rtl':
            # Switched on the page: English at once, kept across a reload.
            from selenium.webdriver.support.ui import Select
            Select(c.find('#language-select')).select_by_value('en')
            c.wait(lambda: c.js('return document.documentElement.lang') == 'en', what='English after the switch')
            self.assertEqual(c.js('return document.documentElement.dir'), 'ltr')
            self.assertEqual(c.text('#ask-title'), en['form.title'])
            c.wait(lambda: c.js("return document.querySelector('#history-list .badge').textContent")
                   == en['history.status.failed'], what='the history in English')
            self.assertIn(en['error.upstream_failed'], c.text('#failure'))
            self.assertEqual(c.js("return localStorage.getItem('wikiweb.lang')"), '"en"')
            c.driver.refresh()
            c.wait(lambda: c.js('return document.readyState') == 'complete' and c.text('#ask-title') == en['form.title'],
                   what='English after a reload')
            self.assertEqual(c.js('return document.documentElement.lang'), 'en')
        c.check_console((r'/api/v1/query .*50[0-9]',))
        c.quit()


def _check_parts():
    """meson runs the classes in parts (tests/e2e/meson.build) and names
    them all in WIKIWEB_PAGE_CLASSES: a class in no part would never run."""
    listed = os.environ.get('WIKIWEB_PAGE_CLASSES')
    if listed is None:
        return
    cases = {name for name, obj in globals().items()
             if isinstance(obj, type) and issubclass(obj, unittest.TestCase)
             and obj.__module__ == '__main__' and unittest.defaultTestLoader.getTestCaseNames(obj)}
    missing = cases - set(listed.split(','))
    if missing:
        print('test_page.py: classes in no part of tests/e2e/meson.build: %s' % ', '.join(sorted(missing)),
              file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    _check_parts()
    why = browser_missing()
    if why:
        harness.skip_or_fail(why)
    harness.main()

