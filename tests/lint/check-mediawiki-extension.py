#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The MediaWiki extension packaging/mediawiki/WikiwebReadCheck: every PHP
file passes `php -l`; extension.json and the message files are JSON; every
message the extension and MediaWiki's API help need is in en.json and
documented in qqq.json; the module and the right are declared. Exit 77
(skip) without php unless WIKIWEB_TEST_NO_SKIP=1. Its answers against a
real MediaWiki are e2e-permissions' (tests/e2e/test_permissions.py)."""

import json
import os
import shutil
import subprocess
import sys

root = sys.argv[1]
ext = os.path.join(root, 'packaging', 'mediawiki', 'WikiwebReadCheck')
php = shutil.which('php')
if not php:
    print('SKIP: php not found')
    sys.exit(1 if os.environ.get('WIKIWEB_TEST_NO_SKIP') == '1' else 77)

failed = []
php_files = []
for d, _, files in os.walk(ext):
    php_files += [os.path.join(d, f) for f in files if f.endswith('.php')]
if not php_files:
    failed.append('no PHP file in ' + ext)
for f in php_files:
    p = subprocess.run([php, '-l', f], capture_output=True, text=True)
    if p.returncode != 0:
        failed.append('php -l %s: %s %s' % (f, p.stdout, p.stderr))

with open(os.path.join(ext, 'extension.json')) as f:
    manifest = json.load(f)
with open(os.path.join(ext, 'i18n', 'en.json')) as f:
    en = json.load(f)
with open(os.path.join(ext, 'i18n', 'qqq.json')) as f:
    qqq = json.load(f)

if manifest.get('manifest_version') != 2:
    failed.append('extension.json: manifest_version 2 expected')
if manifest.get('APIModules', {}).get('wikiwebreadcheck') != \
        'MediaWiki\\Extension\\WikiwebReadCheck\\ApiReadCheck':
    failed.append('extension.json: the API module wikiwebreadcheck is not declared')
if 'wikiweb-readcheck' not in manifest.get('AvailableRights', []):
    failed.append('extension.json: the right wikiweb-readcheck is not declared')
if manifest.get('requires', {}).get('MediaWiki') != '>= 1.39.0':
    failed.append('extension.json: requires MediaWiki >= 1.39.0')

needed = ['wikiwebreadcheck-desc', 'right-wikiweb-readcheck', 'action-wikiweb-readcheck',
          'apihelp-wikiwebreadcheck-summary', 'apihelp-wikiwebreadcheck-param-user',
          'apihelp-wikiwebreadcheck-param-titles', 'apihelp-wikiwebreadcheck-example-simple',
          'apihelp-wikiwebreadcheck-param-email', 'apihelp-wikiwebreadcheck-example-email']
for k in needed:
    if k not in en:
        failed.append('en.json lacks ' + k)
    if k not in qqq:
        failed.append('qqq.json lacks ' + k)
for k in set(en) - {'@metadata'}:
    if k not in qqq:
        failed.append('qqq.json does not document ' + k)

# MediaWiki 1.45 accepts hook handlers only through HookHandlers.
if 'Hooks' in manifest and any(not isinstance(v, str) and not isinstance(v, dict) for v in manifest['Hooks'].values()):
    failed.append('extension.json: Hooks must name HookHandlers entries')
if 'Hooks' in manifest and 'HookHandlers' not in manifest:
    failed.append('extension.json: Hooks without HookHandlers')

src = open(os.path.join(ext, 'includes', 'ApiReadCheck.php')).read()
# Read-only, and no raw SQL: the address lookup goes through the query builder.
for needle in ('->query(', 'DB_PRIMARY', 'DB_MASTER', 'getPermissionErrors', 'newFromRow'):
    if needle in src:
        failed.append('ApiReadCheck.php uses ' + needle)
if 'newSelectQueryBuilder()' not in src or 'user_email_authenticated IS NOT NULL' not in src:
    failed.append('ApiReadCheck.php does not look addresses up confirmed through the query builder')
if "checkUserRightsAny( 'wikiweb-readcheck' )" not in src:
    failed.append('ApiReadCheck.php does not demand the right wikiweb-readcheck')

for f in failed:
    print('FAIL:', f)
print('%d PHP files, %d messages: %s' % (len(php_files), len(en) - 1, 'FAIL' if failed else 'OK'))
sys.exit(1 if failed else 0)
