"""Training a quality classifier: fastText supervised, good (`__label__hq`) against bad
(`__label__lq`) examples, with a held-out evaluation and a reproducible result.

Steps, each a pure function of the inputs and the seed:
1. Read the examples with `io.texts` (run folders; paths, globs, URLs; JSONL, Parquet, text, HTML,
   WARC/WET; HTML pages are reduced to their main text by the default extractor, as the `extract` op
   does it: in a child process killed at its time limit, so a hostile page is skipped, with a count
   in the progress messages, instead of holding training for minutes). With `chunk_chars` each
   document is cut into pieces of about that many characters at line breaks.
2. Split per class into training and held-out documents (seeded shuffle of the documents: every
   piece of a document lands on the same side, so the held-out score is not inflated by near copies).
3. Balance the training set (`oversample`: the smaller class is repeated up to the larger's size;
   `downsample`: the larger is cut; `none`), shuffle it, and train with one thread and a fixed seed.
4. Quantize (optional), save, and score the held-out split with the saved model.

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
from typing import Any, Callable, Literal
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..errors import InputError
from ..io.fs import atomic_write, filesystem, write_json
from ..io.texts import Skipped, iter_texts
from .model import NEGATIVE, POSITIVE, QualityModel
from .preprocess import model_line

Progress = Callable[[str], None]
MIN_MATRIX_BYTES = 64 << 20  # twice glibc's largest mmap threshold (see the module docstring)


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    group: str  # the document a piece came from: pieces of one document stay on one side of the split


def read_examples(paths: list[str], *, storage_options: dict[str, Any] | None = None,
                  chunk_chars: int | None = None, min_chars: int = 1, what: str = "input",
                  progress: Progress | None = None) -> list[Example]:
    """Every document of `paths` (cut into pieces when `chunk_chars` is set), in file order, read by
    `io.texts.iter_texts` (run folders too). An HTML page whose extraction fails or takes longer than
    the extract op's default time limit is left out, as are records the readers cannot read;
    `progress` hears how many were, why, and the first of each; an input without documents is an
    InputError that says so."""
    out: list[Example] = []
    skipped = Skipped()
    for group, text in iter_texts(paths, storage_options=storage_options, what=what, skipped=skipped):
        for piece in (chunk(text, chunk_chars) if chunk_chars else [text]):
            if len(piece.strip()) >= min_chars:
                out.append(Example(piece, group))
    if not out:
        why = f" ({skipped.describe(what)})" if skipped.counts else ""
        raise InputError(f"{what}: no documents in {', '.join(map(public_url, paths))}{why}")
    if skipped.counts and progress:
        progress(skipped.describe(what))
    return out


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


def balance(pos: list[str], neg: list[str], how: str, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    if how == "none" or len(pos) == len(neg) or not pos or not neg:
        return pos, neg
    small, large = (pos, neg) if len(pos) < len(neg) else (neg, pos)
    if how == "downsample":
        large = [large[i] for i in sorted(rng.choice(len(large), len(small), replace=False))]
    else:  # oversample: whole copies, then a random part of one more
        reps, rest = divmod(len(large), len(small))
        small = small * reps + [small[i] for i in sorted(rng.choice(len(small), rest, replace=False))]
    return (small, large) if len(pos) < len(neg) else (large, small)


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random
    negative (ties count half), from the rank sum (Mann-Whitney U) with average ranks for ties."""
    labels = np.asarray(labels, bool)
    scores = np.asarray(scores, np.float64)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores))
    # average rank of each run of equal scores
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], len(scores)]
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


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


