"""Parquet inputs, streamed by record batch; splittable by row group. A record's offset is its row
number in the file."""
from __future__ import annotations

from typing import IO, Iterator

import pyarrow.parquet as pq

from .base import Bad, Record, Skip, Split
from .jsonl import record_from_mapping

BATCH_ROWS = 1024


def read_parquet(split: Split, f: IO[bytes], text_field: str | None, url_field: str | None) -> Iterator[Record | Skip | Bad]:
    pf = pq.ParquetFile(f)
    groups = list(range(pf.num_row_groups))[split.start:split.end]
    row = sum(pf.metadata.row_group(i).num_rows for i in range(split.start))
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups):
        for obj in batch.to_pylist():
            yield record_from_mapping(obj, row, text_field, url_field)
            row += 1


def row_group_count(f: IO[bytes]) -> int:
    return pq.ParquetFile(f).num_row_groups
