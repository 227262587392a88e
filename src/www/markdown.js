// SPDX-License-Identifier: MIT
// A small Markdown renderer for the model's answers (API.md 13), inert by
// construction: it never parses HTML. It reads the text and builds DOM nodes
// itself, from a fixed list of elements, with text only through text nodes
// and one attribute that points anywhere: the href of a link, which must be
// an absolute http: or https: URL. Raw HTML in the answer (<img onerror>,
// <script>, <a href>) comes out as the characters it is made of.
//
// The subset: paragraphs, headings, emphasis (*em*, **strong**, ~~del~~),
// `code` and fenced code blocks, bullet and numbered lists (nested by
// indentation), pipe tables, block quotes, rules, links [text](https://...)
// and bare or <angle> http(s) URLs. Images are not loaded: ![alt](src) shows
// its alt text. A link whose text is not its URL shows its host beside it;
// a reference definition ("[1]: http://…") is text. Anything else is text.
//
// WikiwebMarkdown.render(text, options) -> DocumentFragment; also safeUrl(), the link
// check, and buildTable(), which the page's CSV preview shares.
'use strict';

(function (global) {
  const MAX_DEPTH = 16; // nesting of lists and quotes; deeper is text

  function el(name, cls) {
    const e = document.createElement(name);
    if (cls) e.className = cls;
    return e;
  }

  // An absolute http(s) URL, as a string the link may use, or null.
  function safeUrl(raw) {
    let u;
    try {
      u = new URL(raw);
    } catch (e) {
      return null;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    return u.href;
  }

  // What render() was given to say where links go: the wiki's own hosts,
  // and the words for a host and a title (the page's catalogs).
  let shown = null;
  let inLabel = 0; // inside a link's label: no links there

  // A link. One whose text is not its URL ([Payroll policy](http://evil/?d=…))
  // says where it goes: its destination's host beside the label, and its
  // URL as the title, unless it points at the wiki itself (its sources'
  // host), whose links look as they always did.
  function link(href, children) {
    const a = el('a');
    a.href = href;
    a.rel = 'noopener noreferrer nofollow';
    a.target = '_blank';
    for (const c of children) a.appendChild(c);
    const text = a.textContent.trim();
    const host = new URL(href).host;
    const own = shown && shown.ownHosts && shown.ownHosts.has(host);
    if (!own && text !== href && text !== href.replace(/\/$/, '') && safeUrl(text) !== href) {
      const h = el('span', 'link-host');
      h.textContent = shown && shown.linkHost ? shown.linkHost(host) : '(' + host + ')';
      a.append(' ', h);
      a.title = shown && shown.linkTitle ? shown.linkTitle(href) : href;
    }
    return a;
  }

  // --- Inline -------------------------------------------------------------

  const PUNCT = /[!-/:-@[-`{-~]/;
  const WORD = /[\p{L}\p{N}_]/u;
  const BARE_URL = /^https?:\/\/[^\s<>"']+/;

  // The index of the `]` closing the `[` at i, or -1 (brackets nest,
  // backslash escapes and code spans count).
  function closeBracket(s, i) {
    let depth = 0;
    for (let k = i; k < s.length; k++) {
      const c = s[k];
      if (c === '\\') k++;
      else if (c === '`') {
        const end = closeCode(s, k);
        if (end > 0) k = end - 1;
      } else if (c === '[') depth++;
      else if (c === ']' && --depth === 0) return k;
    }
    return -1;
  }

  // For a backtick run at i: the index after the closing run, or -1.
  function closeCode(s, i) {
    let n = 0;
    while (s[i + n] === '`') n++;
    for (let k = i + n; k < s.length;) {
      if (s[k] !== '`') {
        k++;
        continue;
      }
      let m = 0;
      while (s[k + m] === '`') m++;
      if (m === n) return k + m;
      k += m;
    }
    return -1;
  }

  // "(url)" or "(url "title")" at i: [url, index after ")"], or null.
  function linkTarget(s, i) {
    if (s[i] !== '(') return null;
    const m = /^\(\s*<?([^\s<>()]*(?:\([^\s<>()]*\)[^\s<>()]*)*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/.exec(s.slice(i));
    if (!m) return null;
    return [m[1], i + m[0].length];
  }

  // A delimiter run of c at i can open (close) emphasis.
  function canOpen(s, i, n, c) {
    const next = s[i + n];
    if (next === undefined || /\s/.test(next)) return false;
    return c !== '_' || i === 0 || !WORD.test(s[i - 1]);
  }
  function canClose(s, i, n, c) {
    const prev = s[i - 1];
    if (prev === undefined || /\s/.test(prev)) return false;
    return c !== '_' || i + n >= s.length || !WORD.test(s[i + n]);
  }

  // The start of the closing run of exactly n c's for an opener ending at
  // from, or -1; code spans and escapes are skipped.
  function findCloser(s, from, n, c) {
    for (let k = from; k < s.length; k++) {
      const ch = s[k];
      if (ch === '\\') {
        k++;
        continue;
      }
      if (ch === '`') {
        const end = closeCode(s, k);
        if (end > 0) k = end - 1;
        continue;
      }
      if (ch !== c) continue;
      let m = 0;
      while (s[k + m] === c) m++;
      if (m === n && k > from && canClose(s, k, n, c)) return k;
      k += m - 1;
    }
    return -1;
  }

  function inline(s, depth) {
    const out = [];
    let text = '';
    const flush = () => {
      if (text) out.push(document.createTextNode(text));
      text = '';
    };
    const push = (node) => {
      flush();
      out.push(node);
    };

    for (let i = 0; i < s.length;) {
      const c = s[i];
      if (c === '\\' && i + 1 < s.length && PUNCT.test(s[i + 1])) {
        text += s[i + 1];
        i += 2;
        continue;
      }
      if (c === '\\' && s[i + 1] === '\n') {
        push(el('br'));
        i += 2;
        continue;
      }
      if (c === '\n') {
        // Two spaces before a line end: a hard break; else a space.
        if (/ {2,}$/.test(text)) {
          text = text.replace(/ +$/, '');
          push(el('br'));
        } else text += ' ';
        i++;
        continue;
      }
      if (c === '`') {
        const end = closeCode(s, i);
        let n = 0;
        while (s[i + n] === '`') n++;
        if (end < 0) {
          text += s.slice(i, i + n);
          i += n;
          continue;
        }
        let body = s.slice(i + n, end - n).replace(/\n/g, ' ');
        if (/^ .*[^ ].* $/.test(body)) body = body.slice(1, -1);
        const code = el('code');
        code.textContent = body;
        push(code);
        i = end;
        continue;
      }
      if (((c === '[' && !inLabel) || (c === '!' && s[i + 1] === '[')) && depth < MAX_DEPTH) {
        const open = c === '!' ? i + 1 : i;
        const close = closeBracket(s, open);
        const target = close > 0 ? linkTarget(s, close + 1) : null;
        if (target) {
          const label = s.slice(open + 1, close);
          const href = safeUrl(target[0]);
          if (c === '!')
            text += label; // an image is never loaded: its alt text
          else if (href) {
            // No link inside a link: a URL in the label is its text.
            inLabel++;
            try {
              push(link(href, inline(label, depth + 1)));
            } finally {
              inLabel--;
            }
          }
          else {
            // Not a link we make (javascript:, data:, relative...): the
            // label, as text.
            flush();
            out.push(...inline(label, depth + 1));
          }
          i = target[1];
          continue;
        }
      }
      if (c === '<' && !inLabel) {
        const m = /^<(https?:\/\/[^\s<>]+)>/.exec(s.slice(i));
        const href = m && safeUrl(m[1]);
        if (href) {
          push(link(href, [document.createTextNode(m[1])]));
          i += m[0].length;
          continue;
        }
      }
      // A bare URL where a word starts (not inside what looks like an
      // attribute value: href="http://...").
      if ((c === 'h' || c === 'H') && !inLabel && (i === 0 || /[\s(*_~]/.test(s[i - 1]))) {
        const m = BARE_URL.exec(s.slice(i));
        if (m) {
          // Trailing punctuation is the sentence's, and a ")" the text's
          // unless the URL opened it.
          let raw = m[0];
          for (;;) {
            const t = raw.replace(/[.,;:!?\]*_~'"]+$/, '');
            if (t.endsWith(')') && t.split('(').length < t.split(')').length) raw = t.slice(0, -1);
            else {
              raw = t;
              break;
            }
          }
          const href = safeUrl(raw);
          if (href) {
            push(link(href, [document.createTextNode(raw)]));
            i += raw.length;
            continue;
          }
        }
      }
      if ((c === '*' || c === '_' || c === '~') && depth < MAX_DEPTH) {
        let n = 0;
        while (s[i + n] === c) n++;
        const ok = c === '~' ? n === 2 : n <= 3;
        const close = ok && canOpen(s, i, n, c) ? findCloser(s, i + n, n, c) : -1;
        if (close > 0) {
          const inner = inline(s.slice(i + n, close), depth + 1);
          let node;
          if (c === '~') {
            node = el('del');
            node.append(...inner);
          } else if (n === 1) {
            node = el('em');
            node.append(...inner);
          } else if (n === 2) {
            node = el('strong');
            node.append(...inner);
          } else {
            const em = el('em');
            em.append(...inner);
            node = el('strong');
            node.appendChild(em);
          }
          push(node);
          i = close + n;
          continue;
        }
        text += s.slice(i, i + n);
        i += n;
        continue;
      }
      text += c;
      i++;
    }
    flush();
    return out;
  }

  // --- Blocks -------------------------------------------------------------

  const REF_DEFINITION = /^ {0,3}\[[^\]]+\]:\s*<?[a-z][a-z0-9+.-]*:/i;
  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const TABLE_SEP = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

  function isBlank(line) {
    return /^\s*$/.test(line);
  }

  // The cells of a table row: split on "|" outside code spans and escapes.
  function cells(line) {
    let s = line.trim();
    if (s.startsWith('|')) s = s.slice(1);
    if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
    const out = [];
    let cur = '';
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      if (c === '\\' && s[i + 1] === '|') {
        cur += '|';
        i++;
      } else if (c === '`') {
        const end = closeCode(s, i);
        if (end > 0) {
          cur += s.slice(i, end);
          i = end - 1;
        } else cur += c;
      } else if (c === '|') {
        out.push(cur.trim());
        cur = '';
      } else cur += c;
    }
    out.push(cur.trim());
    return out;
  }

  // A table in its scrolling box: head is a list of cells, rows a list of
  // lists; fill(cell element, value) puts a value into its cell; align[k]
  // is "", "left", "center" or "right" for column k.
  function buildTable(head, rows, fill, align) {
    const wrap = el('div', 'table-wrap');
    const t = el('table');
    const cell = (name, value, k) => {
      const c = el(name, align && align[k] ? 'align-' + align[k] : '');
      fill(c, value);
      return c;
    };
    const thead = el('thead');
    const tr = el('tr');
    head.forEach((v, k) => {
      const th = cell('th', v, k);
      th.scope = 'col';
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    t.appendChild(thead);
    const tbody = el('tbody');
    for (const r of rows) {
      const row = el('tr');
      // Every row as wide as the head: missing cells are empty.
      head.forEach((_, k) => row.appendChild(cell('td', r[k] === undefined ? '' : r[k], k)));
      tbody.appendChild(row);
    }
    if (rows.length) t.appendChild(tbody);
    wrap.appendChild(t);
    return wrap;
  }

  function table(lines, depth) {
    const align = cells(lines[1]).map((c) =>
      c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : '');
    return buildTable(cells(lines[0]), lines.slice(2).map(cells), (c, v) => c.append(...inline(v, depth + 1)), align);
  }

  function list(lines, depth) {
    const first = ITEM.exec(lines[0]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const node = el(ordered ? 'ol' : 'ul');
    if (ordered) {
      const start = parseInt(first[2], 10);
      if (start !== 1) node.start = start;
    }
    const items = [];
    let loose = false;
    for (let k = 0; k < lines.length; k++) {
      const m = ITEM.exec(lines[k]);
      if (m && m[1].length <= indent + 1 && /\d/.test(m[2]) === ordered) items.push([m[3] || '']);
      else {
        const body = items[items.length - 1];
        // A continuation: dedented by the item's content offset.
        body.push(lines[k].replace(new RegExp('^ {0,' + (indent + 4) + '}'), ''));
        if (isBlank(lines[k]) && k + 1 < lines.length && ITEM.exec(lines[k + 1])) loose = true;
      }
    }
    for (const body of items) {
      while (body.length && isBlank(body[body.length - 1])) body.pop();
      const li = el('li');
      const inner = blocks(body, depth + 1);
      // A tight list: its single paragraphs without the <p>.
      if (!loose) {
        for (const child of Array.from(inner.childNodes)) {
          if (child.nodeName !== 'P') li.appendChild(child);
          else {
            if (li.childNodes.length) li.appendChild(el('br'));
            li.append(...child.childNodes);
          }
        }
      } else li.appendChild(inner);
      node.appendChild(li);
    }
    return node;
  }

  // Lines -> a DocumentFragment of block elements.
  function blocks(lines, depth) {
    const frag = document.createDocumentFragment();
    if (depth > MAX_DEPTH) {
      const p = el('p');
      p.textContent = lines.join('\n');
      frag.appendChild(p);
      return frag;
    }
    let para = [];
    const endPara = () => {
      if (!para.length) return;
      const p = el('p');
      p.append(...inline(para.join('\n').trim(), depth));
      frag.appendChild(p);
      para = [];
    };

    for (let i = 0; i < lines.length;) {
      const line = lines[i];
      let m;
      if (isBlank(line)) {
        endPara();
        i++;
      } else if (REF_DEFINITION.test(line)) {
        // A reference definition ("[1]: http://…") makes no link: the
        // line as it was written, so its URL is seen, not clicked.
        endPara();
        const p = el('p', 'ref-definition');
        p.textContent = line.trim();
        frag.appendChild(p);
        i++;
      } else if ((m = FENCE.exec(line))) {
        endPara();
        const fence = m[1];
        const body = [];
        i++;
        while (i < lines.length && !new RegExp('^ {0,3}' + fence[0] + '{' + fence.length + ',}\\s*$').test(lines[i]))
          body.push(lines[i++]);
        i++; // the closing fence (or the end)
        const pre = el('pre');
        const code = el('code');
        code.textContent = body.join('\n');
        pre.appendChild(code);
        frag.appendChild(pre);
      } else if ((m = HEADING.exec(line))) {
        endPara();
        // The page's own headings are h1 and h2: an answer's start at h3.
        const h = el('h' + Math.min(6, m[1].length + 2));
        h.append(...inline(m[2] || '', depth));
        frag.appendChild(h);
        i++;
      } else if (RULE.test(line) && !(para.length && /^ {0,3}-+\s*$/.test(line))) {
        endPara();
        frag.appendChild(el('hr'));
        i++;
      } else if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) &&
                 lines[i + 1].includes('-') && (lines[i + 1].includes('|') || line.trim().startsWith('|'))) {
        endPara();
        const rows = [line, lines[i + 1]];
        i += 2;
        while (i < lines.length && !isBlank(lines[i]) && lines[i].includes('|')) rows.push(lines[i++]);
        frag.appendChild(table(rows, depth));
      } else if ((m = QUOTE.exec(line))) {
        endPara();
        const body = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
          body.push(m[1]);
          i++;
        }
        const q = el('blockquote');
        q.appendChild(blocks(body, depth + 1));
        frag.appendChild(q);
      } else if ((m = ITEM.exec(line)) && m[1].length < 4 && (m[3] || !para.length) &&
                 (!para.length || !/\d/.test(m[2]) || m[2].startsWith('1'))) {
        endPara();
        const indent = m[1].length;
        const body = [line];
        i++;
        while (i < lines.length) {
          const l = lines[i];
          const n = ITEM.exec(l);
          if (isBlank(l)) {
            // A blank line ends the list unless an item or an indented
            // continuation follows.
            const next = lines[i + 1];
            if (next === undefined || !(ITEM.exec(next) || /^ {2,}\S/.test(next))) break;
            body.push(l);
            i++;
          } else if (n || /^\s/.test(l) || !isBlank(body[body.length - 1])) {
            if (n && n[1].length < indent) break;
            body.push(l);
            i++;
          } else break;
        }
        frag.appendChild(list(body, depth));
      } else {
        para.push(line);
        i++;
      }
    }
    endPara();
    return frag;
  }

  // options: ownHosts, a Set of the hosts whose links show nothing more
  // (the wiki's); linkHost(host) and linkTitle(url), the words beside a
  // link and its title. Without them: "(host)" and the URL.
  function render(text, options) {
    const s = String(text == null ? '' : text).replace(/\r\n?/g, '\n').replace(/\t/g, '    ');
    shown = options || null;
    try {
      return blocks(s.split('\n'), 0);
    } finally {
      shown = null;
    }
  }

  global.WikiwebMarkdown = Object.freeze({ render, safeUrl, buildTable });
})(window);