def train_classifier(positive: list[str], negative: list[str], output: str, *, lang: str = "auto",
                     seed: int = 1, epoch: int = 10, lr: float = 0.2, wordNgrams: int = 2, dim: int = 16,
                     bucket: int = 1_000_000, minCount: int = 2, test_fraction: float = 0.1,
                     max_docs_per_class: int | None = None, chunk_chars: int | None = None,
                     balance_classes: Literal["oversample", "downsample", "none"] = "oversample",
                     quantize: bool = True, cutoff: int = 0, dsub: int = 16, prefix_chars: int | None = None,
                     storage_options: dict[str, Any] | None = None,
                     progress: Progress | None = None) -> dict[str, Any]:
    """Train on `positive` (good) against `negative` (bad) example files, write `output` (a fastText
    model; a local path or fsspec URL) and `<output stem>.metrics.json`, and return the metrics.

    `lang`: `en`, `zh` (jieba words, cut by rjieba) or `auto` (guessed per document). `chunk_chars`: cut documents
    into pieces of about that size (None: whole documents; the model reads only a prefix anyway, see
    `preprocess.PREFIX_CHARS`). `quantize`: product-quantize the model (with `qnorm`), each row
    coded in `dim / dsub` bytes plus one for its norm: a model of a few MB instead of
    `bucket * dim * 4` bytes. `cutoff` > 0 also prunes it to the `cutoff` rows of largest norm;
    0 (the default) keeps every row: measured with `bench/bench_quality.py --sweep`, pruning lost
    held-out AUC (Chinese 5-fold pooled 0.915 -> 0.866 at 100,000 rows) and made predicting slower
    (a hash-map look-up per word n-gram), while dim 16 unpruned with `dsub` 16 (one code per row) is
    2.2-2.6 MB and as good as `dsub` 2 (a `dsub` above `dim` is taken as `dim`)."""
    say = progress or (lambda _msg: None)
    if wordNgrams < 2:
        raise ValueError("wordNgrams must be 2 or more (see ylink_data.quality.train's docstring)")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, not {test_fraction}")
    import fasttext

    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    sides = {}
    for label, paths in ((POSITIVE, positive), (NEGATIVE, negative)):
        what = "--positive" if label == POSITIVE else "--negative"
        examples = read_examples(paths, storage_options=storage_options, chunk_chars=chunk_chars, what=what,
                                 progress=say)
        train, test = split_groups(examples, test_fraction, rng, max_docs_per_class)
        if not train or not test:
            raise InputError(f"{what}: too few documents ({len({e.group for e in examples})}) to hold out "
                             f"{test_fraction:.0%} for evaluation")
        sides[label] = (train, test, len({e.group for e in examples}))
        say(f"read {what[2:]}: {sides[label][2]:,} documents, {len(train):,} training and "
            f"{len(test):,} held-out pieces")
    read_s = time.perf_counter() - started

    def lines(exs: list[Example]) -> list[str]:
        return [model_line(e.text, lang, prefix_chars) for e in exs]

    pos_train, neg_train = lines(sides[POSITIVE][0]), lines(sides[NEGATIVE][0])
    params = {"lang": lang, "seed": seed, "epoch": epoch, "lr": lr, "wordNgrams": wordNgrams, "dim": dim,
              "bucket": bucket, "minCount": minCount, "loss": "softmax", "thread": 1,
              "test_fraction": test_fraction, "max_docs_per_class": max_docs_per_class,
              "chunk_chars": chunk_chars, "balance": balance_classes, "quantize": quantize,
              "cutoff": cutoff if quantize else None, "dsub": min(dsub, dim) if quantize else None,
              "prefix_chars": prefix_chars}

    with tempfile.TemporaryDirectory(prefix="ylink-quality-") as tmp:
        t0 = time.perf_counter()
        model, pos_bal, neg_bal = fit(pos_train, neg_train, rng, tmp, seed=seed, epoch=epoch, lr=lr,
                                      wordNgrams=wordNgrams, dim=dim, bucket=bucket, minCount=minCount,
                                      balance_classes=balance_classes, quantize=quantize, cutoff=cutoff, dsub=dsub,
                                      progress=say)
        train_s = time.perf_counter() - t0
        params["bucket"] = model.bucket  # as trained: raised by `trained_bucket` where it was too small
        model_file = os.path.join(tmp, "model.bin")
        model.save_model(model_file)
        data = open(model_file, "rb").read()
        # score the held-out split with the model as saved (quantized), loaded back
        qm = QualityModel(fasttext.load_model(model_file), output)
        test_pos, test_neg = lines(sides[POSITIVE][1]), lines(sides[NEGATIVE][1])
        scores = qm.scores_of_lines(test_pos + test_neg)
        truth = np.r_[np.ones(len(test_pos), bool), np.zeros(len(test_neg), bool)]
        heldout = binary_metrics(truth, scores)
        heldout["mean_score_positive"] = round(float(scores[:len(test_pos)].mean()), 6)
        heldout["mean_score_negative"] = round(float(scores[len(test_pos):].mean()), 6)
        say(f"held out: ROC AUC {heldout['roc_auc']:.4f}, precision {heldout['precision']:.3f}, "
            f"recall {heldout['recall']:.3f}, F1 {heldout['f1']:.3f}")
        _write(output, data, storage_options)

    result = {
        "model": public_url(output).rsplit("/", 1)[-1],  # the metrics file sits next to it
        "model_bytes": len(data),
        "model_sha256": hashlib.sha256(data).hexdigest(),
        "labels": {"positive": POSITIVE, "negative": NEGATIVE},
        "heldout": heldout,
        "counts": {
            "positive_documents": sides[POSITIVE][2], "negative_documents": sides[NEGATIVE][2],
            "train_positive": len(pos_train), "train_negative": len(neg_train),
            "train_positive_balanced": pos_bal, "train_negative_balanced": neg_bal,
            "test_positive": len(test_pos), "test_negative": len(test_neg)},
        "params": params,
        "inputs": {"positive": [public_url(p) for p in positive], "negative": [public_url(p) for p in negative]},
        "fasttext": fasttext_version(),
        "timing": {"read_seconds": round(read_s, 3), "train_seconds": round(train_s, 3),
                   "total_seconds": round(time.perf_counter() - started, 3)},
    }
    fs, path = filesystem(metrics_path(output), storage_options)
    write_json(fs, path, result)
    return result


