"""LSH banding, and near-duplicate decisions in memory for notebooks and samples: the same
signatures, band keys, candidates, verification and decisions as the `minhash_dedup` op."""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import pyarrow as pa

from ylink_data.text.transform.units import unit_languages
from ylink_data.text.dedup.minhash import (DEFAULT_NUM_PERM, DEFAULT_SEED, DEFAULT_THRESHOLD, is_empty, lsh_params, shingle_hashes,
                      signatures_from_hashes)
from ylink_data.text.dedup.keep import DEFAULT_KEEP, boilerplate_counts, priorities
from ylink_data.text.dedup.verified import bucket_edges, pair_jaccard, resolve

_MIX = np.uint64(0x9E3779B97F4A7C15)
# Weights for datasketch's optimal_param: recall first. Every candidate pair is verified by its exact
# Jaccard before anything is removed, so a false candidate costs a comparison, not a document: at
# threshold 0.8, 0.05/0.95 gives 16 bands x 8 rows, which finds a pair at Jaccard 0.80 with
# probability 0.95 and at 0.85 with 0.994 (0.1/0.9's 14 x 9: 0.87 and 0.975; on short Chinese
# reviews, injected copies found 0.969 of the time). See bench/RESULTS.md, "Dedup that removes only
# redundancy".
FALSE_POSITIVE_WEIGHT = 0.05
FALSE_NEGATIVE_WEIGHT = 0.95


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


def source_keys(sources: Sequence[str | None]) -> np.ndarray:
    """A 64-bit key per source value (blake2b of its UTF-8), XORed into the band keys of
    `scope: per_source` so that documents of different sources never share a bucket."""
    cache: dict[str | None, int] = {}
    out = np.empty(len(sources), np.uint64)
    for i, s in enumerate(sources):
        if s not in cache:
            cache[s] = int.from_bytes(hashlib.blake2b(("" if s is None else s).encode("utf-8", "surrogatepass"),
                                                      digest_size=8, person=b"ylink-source").digest(), "little")
        out[i] = cache[s]
    return out


def near_duplicates(texts: Sequence[str], langs: Sequence[str | None] | None = None, *,
                    threshold: float = DEFAULT_THRESHOLD, num_perm: int = DEFAULT_NUM_PERM,
                    seed: int = DEFAULT_SEED, bands: int | None = None, rows: int | None = None,
                    keep: str = DEFAULT_KEEP, verify: bool = True) -> np.ndarray:
    """For a list of texts, the index of the kept document each one is a near copy of (its own
    index where it is kept): the `minhash_dedup` op's decisions with its defaults, in memory
    (candidates from LSH buckets, each removal verified by the exact Jaccard of shingle sets
    against a kept document, the one with the fewest boilerplate lines kept first: `dedup.keep`).
    For a corpus, run the op."""
    texts = [t or "" for t in texts]
    langs = unit_languages("auto", pa.array(texts, pa.large_string()), langs)
    b, r = lsh_params(threshold, num_perm, FALSE_POSITIVE_WEIGHT, FALSE_NEGATIVE_WEIGHT, bands=bands, rows=rows)
    hashes, offsets = shingle_hashes(texts, langs)
    sigs = signatures_from_hashes(hashes, offsets, num_perm=num_perm, seed=seed)
    valid = np.flatnonzero(~np.asarray(is_empty(sigs), bool).reshape(-1))
    boilerplate = boilerplate_counts(texts, langs) if keep == "least_boilerplate" else None
    priority = priorities(keep, np.array([len(t) for t in texts], np.int64), boilerplate=boilerplate)
    node = np.repeat(valid, b)
    m, f, pm, pf = bucket_edges(band_keys(sigs[valid], b, r).reshape(-1), node, priority[node])
    if verify:
        similarity = pair_jaccard(hashes, offsets, m, f)
        close = similarity >= threshold
        m, f, pm, pf, similarity = m[close], f[close], pm[close], pf[close], similarity[close]
    else:
        similarity = np.full(m.size, np.nan)
    decided = resolve(m, f, similarity, pm, pf)
    labels = np.arange(len(texts), dtype=np.int64)
    labels[decided.node[decided.removed]] = decided.dup_of[decided.removed]
    return labels
