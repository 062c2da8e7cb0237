"""minhash_dedup: near-duplicate removal across the whole run with MinHash-LSH, out of core on Ray.

1. keys (in the map tasks, where the documents are): a MinHash signature per document
   (`ylink_data.dedup.minhash`: word 5-grams, or character 5-grams for Chinese and Japanese by the
   `lang` column, or by script where no langid ran), cut into `bands` x `rows`: datasketch's
   `optimal_param` for `threshold`, weighted 0.9 against false negatives (its default 0.5/0.5 gives
   9 x 13 at 0.8, which finds a pair of Jaccard 0.80 only 40% of the time and measured recall 0.88;
   0.1/0.9 gives 14 x 9: 87% at 0.80, 97.5% at 0.85). Precision is kept by `verify`, or by the
   fact that false candidates rarely land in the same bucket; both are overridable. Each band
   becomes one 64-bit bucket key. Documents without a single shingle get no keys.
2. buckets: keys are shuffled by hash into partitions spilled to Parquet; in each partition,
   documents sharing a bucket are linked to the bucket's first document (a star, not all pairs).
3. clusters: connected components of those links, out of core (`ylink_data.dedup.components`).
4. keep one per cluster, deterministically: `first` (input order), `longest` (most characters), or
   `highest_score` (`score_column`, e.g. a quality classifier's `quality_score`); ties go to input
   order. The others are dropped with reason `minhash_dedup`. `cluster_columns: true` adds
   `dup_cluster_id` (the kept document's id) and `dup_cluster_size` to clustered documents.

`verify: true` checks each candidate pair by the exact Jaccard of its shingle sets before
clustering (an extra shuffle of the candidates' shingles: slower, and a document linked to its
bucket's first document only through a third one can be missed; off by default, as the LSH
estimate is usually good enough). `save_index: URL` writes the bucket keys of the documents a run
keeps; `index: URL` dedups a new run against them (incremental dedup across crawl snapshots): a
new document near one in the index is dropped, the indexed one having been kept before.

Memory is bounded by `rows_per_partition` bucket keys (or edges) per task, not by the corpus, and
every step after the keys runs in at least two partitions per CPU, so every core has work; neither
changes which documents are kept.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field, PositiveInt

from ..dedup import components
from ..dedup.lsh import FALSE_NEGATIVE_WEIGHT, FALSE_POSITIVE_WEIGHT, band_keys
from ..dedup.minhash import is_empty, lsh_params, shingle_hashes, signatures
from ..errors import InputError
from ..io.fs import filesystem, read_json, write_json
from ..pipeline.global_phase import GlobalContext, RunLayout, read_key_columns, write_decision_file
from ..transform.units import unit_languages
from . import register
from .base import Fraction, GlobalOp


@register
class MinHashDedup(GlobalOp):
    """Drops near duplicates (estimated Jaccard similarity of shingle sets around `threshold` or
    more) across the whole run, keeping one document per cluster; see the module docstring."""

    name = "minhash_dedup"

    def __init__(self, threshold: Annotated[float, Field(gt=0, lt=1)] = 0.8,
                 num_perm: Annotated[int, Field(ge=2, le=1024)] = 128,
                 bands: PositiveInt | None = None, rows: PositiveInt | None = None,
                 false_positive_weight: Fraction = FALSE_POSITIVE_WEIGHT,
                 false_negative_weight: Fraction = FALSE_NEGATIVE_WEIGHT,
                 seed: Annotated[int, Field(ge=0, lt=2**32)] = 1,  # numpy's RandomState seeds (datasketch's)
                 unit: Literal["auto", "word", "char"] = "auto",
                 word_ngram: PositiveInt | None = None,
                 char_ngram: PositiveInt | None = None,
                 keep: Literal["first", "longest", "highest_score"] = "first",
                 score_column: str = "quality_score", cluster_columns: bool = False,
                 verify: bool = False, index: str | None = None, save_index: str | None = None,
                 rows_per_partition: PositiveInt = 4_000_000, column: str = "text"):
        self.threshold, self.num_perm, self.seed = threshold, num_perm, seed
        self.column = column  # the text compared: `instruction` for generated instructions
        self.bands, self.rows = lsh_params(threshold, num_perm, false_positive_weight, false_negative_weight,
                                           bands=bands, rows=rows)
        if self.bands * self.rows > num_perm:
            raise ValueError(f"bands x rows ({self.bands} x {self.rows}) exceeds num_perm ({num_perm})")
        self.unit = None if unit == "auto" else unit
        self.word_ngram, self.char_ngram = word_ngram, char_ngram
        self.keep, self.score_column = keep, score_column
        self.cluster_columns, self.rows_per_partition = cluster_columns, rows_per_partition
        self.verify, self.index, self.save_index = verify, index, save_index

    def index_meta(self) -> dict:
        """What an index must have been built with for its bucket keys to mean the same."""
        return {"version": INDEX_VERSION, "num_perm": self.num_perm, "bands": self.bands, "rows": self.rows,
                "seed": self.seed, "unit": self.unit, "word_ngram": self.word_ngram, "char_ngram": self.char_ngram}

    def languages(self, table: pa.Table) -> list[str]:
        """Each document's unit family (`zh`: character shingles), by `lang` or else its script."""
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else None
        return unit_languages("auto", table.column(self.column), langs)

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        if self.column not in table.column_names:
            raise ValueError(f"minhash_dedup: no column {self.column!r} (columns: {', '.join(table.column_names)}); "
                             f"set `column:`")
        texts = [t or "" for t in table.column(self.column).to_pylist()]
        sigs = signatures(texts, self.languages(table), num_perm=self.num_perm, seed=self.seed, unit=self.unit,
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
        index = SavedIndex.open(self.index, self.storage_options(self.index), self.index_meta()) if self.index else None
        indexed = index.documents if index else 0
        partitions = ctx.partitions((ctx.total_rows + indexed) * self.bands, self.rows_per_partition)
        work = ctx.work_path("minhash")
        cols = [ctx.key_column("bands"), ctx.key_column("length"), "id"]
        if self.keep == "highest_score":
            cols.append(ctx.key_column("score"))
        args = [(ctx.layout, t, ctx.parts[t], int(offsets[i]), cols, partitions, work) for i, t in enumerate(tasks)]
        ctx.run_tasks(_emit_keys, args, "minhash_dedup: band keys")
        if index:
            # Earlier documents get negative node numbers: they sort first, so a cluster that holds one
            # keeps it (it is already in an earlier output) and drops every new member.
            args = [(index.fs, path, -1 - first - rows, rows, partitions, ctx.layout.fs, work)
                    for path, first, rows in index.files()]
            ctx.run_tasks(_emit_index_keys, args, "minhash_dedup: index keys")
        edges = ctx.run_tasks(_bucket_edges, [(ctx.layout, work, q, partitions) for q in range(partitions)],
                              "minhash_dedup: candidate pairs")
        start = "edges-0"
        if self.verify and sum(edges):
            edges = self._verify(ctx, work, tasks, offsets, partitions)
            start = "edges-verified"
        if sum(edges):
            components.connected_components(ctx.layout.fs, work, partitions, ctx.run_tasks, start=start)
            ctx.run_tasks(_attach_attributes, [(ctx.layout, work, p, partitions) for p in range(partitions)],
                          "minhash_dedup: cluster members")
            args = [(ctx.layout, work, q, tasks, offsets, self.keep, self.cluster_columns,
                     ctx.decision_path(f"minhash_dedup-{q:05d}")) for q in range(partitions)]
            written = ctx.run_tasks(_choose_kept, args, "minhash_dedup: keep one per cluster")
            ctx.decisions += [path for path in written if path]
        if self.save_index:
            self._save_index(ctx, tasks, cols[0], index)

    def _verify(self, ctx: GlobalContext, work: str, tasks: list[int], offsets: np.ndarray,
                partitions: int) -> list[int]:
        """Keep only candidate pairs whose exact shingle-set Jaccard reaches `threshold`."""
        if self.index:
            raise ValueError("minhash_dedup: verify needs every document's text, so it cannot be used with index")
        fs = ctx.layout.fs
        ctx.run_tasks(_verify_requests, [(fs, work, p, partitions, offsets, tasks) for p in range(partitions)],
                      "minhash_dedup: verify (requests)")
        args = [(ctx.layout, self, work, t, ctx.parts[t], int(offsets[i]), partitions) for i, t in enumerate(tasks)]
        ctx.run_tasks(_verify_shingles, args, "minhash_dedup: verify (shingle sets)")
        return ctx.run_tasks(_verify_pairs, [(fs, work, q, partitions, self.threshold) for q in range(partitions)],
                             "minhash_dedup: verify (exact Jaccard)")

    def _save_index(self, ctx: GlobalContext, tasks: list[int], bands_col: str,
                    previous: "SavedIndex | None") -> None:
        """Bucket keys of every document this run keeps (and of the index it read), for later runs."""
        fs, root = filesystem(self.save_index, self.storage_options(self.save_index))
        root = root.rstrip("/")
        dropped: dict[int, list[int]] = {t: [] for t in tasks}
        for path in ctx.decisions:
            with ctx.layout.fs.open(path, "rb") as f:
                gone = pq.read_table(f, columns=["task", "row", "reason"])
            gone = gone.filter(pc.is_valid(gone.column("reason")))
            for t, r in zip(gone.column("task").to_pylist(), gone.column("row").to_pylist()):
                dropped[t].append(r)
        stamp = hashlib.sha256(ctx.layout.url.encode()).hexdigest()[:12]
        args = [(ctx.layout, ctx.parts[t], [bands_col, "id"], sorted(dropped[t]), fs, f"{root}/keys-{stamp}-{t:05d}.parquet")
                for t in tasks]
        files = [(name, rows) for name, rows in ctx.run_tasks(_write_index_part, args, "minhash_dedup: save index")
                 if rows]
        if previous:
            files = previous.copy_to(fs, root) + files
        write_json(fs, f"{root}/{INDEX_FILE}", {**self.index_meta(), "documents": sum(r for _, r in files),
                                               "files": [{"path": name, "rows": rows} for name, rows in files]})


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
                 cluster_columns: bool, path: str) -> str | None:
    """The decisions about partition q's clusters, written to `path` (None: it holds none)."""
    members = _read_all(layout.fs, f"{work}/clusters/to-{q:05d}")
    if members is None or members.num_rows == 0:
        return None
    # Within each cluster the kept document sorts first: by policy, then input order (node).
    node = members.column("node").to_numpy()
    label = members.column("label").to_numpy()
    if keep == "longest":
        primary = -members.column("length").to_numpy()
    elif keep == "highest_score":
        primary = -np.nan_to_num(members.column("score").to_numpy(zero_copy_only=False), nan=-np.inf)
    else:
        primary = node
    order = np.lexsort((node, primary, node >= 0, label))  # earlier runs' documents (node < 0) first
    members = members.take(pa.array(order))
    label, node = label[order], node[order]
    starts = np.r_[True, label[1:] != label[:-1]]
    group = np.cumsum(starts) - 1
    kept_index = np.flatnonzero(starts)
    is_kept = starts
    new = node >= 0  # decisions only for this run's documents
    task_index = np.searchsorted(offsets, node[new], side="right") - 1
    out = {"task": pa.array(np.asarray(tasks, np.int64)[task_index], pa.int32()),
           "row": pa.array(node[new] - offsets[task_index], pa.int64()),
           "reason": pa.array(np.where(is_kept[new], None, "minhash_dedup").tolist(), pa.string())}
    if cluster_columns:
        sizes = np.diff(np.r_[kept_index, node.size])
        out["dup_cluster_id"] = members.column("id").take(pa.array(kept_index[group][new]))
        out["dup_cluster_size"] = pa.array(sizes[group][new], pa.int64())
    write_decision_file(layout, path, pa.table(out))
    return path


