"""Gather: which reader handles which file, how a file is cut into splits, and reading a split.

One entry point, `read_split`, yields `Record` / `Skip` / `Bad` for any registered format; each
format is one `Reader` in `formats/` (registry.py says what a reader declares).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import math
import zipfile
from typing import IO, TYPE_CHECKING, Any, Iterator

import fsspec.spec

from ylink_data.core.errors import InputError
from ylink_data.core.file_errors import file_problem
from ylink_data.core.redaction import redact_url
from ylink_data.core.digest import sha256_of
from ylink_data.core.storage import filesystem
from ylink_data.io.input_versions import SplitRead
from ylink_data.io.listing import InputFile
from ylink_data.io.readers.base import Bad, Record, Skip, Split, is_io_failure
from ylink_data.io.readers.decompress import decompressed
from ylink_data.io.run_files import damaged
from ylink_data.io.readers.registry import (AUTO, COMPRESSION, Planning, compressed_problem, compression_of_head,
                                            format_of_extension, listed, reader_for, readers, sniffed_format)

if TYPE_CHECKING:
    from ylink_data.io.input_config import InputConfig

_REMOTE_BUFFER = 1 << 20
_MiB = 1 << 20
# input.split_bytes: null (the default) sizes tasks from the input: about TASKS_WANTED of them, so
# that up to 16 workers get four tasks each and the scheduler (longest first, engine/submit.py) can
# even out their ends (with one task per worker the run waits for the slowest; issue 40 measured 0.47
# efficiency on 16 CPUs with 16 tasks), but none under MIN_TASK_BYTES (a task's fixed costs: its part
# files, its marker, a round trip; ~15 ms a task over a run's phases, bench/RESULTS.md issue 40) nor
# over MAX_TASK_BYTES (memory, and a retry's lost work). The size depends on the input alone, never
# on the cluster: a run resumed on another machine plans the same tasks, and its output is the same.
TASKS_WANTED, MIN_TASK_BYTES, MAX_TASK_BYTES = 64, 2 * _MiB, 256 * _MiB


def split_extension(url: str) -> tuple[str | None, str | None]:
    """(format, compression) from a file name such as `x.warc.wet.gz` -> ("wet", "gzip")."""
    name = url.rsplit("/", 1)[-1].split("?", 1)[0].lower()
    stem, dot, ext = name.rpartition(".")
    compression = COMPRESSION.get(f".{ext}") if dot else None
    if compression:
        stem, dot, ext = stem.rpartition(".")
    return (format_of_extension(f".{ext}") if dot else None), compression


def plan_splits(files: list[InputFile], cfg: InputConfig, storage_options_for) -> list[Split]:
    """Cut each input file into the splits that tasks read, as its format's reader plans them: pieces
    of input.split_bytes, or with split_bytes null, an even number of equal pieces of about
    `task_bytes` (two workers finish a file's pieces together), where the format can be cut."""
    splits: list[Split] = []
    planning = Planning(cfg, task_bytes(files, cfg.split_bytes), storage_options_for)
    for file in files:
        try:
            planned = _plan_file(file, cfg, planning)
        except Exception as exc:  # the storage's failures, one line naming the file and the cause
            if not is_io_failure(exc):
                raise
            raise InputError(file_problem(exc, file.url)) from None
        # Each split hashes its share of the file's blocks and checks the file is what the listing saw.
        splits += [dataclasses.replace(s, piece=(i, len(planned)), listed=file.listed)
                   for i, s in enumerate(planned)]
    return splits


def _plan_file(file: InputFile, cfg: InputConfig, planning: Planning) -> list[Split]:
    named, compression = split_extension(file.url)
    fmt = named if cfg.format == AUTO else cfg.format
    if file.run_shard:  # a run's shard is Parquet of the document schema, whatever input.format says
        fmt, compression = "parquet", None
    elif named is None and compression is None:
        # A name that says nothing: its first bytes say the format, or a compression (`.jsonl.lz4`),
        # whose bytes are no format's text: one ylink decompresses is, when input.format names the
        # format; another is refused, saying how to undo it.
        head, zip_names = _head(file.url, planning.storage_options_for(file.url))
        compressed = compression_of_head(head)
        if fmt is None:
            fmt = sniffed_format(head, zip_names)
        if compressed and (fmt is None or compressed not in COMPRESSION.values()):
            raise InputError(compressed_problem(redact_url(file.url), compressed))
        if compressed:  # as a name ending in its extension would say
            compression = compressed
    if fmt is None:
        formats = [r.format for r in readers()]
        raise InputError(f"cannot tell the format of {file.url} from its name or first bytes; set "
                         f"input.format ({listed(formats)})")
    reader = reader_for(fmt)
    if reader is None:
        raise InputError(f"no reader for format {fmt!r}")
    if cfg.chat and not reader.named_fields:
        raise InputError(f"input.chat reads conversations from JSONL or Parquet rows, but {file.url} is {fmt}; "
                         f"remove it from input.paths or set input.chat: false")
    return reader.plan(file, compression, planning)


def _head(url: str, storage_options: dict[str, Any]) -> tuple[bytes, Any]:
    """A file's first KiB, and a function giving its member names if it is a ZIP package (read then)."""
    fs, path = filesystem(url, storage_options)
    with fs.open(path, "rb") as f:
        head = f.read(1024)

    def zip_names() -> list[str] | None:
        try:
            with fs.open(path, "rb") as f:
                return zipfile.ZipFile(f).namelist()
        except (zipfile.BadZipFile, OSError, EOFError):
            return None

    return head, zip_names


def task_bytes(files: list[InputFile], split_bytes: int | None) -> int:
    """How many input bytes a task reads: input.split_bytes when set, else sized from the input."""
    if split_bytes:
        return split_bytes
    total = sum(f.size or 0 for f in files)
    return min(MAX_TASK_BYTES, max(MIN_TASK_BYTES, math.ceil(total / TASKS_WANTED)))


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
def open_split(split: Split, storage_options: dict[str, Any], inline: bytes | None = None,
               reads: list[dict[str, Any]] | None = None) -> Iterator[IO[bytes]]:
    """The split's file, decompressed when the whole file is compressed (JSONL, text, HTML). A shard of
    a finished run is checked against its manifest's sha256 first (`check_run_shard`). With `reads`
    (a pipeline's task), the file is checked to be the version its listing saw, before and after it is
    read, and what was read is appended to `reads` (io/input_versions.py)."""
    fs, path = filesystem(split.url, storage_options) if inline is None else (None, split.url)
    checked = SplitRead(split, fs, path, inline) if reads is not None and split.sha256 is None else None
    if checked is not None:
        checked.before()
    if inline is not None:
        if split.sha256 is not None:
            check_run_shard(split, hashlib.sha256(inline).hexdigest())
        raw: IO[bytes] = io.BytesIO(inline)
    else:
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
    if checked is not None:
        checked.after()
        reads.append(checked.record())


def check_run_shard(split: Split, digest: str) -> None:
    """A finished run's shard whose bytes are not those its manifest vouches for (flipped in place,
    same size) fails the run in one line, as a missing or resized shard does (`fs._run_shards`):
    the run is damaged, and reading it would pass off a part of it as the whole (its rows as one
    quarantined "unreadable file", or worse, altered rows as documents)."""
    if digest != split.sha256:
        raise InputError(damaged(redact_url(split.url), f"its sha256 is not the one its run's manifest.json lists "
                                                        f"({digest[:12]}... vs {split.sha256[:12]}...)"))


def read_split(split: Split, f: IO[bytes], cfg: InputConfig) -> Iterator[Record | Skip | Bad]:
    reader = reader_for(split.format)
    if reader is None:
        raise InputError(f"no reader for format {split.format!r}")
    return reader.read(split, f, cfg)


__all__ = ["Split", "Record", "Skip", "Bad", "plan_splits", "group_splits", "open_split", "read_split",
           "split_extension", "task_bytes"]
