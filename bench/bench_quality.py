"""Quality classifier speed: scoring documents/s on one core, and training time on 100k documents.

    .venv/bin/python bench/bench_quality.py [--repeats 5] [--docs 5000] [--train-docs 100000]

Scoring: `QualityModel.scores(texts, lang)` (preprocessing + one batched fastText call) on real
~1 KB English (Reuters/Gutenberg windows) and Chinese (THUCNews windows) documents, against the
floor: a plain loop of `model.predict(line)` over the same lines already preprocessed (so the floor
has no preprocessing cost at all). Also preprocessing alone. Interleaved repeats, median reported.

Training: `train_classifier` on `--train-docs` English documents (~1 KB windows of Reuters and
Gutenberg as good, windows of the default model's boilerplate text as bad: real text cut into
windows, since the real sets are smaller than 100k), one thread, default parameters.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ylink_data.quality import QualityModel, model_lines, train_classifier  # noqa: E402

SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))


def windows(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text) - size + 1, size)]


def english_docs(n: int) -> list[str]:
    docs = []
    with gzip.open(SHARED / "en_reuters21578_nltk/reuters21578_apte.jsonl.gz", "rt") as f:
        for line in f:
            t = json.loads(line)["text"]
            if len(t) >= 1000:
                docs.append(t[:1000])
    for p in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt")):
        docs += windows(p.read_text(encoding="utf-8", errors="replace"), 1000)
    return docs[:n] if n else docs


def chinese_docs(n: int) -> list[str]:
    with open(SHARED / "zh_thucnews_cnews/cnews.val.txt", encoding="utf-8") as f:
        text = "".join(line.partition("\t")[2] for line in f)
    # 1 KB of UTF-8 is about 340 Chinese characters
    return windows(text, 340)[:n]


def bench_scoring(repeats: int, n: int) -> None:
    sets = {"en": (QualityModel.load(str(REPO / "ylink_data/assets/models/quality-en.bin")), english_docs(n)),
            "zh": (QualityModel.load(str(REPO / "ylink_data/assets/models/quality-zh.bin")), chinese_docs(n))}
    for lang, (model, docs) in sets.items():
        lines = model_lines(docs, lang)
        mb = sum(len(d.encode()) for d in docs) / 1e6
        times: dict[str, list[float]] = {"scores": [], "preprocess only": [], "predict(line) loop": [],
                                         "predict(list) only": []}
        for _ in range(repeats):
            t = time.perf_counter()
            model.scores(docs, lang)
            times["scores"].append(time.perf_counter() - t)
            t = time.perf_counter()
            model_lines(docs, lang)
            times["preprocess only"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for line in lines:
                model.model.predict(line, k=1)
            times["predict(line) loop"].append(time.perf_counter() - t)
            t = time.perf_counter()
            model.scores_of_lines(lines)
            times["predict(list) only"].append(time.perf_counter() - t)
        floor = statistics.median(times["predict(line) loop"])
        print(f"\n{lang}: {len(docs):,} docs, {mb / len(docs) * 1e3:.2f} KB each on average")
        print(f"| {'what':<22} | docs/s | MB/s | time vs predict(line) loop |")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"| {name:<22} | {len(docs) / m:,.0f} | {mb / m:.2f} | {m / floor:.2f}x |")


def bench_training(n: int) -> None:
    docs = english_docs(0)
    bad_src = []
    from models.train_defaults import build_en  # the default model's real boilerplate

    with tempfile.TemporaryDirectory() as tmp:
        src = build_en(SHARED, Path(tmp))
        for p in src["neg_traf"] + src["neg_dolma"]:
            with open(p, encoding="utf-8") as f:
                for line in f:
                    bad_src.append(json.loads(line)["text"])
        bad_text = "\n".join(bad_src)
        # real text windows; the bad side is smaller, so its windows start at shifted offsets
        good = (docs * (n // 2 // len(docs) + 1))[:n // 2]
        bad: list[str] = []
        shift = 0
        while len(bad) < n // 2:
            bad += windows(bad_text[shift:], 1000)
            shift += 97
        bad = bad[:n // 2]
        for name, rows in (("good", good), ("bad", bad)):
            with open(f"{tmp}/{name}.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"text": t}) + "\n" for t in rows)
        t = time.perf_counter()
        m = train_classifier([f"{tmp}/good.jsonl"], [f"{tmp}/bad.jsonl"], f"{tmp}/m.bin", lang="en", seed=1)
        total = time.perf_counter() - t
    print(f"\ntraining on {n:,} documents ({len(good):,} good, {len(bad):,} bad, ~1 KB each): "
          f"{total:.1f} s in all, of which fastText train+quantize {m['timing']['train_seconds']:.1f} s; "
          f"model {m['model_bytes']:,} bytes; held-out ROC AUC {m['heldout']['roc_auc']:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--train-docs", type=int, default=100_000)
    ap.add_argument("--skip-training", action="store_true")
    args = ap.parse_args()
    bench_scoring(args.repeats, args.docs)
    if not args.skip_training:
        bench_training(args.train_docs)


if __name__ == "__main__":
    main()
