"""Evaluation sets read for decontamination: one text per item from chosen fields of a JSONL, Parquet
or CSV file (gzip and the other compressions fsspec infers from the extension), by path or fsspec
URL. Benchmark files are small (GSM8K's test set is 0.7 MB), so a file is read whole."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from ..config import did_you_mean
from ..errors import InputError
from ..redaction import redact_url
from .fs import filesystem

FORMATS = ("jsonl", "parquet", "csv")
_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".csv": "csv"}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")


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


def read_benchmark(url: str, fields: list[str], *, id_field: str | None = None, fmt: str = "auto",
                   name: str | None = None, storage_options: dict[str, Any] | None = None,
                   where: str = "benchmark") -> BenchmarkItems:
    """The items of one evaluation set. Every error is one InputError line that starts with `where`
    (the config key to fix) and names the file."""
    shown = redact_url(url)
    fmt = benchmark_format(url) if fmt == "auto" else fmt
    if fmt is None:
        raise InputError(f"{where}.path: cannot tell the format of {shown} from its name: give "
                         f"format: {' | '.join(FORMATS)}")
    try:
        fs, path = filesystem(url, storage_options)
        with fs.open(path, "rb", compression="infer") as f:
            raw = f.read()
    except FileNotFoundError:
        raise InputError(f"{where}.path: {shown} does not exist (give the path or URL of a JSONL, "
                         "Parquet or CSV file)") from None
    except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"{where}.path: cannot read {shown}: {type(exc).__name__}: {first}") from None
    rows, columns = _rows(raw, fmt, shown, where)
    for key, names in (("fields", fields), ("id_field", [id_field] if id_field else [])):
        for field_name in names:
            if field_name not in columns:
                hint = did_you_mean(field_name, columns) or ""
                raise InputError(f"{where}.{key}: {field_name!r} is not a field of {shown}{hint} "
                                 f"(its fields: {', '.join(sorted(columns)) or 'none'})")
    texts, ids = [], []
    for i, row in enumerate(rows):
        texts.append("\n".join(_text(row.get(f)) for f in fields if row.get(f) is not None))
        ids.append(str(row.get(id_field)) if id_field and row.get(id_field) is not None else str(i))
    return BenchmarkItems(name or file_name(url), texts, ids)


def _text(value: Any) -> str:
    """A field's text: strings as they are, lists (answer choices) one element a line, others as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value if v is not None)
    return json.dumps(value, ensure_ascii=False, default=str)


def _rows(raw: bytes, fmt: str, shown: str, where: str) -> tuple[list[dict[str, Any]], set[str]]:
    """(rows, the union of their field names)."""
    if fmt == "parquet":
        try:
            table = pq.read_table(io.BytesIO(raw))
        except Exception as exc:  # noqa: BLE001 -- Arrow raises several types for a damaged file
            raise InputError(f"{where}.path: {shown} is not a Parquet file: {exc}") from None
        return table.to_pylist(), set(table.column_names)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}.path: {shown} is not UTF-8 text (byte {exc.start}); is it compressed "
                         "without a .gz extension?") from None
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = list(reader)
        return rows, set(reader.fieldnames or [])
    rows, columns = [], set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}.path: {shown} line {number} is not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise InputError(f"{where}.path: {shown} line {number} is not a JSON object")
        rows.append(row)
        columns.update(row)
    return rows, columns
