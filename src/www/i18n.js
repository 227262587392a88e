// SPDX-License-Identifier: MIT
// The page's words in the person's language (docs/WEB.md "Languages").
//
// One catalog a language, /i18n/<lang>.json: a flat object of keys to
// messages. A message has {name} placeholders; a plural message is an
// object keyed by the categories of Intl.PluralRules ("zero", "one",
// "two", "few", "many", "other"), chosen by the "count" variable. Only
// the chosen language's catalog is fetched. Numbers, dates and durations
// go through Intl, never by hand.
//
// The language: the one chosen on the page (localStorage), else the first
// of navigator.languages the page has, trying each tag and then its base
// ("de-AT", then "de"), else English.
'use strict';

(function (root) {
  const LANGUAGES = ['en', 'de', 'fr', 'es', 'ja', 'ar'];
  const RTL = new Set(['ar']);
  const CHOICE_KEY = 'wikiweb.lang'; // the language chosen on the page (localStorage)

  // The first of prefs (BCP 47 tags, best first) that one of available
  // serves, exactly or through its base language; else "en".
  function choose(prefs, available) {
    const have = available || LANGUAGES;
    for (const tag of Array.isArray(prefs) ? prefs : []) {
      if (typeof tag !== 'string' || !/^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/.test(tag)) continue;
      const lower = tag.toLowerCase();
      if (have.includes(lower)) return lower;
      const base = lower.split('-')[0];
      if (have.includes(base)) return base;
    }
    return 'en';
  }

  // {name} in text, from vars; a number through Intl.NumberFormat.
  function fill(lang, text, vars) {
    return text.replace(/\{([a-z_]+)\}/g, (m, name) => {
      if (!vars || !(name in vars)) return m;
      const v = vars[name];
      return typeof v === 'number' ? new Intl.NumberFormat(lang).format(v) : String(v);
    });
  }

  // A message of catalog for lang: a string, or the plural form that
  // vars.count selects ("other" when the catalog lacks that form).
  function format(lang, catalog, key, vars) {
    const m = catalog && Object.prototype.hasOwnProperty.call(catalog, key) ? catalog[key] : undefined;
    if (typeof m === 'string') return fill(lang, m, vars);
    if (m && typeof m === 'object') {
      const n = vars && typeof vars.count === 'number' ? vars.count : 0;
      const form = new Intl.PluralRules(lang).select(n);
      const text = typeof m[form] === 'string' ? m[form] : m.other;
      if (typeof text === 'string') return fill(lang, text, vars);
    }
    return key; // a missing key shows itself (the lint keeps catalogs whole)
  }

  const exported = { LANGUAGES, RTL, choose, format };
  if (typeof module === 'object' && module.exports) {
    module.exports = exported; // the unit test (tests/unit/test-i18n.js)
    return;
  }

  function loadChoice() {
    try {
      const v = JSON.parse(root.localStorage.getItem(CHOICE_KEY));
      return LANGUAGES.includes(v) ? v : null;
    } catch (e) {
      return null;
    }
  }
  function saveChoice(lang) {
    try {
      root.localStorage.setItem(CHOICE_KEY, JSON.stringify(lang));
    } catch (e) {
      /* the choice then lasts this page only */
    }
  }

  let lang = 'en';
  let catalog = {};

  async function fetchCatalog(l) {
    const r = await fetch('/i18n/' + l + '.json', { credentials: 'same-origin' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const c = await r.json();
    if (!c || typeof c !== 'object') throw new Error('not a catalog');
    return c;
  }

  // Load lang's catalog (English if it cannot be had), then set the
  // document's language and direction and its marked-up words.
  async function use(l) {
    let c;
    try {
      c = await fetchCatalog(l);
    } catch (e) {
      if (l === 'en') c = {};
      else {
        l = 'en';
        c = await fetchCatalog('en').catch(() => ({}));
      }
    }
    lang = l;
    catalog = c;
    const html = root.document.documentElement;
    html.lang = l;
    html.dir = RTL.has(l) ? 'rtl' : 'ltr';
    translate(root.document);
    return l;
  }

  function t(key, vars) {
    return format(lang, catalog, key, vars);
  }

  // Whether the catalog has key (for keys made from a code: "error." + code).
  const has = (key) => Object.prototype.hasOwnProperty.call(catalog, key);

  // The message as pieces for append(): a variable that is a DOM node (a
  // link, a countdown) stays that node, the rest is text.
  function parts(key, vars) {
    const nodes = {};
    const plain = {};
    for (const [k, v] of Object.entries(vars || {})) {
      if (v && typeof v === 'object' && 'nodeType' in v) nodes[k] = v;
      else plain[k] = v;
    }
    return t(key, plain)
      .split(/(\{[a-z_]+\})/)
      .filter((s) => s !== '')
      .map((s) => (s[0] === '{' && s.slice(1, -1) in nodes ? nodes[s.slice(1, -1)] : s));
  }

  // A list as the language joins it ("A, B and C"), each item through
  // make(item): pieces for append().
  function list(items, make) {
    const f = new Intl.ListFormat(lang, { type: 'conjunction' });
    let i = 0;
    return f.formatToParts(items.map(String)).map((p) => (p.type === 'element' ? make(items[i++]) : p.value));
  }

  // The markup's words: data-i18n="key" sets an element's text,
  // data-i18n-attr="attr:key attr:key" its attributes.
  function translate(scope) {
    for (const e of scope.querySelectorAll('[data-i18n]')) e.textContent = t(e.dataset.i18n);
    for (const e of scope.querySelectorAll('[data-i18n-attr]'))
      for (const pair of e.dataset.i18nAttr.split(/\s+/)) {
        const [attr, key] = pair.split(':');
        if (attr && key) e.setAttribute(attr, t(key));
      }
  }

  // --- Numbers, dates, durations (Intl) --------------------------------

  const number = (n, opts) => new Intl.NumberFormat(lang, opts).format(n);

  // A date and time as the language writes it.
  function date(value) {
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? String(value) : new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'short' }).format(d);
  }

  // How long ago (or until) a time: "3 minutes ago", "vor 3 Minuten".
  function relative(value, now) {
    const d = new Date(value).getTime();
    if (Number.isNaN(d)) return String(value);
    const s = (d - (now === undefined ? Date.now() : now)) / 1000;
    const f = new Intl.RelativeTimeFormat(lang, { numeric: 'auto' });
    const a = Math.abs(s);
    if (a < 60) return f.format(Math.round(s), 'second');
    if (a < 3600) return f.format(Math.round(s / 60), 'minute');
    if (a < 86400) return f.format(Math.round(s / 3600), 'hour');
    return f.format(Math.round(s / 86400), 'day');
  }

  function unit(n, u, opts) {
    return new Intl.NumberFormat(lang, Object.assign({ style: 'unit', unit: u, unitDisplay: 'short' }, opts)).format(n);
  }

  // An exact duration: "12 sec", "2 min, 5 sec".
  function duration(seconds) {
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return unit(s, 'second');
    const m = Math.floor(s / 60);
    if (!(s % 60)) return unit(m, 'minute');
    return new Intl.ListFormat(lang, { type: 'unit', style: 'narrow' }).format([unit(m, 'minute'), unit(s % 60, 'second')]);
  }

  // A duration as a person says it, rounded: "40 sec", "2 min", "1.5 hr".
  function approx(seconds) {
    const s = Math.max(0, seconds);
    if (s < 10) return unit(Math.max(1, Math.round(s)), 'second');
    if (s < 60) return unit(Math.round(s / 5) * 5, 'second');
    if (s < 90 * 60) return unit(Math.round(s / 60), 'minute');
    return unit(Math.round(s / 1800) / 2, 'hour', { maximumFractionDigits: 1 });
  }

  // A time span in milliseconds: "850 ms", "1.2 sec".
  function millis(ms) {
    return ms < 1000 ? unit(Math.round(ms), 'millisecond') : unit(ms / 1000, 'second', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  }

  // The language's name in itself ("Deutsch", "日本語").
  function autonym(l) {
    try {
      const n = new Intl.DisplayNames([l], { type: 'language' }).of(l);
      return n.charAt(0).toLocaleUpperCase(l) + n.slice(1);
    } catch (e) {
      return l;
    }
  }

  const chosen = loadChoice() || choose(root.navigator.languages || [root.navigator.language]);
  // Started at once: the catalog loads while the rest of the page does.
  const ready = use(chosen);

  // The person chose a language on the page: kept, and the page told.
  async function set(l) {
    if (!LANGUAGES.includes(l)) return;
    saveChoice(l);
    await use(l);
    root.dispatchEvent(new CustomEvent('wikiweb-language', { detail: lang }));
  }

  root.WikiwebI18n = Object.assign(exported, {
    ready,
    t,
    has,
    parts,
    list,
    set,
    translate,
    lang: () => lang,
    number,
    date,
    relative,
    duration,
    approx,
    millis,
    autonym,
  });
})(typeof window === 'object' ? window : globalThis);
