"""Benchmark: the quality rules (issue 4). Our four ops chained, gopher_quality -> gopher_repetition ->
c4_quality -> fineweb_quality (the en presets, whose numbers are datatrove's defaults), against
datatrove's GopherQualityFilter -> GopherRepetitionFilter -> C4QualityFilter -> FineWebQualityFilter
(defaults, language "en"), on the same real English documents, in one process, one core:
documents/s and MB/s per core, their ratio, and the fraction of documents on which the two chains
make the same keep/drop decision (plus each op against its own peer on the same text, and which
rule of ours meets which rule of theirs where they differ), and the four ops with no parameters
(`language: auto`, documents without `lang`: by script) against both. Then our ops with the zh
presets on real Chinese documents, per MB against English.

    .venv/bin/python -m pip install datatrove spacy rjieba  # datatrove 0.10.1 tokenizes English with
                                                            # spaCy's blank "en" pipeline (no model);
                                                            # rjieba: our fast Chinese segmenter
    .venv/bin/python bench/bench_purify.py [--repeats 5] [--show-disagreements N]

English documents (real, from ../shared/data and the bundled crawl):
- Reuters-21578 (every 4th article of 10,788: news, many very short items);
- Project Gutenberg books cut into consecutive ~3 KB passages of whole paragraphs (every 3rd);
- web pages: trafilatura's evaluation pages and the bundled crawl's HTML responses (samples/crawl),
  each twice, as our default extractor's main text and as the whole page's text (what a WET record
  holds: menus, footers and all), kept when fastText says English; plus the WET records of
  samples/crawl and ../shared/data/cc_samples and dolma's cc_net Common Crawl documents.
Chinese: THUCNews val (1,000 articles) and ChineseWebText 2021-43 cleared1 (100 pages).

Method: our side is each op's `process` on 1,024-document Arrow batches (document schema), the rows
an op drops removed before the next op (as the runner does), c4_quality's cleaned text handed on;
datatrove's side is `filter(doc)` per document through the four filters in turn, stopping at the
first that drops (as its pipeline does; C4QualityFilter's cleaned `doc.text` handed on). The sides
take turns, `--repeats` times, and the median CPU time of this process (`time.process_time`, pinned
to one core) is used, so other jobs on the shared machine do not count. Decisions come from an
untimed pass. Writes nothing; prints Markdown.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import statistics
import sys
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import pyarrow as pa
import yaml

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))

from ylink_data.core.schema import DOCUMENT_SCHEMA  # noqa: E402
from ylink_data.ops import build_op, validate_stages  # noqa: E402
from benchtools import WALL_OVER_CPU, timed  # bench/ is on sys.path when a script runs

OPS = ("gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality")
PEERS = ("GopherQualityFilter", "GopherRepetitionFilter", "C4QualityFilter", "FineWebQualityFilter")
BATCH = 1024


# ----------------------------------------------------------------------------- real documents


def reuters(step: int = 4) -> list[str]:
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][::step]


def gutenberg(size: int = 3000, step: int = 3) -> list[str]:
    """Consecutive whole paragraphs of each book, about `size` characters a passage."""
    out: list[str] = []
    for path in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt")):
        current: list[str] = []
        for para in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            if para.strip():
                current.append(para.strip("\n"))
            if sum(map(len, current)) >= size:
                out.append("\n\n".join(current))
                current = []
    return out[::step]


def _html_pages() -> list[tuple[str, str]]:
    """(url, html) of trafilatura's evaluation pages and of the bundled crawl's HTML responses."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from ylink_data.io.charset import decode_html

    pages = []
    root = SHARED / "trafilatura_eval"
    evaldata = json.loads((root / "tests" / "evaldata.json").read_text(encoding="utf-8"))
    for url, item in evaldata.items():
        path = root / "tests" / "eval" / item["file"]
        if not path.is_file():
            path = root / "tests" / "cache" / item["file"]
        pages.append((url, decode_html(path.read_bytes())[0]))
    for path in sorted((REPO / "samples" / "crawl").glob("*.warc*")):
        if ".wet" in path.name:
            continue
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, record_types=WarcRecordType.response):
                body = record.reader.read()
                ctype = (record.http_headers.get("Content-Type") or "") if record.http_headers else ""
                if "html" in ctype.lower() or body[:200].lower().lstrip().startswith((b"<!doctype", b"<html")):
                    pages.append((record.headers.get("WARC-Target-URI") or "", decode_html(body)[0]))
    return pages