# ----------------------------------------------------------------------------- the saved index

INDEX_VERSION = 1
INDEX_FILE = "index.json"


@dataclass
class SavedIndex:
    """A folder of bucket keys from earlier runs: `index.json` (the LSH parameters, the files) and
    Parquet files with the kept documents' `id` and `bands`."""

    fs: Any
    root: str
    meta: dict

    @classmethod
    def open(cls, url: str, storage_options: dict, expected: dict) -> "SavedIndex":
        fs, root = filesystem(url, storage_options)
        root = root.rstrip("/")
        try:
            meta = read_json(fs, f"{root}/{INDEX_FILE}")
        except FileNotFoundError:
            raise InputError(f"minhash_dedup.index: no {INDEX_FILE} at {url} (write one with save_index)") from None
        differ = {k: (meta.get(k), v) for k, v in expected.items() if meta.get(k) != v}
        if differ:
            said = ", ".join(f"{k}={a!r} (this op: {b!r})" for k, (a, b) in differ.items())
            raise InputError(f"minhash_dedup.index: {url} was built with {said}; use the same parameters")
        return cls(fs, root, meta)

    @property
    def documents(self) -> int:
        return int(self.meta["documents"])

    def files(self) -> list[tuple[str, int, int]]:
        """(path, first document number, rows) per key file."""
        out, first = [], 0
        for f in self.meta["files"]:
            out.append((f"{self.root}/{f['path']}", first, int(f["rows"])))
            first += int(f["rows"])
        return out

    def copy_to(self, fs, root: str) -> list[tuple[str, int]]:
        same = fs is self.fs and root == self.root
        out = []
        for f in self.meta["files"]:
            if not same:
                with self.fs.open(f"{self.root}/{f['path']}", "rb") as src:
                    table = pq.read_table(src)
                _write(fs, f"{root}/{f['path']}", table)
            out.append((f["path"], int(f["rows"])))
        return out


