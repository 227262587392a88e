#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One source of truth for the settings: the daemon.

Compares what `wikiwebd --check-config` says (the names, the defaults, and
the ranges in its error messages) with the places that document them:
  - docs/API.md: its table "Every setting", which must list each setting once,
    and every other table row there that names a setting (sections 5, 8.8),
  - man/wikiweb.conf.5 (".B NAME" then "Default: D; range: R."),
  - packaging/wikiweb.conf.example (installed as /etc/wikiweb/wikiweb.conf),
and the members of dbus/org.wikiweb.Queue1.xml with man/org.wikiweb.Queue1.5.
Every difference is reported with the setting's name; any makes it fail.

Usage: test-settings-drift.py WIKIWEBD SOURCE_ROOT
"""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

problems = []


def problem(msg):
    problems.append(msg)
    print(f"DRIFT: {msg}", flush=True)


def check_config(wikiwebd, env):
    """Run --check-config with exactly `env`; (exit status, stdout, stderr)."""
    r = subprocess.run([wikiwebd, "--check-config"], env=env, capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def daemon_settings(wikiwebd):
    """{name: default} from --check-config with an empty environment."""
    rc, out, err = check_config(wikiwebd, {})
    if rc != 0:
        problem(f"wikiwebd --check-config with no settings failed ({rc}): {err.strip()}")
        return {}
    settings = {}
    for line in out.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.startswith("WIKI_WEB_"):
            if name in settings:
                problem(f"{name}: printed twice by --check-config")
            settings[name] = value
    return settings


def daemon_range(wikiwebd, name):
    """The allowed range as the daemon states it when the value is bad:
    "A..B" for integers, "true/false" for booleans, else None."""
    rc, _, err = check_config(wikiwebd, {name: "not-a-value"})
    if rc == 0:
        return None  # free text: anything goes
    if name not in err:
        problem(f"{name}: the error for a bad value does not name the setting: {err.strip()}")
    m = re.search(r"expected an integer in (\d+)\.\.(\d+)", err)
    if m:
        return f"{m.group(1)}..{m.group(2)}"
    if "expected true or false" in err:
        return "true/false"
    return None


def norm_default(text):
    t = text.strip().strip("`").strip()
    return "" if t in ("(empty)", "(unset)", "(none)") else t


SETTINGS_HEADING = "## Every setting"


def api_settings(path):
    """From docs/API.md: ({name: (default, range)} of the table under
    "## Every setting", [(section, {name: (default, range)})] of every other
    table row `| NAME |` or `| `NAME` |` elsewhere in the file)."""
    table, others = {}, []
    section = None
    if not os.path.exists(path):
        problem(f"{path} does not exist")
        return table, others
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                section = line.strip()
            m = re.match(r"^\|\s*`?(WIKI_WEB_[A-Z0-9_]+)`?\s*\|([^|]*)\|([^|]*)\|", line)
            if not m:
                continue
            name = m.group(1)
            entry = (norm_default(m.group(2)), m.group(3).strip().replace("`", ""))
            if section == SETTINGS_HEADING:
                if name in table:
                    problem(f"{name}: twice in docs/API.md's table \"Every setting\"")
                table[name] = entry
            else:
                others.append((section, {name: entry}))
    if not table:
        problem(f"docs/API.md has no table under \"{SETTINGS_HEADING}\"")
    return table, others


def man_settings(path):
    """{name: (default, range)} from wikiweb.conf(5)."""
    entries = {}
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    for i, line in enumerate(lines):
        m = re.match(r"^\.B (WIKI_WEB_[A-Z0-9_]+)$", line)
        if not m or i == 0 or lines[i - 1] != ".TP":
            continue
        name = m.group(1)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        d = re.match(r"^Default: (.*?); range: (.*)\.$", nxt)
        if not d:
            problem(f"{name}: in wikiweb.conf.5 without a 'Default: D; range: R.' line")
            continue
        if name in entries:
            problem(f"{name}: twice in wikiweb.conf.5")
        rng = d.group(2).replace("\\-", "-")
        entries[name] = (norm_default(d.group(1)), rng)
    return entries


def example_settings(path):
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^#?(WIKI_WEB_[A-Z0-9_]+)=", line)
            if m:
                names.add(m.group(1))
    return names


def compare_docs(daemon, doc, where, ranges):
    for name in sorted(set(daemon) - set(doc)):
        problem(f"{name}: known to wikiwebd --check-config but missing from {where}")
    for name in sorted(set(doc) - set(daemon)):
        problem(f"{name}: in {where} but unknown to wikiwebd --check-config")
    for name in sorted(set(doc) & set(daemon)):
        default, rng = doc[name]
        want = daemon[name]
        if default.startswith("$"):
            continue  # checked separately: a default from the environment
        if default != want:
            problem(f"{name}: default {default!r} in {where}, but wikiwebd uses {want!r}")
        if ranges.get(name) and rng != ranges[name]:
            problem(f"{name}: range {rng!r} in {where}, but wikiwebd accepts {ranges[name]}")


def env_defaults(wikiwebd, docs):
    """A default written `$VAR` must be what the daemon takes from $VAR."""
    for where, doc in docs:
        for name, (default, _) in doc.items():
            if not default.startswith("$"):
                continue
            var = default[1:]
            _, out, _ = check_config(wikiwebd, {var: "/drift-test/value"})
            if f"{name}=/drift-test/value" not in out.splitlines():
                problem(f"{name}: {where} says the default is ${var}, but wikiwebd does not take it from there")


def dbus_members(xml_path, man_path):
    tree = ET.parse(xml_path)
    members = []
    for iface in tree.getroot().iter("interface"):
        for kind in ("property", "method", "signal"):
            members += [(kind, e.get("name")) for e in iface.iter(kind)]
    with open(man_path, encoding="utf-8") as f:
        man = f.read()
    for kind, name in members:
        if not re.search(rf"^\.BR {re.escape(name)} ", man, re.M):
            problem(f"D-Bus {kind} {name}: in {os.path.basename(xml_path)} but not described in "
                    f"{os.path.basename(man_path)}")
    return len(members)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    wikiwebd, src = sys.argv[1], sys.argv[2]

    daemon = daemon_settings(wikiwebd)
    if not daemon:
        problem("wikiwebd --check-config printed no WIKI_WEB_ setting")
    ranges = {name: daemon_range(wikiwebd, name) for name in daemon}
    api, api_others = api_settings(os.path.join(src, "docs/API.md"))
    man = man_settings(os.path.join(src, "man/wikiweb.conf.5"))
    compare_docs(daemon, api, "docs/API.md's table \"Every setting\"", ranges)
    for section, row in api_others:
        # A setting named in another table of the contract: it must exist
        # and agree; it need not list every setting.
        compare_docs({n: v for n, v in daemon.items() if n in row}, row,
                     f"docs/API.md ({section})", ranges)
    compare_docs(daemon, man, "man/wikiweb.conf.5", ranges)
    env_defaults(wikiwebd, [("docs/API.md", api), ("man/wikiweb.conf.5", man)])

    example = example_settings(os.path.join(src, "packaging/wikiweb.conf.example"))
    for name in sorted(set(daemon) - example):
        problem(f"{name}: missing from packaging/wikiweb.conf.example (/etc/wikiweb/wikiweb.conf)")
    for name in sorted(example - set(daemon)):
        problem(f"{name}: in packaging/wikiweb.conf.example but unknown to wikiwebd --check-config")

    n_members = dbus_members(os.path.join(src, "dbus/org.wikiweb.Queue1.xml"),
                             os.path.join(src, "man/org.wikiweb.Queue1.5"))

    checked = sum(1 for r in ranges.values() if r)
    print(f"# {len(daemon)} settings from wikiwebd --check-config ({checked} with a range from its "
          f"error messages); docs/API.md table {len(api)} (+{len(api_others)} rows in its sections), "
          f"wikiweb.conf.5 {len(man)}, "
          f"wikiweb.conf.example {len(example)}; {n_members} D-Bus members")
    if problems:
        print(f"FAIL: {len(problems)} difference(s): the settings drifted apart (see DRIFT lines)")
        return 1
    print("ok: the daemon, docs/API.md, the man pages and the example agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
