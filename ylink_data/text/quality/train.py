"""Training a quality classifier: fastText supervised, good (`__label__hq`) against bad
(`__label__lq`) examples, with a held-out evaluation and a reproducible result.

Steps, each a pure function of the inputs and the seed:
1. Read the examples (`ylink_data.train.quality`, with `io.texts`) (run folders; paths, globs, URLs; JSONL, Parquet, text, HTML,
   WARC/WET; HTML pages are reduced to their main text by the default extractor, as the `extract` op
   does it: in a child process killed at its time limit, so a hostile page is skipped, with a count
   in the progress messages, instead of holding training for minutes). With `chunk_chars` each
   document is cut into pieces of about that many characters at line breaks.
2. Split per class into training and held-out documents (seeded shuffle of the documents: every
   piece of a document lands on the same side, so the held-out score is not inflated by near copies).
3. Choose the training parameters on the training split (`autotune_seconds` > 0, the default: a
   grouped cross-validated search within a time budget, text/quality/autotune.py), or keep the fixed
   defaults (`autotune_seconds=0`, the models trained before the search existed, byte for byte).
4. Balance the training set (`oversample`: the smaller classes are repeated up to the largest's
   size; `downsample`: the larger are cut; `none`), shuffle it, and train with one thread and a fixed seed.
5. Quantize (optional), save, and score the held-out split with the saved model.

`ylink_data.train.quality.train_from_run` does the same with the annotations of a run (a `judge` op's `judge_score`, or any
numeric column): good against bad at a threshold, or one class per score (a graded model, whose
score is the expected annotation), and also reports agreement with the held-out annotations
(Spearman's rank correlation, and F1 at the threshold).

Reproducibility: fastText's training is deterministic with `thread=1` (two runs give byte-identical
models, checked in tests/test_quality_train.py); with more threads it is not. With one thread,
fastText 0.9.x initialises only the first tenth of its input matrix at random (the rest is left as
allocated): when that matrix is small it comes from reused heap memory, and training ends in
"Encountered NaN" for some seeds (seen here with `wordNgrams=1`, and with 200k buckets of 16
dimensions) or differs from run to run. A matrix of 32 MiB or more is always fresh zeroed memory
(glibc serves it with mmap), so word n-grams are required (`wordNgrams >= 2`) and `bucket` is raised
until `bucket * dim * 4` bytes reach `MIN_MATRIX_BYTES`. Quantization keeps the saved model small.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ylink_data.core.storage import atomic_write, filesystem, write_json
from ylink_data.text.quality import autotune
from ylink_data.text.quality.autotune import Row
from ylink_data.text.quality.model import LABEL, NEGATIVE, POSITIVE, QualityModel
from ylink_data.text.quality.preprocess import model_line, structure_tokens

Progress = Callable[[str], None]
MIN_MATRIX_BYTES = 64 << 20  # twice glibc's largest mmap threshold (see the module docstring)
# The search's default budget (`--autotune-seconds`): on the labelled sets of bench_quality_cv.py
# (a few thousand pieces) it tries every candidate in well under a minute; 100k documents of 1 KB
# pay for about six.
AUTOTUNE_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    group: str  # the document a piece came from: pieces of one document stay on one side of the split
    value: float | None = None  # the annotation it carries (train_from_run)


def chunk(text: str, size: int) -> list[str]:
    """`text` cut at line breaks into pieces of about `size` characters (a line longer than `size`
    is cut at the last space before it)."""
    pieces: list[str] = []
    current: list[str] = []
    length = 0
    for line in text.splitlines():
        while len(line) > size:
            cut = line.rfind(" ", size // 2, size)
            cut = size if cut < 0 else cut
            if current:
                pieces.append("\n".join(current))
                current, length = [], 0
            pieces.append(line[:cut])
            line = line[cut:].lstrip()
        current.append(line)
        length += len(line) + 1
        if length >= size:
            pieces.append("\n".join(current))
            current, length = [], 0
    if current:
        pieces.append("\n".join(current))
    return [p for p in pieces if p.strip()]


def split_groups(examples: list[Example], test_fraction: float, rng: np.random.Generator,
                 max_docs: int | None = None) -> tuple[list[Example], list[Example]]:
    """(train, test): documents shuffled with `rng`, the first ones held out until `test_fraction`
    of the pieces is reached; at most `max_docs` documents kept."""
    by_group: dict[str, list[Example]] = {}
    for ex in examples:
        by_group.setdefault(ex.group, []).append(ex)
    groups = sorted(by_group)
    order = rng.permutation(len(groups))
    if max_docs is not None:
        order = order[:max_docs]
    total = sum(len(by_group[groups[i]]) for i in order)
    train: list[Example] = []
    test: list[Example] = []
    for i in order:
        side = test if len(test) < test_fraction * total else train
        side.extend(by_group[groups[i]])
    return train, test


def balance(classes: dict[str, list[str]], how: str, rng: np.random.Generator) -> dict[str, list[str]]:
    """`classes` evened out: `oversample` repeats each smaller class (whole copies, then a seeded
    part of one more) up to the largest's size, `downsample` cuts each larger one to the smallest's
    (a seeded choice), `none` leaves them; one draw per class that changes, in label order."""
    sizes = [len(rows) for rows in classes.values() if rows]
    if how == "none" or len(set(sizes)) <= 1:
        return classes
    target = max(sizes) if how == "oversample" else min(sizes)
    out = {}
    for label, rows in classes.items():
        if not rows or len(rows) == target:
            out[label] = rows
        elif how == "downsample":
            out[label] = [rows[i] for i in sorted(rng.choice(len(rows), target, replace=False))]
        else:
            reps, rest = divmod(target, len(rows))
            out[label] = rows * reps + [rows[i] for i in sorted(rng.choice(len(rows), rest, replace=False))]
    return out


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    starts = np.r_[0, np.flatnonzero(np.diff(values[order])) + 1]
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random
    negative (ties count half), from the rank sum (Mann-Whitney U) with average ranks for ties."""
    labels = np.asarray(labels, bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = _ranks(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's on average ranks); nan when either side is constant."""
    ra, rb = _ranks(a), _ranks(b)
    if len(ra) < 2 or ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def binary_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    labels = np.asarray(labels, bool)
    predicted = np.asarray(scores) >= threshold
    tp = int((predicted & labels).sum())
    fp = int((predicted & ~labels).sum())
    fn = int((~predicted & labels).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 6), "recall": round(recall, 6), "f1": round(f1, 6),
            "accuracy": round(float((predicted == labels).mean()) if len(labels) else 0.0, 6),
            "roc_auc": round(roc_auc(labels, scores), 6), "threshold": threshold}


def public_url(url: str) -> str:
    """`url` without user name, password or query string (where tokens live)."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def metrics_path(output: str) -> str:
    """`MODEL.bin` -> `MODEL.metrics.json` (the extension, if any, replaced)."""
    head, _, name = output.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return f"{head}/{stem}.metrics.json" if head else f"{stem}.metrics.json"


def fasttext_version() -> str:
    for dist in ("fasttext-numpy2", "fasttext", "fasttext-wheel"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def check_params(wordNgrams: int, test_fraction: float) -> None:
    if wordNgrams < 2:
        raise ValueError("wordNgrams must be 2 or more (see ylink_data.text.quality.train's docstring)")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, not {test_fraction}")


def train_split(split: dict[str, tuple[list[Example], list[Example]]], output: str, rng: np.random.Generator, *,
           graded: bool, threshold: float | None, lang: str, prefix_chars: int | None, seed: int,
           autotune_seconds: float, defaults: dict[str, Any], fixed: dict[str, Any], record: dict[str, Any],
           inputs: dict[str, Any], counts: dict[str, Any], started: float,
           storage_options: dict[str, Any] | None, say: Progress) -> dict[str, Any]:
    """Steps 3-5 of the module docstring, for `split` = {label: (training, held-out examples)}: the
    trainers above after reading, and what bench/bench_quality_cv.py trains with."""
    import fasttext

    read_s = time.perf_counter() - started

    def rows(exs: list[Example], label: str) -> list[Row]:
        return [Row(label, model_line(e.text, lang, prefix_chars), structure_tokens(e.text), e.group, e.value)
                for e in exs]

    train_rows = {label: rows(train, label) for label, (train, _) in split.items()}
    test_rows = [r for label, (_, test) in split.items() for r in rows(test, label)]
    chosen, report = dict(defaults), {"chosen": "defaults", "why": "autotune_seconds is 0"}
    with tempfile.TemporaryDirectory(prefix="ylink-quality-") as tmp:
        t0 = time.perf_counter()
        if autotune_seconds > 0:
            train_fixed = {k: fixed[k] for k in ("dim", "bucket", "balance_classes")}

            def train_candidate(by_label, trial_rng, workdir, **params):
                os.makedirs(workdir, exist_ok=True)
                return fit(by_label, trial_rng, workdir, seed=seed, **train_fixed, **params, quantize=False,
                           cutoff=0, dsub=fixed["dsub"])[0]

            chosen, report = autotune.search([r for rs in train_rows.values() for r in rs], defaults,
                                             autotune_seconds, seed, tmp, train_candidate,
                                             lambda held, model, structure: _fit_metric(held, model, structure, graded),
                                             progress=say, graded=graded)
        tune_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        lines = {label: [r.text(chosen["structure"]) for r in rs] for label, rs in train_rows.items()}
        model, balanced = fit(lines, rng, tmp, seed=seed, **{k: v for k, v in chosen.items() if k != "structure"},
                              **fixed, progress=say)
        train_s = time.perf_counter() - t0
        params = {"lang": lang, "seed": seed, **chosen, "dim": fixed["dim"],
                  "bucket": model.bucket,  # as trained: raised by `trained_bucket` where it was too small
                  "loss": "softmax", "thread": 1, **record, "balance": fixed["balance_classes"],
                  "quantize": fixed["quantize"], "cutoff": fixed["cutoff"] if fixed["quantize"] else None,
                  "dsub": min(fixed["dsub"], fixed["dim"]) if fixed["quantize"] else None,
                  "prefix_chars": prefix_chars, "autotune_seconds": autotune_seconds}
        model_file = os.path.join(tmp, "model.bin")
        model.save_model(model_file)
        data = open(model_file, "rb").read()
        # score the held-out split with the model as saved (quantized), loaded back
        qm = QualityModel(fasttext.load_model(model_file), output)
        scores = qm.scores_of_lines([r.text(chosen["structure"]) for r in test_rows])
        heldout = _heldout_metrics(test_rows, scores, graded, threshold, qm.scale)
        say("held out: " + ", ".join(f"{k.replace('_', ' ')} {heldout[k]:.4f}" for k in
                                     ("roc_auc", "spearman", "f1") if k in heldout))
        _write(output, data, storage_options)

    result = {
        "model": public_url(output).rsplit("/", 1)[-1],  # the metrics file sits next to it
        "model_bytes": len(data),
        "model_sha256": hashlib.sha256(data).hexdigest(),
        "kind": "graded" if graded else "binary",
        "labels": ({"classes": list(split)} if graded else {"positive": POSITIVE, "negative": NEGATIVE}),
        "heldout": heldout,
        "autotune": report,
        "counts": counts | {f"train_{_short(k)}": len(v) for k, v in train_rows.items()}
        | {f"train_{_short(k)}_balanced": n for k, n in balanced.items()}
        | {f"test_{_short(k)}": len(test) for k, (_, test) in split.items()},
        "params": params,
        "inputs": inputs,
        "fasttext": fasttext_version(),
        "timing": {"read_seconds": round(read_s, 3), "autotune_seconds": round(tune_s, 3),
                   "train_seconds": round(train_s, 3), "total_seconds": round(time.perf_counter() - started, 3)},
    }
    fs, path = filesystem(metrics_path(output), storage_options)
    write_json(fs, path, result)
    return result


def _short(label: str) -> str:
    """`__label__hq` -> `positive`, `__label__lq` -> `negative`, `__label__3` -> `3`."""
    return {POSITIVE: "positive", NEGATIVE: "negative"}.get(label, label[len(LABEL):])


def _fit_metric(held: list[Row], model: Any, structure: bool, graded: bool) -> float:
    """The search's score of a candidate on its held-out fold: ROC AUC, or Spearman's rank
    correlation with the annotations for a graded model."""
    scores = QualityModel(model).scores_of_lines([r.text(structure) for r in held])
    if graded:
        value = spearman(scores, np.array([r.value for r in held]))
    else:
        value = roc_auc(np.array([r.label == POSITIVE for r in held]), scores)
    return -1.0 if value != value else value  # nan (one class in the fold): no evidence either way


def _heldout_metrics(rows: list[Row], scores: np.ndarray, graded: bool, threshold: float | None,
                     scale: tuple[float, float]) -> dict[str, Any]:
    """Binary: ROC AUC, precision, recall, F1 at 0.5 and the classes' mean scores. Graded: the same
    at the cut (the threshold, else the middle of the scale rounded up), on the expected score. With
    annotations (train_from_run): Spearman's rank correlation with them."""
    annotated = rows and rows[0].value is not None
    if graded:
        cut = threshold if threshold is not None else float(np.ceil((scale[0] + scale[1]) / 2))
        truth = np.array([r.value >= cut for r in rows])
        out = binary_metrics(truth, scores, cut)
        out["mean_score"] = round(float(scores.mean()), 6)
    else:
        truth = np.array([r.label == POSITIVE for r in rows])
        out = binary_metrics(truth, scores)
        out["mean_score_positive"] = round(float(scores[truth].mean()), 6)
        out["mean_score_negative"] = round(float(scores[~truth].mean()), 6)
    if annotated:
        values = np.array([r.value for r in rows])
        out["spearman"] = round(spearman(scores, values), 6)
        out["annotations"] = len(rows)
        if threshold is not None and not graded:
            out["annotation_threshold"] = threshold
    return out


def trained_bucket(bucket: int, dim: int) -> int:
    """`bucket` raised until the one-thread input matrix reaches `MIN_MATRIX_BYTES` (module docstring)."""
    return max(bucket, -(-MIN_MATRIX_BYTES // (4 * dim)))


def fit(classes: dict[str, list[str]], rng: np.random.Generator, workdir: str, *, seed: int,
        epoch: int, lr: float, wordNgrams: int, dim: int, bucket: int, minCount: int, balance_classes: str,
        quantize: bool, cutoff: int, dsub: int, progress: Progress | None = None) -> tuple[Any, dict[str, int]]:
    """A fastText classifier of preprocessed lines (`preprocess.model_lines`) by label, trained as
    `train_classifier` trains it (steps 4-5 of the module docstring), with its training file in
    `workdir`; returns the model and the rows of each label it was trained on after balancing."""
    import fasttext

    balanced = balance(classes, balance_classes, rng)
    rows = [f"{label} {x}" for label, lines in balanced.items() for x in lines]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    train_file = os.path.join(workdir, "train.txt")
    with open(train_file, "w", encoding="utf-8") as f:
        f.writelines(r + "\n" for r in rows)
    if progress:
        progress(f"training on {len(rows):,} lines ("
                 + ", ".join(f"{len(v):,} {_short(k)}" for k, v in balanced.items()) + f"), {epoch} epochs")
    try:
        model = fasttext.train_supervised(input=train_file, lr=lr, epoch=epoch, wordNgrams=wordNgrams, dim=dim,
                                          bucket=trained_bucket(bucket, dim), minCount=minCount, loss="softmax",
                                          thread=1, seed=seed, verbose=0)
    except RuntimeError as exc:
        raise RuntimeError(f"fastText training failed ({exc}); try another --seed or a lower --lr") from None
    if quantize:
        model.quantize(qnorm=True, cutoff=cutoff, retrain=False, thread=1, verbose=0, dsub=min(dsub, dim))
    return model, {label: len(v) for label, v in balanced.items()}


def _write(output: str, data: bytes, storage_options: dict[str, Any] | None) -> None:
    fs, path = filesystem(output, storage_options)
    with atomic_write(fs, path) as f:
        f.write(data)
