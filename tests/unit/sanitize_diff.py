#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential test of the sanitizer (API.md section 2).

Compares sanitize-filter (the C implementation) with a reference written with
Python's re, which is what API.md defines the rules by, over random and
adversarial inputs. Standard library only.

    sanitize_diff.py PATH/TO/sanitize-filter [--count N] [--seed S]

Prints the seed, the number of cases and of failures; exits 1 on any
mismatch, showing the first few.
"""

import argparse
import itertools
import json
import os
import random
import re
import struct
import subprocess
import sys
import time

MAX_BYTES = 1024

# \s written out: with re.ASCII, Python's \s is exactly these six (checked in
# self_check()); without re.ASCII it would also match \x1c-\x1f, \x85, NBSP...
BEARER_RE = re.compile(r"Bearer[ \t\n\v\f\r]+[A-Za-z0-9_.-]+", re.ASCII | re.IGNORECASE)
TOKEN_RE = re.compile(r"\b[A-Za-z0-9_-]{32,}\b", re.ASCII)


def reference(data: bytes) -> bytes:
    s = data.decode("utf-8", "replace")  # 0. invalid UTF-8 -> U+FFFD
    if not s:  # 1. empty stays empty
        return b""
    s = BEARER_RE.sub("Bearer [REDACTED]", s)  # 2.
    s = TOKEN_RE.sub("[REDACTED]", s)  # 3.
    s = s.replace("\r", " ").replace("\n", " ")  # 4.
    # 5. at most MAX_BYTES bytes, an incomplete trailing character dropped
    return s.encode("utf-8")[:MAX_BYTES].decode("utf-8", "ignore").encode("utf-8")


def self_check(vectors_path):
    """The reference itself must agree with API.md and the shared vectors."""
    ascii_space = [c for c in range(128) if re.match(r"\s", chr(c), re.ASCII)]
    assert ascii_space == [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20], ascii_space
    assert not re.match(r"\s", "\x1c", re.ASCII)
    # ASCII case-insensitive only: no Kelvin sign or long s folding.
    assert BEARER_RE.sub("X", "Bearer \u212a") == "Bearer \u212a"
    assert reference(b"x" * 40 + b"-") == b"[REDACTED]-"
    with open(vectors_path, encoding="utf-8") as f:
        vectors = json.load(f)["vectors"]
    for v in vectors:
        got = reference(v["input"].encode("utf-8"))
        assert got == v["output"].encode("utf-8"), (v["input"][:80], got[:80])
    return len(vectors)


# --- Inputs ----------------------------------------------------------------

WORD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
RUN = WORD + "-"

INVALID = [
    b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xc2", b"\xdf",
    b"\xe0\x80", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xe2\x82", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xef\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x9f\x98", b"\xf0\x9f",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\x80\x80",
]

TEXT = [
    "Bearer", "bearer", "BEARER", "BeArEr", "bEARER", "Bear", "er", "b",
    " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1f", "\x85", "\xa0",
    "-", "--", "---", "_", ".", "..", ",", "=", ":", ";", "/", "'", '"', "[", "]",
    "a", "Z", "9", "x", "é", "€", "😀", "\u212a", "\u017f", "\u00df", "\x00",
    "[REDACTED]", "token=", "key=", "Authorization: ", "sk-", "Bearer ", "bearer\t",
]


def word_run(rng, n, alphabet=WORD):
    return "".join(rng.choice(alphabet) for _ in range(n))


def fragment(rng):
    k = rng.random()
    if k < 0.35:
        return rng.choice(TEXT).encode("utf-8")
    if k < 0.45:
        return rng.choice(INVALID)
    if k < 0.60:  # around the 32-character threshold
        return word_run(rng, rng.randint(28, 36)).encode()
    if k < 0.70:  # runs with dashes: \b moves around
        return word_run(rng, rng.randint(1, 70), rng.choice([RUN, "a-", "a--", "-_a9"])).encode()
    if k < 0.78:
        return ("-" * rng.randint(1, 5) + "a" * rng.randint(25, 40) + "-" * rng.randint(0, 5)).encode()
    if k < 0.80:  # long runs
        return rng.choice("ax-_").encode() * rng.randint(1000, 3000)
    if k < 0.90:
        return word_run(rng, rng.randint(1, 10), RUN + ".").encode()
    return bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))


def gen_mix(rng, target):
    out = bytearray()
    while len(out) < target:
        out += fragment(rng)
    return bytes(out)


def gen_random_bytes(rng):
    n = rng.choice([rng.randint(0, 16), rng.randint(0, 200), rng.randint(900, 1200)])
    if rng.random() < 0.5:
        return bytes(rng.randrange(256) for _ in range(n))
    # mostly ASCII, where the rules bite
    alphabet = b"Bbearer \t\r\n-_.aZ9x\x00\x80\xc3\xa9\xe2\x82\xac\xff"
    return bytes(rng.choice(alphabet) for _ in range(n))


def gen_edge(rng):
    """Lengths around the cut, with a multi-byte or replaced character at it."""
    filler = rng.choice([b".", b" ", b"\xc3\xa9", b"\xe2\x82\xac", b"a-", b"\r"])
    n = rng.randint(1000, 1030)
    prefix = (filler * (n // len(filler) + 1))[: n - rng.randint(0, 3)]
    if prefix and prefix[-1] >= 0x80 and rng.random() < 0.5:
        prefix = prefix.decode("utf-8", "ignore").encode("utf-8")
    tail = rng.choice(
        [b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xff", b"\xe2\x82", b"\xf0\x9f\x98",
         b"Bearer tok", b"x" * 40, b"\r\n", b"", b"\x00"]
    )
    return prefix + tail + gen_mix(rng, rng.randint(0, 20))


def gen_mutation(rng, seeds):
    b = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        pos = rng.randint(0, len(b))
        if op < 0.4:
            b[pos:pos] = fragment(rng)
        elif op < 0.7 and b:
            del b[pos : pos + rng.randint(1, 8)]
        elif b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
    return bytes(b)


def gen_big(rng):
    n = rng.randint(100_000, 1_000_000)
    kind = rng.randrange(4)
    if kind == 0:
        return b"x" * n + rng.choice([b"", b"-", b"-" * 40, b"\xff"])
    if kind == 1:
        return b"Bearer " + b"a." * (n // 2) + b" tail"
    if kind == 2:
        return (b"a-" * (n // 2))[: n - 1] + rng.choice([b"", b"a", b"-"])
    return b"-" * n + b"a" * 31 + b"-" * n


def cases(rng, seeds):
    """An endless stream: the vectors, the vectors repeated, then generated."""
    yield from seeds
    yield from (s * 40 for s in seeds if s)
    gens = [
        (0.40, lambda: gen_mix(rng, rng.choice([rng.randint(0, 40), rng.randint(0, 400), rng.randint(0, 1500)]))),
        (0.15, lambda: gen_random_bytes(rng)),
        (0.15, lambda: gen_edge(rng)),
        (0.30, lambda: gen_mutation(rng, seeds)),
    ]
    weights = [w for w, _ in gens]
    for i in itertools.count():
        if i % 5000 == 0:
            yield gen_big(rng)
        else:
            yield rng.choices(gens, weights)[0][1]()


# --- Running the filter ------------------------------------------------------


def run_batch(filter_path, inputs):
    data = b"".join(struct.pack(">I", len(x)) + x for x in inputs)
    p = subprocess.run([filter_path, "--batch"], input=data, stdout=subprocess.PIPE, check=True)
    out, pos = [], 0
    for _ in inputs:
        (n,) = struct.unpack_from(">I", p.stdout, pos)
        out.append(p.stdout[pos + 4 : pos + 4 + n])
        pos += 4 + n
    if pos != len(p.stdout):
        raise RuntimeError("sanitize-filter wrote more records than it was sent")
    return out


def short(b, limit=300):
    r = repr(b)
    return r if len(r) <= limit else r[:limit] + f"... ({len(b)} bytes)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("filter", help="path to the sanitize-filter executable")
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=20240917)
    ap.add_argument("--batch-size", type=int, default=5000)
    args = ap.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    vectors_path = os.path.join(os.environ.get("WIKIWEB_TEST_DATA", os.path.join(here, "data")),
                                "sanitizer-vectors.json")
    nvec = self_check(vectors_path)
    with open(vectors_path, encoding="utf-8") as f:
        seeds = [v["input"].encode("utf-8") for v in json.load(f)["vectors"]]

    print(f"seed={args.seed} count={args.count} (reference agrees with {nvec} vectors)", flush=True)
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    total, failures, shown = 0, 0, []
    batch = []

    def flush():
        nonlocal total, failures
        for x, got in zip(batch, run_batch(args.filter, batch)):
            total += 1
            want = reference(x)
            if got != want:
                failures += 1
                if len(shown) < 5:
                    shown.append((x, want, got))
        batch.clear()

    for x in itertools.islice(cases(rng, seeds), args.count):
        batch.append(x)
        if len(batch) >= args.batch_size:
            flush()
    if batch:
        flush()

    print(f"{total} cases, {failures} failures, {time.monotonic() - t0:.1f} s")
    for x, want, got in shown:
        print(f"input:    {short(x)}\nexpected: {short(want)}\ngot:      {short(got)}\n")
    return 1 if failures or total != args.count else 0


if __name__ == "__main__":
    sys.exit(main())
