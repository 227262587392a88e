#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The page's catalogs are whole, and the page's words come from them
(docs/WEB.md "Languages").

Usage: check-i18n.py SOURCE_ROOT

Fails, naming each problem, when:
- a catalog src/www/i18n/<lang>.json lacks a key English has, or has one
  English lacks; a message is not a string or a plural object; a plural
  message lacks a form its language's plural rules need (the categories
  are those of Unicode CLDR, which Intl.PluralRules follows), or has one
  they never select; a translation uses a {placeholder} English does not
  have, or (a plain message) leaves one out;
- an English key is used nowhere: not by t('key'), I18n.parts('key') or a
  key prefix t('prefix.' + …) in src/www/app.js, nor by data-i18n or
  data-i18n-attr in src/www/index.html;
- a key used there is not in English;
- app.js shows a string that is not from a catalog: a string literal of
  words (two words and more, unless they are the page's CSS classes), a
  literal with letters of another script, or any literal with letters put
  where the page shows text (textContent, el(…, …, text), append(),
  aria-label, announce(), a notification, an error's message);
- index.html has text or a shown attribute (aria-label, title,
  placeholder, alt, a meta description) without data-i18n or
  data-i18n-attr (translate="no" marks a name that stays as it is).

A literal that is shown but not words of a language (an API contract's
table compared, never shown) sits between "// i18n-exempt-begin" and
"// i18n-exempt-end", or on a line ending in "// i18n-exempt".
Standard library only.
"""

import html.parser
import json
import os
import re
import sys
import unicodedata

# The plural categories of each language's cardinal numbers (CLDR 44, as
# Intl.PluralRules gives them; the JavaScript unit test checks the same
# against the browser engine's own rules).
PLURALS = {
    'en': {'one', 'other'},
    'de': {'one', 'other'},
    'fr': {'one', 'many', 'other'},
    'es': {'one', 'many', 'other'},
    'ja': {'other'},
    'ar': {'zero', 'one', 'two', 'few', 'many', 'other'},
}

# Literals of words that are not shown: a directive, link types, element
# names (a selector).
NOT_WORDS = {'use strict', 'noopener noreferrer', 'noopener noreferrer nofollow'}
TAGS = {'a', 'code', 'pre', 'p', 'li', 'ul', 'ol', 'span', 'div', 'button', 'table', 'td', 'th', 'tr', 'img',
        'summary', 'details', 'section', 'h2', 'h3', 'h4', 'q', 'em', 'strong', 'option', 'select', 'input'}

PLACEHOLDER = re.compile(r'\{([a-z_]+)\}')
KEY = re.compile(r'^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$')

problems = []


def problem(where, what):
    problems.append(f'{where}: {what}')


def placeholders(message):
    if isinstance(message, str):
        return set(PLACEHOLDER.findall(message))
    return set().union(*(PLACEHOLDER.findall(v) for v in message.values() if isinstance(v, str)))


def check_catalogs(www):
    folder = os.path.join(www, 'i18n')
    catalogs = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith('.json') or name == 'glossary.json':
            continue
        lang = name[:-5]
        path = os.path.join(folder, name)
        try:
            with open(path, encoding='utf-8') as f:
                catalogs[lang] = json.load(f)
        except (OSError, ValueError) as e:
            problem(path, f'not a JSON catalog: {e}')
    en = catalogs.get('en')
    if not isinstance(en, dict):
        problem(folder, 'no English catalog en.json')
        return {}
    for lang, cat in catalogs.items():
        where = f'src/www/i18n/{lang}.json'
        if lang not in PLURALS:
            problem(where, f'no plural categories known for "{lang}": add them to PLURALS in {__file__}')
            continue
        if not isinstance(cat, dict):
            problem(where, 'not an object')
            continue
        for key in sorted(set(en) - set(cat)):
            problem(where, f'lacks "{key}"')
        for key in sorted(set(cat) - set(en)):
            problem(where, f'has "{key}", which English has not')
        for key, m in cat.items():
            if not KEY.match(key):
                problem(where, f'"{key}" is not a key (lower case, dotted)')
            if isinstance(m, dict):
                forms = set(m)
                if not all(isinstance(v, str) and v for v in m.values()):
                    problem(where, f'"{key}": a plural form is not a text')
                if forms - PLURALS[lang]:
                    problem(where, f'"{key}": forms {sorted(forms - PLURALS[lang])} are never chosen in {lang}')
                if PLURALS[lang] - forms:
                    problem(where, f'"{key}": lacks the forms {sorted(PLURALS[lang] - forms)} that {lang} needs')
                if key in en and not isinstance(en[key], dict):
                    problem(where, f'"{key}": plural here, plain in English')
            elif isinstance(m, str):
                if key in en and isinstance(en[key], dict):
                    problem(where, f'"{key}": plain here, plural in English')
            else:
                problem(where, f'"{key}": neither a text nor a plural object')
                continue
            if key not in en or not isinstance(en[key], (str, dict)):
                continue
            mine, theirs = placeholders(m), placeholders(en[key])
            if mine - theirs:
                problem(where, f'"{key}": placeholders {sorted(mine - theirs)} that English has not')
            if isinstance(m, str) and theirs - mine:
                problem(where, f'"{key}": leaves out {sorted(theirs - mine)}')
            if isinstance(m, dict) and (theirs - {'count'}) - mine:
                problem(where, f'"{key}": leaves out {sorted((theirs - {"count"}) - mine)}')
    return en


def strip_comments(js):
    """The code with comments blanked (strings and regular expressions kept
    as they are), and the string literals found: (offset, text)."""
    out = []
    literals = []
    i = 0
    n = len(js)
    prev = ''  # the last significant character of code, to tell a regex from a division
    while i < n:
        c = js[i]
        if js.startswith('//', i):
            j = js.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif js.startswith('/*', i):
            j = js.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', js[i:j]))
            i = j
        elif c in '\'"`':
            j = i + 1
            while j < n and js[j] != c:
                j += 2 if js[j] == '\\' else 1
            literals.append((i, js[i + 1:j]))
            out.append(js[i:j + 1])
            i = j + 1
            prev = c
        elif c == '/' and prev in '(,=:[!&|?{};+-*%<>~^' + '\n' or (c == '/' and prev == ''):
            # A regular expression literal: up to its unescaped closing slash.
            j = i + 1
            in_class = False
            while j < n and (js[j] != '/' or in_class):
                if js[j] == '\\':
                    j += 1
                elif js[j] == '[':
                    in_class = True
                elif js[j] == ']':
                    in_class = False
                j += 1
            out.append(js[i:j + 1])
            i = j + 1
            prev = '/'
        else:
            out.append(c)
            if not c.isspace():
                prev = c
            i += 1
    return ''.join(out), literals


# Where the page shows a literal: the code just before it.
SHOWN = re.compile(r'(textContent\s*=\s*|\.append\(\s*|\.push\(\s*|announce\(\s*|aria-label[\'"]\s*,\s*|\.title\s*=\s*'
                   r'|\.alt\s*=\s*|Notification\(\s*|body:\s*|ApiError\([^,()]*,\s*'
                   r'|\bel\(\s*[\'"](?!code[\'"])[a-z0-9]+[\'"]\s*,\s*(?:[\'"][^\'"]*[\'"]|null|[\w.]+)\s*,\s*)$')


def check_js(path, en, used, prefixes, css_classes):
    with open(path, encoding='utf-8') as f:
        js = f.read()
    code, literals = strip_comments(js)
    for m in re.finditer(r'\b(?:t|I18n\.t|I18n\.parts|I18n\.has)\(\s*\'([^\']*)\'\s*(\+)?', code):
        (prefixes if m.group(2) else used).add(m.group(1))
    # A key named anywhere (t(cond ? 'a.b' : 'a.c'), a key kept for later).
    used.update(text for _, text in literals if text in en)
    for m in re.finditer(r'\bt\(\s*\'([a-z.]+)\'\s*\+\s*\(([^;]*)\)', code):
        # t('citation.where' + (x ? '_revision' : '') + …): every suffix combination
        suffixes = re.findall(r'\?\s*\'([a-z_]*)\'\s*:\s*\'\'', m.group(2))
        base = m.group(1)
        combos = {''}
        for s in suffixes:
            combos |= {c + s for c in combos}
        used.update(base + c for c in combos)

    exempt = False
    lines = js.split('\n')
    line_of = [0]
    for ln in lines:
        line_of.append(line_of[-1] + len(ln) + 1)

    def lineno(offset):
        lo, hi = 0, len(line_of) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_of[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    exempt_lines = set()
    for i, ln in enumerate(lines, 1):
        if '// i18n-exempt-begin' in ln:
            exempt = True
        if exempt or ln.rstrip().endswith('// i18n-exempt'):
            exempt_lines.add(i)
        if '// i18n-exempt-end' in ln:
            exempt = False

    for offset, text in literals:
        no = lineno(offset)
        if no in exempt_lines:
            continue
        before = code[max(0, offset - 80):offset]
        if text in en or re.search(r'\b(?:t|I18n\.t|I18n\.parts|I18n\.has)\(\s*$', before):
            continue  # a key
        letters = [ch for ch in text if ch.isalpha()]
        if not letters:
            continue  # punctuation, numbers, spaces
        foreign = [ch for ch in letters if ord(ch) > 127 and unicodedata.category(ch).startswith('L')]
        words = re.findall(r'[A-Za-z]+', text)
        tokens = text.replace(',', ' ').split()
        class_list = text in NOT_WORDS or all(
            re.fullmatch(r'[a-z][a-z0-9-]*', tok) and (tok in css_classes or tok in TAGS) for tok in tokens)
        why = None
        if foreign:
            why = 'letters of a language'
        elif len(tokens) >= 2 and len(words) >= 2 and not class_list:
            why = 'words'
        elif SHOWN.search(before):
            why = 'shown text'
        if why:
            problem(f'{os.path.relpath(path)}:{no}', f'{why} not from a catalog: {text!r}')


class PageText(html.parser.HTMLParser):
    SHOWN_ATTRS = ('aria-label', 'title', 'placeholder', 'alt')
    VOID = {'meta', 'link', 'input', 'br', 'img', 'hr', 'source', 'area', 'base', 'col', 'embed', 'track', 'wbr'}

    def __init__(self, used):
        super().__init__(convert_charrefs=True)
        self.used = used
        self.stack = []  # (tag, covered: text here comes from a catalog or stays)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        covered = bool(self.stack and self.stack[-1][1])
        if 'data-i18n' in a:
            self.used.add(a['data-i18n'])
            covered = True
        if a.get('translate') == 'no':
            covered = True
        translated = set()
        for pair in (a.get('data-i18n-attr') or '').split():
            attr, _, key = pair.partition(':')
            translated.add(attr)
            self.used.add(key)
        shown = [x for x in self.SHOWN_ATTRS if a.get(x)]
        if tag == 'meta' and a.get('name') == 'description':
            shown.append('content')
        for x in shown:
            if x not in translated and not covered:
                problem(f'src/www/index.html:{self.getpos()[0]}', f'<{tag} {x}="{a[x]}"> not from a catalog')
        if self.stack and 'data-i18n' in self.stack[-1][2]:
            problem(f'src/www/index.html:{self.getpos()[0]}',
                    f'<{tag}> inside an element with data-i18n, whose text replaces it')
        if tag not in self.VOID:
            self.stack.append((tag, covered, a))

    def handle_endtag(self, tag):
        while self.stack:
            t, _, _ = self.stack.pop()
            if t == tag:
                break

    def handle_data(self, data):
        if not data.strip() or (self.stack and self.stack[-1][0] in ('script', 'style')):
            return
        if not (self.stack and self.stack[-1][1]):
            problem(f'src/www/index.html:{self.getpos()[0]}', f'text not from a catalog: {data.strip()!r}')


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    www = os.path.join(argv[1], 'src', 'www')
    en = check_catalogs(www)
    used, prefixes = set(), set()
    with open(os.path.join(www, 'style.css'), encoding='utf-8') as f:
        css_classes = set(re.findall(r'\.([a-z][a-z0-9-]*)', f.read()))
    check_js(os.path.join(www, 'app.js'), en, used, prefixes, css_classes)
    with open(os.path.join(www, 'index.html'), encoding='utf-8') as f:
        PageText(used).feed(f.read())
    for key in sorted(used - set(en)):
        if not any(key.startswith(p) for p in prefixes):
            problem('src/www/app.js, index.html', f'use "{key}", which en.json has not')
    for key in sorted(en):
        if key not in used and not any(key.startswith(p) for p in prefixes):
            problem('src/www/i18n/en.json', f'"{key}" is used nowhere')
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f'{len(problems)} problems: see docs/WEB.md "Languages"', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
