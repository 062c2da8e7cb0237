"""Choosing a quality classifier's training parameters for its data set (`ylink quality train`).

Defaults tuned on one data set do not carry to others: on human line-level labels of web text the
fixed defaults were behind plain fastText in some languages and ahead in others. So the trainer
searches, on its own training data, before it trains the model it keeps:

1. The training documents are dealt into `FOLDS` (5) folds by document (every piece of a document in one
   fold, so that near copies never sit on both sides), seeded.
2. Each candidate is trained on all folds but one and scored on that one, for every fold (grouped
   cross-validation): the mean ROC AUC for a good/bad classifier, the mean Spearman correlation
   with the annotations for a graded one (`--from RUN` without `--threshold`).
3. Candidates: the fixed defaults first, then the defaults reading the documents' shape
   (`preprocess.structure_tokens`), then a seeded random draw from `SPACE` without repeats. A
   candidate fastText cannot train (NaN at a high learning rate) is skipped.
4. The choice: the first candidate, in that order, whose mean is within one standard error of the
   best one's (the standard error of their per-fold differences): the "one standard error rule"
   of model selection (Hastie, Tibshirani and Friedman, The Elements of Statistical Learning, 7.10).
   On small data the best of two dozen means is partly luck; a candidate that is not clearly worse
   and comes earlier (the defaults, then the defaults with shape) holds up better on unseen data.

Why a search of our own rather than fastText's autotune: fastText's autotune maximises F1 at one
threshold (not a ranking metric such as AUC, which is what a keep/drop/tier cut by score needs),
tunes on a single validation file, stops on the wall clock and trains with many threads, so the same
data and seed give another model on every run; it also searches dimensions and subwords, which cost
scoring speed (bench/RESULTS.md, "Quality trainer: per data set", compares both).

Reproducibility: the time budget is turned into a number of candidates before the search starts,
with a fixed cost model (`estimated_seconds`: fastText's one-thread training speed measured here,
about 5-8 million token-epochs a second, taken at `TOKEN_EPOCHS_PER_SECOND`), not by watching the
clock. The same data, seed and budget therefore always try the same candidates and give the same
model; on a slower machine the search takes longer than the budget, on a faster one less.
"""
from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

Progress = Callable[[str], None]
FOLDS = 5
MAX_CANDIDATES = 24
# What the search may change, and the values it draws from. Not `dim`: a wider model scores slower
# (the scoring goal is 20k documents/s per core) and dim 100 scored as dim 16 (bench/RESULTS.md).
# Learning rates 0.05 and 1.0 and 40 epochs were in the space too: on the labelled web sets they won
# folds by luck more than they won held-out documents (German +0.0119 against +0.0105 with or
# without them, Spanish +0.0105 against +0.0191: "Quality trainer: per data set").
SPACE: dict[str, list[Any]] = {
    "lr": [0.1, 0.2, 0.5],
    "epoch": [5, 10, 20],
    "wordNgrams": [2, 3],
    "minCount": [1, 2, 3],
    "structure": [False, True],
}
# A graded model (a class per score) has more to learn from as little: on 500 of the test judge's
# annotations its best validation Spearman rose from 0.47 to 0.62 with these in the space.
GRADED_SPACE = SPACE | {"lr": [0.1, 0.2, 0.5, 1.0], "epoch": [5, 10, 20, 40]}
TOKEN_EPOCHS_PER_SECOND = 4e6  # one fastText thread, below what was measured (see the docstring)
SECONDS_PER_TRAINING = 0.25  # writing the training file, allocating the input matrix, scoring a fold


@dataclass
class Trial:
    params: dict[str, Any]
    scores: list[float] = field(default_factory=list)  # one per fold
    error: str | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores and self.error is None else float("-inf")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"params": self.params}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["mean"] = round(self.mean, 6)
            out["folds"] = [round(s, 6) for s in self.scores]
        return out


@dataclass
class Row:
    """One training piece: its fastText label, its line with and without the shape tokens, its
    document, and (graded training) the annotation it came from."""

    label: str
    line: str
    shape: str
    group: str
    value: float | None = None

    def text(self, structure: bool) -> str:
        return f"{self.shape} {self.line}" if structure else self.line


def candidates(defaults: dict[str, Any], seed: int, space: dict[str, list[Any]] = SPACE) -> list[dict[str, Any]]:
    """The fixed defaults, the defaults with the shape tokens, then the rest of `space` in a seeded
    random order (step 3 of the module docstring)."""
    keys = sorted(space)
    base = {k: defaults[k] for k in keys}
    first = [base, base | {"structure": True}]
    grid = [dict(zip(keys, values)) for values in itertools.product(*(space[k] for k in keys))]
    rest = [grid[i] for i in np.random.default_rng([seed, 24]).permutation(len(grid)) if grid[i] not in first]
    return first + rest


