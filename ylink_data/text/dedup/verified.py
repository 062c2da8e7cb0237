"""Verified near-duplicate decisions: which documents to remove, each as a measured near copy of
one that is kept. Pure functions on arrays, shared by the `minhash_dedup` op (out of core) and
`lsh.near_duplicates` (in memory), so both decide alike.

1. **Rank.** Every document has a rank, a total order: documents of an earlier run's index first
   (node < 0: they are already published, so they are kept), then by `priority` (lower first: the
   `keep` policy's, `dedup.keep.priorities`), then by input order (node). The best-ranked document of a group is the one kept.
2. **Candidates** (`bucket_edges`): in each LSH bucket, every document is a candidate copy of the
   bucket's best-ranked document other than itself (an earlier run's entry of the same document id
   is itself: a run that reads its documents again never finds them as their own copies). A document shares ~all its buckets with a near copy, so its
   candidates include the best-ranked near copy it has, whatever the cluster around them.
3. **Verification**: each candidate pair's exact Jaccard of shingle sets (`kernels.pair_jaccard`);
   pairs below the threshold are no evidence and are dropped.
4. **Decision** (`resolve`): documents in rank order; one is removed when a candidate it was
   verified against is kept, naming the most similar such one (`dup_of`, `dup_similarity`), and
   kept otherwise. So every removal is a measured near copy of a document that stays, and a chain
   (A ~ B, B ~ C, A !~ C) never removes C for B's sake once B is itself removed.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np


def rank_order(node: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """Indices that sort documents best first: earlier runs' documents (node < 0), then by
    priority, then by node (input order)."""
    return np.lexsort((node, _ranked_priority(node, priority)))


def _ranked_priority(node: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """The priority with earlier runs' documents first (-inf): one sort key instead of two."""
    return np.where(node < 0, -np.inf, priority)


def bucket_edges(key: np.ndarray, node: np.ndarray, priority: np.ndarray, ident: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs from bucket rows (key, node, priority): each document of a bucket paired with
    the bucket's best-ranked document that is not itself, once per pair. Returns (m, f, priority of
    m, priority of f), f ranking before m. Earlier runs' documents (node < 0) are never an m: they
    are not decided.

    `ident` (one value per row, `identities` of the document ids) says which rows are the same
    document: an earlier run's entry of a document this run reads again has its id. A document is
    never paired with a row of its own id; it is paired with the best-ranked row of another id
    instead (the first row whose id differs from the head's: of two different ids, at most one is
    its own). Without `ident`, each node is its own identity."""
    ident = node if ident is None else ident
    order = np.lexsort((node, _ranked_priority(node, priority), key))
    key, node, priority, ident = key[order], node[order], priority[order], ident[order]
    at = np.arange(key.size)
    new = np.r_[True, key[1:] != key[:-1]] if key.size else np.zeros(0, bool)
    bucket = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    head = starts[bucket]
    differs = ident != ident[head]
    # Per bucket, the first row whose identity differs from the head's (key.size: none).
    other = np.minimum.reduceat(np.where(differs, at, key.size), starts) if key.size else np.zeros(0, np.int64)
    best = np.where(differs, head, other[bucket])  # the best-ranked row that is not this document
    pair = (best < at) & (node >= 0)
    m, f, pm, pf = node[pair], node[best[pair]], priority[pair], priority[best[pair]]
    once = first_of_pairs(m, f)
    return m[once], f[once], pm[once], pf[once]


def identities(ids: Sequence[str]) -> np.ndarray:
    """A 64-bit identity per document id (blake2b of its UTF-8): equal ids, equal identities; two
    different ids collide with probability 2**-64, which only loses that one candidate pair."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(i.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                       "little") for i in ids), np.uint64, count=len(ids))


def first_of_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct pair (a[i], b[i]), in the pairs' sorted order:
    one sort of the pairs packed into int64 where their ranges allow (~4x faster than np.unique
    with axis=0, which compares rows as bytes), else two."""
    if not a.size:
        return np.zeros(0, np.int64)
    a0, b0 = int(a.min()), int(b.min())
    span_a, span_b = int(a.max()) - a0 + 1, int(b.max()) - b0 + 1
    if span_a * span_b < 2**62:
        _, first = np.unique((a - a0) * span_b + (b - b0), return_index=True)
        return first
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    return order[np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])]]


def pair_jaccard(values: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact Jaccard of the hash sets of documents a[k] and b[k] (rows of `values` cut by
    `offsets`), computed in the order of b so that each b's table is built once."""
    from ylink_data.text.dedup.kernels import pair_jaccard as kernel

    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    out = np.empty(a.size, np.float64)
    if a.size:
        order = np.argsort(b, kind="stable")
        out[order] = kernel(np.ascontiguousarray(values, np.uint32), np.asarray(offsets, np.int64),
                            a[order], b[order])
    return out


@dataclass
class Resolved:
    """The decisions over the documents of some edges, in rank order: `node` (each once),
    `removed`, and where removed `edge` (the index of the edge that chose it; -1 where kept) and
    `dup_of` (the kept document it copies: that edge's f; meaningless where kept, as node numbers
    of earlier runs are negative)."""

    node: np.ndarray
    removed: np.ndarray
    edge: np.ndarray
    dup_of: np.ndarray


def resolve(m: np.ndarray, f: np.ndarray, similarity: np.ndarray, priority_m: np.ndarray,
            priority_f: np.ndarray) -> Resolved:
    """Decide every document of the (verified) candidate edges (m, f): walking documents in rank
    order, a document is removed as a copy of its most similar kept candidate (ties: the better
    ranked), else kept. All edges of a connected group must be given together; a document on no
    edge is kept without being named. `similarity` may be NaN (unverified candidates)."""
    from ylink_data.text.dedup.kernels import first_kept

    if not m.size:
        empty = np.zeros(0, np.int64)
        return Resolved(empty, np.zeros(0, bool), empty, empty)
    node, at = np.unique(np.r_[m, f], return_index=True)  # sorted by value
    order = rank_order(node, np.r_[priority_m, priority_f][at])
    rank = np.empty(node.size, np.int64)
    rank[order] = np.arange(node.size)
    mi, fi = rank[np.searchsorted(node, m)], rank[np.searchsorted(node, f)]
    if np.any(fi >= mi):
        raise AssertionError("a candidate must rank before the document it is compared with")
    sim = np.nan_to_num(np.asarray(similarity, np.float64), nan=0.0)
    edges = np.lexsort((fi, -sim, mi))
    removed, choice = first_kept(mi[edges], fi[edges], node.size)
    edge = np.where(removed, edges[np.maximum(choice, 0)], -1)
    return Resolved(node[order], removed, edge, f[np.maximum(edge, 0)])

