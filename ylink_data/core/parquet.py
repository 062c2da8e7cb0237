"""Reading a Parquet file whole: `read_table(fs, path)`, `read_table_bytes(data)`.

`pyarrow.parquet.read_table` over a Python object (an fsspec file, a buffer of Python bytes) leaves
work to Arrow's thread pools, pre-buffered reads and column decoding, whose tasks may drop the last
reference to that object after the call has returned. When the interpreter exits meanwhile, the
pool's thread needs the GIL to release it, which is gone: the process aborts with "terminate called
without an active exception" (exit status 134, apache/arrow#34314 and #39162) after its work is
done. One run in three of getting-started's `open_run(...).rejected(...)` snippet did.

So a local file is read by its path (Arrow's own file: no Python object, its threads as usual),
and any other source without pre-buffering or threads, in the calling thread.
tests/test_parquet_reads.py keeps the package's whole-file reads here."""
from __future__ import annotations

from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.storage import is_local


def read_table(fs: fsspec.AbstractFileSystem, path: str, **kwargs: Any) -> pa.Table:
    """The Parquet file at `path` on `fs` (`pyarrow.parquet.read_table`'s keyword arguments)."""
    if is_local(fs):
        return pq.read_table(path, **kwargs)
    with fs.open(path, "rb") as f:
        return pq.read_table(f, pre_buffer=False, use_threads=False, **kwargs)


def read_table_bytes(data: bytes, **kwargs: Any) -> pa.Table:
    """A Parquet file held in memory, read in the calling thread."""
    return pq.read_table(pa.BufferReader(data), pre_buffer=False, use_threads=False, **kwargs)


__all__ = ["read_table", "read_table_bytes"]
