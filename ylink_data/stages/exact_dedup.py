"""exact_dedup: remove documents whose (normalised) text already appeared anywhere in the corpus.

Keys are 128-bit hashes computed where the documents are. Resolution is a hash-partitioned shuffle
on Ray: each task spills its keys into partition files, each partition is sorted and its repeats
marked, so memory is bounded by the partition size (`rows_per_partition`), not the corpus. The
first copy in input order (task, then row) is kept, which makes the choice deterministic.
"""
from __future__ import annotations

import hashlib
import math
import re
import unicodedata

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import PositiveInt

from ..io.parquet import ParquetFileWriter
from ..pipeline.global_phase import GlobalContext, RunLayout, read_key_columns
from . import register
from .base import GlobalOp

_SPACES = re.compile(r"\s+")


@register
class ExactDedup(GlobalOp):
    """Drops exact duplicates (reason `exact_dedup`) of `column` across the whole run."""

    name = "exact_dedup"

    def __init__(self, column: str = "text", lowercase: bool = False, collapse_whitespace: bool = True,
                 unicode_nfkc: bool = False, rows_per_partition: PositiveInt = 4_000_000):
        self.column = column
        self.lowercase = lowercase
        self.collapse_whitespace = collapse_whitespace
        self.unicode_nfkc = unicode_nfkc
        self.rows_per_partition = rows_per_partition

    def normalise(self, text: str) -> str:
        if self.unicode_nfkc:
            text = unicodedata.normalize("NFKC", text)
        if self.lowercase:
            text = text.lower()
        if self.collapse_whitespace:
            text = _SPACES.sub(" ", text).strip()
        return text

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        hashes = [hashlib.blake2b(self.normalise(t or "").encode(), digest_size=16).digest()
                  for t in table.column(self.column).to_pylist()]
        return {"hash": pa.array(hashes, pa.binary(16))}

    def resolve(self, ctx: GlobalContext) -> None:
        key = ctx.key_column("hash")
        partitions = max(1, math.ceil(ctx.total_rows / self.rows_per_partition))
        tasks = sorted(t for t in ctx.parts if ctx.rows.get(t))
        if partitions == 1:
            inputs = [[(t, ctx.parts[t]) for t in tasks]]
        else:
            spill = [(ctx.layout, t, ctx.parts[t], key, partitions, ctx.work_path("shuffle")) for t in tasks]
            written = ctx.run_tasks(_partition_keys, spill, "exact_dedup: partition keys")
            inputs = [[(t, [paths[p]]) for t, paths in written if paths[p]] for p in range(partitions)]
        args = [(ctx.layout, part_inputs, key, partitions > 1) for part_inputs in inputs]
        results = ctx.run_tasks(_find_repeats, args, "exact_dedup: find repeats")
        for p, table in enumerate(results):
            ctx.write_decisions(f"exact_dedup-{p:05d}", table)


def _partition_keys(layout: RunLayout, task: int, paths: list[str], key: str, partitions: int,
                    spill_dir: str) -> tuple[int, list[str | None]]:
    table = read_key_columns(layout, paths, [key])
    table = table.append_column("task", pa.array([task] * table.num_rows, pa.int32()))
    # The first 8 bytes of a blake2b digest are uniform: take them mod P for the partition.
    prefix = pc.binary_slice(table.column(key), 0, 8).cast(pa.binary(8))
    part_of = [int.from_bytes(b, "little") % partitions for b in prefix.to_pylist()]
    part_col = pa.array(part_of, pa.int32())
    paths_out: list[str | None] = []
    for p in range(partitions):
        rows = table.filter(pc.equal(part_col, p))
        if rows.num_rows == 0:
            paths_out.append(None)
            continue
        path = f"{spill_dir}/task-{task:05d}-p{p:05d}.parquet"
        writer = ParquetFileWriter(layout.fs, path, "lz4")
        writer.write(rows.rename_columns(["hash", "row", "task"]))
        writer.close()
        paths_out.append(path)
    return task, paths_out


def _find_repeats(layout: RunLayout, inputs: list[tuple[int, list[str]]], key: str, spilled: bool) -> pa.Table:
    tables = []
    for task, paths in inputs:
        if spilled:
            for path in paths:
                with layout.fs.open(path, "rb") as f:
                    tables.append(pq.read_table(f))
        else:
            t = read_key_columns(layout, paths, [key]).rename_columns(["hash", "row"])
            tables.append(t.append_column("task", pa.array([task] * t.num_rows, pa.int32())))
    empty = pa.table({"task": pa.array([], pa.int32()), "row": pa.array([], pa.int64()),
                      "reason": pa.array([], pa.string())})
    if not tables:
        return empty
    table = pa.concat_tables(tables).sort_by([("hash", "ascending"), ("task", "ascending"), ("row", "ascending")])
    hashes = table.column("hash")
    if table.num_rows < 2:
        return empty
    repeat = pc.equal(hashes.slice(1), hashes.slice(0, table.num_rows - 1))
    mask = pa.concat_arrays([pa.array([False]), repeat.combine_chunks()])
    dups = table.filter(mask)
    return pa.table({"task": dups.column("task").cast(pa.int32()), "row": dups.column("row").cast(pa.int64()),
                     "reason": pa.array(["exact_dedup"] * dups.num_rows, pa.string())})
