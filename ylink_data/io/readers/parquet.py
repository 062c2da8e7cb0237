"""Parquet inputs, streamed by record batch; splittable by row group. A record's offset is its row
number in the file. A file that is not Parquet (empty, cut short, something else) is one `Bad`
naming it, data that cannot be decoded is one `Bad` at the first row not read, and a row holding
an invalid value (a string that is not UTF-8) is one `Bad` naming its column."""
from __future__ import annotations

from typing import IO, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .base import Bad, Record, Skip, Split, describe_error, is_io_failure
from .jsonl import record_from_mapping

BATCH_ROWS = 1024
# Arrow's errors for bytes that are not (valid) Parquet: ArrowInvalid, and OSError for what its
# decoder cannot read ("Couldn't deserialize thrift": pyarrow's ArrowIOError is a plain OSError,
# not an ArrowException). A storage failure is an OSError too, with an errno: is_io_failure.
_PARQUET_ERRORS = (pa.ArrowException, OSError)


def read_parquet(split: Split, f: IO[bytes], text_field: str | None, url_field: str | None,
                 chat: bool = False) -> Iterator[Record | Skip | Bad]:
    try:
        pf = pq.ParquetFile(f)
    except _PARQUET_ERRORS as exc:
        if is_io_failure(exc):
            raise
        yield Bad(0, f"unreadable Parquet file (empty, cut short, or not Parquet): {describe_error(exc)}")
        return
    groups = list(range(pf.num_row_groups))[split.start:split.end]
    row = sum(pf.metadata.row_group(i).num_rows for i in range(split.start))
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups):
            for obj in _rows(batch, row):
                yield obj if isinstance(obj, Bad) else record_from_mapping(obj, row, text_field, url_field, chat)
                row += 1
    except _PARQUET_ERRORS as exc:
        if is_io_failure(exc):
            raise
        yield Bad(row, f"unreadable Parquet data from row {row} on: {describe_error(exc)}")


def _rows(batch: pa.RecordBatch, first: int) -> list[dict | Bad]:
    """The batch's rows; a row that Arrow finds invalid is a Bad naming its column. Arrow does not
    check strings when it reads them: one that is not UTF-8 would stop the run (UnicodeDecodeError)
    on every rerun. A batch is checked whole (fast); only a batch that fails is taken row by row."""
    try:
        batch.validate(full=True)
    except pa.ArrowInvalid:
        return [_row(batch.slice(i, 1), first + i) for i in range(batch.num_rows)]
    return batch.to_pylist()


def _row(one: pa.RecordBatch, row: int) -> dict | Bad:
    for name, column in zip(one.schema.names, one.columns):
        try:
            column.validate(full=True)
        except pa.ArrowInvalid as exc:
            return Bad(row, f"invalid value in column {name!r} of row {row}: {describe_error(exc)}")
    return one.to_pylist()[0]


def row_group_count(f: IO[bytes]) -> int | None:
    """The file's row groups, or None when it is not readable Parquet (its reader says why)."""
    try:
        return pq.ParquetFile(f).num_row_groups
    except _PARQUET_ERRORS as exc:
        if is_io_failure(exc):
            raise
        return None
