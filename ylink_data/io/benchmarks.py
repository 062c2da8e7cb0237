"""Evaluation sets read for decontamination: one text per item from chosen fields of a JSONL, Parquet
or CSV file (gzip and the other compressions fsspec infers from the extension), by path or fsspec
URL.

A benchmark can be large (a million items of 30 words is a 220 MB file), so it is read as a stream
of chunks (`iter_benchmark`): only one chunk's rows are ever Python objects. Reading the file whole,
decoding it and parsing every row first was part of the 6.8 GB peak of indexing that file in each
worker (bench/RESULTS.md, "Decontaminate index at 1M items"). Lines are split as before (at \n,
\r\n and a lone \r) but no longer at U+2028 and the other breaks of `str.splitlines`, which may
stand raw inside a JSON string. `fingerprint` is the SHA-256 of a file's bytes as stored, which
names the index built from it (`ops/decontaminate.py`)."""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator

import pyarrow.parquet as pq
from fsspec.compression import compr
from fsspec.utils import infer_compression

from ylink_data.core.errors import did_you_mean
from ylink_data.core.errors import InputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import filesystem

FORMATS = ("jsonl", "parquet", "csv")
_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".csv": "csv"}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")
# Items per chunk: 3.6 MB of text for items of 30 words. Hashing a chunk holds ~20x its text for a
# moment: a million items' build peaked at 740 MB with chunks of 65,536 items, 660-680 MB with these.
CHUNK_ITEMS = 16_384
CHUNK_BYTES = 4 << 20  # and no more text than this per chunk, whatever the items' size
_BLOCK = 1 << 20  # bytes read at a time
_BOM = b"\xef\xbb\xbf"


@dataclass
class BenchmarkItems:
    """An evaluation set's items: `texts[i]` is item i's chosen fields, each on its own line, and
    `ids[i]` names it (its `id_field` value, else its position in the file from 0)."""

    name: str
    texts: list[str]
    ids: list[str]


def file_name(url: str) -> str:
    """The last part of a path or URL, without a query: the benchmark's name in drop reasons."""
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def benchmark_format(url: str) -> str | None:
    """`jsonl`, `parquet` or `csv` from the file name (a compression extension after it is allowed)."""
    name = file_name(url).lower()
    for ext in _COMPRESSIONS:
        name = name.removesuffix(ext)
    return next((fmt for ext, fmt in _EXTENSIONS.items() if name.endswith(ext)), None)


def resolve_format(url: str, fmt: str = "auto", where: str = "benchmark") -> str:
    """The format to read `url` as (`fmt`, or the file name's when `auto`)."""
    resolved = benchmark_format(url) if fmt == "auto" else fmt
    if resolved is None:
        raise InputError(f"{where}.path: cannot tell the format of {redact_url(url)} from its name: give "
                         f"format: {' | '.join(FORMATS)}")
    return resolved


@contextlib.contextmanager
def _opened(url: str, storage_options: dict[str, Any] | None, where: str) -> Iterator[tuple[BinaryIO, str]]:
    """The file's bytes as stored (not decompressed) and its path; a missing or unreadable file is one
    InputError line. Errors of the body of the `with` pass through."""
    shown = redact_url(url)
    try:
        fs, path = filesystem(url, storage_options)
        f = fs.open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{where}.path: {shown} does not exist (give the path or URL of a JSONL, "
                         "Parquet or CSV file)") from None
    except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types
        raise _unreadable(where, shown, exc) from None
    with f:
        yield f, path


def _unreadable(where: str, shown: str, exc: BaseException) -> InputError:
    first = (str(exc).strip().splitlines() or [""])[0]
    return InputError(f"{where}.path: cannot read {shown}: {type(exc).__name__}: {first}")