def _wet_records() -> list[str]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    paths = sorted((REPO / "samples" / "crawl").glob("*.wet*")) + sorted((SHARED / "cc_samples").rglob("*.wet*"))
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out += [r.reader.read().decode("utf-8", "replace")
                    for r in ArchiveIterator(f, record_types=WarcRecordType.conversion, parse_http=False)]
    return out


def web_english() -> list[str]:
    from resiliparse.extract.html2text import extract_plain_text

    from ylink_data.text.transform.extract import extract_text
    from ylink_data.text.transform.langid import predict

    texts = []
    for url, html in _html_pages():
        texts.append(extract_text(html, url))  # our default extractor: the main text
        texts.append(extract_plain_text(html, main_content=False, preserve_formatting=True))  # the whole page
    texts += _wet_records()
    for path in sorted((SHARED / "cc_samples" / "dolma" / "tests" / "data" / "multiple_files").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f]
    texts = [t for t in dict.fromkeys(texts) if t.strip()]
    langs, _ = predict(texts)
    return [t for t, lang in zip(texts, langs) if lang == "en"]


def thucnews() -> list[str]:
    lines = (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines if "\t" in line]


def chinese_webtext() -> list[str]:
    path = SHARED / "zh_chinesewebtext_quality" / "2021-43" / "cleared1.jsonl"
    return [json.loads(line)["raw_content"] for line in path.read_text(encoding="utf-8").splitlines()]


# ----------------------------------------------------------------------------- the two sides


def preset_ops(*names: str) -> list:
    stages = []
    for name in names:
        stages += yaml.safe_load((REPO / "configs" / "filters" / f"{name}.yaml").read_text(encoding="utf-8"))["stages"]
    return built(stages)


def built(stages: list) -> list:
    ops = [build_op(op, params) for op, params in validate_stages(stages)]
    for op in ops:
        op.setup()
    return ops


def tables(texts: list[str]) -> list[pa.Table]:
    out = []
    for start in range(0, len(texts), BATCH):
        chunk = texts[start:start + BATCH]
        n = len(chunk)
        out.append(pa.Table.from_pydict(
            {"id": [str(i) for i in range(start, start + n)], "text": chunk, "url": [None] * n,
             "source": ["bench"] * n, "lang": [None] * n, "lang_score": [None] * n, "metadata": [None] * n},
            schema=DOCUMENT_SCHEMA))
    return out


def ours_chain(ops: list, batches: list[pa.Table]) -> dict[str, str | None]:
    """id -> the first drop reason (None: kept) through `ops`, dropped rows leaving each batch."""
    from ylink_data.text.transform import units

    units._RECENT.clear()  # no tokens left over from the previous turn (each turn starts cold)
    units._RECENT_TOKENS[0] = 0
    out: dict[str, str | None] = {}
    for table in batches:
        for op in ops:
            result = op.process(table)
            dropped = result.dropped or [None] * table.num_rows
            for doc_id, reason in zip(table.column("id").to_pylist(), dropped):
                if reason:
                    out[doc_id] = reason
            table = result.table.filter(pa.array([d is None for d in dropped]))
        for doc_id in table.column("id").to_pylist():
            out[doc_id] = None
    return out


def peer_filters() -> list:
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)

    return [GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter(), FineWebQualityFilter()]


def peer_verdict(filt, doc) -> str | None:
    result = filt.filter(doc)
    if result is True:
        return None
    reason = result[1] if isinstance(result, tuple) else None
    return f"{type(filt).__name__}:{reason or 'dropped'}"


def peer_chain(filters: list, texts: list[str]) -> dict[str, str | None]:
    from datatrove.data import Document

    out: dict[str, str | None] = {}
    for i, text in enumerate(texts):
        doc = Document(text=text, id=str(i))
        reason = None
        for filt in filters:
            reason = peer_verdict(filt, doc)
            if reason:
                break
        out[doc.id] = reason
    return out


# ----------------------------------------------------------------------------- timing






