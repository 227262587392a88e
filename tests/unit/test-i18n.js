// SPDX-License-Identifier: MIT
// The page's language choice and each catalog's plurals (src/www/i18n.js,
// docs/WEB.md "Languages"), under node's Intl (the same CLDR rules as the
// browser's). Usage: node test-i18n.js SOURCE_ROOT. Exit 77 (skipped)
// when this node has no full Intl, 1 under WIKIWEB_TEST_NO_SKIP=1.
'use strict';

const assert = require('assert');
const fs = require('fs');
const path = require('path');

const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const www = path.join(root, 'src', 'www');

if (new Intl.PluralRules('ar').resolvedOptions().pluralCategories.length !== 6) {
  console.error('SKIP: this node has no full ICU (Intl.PluralRules does not know Arabic)');
  process.exit(process.env.WIKIWEB_TEST_NO_SKIP === '1' ? 1 : 77);
}

const { LANGUAGES, RTL, choose, format } = require(path.join(www, 'i18n.js'));
let checks = 0;
function eq(actual, expected, what) {
  assert.deepStrictEqual(actual, expected, what);
  checks++;
}

// --- The choice: first match, then the base language, then English -----

const have = ['en', 'de', 'fr', 'es', 'ja', 'ar'];
const cases = [
  [['de-AT'], 'de'],
  [['de-AT', 'fr'], 'de'], // the base of the first beats the second
  [['fr-CA', 'de'], 'fr'],
  [['EN-gb'], 'en'], // tags are case-insensitive
  [['xx', 'es-419'], 'es'], // an unknown language is passed over
  [['zh-Hans-CN', 'ja-JP'], 'ja'],
  [['ar-EG'], 'ar'],
  [['ar'], 'ar'],
  [['pt-BR', 'it'], 'en'], // none known: English
  [['xx'], 'en'],
  [[], 'en'],
  [null, 'en'],
  [undefined, 'en'],
  [[42, '', 'not a tag!', 'de_DE', '-de'], 'en'], // not language tags
  [['de-'], 'en'],
  [['x'.repeat(9) + '-de'], 'en'],
];
for (const [prefs, want] of cases) eq(choose(prefs, have), want, `choose(${JSON.stringify(prefs)})`);
eq(choose(['de-AT'], ['en']), 'en', 'a language the page has not falls back to English');
eq(choose(['de-CH-1996'], have), 'de', 'a tag with a variant');
// The page's own list: every language it names has a catalog, and only
// Arabic runs right to left.
for (const l of LANGUAGES) eq(fs.existsSync(path.join(www, 'i18n', l + '.json')), true, `a catalog for ${l}`);
eq(LANGUAGES[0], 'en', 'English first: the fallback');
eq([...RTL], ['ar'], 'right to left: Arabic only');

// --- Messages ------------------------------------------------------------

const tiny = { 'a.b': 'Hello {name}, {count} new', 'a.p': { one: 'one {count}', other: '{count} many' } };
eq(format('en', tiny, 'a.b', { name: 'Ann', count: 1200 }), 'Hello Ann, 1,200 new', 'placeholders; a number through Intl');
eq(format('de', tiny, 'a.b', { name: 'Ann', count: 1200 }), 'Hello Ann, 1.200 new', 'German groups with a dot');
eq(format('en', tiny, 'a.b', {}), 'Hello {name}, {count} new', 'a variable not given stays visible');
eq(format('en', tiny, 'a.none', {}), 'a.none', 'a missing key shows itself');
eq(format('en', tiny, 'a.p', { count: 1 }), 'one 1', 'one');
eq(format('en', tiny, 'a.p', { count: 0 }), '0 many', 'zero is "other" in English');
eq(format('ar', tiny, 'a.p', { count: 3 }), '3 many'.replace('3', new Intl.NumberFormat('ar').format(3)),
  'a form the catalog lacks: "other"');
eq(format('en', { 'a.x': 'keep {user}' }, 'a.x', { user: '{count}' }), 'keep {count}', 'a value is not expanded again');

// --- Each catalog's plurals ----------------------------------------------

// Numbers that reach every category somewhere: 0, 1, 2, 3, 11, 100,
// 1000000, 1.5.
const probe = [0, 1, 2, 3, 5, 11, 21, 100, 102, 1000000, 1.5];
const en = JSON.parse(fs.readFileSync(path.join(www, 'i18n', 'en.json'), 'utf8'));
for (const l of LANGUAGES) {
  const cat = JSON.parse(fs.readFileSync(path.join(www, 'i18n', l + '.json'), 'utf8'));
  const categories = new Intl.PluralRules(l).resolvedOptions().pluralCategories.slice().sort();
  const rules = new Intl.PluralRules(l);
  for (const [key, m] of Object.entries(cat)) {
    if (typeof m !== 'object') continue;
    eq(Object.keys(m).sort(), categories, `${l} ${key}: the forms are those of Intl.PluralRules('${l}')`);
    for (const n of probe) {
      const text = format(l, cat, key, { count: n });
      eq(text, m[rules.select(n)].replace(/\{count\}/g, new Intl.NumberFormat(l).format(n))
        .replace(/\{[a-z_]+\}/g, (x) => x), `${l} ${key} for ${n}`);
    }
    eq(typeof en[key], 'object', `${l} ${key}: a plural in English too`);
  }
}

// Known forms, said plainly: English, and Arabic's six when it is there.
eq(format('en', en, 'queue.places', { count: 1 }), '1 place', 'en one');
eq(format('en', en, 'queue.places', { count: 2 }), '2 places', 'en other');
eq(format('en', en, 'queue.busy', { count: 1 }), 'The slot is busy', 'en one without the number');
eq(format('en', en, 'queue.busy', { count: 3 }), 'All 3 slots are busy', 'en other');
const want = { de: [[1, 'one'], [2, 'other']], fr: [[0, 'one'], [1, 'one'], [2, 'other'], [1000000, 'many']],
  es: [[1, 'one'], [2, 'other'], [1000000, 'many']], ja: [[1, 'other'], [2, 'other']],
  ar: [[0, 'zero'], [1, 'one'], [2, 'two'], [3, 'few'], [11, 'many'], [100, 'other']] };
for (const [l, pairs] of Object.entries(want)) {
  if (!LANGUAGES.includes(l)) continue;
  const cat = JSON.parse(fs.readFileSync(path.join(www, 'i18n', l + '.json'), 'utf8'));
  for (const [n, form] of pairs)
    eq(format(l, cat, 'queue.places', { count: n }),
      cat['queue.places'][form].replace('{count}', new Intl.NumberFormat(l).format(n)), `${l} ${n} is "${form}"`);
}

console.log(`ok: ${checks} checks`);