def fingerprint(url: str, *, storage_options: dict[str, Any] | None = None, where: str = "benchmark") -> str:
    """SHA-256 (hex) of the file's bytes as stored, read a block at a time: any change to the file
    changes it, whatever its modification time says (0.12 s for 220 MB on the bench machine)."""
    digest = hashlib.sha256()
    with _opened(url, storage_options, where) as (f, _):
        try:
            while block := f.read(_BLOCK):
                digest.update(block)
        except Exception as exc:  # noqa: BLE001 -- as in _opened
            raise _unreadable(where, redact_url(url), exc) from None
    return digest.hexdigest()


def iter_benchmark(url: str, fields: list[str], *, id_field: str | None = None, fmt: str = "auto",
                   storage_options: dict[str, Any] | None = None, where: str = "benchmark",
                   chunk_items: int = CHUNK_ITEMS) -> Iterator[tuple[list[str], list[str]]]:
    """The items of one evaluation set as chunks of (texts, ids), in file order. Every error is one
    InputError line that starts with `where` (the config key to fix) and names the file; a field that
    no row of a JSONL file has is found at its end (rows may differ in their fields)."""
    shown = redact_url(url)
    fmt = resolve_format(url, fmt, where)
    with _opened(url, storage_options, where) as (raw, path):
        compression = infer_compression(path)
        f = compr[compression](raw, mode="rb") if compression else raw
        if fmt == "parquet":
            rows, columns = _parquet_rows(f, bool(compression), fields, id_field, shown, where, chunk_items), None
        elif fmt == "csv":
            rows, columns = _csv_rows(f, shown, where, fields, id_field), None
        else:
            columns = set()
            rows = _jsonl_rows(f, shown, where, columns)
        texts: list[str] = []
        ids: list[str] = []
        size = 0
        try:
            for i, row in enumerate(rows):
                text = "\n".join(_text(row.get(name)) for name in fields if row.get(name) is not None)
                texts.append(text)
                ids.append(str(row.get(id_field)) if id_field and row.get(id_field) is not None else str(i))
                size += len(text)
                if len(texts) >= chunk_items or size >= CHUNK_BYTES:
                    yield texts, ids
                    texts, ids, size = [], [], 0
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a read that fails half-way (network, damaged gzip)
            raise _unreadable(where, shown, exc) from None
        if columns is not None:
            _check_fields(columns, fields, id_field, shown, where)
        if texts:
            yield texts, ids


def read_benchmark(url: str, fields: list[str], *, id_field: str | None = None, fmt: str = "auto",
                   name: str | None = None, storage_options: dict[str, Any] | None = None,
                   where: str = "benchmark") -> BenchmarkItems:
    """The items of one evaluation set, all in memory (`iter_benchmark` for a large file)."""
    texts: list[str] = []
    ids: list[str] = []
    for chunk_texts, chunk_ids in iter_benchmark(url, fields, id_field=id_field, fmt=fmt,
                                                 storage_options=storage_options, where=where):
        texts += chunk_texts
        ids += chunk_ids
    return BenchmarkItems(name or file_name(url), texts, ids)


def _check_fields(columns: set[str] | list[str], fields: list[str], id_field: str | None, shown: str,
                  where: str) -> None:
    for key, names in (("fields", fields), ("id_field", [id_field] if id_field else [])):
        for field_name in names:
            if field_name not in columns:
                hint = did_you_mean(field_name, list(columns)) or ""
                raise InputError(f"{where}.{key}: {field_name!r} is not a field of {shown}{hint} "
                                 f"(its fields: {', '.join(sorted(columns)) or 'none'})")


