"""Connected components of a graph too big for one process: Kiveris et al. 2014's alternating
large-star / small-star, each step a group-by on node over hash-partitioned edge files.

Nodes are int64. Edges live in P partitions, each edge in both directions, an edge (a, b) in
partition `a % P`. A step reads one partition, groups edges by their first node, writes the edges it
emits into P output files (both directions again), so a step's memory is one partition. After
O(log n) rounds every component is a star around its smallest node, which becomes every member's
label. `star_step` is the pure per-partition step; `connected_components` drives the rounds through
any `run_tasks(fn, args, label)` (Ray tasks in a pipeline, a plain loop in tests).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.parquet import read_table

_MIX = np.uint64(0x9E3779B97F4A7C15)


def partition_of(nodes: np.ndarray, partitions: int) -> np.ndarray:
    """A node's partition: a multiplicative hash, so consecutive ids spread over partitions."""
    return ((nodes.astype(np.uint64) * _MIX) >> np.uint64(33)) % np.uint64(partitions)


def star_step(a: np.ndarray, b: np.ndarray, large: bool) -> tuple[np.ndarray, np.ndarray]:
    """One large-star or small-star step on the edges (a, b) whose first node is in this partition
    (each undirected edge of the partition's nodes given in the direction a -> b). Returns the emitted
    undirected edges, deduplicated, as (x, y) with x > y (a node and the label it points to)."""
    if a.size == 0:
        return a, b
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
    counts = np.diff(np.r_[starts, a.size])
    nodes = a[starts]
    if large:
        # m(u) = min over u and all its neighbours; link every larger neighbour to it.
        m = np.minimum(np.minimum.reduceat(b, starts), nodes)
        m_e = np.repeat(m, counts)
        keep = b > a
        x, y = b[keep], m_e[keep]
    else:
        # m(u) = min over u and its smaller neighbours; link those and u itself to it.
        smaller = np.where(b <= a, b, np.iinfo(np.int64).max)
        m = np.minimum(np.minimum.reduceat(smaller, starts), nodes)
        m_e = np.repeat(m, counts)
        keep = b <= a
        x = np.r_[b[keep], nodes]
        y = np.r_[m_e[keep], m]
    keep = x != y
    x, y = x[keep], y[keep]
    hi, lo = np.maximum(x, y), np.minimum(x, y)
    pairs = np.unique(np.stack([hi, lo], axis=1), axis=0) if hi.size else np.empty((0, 2), np.int64)
    return pairs[:, 0], pairs[:, 1]


def labels_of(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """After convergence: each node of the partition and its label (the smallest node it touches)."""
    if a.size == 0:
        return a, b
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
    nodes = a[starts]
    return nodes, np.minimum(np.minimum.reduceat(b, starts), nodes)


def digest(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """Order-free fingerprint of a partition's edge set (each undirected edge counted once)."""
    keep = a < b
    if not keep.any():
        return 0, 0
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    h = (pairs[:, 0].astype(np.uint64) * _MIX) ^ (pairs[:, 1].astype(np.uint64) + np.uint64(0x632BE59BD9B4E019))
    h = (h ^ (h >> np.uint64(31))) * _MIX
    return int(pairs.shape[0]), int(np.bitwise_xor.reduce(h))


# ----------------------------------------------------------------------------- out of core

def write_edges(fs: fsspec.AbstractFileSystem, folder: str, source: int, x: np.ndarray, y: np.ndarray,
                partitions: int) -> None:
    """Both directions of edges (x, y) into `folder/to-{q}/from-{source}.parquet` by first node."""
    a, b = np.r_[x, y], np.r_[y, x]
    part = partition_of(a, partitions)
    order = np.argsort(part, kind="stable")
    a, b, part = a[order], b[order], part[order]
    bounds = np.searchsorted(part, np.arange(partitions + 1, dtype=np.uint64))
    for q in range(partitions):
        lo, hi = bounds[q], bounds[q + 1]
        if hi > lo:
            fs.makedirs(f"{folder}/to-{q:05d}", exist_ok=True)
            with fs.open(f"{folder}/to-{q:05d}/from-{source:05d}.parquet", "wb") as f:
                pq.write_table(pa.table({"a": a[lo:hi], "b": b[lo:hi]}), f, compression="lz4")


def read_edges(fs: fsspec.AbstractFileSystem, folder: str, partition: int) -> tuple[np.ndarray, np.ndarray]:
    path = f"{folder}/to-{partition:05d}"
    files = sorted(fs.glob(f"{path}/*.parquet")) if fs.exists(path) else []
    if not files:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    tables = []
    for file in files:
        tables.append(read_table(fs, file))
    table = pa.concat_tables(tables)
    return table.column("a").to_numpy(), table.column("b").to_numpy()


def _step_task(fs, src: str, dst: str, partition: int, partitions: int, large: bool) -> tuple[int, int]:
    a, b = read_edges(fs, src, partition)
    fingerprint = digest(a, b)
    x, y = star_step(a, b, large)
    write_edges(fs, dst, partition, x, y, partitions)
    return fingerprint


def _labels_task(fs, src: str, dst: str, partition: int) -> int:
    nodes, labels = labels_of(*read_edges(fs, src, partition))
    with fs.open(f"{dst}/labels-{partition:05d}.parquet", "wb") as f:
        pq.write_table(pa.table({"node": nodes, "label": labels}), f, compression="lz4")
    return int(nodes.size)


def connected_components(fs: fsspec.AbstractFileSystem, work: str, partitions: int,
                         run_tasks: Callable[[Callable, Sequence[tuple], str], list[Any]],
                         max_rounds: int = 64, start: str = "edges-0") -> list[str]:
    """Components of the edges already written (by `write_edges`) under `work/<start>`. Returns the
    label files (node, label), one per partition; label = the smallest node of the component."""
    folder, previous = f"{work}/{start}", None
    for round_ in range(max_rounds):
        fingerprints = []
        for kind, large in (("large", True), ("small", False)):
            dst = f"{work}/edges-{round_}-{kind}"
            args = [(fs, folder, dst, p, partitions, large) for p in range(partitions)]
            fingerprints.append(run_tasks(_step_task, args, f"minhash_dedup: components round {round_ + 1} ({kind}-star)"))
            folder = dst
        state = [tuple(map(tuple, f)) for f in fingerprints]
        if state[0] == state[1] or state == previous:  # neither step changes the graph any more
            break
        previous = state
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    out = f"{work}/labels"
    fs.makedirs(out, exist_ok=True)
    run_tasks(_labels_task, [(fs, folder, out, p) for p in range(partitions)], "minhash_dedup: labels")
    return [f"{out}/labels-{p:05d}.parquet" for p in range(partitions)]