def trained_bucket(bucket: int, dim: int) -> int:
    """`bucket` raised until the one-thread input matrix reaches `MIN_MATRIX_BYTES` (module docstring)."""
    return max(bucket, -(-MIN_MATRIX_BYTES // (4 * dim)))


def fit(pos_lines: list[str], neg_lines: list[str], rng: np.random.Generator, workdir: str, *, seed: int,
        epoch: int, lr: float, wordNgrams: int, dim: int, bucket: int, minCount: int, balance_classes: str,
        quantize: bool, cutoff: int, dsub: int, progress: Progress | None = None) -> tuple[Any, int, int]:
    """A fastText classifier of preprocessed lines (`preprocess.model_lines`), trained as
    `train_classifier` trains it (steps 3-4 of the module docstring), with its training file in
    `workdir`; returns the model and the good and bad rows it was trained on after balancing."""
    import fasttext

    pos_bal, neg_bal = balance(pos_lines, neg_lines, balance_classes, rng)
    rows = [f"{POSITIVE} {x}" for x in pos_bal] + [f"{NEGATIVE} {x}" for x in neg_bal]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    train_file = os.path.join(workdir, "train.txt")
    with open(train_file, "w", encoding="utf-8") as f:
        f.writelines(r + "\n" for r in rows)
    if progress:
        progress(f"training on {len(rows):,} lines ({len(pos_bal):,} good, {len(neg_bal):,} bad), {epoch} epochs")
    try:
        model = fasttext.train_supervised(input=train_file, lr=lr, epoch=epoch, wordNgrams=wordNgrams, dim=dim,
                                          bucket=trained_bucket(bucket, dim), minCount=minCount, loss="softmax",
                                          thread=1, seed=seed, verbose=0)
    except RuntimeError as exc:
        raise RuntimeError(f"fastText training failed ({exc}); try another --seed or a lower --lr") from None
    if quantize:
        model.quantize(qnorm=True, cutoff=cutoff, retrain=False, thread=1, verbose=0, dsub=min(dsub, dim))
    return model, len(pos_bal), len(neg_bal)


def _write(output: str, data: bytes, storage_options: dict[str, Any] | None) -> None:
    fs, path = filesystem(output, storage_options)
    with atomic_write(fs, path) as f:
        f.write(data)