def race(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds per side; the sides take turns, the first one rotating each repeat."""
    names = list(sides)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timed(sides[name]))
    return {n: statistics.median(t) for n, t in times.items()}


# ----------------------------------------------------------------------------- agreement


def short(reason: str | None) -> str:
    return reason or "keep"


def agreement(texts: list[str], sets: list[str], ours: dict, theirs: dict, show: int) -> None:
    n = len(texts)
    same = sum((ours[str(i)] is None) == (theirs[str(i)] is None) for i in range(n))
    print(f"\n### Keep/drop agreement, whole chain: {same:,} of {n:,} documents ({same / n:.2%})\n")
    print("| set | documents | kept by ours | kept by datatrove | same decision |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in dict.fromkeys(sets):
        idx = [i for i in range(n) if sets[i] == name]
        k_o = sum(ours[str(i)] is None for i in idx)
        k_t = sum(theirs[str(i)] is None for i in idx)
        s = sum((ours[str(i)] is None) == (theirs[str(i)] is None) for i in idx)
        print(f"| {name} | {len(idx):,} | {k_o:,} | {k_t:,} | {s / len(idx):.2%} |")
    pairs = Counter((short(ours[str(i)]), short(theirs[str(i)])) for i in range(n)
                    if (ours[str(i)] is None) != (theirs[str(i)] is None))
    if pairs:
        print("\nDisagreements, ours vs datatrove's first reason:\n")
        print("| ours | datatrove | documents |")
        print("| --- | --- | ---: |")
        for (a, b), c in pairs.most_common():
            print(f"| {a} | {b} | {c} |")
    reasons = Counter((short(ours[str(i)]), short(theirs[str(i)])) for i in range(n)
                      if ours[str(i)] and theirs[str(i)])
    mapped = sum(c for (a, b), c in reasons.items())
    print(f"\nBoth drop: {mapped:,} documents. Pairs of first reasons when both drop:\n")
    print("| ours | datatrove | documents |")
    print("| --- | --- | ---: |")
    for (a, b), c in reasons.most_common():
        print(f"| {a} | {b} | {c} |")
    if show:
        shown = 0
        for i in range(n):
            if (ours[str(i)] is None) != (theirs[str(i)] is None) and shown < show:
                shown += 1
                print(f"\n---- #{i} ({sets[i]}): ours {short(ours[str(i)])}, datatrove {short(theirs[str(i)])}, "
                      f"{len(texts[i]):,} chars\n{texts[i][:1500]!r}")


def per_op_agreement(texts: list[str], ops: list, filters: list) -> None:
    """Each op against its own peer on the same (original) text."""
    from datatrove.data import Document

    print("\n### Each op against its peer, on the same original text\n")
    print("| op | peer | dropped by ours | dropped by datatrove | same decision | ours drops only | datatrove drops only |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    batches = tables(texts)
    for op, filt in zip(ops, filters):
        mine: list[str | None] = []
        for table in batches:
            mine += op.process(table).dropped or [None] * table.num_rows
        theirs = [peer_verdict(filt, Document(text=t, id=str(i))) for i, t in enumerate(texts)]
        only_o = Counter(m for m, t in zip(mine, theirs) if m and not t)
        only_t = Counter(t for m, t in zip(mine, theirs) if t and not m)
        same = sum((m is None) == (t is None) for m, t in zip(mine, theirs))
        fmt = lambda c: ", ".join(f"{k.split(':', 1)[1]} {v}" for k, v in c.most_common()) or "-"  # noqa: E731
        print(f"| {op.name} | {type(filt).__name__} | {sum(map(bool, mine)):,} | {sum(map(bool, theirs)):,} | "
              f"{same / len(texts):.2%} | {fmt(only_o)} | {fmt(only_t)} |")


def defaults_agreement(texts: list[str], ours: dict, theirs: dict, batches: list[pa.Table]) -> None:
    """The four ops with no parameters (`language: auto`; these documents have no `lang`, so each goes
    by its script) against the en presets and against datatrove."""
    defaults = ours_chain(built([{name: {}} for name in OPS]), batches)
    same = sum(defaults[k] == ours[k] for k in ours)
    peer = sum((defaults[k] is None) == (theirs[k] is None) for k in theirs)
    print("\n### The ops' defaults (`language: auto`; no `lang`, so each document by its script)\n")
    print(f"Same first reason (or keep) as the en presets: {same:,} of {len(texts):,} documents "
          f"({same / len(texts):.2%}); same keep/drop decision as datatrove: {peer:,} ({peer / len(texts):.2%}).")


# ----------------------------------------------------------------------------- main


def _version(package: str) -> str:
    try:
        return version(package)
    except Exception:
        return "not installed"


def mb(texts: list[str]) -> float:
    return sum(len(t.encode()) for t in texts) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--show-disagreements", type=int, default=0, metavar="N",
                    help="print N documents on which the two chains decide differently")
    ap.add_argument("--no-zh", action="store_true", help="skip the Chinese timing")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores (pinned to one), "
          f"Python {platform.python_version()}, pyarrow {pa.__version__}, datatrove {version('datatrove')}, "
          f"spacy {version('spacy')}, jieba {version('jieba')}, rjieba {_version('rjieba')}, "
          f"{dt.datetime.now():%Y-%m-%d %H:%M}\n")
    corpus = {"Reuters-21578 (every 4th)": reuters(), "Gutenberg ~3 KB passages (every 3rd)": gutenberg(),
              "web pages (main text, whole page, WET, cc_net)": web_english()}
    texts = [t for docs in corpus.values() for t in docs]
    sets = [name for name, docs in corpus.items() for _ in docs]
    print("| English set | documents | MB | median chars |")
    print("| --- | ---: | ---: | ---: |")
    for name, docs in corpus.items():
        print(f"| {name} | {len(docs):,} | {mb(docs):.2f} | {statistics.median(map(len, docs)):,.0f} |")
    print(f"| all | {len(texts):,} | {mb(texts):.2f} | {statistics.median(map(len, texts)):,.0f} |")

    ops = preset_ops("gopher-en", "c4-fineweb-en")
    assert [op.name for op in ops] == list(OPS)
    filters = peer_filters()
    batches = tables(texts)
    ours = ours_chain(ops, batches)  # also warms both sides up (spaCy's vocabulary, caches)
    theirs = peer_chain(filters, texts)

    sides = {"datatrove (4 filters)": lambda: peer_chain(filters, texts),
             "ylink (4 ops)": lambda: ours_chain(ops, batches)}
    seconds = race(sides, args.repeats)
    print(f"\n### Throughput, English: {args.repeats} turns each, median CPU time, one core\n")
    print("| side | seconds | docs/s per core | MB/s per core | vs datatrove |")
    print("| --- | ---: | ---: | ---: | ---: |")
    base = seconds["datatrove (4 filters)"]
    for name, s in seconds.items():
        print(f"| {name} | {s:.2f} | {len(texts) / s:,.0f} | {mb(texts) / s:.2f} | {base / s:.2f}x |")

    agreement(texts, sets, ours, theirs, args.show_disagreements)
    per_op_agreement(texts, ops, filters)
    defaults_agreement(texts, ours, theirs, batches)

    if not args.no_zh:
        zh_sets = {"THUCNews val": thucnews(), "ChineseWebText 2021-43 cleared1": chinese_webtext()}
        zh_texts = [t for docs in zh_sets.values() for t in docs]
        zh_ops = preset_ops("gopher-zh", "c4-fineweb-zh")
        zh_batches = tables(zh_texts)
        zh_verdicts = ours_chain(zh_ops, zh_batches)
        en_ops = ops
        secs = race({"en": lambda: ours_chain(en_ops, batches), "zh": lambda: ours_chain(zh_ops, zh_batches)},
                    args.repeats)
        print("\n### Chinese (zh presets) vs English (en presets), ours, per MB\n")
        print("| corpus | documents | MB | kept | seconds | docs/s | MB/s |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        print(f"| English (above) | {len(texts):,} | {mb(texts):.2f} | {list(ours.values()).count(None) / len(texts):.1%} | "
              f"{secs['en']:.2f} | {len(texts) / secs['en']:,.0f} | {mb(texts) / secs['en']:.2f} |")
        start = 0
        for name, docs in zh_sets.items():
            kept = sum(zh_verdicts[str(i)] is None for i in range(start, start + len(docs)))
            start += len(docs)
            print(f"| {name} | {len(docs):,} | {mb(docs):.2f} | {kept / len(docs):.1%} | | | |")
        print(f"| Chinese, all | {len(zh_texts):,} | {mb(zh_texts):.2f} | "
              f"{list(zh_verdicts.values()).count(None) / len(zh_texts):.1%} | {secs['zh']:.2f} | "
              f"{len(zh_texts) / secs['zh']:,.0f} | {mb(zh_texts) / secs['zh']:.2f} |")
        en_rate, zh_rate = mb(texts) / secs["en"], mb(zh_texts) / secs["zh"]
        print(f"\nEnglish MB/s / Chinese MB/s: {en_rate / zh_rate:.2f} (goal: at most 2)")
        print("Chinese drop reasons: " + ", ".join(f"{k} {v}" for k, v in
                                                   Counter(r for r in zh_verdicts.values() if r).most_common()))

    print(f"\nwall / CPU time per timing: median {statistics.median(WALL_OVER_CPU):.2f}, "
          f"max {max(WALL_OVER_CPU):.2f} (above 1: the core was shared)")


if __name__ == "__main__":
    main()
