"""Parquet inputs, streamed by record batch; splittable by row group. A record's offset is its row
number in the file. A file that is not Parquet (empty, cut short, something else) is one `Bad`
naming it, data that cannot be decoded is one `Bad` at the first row not read, and a row holding
an invalid value (a string that is not UTF-8) is one `Bad` naming its column."""
from __future__ import annotations

import contextlib
import json
from typing import IO, Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.io.readers.base import Bad, Record, Skip, Split, describe_error, is_io_failure
from ylink_data.io.readers.jsonl import record_from_mapping

BATCH_ROWS = 1024
# Arrow's errors for bytes that are not (valid) Parquet: ArrowInvalid, and OSError for what its
# decoder cannot read ("Couldn't deserialize thrift": pyarrow's ArrowIOError is a plain OSError,
# not an ArrowException). A storage failure is an OSError too, with an errno: is_io_failure.
_PARQUET_ERRORS = (pa.ArrowException, OSError)


def read_parquet(split: Split, f: IO[bytes], text_field: str | None, url_field: str | None,
                 chat: bool = False, run_shard: bool = False) -> Iterator[Record | Skip | Bad]:
    """The file's rows as records: the text field becomes `text` and every other field `metadata`
    (jsonl.record_from_mapping), or, for a shard of a finished ylink run (`run_shard`), the row as
    the run wrote it (`run_record`)."""
    try:
        pf = pq.ParquetFile(f)
    except _PARQUET_ERRORS as exc:
        if is_io_failure(exc):
            raise
        yield Bad(0, f"unreadable Parquet file (empty, cut short, or not Parquet): {describe_error(exc)}")
        return
    groups = list(range(pf.num_row_groups))[split.start:split.end]
    row = sum(pf.metadata.row_group(i).num_rows for i in range(split.start))
    # A run's list and struct columns (token ids, signatures) are left out unread (`run_record`).
    columns = [f.name for f in pf.schema_arrow if not pa.types.is_nested(f.type)] if run_shard else None
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=columns):
            for obj in _rows(batch, row):
                if isinstance(obj, Bad):
                    yield obj
                elif run_shard:
                    yield run_record(obj, row)
                else:
                    yield record_from_mapping(obj, row, text_field, url_field, chat)
                row += 1
    except _PARQUET_ERRORS as exc:
        if is_io_failure(exc):
            raise
        yield Bad(row, f"unreadable Parquet data from row {row} on: {describe_error(exc)}")


def run_record(row: dict[str, Any], offset: int) -> Record | Skip | Bad:
    """A row of a ylink run's shard as the document it was: `text`, `url`, `lang` and `lang_score` as
    they are, `metadata` (a JSON object) back as the record's metadata. The row's other columns that
    hold one value (a string, number or boolean: its previous `id` and `source`, measures and scores
    ops added) join the metadata under their own names, where it has no such key already; list and
    struct columns (token ids, signatures) are left out. input.text_field and url_field do not apply:
    a shard's columns are the document schema's."""
    if "text" not in row:
        return Bad(offset, f"no column 'text' (columns: {', '.join(list(row)[:8])}); not a ylink run's shard?")
    text = row["text"]
    if text is None or (isinstance(text, str) and not text.strip()):
        return Skip(offset, "empty")
    if not isinstance(text, str):
        return Bad(offset, f"column 'text' is {type(text).__name__}, not a string")
    metadata: Any = row.get("metadata")
    try:
        metadata = json.loads(metadata) if isinstance(metadata, str) else None
    except ValueError:
        metadata = {"metadata": row["metadata"]}  # not written by ylink: kept as it is
    metadata = metadata if isinstance(metadata, dict) else {}
    for name, value in row.items():
        if name not in _RUN_COLUMNS and isinstance(value, (str, int, float, bool)):
            metadata.setdefault(name, value)
    url, lang, score = row.get("url"), row.get("lang"), row.get("lang_score")
    return Record(offset, text, url if isinstance(url, str) else None, metadata,
                  lang=lang if isinstance(lang, str) else None,
                  lang_score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None)


_RUN_COLUMNS = ("text", "url", "lang", "lang_score", "metadata")  # a run shard's columns a Record holds


def _rows(batch: pa.RecordBatch, first: int) -> list[dict | Bad]:
    """The batch's rows; a row that Arrow finds invalid is a Bad naming its column. Arrow does not
    check strings when it reads them: one that is not UTF-8 would stop the run (UnicodeDecodeError)
    on every rerun. A batch is checked whole (fast); only a batch that fails is taken row by row.
    Byte columns are read as text where they are UTF-8 (`_as_text`)."""
    batch, undecoded = _as_text(batch)
    try:
        batch.validate(full=True)
    except pa.ArrowInvalid:
        rows = [_row(batch.slice(i, 1), first + i) for i in range(batch.num_rows)]
    else:
        rows = batch.to_pylist()
    for row in rows:
        for name in undecoded if isinstance(row, dict) else ():
            if isinstance(row[name], bytes):
                with contextlib.suppress(UnicodeDecodeError):
                    row[name] = row[name].decode("utf-8")
    return rows


_TEXT_OF = {pa.binary(): pa.string(), pa.large_binary(): pa.large_string(), pa.binary_view(): pa.string_view()}


def _as_text(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[str]]:
    """Older Spark and Hive write strings as BINARY without the UTF-8 annotation, so Arrow reads them
    as bytes and every record would be quarantined ("is bytes, not a string"). A byte column that is
    UTF-8 throughout becomes a string column (a view of the same buffers); the names of those that
    are not are returned, to be decoded value by value: what is UTF-8 becomes text, and only a value
    that is not stays bytes (a text field so is quarantined; a metadata field is kept as it is)."""
    columns, undecoded, changed = list(batch.columns), [], False
    for i, (field, column) in enumerate(zip(batch.schema, columns)):
        text_type = _TEXT_OF.get(field.type)
        if text_type is None:
            continue
        as_text = column.view(text_type)
        try:
            as_text.validate(full=True)
        except pa.ArrowInvalid:
            undecoded.append(field.name)
            continue
        columns[i], changed = as_text, True
    if not changed:
        return batch, undecoded
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names), undecoded


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
