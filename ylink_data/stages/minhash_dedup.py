"""minhash_dedup: near-duplicate removal across the whole run with MinHash-LSH, out of core on Ray.

1. keys (in the map tasks, where the documents are): a MinHash signature per document
   (`ylink_data.dedup.minhash`: word 5-grams, or character 5-grams for Chinese and Japanese by the
   `lang` column, or by script where no langid ran), cut
   into `bands` x `rows` (datasketch's `optimal_param` for `threshold`, unless given); each band
   becomes one 64-bit bucket key. Documents without a single shingle get no keys.
2. buckets: keys are shuffled by hash into partitions spilled to Parquet; in each partition,
   documents sharing a bucket are linked to the bucket's first document (a star, not all pairs).
3. clusters: connected components of those links, out of core (`ylink_data.dedup.components`).
4. keep one per cluster, deterministically: `first` (input order), `longest` (most characters), or
   `highest_score` (`score_column`, e.g. a quality classifier's `quality_score`); ties go to input
   order. The others are dropped with reason `minhash_dedup`. `cluster_columns: true` adds
   `dup_cluster_id` (the kept document's id) and `dup_cluster_size` to clustered documents.

Memory is bounded by `rows_per_partition` bucket keys (or edges) per task, not by the corpus.
"""
from __future__ import annotations

import math
import re
from typing import Annotated, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from ..dedup import components
from ..dedup.minhash import is_empty, lsh_params, signatures
from ..pipeline.global_phase import GlobalContext, RunLayout, read_key_columns
from . import register
from .base import GlobalOp

_MIX = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = pa.table({"task": pa.array([], pa.int32()), "row": pa.array([], pa.int64()),
                   "reason": pa.array([], pa.string())})


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


def _script_language(text: str) -> str | None:
    """For documents no langid has seen: "zh" when most of the first 1,000 characters are Han or
    kana (character shingles), else None (word shingles)."""
    head = text[:1000]
    letters = sum(c.isalpha() for c in head)
    return "zh" if letters and len(_CJK.findall(head)) >= 0.5 * letters else None


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


