"""Benchmark: main-text extraction on trafilatura's evaluation set (issue 3). For each of ylink's
extractors and, in the same run, trafilatura's own default `trafilatura.extract(html)` and datatrove's
`Trafilatura` extractor (what FineWeb used): snippet precision, recall and F1, also for en/zh/de,
and pages/s on one core. Goal: F1 no lower than trafilatura's default at 5x or more of its pages/s.

    .venv/bin/python -m pip install datatrove      # the bench extra; without it that row is left out
    .venv/bin/python bench/bench_extract.py [--shared ../shared/data] [--limit N]

Method, as trafilatura's tests/README.rst and eval_common.py describe it: every page of
tests/evaldata.json (tests/eval/<file>, else tests/cache/<file>) is read as bytes and decoded once with
ylink's `decode_html`; every side gets the same str. A 'with' snippet found in the output (whitespace
collapsed on both sides) is a true positive, one missing a false negative; a 'without' snippet found
is a false positive. An extractor that raises scores as empty output. The sides take turns page by
page (the starting side rotates), so the noise of a shared machine falls on all of them alike; only
the extraction call is timed. The process is pinned to one CPU. Languages come from
lang_by_file.json (langid on the snippets). The F1 difference to trafilatura's default has a 95%
paired bootstrap interval over pages. Then the same sides are timed on the HTML pages of the bundled
crawl (samples/crawl), whose mix of short and listing pages sends more pages to `hybrid`'s
fallback. Writes nothing; prints Markdown tables.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ylink_data.io.charset import decode_html  # noqa: E402
from ylink_data.text.transform.extract import DEFAULT_EXTRACTOR, EXTRACTOR_NAMES, extract_with_engine  # noqa: E402

LANGS = ("en", "zh", "de")
BASELINE = "trafilatura.extract(html)"
DATATROVE = "datatrove `Trafilatura().extract(html)`"


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def load_pages(root: Path, limit: int | None) -> list[dict[str, Any]]:
    evaldata = json.loads((root / "tests" / "evaldata.json").read_text(encoding="utf-8"))
    langs = json.loads((root / "lang_by_file.json").read_text(encoding="utf-8"))
    pages = []
    for url, item in list(evaldata.items())[:limit]:
        path = root / "tests" / "eval" / item["file"]
        if not path.is_file():
            path = root / "tests" / "cache" / item["file"]
        html, _ = decode_html(path.read_bytes())
        pages.append({"url": url, "html": html, "lang": (langs.get(item["file"]) or ["?"])[0],
                      "with": [norm(s) for s in item["with"]], "without": [norm(s) for s in item["without"]]})
    return pages


ENGINES: Counter = Counter()  # which engine produced each ylink output (hybrid: its fallback rate)
WARM_UP = "<html><body><p>warm-up</p></body></html>"


def sides() -> list[tuple[str, Callable[[str, str], str | None]]]:
    import trafilatura

    def ylink(name: str):
        def run(html: str, url: str) -> str:
            text, engine = extract_with_engine(html, url, name)
            ENGINES[engine] += 1
            return text
        return run

    out = [(f"ylink `{name}`" + (" (default)" if name == DEFAULT_EXTRACTOR else ""), ylink(name))
           for name in EXTRACTOR_NAMES]
    out.append((BASELINE, lambda html, url: trafilatura.extract(html)))
    for _, fn in out:
        fn(WARM_UP, "")  # imports and first-call set-up, untimed
    try:
        from datatrove.pipeline.extractors import Trafilatura
    except ImportError:
        print("datatrove is not installed (pip install datatrove): its row is left out", file=sys.stderr)
    else:
        # FineWeb's settings (favour_precision=True, deduplicate=True). Its LRU cache of seen text
        # lives on across documents, as in datatrove's worker; it is warmed up with "" as datatrove
        # does, so no page text is in it before the first page.
        extractor = Trafilatura()
        extractor.extract("")
        out.append((DATATROVE, lambda html, url: extractor.extract(html)))
    ENGINES.clear()
    return out


def counts(output: str | None, page: dict[str, Any]) -> tuple[int, int, int, int]:
    text = norm(output or "")
    tp = sum(s in text for s in page["with"])
    fp = sum(s in text for s in page["without"])
    return tp, fp, len(page["with"]) - tp, len(page["without"]) - fp


def prf(rows: list[tuple[int, int, int, int]]) -> tuple[float, float, float]:
    tp, fp, fn = (sum(r[i] for r in rows) for i in range(3))
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def bootstrap_diff(a: list, b: list, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% interval of F1(a) - F1(b), resampling pages (paired)."""
    rng = random.Random(seed)
    idx = range(len(a))
    diffs = []
    for _ in range(n):
        pick = [rng.choice(idx) for _ in idx]
        diffs.append(prf([a[i] for i in pick])[2] - prf([b[i] for i in pick])[2])
    diffs.sort()
    return diffs[int(0.025 * n)], diffs[int(0.975 * n) - 1]


