"""Which document of a near-duplicate cluster is kept: the `keep` policies of `minhash_dedup` (and
`lsh.near_duplicates`) as ranks, and the measures they rank by. Pure functions on arrays and texts.

Each policy gives every document a priority (lower is kept first); equal priorities go to input
order, so a decision never depends on how the work was cut.
- `least_boilerplate` (the default): the fewest boilerplate lines, then the longest. A boilerplate
  line is one that C4's line rules remove (`transform.lines.removed_by_c4`: no terminal punctuation,
  fewer than 3 words or 6 Chinese characters, "javascript", a policy phrase): share bars ("Share
  this article…", "分享到微信"), bylines, copyright and navigation lines. A mirror that wraps an
  article in its own template has more of them than the article it copied.
- `longest`: the most characters. A copy that added a footer is longer than the clean original.
- `first`: input order alone.
- `highest_score`: a score column (`score_column`, e.g. `quality_score`; a missing score ranks last).
- `central` (`choose` only, measured in the benchmark): the member with the highest mean Jaccard to
  the rest of its cluster. It needs every pair of a cluster, which the op does not compare.

Measured by bench/bench_keep.py on real pages mirrored as mirror sites do (bench/RESULTS.md, "Which
copy to keep"); see `DEFAULT_KEEP`.
"""
from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from ylink_data.text.transform.lines import removed_by_c4
from ylink_data.text.transform.units import CHINESE

KeepPolicy = Literal["least_boilerplate", "longest", "first", "highest_score"]
# Chosen by bench/bench_keep.py (bench/RESULTS.md, "Which copy to keep").
DEFAULT_KEEP: KeepPolicy = "least_boilerplate"
MEASURED = ("least_boilerplate", "longest", "first", "highest_score", "central")

_LINE_SCALE = float(2**31)  # least_boilerplate's priority: boilerplate lines first, then minus the length
_MAX_LINES = 2**21  # lines counted at most (the priority stays an exact float64)


def boilerplate_lines(text: str, unit: str = "en") -> int:
    """Lines of `text` that C4's line rules remove (`unit`: `zh` for the languages written without
    spaces, `transform.units.unit_languages`); blank lines do not count."""
    zh = unit == CHINESE
    return sum(1 for raw in text.splitlines() if (line := raw.strip()) and removed_by_c4(line, zh))


def boilerplate_counts(texts: Sequence[str], units: Sequence[str]) -> np.ndarray:
    return np.fromiter((boilerplate_lines(t or "", u) for t, u in zip(texts, units)), np.int64, count=len(texts))


def priorities(keep: str, length: np.ndarray, score: np.ndarray | None = None,
               boilerplate: np.ndarray | None = None) -> np.ndarray:
    """Each document's priority (lower is kept first) for a `keep` policy (see the module docstring);
    `first` gives every document 0 (input order alone)."""
    length = np.asarray(length, np.float64)
    if keep == "least_boilerplate":
        return np.minimum(np.asarray(boilerplate, np.float64), _MAX_LINES) * _LINE_SCALE - np.minimum(length, _LINE_SCALE - 1)
    if keep == "longest":
        return -length
    if keep == "highest_score":
        s = np.asarray(score, np.float64)
        return np.where(np.isnan(s), np.inf, -s)
    if keep == "first":
        return np.zeros(len(length), np.float64)
    raise ValueError(f"unknown keep policy {keep!r} (known: {', '.join(MEASURED)})")


def central(sets: Sequence[set]) -> int:
    """The member with the highest mean Jaccard to the other members (the first of equals)."""
    n = len(sets)
    if n < 3:
        return 0  # two members are equally central
    mean = [sum(len(sets[i] & sets[j]) / max(1, len(sets[i] | sets[j])) for j in range(n) if j != i) / (n - 1)
            for i in range(n)]
    return int(np.argmax(mean))


def choose(texts: Sequence[str], keep: str, *, units: Sequence[str] | None = None,
           scores: Sequence[float] | None = None, sets: Sequence[set] | None = None) -> int:
    """The position of the member a policy keeps in one cluster (input order breaks ties), as the
    op's ranking decides for a cluster where every member is a verified copy of the best-ranked one.
    `central` needs each member's shingle `sets`; `highest_score` its `scores`."""
    if keep == "central":
        return central(sets)
    units = units or ["en"] * len(texts)
    boilerplate = boilerplate_counts(texts, units) if keep == "least_boilerplate" else None
    priority = priorities(keep, np.array([len(t) for t in texts]), None if scores is None else np.asarray(scores, float),
                          boilerplate)
    return int(np.lexsort((np.arange(len(texts)), priority))[0])
