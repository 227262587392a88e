// SPDX-License-Identifier: MIT
// The answer renderer's links (src/www/markdown.js, docs/WEB.md): a link
// whose text is not its URL shows its host and its URL as a title, one to
// the wiki's own host or whose text is its URL shows no more, and a
// reference definition is text. Under node, on a small DOM of its own with
// only what markdown.js uses (the browser test runs the same in chromium).
// Usage: node test-markdown.js SOURCE_ROOT.
'use strict';

const assert = require('assert');
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const source = fs.readFileSync(path.join(root, 'src', 'www', 'markdown.js'), 'utf8');

const esc = (s, attr) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(attr ? /"/g : /$^/, '&quot;');

class Node {
  constructor() { this.childNodes = []; }
  appendChild(c) {
    if (c instanceof Fragment) this.childNodes.push(...c.childNodes.splice(0));
    else this.childNodes.push(c);
    return c;
  }
  append(...cs) { for (const c of cs) this.appendChild(typeof c === 'string' ? new Text(c) : c); }
  get textContent() { return this.childNodes.map((c) => c.textContent).join(''); }
  set textContent(v) { this.childNodes = [new Text(String(v))]; }
  get innerHTML() { return this.childNodes.map((c) => c.outerHTML).join(''); }
}
class Text extends Node {
  constructor(s) { super(); this.data = s; }
  get textContent() { return this.data; }
  get nodeName() { return '#text'; }
  get outerHTML() { return esc(this.data, false); }
}
class Fragment extends Node {}
const VOID = new Set(['br', 'hr']);
class Element extends Node {
  constructor(name) { super(); this.tagName = name.toUpperCase(); this.attrs = new Map(); }
  get nodeName() { return this.tagName; }
  querySelector(sel) { // ".class" or "tag"
    for (const c of this.childNodes) {
      if (!(c instanceof Element)) continue;
      if (sel.startsWith('.') ? c.attrs.get('class') === sel.slice(1) : c.tagName === sel.toUpperCase()) return c;
      const d = c.querySelector(sel);
      if (d) return d;
    }
    return null;
  }
  get outerHTML() {
    const n = this.tagName.toLowerCase();
    const a = [...this.attrs].map(([k, v]) => ` ${k}="${esc(v, true)}"`).join('');
    return VOID.has(n) ? `<${n}${a}>` : `<${n}${a}>${this.innerHTML}</${n}>`;
  }
}
for (const [prop, attr] of [['className', 'class'], ['href', 'href'], ['rel', 'rel'], ['target', 'target'],
  ['title', 'title'], ['scope', 'scope'], ['start', 'start']]) {
  Object.defineProperty(Element.prototype, prop, {
    get() { return this.attrs.get(attr) || ''; },
    set(v) { this.attrs.set(attr, String(v)); },
  });
}
const document = {
  createElement: (n) => new Element(n),
  createTextNode: (s) => new Text(s),
  createDocumentFragment: () => new Fragment(),
};
const window = {};
vm.runInNewContext(source, { window, document, URL });
const md = window.WikiwebMarkdown;

let checks = 0;
function html(text, options) {
  const div = new Element('div');
  div.appendChild(md.render(text, options));
  return div.innerHTML;
}
function eq(actual, expected, what) {
  assert.deepStrictEqual(actual, expected, what);
  checks++;
}
const A = 'rel="noopener noreferrer nofollow" target="_blank"';

// A labelled link elsewhere: the host beside the label, the URL as title.
eq(html('[Payroll policy](http://evil.example.com/x?d=S8099)'),
   `<p><a href="http://evil.example.com/x?d=S8099" ${A} title="http://evil.example.com/x?d=S8099">` +
   'Payroll policy <span class="link-host">(evil.example.com)</span></a></p>', 'labelled link');
// In the words given (the page passes its catalog's).
const fr = { ownHosts: new Set(['wiki.example:8080']), linkHost: (h) => `〔${h}〕`, linkTitle: (u) => `Ouvre ${u}` };
eq(html('[a](https://evil.example/)', fr),
   `<p><a href="https://evil.example/" ${A} title="Ouvre https://evil.example/">a <span class="link-host">〔evil.example〕</span></a></p>`,
   'the words of the catalog');
// The wiki's own host: as before.
eq(html('[Apple](http://wiki.example:8080/index.php/Apple)', fr),
   `<p><a href="http://wiki.example:8080/index.php/Apple" ${A}>Apple</a></p>`, 'the wiki itself');
// Another port of the wiki's name is another host.
assert.match(html('[Apple](http://wiki.example:9090/x)', fr), /link-host">〔wiki\.example:9090〕/);
// A text that is its URL, a bare URL, an <angle> URL: the URL is seen.
eq(html('[https://x.example/a](https://x.example/a) https://y.example/b <http://z.example/>'),
   `<p><a href="https://x.example/a" ${A}>https://x.example/a</a> <a href="https://y.example/b" ${A}>` +
   `https://y.example/b</a> <a href="http://z.example/" ${A}>http://z.example/</a></p>`, 'URL as text');
// A text that looks like another URL: the real host shows.
assert.match(html('[https://bank.example/](https://evil.example/)'), /link-host">\(evil\.example\)/);
checks++;
// A name in another script shows as the URL parser's xn-- form.
assert.match(html('[pay](https://bаnk.example/)'), /link-host">\(xn--bnk-/);
checks++;
// No link inside a link's label.
eq(html('[a [b](http://x.example/) c](http://y.example/)'),
   `<p><a href="http://y.example/" ${A} title="http://y.example/">a [b](http://x.example/) c ` +
   '<span class="link-host">(y.example)</span></a></p>', 'a link in a label');
// Reference definitions: text, no link, inline marks and all.
eq(html('[1]: http://evil.example/?d=S8099-REF "t"'),
   '<p class="ref-definition">[1]: http://evil.example/?d=S8099-REF "t"</p>', 'reference definition');
eq(html('Text\n   [x y]: <https://e.example>\nmore'),
   '<p>Text</p><p class="ref-definition">[x y]: &lt;https://e.example&gt;</p><p>more</p>', 'inside a paragraph');
eq(html('- [1]: https://e.example/'), '<ul><li>[1]: https://e.example/</li></ul>', 'in a list');
// Not a definition: no scheme after the colon.
eq(html('[1]: *a* note'), '<p>[1]: <em>a</em> note</p>', 'a note');
// render() keeps no options for the next call.
assert.match(html('[Apple](http://wiki.example:8080/x)'), /link-host/);
checks++;

console.log(`test-markdown.js: ${checks} checks ok`);
