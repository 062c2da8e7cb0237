"""decontaminate against datatrove's n-gram decontamination, on the same real-text documents.

Documents: windows of 2 to 5 consecutive sentences of real text (Reuters-21578, 13 Gutenberg books,
THUCNews, ChineseWebText), taken at stepped offsets so that every document is distinct, generated
as a stream (never all in memory). Every 1,000th document gets a benchmark item planted in it:
alternately a GSM8K question or HumanEval prompt verbatim, and lightly edited (upper case,
punctuation removed, its 6th word changed). Benchmarks: GSM8K test `question` + HumanEval `prompt`.

Each side runs in its own process (peak RSS is its own), on one core, in batches of 2,048:
- ylink: `Decontaminate.process` on Arrow batches (13-word n-grams);
- datatrove 0.10.1: NGramsDecontFilter.filter per document, n_grams=13, with an index written
  by NGramsDecontIndexer.compute_hashes (its `run` needs lighteval to fetch tasks, which we do not
  install: we call the same method on our items, with find_query_ngrams so the item is the text
  indexed) and hash_fc=sha1 (its default xxhash raises "Strings must be encoded before hashing"
  with xxhash 3.x: the filter hashes str).

    PYTHONPATH=. .venv/bin/python bench/bench_decontaminate.py --docs 1000000 --peer-docs 200000
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

SHARED = Path(os.environ.get("YLINK_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
GSM8K = SHARED / "benchmarks" / "gsm8k" / "test.jsonl"
HUMANEVAL = SHARED / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"
BATCH = 2048
PLANT_EVERY = 1000


def _sentences() -> list[str]:
    out: list[str] = []
    split_en = re.compile(r"(?<=[.!?])\s+")
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        for line in f:
            out += [s for s in split_en.split(" ".join(json.loads(line)["text"].split())) if s]
    for book in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt")):
        for para in book.read_text(encoding="latin-1").split("\n\n"):
            out += [s for s in split_en.split(" ".join(para.split())) if s]
    split_zh = re.compile(r"(?<=[。！？])")
    for line in (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text().splitlines():
        out += [s for s in split_zh.split(line.split("\t", 1)[1]) if s]
    for path in sorted((SHARED / "zh_chinesewebtext_quality").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line).get("text") or ""
            out += [s for s in split_zh.split(text) if s.strip()]
    return out


def items() -> list[tuple[str, str, str]]:
    """(benchmark file name, item id, text) of the planted pool."""
    gsm = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    with gzip.open(HUMANEVAL, "rt") as f:
        he = [json.loads(line) for line in f]
    return ([("test.jsonl", str(i), r["question"]) for i, r in enumerate(gsm) if len(r["question"].split()) >= 30]
            + [("HumanEval.jsonl.gz", r["task_id"], r["prompt"]) for r in he])


def edit(text: str) -> str:
    words = re.sub(r"[^\w\s]", " ", text.upper()).split()
    words[5] = "BANANAS"
    return " ".join(words)


def documents(n: int) -> Iterator[tuple[str, str | None]]:
    """(text, planted "kind:benchmark:item" or None) for n distinct documents."""
    pool = _sentences()
    planted = items()
    size = len(pool)
    for i in range(n):
        width = 2 + i % 4
        start = (i * 7919 + i // size) % size  # stepped offsets: (start, width) differ for every i < 4 * size
        text = " ".join(pool[start:start + width])
        kind = None
        if i % PLANT_EVERY == PLANT_EVERY - 1:
            k = i // PLANT_EVERY
            bench, item, body = planted[(k // 2) % len(planted)]
            verbatim = k % 2 == 0
            text = f"{text}\n{body if verbatim else edit(body)}\n{pool[(start + 100) % size]}"
            kind = f"{'verbatim' if verbatim else 'edited'}:{bench}:{item}"
        yield text, kind


def run_side(side: str, n: int) -> dict:
    """One side, in this process: (docs, seconds of checking, flagged documents)."""
    flagged: list[tuple[int, str | None, str]] = []  # (doc number, planted kind, what matched)
    if side == "ylink":
        import pyarrow as pa

        from ylink_data.stages.decontaminate import Decontaminate

        op = Decontaminate(benchmarks=[{"path": str(GSM8K), "fields": ["question"]},
                                       {"path": str(HUMANEVAL), "fields": ["prompt"], "id_field": "task_id"}])
        started = time.process_time()
        op.setup()
        setup = time.process_time() - started
        busy = 0.0
        texts: list[str] = []
        kinds: list[str | None] = []

        def flush(first: int) -> float:
            table = pa.table({"id": [str(first + j) for j in range(len(texts))],
                              "text": pa.array(texts, pa.large_string())})
            t0 = time.process_time()
            result = op.process(table)
            spent = time.process_time() - t0
            items_ = result.table.column("decontaminate_item").to_pylist()
            for j, reason in enumerate(result.dropped or []):
                if reason:
                    flagged.append((first + j, kinds[j], f"{reason.split(':', 1)[1]}:{items_[j]}"))
            return spent

        first = 0
        for i, (text, kind) in enumerate(documents(n)):
            texts.append(text)
            kinds.append(kind)
            if len(texts) == BATCH:
                busy += flush(first)
                first, texts, kinds = i + 1, [], []
        if texts:
            busy += flush(first)
    else:
        import tempfile
        from types import SimpleNamespace

        import numpy as np
        from datatrove.data import Document
        from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
        from datatrove.utils.hashing import HashConfig, create_hash_func
        from datatrove.utils.word_tokenizers import load_word_tokenizer

        config = NGramsDecontConfig(n_grams=13, find_query_ngrams=True, hash_config=HashConfig(hash_fc="sha1"))
        started = time.process_time()
        indexer = SimpleNamespace(tokenizer=load_word_tokenizer("en"), config=config,
                                  hash_func=create_hash_func(config.hash_config))
        folder = tempfile.mkdtemp()
        gsm = [json.loads(line)["question"] for line in GSM8K.read_text().splitlines()]
        with gzip.open(HUMANEVAL, "rt") as f:
            he = [json.loads(line)["prompt"] for line in f]
        for name, texts_ in (("test.jsonl", gsm), ("HumanEval.jsonl.gz", he)):
            hashes = set()
            for t in texts_:
                hashes.update(NGramsDecontIndexer.compute_hashes(indexer, t))
            np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(f"{folder}/{name}.index.hashes")
        filt = NGramsDecontFilter(folder, config=config)
        filt.load_index_hashes()
        setup = time.process_time() - started
        busy = 0.0
        for i, (text, kind) in enumerate(documents(n)):
            doc = Document(text=text, id=str(i))
            t0 = time.process_time()
            verdict = filt.filter(doc)
            busy += time.process_time() - t0
            if verdict is not True:
                flagged.append((i, kind, str(doc.metadata.get("contaminated_task"))))
    return {"side": side, "docs": n, "setup_s": setup, "busy_s": busy, "flagged": flagged,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def summarise(result: dict) -> dict:
    n = result["docs"]
    planted = [kind for _, kind in ((i, k) for i, k in _planted_kinds(n))]
    found = {i for i, kind, _ in result["flagged"] if kind}
    verbatim = [i for i, k in _planted_kinds(n) if k.startswith("verbatim")]
    edited = [i for i, k in _planted_kinds(n) if k.startswith("edited")]
    false = [(i, what) for i, kind, what in result["flagged"] if not kind]
    wrong_item = [(i, kind, what) for i, kind, what in result["flagged"]
                  if kind and result["side"] == "ylink" and kind.split(":", 1)[1] != what]
    return {**{k: v for k, v in result.items() if k != "flagged"}, "planted": len(planted),
            "docs_per_s": n / result["busy_s"],
            "recall_verbatim": sum(i in found for i in verbatim) / max(1, len(verbatim)),
            "recall_edited": sum(i in found for i in edited) / max(1, len(edited)),
            "false_positives": len(false), "false_positive_examples": false[:20], "wrong_item": wrong_item[:5]}


def _planted_kinds(n: int) -> Iterator[tuple[int, str]]:
    pool = items()
    for i in range(PLANT_EVERY - 1, n, PLANT_EVERY):
        k = i // PLANT_EVERY
        bench, item, _ = pool[(k // 2) % len(pool)]
        yield i, f"{'verbatim' if k % 2 == 0 else 'edited'}:{bench}:{item}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--peer-docs", type=int, default=None, help="datatrove's documents (default: --docs)")
    parser.add_argument("--side", choices=["ylink", "datatrove"])
    args = parser.parse_args()
    if args.side:  # a child: one side, result as JSON on stdout
        print(json.dumps(run_side(args.side, args.docs)))
        return
    results = {}
    for side, n in (("ylink", args.docs), ("datatrove", args.peer_docs or args.docs)):
        proc = subprocess.run([sys.executable, __file__, "--side", side, "--docs", str(n)], capture_output=True,
                              text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        results[side] = summarise(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps({k: v for k, v in results[side].items() if k != "false_positive_examples"}), flush=True)
        print("  false positives (first 20):", results[side]["false_positive_examples"], flush=True)
    y, d = results["ylink"], results["datatrove"]
    print(f"throughput ratio ylink/datatrove: {y['docs_per_s'] / d['docs_per_s']:.1f}x; "
          f"peak RSS {y['peak_rss_mb']:.0f} MB vs {d['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
