"""`ylink quality train`: a quality classifier trained on example files (`train_classifier`: good
against bad) or on a finished run's annotations (`train_from_run`). This module reads the examples
(files and run folders through `io.texts`, runs through `io.runs`); splitting, fitting, the
parameter search and the metrics are `ylink_data.text.quality.train`'s."""
from __future__ import annotations

import math
import time
from typing import Any, Literal

import numpy as np

from ylink_data.core.errors import InputError
from ylink_data.io.runs import open_run
from ylink_data.io.texts import Skipped, iter_texts
from ylink_data.text.quality.model import LABEL, NEGATIVE, POSITIVE
from ylink_data.text.quality.train import (AUTOTUNE_SECONDS, Example, Progress, check_params, chunk, public_url,
                                           split_groups, train_split)


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


def train_classifier(positive: list[str], negative: list[str], output: str, *, lang: str = "auto",
                     seed: int = 1, epoch: int = 10, lr: float = 0.2, wordNgrams: int = 2, dim: int = 16,
                     bucket: int = 1_000_000, minCount: int = 2, structure: bool = False,
                     autotune_seconds: float = AUTOTUNE_SECONDS, test_fraction: float = 0.1,
                     max_docs_per_class: int | None = None, chunk_chars: int | None = None,
                     balance_classes: Literal["oversample", "downsample", "none"] = "oversample",
                     quantize: bool = True, cutoff: int = 0, dsub: int = 16, prefix_chars: int | None = None,
                     storage_options: dict[str, Any] | None = None,
                     progress: Progress | None = None) -> dict[str, Any]:
    """Train on `positive` (good) against `negative` (bad) example files, write `output` (a fastText
    model; a local path or fsspec URL) and `<output stem>.metrics.json`, and return the metrics.

    `lang`: `en`, `zh` (jieba words, cut by rjieba) or `auto` (guessed per document). `chunk_chars`: cut documents
    into pieces of about that size (None: whole documents; the model reads only a prefix anyway, see
    `preprocess.PREFIX_CHARS`). `autotune_seconds`: the search's budget (module docstring, step 3);
    0 trains with `lr`, `epoch`, `wordNgrams`, `minCount` and `structure` as given, otherwise these
    are the search's first candidate. `structure`: the model also reads the documents' shape
    (`preprocess.structure_tokens`). `quantize`: product-quantize the model (with `qnorm`), each row
    coded in `dim / dsub` bytes plus one for its norm: a model of a few MB instead of
    `bucket * dim * 4` bytes. `cutoff` > 0 also prunes it to the `cutoff` rows of largest norm;
    0 (the default) keeps every row: measured with `bench/bench_quality.py --sweep`, pruning lost
    held-out AUC (Chinese 5-fold pooled 0.915 -> 0.866 at 100,000 rows) and made predicting slower
    (a hash-map look-up per word n-gram), while dim 16 unpruned with `dsub` 16 (one code per row) is
    2.2-2.6 MB and as good as `dsub` 2 (a `dsub` above `dim` is taken as `dim`)."""
    say = progress or (lambda _msg: None)
    check_params(wordNgrams, test_fraction)
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
    inputs = {"positive": [public_url(p) for p in positive], "negative": [public_url(p) for p in negative]}
    counts = {"positive_documents": sides[POSITIVE][2], "negative_documents": sides[NEGATIVE][2]}
    return train_split({label: side[:2] for label, side in sides.items()}, output, rng, graded=False, threshold=None,
                  lang=lang, prefix_chars=prefix_chars, seed=seed, autotune_seconds=autotune_seconds,
                  defaults={"epoch": epoch, "lr": lr, "wordNgrams": wordNgrams, "minCount": minCount,
                            "structure": structure},
                  fixed={"dim": dim, "bucket": bucket, "balance_classes": balance_classes, "quantize": quantize,
                         "cutoff": cutoff, "dsub": dsub},
                  record={"test_fraction": test_fraction, "max_docs_per_class": max_docs_per_class,
                          "chunk_chars": chunk_chars},
                  inputs=inputs, counts=counts, started=started, storage_options=storage_options, say=say)