def _emit_index_keys(fs, path: str, last_node: int, rows: int, partitions: int, work_fs, work: str) -> int:
    with fs.open(path, "rb") as f:
        table = pq.read_table(f)
    nodes = last_node + 1 + np.arange(rows, dtype=np.int64)[::-1]  # -1 - first - k, k = 0..rows-1
    attrs = pa.table({"node": nodes, "id": table.column("id"), "length": pa.array(np.zeros(rows, np.int64)),
                      "score": pa.nulls(rows, pa.float64())})
    name = path.rsplit("/", 1)[-1].removesuffix(".parquet")
    for q, part in _split_by_partition(attrs, components.partition_of(nodes, partitions), partitions):
        _write(work_fs, f"{work}/attrs/to-{q:05d}/index-{name}.parquet", part)
    bands = table.column("bands").combine_chunks()
    width = bands.type.list_size
    flat = bands.flatten().to_numpy()
    keys = pa.table({"key": flat, "node": np.repeat(nodes, width)})
    for q, part in _split_by_partition(keys, flat % np.uint64(partitions), partitions):
        _write(work_fs, f"{work}/buckets/to-{q:05d}/index-{name}.parquet", part)
    return int(flat.size)


def _write_index_part(layout: RunLayout, paths: list[str], cols: list[str], dropped: list[int], fs,
                      path: str) -> tuple[str, int]:
    table = read_key_columns(layout, paths, cols)
    keep = np.asarray(table.column(cols[0]).is_valid())
    keep[np.asarray(dropped, np.int64)] = False
    table = table.filter(pa.array(keep))
    if table.num_rows:
        _write(fs, path, pa.table({"id": table.column("id"), "bands": table.column(cols[0])}))
    return path.rsplit("/", 1)[-1], table.num_rows


