"""Quality classifier speed: scoring documents/s on one core, and training time on 100k documents.

    .venv/bin/python bench/bench_quality.py [--repeats 5] [--docs 5000] [--train-docs 100000]
    .venv/bin/python bench/bench_quality.py --sweep [--langs en zh]    # the measurement behind the defaults

Scoring: `QualityModel.scores(texts, lang)` (preprocessing + one batched fastText call) on real
~1 KB English (Reuters/Gutenberg windows) and Chinese (THUCNews windows) documents, against the
floor: a plain loop of `model.predict(line)` over the same lines already preprocessed (so the floor
has no preprocessing cost at all). Also preprocessing alone and the batched predict alone.
Interleaved repeats, median CPU time of the process (the machine is shared: CPU time is what one
core spends; wall time is printed too).

Training: `train_classifier` on `--train-docs` English documents (~1 KB windows of Reuters and
Gutenberg as good, windows of the default model's boilerplate text as bad: real text cut into
windows, since the real sets are smaller than 100k), one thread, default parameters.

Sweep (`--sweep`): for each variant (preprocessing, prefix length, dimension, quantization) the
default models' data (ylink_data/assets/models/train_defaults.py) is trained the way
`train_classifier` trains (one thread, the defaults' seed and parameters, documents cut into
1,500-character pieces) and scored: ROC AUC on held-out documents (English: 10% of the documents,
one split; Chinese: 5-fold cross-validation over documents, all folds' held-out pieces pooled,
since one split holds only ~20 bad pieces), the cross-source checks (English: main text vs
boilerplate of the held-out web pages; Chinese: ChineseWebText's 10 clean vs 10 dirty examples),
model bytes, and docs/s per core of preprocessing and of fastText's batched predict on the
benchmark documents. Chinese variants: jieba words (HMM off), rjieba words, characters.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ylink_data.text.quality import QualityModel, model_lines

from ylink_data.train.quality import train_classifier  # noqa: E402

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


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def bench_scoring(repeats: int, n: int) -> None:
    sets = {"en": (QualityModel.load(str(REPO / "ylink_data/assets/models/quality-en.bin")), english_docs(n)),
            "zh": (QualityModel.load(str(REPO / "ylink_data/assets/models/quality-zh.bin")), chinese_docs(n))}
    for lang, (model, docs) in sets.items():
        lines = model_lines(docs, lang)
        mb = sum(len(d.encode()) for d in docs) / 1e6

        def loop() -> None:
            for line in lines:
                model.model.predict(line, k=1)

        # a model that reads the documents' shape (issue 24) is fed five tokens more, measured on the
        # whole document: the same model fed them costs what such a model costs
        steps = {"scores": lambda: model.scores(docs, lang),
                 "scores, with shape": lambda: model.scores_of_lines(model_lines(docs, lang, None, True)),
                 "preprocess only": lambda: model_lines(docs, lang),
                 "predict(line) loop": loop, "predict(list) only": lambda: model.scores_of_lines(lines)}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
        for _ in range(repeats):
            for name, fn in steps.items():
                times[name].append(timed(fn))
        floor = statistics.median(c for c, _ in times["predict(line) loop"])
        tokens = statistics.mean(len(x.split()) for x in lines)
        print(f"\n{lang}: {len(docs):,} docs, {mb / len(docs) * 1e3:.2f} KB each on average, "
              f"{tokens:.0f} tokens read per doc")
        print(f"| {'what':<22} | docs/s per core (CPU) | MB/s | docs/s (wall) | CPU time vs predict(line) loop |")
        for name, ts in times.items():
            cpu = statistics.median(c for c, _ in ts)
            wall = statistics.median(w for _, w in ts)
            print(f"| {name:<22} | {len(docs) / cpu:,.0f} | {mb / cpu:.2f} | {len(docs) / wall:,.0f} | {cpu / floor:.2f}x |")


def bench_training(n: int) -> None:
    docs = english_docs(0)
    bad_src = []
    sys.path.insert(0, str(REPO / "ylink_data/assets"))
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


# ----------------------------------------------------------------------------- the sweep

def _preprocessors() -> dict[str, Callable[[str, int], str]]:
    from ylink_data.text.quality.preprocess import _chinese, _english
    from ylink_data.text.transform.units import loaded_jieba

    # characters: a run of ASCII letters, a run of ASCII digits or any other non-space character
    chars = re.compile(r"[^\W\d_]+|\d+|\S", re.ASCII)
    return {"en": _english, "rjieba": _chinese,  # what the models use
            "jieba": lambda t, n: " ".join(" ".join(loaded_jieba().lcut(t[:n].lower(), HMM=False)).split()),
            "chars": lambda t, n: " ".join(chars.findall(t[:n].lower()))}


def _cpu_median(fn: Callable[[], object], repeats: int) -> float:
    return statistics.median(timed(fn)[0] for _ in range(repeats))


def _score(model, lines: list[str]) -> np.ndarray:
    return QualityModel(model).scores_of_lines(lines)


def _auc(model, good: list[str], bad: list[str]) -> float:
    from ylink_data.text.quality.train import roc_auc

    return roc_auc(np.r_[np.ones(len(good), bool), np.zeros(len(bad), bool)], _score(model, good + bad))


def sweep(lang: str, pres: list[str], prefixes: list[int], dims: list[int], quants: list[tuple], folds: int,
          repeats: int) -> None:
    """Print one table row per variant (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="ylink-quality-sweep-") as tmp:
        _sweep(lang, pres, prefixes, dims, quants, folds, repeats, tmp)


