"""LSH banding and near-duplicate clusters in memory, for notebooks and samples: the same
signatures, band keys and star-contraction components as the `minhash_dedup` op, without Ray."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ..transform.units import unit_languages
from .components import star_step
from .minhash import DEFAULT_NUM_PERM, DEFAULT_SEED, DEFAULT_THRESHOLD, is_empty, lsh_params, signatures

_MIX = np.uint64(0x9E3779B97F4A7C15)
# Weights for datasketch's optimal_param: recall first (at threshold 0.8: 14 bands x 9 rows, which
# finds a pair at Jaccard 0.80 with probability 0.87; the even weights' 9 x 13 only 0.40). See
# bench/RESULTS.md, "MinHash dedup end to end".
FALSE_POSITIVE_WEIGHT = 0.1
FALSE_NEGATIVE_WEIGHT = 0.9


def band_keys(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n_docs, bands) uint64 bucket keys: band j's `rows` signature values mixed with j, so equal
    values in different bands never share a bucket."""
    sigs = sigs.astype(np.uint64)
    keys = np.empty((sigs.shape[0], bands), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(bands):
            h = np.full(sigs.shape[0], np.uint64(j + 1) * _MIX, np.uint64)
            for c in range(j * rows, (j + 1) * rows):
                h = (h ^ sigs[:, c]) * _MIX
                h ^= h >> np.uint64(29)
            keys[:, j] = h
    return keys


def components(x: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """Component label (smallest member) of each of n nodes, given edges (x, y): alternating
    large- and small-star steps until nothing changes, as the out-of-core version does."""
    a, b = np.asarray(x, np.int64), np.asarray(y, np.int64)
    previous = None
    while True:
        for large in (True, False):
            a, b = star_step(np.r_[a, b], np.r_[b, a], large)
        state = (a.tobytes(), b.tobytes())
        if state == previous:
            break
        previous = state
    labels = np.arange(n, dtype=np.int64)
    np.minimum.at(labels, a, b)
    return labels


def near_duplicates(texts: Sequence[str], langs: Sequence[str | None] | None = None, *,
                    threshold: float = DEFAULT_THRESHOLD, num_perm: int = DEFAULT_NUM_PERM,
                    seed: int = DEFAULT_SEED, bands: int | None = None, rows: int | None = None) -> np.ndarray:
    """Cluster labels for a list of texts: documents with the same label are near duplicates
    (label = index of the cluster's first document; a document alone has its own index). Uses the
    `minhash_dedup` op's defaults; for a corpus, run the op."""
    texts = [t or "" for t in texts]
    langs = unit_languages("auto", pa.array(texts, pa.large_string()), langs)
    b, r = lsh_params(threshold, num_perm, FALSE_POSITIVE_WEIGHT, FALSE_NEGATIVE_WEIGHT, bands=bands, rows=rows)
    sigs = signatures(texts, langs, num_perm=num_perm, seed=seed)
    keys = band_keys(sigs, b, r)
    valid = np.flatnonzero(~np.asarray(is_empty(sigs), bool).reshape(-1))
    key, node = keys[valid].reshape(-1), np.repeat(valid, b)
    order = np.lexsort((node, key))
    key, node = key[order], node[order]
    new = np.r_[True, key[1:] != key[:-1]] if key.size else np.zeros(0, bool)
    first = node[np.flatnonzero(new)][np.cumsum(new) - 1] if key.size else node
    linked = ~new & (node != first)
    return components(node[linked], first[linked], len(texts))