# ----------------------------------------------------------------------------- verification

def _verify_requests(fs, work: str, p: int, partitions: int, offsets: np.ndarray, tasks: list[int]) -> int:
    """Each candidate pair (once, a < b) asks the tasks holding its two documents for their shingles."""
    a, b = components.read_edges(fs, f"{work}/edges-0", p)
    keep = a < b
    if not keep.any():
        return 0
    # a pair that shares several bands was linked once per band partition: ask once
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    a, b = pairs[:, 0], pairs[:, 1]
    node = np.r_[a, b]
    table = pa.table({"node": node, "a": np.r_[a, a], "b": np.r_[b, b]})
    owner = np.searchsorted(offsets, node, side="right") - 1
    for i, part in _split_by_partition(table, owner, len(tasks)):
        _write(fs, f"{work}/verify/requests/task-{tasks[i]:05d}/from-{p:05d}.parquet", part)
    return int(a.size)


def _verify_shingles(layout: RunLayout, op: MinHashDedup, work: str, task: int, paths: list[str], offset: int,
                     partitions: int) -> int:
    requests = _read_all(layout.fs, f"{work}/verify/requests/task-{task:05d}")
    if requests is None:
        return 0
    table = read_key_columns(layout, paths, [op.column, "lang"])
    rows = requests.column("node").to_numpy() - offset
    wanted = np.unique(rows)
    docs = table.take(pa.array(wanted))
    hashes, bounds = shingle_hashes([t or "" for t in docs.column(op.column).to_pylist()], op.languages(docs),
                                    unit=op.unit, word_ngram=op.word_ngram, char_ngram=op.char_ngram)
    sets = [np.unique(hashes[bounds[i]:bounds[i + 1]]) for i in range(len(wanted))]
    at = np.searchsorted(wanted, rows)
    values = pa.array([sets[i] for i in at], pa.list_(pa.uint32()))
    out = pa.table({"a": requests.column("a"), "b": requests.column("b"), "node": requests.column("node"),
                    "shingles": values})
    edge = components.partition_of(out.column("a").to_numpy() ^ (out.column("b").to_numpy() * 31), partitions)
    for q, part in _split_by_partition(out, edge, partitions):
        _write(layout.fs, f"{work}/verify/sets/to-{q:05d}/task-{task:05d}.parquet", part)
    return out.num_rows


def _verify_pairs(fs, work: str, q: int, partitions: int, threshold: float) -> int:
    table = _read_all(fs, f"{work}/verify/sets/to-{q:05d}")
    if table is None:
        return 0
    table = table.sort_by([("a", "ascending"), ("b", "ascending"), ("node", "ascending")])
    a, b, node = (table.column(c).to_numpy() for c in ("a", "b", "node"))
    assert np.array_equal(node[0::2], a[0::2]) and np.array_equal(node[1::2], b[0::2]), "one row per side"
    sets = table.column("shingles").to_pylist()
    keep_a, keep_b = [], []
    for i in range(0, table.num_rows - 1, 2):  # every pair has two rows: a's shingles, then b's
        x, y = np.asarray(sets[i], np.uint32), np.asarray(sets[i + 1], np.uint32)
        inter = np.intersect1d(x, y, assume_unique=True).size
        union = x.size + y.size - inter
        if union and inter / union >= threshold:
            keep_a.append(a[i])
            keep_b.append(b[i])
    if keep_a:
        components.write_edges(fs, f"{work}/edges-verified", q, np.asarray(keep_a, np.int64),
                               np.asarray(keep_b, np.int64), partitions)
    return len(keep_a)