def _sweep(lang: str, pres: list[str], prefixes: list[int], dims: list[int], quants: list[tuple], folds: int,
           repeats: int, tmp: str) -> None:
    import fasttext

    sys.path.insert(0, str(REPO / "ylink_data/assets"))
    from models.train_defaults import PARAMS, build_en, build_zh, texts
    from ylink_data.text.quality.train import MIN_MATRIX_BYTES, balance, roc_auc
    from ylink_data.train.quality import read_examples

    seed = PARAMS["seed"]
    pre_fns = _preprocessors()
    if lang == "en":
        src = build_en(SHARED, Path(tmp))
        pos, neg = src["pos_reuters"] + src["pos_gutenberg"], src["neg_traf"] + src["neg_dolma"]
        check = (texts(src["check_main"], 1500), texts(src["check_bp"], 1500))
        bench_docs = english_docs(3000)
    else:
        src = build_zh(SHARED, Path(tmp))
        pos, neg = src["pos_thucnews"], src["neg_cleared"] + src["neg_cc2020"] + src["neg_traf"]
        check = (texts(src["check_clean"]), texts(src["check_dirty"]))
        bench_docs = chinese_docs(3000)
    docs = {}
    for side, paths in (("pos", pos), ("neg", neg)):
        by_doc: dict[str, list[str]] = {}
        for e in read_examples(paths, chunk_chars=PARAMS["chunk_chars"]):
            by_doc.setdefault(e.group, []).append(e.text)
        docs[side] = by_doc
    rng = np.random.default_rng(seed)
    n_parts = 10 if folds == 1 else folds  # one split: the first tenth of the documents held out
    parts = {}
    for side, by_doc in docs.items():
        keys = sorted(by_doc)
        order = rng.permutation(len(keys))
        parts[side] = [{keys[i] for i in order[k::n_parts]} for k in range(n_parts)]
    print(f"\n{lang}: {'5-fold cross-validation' if folds > 1 else 'one 10% split'}; check: "
          f"{'web main text vs boilerplate' if lang == 'en' else 'ChineseWebText clean vs dirty'}; "
          f"speed on {len(bench_docs):,} ~1 KB docs, median CPU of {repeats}")
    print("| preprocessing | prefix | dim | quantization | tokens/doc | held-out AUC | check AUC | bytes "
          "| preprocess docs/s | predict docs/s | together docs/s |")
    for pre, n, dim in itertools.product(pres, prefixes, dims):
        f = pre_fns[pre]
        held_scores: dict[tuple, list] = {q: [] for q in quants}
        extra = {}
        for k in range(folds):
            lines = {(side, held): [f(t, n) for g in sorted(docs[side]) if (g in parts[side][k]) == held
                                    for t in docs[side][g]] for side in docs for held in (False, True)}
            fold_rng = np.random.default_rng(seed + k)
            even = balance({"__label__hq": lines["pos", False], "__label__lq": lines["neg", False]}, "oversample",
                           fold_rng)
            rows = [f"{label} {x}" for label, xs in even.items() for x in xs]
            rows = [rows[i] for i in fold_rng.permutation(len(rows))]
            with open(f"{tmp}/train.txt", "w", encoding="utf-8") as fo:
                fo.writelines(r + "\n" for r in rows)
            bucket = max(PARAMS["bucket"], -(-MIN_MATRIX_BYTES // (4 * dim)))
            full = fasttext.train_supervised(input=f"{tmp}/train.txt", lr=PARAMS["lr"], epoch=PARAMS["epoch"],
                                             wordNgrams=2, dim=dim, bucket=bucket, minCount=PARAMS["minCount"],
                                             loss="softmax", thread=1, seed=seed, verbose=0)
            full.save_model(f"{tmp}/full.bin")
            for q in quants:
                model = fasttext.load_model(f"{tmp}/full.bin")
                size = os.path.getsize(f"{tmp}/full.bin")
                if q != ("none",):
                    dsub, cutoff = q
                    model.quantize(qnorm=True, cutoff=cutoff, retrain=False, thread=1, verbose=0, dsub=dsub)
                    model.save_model(f"{tmp}/q.bin")
                    size = os.path.getsize(f"{tmp}/q.bin")
                held = lines["pos", True] + lines["neg", True]
                truth = np.r_[np.ones(len(lines["pos", True]), bool), np.zeros(len(lines["neg", True]), bool)]
                held_scores[q].append((truth, _score(model, held)))
                if k == 0:
                    bl = [f(t, n) for t in bench_docs]
                    t_pre = _cpu_median(lambda: [f(t, n) for t in bench_docs], repeats)
                    t_pred = _cpu_median(lambda: _score(model, bl), repeats)
                    extra[q] = (round(_auc(model, [f(t, n) for t in check[0]], [f(t, n) for t in check[1]]), 3),
                                size, statistics.mean(len(x.split()) for x in bl), t_pre, t_pred)
        nb_docs = len(bench_docs)
        for q in quants:
            truth = np.concatenate([t for t, _ in held_scores[q]])
            scores = np.concatenate([s for _, s in held_scores[q]])
            chk, size, tokens, t_pre, t_pred = extra[q]
            qname = "none (float32)" if q == ("none",) else f"dsub {q[0]}, cutoff {q[1]:,}"
            print(f"| {pre} | {n} | {dim} | {qname} | {tokens:.0f} | {roc_auc(truth, scores):.4f} | {chk:.3f} "
                  f"| {size:,} | {nb_docs / t_pre:,.0f} | {nb_docs / t_pred:,.0f} | {nb_docs / (t_pre + t_pred):,.0f} |",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--train-docs", type=int, default=100_000)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="AUC, size and speed by variant instead")
    ap.add_argument("--langs", nargs="+", default=["en", "zh"])
    args = ap.parse_args()
    if args.sweep:
        # float32 (not shippable: 67-133 MB, the ceiling), the old default (pruned to 100,000 rows,
        # two dimensions per code) and the new one (every row, one code per row of 16 dimensions)
        quants = [("none",), (2, 100_000), (16, 0)]
        if "en" in args.langs:
            sweep("en", ["en"], [1000, 500, 300], [16, 32], quants, 1, 3)
        if "zh" in args.langs:
            sweep("zh", ["jieba", "rjieba", "chars"], [300, 150, 100], [16], quants, 5, 3)
        return
    bench_scoring(args.repeats, args.docs)
    if not args.skip_training:
        bench_training(args.train_docs)


if __name__ == "__main__":
    main()
