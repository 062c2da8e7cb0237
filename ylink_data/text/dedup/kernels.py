"""The two loops of verified dedup that NumPy cannot vectorise, compiled with numba.

- `pair_jaccard`: the exact Jaccard similarity of the shingle-hash *sets* of many document pairs.
  Each pair's second document is put in a small open-addressing hash table (built once for a run
  of pairs with the same second document: every member of a cluster is compared with its one
  candidate), then the first document's hashes are probed, each counted once. Linear in the
  shingles, no sorting: about 0.5 us a pair of 1 KB documents, where NumPy's sort-based set
  operations take 10-20 us (bench/RESULTS.md, "Dedup that removes only redundancy").
- `first_kept`: the greedy decision over ranked candidate edges (`verified.resolve`): documents in
  rank order, each removed as a copy of its most similar candidate that is kept. A sequential
  dependency (a candidate's fate is decided first), so a loop.

Imported only by the functions that call them (numba's import costs ~0.4 s); compiled once per
machine and cached next to this file (or in numba's user cache where this folder is read-only).
"""
from __future__ import annotations

import numba
import numpy as np

@numba.njit(cache=True, nogil=True)
def _slot(h, mask):
    x = np.int64(h)  # shingle hashes are already mixed (fmix64); fold the high half in anyway
    return (x ^ (x >> 16)) & mask


@numba.njit(cache=True, nogil=True)
def _table_size(n: int) -> int:
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@numba.njit(cache=True, nogil=True)
def _add(keys, stamps, epoch, h, mask):  # pragma: no cover - compiled
    """Put hash h in a table (its slots of stamp `epoch` are full); False if it was there already."""
    slot = _slot(h, mask)
    while stamps[slot] == epoch and keys[slot] != h:
        slot = (slot + 1) & mask
    if stamps[slot] == epoch:
        return False
    stamps[slot] = epoch
    keys[slot] = h
    return True


@numba.njit(cache=True, nogil=True)
def _has(keys, stamps, epoch, h, mask):  # pragma: no cover - compiled
    slot = _slot(h, mask)
    while stamps[slot] == epoch:
        if keys[slot] == h:
            return True
        slot = (slot + 1) & mask
    return False


@numba.njit(cache=True, nogil=True)
def pair_jaccard(values, offsets, a, b):  # pragma: no cover - compiled
    """Exact Jaccard |A ∩ B| / |A ∪ B| of the sets of `values[offsets[i]:offsets[i + 1]]` for each
    pair (a[k], b[k]); 0.0 where both are empty. Pairs with equal `b` next to each other share one
    table (sort the pairs by `b` for speed; any order gives the same result). A table's slots are
    emptied by moving to a new stamp, never by clearing."""
    out = np.zeros(a.size, np.float64)
    longest = 1
    for i in range(offsets.size - 1):
        longest = max(longest, offsets[i + 1] - offsets[i])
    size = _table_size(longest)
    keys_a, stamps_a = np.zeros(size, np.uint32), np.zeros(size, np.int32)
    keys_b, stamps_b = np.zeros(size, np.uint32), np.zeros(size, np.int32)
    current_b, n_b, mask_b, epoch_b, epoch_a = -1, 0, 0, 0, 0
    for k in range(a.size):
        if b[k] != current_b:  # a new second document: its set into table B
            current_b = b[k]
            epoch_b += 1
            mask_b = _table_size(offsets[current_b + 1] - offsets[current_b]) - 1
            n_b = 0
            for j in range(offsets[current_b], offsets[current_b + 1]):
                if _add(keys_b, stamps_b, epoch_b, values[j], mask_b):
                    n_b += 1
        epoch_a += 1
        mask_a = _table_size(offsets[a[k] + 1] - offsets[a[k]]) - 1
        n_a = 0
        both = 0
        for j in range(offsets[a[k]], offsets[a[k] + 1]):
            if _add(keys_a, stamps_a, epoch_a, values[j], mask_a):  # each of A's hashes once
                n_a += 1
                if _has(keys_b, stamps_b, epoch_b, values[j], mask_b):
                    both += 1
        union = n_a + n_b - both
        out[k] = both / union if union else 0.0
    return out


@numba.njit(cache=True, nogil=True)
def first_kept(m, f, n_nodes):  # pragma: no cover - compiled
    """Edges (m[e], f[e]) sorted by m, then by preference (most similar first); every f ranks
    before its m (f < m). Walks the nodes in rank order: a node is removed when one of its
    candidates is kept, the first such edge in preference order is its choice; else it is kept.
    Returns (removed per node, chosen edge per node or -1)."""
    removed = np.zeros(n_nodes, np.bool_)
    choice = np.full(n_nodes, -1, np.int64)
    e = 0
    n_edges = m.size
    while e < n_edges:
        node = m[e]
        chosen = -1
        while e < n_edges and m[e] == node:
            if chosen < 0 and not removed[f[e]]:
                chosen = e
            e += 1
        if chosen >= 0:
            removed[node] = True
            choice[node] = chosen
    return removed, choice


def warm() -> None:
    """Load (or compile, on a machine's first run) both loops now: a worker process does this on
    start (`Op.preload`), while the driver plans, instead of in the middle of the global phase."""
    offsets = np.array([0, 1, 2], np.int64)
    pair_jaccard(np.array([1, 1], np.uint32), offsets, np.array([0], np.int64), np.array([1], np.int64))
    first_kept(np.array([1], np.int64), np.array([0], np.int64), 2)
