"""Gather: which reader handles which file, how a file is cut into splits, and reading a split.

One entry point, `read_split`, yields `Record` / `Skip` / `Bad` for any supported format.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import math
import zipfile
from typing import IO, Any, Iterator

import fsspec.spec

from ylink_data.engine.config import InputConfig
from ylink_data.core.errors import InputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.digest import sha256_of
from ylink_data.core.storage import filesystem
from ylink_data.io.listing import InputFile
from ylink_data.io.readers.base import Bad, Record, Skip, Split, read_whole
from ylink_data.io.readers.decompress import decompressed
from ylink_data.io.readers.jsonl import read_jsonl
from ylink_data.io.readers.parquet import read_parquet, row_group_count
from ylink_data.io.readers.text import read_html, read_text
from ylink_data.io.readers.warc import read_warc

_REMOTE_BUFFER = 1 << 20
_MiB = 1 << 20
# input.split_bytes: null (the default) sizes tasks from the input: about TASKS_WANTED of them, so
# that two to eight workers all stay busy to the end (with n tasks on two workers, the last one runs
# alone at most 1/n of the time), but none under MIN_TASK_BYTES (a task's fixed costs: a Ray call,
# its part files, its marker) nor over MAX_TASK_BYTES (memory, and a retry's lost work). The size
# depends on the input alone, never on the cluster: a run resumed on another machine plans the
# same tasks, and its output is the same.
TASKS_WANTED, MIN_TASK_BYTES, MAX_TASK_BYTES = 16, 8 * _MiB, 256 * _MiB
_COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
_FORMATS = {
    ".warc": "warc", ".arc": "warc", ".wat": "warc",
    ".wet": "wet",
    ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl",
    ".parquet": "parquet", ".pq": "parquet",
    ".txt": "text", ".text": "text",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".md": "markdown", ".markdown": "markdown",
}
# One document per file, read whole (document.py): the file's path or URL is the document's `url`.
DOCUMENT_FORMATS = ("pdf", "docx", "pptx", "markdown")


def split_extension(url: str) -> tuple[str | None, str | None]:
    """(format, compression) from a file name such as `x.warc.wet.gz` -> ("wet", "gzip")."""
    name = url.rsplit("/", 1)[-1].split("?", 1)[0].lower()
    stem, dot, ext = name.rpartition(".")
    compression = _COMPRESSION.get(f".{ext}") if dot else None
    if compression:
        stem, dot, ext = stem.rpartition(".")
    return (_FORMATS.get(f".{ext}") if dot else None), compression


def plan_splits(files: list[InputFile], cfg: InputConfig, storage_options_for) -> list[Split]:
    """Cut each input file into the splits that tasks read: pieces of input.split_bytes, or with
    split_bytes null, an even number of equal pieces of about `task_bytes` (two workers finish a
    file's pieces together)."""
    splits: list[Split] = []
    target = task_bytes(files, cfg.split_bytes)
    for file in files:
        fmt, compression = split_extension(file.url)
        if cfg.format != "auto":
            fmt = cfg.format
        if file.run_shard:  # a run's shard is Parquet of the document schema, whatever input.format says
            fmt, compression = "parquet", None
        if fmt is None and compression is None:
            fmt = sniff_format(file.url, storage_options_for(file.url))
        if fmt is None:
            raise InputError(f"cannot tell the format of {file.url} from its name or first bytes; set "
                             f"input.format (warc, wet, jsonl, parquet, text, html, pdf, docx, pptx or markdown)")
        if fmt == "pdf" and cfg.ocr:
            from ylink_data.io.readers.ocr import tesseract

            tesseract()  # a missing binary is a config error now, not a failed task later
        if cfg.chat and fmt not in ("jsonl", "parquet"):
            raise InputError(f"input.chat reads conversations from JSONL or Parquet rows, but {file.url} is {fmt}; "
                             f"remove it from input.paths or set input.chat: false")
        size = file.size
        if fmt in ("warc", "wet"):
            if compression not in (None, "gzip"):
                raise InputError(f"{file.url}: WARC files are read uncompressed or gzip-compressed per record; "
                                 f"recompress it with `warcio recompress`")
            # WARC gzip is per record, read member by member: not a whole-file decompression. An
            # uncompressed WARC is cut by byte range too (warc.py: a split starts at the first
            # `WARC/1.` line at or after its start); an ARC is read whole by its first split.
            pieces = _byte_ranges(size, _step(size, target, cfg.split_bytes))
            splits += [Split(file.url, "warc", size, s, e) for s, e in pieces]
        elif fmt == "jsonl" and compression is None:
            pieces = _byte_ranges(size, _step(size, target, cfg.split_bytes))
            splits += [Split(file.url, fmt, size, s, e) for s, e in pieces]
        elif fmt == "parquet" and size and size > target:
            fs, path = filesystem(file.url, storage_options_for(file.url))
            with fs.open(path, "rb") as f:
                groups = row_group_count(f)
            if groups is None:  # not readable Parquet: one split, whose reader quarantines the file
                splits.append(Split(file.url, fmt, size, 0, None, compression, **_shard_of(file)))
                continue
            per = max(1, math.ceil(groups / _pieces(size, target, cfg.split_bytes)))
            splits += [Split(file.url, fmt, size, g, min(g + per, groups), **_shard_of(file))
                       for g in range(0, groups, per)]
        else:
            splits.append(Split(file.url, fmt, size, 0, None, compression, **_shard_of(file)))
    return splits


def _shard_of(file: InputFile) -> dict[str, Any]:
    """What a split of `file` carries when it is a finished run's shard: read as one, checked by sha256."""
    return {"run_shard": file.run_shard, "sha256": file.sha256}


def sniff_format(url: str, storage_options: dict[str, Any]) -> str | None:
    """pdf / docx / pptx from a file's first bytes (`%PDF-`; a ZIP holding word/ or ppt/), for
    files whose name says nothing (e.g. a URL without an extension); None otherwise."""
    fs, path = filesystem(url, storage_options)
    with fs.open(path, "rb") as f:
        head = f.read(1024)
        if b"%PDF-" in head:
            return "pdf"
        if not head.startswith(b"PK\x03\x04"):
            return None
        f.seek(0)
        try:
            names = zipfile.ZipFile(f).namelist()
        except (zipfile.BadZipFile, OSError, EOFError):
            return None
    if any(n.startswith("word/") for n in names):
        return "docx"
    if any(n.startswith("ppt/") for n in names):
        return "pptx"
    return None


def task_bytes(files: list[InputFile], split_bytes: int | None) -> int:
    """How many input bytes a task reads: input.split_bytes when set, else sized from the input."""
    if split_bytes:
        return split_bytes
    total = sum(f.size or 0 for f in files)
    return min(MAX_TASK_BYTES, max(MIN_TASK_BYTES, math.ceil(total / TASKS_WANTED)))


def _pieces(size: int, target: int, split_bytes: int | None) -> int:
    """How many pieces a file of `size` is cut into: with split_bytes null, an even number."""
    n = max(1, math.ceil(size / target))
    return n + 1 if n > 1 and n % 2 and not split_bytes else n


def _step(size: int | None, target: int, split_bytes: int | None) -> int:
    if split_bytes or not size:
        return split_bytes or target
    return math.ceil(size / _pieces(size, target, split_bytes))


def _byte_ranges(size: int | None, step: int) -> list[tuple[int, int | None]]:
    if not size or size <= step:
        return [(0, None)]
    starts = list(range(0, size, step))
    return [(s, s + step if s + step < size else None) for s in starts]


def group_splits(splits: list[Split], target_bytes: int | None, max_files: int = 512) -> list[list[Split]]:
    """Tasks: a split of a large file alone, consecutive small whole files packed together up to
    `target_bytes` (None: input.split_bytes null, sized from the input as `task_bytes` does), so
    that ten thousand small files do not become ten thousand tasks."""
    if not target_bytes:
        files = {s.url: InputFile(s.url, s.size) for s in splits}
        target_bytes = task_bytes(list(files.values()), None)
    tasks: list[list[Split]] = []
    batch: list[Split] = []
    batch_bytes = 0
    for split in splits:
        whole = split.start == 0 and split.end is None
        size = split.size or 0
        if not whole or size >= target_bytes:
            if batch:
                tasks.append(batch)
                batch, batch_bytes = [], 0
            tasks.append([split])
            continue
        if batch and (batch_bytes + size > target_bytes or len(batch) >= max_files):
            tasks.append(batch)
            batch, batch_bytes = [], 0
        batch.append(split)
        batch_bytes += size
    if batch:
        tasks.append(batch)
    return tasks


@contextlib.contextmanager
def open_split(split: Split, storage_options: dict[str, Any], inline: bytes | None = None) -> Iterator[IO[bytes]]:
    """The split's file, decompressed when the whole file is compressed (JSONL, text, HTML). A shard of
    a finished run is checked against its manifest's sha256 first (`check_run_shard`)."""
    if inline is not None:
        if split.sha256 is not None:
            check_run_shard(split, hashlib.sha256(inline).hexdigest())
        raw: IO[bytes] = io.BytesIO(inline)
    else:
        fs, path = filesystem(split.url, storage_options)
        if split.sha256 is not None:
            check_run_shard(split, sha256_of(fs, path))
        raw = fs.open(path, "rb")
        if isinstance(raw, fsspec.spec.AbstractBufferedFile):
            # Remote files (http, s3, gcs, ...) lack parts of the io interface that local files
            # have, e.g. readline(limit): a standard buffered reader gives every reader all of it.
            raw = io.BufferedReader(raw, _REMOTE_BUFFER)
    with raw:
        if split.compression:
            with decompressed(raw, split.compression) as f:
                yield f
        else:
            yield raw


def check_run_shard(split: Split, digest: str) -> None:
    """A finished run's shard whose bytes are not those its manifest vouches for (flipped in place,
    same size) fails the run in one line, as a missing or resized shard does (`fs._run_shards`):
    the run is damaged, and reading it would pass off a part of it as the whole (its rows as one
    quarantined "unreadable file", or worse, altered rows as documents)."""
    if digest != split.sha256:
        raise InputError(f"{redact_url(split.url)}: its sha256 is not the one its run's manifest.json lists "
                         f"({digest[:12]}... vs {split.sha256[:12]}...): the run was damaged after it was written; "
                         "rerun that run, or copy it again")


def read_split(split: Split, f: IO[bytes], cfg: InputConfig) -> Iterator[Record | Skip | Bad]:
    if split.format in ("warc", "wet"):
        return read_warc(split, f, cfg.max_record_bytes)
    if split.format == "jsonl":
        return read_jsonl(split, f, cfg.max_record_bytes, cfg.text_field, cfg.url_field, cfg.chat)
    if split.format == "parquet":
        return read_parquet(split, f, cfg.text_field, cfg.url_field, cfg.chat, split.run_shard)
    if split.format == "text":
        return read_text(split, f, cfg.max_record_bytes)
    if split.format == "html":
        return read_html(split, f, cfg.max_record_bytes)
    if split.format in DOCUMENT_FORMATS:
        return _read_document(split, f, cfg)
    raise InputError(f"no reader for format {split.format!r}")


def _read_document(split: Split, f: IO[bytes], cfg: InputConfig) -> Iterator[Record | Skip | Bad]:
    # Imported here: a web-crawl pipeline never starts the reader child (nor loads PDFium,
    # python-docx or python-pptx in it).
    from ylink_data.io.readers.isolated import read_document, reader_process

    reader_process().spawn()  # it loads the readers while this process reads the file
    data = read_whole(f, cfg.max_record_bytes)
    if isinstance(data, Bad):
        yield data
        return
    if not data:  # a zero-byte file is no document of any format (an interrupted copy, usually)
        yield Bad(0, f"empty file (0 bytes), not a {split.format} document; remove it or copy it again")
        return
    yield from read_document(split, data, cfg)


__all__ = ["Split", "Record", "Skip", "Bad", "plan_splits", "group_splits", "open_split", "read_split",
           "split_extension", "task_bytes"]