def _text(value: Any) -> str:
    """A field's text: strings as they are, lists (answer choices) one element a line, others as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value if v is not None)
    return json.dumps(value, ensure_ascii=False, default=str)


def _lines(f: BinaryIO, shown: str, where: str) -> Iterator[str]:
    """The file's text lines with their ends, as `io.StringIO(text, newline="")` splits a decoded
    text (at \\n, \\r\\n and a lone \\r), decoded as UTF-8 one line at a time; a byte order mark at the
    start is dropped. A line that is not UTF-8 is one InputError naming its byte offset in the file."""
    offset = 0
    pending: list[bytes] = []  # the start of a line that runs on into the next block
    first = True
    while True:
        block = f.read(_BLOCK)
        if not block:
            break
        if first:
            first = False
            while len(block) < len(_BOM) and (more := f.read(_BLOCK)):
                block += more  # a short read must not split the mark
            if block.startswith(_BOM):
                block, offset = block[len(_BOM):], len(_BOM)
                if not block:
                    continue
        if pending and pending[-1].endswith(b"\r") and not block.startswith(b"\n"):
            line = b"".join(pending)  # a lone \r ended the last block's line
            pending = []
            yield _decoded(line, offset, shown, where)
            offset += len(line)
        pending.append(block)
        if b"\n" not in block and b"\r" not in block:
            continue
        data = b"".join(pending)
        pending = []
        start = 0
        for end in _line_ends(data):
            if end == len(data) and data.endswith(b"\r"):
                break  # a \n may follow in the next block
            yield _decoded(data[start:end], offset, shown, where)
            offset += end - start
            start = end
        if start < len(data):
            pending.append(data[start:])
    if pending:
        yield _decoded(b"".join(pending), offset, shown, where)


def _line_ends(data: bytes) -> Iterator[int]:
    """Where each line of `data` ends (after its \n, \r\n or \r). Each search starts where the last
    one stopped, so a block is scanned once (a \r, rare, is looked for ahead only once per \r)."""
    size = len(data)
    at, n, r = 0, data.find(b"\n"), data.find(b"\r")
    while n >= 0 or r >= 0:
        if r < 0 or 0 <= n < r:
            at = n + 1
        else:
            at = r + 2 if data[r + 1:r + 2] == b"\n" else r + 1
        yield at
        if n >= 0 and n < at:
            n = data.find(b"\n", at) if at < size else -1
        if r >= 0 and r < at:
            r = data.find(b"\r", at) if at < size else -1


def _decoded(line: bytes, offset: int, shown: str, where: str) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}.path: {shown} is not UTF-8 text (byte {offset + exc.start}); is it compressed "
                         "without a .gz extension?") from None


def _jsonl_rows(f: BinaryIO, shown: str, where: str, columns: set[str]) -> Iterator[dict[str, Any]]:
    """The rows of a JSONL file; `columns` gathers the union of their field names as they come."""
    for number, line in enumerate(_lines(f, shown, where), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}.path: {shown} line {number} is not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise InputError(f"{where}.path: {shown} line {number} is not a JSON object")
        columns.update(row)
        yield row


def _csv_rows(f: BinaryIO, shown: str, where: str, fields: list[str], id_field: str | None) -> Iterator[dict[str, Any]]:
    reader = csv.DictReader(_lines(f, shown, where))
    _check_fields(reader.fieldnames or [], fields, id_field, shown, where)
    yield from reader


def _parquet_rows(f: BinaryIO, compressed: bool, fields: list[str], id_field: str | None, shown: str, where: str,
                  batch_rows: int) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet file, a batch at a time, with only the columns asked for. A compressed
    Parquet file (rare: Parquet compresses its pages) cannot be read at random, so it is
    decompressed into memory first."""
    try:
        parquet = pq.ParquetFile(io.BytesIO(f.read()) if compressed else f)
    except Exception as exc:  # noqa: BLE001 -- Arrow raises several types for a damaged file
        raise InputError(f"{where}.path: {shown} is not a Parquet file: {exc}") from None
    _check_fields(parquet.schema_arrow.names, fields, id_field, shown, where)
    columns = list(dict.fromkeys([*fields, *([id_field] if id_field else [])]))
    try:
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=columns):
            yield from batch.to_pylist()
    except Exception as exc:  # noqa: BLE001 -- as above, for a damaged row group
        raise InputError(f"{where}.path: {shown} is not a Parquet file: {exc}") from None