def estimated_seconds(tokens: int, params: dict[str, Any]) -> float:
    """What training one candidate on every fold costs by the cost model (module docstring):
    `tokens` is the number of tokens of the balanced training lines."""
    per_fold = tokens * (FOLDS - 1) / FOLDS * params["epoch"] * (1.25 if params["wordNgrams"] > 2 else 1.0)
    return FOLDS * (per_fold / TOKEN_EPOCHS_PER_SECOND + SECONDS_PER_TRAINING)


def plan(tokens: int, defaults: dict[str, Any], budget_s: float, seed: int,
         space: dict[str, list[Any]] = SPACE) -> list[dict[str, Any]]:
    """The candidates the budget pays for by the cost model, in the order they are tried."""
    chosen: list[dict[str, Any]] = []
    spent = 0.0
    for params in candidates(defaults, seed, space)[:MAX_CANDIDATES]:
        cost = estimated_seconds(tokens, params)
        if spent + cost > budget_s:
            continue  # a cheaper one further on may still fit
        chosen.append(params)
        spent += cost
    return chosen


def folds_of(rows: list[Row], seed: int) -> np.ndarray:
    """Each row's fold: documents dealt round-robin in a seeded order (step 1)."""
    groups = sorted({r.group for r in rows})
    order = np.random.default_rng([seed, 3]).permutation(len(groups))
    fold_of = {groups[g]: i % FOLDS for i, g in enumerate(order)}
    return np.array([fold_of[r.group] for r in rows])


def search(rows: list[Row], defaults: dict[str, Any], budget_s: float, seed: int, workdir: str,
           train: Callable[..., Any], metric: Callable[[list[Row], Any, bool], float],
           progress: Progress | None = None, graded: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the chosen parameters, a report for MODEL.metrics.json). `train(rows_by_label, rng,
    workdir, **params)` trains one unquantized candidate; `metric(rows, model, structure)` scores it
    on held-out rows; `graded`: a class per score, searched in `GRADED_SPACE`."""
    say = progress or (lambda _msg: None)
    tokens = sum(len(r.line.split()) for r in rows)
    tried = plan(tokens, defaults, budget_s, seed, GRADED_SPACE if graded else SPACE)
    fold = folds_of(rows, seed)
    if len(tried) < 2 or len({r.group for r in rows}) < FOLDS * 2:
        why = ("the budget pays for fewer than two candidates" if len(tried) < 2 else
               f"fewer than {FOLDS * 2} training documents")
        say(f"autotune: kept the fixed defaults ({why})")
        return {k: defaults[k] for k in SPACE}, {"chosen": "defaults", "why": why, "budget_seconds": budget_s}
    say(f"autotune: {len(tried)} candidates x {FOLDS} folds, about "
        f"{sum(estimated_seconds(tokens, p) for p in tried):.0f} s by the cost model")
    started = time.perf_counter()
    trials: list[Trial] = []
    for n, params in enumerate(tried, start=1):
        trial = Trial(params)
        for k in range(FOLDS):
            fit_rows = [r for r, f in zip(rows, fold) if f != k]
            held = [r for r, f in zip(rows, fold) if f == k]
            by_label: dict[str, list[str]] = {}
            for r in fit_rows:
                by_label.setdefault(r.label, []).append(r.text(params["structure"]))
            train_params = {key: value for key, value in params.items() if key != "structure"}
            try:
                model = train(by_label, np.random.default_rng([seed, k]), os.path.join(workdir, "autotune"),
                              **train_params)
            except RuntimeError as exc:  # fastText's "Encountered NaN": this candidate cannot train
                trial.error = str(exc).splitlines()[0]
                break
            trial.scores.append(metric(held, model, params["structure"]))
        trials.append(trial)
        best = max(trials, key=lambda t: t.mean)
        say(f"autotune {n}/{len(tried)}: {_describe(params)} -> "
            + (f"{trial.mean:.4f}" if trial.error is None else f"failed ({trial.error})")
            + f"; best {best.mean:.4f} ({time.perf_counter() - started:.0f} s)")
    top = max(trials, key=lambda t: t.mean)
    best = choose(trials)
    report = {"chosen": "defaults" if best is trials[0] else "search", "params": best.params,
              "validation_mean": round(best.mean, 6), "best_mean": round(top.mean, 6),
              "best_params": top.params, "defaults_mean": round(trials[0].mean, 6),
              "folds": FOLDS, "budget_seconds": budget_s, "seconds": round(time.perf_counter() - started, 3),
              "trials": [t.to_json() for t in trials]}
    return best.params, report


def choose(trials: list[Trial]) -> Trial:
    """The first trial whose mean is within one standard error of the best's (step 4)."""
    top = max(trials, key=lambda t: t.mean)
    for trial in trials:
        if trial.error is not None:
            continue
        diffs = np.array(top.scores) - np.array(trial.scores)
        se = diffs.std(ddof=1) / np.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
        if trial.mean >= top.mean - se:
            return trial
    return top


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in params.items())