@register
class MinHashDedup(GlobalOp):
    """Drops near duplicates (estimated Jaccard similarity of shingle sets around `threshold` or
    more) across the whole run, keeping one document per cluster; see the module docstring."""

    name = "minhash_dedup"

    def __init__(self, threshold: Annotated[float, Field(gt=0, lt=1)] = 0.8,
                 num_perm: Annotated[int, Field(ge=2, le=1024)] = 128,
                 bands: Annotated[int, Field(ge=1)] | None = None, rows: Annotated[int, Field(ge=1)] | None = None,
                 seed: int = 1, unit: Literal["auto", "word", "char"] = "auto",
                 word_ngram: Annotated[int, Field(ge=1)] | None = None,
                 char_ngram: Annotated[int, Field(ge=1)] | None = None,
                 keep: Literal["first", "longest", "highest_score"] = "first",
                 score_column: str = "quality_score", cluster_columns: bool = False,
                 rows_per_partition: Annotated[int, Field(ge=1)] = 4_000_000):
        self.threshold, self.num_perm, self.seed = threshold, num_perm, seed
        self.bands, self.rows = lsh_params(threshold, num_perm, bands=bands, rows=rows)
        if self.bands * self.rows > num_perm:
            raise ValueError(f"bands x rows ({self.bands} x {self.rows}) exceeds num_perm ({num_perm})")
        self.unit = None if unit == "auto" else unit
        self.word_ngram, self.char_ngram = word_ngram, char_ngram
        self.keep, self.score_column = keep, score_column
        self.cluster_columns, self.rows_per_partition = cluster_columns, rows_per_partition

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        texts = [t or "" for t in table.column("text").to_pylist()]
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else [None] * len(texts)
        langs = [lang or _script_language(t) for lang, t in zip(langs, texts)]
        sigs = signatures(texts, langs, num_perm=self.num_perm, seed=self.seed, unit=self.unit,
                          word_ngram=self.word_ngram, char_ngram=self.char_ngram)
        keys = band_keys(sigs, self.bands, self.rows)
        flat = pa.array(keys.reshape(-1), pa.uint64())
        bands = pa.FixedSizeListArray.from_arrays(flat, self.bands)
        empty = is_empty(sigs)
        out = {"bands": pa.array(bands, mask=np.asarray(empty)) if empty.any() else bands,
               "length": pa.array([len(t) for t in texts], pa.int64())}
        if self.keep == "highest_score":
            if self.score_column not in table.column_names:
                raise ValueError(f"minhash_dedup: keep: highest_score needs a {self.score_column!r} column "
                                 f"(run quality_classifier first, or set score_column)")
            out["score"] = table.column(self.score_column).cast(pa.float64())
        return out

    def resolve(self, ctx: GlobalContext) -> None:
        tasks = sorted(t for t in ctx.parts if ctx.rows.get(t))
        offsets = np.cumsum([0] + [ctx.rows[t] for t in tasks])
        partitions = max(1, math.ceil(ctx.total_rows * self.bands / self.rows_per_partition))
        work = ctx.work_path("minhash")
        cols = [ctx.key_column("bands"), ctx.key_column("length"), "id"]
        if self.keep == "highest_score":
            cols.append(ctx.key_column("score"))
        args = [(ctx.layout, t, ctx.parts[t], int(offsets[i]), cols, partitions, work) for i, t in enumerate(tasks)]
        ctx.run_tasks(_emit_keys, args, "minhash_dedup: band keys")
        edges = ctx.run_tasks(_bucket_edges, [(ctx.layout, work, q, partitions) for q in range(partitions)],
                              "minhash_dedup: candidate pairs")
        if sum(edges) == 0:
            return
        fs = ctx.layout.fs
        components.connected_components(fs, work, partitions, ctx.run_tasks)
        ctx.run_tasks(_attach_attributes, [(ctx.layout, work, p, partitions) for p in range(partitions)],
                      "minhash_dedup: cluster members")
        args = [(ctx.layout, work, q, tasks, offsets, self.keep, self.cluster_columns) for q in range(partitions)]
        for q, table in enumerate(ctx.run_tasks(_choose_kept, args, "minhash_dedup: keep one per cluster")):
            if table.num_rows:
                ctx.write_decisions(f"minhash_dedup-{q:05d}", table)


def _write(fs, path: str, table: pa.Table) -> None:
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as f:
        pq.write_table(table, f, compression="lz4")


def _split_by_partition(table: pa.Table, part: np.ndarray, partitions: int):
    order = np.argsort(part, kind="stable")
    table, part = table.take(order), part[order]
    bounds = np.searchsorted(part, np.arange(partitions + 1, dtype=part.dtype))
    for q in range(partitions):
        if bounds[q + 1] > bounds[q]:
            yield q, table.slice(bounds[q], bounds[q + 1] - bounds[q])


def _read_all(fs, folder: str) -> pa.Table | None:
    files = sorted(fs.glob(f"{folder}/*.parquet")) if fs.exists(folder) else []
    tables = []
    for path in files:
        with fs.open(path, "rb") as f:
            tables.append(pq.read_table(f))
    return pa.concat_tables(tables) if tables else None


def _emit_keys(layout: RunLayout, task: int, paths: list[str], offset: int, cols: list[str], partitions: int,
               work: str) -> int:
    """Bucket keys (key, node) by key partition, and each document's attributes by node partition."""
    table = read_key_columns(layout, paths, cols)
    nodes = offset + table.column("row").to_numpy()
    attrs = pa.table({"node": nodes, "id": table.column("id"), "length": table.column(cols[1]),
                      "score": table.column(cols[3]) if len(cols) > 3 else pa.nulls(table.num_rows, pa.float64())})
    for q, part in _split_by_partition(attrs, components.partition_of(nodes, partitions), partitions):
        _write(layout.fs, f"{work}/attrs/to-{q:05d}/from-{task:05d}.parquet", part)
    bands = table.column(cols[0])
    valid = np.asarray(bands.is_valid())
    if not valid.any():
        return 0
    width = bands.type.list_size
    keys = bands.filter(pa.array(valid)).combine_chunks().flatten().to_numpy().reshape(-1, width)
    node_rep = np.repeat(nodes[valid], width)
    flat = keys.reshape(-1)
    table = pa.table({"key": flat, "node": node_rep})
    for q, part in _split_by_partition(table, flat % np.uint64(partitions), partitions):
        _write(layout.fs, f"{work}/buckets/to-{q:05d}/from-{task:05d}.parquet", part)
    return int(flat.size)


