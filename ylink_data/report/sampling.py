"""Reading a finished run out of core: its kept shards and `rejected/` files batch by batch, and
reproducible samples of them.

A sample is the `n` rows with the smallest hash of (seed, id): the same run and seed give the same
documents however the shards are laid out, it needs one pass and memory for `n` rows only, and a
sample of a subset (one reason) is the subset of a bigger sample.
"""
from __future__ import annotations

import hashlib
import re
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ylink_data.io.runs import Run

BATCH_ROWS = 4096
_STAGE = re.compile(r"stage(\d+)\.parquet$")
_KEY = "__sample_key"


def kept_files(run: Run) -> list[str]:
    return run.shard_paths


def rejected_files(run: Run) -> list[tuple[int | None, str]]:
    """(stage index, path) of each `rejected/` file; the index is the stage's position in
    stats.json (0 is `read`), taken from the file name."""
    out = []
    for path in run.rejected_paths:
        m = _STAGE.search(path)
        out.append((int(m.group(1)) if m else None, path))
    return out


def iter_batches(run: Run, path: str, columns: list[str] | None = None,
                 max_rows: int | None = None) -> Iterator[pa.Table]:
    """Tables of at most BATCH_ROWS rows of one Parquet file (only `columns` that exist in it),
    stopping after `max_rows` rows. Read through `Run.open`: checked against the manifest first."""
    with run.open(path) as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        wanted = None if columns is None else [c for c in columns if c in names]
        seen = 0
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
            table = pa.Table.from_batches([batch])
            if max_rows is not None and seen + table.num_rows > max_rows:
                table = table.slice(0, max_rows - seen)
            seen += table.num_rows
            if table.num_rows:
                yield table
            if max_rows is not None and seen >= max_rows:
                return


def file_schema(run: Run, path: str) -> pa.Schema:
    with run.open(path) as f:
        return pq.ParquetFile(f).schema_arrow


def reason_mask(reasons: pa.ChunkedArray | pa.Array, prefix: str) -> pa.Array:
    """Rows whose reason is `prefix` or starts with `prefix:` (`gopher_quality` matches
    `gopher_quality:word_count`)."""
    return pc.fill_null(pc.or_(pc.equal(reasons, prefix), pc.starts_with(reasons, f"{prefix}:")), False)


def sample_keys(ids: list[str], seed: int) -> pa.Array:
    salt = f"{seed}\x00".encode()
    return pa.array([int.from_bytes(hashlib.blake2b(salt + i.encode(), digest_size=8).digest(), "big")
                     for i in ids], pa.uint64())


class BottomK:
    """The `n` rows with the smallest sample keys among all tables added."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed = n, seed
        self.rows: pa.Table | None = None

    def add(self, table: pa.Table) -> None:
        if self.n <= 0 or table.num_rows == 0:
            return
        table = table.append_column(_KEY, sample_keys(table.column("id").to_pylist(), self.seed))
        self.rows = table if self.rows is None else pa.concat_tables([self.rows, table], promote_options="default")
        if self.rows.num_rows > 2 * self.n:
            self._trim()

    def _trim(self) -> None:
        assert self.rows is not None
        self.rows = self.rows.take(pc.sort_indices(self.rows, [(_KEY, "ascending")])[: self.n])

    def table(self) -> pa.Table | None:
        if self.rows is None:
            return None
        self._trim()
        return self.rows.drop_columns([_KEY])


def sample_tables(tables: Iterable[pa.Table], n: int, seed: int) -> pa.Table | None:
    sampler = BottomK(n, seed)
    for table in tables:
        sampler.add(table)
    return sampler.table()