def train_from_run(run: str, output: str, *, label_column: str = "judge_score", threshold: float | None = None,
                   lang: str = "auto", seed: int = 1, epoch: int = 10, lr: float = 0.2, wordNgrams: int = 2,
                   dim: int = 16, bucket: int = 1_000_000, minCount: int = 2, structure: bool = False,
                   autotune_seconds: float = AUTOTUNE_SECONDS, test_fraction: float = 0.2,
                   balance_classes: Literal["oversample", "downsample", "none"] = "oversample",
                   quantize: bool = True, cutoff: int = 0, dsub: int = 16, prefix_chars: int | None = None,
                   storage_options: dict[str, Any] | None = None,
                   progress: Progress | None = None) -> dict[str, Any]:
    """Train on the annotations of a finished run (`run`: its folder or URL): each kept document's
    `text` and its `label_column` value (rows without one are left out, and counted). With
    `threshold`, a good/bad classifier (good: value >= threshold); without, a graded one with a
    class per score (values rounded to whole numbers, as a judge's rubric gives them), whose score is
    the expected value. Held out: `test_fraction` of the documents of each class, on which the
    metrics also give the agreement with the annotations (Spearman's rank correlation; F1, precision
    and recall at the threshold; for a graded model, at the middle of its scale rounded up (3 on
    0-5, FineWeb-Edu's cut) unless `threshold` says). Other parameters as in `train_classifier`."""
    say = progress or (lambda _msg: None)
    check_params(wordNgrams, test_fraction)
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    examples, missing, not_finite = read_annotations(run, label_column, storage_options)
    if missing:
        say(f"{missing:,} documents of {public_url(run)} have no {label_column} (left out)")
    if not_finite:
        say(f"{not_finite:,} documents of {public_url(run)} have an infinite {label_column} (left out)")
    if threshold is None:
        by_label: dict[str, list[Example]] = {}
        for e in examples:
            by_label.setdefault(f"{LABEL}{round(e.value):d}", []).append(e)
        by_label = {k: by_label[k] for k in sorted(by_label, key=lambda k: float(k[len(LABEL):]))}
    else:
        by_label = {POSITIVE: [e for e in examples if e.value >= threshold],
                    NEGATIVE: [e for e in examples if e.value < threshold]}
    small = {k: len(v) for k, v in by_label.items() if len(v) < 2}
    if len(by_label) < 2 or small:
        raise InputError(f"{public_url(run)}: {label_column} needs at least two documents of each of two classes "
                         f"or more to train and hold out, got {({k: len(v) for k, v in by_label.items()})}"
                         + ("" if threshold is None else f" at --threshold {threshold:g}"))
    split = {}
    for label, exs in by_label.items():
        train, test = split_groups(exs, test_fraction, rng)
        split[label] = (train, test)
    say(f"read {public_url(run)}: {len(examples):,} annotated documents, "
        + ", ".join(f"{k[len(LABEL):]} {len(v):,}" for k, v in by_label.items()))
    return train_split(split, output, rng, graded=threshold is None, threshold=threshold, lang=lang,
                  prefix_chars=prefix_chars, seed=seed, autotune_seconds=autotune_seconds,
                  defaults={"epoch": epoch, "lr": lr, "wordNgrams": wordNgrams, "minCount": minCount,
                            "structure": structure},
                  fixed={"dim": dim, "bucket": bucket, "balance_classes": balance_classes, "quantize": quantize,
                         "cutoff": cutoff, "dsub": dsub},
                  record={"test_fraction": test_fraction, "label_column": label_column, "threshold": threshold},
                  inputs={"run": public_url(run)}, counts={"annotated_documents": len(examples),
                                                            "without_annotation": missing,
                                                            "infinite_annotation": not_finite},
                  started=started, storage_options=storage_options, say=say)


def read_annotations(run: str, column: str,
                     storage_options: dict[str, Any] | None) -> tuple[list[Example], int, int]:
    """(documents of the run's shards with a finite numeric `column`, how many had none (null, NaN),
    how many had ±inf). Every label is checked here, where it enters: ±inf has no class (round() and
    the threshold's comparison would fail or put it at one end) and no place in the metrics."""
    import pyarrow.parquet as pq
    import pyarrow.types as pt

    opened = open_run(run, storage_options)
    examples: list[Example] = []
    missing = not_finite = 0
    for shard in opened.shard_paths:
        with opened.open(shard) as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            if column not in names:
                raise InputError(f"{public_url(run)}: its documents have no {column!r} column (they have "
                                 f"{', '.join(n for n in names if not n.startswith('_'))}); name the annotation "
                                 f"with --label-column, or annotate the run with a judge op first")
            table = pf.read(columns=["id", "text", column])
        kind = table.schema.field(column).type
        if not (pt.is_integer(kind) or pt.is_floating(kind)):
            raise InputError(f"{public_url(run)}: {column!r} holds {kind}, not numbers; name a numeric column "
                             f"with --label-column")
        ids, texts, values = (table.column(n).to_pylist() for n in ("id", "text", column))
        for doc_id, text, value in zip(ids, texts, values):
            if value is None or text is None or value != value:  # None, or NaN
                missing += 1
            elif not math.isfinite(value):
                not_finite += 1
            else:
                examples.append(Example(text, doc_id, float(value)))
    if not examples:
        raise InputError(f"{public_url(run)}: no document has a finite {column!r} value"
                         + (f" ({not_finite} are infinite)" if not_finite else ""))
    return examples, missing, not_finite
