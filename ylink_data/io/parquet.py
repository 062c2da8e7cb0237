"""Parquet files written the way every output of a run is: atomically, with sha256 and byte counts
computed while writing."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.schema import INTERNAL_PREFIX
from ylink_data.core.storage import HashingWriter, atomic_write

ROW_GROUP_ROWS = 4096
# Long free text neither dictionary-encodes nor benefits from min/max statistics; computing them
# costs a scan of every page. Short columns (lang, source...) keep both.
_PLAIN_COLUMNS = {"text", "metadata", "id", "url"}


@dataclass(frozen=True)
class WrittenFile:
    path: str
    rows: int
    bytes: int
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256}


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """The dotted paths of a schema's leaf columns, as Parquet names them."""
    with pa.BufferOutputStream() as sink:
        pq.write_table(schema.empty_table(), sink)
        buf = sink.getvalue()
    meta = pq.ParquetFile(pa.BufferReader(buf)).metadata
    return [meta.schema.column(i).path for i in range(meta.num_columns)]


class ParquetFileWriter:
    """One Parquet file, published only when `close()` succeeds."""

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str, compression: str = "zstd"):
        self.path = path
        self._stack = contextlib.ExitStack()
        self._out = HashingWriter(self._stack.enter_context(atomic_write(fs, path)))
        self._compression = None if compression == "none" else compression
        self._writer: pq.ParquetWriter | None = None
        self.rows = 0

    @property
    def schema(self) -> pa.Schema | None:
        return self._writer.schema if self._writer else None

    @property
    def bytes(self) -> int:
        return self._out.bytes

    def _open(self, schema: pa.Schema) -> pq.ParquetWriter:
        # internal columns (a global op's keys: hashes, shingle sets) neither repeat nor get filtered
        small = [n for n in schema.names if n not in _PLAIN_COLUMNS and not n.startswith(INTERNAL_PREFIX)]
        # Internal columns (a run's parts only, never published) are hashes: compressing them only
        # costs time. Leaf paths, as Parquet names the columns of nested types.
        compression = self._compression
        if any(n.startswith(INTERNAL_PREFIX) for n in schema.names):
            leaves = _leaf_paths(schema)
            compression = {path: "none" if path.startswith(INTERNAL_PREFIX) else (self._compression or "none")
                           for path in leaves}
        return pq.ParquetWriter(self._out, schema, compression=compression, use_dictionary=small,
                                write_statistics=small)

    def write(self, table: pa.Table) -> None:
        if self._writer is None:
            self._writer = self._open(table.schema)
        elif table.schema != self._writer.schema:
            table = table.select(self._writer.schema.names).cast(self._writer.schema)
        self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.rows += table.num_rows

    def close(self, empty_schema: pa.Schema | None = None) -> WrittenFile:
        """Publish the file. One that got no rows holds `empty_schema` and no row group (a row group
        of no rows is one that some readers, `datasets` among them, cannot read)."""
        if self._writer is None:
            self._writer = self._open(empty_schema or pa.schema([]))
        self._writer.close()
        self._stack.close()
        return WrittenFile(self.path, self.rows, self._out.bytes, self._out.sha256.hexdigest())

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            if self._writer is not None:
                self._writer.close()
        self._stack.__exit__(RuntimeError, RuntimeError("aborted"), None)


def file_schema(fs: fsspec.AbstractFileSystem, path: str) -> pa.Schema:
    """The schema of a Parquet file, from its footer."""
    with fs.open(path, "rb") as f:
        return pq.read_schema(f)


def union_schema(schemas: list[pa.Schema], what: str) -> pa.Schema:
    """One schema for files that differ in columns (each stage's rejected rows carry its own
    evidence; a column all null in one file is of type null): every column of any of them, in the
    order they first appear, of the type that holds each file's values. Columns of types that no
    one type holds are an error naming them (`what`: the files, for the message)."""
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(f"{what} hold a column of types that no one type holds ({first})") from None


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with exactly `schema`'s columns, in its order: its own cast to the schema's types, the
    ones it lacks all null."""
    if table.schema == schema:
        return table
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def rewrite(fs: fsspec.AbstractFileSystem, sources: list[str], target: str, schema: pa.Schema,
            compression: str = "zstd") -> WrittenFile:
    """`target` made of the rows of `sources` in order, each row group conformed to `schema`
    (`conform`: a column it lacks null, one it does not name left out); none makes a file with no rows."""
    writer = ParquetFileWriter(fs, target, compression)
    try:
        for source in sources:
            with fs.open(source, "rb") as f:
                pf = pq.ParquetFile(f)
                for i in range(pf.num_row_groups):
                    writer.write(conform(pf.read_row_group(i), schema))
        return writer.close(schema)
    except BaseException:
        writer.abort()
        raise


class RollingParquetWriter:
    """Parquet files of about `target_bytes` each: a new file starts once the current one is full."""

    def __init__(self, fs: fsspec.AbstractFileSystem, path_for, target_bytes: int, compression: str = "zstd"):
        self._fs, self._path_for, self._target = fs, path_for, target_bytes
        self._compression = compression
        self._current: ParquetFileWriter | None = None
        self.files: list[WrittenFile] = []

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._current is None:
            self._current = ParquetFileWriter(self._fs, self._path_for(len(self.files)), self._compression)
        self._current.write(table)
        if self._current.bytes >= self._target:
            self.files.append(self._current.close())
            self._current = None

    def close(self) -> list[WrittenFile]:
        if self._current is not None:
            self.files.append(self._current.close())
            self._current = None
        return self.files

    def abort(self) -> None:
        if self._current is not None:
            self._current.abort()