def take_turns(runs: list, pages: list[dict[str, Any]]) -> tuple[list[float], list[list[str | None]], list[int]]:
    """Every side on every page, sides taking turns (the first one rotates); returns seconds spent in
    the extraction calls, the outputs and the exception counts, per side."""
    seconds = [0.0] * len(runs)
    outputs: list[list[str | None]] = [[] for _ in runs]
    errors = [0] * len(runs)
    for k, page in enumerate(pages):
        for j in range(len(runs)):
            i = (j + k) % len(runs)
            started = time.perf_counter()
            try:
                out = runs[i][1](page["html"], page["url"])
            except Exception:
                out, errors[i] = None, errors[i] + 1
            seconds[i] += time.perf_counter() - started
            outputs[i].append(out)
    return seconds, outputs, errors


def crawl_pages() -> list[dict[str, Any]]:
    """The HTML responses of the bundled crawl (samples/crawl), as the pipeline's reader decodes them:
    no snippets to score, but the mix of a real crawl (listings, spam, short pages)."""
    from ylink_data.io.input_config import InputConfig
    from ylink_data.io.readers import Record, Split, open_split, read_split

    pages = []
    for path in sorted((REPO / "samples" / "crawl").glob("*.warc*")):
        split = Split(str(path), "warc", path.stat().st_size)
        with open_split(split, {}) as f:
            for item in read_split(split, f, InputConfig(paths=[str(path)])):
                if isinstance(item, Record) and "html" in item.metadata.get("content_type", ""):
                    pages.append({"url": item.url or "", "html": item.decoded()})
    return pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--limit", type=int, default=None, help="only the first N pages of evaldata.json")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    pages = load_pages(args.shared / "trafilatura_eval", args.limit)
    runs = sides()
    seconds, outputs, errors = take_turns(runs, pages)
    rows = [[counts(out, page) for out, page in zip(outs, pages)] for outs in outputs]
    handed = ENGINES["hybrid:trafilatura"]

    base = next(i for i, (label, _) in enumerate(runs) if label == BASELINE)
    base_rate = len(pages) / seconds[base]
    by_lang = {lang: [k for k, p in enumerate(pages) if p["lang"] == lang] for lang in LANGS}
    print(f"- **Machine:** {platform.node() or 'host'}, {platform.machine()}, {os.cpu_count()} cores "
          f"(pinned to one), Python {platform.python_version()}, trafilatura {version('trafilatura')}, "
          f"resiliparse {version('resiliparse')}"
          + (f", datatrove {version('datatrove')}" if runs[-1][0] == DATATROVE else ""))
    command = ".venv/bin/python bench/bench_extract.py" + (f" --limit {args.limit}" if args.limit else "")
    print(f"- **Command:** `{command}`")
    print(f"- **Date:** {dt.date.today().isoformat()}")
    print(f"- **Pages:** {len(pages)} (" + ", ".join(f"{lang} {len(v)}" for lang, v in by_lang.items()) + ")\n")
    head = "| extractor | precision | recall | F1 | " + " | ".join(f"F1 {lang}" for lang in LANGS)
    print(head + " | pages/s | x default | F1 - default (95% CI) |")
    print("|" + " --- |" * 4 + " ---: |" * len(LANGS) + " ---: | ---: | --- |")
    for i, (label, _) in enumerate(runs):
        p, r, f = prf(rows[i])
        per_lang = " | ".join(f"{prf([rows[i][k] for k in ks])[2]:.3f}" if ks else "-" for ks in by_lang.values())
        rate = len(pages) / seconds[i]
        if i == base:
            diff = "-"
        else:
            lo, hi = bootstrap_diff(rows[i], rows[base])
            diff = f"{f - prf(rows[base])[2]:+.4f} ({lo:+.4f} .. {hi:+.4f})"
        print(f"| {label} | {p:.3f} | {r:.3f} | {f:.4f} | {per_lang} | {rate:.1f} | {rate / base_rate:.2f} | {diff} |")
    print(f"\n`hybrid` handed {handed} of {len(pages)} pages ({handed / len(pages):.1%}) to trafilatura.")
    if any(errors):
        print("Exceptions (scored as empty output): " + ", ".join(
            f"{runs[i][0]}: {n}" for i, n in enumerate(errors) if n))

    crawl = crawl_pages()
    ENGINES.clear()
    seconds, _, _ = take_turns(runs, crawl)
    handed = ENGINES["hybrid:trafilatura"]
    rates = [len(crawl) / s for s in seconds]
    print(f"\nSpeed on the {len(crawl)} HTML pages of the bundled crawl (samples/crawl; no snippets to score); "
          f"`hybrid` handed {handed} ({handed / len(crawl):.0%}) to trafilatura:\n")
    print("| extractor | pages/s | x default |\n| --- | ---: | ---: |")
    for i, (label, _) in enumerate(runs):
        print(f"| {label} | {rates[i]:.1f} | {rates[i] / rates[base]:.2f} |")


if __name__ == "__main__":
    main()
