"""minhash_dedup: near-duplicate removal across the whole run, where every removal is a measured near
copy of a document that is kept.

1. keys (in the map tasks, where the documents are): a MinHash signature per document
   (`ylink_data.text.dedup.minhash`: word 5-grams, or character 5-grams for Chinese and Japanese by the
   `lang` column, or by script where no langid ran), cut into `bands` x `rows`: datasketch's
   `optimal_param` for `threshold`, weighted 0.95 against false negatives (at 0.8: 16 x 8, a pair
   of Jaccard 0.80 shares a bucket 95% of the time, 0.85 99.4%): recall first, since step 3
   verifies every candidate. Each band becomes one 64-bit bucket key. With `verify` (the default)
   the document's shingle hashes are kept too.
   Documents without a single shingle get no keys. With `keep: least_boilerplate` (the default)
   each document's boilerplate lines are counted too.
2. candidate pairs: keys are shuffled by hash into partitions spilled to Parquet; in each bucket
   every document is paired with the bucket's best-ranked document (the one `keep` prefers, then
   input order).
3. verification: the two documents of each pair meet in one partition with their shingle sets, and
   the pair stays only if the exact Jaccard of those sets reaches `threshold`.
4. decisions (`ylink_data.text.dedup.verified.resolve`): in rank order, a document is removed when it was
   verified against a document that is kept, naming the most similar one, and kept otherwise. No
   document is removed through a chain of links or an LSH false positive. Its row in `rejected/`
   has `dup_of` (the kept document's id) and `dup_similarity` (the exact Jaccard);
   `cluster_columns: true` adds `dup_cluster_id` (the kept document's id) and `dup_cluster_size`
   to the kept and removed documents of a cluster. stats.json counts, per source (`source_column`),
   the documents that came in and those removed, and the similarities of the removals.

Which copy stays (`keep`, `ylink_data.text.dedup.keep`): `least_boilerplate` (the default) ranks
first the document with the fewest lines that C4's line rules remove (share bars, bylines,
copyright and navigation lines), then the longest; `longest`, `first` (input order) and
`highest_score` (`score_column`) are the others. Measured on 5,439 clusters of real pages mirrored
as mirror sites do (bench/bench_keep.py, bench/RESULTS.md "Which copy to keep": the footer, header
or three templates of other real pages added to trafilatura's evaluation pages and THUCNews
articles), the clean original was kept in 90.4% of the clusters by `least_boilerplate`, 11.0% by
`longest` (a copy with a footer is longer), 40.7% by `first`, 43.1% by `highest_score` (the
default quality models read a prefix) and 49.4% by the member most similar to the rest of its
cluster (right with three different templates, wrong when two copies share one). It loses to
`longest` where a copy cut the article short (excerpts: 0.54 against 0.99).

`verify: false` is the faster, looser mode: no shingle sets are stored or compared, and a document
is removed when it shares one LSH bucket with a kept document. That is an estimate: two documents
share a bucket at Jaccard 0.5 about 6% of the time, so on templated pages (shared boilerplate)
some distinct documents are removed; its rows have no `dup_similarity`.

`scope: per_source` keeps one document per cluster and source (`source_column`): documents of
different sources are never compared. `save_index: URL` writes the bucket keys and shingle sets of
the documents a run keeps; `index: URL` dedups a new run against them (incremental dedup across
crawl snapshots): a new document verified near an indexed one is removed, the indexed one having
been kept before. Index files are checked against their sha256 before use.

A run never matches its own documents in an index: each entry names the run folder that saved it
(`run`), and a run reads none of its own (a rerun, --fresh or not, decides as its first run did,
and its save replaces them); and no document is paired with an entry of its own id (the same
record read by a run into another folder). Each save writes files of new names
(`keys-<run>-<save>-<task>.parquet`) and then index.json in one atomic write, the commit point: a
save stopped before it leaves the index as it was, and the files it no longer lists are removed
after it. Two runs saving into one index at the same time: the last index.json wins.

Memory is bounded by `rows_per_partition` bucket keys (or edges, or 4 x as many shingle hashes) per
task, not by the corpus, and every step after the keys runs in at least two partitions per CPU;
neither changes which documents are kept. When the verified pairs fit in one task
(`rows_per_partition`), one task decides them all; above that, they are first grouped into
connected components out of core (`ylink_data.text.dedup.components`).
"""
from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field, PositiveInt