def _bucket_edges(layout: RunLayout, work: str, q: int, partitions: int) -> int:
    """Link every document of a bucket to the bucket's first document."""
    table = _read_all(layout.fs, f"{work}/buckets/to-{q:05d}")
    if table is None:
        return 0
    key, node = table.column("key").to_numpy(), table.column("node").to_numpy()
    order = np.lexsort((node, key))
    key, node = key[order], node[order]
    new = np.r_[True, key[1:] != key[:-1]]
    first = node[np.flatnonzero(new)][np.cumsum(new) - 1]
    linked = ~new & (node != first)
    if not linked.any():
        return 0
    components.write_edges(layout.fs, f"{work}/edges-0", q, node[linked], first[linked], partitions)
    return int(linked.sum())


def _attach_attributes(layout: RunLayout, work: str, p: int, partitions: int) -> int:
    """Join a partition's labels with its documents' attributes; re-shuffle by cluster label."""
    with layout.fs.open(f"{work}/labels/labels-{p:05d}.parquet", "rb") as f:
        labels = pq.read_table(f)
    attrs = _read_all(layout.fs, f"{work}/attrs/to-{p:05d}")
    if labels.num_rows == 0 or attrs is None:
        return 0
    attrs = attrs.sort_by("node")
    at = np.searchsorted(attrs.column("node").to_numpy(), labels.column("node").to_numpy())
    members = attrs.take(pa.array(at)).append_column("label", labels.column("label"))
    label = labels.column("label").to_numpy()
    for q, part in _split_by_partition(members, components.partition_of(label, partitions), partitions):
        _write(layout.fs, f"{work}/clusters/to-{q:05d}/from-{p:05d}.parquet", part)
    return members.num_rows


def _choose_kept(layout: RunLayout, work: str, q: int, tasks: list[int], offsets: np.ndarray, keep: str,
                 cluster_columns: bool) -> pa.Table:
    members = _read_all(layout.fs, f"{work}/clusters/to-{q:05d}")
    if members is None:
        return _EMPTY
    # Within each cluster the kept document sorts first: by policy, then input order (node).
    node = members.column("node").to_numpy()
    label = members.column("label").to_numpy()
    if keep == "longest":
        primary = -members.column("length").to_numpy()
    elif keep == "highest_score":
        primary = -np.nan_to_num(members.column("score").to_numpy(zero_copy_only=False), nan=-np.inf)
    else:
        primary = node
    order = np.lexsort((node, primary, label))
    members = members.take(pa.array(order))
    label, node = label[order], node[order]
    starts = np.r_[True, label[1:] != label[:-1]]
    group = np.cumsum(starts) - 1
    kept_index = np.flatnonzero(starts)
    is_kept = starts
    task_index = np.searchsorted(offsets, node, side="right") - 1
    out = {"task": pa.array(np.asarray(tasks)[task_index], pa.int32()),
           "row": pa.array(node - offsets[task_index], pa.int64()),
           "reason": pa.array(np.where(is_kept, None, "minhash_dedup").tolist(), pa.string())}
    if cluster_columns:
        sizes = np.diff(np.r_[kept_index, node.size])
        out["dup_cluster_id"] = members.column("id").take(pa.array(kept_index[group]))
        out["dup_cluster_size"] = pa.array(sizes[group], pa.int64())
    return pa.table(out)
