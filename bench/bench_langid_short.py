"""Benchmark: language ID accuracy on short real lines (15-100 characters), fastText lid.176 alone
(what `langid` did before the script prior) against ylink's `langid.predict` (the script prior in
front of the model), per source, with the labels of the misses.

    .venv/bin/python bench/bench_langid_short.py [--show 5]

The lines are cut from ../shared/data by tests/langid_lines.py (Chinese: THUCNews and ChineseWebText
sentences; English: Reuters and Gutenberg sentences by C4's line rule; Japanese: the NHK page of the
trafilatura evaluation set). Two more Japanese and Korean checks are read where this machine has them:
the Japanese manual pages of Debian's `manpages-ja` (`apt-get install manpages-ja`: 500 pages of real
translated Japanese prose, roff markup stripped, lines written mostly in CJK) and the Japanese and
Korean sample texts of CPython's own test suite (Lib/test/cjkencodings). Research-only data are read
in place, never copied.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import platform
import re
import sys
import sysconfig
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.langid_lines import MAX_CHARS, MIN_CHARS, japanese_lines, short_lines  # noqa: E402
from ylink_data.text.transform import langid  # noqa: E402
from ylink_data.text.transform.script import script_counts  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
MAN_JA = Path("/usr/share/man/ja")
# roff: font changes, escapes, and the non-breaking/zero-width marks between words
_ROFF = re.compile(r"\\f[BIRP1-4]|\\f\(..|\\[&/,|^]|\\\(..|\\\*.|\\s[-+]?\d")


def manpage_lines(folder: Path) -> list[str]:
    """Text lines (not roff requests) of the Japanese manual pages, written mostly in CJK
    (at least two CJK characters per word of other scripts, as `transform.script` counts)."""
    lines = []
    for page in sorted(folder.glob("man*/*.gz")):
        with gzip.open(page, "rt", encoding="utf-8", errors="replace") as f:
            for row in f:
                if row.startswith((".", "'")):
                    continue
                line = " ".join(_ROFF.sub("", row).replace("\\-", "-").replace("\\e", "\\").split())
                if MIN_CHARS <= len(line) <= MAX_CHARS:
                    lines.append(line)
    counts = script_counts(lines)
    cjk = counts[:, :3].sum(axis=1)
    return [line for line, n, words in zip(lines, cjk, counts[:, 3]) if n and n >= 2 * words]


def cpython_samples() -> dict[str, list[str]]:
    folder = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings"
    out = {}
    for lang, name in (("ja", "shift_jis-utf8.txt"), ("ko", "euc_kr-utf8.txt")):
        path = folder / name
        if path.is_file():
            # the Korean file ends in deliberately garbled syllables (a decoder test): its first
            # paragraph only
            text = path.read_text(encoding="utf-8").split("\n\n")[0]
            out[f"{lang} cpython-test-text"] = japanese_lines(text)
    return out


def lid176_alone(lines: list[str]) -> list[str]:
    labels, _ = langid.load_model().predict(lines, k=1)
    return [label[0][len("__label__"):] for label in labels]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", type=int, default=5, help="misses shown per source, after the prior")
    args = ap.parse_args()
    sets = short_lines(SHARED)
    if MAN_JA.is_dir():
        sets["ja manpages-ja"] = manpage_lines(MAN_JA)
    sets.update(cpython_samples())

    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, Python "
          f"{platform.python_version()}; lines of {MIN_CHARS}-{MAX_CHARS} characters\n")
    print("| lines | count | lid.176 alone | misses (labels) | ylink langid | misses (labels) |")
    print("| --- | ---: | ---: | --- | ---: | --- |")
    shown = []
    totals: dict[str, Counter] = {}
    for name, lines in sets.items():
        want = name.split()[0]
        before = lid176_alone(lines)
        after, _ = langid.predict(lines)
        row = []
        for codes in (before, after):
            misses = Counter(c for c in codes if c != want)
            wrong = sum(misses.values())
            row.append(f"{1 - wrong / len(lines):.2%} | {wrong:,}: "
                       + ", ".join(f"{c} {n}" for c, n in misses.most_common(6)))
        print(f"| {name} | {len(lines):,} | " + " | ".join(row) + " |")
        total = totals.setdefault(want, Counter())
        total.update(n=len(lines), before=sum(c == want for c in before), after=sum(c == want for c in after))
        shown += [(name, c, t) for c, t in zip(after, lines) if c != want][:args.show]
    print()
    for lang, t in totals.items():
        print(f"{lang}: {t['n']:,} lines, lid.176 alone {t['before'] / t['n']:.2%}, ylink langid {t['after'] / t['n']:.2%}")
    print("\nmisses after the prior (first per source):")
    for name, code, text in shown:
        print(f"  {name}: {code}  {text}")


if __name__ == "__main__":
    main()