from ylink_data.text.dedup import components
from ylink_data.text.dedup.lsh import FALSE_NEGATIVE_WEIGHT, FALSE_POSITIVE_WEIGHT, band_keys, source_keys
from ylink_data.text.dedup.minhash import is_empty, lsh_params, shingle_hashes, signatures_from_hashes
from ylink_data.text.dedup import verified
from ylink_data.text.dedup.keep import DEFAULT_KEEP, KeepPolicy, boilerplate_counts, priorities
from ylink_data.text.dedup.verified import bucket_edges, first_of_pairs, identities, pair_jaccard
from ylink_data.core.errors import InputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import atomic_write, filesystem, full_url, read_json, write_json
from ylink_data.ops.workspace import DUP_EVIDENCE, Workspace, read_key_columns, removal_breakdowns, write_decision_file
from ylink_data.text.transform.units import unit_languages
from ylink_data.ops import register
from ylink_data.ops.base import Fraction, GlobalOp
from ylink_data.core.parquet import read_table, read_table_bytes

REASON = "minhash_dedup"


@register
class MinHashDedup(GlobalOp):
    """Removes near duplicates across the whole run: a document goes only when the exact Jaccard
    of its shingle set with a document that is kept reaches `threshold`; that document is the one
    of its cluster with the fewest boilerplate lines by default (`keep`). See the module docstring."""

    name = "minhash_dedup"
    preload = ("ylink_data.text.dedup.kernels",)

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        # A saved index's index.json holds the sha256 of each of its files, which are checked on read.
        index = params.get("index")
        return [("index", f"{index.rstrip('/')}/{INDEX_FILE}")] if index else []

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return ([("column", params["column"])]
                + ([("source_column", params["source_column"])] if params["scope"] == "per_source" else [])
                + ([("score_column", params["score_column"])] if params["keep"] == "highest_score" else []))

    @classmethod
    def numeric_columns(cls, params: dict[str, Any]) -> list[str]:
        return ["score_column"] if params["keep"] == "highest_score" else []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return ["dup_cluster_id", "dup_cluster_size"] if params["cluster_columns"] else []

    def __init__(self, threshold: Annotated[float, Field(gt=0, lt=1)] = 0.8,
                 num_perm: Annotated[int, Field(ge=2, le=1024)] = 128,
                 bands: PositiveInt | None = None, rows: PositiveInt | None = None,
                 false_positive_weight: Fraction = FALSE_POSITIVE_WEIGHT,
                 false_negative_weight: Fraction = FALSE_NEGATIVE_WEIGHT,
                 seed: Annotated[int, Field(ge=0, lt=2**32)] = 1,  # numpy's RandomState seeds (datasketch's)
                 unit: Literal["auto", "word", "char"] = "auto",
                 word_ngram: PositiveInt | None = None,
                 char_ngram: PositiveInt | None = None,
                 keep: KeepPolicy = DEFAULT_KEEP,
                 score_column: str = "quality_score", cluster_columns: bool = False,
                 verify: bool = True, scope: Literal["global", "per_source"] = "global",
                 source_column: str = "source",
                 index: str | None = None, save_index: str | None = None,
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
        self.verify, self.scope, self.source_column = verify, scope, source_column
        self.index, self.save_index = index, save_index

    def index_meta(self) -> dict:
        """What an index must have been built with for its bucket keys and shingles to mean the same."""
        return {"version": INDEX_VERSION, "num_perm": self.num_perm, "bands": self.bands, "rows": self.rows,
                "seed": self.seed, "unit": self.unit, "word_ngram": self.word_ngram, "char_ngram": self.char_ngram,
                "scope": self.scope, "source_column": self.source_column if self.scope == "per_source" else None}

    def languages(self, table: pa.Table) -> list[str]:
        """Each document's unit family (`zh`: character shingles), by `lang` or else its script."""
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else None
        return unit_languages("auto", table.column(self.column), langs)

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        for name, why in ((self.column, "set `column:`"),
                          (self.source_column if self.scope == "per_source" else None, "set `source_column:`")):
            if name is not None and name not in table.column_names:
                raise ValueError(f"minhash_dedup: no column {name!r} (columns: {', '.join(table.column_names)}); {why}")
        texts = [t or "" for t in table.column(self.column).to_pylist()]
        units = self.languages(table)
        hashes, offsets = shingle_hashes(texts, units, unit=self.unit, word_ngram=self.word_ngram,
                                         char_ngram=self.char_ngram)
        sigs = signatures_from_hashes(hashes, offsets, num_perm=self.num_perm, seed=self.seed)
        keys = band_keys(sigs, self.bands, self.rows)
        if self.scope == "per_source":
            keys ^= source_keys(table.column(self.source_column).to_pylist())[:, None]
        out = {"bands": band_column(keys, np.asarray(is_empty(sigs)).reshape(-1)),
               "length": pa.array([len(t) for t in texts], pa.int64())}
        if self.verify:
            out["shingles"] = set_column(hashes, offsets)
        if self.keep == "least_boilerplate":
            out["boilerplate"] = pa.array(boilerplate_counts(texts, units), pa.int64())
        if self.keep == "highest_score":
            if self.score_column not in table.column_names:
                raise ValueError(f"minhash_dedup: keep: highest_score needs a {self.score_column!r} column "
                                 f"(run quality_classifier first, or set score_column)")
            out["score"] = table.column(self.score_column).cast(pa.float64())
        return out

    # ------------------------------------------------------------------------- the global phase

    def resolve(self, ctx: Workspace) -> None:
        tasks = sorted(t for t in ctx.parts if ctx.rows.get(t))
        offsets = np.cumsum([0] + [ctx.rows[t] for t in tasks])
        me = run_identity(ctx)
        index = (SavedIndex.open(self.index, ctx.storage_options(self.index), self.index_meta(), self.verify)
                 if self.index else None)
        index_files = index.files(other_than=me) if index else []  # never this run's own earlier entries
        owners = Owners(offsets, [first for _, first, _, _ in index_files])
        partitions = ctx.partitions((ctx.total_rows + sum(rows for _, _, rows, _ in index_files)) * self.bands,
                                    self.rows_per_partition)
        work = ctx.work_path("minhash")
        fs = ctx.fs
        cols = {"bands": ctx.key_column("bands"), "length": ctx.key_column("length")}
        if self.keep == "highest_score":
            cols["score"] = ctx.key_column("score")
        if self.keep == "least_boilerplate":
            cols["boilerplate"] = ctx.key_column("boilerplate")
        if self.verify:
            cols["shingles"] = ctx.key_column("shingles")
        if index_files:  # an earlier run may hold entries of these very documents: pair none with its own id
            cols["ident"] = "id"
        args = [(ctx.fs, t, ctx.parts[t], int(offsets[i]), cols, self.keep, partitions, work)
                for i, t in enumerate(tasks)]
        emitted = ctx.run_tasks(_emit_keys, args, "minhash_dedup: band keys")
        if index_files:
            args = [(index.fs, path, sha, first, rows, partitions, fs, work) for path, first, rows, sha in index_files]
            ctx.run_tasks(_emit_index_keys, args, "minhash_dedup: index keys")
        pairs = sum(ctx.run_tasks(_bucket_edges, [(fs, work, q, owners) for q in range(partitions)],
                                  "minhash_dedup: candidate pairs"))
        if pairs:
            # Compare partitions hold shingle sets: sized by the hashes they receive (about two
            # documents' worth a pair), at 4 hashes of 4 bytes for each 16-byte key of a key partition.
            per_doc = sum(h for _, h in emitted) / max(1, sum(d for d, _ in emitted))
            compare_parts = ctx.partitions(int(2 * pairs * max(per_doc, 1)), max(4 * self.rows_per_partition, 1 << 20))
            holders = [TaskDocuments(ctx.fs, ctx.parts[t], int(offsets[o]), cols.get("shingles"))
                       for o, t in enumerate(tasks)]
            holders += [IndexDocuments(index.fs, path, sha, first, self.verify) for path, first, _, sha in index_files]
            ctx.run_tasks(_ship_sets, [(fs, work, o, h, compare_parts) for o, h in enumerate(holders)],
                          "minhash_dedup: shingle sets")
            # The verified pairs are fewer than the candidates, themselves fewer than the keys: the
            # key partitions bound them (and the components, if they do not fit in one task).
            verified = ctx.run_tasks(_compare, [(fs, work, q, partitions, self.threshold, self.verify)
                                                for q in range(compare_parts)], "minhash_dedup: exact Jaccard")
            if sum(verified):
                self._decide(ctx, work, partitions, sum(verified), tasks, offsets)
        if self.save_index:
            self._save_index(ctx, tasks, index, me)

    def _decide(self, ctx: Workspace, work: str, parts: int, pairs: int, tasks: list[int],
                offsets: np.ndarray) -> None:
        """Decisions over the verified pairs: in one task when they fit in one, else per connected
        component (every pair of a component in one partition), out of core."""
        fs = ctx.fs
        label = "minhash_dedup: keep one per cluster"
        if pairs <= self.rows_per_partition:
            folders = [f"{work}/verified/to-{p:05d}" for p in range(parts)]
            written = ctx.run_tasks(_decide_task, [(ctx.fs, folders, tasks, offsets, self.cluster_columns,
                                                    ctx.decision_path("minhash_dedup-00000"))], label)
        else:
            ctx.run_tasks(_component_edges, [(fs, work, p, parts) for p in range(parts)],
                          "minhash_dedup: components (edges)")
            components.connected_components(fs, work, parts, ctx.run_tasks, start="edges-verified")
            ctx.run_tasks(_group_by_component, [(fs, work, p, parts) for p in range(parts)],
                          "minhash_dedup: components (pairs)")
            args = [(ctx.fs, [f"{work}/grouped/to-{q:05d}"], tasks, offsets, self.cluster_columns,
                     ctx.decision_path(f"minhash_dedup-{q:05d}")) for q in range(parts)]
            written = ctx.run_tasks(_decide_task, args, label)
        ctx.decisions += [path for path in written if path]

    def decision_breakdowns(self, table: pa.Table, dropped: np.ndarray) -> dict[str, Counter]:
        """Per source (`source_column`) the documents this op saw and those it removed, and the
        removals' similarities in bins of 0.05 (`0.80` holds [0.80, 0.85); `1.00` exact copies)."""
        return removal_breakdowns(table, dropped, self.source_column)

    def _save_index(self, ctx: Workspace, tasks: list[int], previous: "SavedIndex | None", me: str) -> None:
        """Bucket keys and shingle sets of every document this run keeps, with the entries of the index
        it read (less its own earlier ones, which these replace), for later runs. Each save writes
        files of its own names (`keys-<run>-<save>-<task>.parquet`), then index.json in one atomic
        write, the commit point: a save stopped before it leaves the index as it was. Files that the
        commit leaves unlisted (this run's earlier save, or one that stopped) are removed after it."""
        fs, root = filesystem(self.save_index, ctx.storage_options(self.save_index))
        root = root.rstrip("/")
        dropped: dict[int, list[int]] = {t: [] for t in tasks}
        for path in ctx.decisions:
            gone = read_table(ctx.fs, path, columns=["task", "row", "reason"])
            gone = gone.filter(pc.is_valid(gone.column("reason")))
            for t, r in zip(gone.column("task").to_pylist(), gone.column("row").to_pylist()):
                dropped[t].append(r)
        stamp = run_stamp(me)
        save = uuid.uuid4().hex[:8]
        cols = [ctx.key_column("bands"), "id"] + ([ctx.key_column("shingles")] if self.verify else [])
        args = [(ctx.fs, ctx.parts[t], cols, sorted(dropped[t]), fs, f"{root}/keys-{stamp}-{save}-{t:05d}.parquet")
                for t in tasks]
        files = [{**written, "run": me} for written in ctx.run_tasks(_write_index_part, args, "minhash_dedup: save index")
                 if written["rows"]]
        if previous:
            files = previous.copy_to(fs, root, other_than=me) + files
        try:
            superseded = [f["path"] for f in read_json(fs, f"{root}/{INDEX_FILE}").get("files", [])]
        except (FileNotFoundError, ValueError, AttributeError):
            superseded = []
        write_json(fs, f"{root}/{INDEX_FILE}", {**self.index_meta(), "shingles": self.verify,
                                               "documents": sum(f["rows"] for f in files), "files": files})
        listed = {f["path"] for f in files}
        ours = [p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
        for name in set(superseded) | {n for n in ours if f"keys-{stamp}-" in n}:
            if name not in listed:
                fs.rm_file(f"{root}/{name}")


def run_identity(ctx: Workspace) -> str:
    """Which run an index entry came from: the run folder's full URL, without credentials (a rerun
    into the same output.path, --fresh or not, is the same run)."""
    fs, root = filesystem(ctx.run_url, ctx.storage_options(ctx.run_url))
    return redact_url(full_url(fs, root.rstrip("/")))


def run_stamp(identity: str) -> str:
    """The short name of a run in its index files' names."""
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------- keys as bytes

# Bucket keys and shingle hashes are stored as raw bytes (little-endian), not Arrow lists: Parquet
# writes and reads a binary column 10-20x faster than a list column (repetition levels for every
# value), and these columns are most of the bytes a global phase moves.

def band_column(keys: np.ndarray, empty: np.ndarray) -> pa.Array:
    """(n, bands) uint64 keys as fixed-size binary values; null where a document has no shingle."""
    n, width = keys.shape
    validity = pa.py_buffer(np.packbits(~empty, bitorder="little")) if empty.any() else None
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(8 * width), n,
                                                [validity, pa.py_buffer(np.ascontiguousarray(keys, np.uint64))],
                                                null_count=int(empty.sum()))


def band_rows(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`band_column`'s values back as an (n, bands) uint64 array (rows of nulls: whatever bytes)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = array.type.byte_width // 8
    data = np.frombuffer(array.buffers()[1], np.uint64, count=(array.offset + len(array)) * width)
    return data[array.offset * width:].reshape(-1, width)


def set_column(hashes: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Each document's shingle hashes (uint32, repeats included) as one binary value."""
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1,
                                            [None, pa.py_buffer(np.asarray(offsets, np.int64) * 4),
                                             pa.py_buffer(np.ascontiguousarray(hashes, np.uint32))])


def set_rows(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """`set_column`'s values back as (hashes, offsets): document i's are hashes[offsets[i]:offsets[i + 1]]."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    _, offset_buf, data = array.buffers()
    offsets = np.frombuffer(offset_buf, np.int64, count=array.offset + len(array) + 1)[array.offset:]
    values = np.frombuffer(data, np.uint32, count=int(offsets[-1]) // 4) if data is not None and offsets[-1] else \
        np.zeros(0, np.uint32)
    return values, offsets // 4


# ----------------------------------------------------------------------------- files of the phase

def _write(fs, path: str, table: pa.Table) -> None:
    """A work file of the phase: Arrow IPC, uncompressed. Hashes and shingle sets do not compress,
    and Parquet's encoding of a list column cost more than the rest of the phase."""
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as f, pa.ipc.new_file(f, table.schema) as writer:
        writer.write_table(table)


def _split_by_partition(table: pa.Table, part: np.ndarray, partitions: int):
    order = np.argsort(part, kind="stable")
    table, part = table.take(order), part[order]
    bounds = np.searchsorted(part, np.arange(partitions + 1, dtype=part.dtype))
    for q in range(partitions):
        if bounds[q + 1] > bounds[q]:
            yield q, table.slice(bounds[q], bounds[q + 1] - bounds[q])


def _read_all(fs, *folders: str) -> pa.Table | None:
    tables = []
    for folder in folders:
        for path in sorted(fs.glob(f"{folder}/*.arrow")) if fs.exists(folder) else []:
            with fs.open(path, "rb") as f:
                tables.append(pa.ipc.open_file(pa.BufferReader(f.read())).read_all())
    return pa.concat_tables(tables) if tables else None


@dataclass(frozen=True)
class Owners:
    """Which task of the run (0..T-1, by position) or which index file (T + k) holds a document:
    this run's documents are numbered by input order from 0, an index's from -1 down."""

    offsets: np.ndarray  # first node of each task, and the total
    index_firsts: list[int]  # first document number (0, 1, ...) of each index file

    def of(self, node: np.ndarray) -> np.ndarray:
        tasks = len(self.offsets) - 1
        out = np.searchsorted(self.offsets, node, side="right") - 1
        earlier = node < 0
        if earlier.any():
            out[earlier] = tasks + np.searchsorted(np.asarray(self.index_firsts), -1 - node[earlier], side="right") - 1
        return out

    @property
    def count(self) -> int:
        return len(self.offsets) - 1 + len(self.index_firsts)


def _emit_keys(fs: fsspec.AbstractFileSystem, task: int, paths: list[str], offset: int, cols: dict[str, str], keep: str,
               partitions: int, work: str) -> tuple[int, int]:
    """Bucket rows (key, node, priority) by key partition. Returns (documents, shingle hashes)."""
    table = read_key_columns(fs, paths, [c for k, c in cols.items() if k != "shingles"])
    nodes = offset + table.column("row").to_numpy()
    score = table.column(cols["score"]).to_numpy(zero_copy_only=False) if "score" in cols else None
    boilerplate = table.column(cols["boilerplate"]).to_numpy() if "boilerplate" in cols else None
    priority = priorities(keep, table.column(cols["length"]).to_numpy(), score, boilerplate)
    bands = table.column(cols["bands"])
    valid = np.asarray(bands.is_valid())
    if valid.any():
        keys = band_rows(bands)[valid]
        width = keys.shape[1]
        keys = keys.reshape(-1)
        rows = pa.table({"key": keys, "node": np.repeat(nodes[valid], width),
                         "priority": np.repeat(priority[valid], width)})
        if "ident" in cols:
            ident = identities(table.column(cols["ident"]).filter(pa.array(valid)).to_pylist())
            rows = rows.append_column("ident", pa.array(np.repeat(ident, width)))
        for q, part in _split_by_partition(rows, keys % np.uint64(partitions), partitions):
            _write(fs, f"{work}/buckets/to-{q:05d}/from-{task:05d}.arrow", part)
    hashes = _values_in(fs, paths, cols["shingles"]) if "shingles" in cols else 0
    return int(table.num_rows), hashes


def _values_in(fs, paths: list[str], column: str) -> int:
    """Shingle hashes in a `set_column` of Parquet files, from their footers (no data read): its
    uncompressed bytes less each value's 4-byte length, in 4-byte hashes."""
    total = 0
    for path in paths:
        with fs.open(path, "rb") as f:
            meta = pq.ParquetFile(f).metadata
        at = [i for i in range(meta.num_columns) if meta.schema.column(i).path == column]
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            total += sum(max(0, group.column(i).total_uncompressed_size - 4 * group.num_rows) // 4 for i in at)
    return total


def _bucket_edges(fs, work: str, q: int, owners: Owners) -> int:
    """Candidate pairs of partition q's buckets, as requests to the documents' owners: each pair
    (m, f) asks m's owner for m's set and f's owner for f's, both sent to f's compare partition."""
    table = _read_all(fs, f"{work}/buckets/to-{q:05d}")
    if table is None:
        return 0
    m, f, pm, pf = bucket_edges(table.column("key").to_numpy(), table.column("node").to_numpy(),
                                table.column("priority").to_numpy(),
                                table.column("ident").to_numpy() if "ident" in table.column_names else None)
    if not m.size:
        return 0
    requests = pa.table({"node": np.r_[m, f], "center": np.r_[f, f], "priority": np.r_[pm, pf]})
    for o, part in _split_by_partition(requests, owners.of(requests.column("node").to_numpy()), owners.count):
        _write(fs, f"{work}/requests/owner-{o:05d}/from-{q:05d}.arrow", part)
    return int(m.size)


@dataclass(frozen=True)
class TaskDocuments:
    """One task's documents in its part files (node = first + row), with the key column of their shingles."""

    fs: fsspec.AbstractFileSystem
    paths: list[str]
    first: int
    shingles: str | None

    def table(self) -> pa.Table:
        """`id` (and `shingles`) of every row, part after part (no copy)."""
        columns = ["id"] + ([self.shingles] if self.shingles else [])
        table = read_key_columns(self.fs, self.paths, columns).drop_columns(["row"])
        return table.rename_columns(["id", "shingles"][:len(columns)])

    def rows(self, nodes: np.ndarray) -> np.ndarray:
        return nodes - self.first


@dataclass(frozen=True)
class IndexDocuments:
    """One file of a saved index (node = -1 - first - row), checked against its sha256."""

    fs: Any
    path: str
    sha256: str
    first: int
    shingles: bool

    def table(self) -> pa.Table:
        return read_index_file(self.fs, self.path, self.sha256, ["id"] + (["shingles"] if self.shingles else []))

    def rows(self, nodes: np.ndarray) -> np.ndarray:
        return -1 - self.first - nodes


def _ship_sets(fs, work: str, owner: int, documents: "TaskDocuments | IndexDocuments", partitions: int) -> int:
    """An owner's answer to the requests for its documents: (center, node, priority, id[, shingles])
    rows, each sent to its center's compare partition. The shingle sets are copied once (one
    `take` in partition order): they are most of the bytes of the phase."""
    requests = _read_all(fs, f"{work}/requests/owner-{owner:05d}")
    if requests is None:
        return 0
    node, center = requests.column("node").to_numpy(), requests.column("center").to_numpy()
    # once per (node, center): a pair is found in every key partition where it shares a bucket
    once = first_of_pairs(node, center)
    part = components.partition_of(center[once], partitions)
    order = once[np.argsort(part, kind="stable")]
    part = np.sort(part)
    out = requests.take(pa.array(order))
    docs = documents.table().take(pa.array(documents.rows(node[order])))
    for name in docs.column_names:
        out = out.append_column(name, docs.column(name))
    bounds = np.searchsorted(part, np.arange(partitions + 1, dtype=part.dtype))
    for q in range(partitions):
        if bounds[q + 1] > bounds[q]:
            _write(fs, f"{work}/sets/to-{q:05d}/from-{owner:05d}.arrow", out.slice(bounds[q], bounds[q + 1] - bounds[q]))
    return out.num_rows


def _compare(fs, work: str, q: int, partitions: int, threshold: float, verify: bool) -> int:
    """The pairs of partition q (each document with its center): exact Jaccard of their shingle
    sets, those reaching `threshold` kept (all of them, unmeasured, without `verify`), written by
    the document's partition."""
    table = _read_all(fs, f"{work}/sets/to-{q:05d}")
    if table is None:
        return 0
    node, center = table.column("node").to_numpy(), table.column("center").to_numpy()
    centers = np.flatnonzero(node == center)
    centers = centers[np.argsort(center[centers], kind="stable")]
    members = np.flatnonzero(node != center)
    of = centers[np.searchsorted(center[centers], center[members])]
    if verify:
        values, offsets = set_rows(table.column("shingles"))
        similarity = pair_jaccard(values, offsets, members, of)
        passed = similarity >= threshold
        members, of, similarity = members[passed], of[passed], similarity[passed]
    else:
        similarity = np.full(members.size, np.nan)
    if not members.size:
        return 0
    priority = table.column("priority").to_numpy()
    m = node[members]
    out = pa.table({"m": m, "f": center[members], "similarity": similarity, "priority_m": priority[members],
                    "priority_f": priority[of], "id_f": table.column("id").take(pa.array(of))})
    for p, part in _split_by_partition(out, components.partition_of(m, partitions), partitions):
        _write(fs, f"{work}/verified/to-{p:05d}/from-{q:05d}.arrow", part)
    return out.num_rows


def _component_edges(fs, work: str, p: int, partitions: int) -> int:
    """Partition p's verified pairs as the edges `components.connected_components` reads."""
    table = _read_all(fs, f"{work}/verified/to-{p:05d}")
    if table is None:
        return 0
    components.write_edges(fs, f"{work}/edges-verified", p, table.column("m").to_numpy(),
                           table.column("f").to_numpy(), partitions)
    return table.num_rows


def _group_by_component(fs, work: str, p: int, partitions: int) -> int:
    """Partition p's verified pairs sent to the partition of their component (its smallest node)."""
    table = _read_all(fs, f"{work}/verified/to-{p:05d}")
    if table is None:
        return 0
    labels = read_table(fs, f"{work}/labels/labels-{p:05d}.parquet")
    nodes = labels.column("node").to_numpy()
    label = labels.column("label").to_numpy()[np.searchsorted(nodes, table.column("m").to_numpy())]
    for q, part in _split_by_partition(table, components.partition_of(label, partitions), partitions):
        _write(fs, f"{work}/grouped/to-{q:05d}/from-{p:05d}.arrow", part)
    return table.num_rows


def _decide_task(fs: fsspec.AbstractFileSystem, folders: list[str], tasks: list[int], offsets: np.ndarray,
                 cluster_columns: bool, path: str) -> str | None:
    """The decisions over the verified pairs in `folders` (whole components), written to `path`
    (None: no pair)."""
    table = _read_all(fs, *folders)
    if table is None or table.num_rows == 0:
        return None
    m, f = table.column("m").to_numpy(), table.column("f").to_numpy()
    similarity = table.column("similarity").to_numpy()
    decided = verified.resolve(m, f, similarity, table.column("priority_m").to_numpy(),
                               table.column("priority_f").to_numpy())
    gone = decided.removed
    node, kept, edge = decided.node[gone], decided.dup_of[gone], decided.edge[gone]
    ids = table.column("id_f").combine_chunks()
    dup_of = ids.take(pa.array(edge))
    cols = {"reason": pa.array([REASON] * node.size, pa.string()), "dup_of": dup_of,
            "dup_similarity": pa.array(similarity[edge], pa.float64(), from_pandas=True)}  # NaN: not measured
    if cluster_columns:
        heads, sizes = np.unique(kept, return_counts=True)
        sizes += 1
        cols["dup_cluster_id"] = dup_of
        cols["dup_cluster_size"] = pa.array(sizes[np.searchsorted(heads, kept)], pa.int64())
        # This run's kept documents that a removal names get a row too: their own id, from a pair to them.
        ours = heads >= 0
        centers, first = np.unique(f, return_index=True)
        own = ids.take(pa.array(first[np.searchsorted(centers, heads[ours])]))
        n = int(ours.sum())
        node = np.r_[node, heads[ours]]
        more = {"reason": pa.nulls(n, pa.string()), "dup_of": pa.nulls(n, pa.string()),
                "dup_similarity": pa.nulls(n, pa.float64()), "dup_cluster_id": own,
                "dup_cluster_size": pa.array(sizes[ours], pa.int64())}
        cols = {k: pa.concat_arrays([v, more[k]]) for k, v in cols.items()}
    task_index = np.searchsorted(offsets, node, side="right") - 1
    decisions = pa.table({"task": pa.array(np.asarray(tasks, np.int64)[task_index], pa.int32()),
                          "row": pa.array(node - offsets[task_index], pa.int64()), **cols})
    write_decision_file(fs, path, decisions, rejected_only=DUP_EVIDENCE)
    return path


# ----------------------------------------------------------------------------- the saved index

INDEX_VERSION = 2  # 2: shingle sets (verified removals) and a sha256 per file
INDEX_FILE = "index.json"


def read_index_file(fs, path: str, sha256: str, columns: list[str]) -> pa.Table:
    """A key file of a saved index, read only when its bytes hash to what index.json says."""
    data = fs.cat_file(path)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise InputError(f"minhash_dedup.index: {path} does not match the sha256 in {INDEX_FILE} (changed or "
                         f"damaged since it was saved); rebuild the index with save_index")
    return read_table_bytes(data, columns=columns)


@dataclass
class SavedIndex:
    """A folder of bucket keys and shingle sets from earlier runs: `index.json` (the LSH parameters,
    the files with their rows and sha256) and Parquet files with the kept documents' `id`, `bands`
    and `shingles`."""

    fs: Any
    root: str
    meta: dict

    @classmethod
    def open(cls, url: str, storage_options: dict, expected: dict, verify: bool) -> "SavedIndex":
        fs, root = filesystem(url, storage_options)
        root = root.rstrip("/")
        try:
            meta = read_json(fs, f"{root}/{INDEX_FILE}")
        except FileNotFoundError:
            raise InputError(f"minhash_dedup.index: no {INDEX_FILE} at {url} (write one with save_index)") from None
        if meta.get("version") != INDEX_VERSION:
            raise InputError(f"minhash_dedup.index: {url} is an index of version {meta.get('version')!r}, this "
                             f"ylink reads version {INDEX_VERSION} (with shingle sets, to verify removals); rebuild "
                             f"it with save_index")
        differ = {k: (meta.get(k), v) for k, v in expected.items() if meta.get(k) != v}
        if differ:
            said = ", ".join(f"{k}={a!r} (this op: {b!r})" for k, (a, b) in differ.items())
            raise InputError(f"minhash_dedup.index: {url} was built with {said}; use the same parameters")
        if verify and not meta.get("shingles"):
            raise InputError(f"minhash_dedup.index: {url} was saved with verify: false (no shingle sets); "
                             f"rebuild it with verify: true, or set verify: false here too")
        return cls(fs, root, meta)

    def entries(self, other_than: str) -> list[dict]:
        """index.json's file entries, less those of the run `other_than` (its earlier saves: an entry
        names its run, or, saved before entries did, carries the run's stamp in its file name)."""
        stamp = f"keys-{run_stamp(other_than)}-"
        return [f for f in self.meta["files"]
                if f.get("run", other_than if f["path"].startswith(stamp) else None) != other_than]

    def files(self, other_than: str) -> list[tuple[str, int, int, str]]:
        """(path, first document number, rows, sha256) per key file, less the run `other_than`'s."""
        out, first = [], 0
        for f in self.entries(other_than):
            out.append((f"{self.root}/{f['path']}", first, int(f["rows"]), f["sha256"]))
            first += int(f["rows"])
        return out

    def copy_to(self, fs, root: str, other_than: str) -> list[dict]:
        """The entries (less the run `other_than`'s) for an index at `root`, their files copied there
        (each checked against its sha256) when it is another folder."""
        same = fs is self.fs and root == self.root
        entries = self.entries(other_than)
        for f in entries:
            if not same:
                data = self.fs.cat_file(f"{self.root}/{f['path']}")
                if hashlib.sha256(data).hexdigest() != f["sha256"]:
                    raise InputError(f"minhash_dedup.index: {self.root}/{f['path']} does not match its sha256; "
                                     f"rebuild the index with save_index")
                with atomic_write(fs, f"{root}/{f['path']}") as out:
                    out.write(data)
        return [dict(f) for f in entries]


def _emit_index_keys(fs, path: str, sha256: str, first: int, rows: int, partitions: int, work_fs, work: str
                     ) -> int:
    """An index file's bucket rows (its documents first in every bucket: node < 0), by key partition."""
    table = read_index_file(fs, path, sha256, ["bands", "id"])
    nodes = -1 - first - np.arange(rows, dtype=np.int64)
    keys = band_rows(table.column("bands"))
    width = keys.shape[1]
    flat = keys.reshape(-1)
    keys = pa.table({"key": flat, "node": np.repeat(nodes, width), "priority": np.zeros(flat.size),
                     "ident": np.repeat(identities(table.column("id").to_pylist()), width)})
    name = path.rsplit("/", 1)[-1].removesuffix(".parquet")
    for q, part in _split_by_partition(keys, flat % np.uint64(partitions), partitions):
        _write(work_fs, f"{work}/buckets/to-{q:05d}/index-{name}.arrow", part)
    return int(flat.size)


def _write_index_part(run_fs: fsspec.AbstractFileSystem, paths: list[str], cols: list[str], dropped: list[int], fs,
                      path: str) -> dict:
    table = read_key_columns(run_fs, paths, cols)
    keep = np.asarray(table.column(cols[0]).is_valid())
    keep[np.asarray(dropped, np.int64)] = False
    table = table.filter(pa.array(keep))
    name = path.rsplit("/", 1)[-1]
    if not table.num_rows:
        return {"path": name, "rows": 0}
    out = {"id": table.column("id"), "bands": table.column(cols[0])}
    if len(cols) > 2:
        out["shingles"] = table.column(cols[2])
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(out), sink, compression="lz4")
    data = sink.getvalue().to_pybytes()
    with atomic_write(fs, path) as f:
        f.write(data)
    return {"path": name, "rows": table.num_rows, "sha256": hashlib.sha256(data).hexdigest()}
