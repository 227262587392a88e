// SPDX-License-Identifier: MIT
// The reference front end of the wikiweb API (API.md 13), on nothing but the
// API: ask (the query starts at once when the slot is free, else the page
// joins the queue and asks when its turn comes), watch the query live
// (API.md 11), read the answer, its sources and files, browse the history.
//
// Text from the model, the wiki or the history reaches the page only as
// text nodes, or through WikiwebMarkdown, which builds its own elements.
// Nothing here assigns innerHTML or builds markup from strings.
//
// Where the daemon has no event streams (a 404 not_found for their paths, or
// a JSON reply to a query asked for as a stream) the page falls back to the
// blocking POST /api/v1/query and to polling GET /api/v1/queue/status.
'use strict';

(function () {
  const API = '/api/v1';
  const PENDING_KEY = 'wikiweb.pending'; // the question waiting for the slot (localStorage)
  const RUNNING_KEY = 'wikiweb.running'; // the query being watched (sessionStorage)
  const NOTIFY_KEY = 'wikiweb.notify'; // "notify me when it's my turn" was asked for (sessionStorage)
  const QUESTION_MAX = 4000;
  const PAGES_MAX = 20;
  const CSV_ROWS_MAX = 200;
  const TURNS_SHOWN = 50; // earlier turns of a conversation shown above its answer

  const $ = (id) => document.getElementById(id);

  // The page's words (src/www/i18n.js, docs/WEB.md "Languages").
  const I18n = window.WikiwebI18n;
  const t = I18n.t;

  function el(name, cls, text) {
    const e = document.createElement(name);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  let unloading = false;
  window.addEventListener('pagehide', () => {
    unloading = true;
  });

  // --- Storage (it may be refused: then the page just forgets) ----------

  function store(kind, key, value) {
    try {
      if (value === null) window[kind].removeItem(key);
      else window[kind].setItem(key, JSON.stringify(value));
    } catch (e) {
      /* private mode or disabled storage */
    }
  }
  function load(kind, key) {
    try {
      const v = window[kind].getItem(key);
      return v === null ? null : JSON.parse(v);
    } catch (e) {
      return null;
    }
  }
  const savePending = (p) => store('localStorage', PENDING_KEY, p);
  const loadPending = () => {
    const p = load('localStorage', PENDING_KEY);
    if (p && p.follow_up !== undefined && !/^qr_[0-9a-f]{32}$/.test(String(p.follow_up))) return null;
    return p && typeof p.question === 'string' && Array.isArray(p.pages) ? p : null;
  };
  const clearPending = () => store('localStorage', PENDING_KEY, null);
  const remember = (id) => store('sessionStorage', RUNNING_KEY, id);
  const remembered = () => {
    const id = load('sessionStorage', RUNNING_KEY);
    return typeof id === 'string' && /^qr_[0-9a-f]{32}$/.test(id) ? id : null;
  };
  const forget = () => store('sessionStorage', RUNNING_KEY, null);

  // A record of the person's own history on the page, at /#/history/<id>
  // (API.md "MCP": ask_wiki's record_url): the id it names, or null.
  const routedRecord = () => {
    const m = /^#\/history\/(qr_[0-9a-f]{32})$/.exec(window.location.hash);
    return m ? m[1] : null;
  };
  // The address bar names the record shown, so that a reload keeps it;
  // without one, it names the page. No hashchange: nothing is opened again.
  const routeRecord = (id) => {
    if (id === routedRecord()) return;
    const url = id ? '#/history/' + id : window.location.pathname + window.location.search;
    window.history.replaceState(window.history.state, '', url);
  };

  // --- The API ------------------------------------------------------------

  // An error of the API (its code and English message), or one the page
  // made itself (local: its message is already in the person's language).
  class ApiError extends Error {
    constructor(code, message, status, headers, local) {
      super(message);
      this.code = code;
      this.status = status;
      this.headers = headers || null;
      this.local = !!local;
    }
  }

  // The default message of each error code (API.md 2): a message that is
  // not its code's default tells something more, and is shown beside the
  // catalog's words. Compared, never shown.
  // i18n-exempt-begin
  const DEFAULT_MESSAGES = {
    invalid_input: 'Invalid input',
    model_context_exceeded: 'Model context window exceeded',
    origin_denied: 'Origin denied by policy',
    destination_denied: 'Destination denied by policy',
    wiki_auth_failed: 'Wiki authentication failed',
    artifact_not_found: 'Artifact not found',
    ticket_not_found: 'Ticket not found',
    query_not_found: 'Query not found',
    not_found: 'Not found',
    method_not_allowed: 'Method not allowed',
    busy: 'Active query already in progress',
    request_too_large: 'Request body exceeds maximum allowed size',
    request_header_too_large: 'Request line and header fields exceed the maximum allowed size',
    rate_limited: 'Too many open event streams',
    upstream_failed: 'Upstream request failed',
    upstream_response_too_large: 'Upstream response exceeds maximum allowed size',
    tls_failed: 'TLS certificate verification failed',
    connectivity_failed: 'Failed to connect to upstream server',
    model_output_limit: 'Model output exceeded limit',
    query_timeout: 'Query execution timed out',
    execution_failed: 'Query execution failed',
    cleanup_failed: 'Container cleanup could not be confirmed',
    internal_error: 'Internal error',
    queue_full: 'The queue is full',
    invalid_token: 'The access token is wrong, expired or revoked',
  };
  // i18n-exempt-end

  // An error in words: the catalog's text for its code, and the server's
  // (English) message beside it when it says more than the code.
  // [text, detail or null].
  function errorWords(code, message) {
    message = typeof message === 'string' ? message : '';
    const known = typeof code === 'string' && I18n.has('error.' + code);
    if (!known) return message ? [message, null] : [t('error.unknown'), null];
    const detail = message && message !== DEFAULT_MESSAGES[code] ? message : null;
    return [t('error.' + code), detail];
  }

  // The server's clock less ours, from the Date header, so a countdown to a
  // server time is right even when the clocks differ (ignored under 2 s:
  // the header has whole seconds).
  let clockOffset = 0;
  function noteDate(headers) {
    const d = Date.parse(headers.get('Date') || '');
    if (!Number.isNaN(d)) {
      const off = d - Date.now();
      clockOffset = Math.abs(off) > 2000 ? off : 0;
    }
  }

  async function fetchApi(method, path, { body, accept, lastEventId, signal } = {}) {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (accept) headers.Accept = accept;
    if (lastEventId) headers['Last-Event-ID'] = lastEventId;
    try {
      return await fetch(API + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'same-origin',
        cache: 'no-store',
        signal,
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError('network', e.message, 0);
    }
  }

  // A response -> {status, headers, json}, or an ApiError from the error
  // envelope of API.md 2.
  async function checked(r) {
    noteDate(r.headers);
    let json = null;
    if ((r.headers.get('Content-Type') || '').startsWith('application/json')) {
      try {
        json = await r.json();
      } catch (e) {
        json = null;
      }
    }
    if (!r.ok) {
      const e = json && typeof json.error === 'object' && json.error;
      throw new ApiError(
        e && typeof e.code === 'string' ? e.code : 'http_' + r.status,
        e && typeof e.message === 'string' ? e.message : r.status + ' ' + r.statusText,
        r.status,
        r.headers);
    }
    return { status: r.status, headers: r.headers, json };
  }

  async function call(method, path, body) {
    return checked(await fetchApi(method, path, { body }));
  }

  // --- Server-Sent Events over fetch() (POST cannot use EventSource) --

  // The event stream format of the WHATWG HTML standard (9.2.6): lines end
  // in CRLF, LF or CR; "data" lines join with LF; an empty line dispatches.
  class SseParser {
    constructor(onEvent) {
      this.onEvent = onEvent;
      this.buf = '';
      this.data = [];
      this.event = '';
      this.lastId = '';
    }

    push(chunk) {
      this.buf += chunk;
      let i;
      while ((i = this.buf.search(/[\r\n]/)) >= 0) {
        if (this.buf[i] === '\r' && i === this.buf.length - 1) break; // maybe half a CRLF
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + (this.buf[i] === '\r' && this.buf[i + 1] === '\n' ? 2 : 1));
        this.line(line);
      }
    }

    line(l) {
      if (l === '') {
        if (this.data.length) this.onEvent(this.event || 'message', this.data.join('\n'), this.lastId);
        this.data = [];
        this.event = '';
        return;
      }
      if (l[0] === ':') return; // a comment: ": keep-alive"
      const c = l.indexOf(':');
      const field = c < 0 ? l : l.slice(0, c);
      let value = c < 0 ? '' : l.slice(c + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'data') this.data.push(value);
      else if (field === 'event') this.event = value;
      else if (field === 'id' && !value.includes('\0')) this.lastId = value;
    }
  }

  // Read a text/event-stream response to its end, calling onEvent(name,
  // object) for each event whose data is JSON. Returns the last event id.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser((name, data) => {
      let obj;
      try {
        obj = JSON.parse(data);
      } catch (e) {
        return;
      }
      onEvent(name, obj);
    });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
    parser.push(decoder.decode());
    return parser.lastId;
  }

  // A request that wants a stream: {stream: Response} when it is one,
  // {json, headers} when the daemon answered with JSON instead; an
  // ApiError for an error response.
  async function openStream(method, path, opts = {}) {
    const r = await fetchApi(method, path, Object.assign({ accept: 'text/event-stream' }, opts));
    if (r.ok && (r.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
      noteDate(r.headers);
      return { stream: r };
    }
    const res = await checked(r);
    return { json: res.json, headers: res.headers };
  }

  // --- Messages -----------------------------------------------------------

  function clearErrors() {
    $('errors').replaceChildren();
  }

  // An error as one line of text in the person's language.
  function describeError(e) {
    if (e instanceof ApiError) {
      if (e.local) return e.message;
      const [text, detail] = errorWords(e.code, e.message);
      return detail ? t('error.with_detail', { text, detail }) : text;
    }
    return String((e && e.message) || e);
  }

  // A failed query's error (its record's {code, message}) in words.
  function failureWords(err) {
    err = err || {};
    if (!err.code && !err.message) return t('answer.no_reason');
    const [text, detail] = errorWords(err.code, err.message);
    return detail ? t('error.with_detail', { text, detail }) : text;
  }

  // The same as pieces for append(): the server's message marked as
  // English, so that a screen reader says it in English.
  function errorParts(code, message) {
    const [text, detail] = errorWords(code, message);
    if (!detail) return [text];
    const d = el('span', 'detail', detail);
    d.lang = 'en';
    d.dir = 'ltr';
    return I18n.parts('error.with_detail', { text, detail: d });
  }

  // Every error as its words (and its code, where the API gave one); the
  // server's message, in English, beside them when it says more.
  function showError(e) {
    if (unloading || (e && e.name === 'AbortError')) return;
    const code = e instanceof ApiError ? e.code : null;
    const p = el('p');
    if (e instanceof ApiError && !e.local) p.append(...errorParts(e.code, e.message));
    else p.append(describeError(e));
    if (code && code !== 'network') {
      p.append(' ');
      p.appendChild(el('span', 'code', '(' + code + ')'));
    }
    // The same error again (a retry that failed again) is not repeated.
    const last = $('errors').lastElementChild;
    if (!last || last.textContent !== p.textContent) $('errors').appendChild(p);
  }

  // The number of admission slots the status says (API.md 6), 1 when it
  // does not say.
  function slotCount(st) {
    return (st && st.slots && st.slots.total) || 1;
  }
  function busyWords(st) {
    return t('queue.busy', { count: slotCount(st) });
  }

  // The page's one live region: what a screen reader is told, once each
  // (the turn has come; the answer is there). The status line, the steps
  // and the answer change many times and are not live regions themselves.
  let announced = '';
  function announce(text) {
    if (text === announced) return;
    announced = text;
    const a = $('announce');
    a.textContent = '';
    // A change a moment after the clearing is read even when the text is
    // the same as an earlier one.
    setTimeout(() => (a.textContent = text), 50);
  }

  // API.md "Identity": the person a trusted proxy named, shown as text;
  // hidden when the status says null (no identity).
  function showUser(user) {
    const p = $('signed-in');
    if (typeof user === 'string' && user !== '') {
      p.textContent = t('page.signed_in', { user });
      p.hidden = false;
      $('history-empty').dataset.i18n = 'history.empty_user';
      $('history-empty').textContent = t('history.empty_user');
    } else {
      p.hidden = true;
    }
  }

  function setStatus(state, nodes) {
    const s = $('status');
    s.dataset.state = state;
    s.replaceChildren(...nodes);
  }

  const formatSeconds = I18n.duration;
  // A duration as a person says it: "40 sec", "2 min", "1.5 hr".
  const approxSeconds = I18n.approx;

  // The wait in words, from the status object (API.md 6): the range when
  // the daemon knows enough, else the point estimate, else nothing.
  function waitWords(st) {
    const r = st.estimated_wait_range_seconds;
    if (r && Number.isFinite(r.p10) && Number.isFinite(r.p50) && Number.isFinite(r.p90)) {
      const lo = approxSeconds(r.p10);
      const hi = approxSeconds(r.p90);
      const mid = approxSeconds(r.p50);
      if (lo === hi) return t('queue.wait_about', { time: mid });
      return t('queue.wait_range', { low: lo, high: hi, time: mid });
    }
    if (st.wait_known === false) return t('queue.wait_unknown');
    const est = st.estimated_wait_seconds;
    return est === null || est === undefined ? t('queue.wait_unknown') : t('queue.wait_estimate', { time: formatSeconds(est) });
  }

  const formatTime = I18n.date;

  // When something happened, as a person says it: "3 minutes ago", "vor 3
  // Minuten" within a day (against the server's clock), else the date.
  function whenWords(t) {
    const now = Date.now() + clockOffset;
    const d = Date.parse(t);
    return !Number.isNaN(d) && Math.abs(now - d) < 86400 * 1000 ? I18n.relative(d, now) : formatTime(t);
  }
  // The history's times are said again each half minute.
  setInterval(() => {
    for (const e of document.querySelectorAll('#history-list time')) e.textContent = whenWords(e.dateTime);
  }, 30000);

  // The hosts of the wiki's pages, from every record's sources seen: links
  // there look as they always did; any other labelled link shows its host.
  const wikiHosts = new Set();
  function noteWikiHosts(rec) {
    for (const src of Array.isArray(rec && rec.sources) ? rec.sources : []) {
      const href = src && safeHref(src.url);
      if (href) wikiHosts.add(new URL(href).host);
    }
  }
  function renderAnswer(text) {
    return window.WikiwebMarkdown.render(text, {
      ownHosts: wikiHosts,
      linkHost: (host) => t('answer.link_host', { host }),
      linkTitle: (url) => t('answer.link_title', { url }),
    });
  }

  function safeHref(url) {
    return typeof url === 'string' ? window.WikiwebMarkdown.safeUrl(url) : null;
  }

  function outLink(href, text) {
    const a = el('a', null, text);
    a.href = href;
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
    return a;
  }

  // --- Citations (API.md 9, docs/WEB.md) ----------------------------------

  // Each "[n]" in the answer's text, for a citation n, becomes a link to
  // that citation. Text nodes only, outside code and links: the model's
  // text stays text.
  function linkMarkers(root, numbers, prefix = 'cite-') {
    if (!numbers.size) return;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const nodes = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode())
      if (!n.parentElement.closest('a, code, pre')) nodes.push(n);
    for (const node of nodes) {
      const text = node.nodeValue;
      const re = /\[(\d{1,3})\]/g;
      let last = 0;
      let m;
      const parts = [];
      while ((m = re.exec(text))) {
        const n = Number(m[1]);
        if (!numbers.has(n)) continue;
        parts.push(document.createTextNode(text.slice(last, m.index)));
        const a = el('a', 'cite', '[' + n + ']');
        a.href = '#' + prefix + n;
        a.setAttribute('aria-label', t('citation.marker', { n: String(n) }));
        parts.push(a);
        last = m.index + m[0].length;
      }
      if (!parts.length) continue;
      parts.push(document.createTextNode(text.slice(last)));
      node.replaceWith(...parts);
    }
  }

  // One citation: the quote, the page, the revision, and plainly whether
  // it was verified. Only "verified" looks verified and links to the
  // wiki's revision with the quote highlighted (its text fragment).
  function citationItem(c, prefix = 'cite-') {
    const verified = c.status === 'verified';
    const li = el('li', 'citation ' + (verified ? 'verified' : 'unverified'));
    li.id = prefix + c.n;
    li.dataset.status = String(c.status);
    li.appendChild(el('span', 'cite-n', '[' + c.n + ']'));
    li.append(' ');
    // The quote marks are the page's; the words inside keep their own
    // direction (the wiki's language, whatever the page's).
    const quote = el('q', 'quote');
    quote.appendChild(el('bdi', null, String(c.quote)));
    li.appendChild(quote);
    li.append(' ');
    const hasRev = Number.isInteger(c.revision_id);
    const hasSection = typeof c.section === 'string';
    const vars = { title: String(c.title), revision: String(c.revision_id), section: String(c.section) };
    const where = el('span', 'where', t('citation.where' + (hasRev ? '_revision' : '') + (hasSection ? '_section' : ''), vars));
    li.appendChild(where);
    const status = el('p', 'cite-status');
    const href = safeHref(c.url);
    if (verified && href) {
      status.append('✓ ');
      status.appendChild(outLink(href, t('citation.verified', vars)));
    } else if (verified) {
      status.textContent = '✓ ' + t('citation.verified', vars);
    } else if (c.status === 'not_found') {
      status.textContent = '⚠ ' + t('citation.not_found', vars);
      if (href) {
        status.append(' ');
        status.appendChild(outLink(href, t('citation.open_revision')));
      }
    } else if (c.status === 'not_read') {
      status.textContent = '⚠ ' + t('citation.not_read');
    } else if (c.status === 'too_short') {
      status.textContent = '⚠ ' + t('citation.too_short');
    } else {
      status.textContent = '⚠ ' + t('citation.not_verified');
    }
    li.appendChild(status);
    return li;
  }

  // --- CSV (RFC 4180) -----------------------------------------------------

  function parseCsv(text, maxRows) {
    const rows = [];
    let row = [];
    let field = '';
    let quoted = false;
    let i = 0;
    if (text.charCodeAt(0) === 0xfeff) i = 1;
    for (; i < text.length; i++) {
      const c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') {
          field += '"';
          i++;
        } else if (c === '"') quoted = false;
        else field += c;
      } else if (c === '"' && field === '') quoted = true;
      else if (c === ',') {
        row.push(field);
        field = '';
      } else if (c === '\n' || c === '\r') {
        if (c === '\r' && text[i + 1] === '\n') i++;
        row.push(field);
        field = '';
        rows.push(row);
        row = [];
        if (rows.length > maxRows) return { rows, truncated: true };
      } else field += c;
    }
    if (field !== '' || row.length) {
      row.push(field);
      rows.push(row);
    }
    return { rows, truncated: false };
  }

  function csvTable(rows, name) {
    // A CSV file's widest row decides the columns.
    const width = rows.reduce((w, r) => Math.max(w, r.length), 0);
    const head = rows.length ? rows[0].concat(Array(width - rows[0].length).fill('')) : [];
    const wrap = window.WikiwebMarkdown.buildTable(head, rows.slice(1), (c, v) => (c.textContent = v));
    wrap.tabIndex = 0; // scrollable by keyboard
    wrap.setAttribute('role', 'region');
    wrap.setAttribute('aria-label', name);
    return wrap;
  }

  // --- One query on the page ---------------------------------------------

  function describeCall(name, args) {
    args = args || {};
    switch (name) {
      case 'wiki_search':
        return t('step.search', { query: String(args.query || '') });
      case 'wiki_read':
        return t('step.read', { title: String(args.title || '') });
      case 'run_python':
        return Number.isInteger(args.code_bytes) ? t('step.python_bytes', { count: args.code_bytes }) : t('step.python');
      default:
        return t('step.call', { name: String(name) });
    }
  }

  function describeResult(d) {
    const s = d.summary || {};
    const out = [];
    if (!d.ok) out.push(t('step.refused', { reason: String(s.error || t('step.invalid_call')) }));
    else if (d.name === 'wiki_search') out.push(t('step.results', { count: Number(s.results) || 0 }));
    else if (d.name === 'wiki_read') {
      if (s.missing) out.push(t('step.missing'));
      else {
        const href = safeHref(s.url);
        const title = href ? outLink(href, String(s.title)) : el('span', null, String(s.title));
        const key = s.revision_id !== undefined ? 'step.read_revision' : 'step.read_done';
        out.push(...I18n.parts(key, { title, revision: String(s.revision_id) }));
      }
    } else if (d.name === 'run_python') {
      if (s.timed_out) out.push(t('step.timed_out'));
      else if (s.signal) out.push(t('step.killed', { signal: String(s.signal) }));
      else out.push(t('step.exit', { code: String(s.exit_code) }));
      const files = Array.isArray(s.files) ? s.files.length : Number(s.files) || 0;
      if (files) out.push(', ' + t('step.files', { count: files }));
    } else out.push(t('step.done'));
    if (Number.isFinite(d.duration_ms)) out.push(' ' + t('step.took', { time: I18n.millis(d.duration_ms) }));
    return out;
  }

  class QueryView {
    constructor(question) {
      this.id = null;
      this.done = false;
      this.steps = new Map();
      this.liveText = '';
      this.liveTimer = null;
      app.view = this;
      $('query').hidden = false;
      $('query-question').replaceChildren(el('bdi', null, question || ''));
      $('steps').replaceChildren();
      $('live').hidden = false;
      $('live').classList.remove('done');
      $('answer').replaceChildren();
      $('answer').className = 'answer markdown';
      $('answer').removeAttribute('aria-busy');
      $('failure').hidden = true;
      $('failure').replaceChildren();
      $('sources-section').hidden = true;
      $('sources').replaceChildren();
      $('sources-stale').hidden = true;
      $('sources-stale').textContent = '';
      $('citations-section').hidden = true;
      $('citations').replaceChildren();
      $('artifacts-section').hidden = true;
      $('artifacts').replaceChildren();
      $('record-meta').textContent = '';
      $('turns-section').hidden = true;
      $('turns').replaceChildren();
      $('conversation-actions').hidden = true;
      $('unshare-button').hidden = true;
      $('share-line').hidden = true;
      $('follow-form').hidden = true;
    }

    // Another query took the page: this one writes nothing more.
    get shown() {
      return app.view === this;
    }

    note(text, cls) {
      if (!this.shown) return null;
      const li = el('li', 'note' + (cls ? ' ' + cls : ''), text);
      $('steps').appendChild(li);
      return li;
    }

    event(name, d) {
      if (!this.shown || this.done) return;
      switch (name) {
        case 'query':
          this.id = d.id;
          remember(d.id);
          break;
        case 'step':
          this.step(d.step);
          break;
        case 'text':
          this.text(d.step, String(d.delta || ''));
          break;
        case 'tool':
          this.tool(d);
          break;
        case 'tool_result':
          this.toolResult(d);
          break;
        case 'phase':
          if (d.phase === 'cleanup') this.note(t('step.cleanup'));
          break;
        case 'record':
          this.showRecord(d);
          break;
        default:
          break;
      }
    }

    step(n) {
      if (this.steps.has(n)) return this.steps.get(n);
      const li = el('li', 'step');
      li.dataset.step = n;
      const title = el('span', 'title', t('step.asking', { n }));
      const calls = el('ul', 'calls');
      li.append(title, calls);
      $('steps').appendChild(li);
      const s = { n, li, title, calls, text: '', thinking: null, items: new Map() };
      this.steps.set(n, s);
      this.live('');
      return s;
    }

    text(n, delta) {
      const s = this.step(n);
      s.text += delta;
      if (s.thinking) s.thinking.textContent = s.text;
      else this.live(s.text);
    }

    // What a step wrote before it called tools was the model thinking
    // aloud: folded away under the step, not the answer.
    fold(s) {
      if (s.thinking) return;
      const details = el('details');
      details.appendChild(el('summary', null, t('step.thinking')));
      s.thinking = el('p', 'thinking', s.text);
      details.appendChild(s.thinking);
      if (!s.text) details.hidden = true;
      s.li.insertBefore(details, s.calls);
      s.title.textContent = t('step.tools', { n: s.n });
      this.live('');
    }

    tool(d) {
      const s = this.step(d.step);
      this.fold(s);
      if (s.thinking.parentNode.hidden && s.text) s.thinking.parentNode.hidden = false;
      const li = el('li', 'call');
      li.dataset.name = String(d.name);
      li.appendChild(el('span', 'what', describeCall(d.name, d.arguments)));
      s.calls.appendChild(li);
      s.items.set(d.call, li);
    }

    toolResult(d) {
      const s = this.step(d.step);
      let li = s.items.get(d.call);
      if (!li) {
        this.tool({ step: d.step, call: d.call, name: d.name, arguments: {} });
        li = s.items.get(d.call);
      }
      const r = el('span', 'result' + (d.ok ? '' : ' bad'));
      r.append(t('step.result_separator'), ...describeResult(d));
      li.appendChild(r);
    }

    // The answer as the model writes it, rendered a few times a second.
    live(text) {
      this.liveText = text;
      if (this.liveTimer) return;
      this.liveTimer = setTimeout(() => {
        this.liveTimer = null;
        if (!this.shown || this.done) return;
        const a = $('answer');
        a.classList.toggle('streaming', this.liveText !== '');
        a.setAttribute('aria-busy', 'true');
        a.replaceChildren(renderAnswer(this.liveText));
      }, this.liveText ? 60 : 0);
    }

    showRecord(rec, { old = false } = {}) {
      if (!this.shown) return;
      this.done = true;
      this.old = old;
      this.id = rec.id;
      this.record = rec;
      clearTimeout(this.liveTimer);
      this.liveTimer = null;
      $('query-question').replaceChildren(el('bdi', null, rec.question || ''));
      $('live').classList.add('done');
      for (const n of $('steps').querySelectorAll('.note.waiting')) n.remove();
      for (const st of this.steps.values())
        if (!st.thinking) st.title.textContent = t(rec.status === 'succeeded' ? 'step.answer' : 'step.plain', { n: st.n });
      if (!$('steps').childNodes.length) $('live').hidden = true;

      const a = $('answer');
      a.className = 'answer markdown';
      a.removeAttribute('aria-busy');
      a.replaceChildren();
      noteWikiHosts(rec);
      if (typeof rec.answer === 'string') a.appendChild(renderAnswer(rec.answer));
      const citations = (Array.isArray(rec.citations) ? rec.citations : []).filter(
        (c) => c && Number.isInteger(c.n) && c.n > 0);
      linkMarkers(a, new Set(citations.map((c) => c.n)));
      $('citations').replaceChildren(...citations.map((c) => citationItem(c)));
      $('citations-section').hidden = citations.length === 0;

      const f = $('failure');
      if (rec.status === 'failed') {
        const err = rec.error || {};
        const reason = err.code || err.message ? el('span') : t('answer.no_reason');
        if (typeof reason === 'object') reason.append(...errorParts(err.code, err.message));
        const p = el('p');
        p.append(...I18n.parts('answer.failed', { reason }), ' ');
        p.appendChild(el('span', 'code', '(' + (err.code || 'unknown') + ')'));
        f.replaceChildren(p);
        f.hidden = false;
      } else if (rec.status === 'running') {
        f.hidden = true;
        this.note(t('answer.still_running'));
      } else f.hidden = true;

      const sources = Array.isArray(rec.sources) ? rec.sources : [];
      $('sources').replaceChildren(...sources.map((s) => {
        const li = el('li');
        li.dataset.title = String(s.title);
        const href = safeHref(s.url);
        li.appendChild(href ? outLink(href, String(s.title)) : el('span', null, String(s.title)));
        li.append(' ');
        li.appendChild(el('span', 'rev', t('source.revision', { revision: String(s.revision_id) })));
        return li;
      }));
      $('sources-section').hidden = sources.length === 0;
      // An old answer: which of its pages changed on the wiki since.
      if (old && sources.length > 0 && rec.status !== 'running') this.checkSources(rec.id);

      const artifacts = Array.isArray(rec.artifacts) ? rec.artifacts : [];
      $('artifacts').replaceChildren(...artifacts.map((x) => this.artifact(x)).filter(Boolean));
      $('artifacts-section').hidden = artifacts.length === 0;

      const meta = [];
      if (rec.created_at) meta.push(t('meta.asked', { time: formatTime(rec.created_at) }));
      if (rec.timings_ms && Number.isFinite(rec.timings_ms.total)) meta.push(t('meta.took', { time: formatSeconds(rec.timings_ms.total / 1000) }));
      if (rec.usage && rec.usage.model) meta.push(t('meta.model', { model: String(rec.usage.model) }));
      // The sandbox was still starting when the query gave up waiting for
      // it: the answer was made without running code (API.md 9).
      if (rec.sandbox === 'starting') meta.push(t('meta.no_python'));
      $('record-meta').textContent = meta.join(' · ');
      feedback.show(rec);

      // A conversation (API.md 7, 9): its earlier turns above, and under
      // the answer: download, share, ask a follow-up.
      if (rec.status !== 'running' && /^qr_[0-9a-f]{32}$/.test(String(rec.id))) {
        $('export-link').href = API + '/history/' + rec.id + '/export';
        $('export-link').setAttribute('download', 'conversation-' + rec.id + '.md');
        $('conversation-actions').hidden = false;
        $('follow-form').hidden = false;
      }
      if (typeof rec.follow_up === 'string') this.loadTurns(rec);
    }

    // The earlier turns, read back through their follow_up links (at most
    // TURNS_SHOWN of them), oldest first.
    async loadTurns(rec) {
      const turns = [];
      let id = rec.follow_up;
      try {
        while (typeof id === 'string' && /^qr_[0-9a-f]{32}$/.test(id) && turns.length < TURNS_SHOWN) {
          const r = (await call('GET', '/history/' + id)).json;
          turns.unshift(r);
          id = r.follow_up;
        }
      } catch (e) {
        /* a turn deleted: the conversation starts after it */
      }
      if (!this.shown || this.id !== rec.id || !turns.length) return;
      $('turns').replaceChildren(...turns.map((t) => turnItem(t, 'h4')));
      $('turns-section').hidden = false;
    }

    // GET /history/{id}/sources (API.md 9): each changed source says so,
    // and a line above them counts them. A refusal (it is rate limited)
    // or a failure leaves the sources as they are, with a note.
    async checkSources(id) {
      let res;
      try {
        res = (await call('GET', '/history/' + id + '/sources')).json;
      } catch (e) {
        if (!this.shown || this.id !== id) return;
        const note = $('sources-stale');
        note.textContent = t('sources.check_failed', { reason: describeError(e) });
        note.className = 'stale-note';
        note.hidden = false;
        return;
      }
      if (!this.shown || this.id !== id || !res || !Array.isArray(res.sources)) return;
      let changed = 0;
      for (const s of res.sources) {
        if (!s || s.changed !== true) continue;
        changed++;
        for (const li of $('sources').children) {
          if (li.dataset.title !== String(s.title) || li.querySelector('.changed')) continue;
          li.append(' ');
          li.appendChild(el('span', 'changed', s.missing ? t('sources.deleted') :
            t('sources.changed', { revision: String(s.current_revision_id) })));
        }
      }
      const note = $('sources-stale');
      note.className = 'stale-note' + (changed ? ' changed' : '');
      note.textContent = changed ? t('sources.changed_count', { count: changed }) : t('sources.none_changed');
      note.hidden = false;
    }

    artifact(x) {
      if (typeof x.id !== 'string' || !/^af_[0-9a-f]{32}$/.test(x.id)) return null;
      const url = API + '/artifacts/' + x.id;
      const name = String(x.name);
      const box = el('div', 'artifact');
      box.dataset.id = x.id;
      box.appendChild(el('h4', null, name));
      const dl = el('a', 'download', t('artifact.download', { name }));
      dl.href = url;
      dl.download = name;
      const line = el('p');
      line.append(dl, ' ', el('span', 'size', t('artifact.size', { count: Number(x.size_bytes) || 0, type: String(x.media_type) })));
      box.appendChild(line);
      const type = String(x.media_type || '').split(';')[0].trim().toLowerCase();
      if (type === 'text/csv') {
        const holder = el('div', 'preview', t('artifact.loading'));
        box.appendChild(holder);
        fetchApi('GET', '/artifacts/' + x.id)
          .then((r) => (r.ok ? r.text() : Promise.reject(new ApiError('http_' + r.status, t('artifact.failed'), r.status, null, true))))
          .then((text) => {
            const { rows, truncated } = parseCsv(text, CSV_ROWS_MAX);
            holder.replaceChildren(csvTable(rows.slice(0, CSV_ROWS_MAX + 1), name));
            if (truncated) holder.appendChild(el('p', 'hint', t('artifact.truncated', { count: CSV_ROWS_MAX })));
          })
          .catch((e) => {
            holder.textContent = describeError(e);
          });
      } else if (/^image\/(png|jpeg|gif|webp|svg\+xml)$/.test(type)) {
        const img = el('img');
        img.src = url;
        img.alt = name;
        img.loading = 'lazy';
        box.appendChild(img);
      }
      return box;
    }
  }

  // One turn of a conversation: the question as a heading, the answer
  // (or why there is none); for a shared view also its citations, sources
  // and files (full: {n}, the turn's number, which makes its citations'
  // ids unique on the page).
  function turnItem(rec, level, full) {
    const li = el('li', 'turn');
    li.dataset.id = String(rec.id);
    // The question keeps its own direction, whatever the page's.
    li.appendChild(el(level, 'turn-question')).appendChild(el('bdi', null, String(rec.question || '')));
    const a = el('div', 'answer markdown');
    a.dir = 'auto';
    noteWikiHosts(rec);
    if (typeof rec.answer === 'string') a.appendChild(renderAnswer(rec.answer));
    else if (rec.status === 'running') a.appendChild(el('p', 'hint', t('answer.still_running')));
    else a.appendChild(el('p', 'failure', t('answer.failed', { reason: failureWords(rec.error) })));
    li.appendChild(a);
    if (!full) return li;
    const sub = 'h' + (Number(level.slice(1)) + 1);
    const citations = (Array.isArray(rec.citations) ? rec.citations : []).filter(
      (c) => c && Number.isInteger(c.n) && c.n > 0);
    const prefix = 'cite-' + full.n + '-';
    linkMarkers(a, new Set(citations.map((c) => c.n)), prefix);
    if (citations.length) {
      li.appendChild(el(sub, null, t('answer.citations_title')));
      const ol = el('ol', 'citations');
      ol.append(...citations.map((c) => citationItem(c, prefix)));
      li.appendChild(ol);
    }
    const sources = Array.isArray(rec.sources) ? rec.sources : [];
    if (sources.length) {
      li.appendChild(el(sub, null, t('answer.sources_title')));
      const ul = el('ul', 'sources');
      for (const x of sources) {
        const item = el('li');
        const href = safeHref(x.url);
        item.appendChild(href ? outLink(href, String(x.title)) : el('span', null, String(x.title)));
        item.append(' ');
        item.appendChild(el('span', 'rev', t('source.revision', { revision: String(x.revision_id) })));
        ul.appendChild(item);
      }
      li.appendChild(ul);
    }
    const files = (Array.isArray(rec.artifacts) ? rec.artifacts : []).filter(
      (x) => x && /^\/api\/v1\/shared\/sh_[0-9a-f]{64}\/artifacts\/af_[0-9a-f]{32}$/.test(String(x.download_url)));
    if (files.length) {
      li.appendChild(el(sub, null, t('answer.files_title')));
      const ul = el('ul', 'files');
      for (const x of files) {
        const item = el('li');
        const dl = el('a', 'download', t('artifact.download', { name: String(x.name) }));
        dl.href = x.download_url;
        dl.download = String(x.name);
        item.append(dl, ' ', el('span', 'size', t('artifact.size', { count: Number(x.size_bytes) || 0, type: String(x.media_type) })));
        ul.appendChild(item);
      }
      li.appendChild(ul);
    }
    return li;
  }

  // --- A shared conversation (API.md 9 "Share"), at /#/shared/<token> ----

  const shared = {
    active: null, // the token shown

    token() {
      const m = /^#\/shared\/(sh_[0-9a-f]{64})$/.exec(window.location.hash);
      return m ? m[1] : null;
    },

    async show(token) {
      this.active = token;
      $('ask').hidden = true;
      $('query').hidden = true;
      $('history').hidden = true;
      $('shared').hidden = false;
      document.title = t('shared.page_title', { title: t('page.title') });
      let res;
      try {
        res = (await call('GET', '/shared/' + token)).json;
      } catch (e) {
        const msg = e.code === 'not_found' ? t('shared.not_found') :
          e.code === 'origin_denied' ? t('shared.sign_in') : describeError(e);
        $('shared-error').replaceChildren(el('p', null, msg));
        $('shared-title').focus();
        return;
      }
      const turns = Array.isArray(res.turns) ? res.turns : [];
      $('shared-turns').replaceChildren(...turns.map((t, i) => turnItem(t, 'h3', { n: i + 1 })));
      const ex = $('shared-export');
      if (typeof res.export_url === 'string' && /^\/api\/v1\/shared\/sh_[0-9a-f]{64}\/export$/.test(res.export_url)) {
        ex.href = res.export_url;
        ex.hidden = false;
      }
      announce(t('shared.announce', { count: turns.length }));
      $('shared-title').focus();
    },
  };

  // --- The queue (API.md 5, 6, 11.1) -------------------------------------

  // --- Your turn: told by the title, a banner, a notification, a sound ---

  const turn = {
    wanted: false, // "Notify me when it's my turn" was pressed
    audio: null, // an AudioContext made from that click (browsers allow it then)
    told: null, // the ticket whose turn was told

    // From the click: the browser asks for the permission only then.
    async ask() {
      this.wanted = true;
      store('sessionStorage', NOTIFY_KEY, { sound: $('notify-sound').checked });
      if ($('notify-sound').checked) this.prepareSound();
      let p = 'denied';
      if ('Notification' in window) {
        try {
          p = Notification.permission === 'default' ? await Notification.requestPermission() : Notification.permission;
        } catch (e) {
          p = 'denied';
        }
      }
      this.permission = p;
      const b = $('notify-button');
      b.setAttribute('aria-pressed', 'true');
      this.hint = p === 'granted' ? 'notify.granted' : 'notify.denied';
      $('notify-hint').textContent = t(this.hint);
    },

    prepareSound() {
      if (this.audio || !window.AudioContext) return;
      try {
        this.audio = new AudioContext();
      } catch (e) {
        this.audio = null;
      }
    },

    beep() {
      const ctx = this.audio;
      if (!ctx) return;
      try {
        if (ctx.state === 'suspended') ctx.resume();
        const o = ctx.createOscillator();
        const g = ctx.createGain();
        o.frequency.value = 880;
        g.gain.setValueAtTime(0.15, ctx.currentTime);
        g.gain.exponentialRampToValueAtTime(0.001, ctx.currentTime + 0.4);
        o.connect(g).connect(ctx.destination);
        o.start();
        o.stop(ctx.currentTime + 0.4);
      } catch (e) {
        /* no sound then */
      }
    },

    // The queue stream said our ticket is reserved: once per ticket.
    came(ticketId) {
      if (this.told === ticketId) return;
      this.told = ticketId;
      this.titled = true;
      document.title = t('turn.title', { title: t('page.title') });
      announce(t('turn.now'));
      if (!this.wanted) return;
      if ($('notify-sound').checked) this.beep();
      let shown = false;
      if ('Notification' in window && Notification.permission === 'granted') {
        try {
          const n = new Notification(t('turn.notification'), {
            body: loadPending() ? t('turn.notification_asking') : t('turn.notification_ask'),
            lang: I18n.lang(),
            tag: 'wikiweb-turn',
          });
          n.onclick = () => window.focus();
          shown = true;
        } catch (e) {
          shown = false;
        }
      }
      if (!shown) {
        const b = $('banner');
        b.textContent = t('turn.now');
        b.hidden = false;
      }
    },

    // The turn is used (an answer) or gone: the title and banner are reset.
    reset() {
      this.titled = false;
      document.title = t('page.title');
      $('banner').hidden = true;
    },

    // After a reload: the choice made before it still holds (the
    // permission is the browser's; a sound needs a new click).
    restore() {
      const n = load('sessionStorage', NOTIFY_KEY);
      if (!n) return;
      this.wanted = true;
      $('notify-sound').checked = !!n.sound;
      $('notify-button').setAttribute('aria-pressed', 'true');
      this.hint = 'Notification' in window && Notification.permission === 'granted' ? 'notify.granted' : 'notify.restored';
      $('notify-hint').textContent = t(this.hint);
    },
  };

  // --- The queue (API.md 5, 6, 11.1) -------------------------------------

  const queue = {
    ctl: null,
    countdown: null,
    last: null,

    stop() {
      if (this.ctl) this.ctl.abort();
      this.ctl = null;
      clearInterval(this.countdown);
      this.countdown = null;
      $('leave-button').hidden = true;
      $('notify').hidden = true;
    },

    // The connection dropped: the place is kept by the server within the
    // heartbeat, and is shown again as soon as the stream is back.
    reconnecting() {
      clearInterval(this.countdown);
      this.countdown = null;
      setStatus('reconnecting', [el('p', null, t('queue.reconnecting'))]);
    },

    // Follow our ticket: the queue stream, or polling where there is none.
    async follow() {
      this.stop();
      const ctl = (this.ctl = new AbortController());
      $('leave-button').hidden = false;
      if (app.streams !== false) {
        try {
          const res = await openStream('GET', '/queue/events', { signal: ctl.signal });
          if (res.stream) {
            app.streams = true;
            await readEvents(res.stream, (name, d) => {
              if (this.ctl === ctl) this.event(name, d);
            });
            // The stream ended without "removed" (a proxy, a restart):
            // look again.
            if (this.ctl === ctl) {
              this.reconnecting();
              setTimeout(() => this.ctl === ctl && this.follow(), 1000);
            }
            return;
          }
        } catch (e) {
          if (this.ctl !== ctl) return;
          if (e.code === 'ticket_not_found') {
            this.removed({ reason: 'heartbeat' });
            return;
          }
          if (e.code === 'network' || e.name === 'TypeError') {
            this.reconnecting();
            setTimeout(() => this.ctl === ctl && this.follow(), 1000);
            return;
          }
          if (e.code !== 'not_found') {
            showError(e);
            setTimeout(() => this.ctl === ctl && this.follow(), 2000);
            return;
          }
          app.streams = false; // no /queue/events here: poll
        }
      }
      this.poll(ctl);
    },

    async poll(ctl) {
      while (this.ctl === ctl) {
        let st;
        try {
          st = (await call('GET', '/queue/status')).json;
        } catch (e) {
          if (this.ctl !== ctl) return;
          if (e.code === 'network') this.reconnecting();
          else showError(e);
          await sleep(2000);
          continue;
        }
        if (this.ctl !== ctl) return;
        if (!st.ticket) {
          this.removed({ reason: 'heartbeat' });
          return;
        }
        this.show(st);
        // At least as often as the heartbeat needs; often enough to see
        // the turn come.
        await sleep(1000 * Math.min(2, Math.max(1, st.poll_after_seconds || 1)));
      }
    },

    event(name, d) {
      if (name === 'status') this.show(d);
      else if (name === 'removed') this.removed(d);
    },

    removed(d) {
      this.stop();
      turn.reset();
      const why = t({
        heartbeat: 'queue.lapsed',
        reservation: 'queue.expired',
        admin: 'queue.removed_admin',
      }[d.reason] || 'queue.gone');
      if (d.reason === 'claimed') return; // we asked
      if (d.reason === 'left') setStatus('left', [el('p', null, t('queue.left'))]);
      else {
        setStatus('removed', [el('p', null, why)]);
        showError(new ApiError('ticket_not_found', t('queue.ask_again', { why }), 404, null, true));
      }
      app.setBusy(false);
    },

    show(st) {
      const tk = st.ticket;
      this.last = st;
      showUser(st.user);
      if (!tk) return;
      if (tk.status === 'waiting') {
        clearInterval(this.countdown);
        const s = $('status');
        s.dataset.position = tk.position;
        const waited = el('span', 'waited');
        const joined = Date.parse(tk.joined_at) - clockOffset;
        const tick = () => {
          waited.textContent = Number.isNaN(joined) ? '' : t('queue.waited', { time: formatSeconds((Date.now() - joined) / 1000) });
        };
        tick();
        this.countdown = setInterval(tick, 1000);
        const waitedLine = el('p');
        waitedLine.appendChild(waited);
        setStatus('waiting', [
          el('p', null, t('queue.waiting', { busy: busyWords(st), position: tk.position, places: t('queue.places', { count: Number(st.queue_length) || 0 }) })),
          el('p', 'wait', waitWords(st)),
          waitedLine,
          el('p', 'hint', loadPending() ? t('queue.hint_pending') : t('queue.hint_write')),
        ]);
        $('notify').hidden = false;
        return;
      }
      // Reserved: the slot is ours until the deadline.
      delete $('status').dataset.position;
      $('notify').hidden = true;
      turn.came(tk.id);
      const deadline = Date.parse(tk.reservation_expires_at) - clockOffset;
      const count = el('span', 'countdown');
      const tick = () => {
        const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
        count.textContent = formatSeconds(Math.min(left, st.reservation_seconds || left));
      };
      tick();
      clearInterval(this.countdown);
      this.countdown = setInterval(tick, 1000);
      const p = el('p');
      p.append(...I18n.parts('queue.reserved', { count: slotCount(st), time: count }));
      setStatus('reserved', [p]);
      const pending = loadPending();
      if (pending && !app.running) app.run(pending.question, pending.pages, pending.follow_up);
      else if (!pending) {
        setStatus('reserved', [p, el('p', 'hint', t('queue.reserved_hint'))]);
        $('question').focus();
      }
    },
  };

  // --- History (API.md 9) ------------------------------------------------

  const history = {
    cursor: null,
    seen: new Set(), // the conversations listed: one entry each, its newest question

    generation: 0, // of the list: a reload begins a new one

    async load(reset) {
      let page;
      const generation = reset ? ++this.generation : this.generation;
      try {
        const q = !reset && this.cursor ? '&cursor=' + encodeURIComponent(this.cursor) : '';
        page = (await call('GET', '/history?limit=10' + q)).json;
      } catch (e) {
        showError(e);
        return [];
      }
      // Answers may come back out of order: one older than the last
      // reload would put back a list that is no longer true.
      if (generation !== this.generation) return page.items;
      const list = $('history-list');
      if (reset) {
        list.replaceChildren();
        this.seen = new Set();
      }
      for (const rec of page.items) {
        const c = typeof rec.conversation === 'string' ? rec.conversation : rec.id;
        if (this.seen.has(c)) continue;
        this.seen.add(c);
        list.appendChild(this.item(rec));
      }
      this.cursor = page.next_cursor;
      $('history-more').hidden = !this.cursor;
      this.showEmpty();
      return page.items;
    },

    // The empty hint, or the whole history's actions.
    showEmpty() {
      const any = $('history-list').childNodes.length > 0;
      $('history-empty').hidden = any;
      $('history-actions').hidden = !any;
    },

    // "Delete my history": a dialog first (focus on Cancel, Escape
    // cancels, the focus back on the button after), then DELETE
    // /api/v1/history (API.md 9): 204 empties the list; 409 busy while
    // one of the person's queries runs.
    confirmErase() {
      $('history-erase-status').textContent = '';
      $('erase-dialog').showModal();
      $('erase-cancel').focus();
    },

    async erase() {
      const dialog = $('erase-dialog');
      const button = $('erase-confirm');
      clearErrors();
      button.disabled = true;
      try {
        await call('DELETE', '/history');
      } catch (e) {
        button.disabled = false;
        dialog.close();
        if (e.code === 'busy') {
          $('history-erase-status').textContent = t('history.erase_busy');
          $('history-erase').focus();
        } else showError(e);
        return;
      }
      button.disabled = false;
      dialog.close();
      this.generation++;
      this.cursor = null;
      this.seen = new Set();
      $('history-list').replaceChildren();
      $('history-more').hidden = true;
      this.showEmpty();
      if (app.view) {
        app.view = null;
        $('query').hidden = true;
      }
      $('history-erase-status').textContent = t('history.erased');
      $('history-title').focus();
    },

    item(rec) {
      const li = el('li');
      li.dataset.id = rec.id;
      li.dataset.status = rec.status;
      const open = el('button', 'open');
      open.type = 'button';
      // The question keeps its own direction, whatever the page's.
      open.appendChild(el('span', 'q')).appendChild(el('bdi', null, rec.question));
      const when = el('span', 'when');
      const time = el('time', null, whenWords(rec.created_at));
      time.dateTime = String(rec.created_at);
      time.title = formatTime(rec.created_at);
      when.append(time, ' ');
      when.appendChild(el('span', 'badge ' + rec.status, I18n.has('history.status.' + rec.status) ? t('history.status.' + rec.status) : String(rec.status)));
      if (typeof rec.follow_up === 'string') {
        li.dataset.conversation = String(rec.conversation);
        when.append(' ');
        when.appendChild(el('span', 'badge conversation', t('history.conversation')));
      }
      open.appendChild(when);
      open.addEventListener('click', () => app.open(rec.id));
      const del = el('button', 'delete secondary', t('history.delete'));
      del.type = 'button';
      const short = rec.question.length > 60 ? rec.question.slice(0, 60) + '…' : rec.question;
      del.setAttribute('aria-label', t('history.delete_label', { question: short }));
      del.addEventListener('click', () => this.remove(rec.id, li));
      li.append(open, del);
      return li;
    },

    async remove(id, li) {
      clearErrors();
      try {
        await call('DELETE', '/history/' + id);
      } catch (e) {
        showError(e);
        return;
      }
      // Keep the keyboard where it was: the next entry, else the previous.
      const next = li.nextElementSibling || li.previousElementSibling;
      li.remove();
      if (next) next.querySelector('button.open').focus();
      else $('history-title').focus();
      this.showEmpty();
      if (app.view && app.view.id === id) {
        app.view = null;
        $('query').hidden = true;
      }
      if (routedRecord() === id) routeRecord(null);
    },
  };

  // --- The page -----------------------------------------------------------

  function parsePages(text) {
    return text.split('\n').map((s) => s.trim()).filter((s) => s !== '');
  }

  // --- Feedback on an answer (API.md 9.1) -----------------------------

  const feedback = {
    id: null,

    // Under a finished answer: the buttons, pressed as the record says.
    show(rec) {
      const running = !rec || rec.status === 'running';
      $('feedback-section').hidden = running;
      if (running) return;
      if (this.id !== rec.id) {
        $('feedback-form').hidden = true;
        $('feedback-status').textContent = '';
        $('feedback-reason').value = '';
        $('feedback-comment').value = '';
      }
      this.id = rec.id;
      this.mark(rec.feedback);
    },

    mark(fb) {
      const rating = fb && typeof fb.rating === 'string' ? fb.rating : '';
      $('feedback-up').setAttribute('aria-pressed', String(rating === 'up'));
      $('feedback-down').setAttribute('aria-pressed', String(rating === 'down'));
    },

    async send(body) {
      const id = this.id;
      if (!id) return;
      try {
        const rec = (await call('POST', '/history/' + id + '/feedback', body)).json;
        if (this.id !== id) return;
        this.mark(rec.feedback);
        if (app.view && app.view.record && app.view.record.id === id) app.view.record = rec;
        $('feedback-form').hidden = true;
        const words = t(body.rating === 'up' ? 'feedback.thanks_up' : 'feedback.thanks_down');
        $('feedback-status').textContent = words;
        announce(words);
      } catch (e) {
        $('feedback-status').textContent = t('feedback.failed', { reason: describeError(e) });
      }
    },

    up() {
      this.send({ rating: 'up' });
    },

    // Not useful: a reason and a comment first, both optional.
    down() {
      $('feedback-form').hidden = false;
      $('feedback-status').textContent = '';
      $('feedback-reason').focus();
    },

    submit() {
      const body = { rating: 'down' };
      const reason = $('feedback-reason').value;
      const comment = $('feedback-comment').value.trim();
      if (reason) body.reason = reason;
      if (comment) body.comment = comment;
      this.send(body);
    },
  };

  // --- Access tokens (API.md "Access tokens") ---------------------------

  const tokens = {
    // Shown to a person a trusted proxy named: the server says whether
    // there are tokens here (GET /tokens answers them only).
    async probe(user) {
      if (!user) return;
      if (await this.load()) $('tokens').hidden = false;
    },

    // The list; false when there are no tokens here.
    async load() {
      let res;
      try {
        res = (await call('GET', '/tokens')).json;
      } catch (e) {
        if (!$('tokens').hidden) $('tokens-status').textContent = t('tokens.failed', { reason: describeError(e) });
        return false;
      }
      const list = res && Array.isArray(res.tokens) ? res.tokens : [];
      const max = Number(res && res.max_days) || 90;
      for (const o of $('token-days').options) o.hidden = o.disabled = Number(o.value) > max;
      if ($('token-days').selectedOptions[0] && $('token-days').selectedOptions[0].disabled) {
        $('token-days').value = [...$('token-days').options].filter((o) => !o.disabled).pop().value;
      }
      $('tokens-status').textContent = list.length ? '' : t('tokens.empty');
      $('tokens-list').replaceChildren(...list.map((x) => this.item(x)));
      return true;
    },

    item(x) {
      const li = el('li');
      const name = el('span', 'token-name', String(x.name || ''));
      name.dir = 'auto';
      const facts = [
        t('tokens.created', { time: formatTime(x.created_at) }),
        t(x.expired ? 'tokens.expired_on' : 'tokens.expires_on', { time: formatTime(x.expires_at) }),
        x.last_used_at ? t('tokens.last_used', { time: formatTime(x.last_used_at) }) : t('tokens.never_used'),
      ];
      const meta = el('p', 'meta' + (x.expired ? ' expired' : ''), facts.join(' · '));
      const revoke = el('button', 'secondary', t('tokens.revoke'));
      revoke.type = 'button';
      revoke.setAttribute('aria-label', t('tokens.revoke_label', { name: String(x.name || '') }));
      revoke.addEventListener('click', () => this.revoke(x));
      li.append(name, meta, revoke);
      return li;
    },

    async create() {
      clearErrors();
      const name = $('token-name').value.trim();
      if (!name) {
        $('tokens-status').textContent = t('tokens.name_required');
        $('token-name').focus();
        return;
      }
      let res;
      try {
        res = (await call('POST', '/tokens', { name, expires_in_days: Number($('token-days').value) })).json;
      } catch (e) {
        $('tokens-status').textContent = t('tokens.failed', { reason: describeError(e) });
        return;
      }
      if (!res || typeof res.token !== 'string' || !/^wwp_[A-Za-z0-9_-]{43}$/.test(res.token)) return;
      $('token-value').value = res.token;
      $('token-new').hidden = false;
      $('token-name').value = '';
      await this.load();
      $('token-value').focus();
      $('token-value').select();
      announce(t('tokens.once'));
    },

    async copy() {
      try {
        await navigator.clipboard.writeText($('token-value').value);
        announce(t('tokens.copied'));
      } catch (e) {
        $('token-value').select();
        announce(t('tokens.copy_by_hand'));
      }
    },

    async revoke(x) {
      try {
        await call('DELETE', '/tokens/' + encodeURIComponent(String(x.id)));
      } catch (e) {
        $('tokens-status').textContent = t('tokens.failed', { reason: describeError(e) });
        return;
      }
      await this.load();
      announce(t('tokens.revoked', { name: String(x.name || '') }));
    },
  };

  // --- The editors' report (API.md 9.2) --------------------------------

  const report = {
    // Shown to the wiki's editors only: the server says who they are
    // (GET /reports lists the reports this person may read).
    async probe(user) {
      if (!user) return;
      let r;
      try {
        r = await call('GET', '/reports');
      } catch (e) {
        return;
      }
      if (!r.json || !Array.isArray(r.json.reports) || !r.json.reports.includes('unanswered')) return;
      $('report').hidden = false;
      this.load();
    },

    days() {
      const d = Number($('report-days').value);
      return [7, 30, 90, 365].includes(d) ? d : 30;
    },

    async load() {
      const days = this.days();
      $('report-csv').href = API + '/reports/unanswered?format=csv&days=' + days;
      let rep;
      try {
        rep = (await call('GET', '/reports/unanswered?days=' + days)).json;
      } catch (e) {
        $('report-status').textContent = t('report.failed', { reason: describeError(e) });
        return;
      }
      const groups = Array.isArray(rep.groups) ? rep.groups : [];
      $('report-status').textContent = groups.length ? '' : t('report.empty');
      $('report-groups').replaceChildren(...groups.map((g) => this.group(g)));
    },

    list(title, items) {
      if (!items.length) return null;
      const box = el('div', 'report-list');
      box.appendChild(el('h4', null, title));
      const ul = el('ul');
      for (const x of items) {
        const li = el('li');
        li.append(x);
        ul.appendChild(li);
      }
      box.appendChild(ul);
      return box;
    },

    group(g) {
      const li = el('li', 'report-group');
      const q = el('h3', 'question', String(g.question || ''));
      q.dir = 'auto';
      li.appendChild(q);
      const sig = g.signals || {};
      const neg = sig.negative_feedback || {};
      const failed = sig.failed || {};
      const facts = [t('report.asked', { number: Number(g.count) || 0 })];
      if (g.last_asked) facts.push(t('report.last_asked', { time: formatTime(g.last_asked) }));
      if (sig.no_sources) facts.push(t('report.no_sources', { number: Number(sig.no_sources) }));
      if (sig.unverified) facts.push(t('report.unverified', { number: Number(sig.unverified) }));
      if (neg.count) facts.push(t('report.negative_feedback', { number: Number(neg.count) }));
      if (failed.count) facts.push(t('report.failed_count', { number: Number(failed.count) }));
      li.appendChild(el('p', 'meta', facts.join(' · ')));

      const wordings = (Array.isArray(g.wordings) ? g.wordings : []).filter((w) => w !== g.question);
      const reasons = neg.reasons && typeof neg.reasons === 'object' ? Object.keys(neg.reasons) : [];
      const parts = [
        this.list(t('report.wordings'), wordings.map(String)),
        this.list(t('report.searches'), (Array.isArray(g.searches) ? g.searches : []).map(
          (x) => t('report.search', { query: String(x.query), results: Number(x.results) || 0 }))),
        this.list(t('report.pages'), (Array.isArray(g.pages) ? g.pages : []).map((x) => {
          const href = safeHref(x.url);
          return href ? outLink(href, String(x.title)) : String(x.title);
        })),
        this.list(t('report.reasons'), reasons.filter((r) => I18n.has('feedback.reason.' + r)).map(
          (r) => t('report.reason', { reason: t('feedback.reason.' + r), number: Number(neg.reasons[r]) || 0 }))),
        this.list(t('report.comments'), (Array.isArray(neg.comments) ? neg.comments : []).map(String)),
      ].filter(Boolean);
      li.append(...parts);
      const href = safeHref(g.new_page_url);
      if (href) {
        const p = el('p', 'create');
        p.appendChild(outLink(href, t('report.create_page')));
        li.appendChild(p);
      }
      return li;
    },
  };

  const app = {
    streams: null, // whether the daemon has the event streams (null: not known yet)
    view: null,
    running: false,

    setBusy(b) {
      this.running = b;
      $('ask-button').disabled = b;
    },

    // The form: the query starts at once when the slot is free (or
    // reserved for us), else the page joins the queue and asks when it is
    // its turn.
    async submit() {
      clearErrors();
      return this.ask($('question').value.trim(), parsePages($('pages').value), undefined, 'question');
    },

    // A follow-up of the answer shown (API.md 7): asked like any question.
    async followUp() {
      clearErrors();
      if (!this.view || !this.view.id) return;
      const ok = await this.ask($('follow-question').value.trim(), [], this.view.id, 'follow-question');
      if (ok) $('follow-question').value = '';
    },

    async ask(question, pages, followUp, field) {
      let bad = null;
      if (!question) bad = [t('form.empty'), field];
      else if (question.length > QUESTION_MAX) bad = [t('form.too_long', { count: QUESTION_MAX }), field];
      else if (pages.length > PAGES_MAX) bad = [t('form.too_many_pages', { count: PAGES_MAX }), 'pages'];
      else if (pages.some((p) => new TextEncoder().encode(p).length > 255)) bad = [t('form.title_too_long', { count: 255 }), 'pages'];
      if (bad) {
        showError(new ApiError('invalid_input', bad[0], 400, null, true));
        $(bad[1]).focus();
        return false;
      }
      if (this.running) {
        showError(new ApiError('busy', t('form.busy'), 409, null, true));
        return false;
      }
      const pending = { question, pages };
      if (followUp) pending.follow_up = followUp;
      savePending(pending);
      routeRecord(null); // the page shows the new question, not the record named
      try {
        const st = (await call('GET', '/queue/status')).json;
        const t = st.ticket;
        if ((t && t.status === 'reserved') || (!t && st.state === 'idle')) {
          await this.run(question, pages, followUp);
          return true;
        }
        if (!t) await call('POST', '/queue/join');
        queue.follow();
        return true;
      } catch (e) {
        showError(e);
        if (e.code === 'queue_full') clearPending();
        return false;
      }
    },

    // "Copy link" (API.md 9): a new share link, shown and copied; "Stop
    // sharing" revokes every link of the record.
    async share() {
      clearErrors();
      const view = this.view;
      if (!view || !view.id) return;
      let res;
      try {
        res = (await call('POST', '/history/' + view.id + '/share')).json;
      } catch (e) {
        showError(e);
        return;
      }
      if (!res || typeof res.url !== 'string' || !/^\/#\/shared\/sh_[0-9a-f]{64}$/.test(res.url)) return;
      const url = window.location.origin + res.url;
      $('share-url').value = url;
      $('share-line').hidden = false;
      $('unshare-button').hidden = false;
      let copied = false;
      try {
        await navigator.clipboard.writeText(url);
        copied = true;
      } catch (e) {
        /* no clipboard here: the link is shown to copy by hand */
      }
      if (copied) announce(t('share.copied'));
      else {
        announce(t('share.shown'));
        $('share-url').select();
      }
    },

    async unshare() {
      clearErrors();
      const view = this.view;
      if (!view || !view.id) return;
      try {
        await call('DELETE', '/history/' + view.id + '/share');
      } catch (e) {
        showError(e);
        return;
      }
      $('share-line').hidden = true;
      $('share-url').value = '';
      $('unshare-button').hidden = true;
      announce(t('share.stopped'));
      $('share-button').focus();
    },

    // Ask now (API.md 7, 11.2): a stream of events, or the blocking reply
    // of a daemon without streams.
    async run(question, pages, followUp) {
      queue.stop();
      setStatus('asking', []);
      clearErrors();
      const view = new QueryView(question);
      this.setBusy(true);
      const body = { question };
      if (pages && pages.length) body.pages = pages;
      if (followUp) body.follow_up = followUp;
      // Without a stream the id comes only with the reply: find the
      // running record, so that a reload can re-attach.
      const finder = setTimeout(() => this.findRunning(view), 500);
      const waiting = view.note(t('step.waiting'), 'waiting');
      try {
        const res = await openStream('POST', '/query', { body });
        clearPending();
        if (res.stream) {
          this.streams = true;
          if (waiting) waiting.remove();
          const lastId = await readEvents(res.stream, (name, d) => view.event(name, d));
          if (!view.done && view.id) await this.attach(view.id, view, lastId);
        } else {
          if (this.streams === null) this.streams = false;
          view.showRecord(res.json);
        }
      } catch (e) {
        if (e.code === 'busy') {
          // Someone was faster: queue, and ask when it is our turn.
          if (view.shown) $('query').hidden = true;
          try {
            await call('POST', '/queue/join');
            queue.follow();
          } catch (e2) {
            showError(e2);
          }
          return;
        }
        const qid = e.headers && e.headers.get('Wikiweb-Query-Id');
        if (qid && /^qr_[0-9a-f]{32}$/.test(qid)) {
          // It ran and failed: its record says how.
          clearPending();
          try {
            view.showRecord((await call('GET', '/history/' + qid)).json);
          } catch (e2) {
            showError(e);
          }
        } else {
          if (e.code !== 'network') clearPending();
          if (view.shown) $('query').hidden = true;
          showError(e);
        }
      } finally {
        clearTimeout(finder);
        this.finished(view);
      }
    },

    async findRunning(view) {
      if (view.id || view.done) return;
      try {
        const items = (await call('GET', '/history?limit=5')).json.items;
        const r = items.find((x) => x.status === 'running');
        if (r && !view.id && !view.done) {
          view.id = r.id;
          remember(r.id);
        }
      } catch (e) {
        /* only a help for a reload */
      }
    },

    finished(view) {
      if (view.done && view.shown && view.record) {
        const rec = view.record;
        if (rec.status === 'succeeded') announce(t('answer.ready', { question: String(rec.question || '') }));
        else if (rec.status === 'failed') announce(t('answer.failed', { reason: failureWords(rec.error) }));
      }
      if (this.view === view || !this.view) {
        turn.reset();
        forget();
        this.setBusy(false);
        if ($('status').dataset.state === 'asking') setStatus('', []);
      }
      history.load(true);
    },

    // Watch a running query to its end (API.md 11.3), from the events after
    // lastId (none: all of them, into a fresh view), or by polling its
    // record on a daemon without streams.
    async attach(id, view, lastId) {
      remember(id);
      this.setBusy(true);
      let failures = 0;
      while (!view.done && view.shown) {
        try {
          if (this.streams !== false) {
            const res = await openStream('GET', '/history/' + id + '/events', { lastEventId: lastId });
            if (res.stream) {
              this.streams = true;
              lastId = (await readEvents(res.stream, (name, d) => view.event(name, d))) || lastId;
              failures = 0;
              continue;
            }
            if (res.json && res.json.status && res.json.status !== 'running') {
              view.showRecord(res.json);
              break;
            }
          }
          const rec = (await call('GET', '/history/' + id)).json;
          if (rec.status !== 'running') {
            view.showRecord(rec);
            break;
          }
          await sleep(1000);
        } catch (e) {
          if (e.code === 'not_found') {
            this.streams = false;
            continue;
          }
          if (e.code === 'query_not_found' || ++failures > 10) {
            showError(e);
            break;
          }
          await sleep(1000);
        }
      }
      this.finished(view);
    },

    async open(id) {
      clearErrors();
      let rec;
      try {
        rec = (await call('GET', '/history/' + id)).json;
      } catch (e) {
        showError(e);
        return;
      }
      if (rec.status === 'running' && this.view && this.view.id === id && !this.view.done) {
        $('query-title').focus();
        return;
      }
      routeRecord(id);
      const view = new QueryView(rec.question);
      view.id = id;
      if (rec.status === 'running') this.attach(id, view, null);
      else view.showRecord(rec, { old: true });
      $('query-title').focus();
    },

    // After a reload: a running query of ours is watched again, a ticket
    // is followed again (and its question asked when its turn comes).
    async resume() {
      let st;
      // A question was waiting for its turn when the page went away: its
      // place is looked up again.
      if (loadPending()) queue.reconnecting();
      try {
        st = (await call('GET', '/queue/status')).json; // first: it makes the session
      } catch (e) {
        showError(e);
        return;
      }
      showUser(st.user);
      report.probe(st.user);
      tokens.probe(st.user);
      if (!st.ticket && $('status').dataset.state === 'reconnecting') setStatus('', []);
      this.checkSetup();
      const items = await history.load(true);
      // A record the address names (/#/history/<id>) is shown first.
      const routed = routedRecord();
      let id = routed || (st.running_query && st.running_query.id) || remembered();
      if (!id) {
        const r = items.find((x) => x.status === 'running');
        if (r) id = r.id;
      }
      if (id) {
        let rec = null;
        try {
          rec = (await call('GET', '/history/' + id)).json;
        } catch (e) {
          forget();
          // Not there, or not theirs: the API's not_found, in words.
          if (id === routed) showError(e);
        }
        if (rec && rec.status === 'running') {
          const view = new QueryView(rec.question);
          view.id = id;
          view.note(t('answer.reattached'));
          await this.attach(id, view, null);
          return;
        }
        if (rec && id === routed) {
          const view = new QueryView(rec.question);
          view.id = id;
          view.showRecord(rec, { old: true });
          forget();
          $('query-title').focus();
        } else if (rec && remembered() === id) {
          // It ended while the page was away.
          new QueryView(rec.question).showRecord(rec);
          forget();
        }
      }
      if (st.ticket) {
        const pending = loadPending();
        if (pending) {
          $('question').value = pending.question;
          $('pages').value = pending.pages.join('\n');
        }
        queue.show(st);
        if (!this.running) queue.follow();
      }
    },

    // Whether queries can run at all (API.md 4, health): without a wiki or
    // a model the page says which settings are missing instead of offering
    // a form whose every question would fail.
    async checkSetup() {
      let h;
      try {
        h = (await call('GET', '/health')).json;
      } catch (e) {
        return; // health is only a help here
      }
      if (!h || h.execution !== 'not_configured') return;
      const names = (Array.isArray(h.missing_settings) ? h.missing_settings : []).filter((n) => typeof n === 'string' && /^WIKI_WEB_[A-Z_]+$/.test(n));
      const box = $('setup-text');
      const settings = el('span');
      settings.append(...I18n.list(names, (n) => el('code', null, n)));
      const vars = { count: names.length, settings, file: el('code', null, '/etc/wikiweb/wikiweb.conf'), daemon: el('code', null, 'wikiwebd') };
      box.replaceChildren(...I18n.parts(names.length ? 'setup.missing' : 'setup.missing_unnamed', vars));
      $('setup').hidden = false;
      $('ask-form').hidden = true;
      $('ask-title').hidden = true;
    },

    async leave() {
      queue.stop();
      clearPending();
      try {
        await call('DELETE', '/queue/ticket');
        setStatus('left', [el('p', null, t('queue.left'))]);
      } catch (e) {
        if (e.code !== 'ticket_not_found') showError(e);
        else setStatus('left', [el('p', null, t('queue.left'))]);
      }
      $('question').focus();
    },
  };

  // The language switcher (index.html: each language named in itself); a
  // choice is kept (i18n.js) and the page's words follow it.
  function languages() {
    const sel = $('language-select');
    sel.value = I18n.lang();
    sel.addEventListener('change', () => I18n.set(sel.value));
    $('language').hidden = false;
    window.addEventListener('wikiweb-language', () => relabel());
  }

  // Words made before the language changed are made again.
  function relabel() {
    $('language-select').value = I18n.lang();
    if (shared.active) {
      shared.show(shared.active);
      return;
    }
    document.title = turn.titled ? t('turn.title', { title: t('page.title') }) : t('page.title');
    if (turn.hint) $('notify-hint').textContent = t(turn.hint);
    if (!$('banner').hidden) $('banner').textContent = t('turn.now');
    const st = queue.last;
    if (st) showUser(st.user);
    if (st && st.ticket && queue.ctl) queue.show(st);
    if (!$('setup').hidden) app.checkSetup();
    const v = app.view;
    if (v && v.done && v.record) new QueryView(v.record.question).showRecord(v.record, { old: v.old });
    history.load(true);
    if (!$('report').hidden) report.load();
    if (!$('tokens').hidden) tokens.load();
  }

  async function start() {
    await I18n.ready;
    languages();
    const token = shared.token();
    if (token) {
      shared.show(token);
      window.addEventListener('hashchange', () => window.location.reload());
      return;
    }
    window.addEventListener('hashchange', () => {
      if (shared.token()) window.location.reload();
      const id = routedRecord();
      if (id && !(app.view && app.view.id === id)) app.open(id);
    });
    $('follow-form').addEventListener('submit', (e) => {
      e.preventDefault();
      app.followUp();
    });
    $('share-button').addEventListener('click', () => app.share());
    $('unshare-button').addEventListener('click', () => app.unshare());
    $('ask-form').addEventListener('submit', (e) => {
      e.preventDefault();
      app.submit();
    });
    $('question').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        $('ask-form').requestSubmit();
      }
    });
    $('leave-button').addEventListener('click', () => app.leave());
    $('notify-button').addEventListener('click', () => turn.ask());
    $('notify-sound').addEventListener('change', () => {
      if ($('notify-sound').checked) turn.prepareSound();
    });
    $('history-more').addEventListener('click', () => history.load(false));
    // GET /api/v1/history/export (API.md 9): the whole history as one ZIP.
    $('history-download').href = API + '/history/export';
    $('history-erase').addEventListener('click', () => history.confirmErase());
    $('erase-cancel').addEventListener('click', () => $('erase-dialog').close());
    $('erase-confirm').addEventListener('click', () => history.erase());
    // Closed by Cancel, Escape or after the deletion: the keyboard goes
    // back where it was, unless the deletion moved it on.
    $('erase-dialog').addEventListener('close', () => {
      if (document.activeElement === document.body || $('erase-dialog').contains(document.activeElement))
        $('history-erase').focus();
    });
    $('feedback-up').addEventListener('click', () => feedback.up());
    $('feedback-down').addEventListener('click', () => feedback.down());
    $('feedback-form').addEventListener('submit', (e) => {
      e.preventDefault();
      feedback.submit();
    });
    $('report-days').addEventListener('change', () => report.load());
    $('tokens-form').addEventListener('submit', (e) => {
      e.preventDefault();
      tokens.create();
    });
    $('token-copy').addEventListener('click', () => tokens.copy());
    $('history-title').tabIndex = -1;
    turn.restore();
    app.resume();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
