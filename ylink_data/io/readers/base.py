"""What readers yield, and the unit of work they read.

A reader turns one `Split` (a file, or a byte / row-group range of one) into a stream of
`Record` (a document), `Skip` (a record that is not a document, with the reason) and `Bad` (a record
that could not be read: it is quarantined with its error). Every record of the input is exactly one
of the three, which is what makes a run's accounting add up.
"""
from __future__ import annotations

import lzma
import zlib
from dataclasses import dataclass, field
from typing import IO, Any

import zstandard

from ylink_data.io.input_versions import Listed


@dataclass(frozen=True)
class Split:
    url: str
    format: str
    size: int | None = None
    start: int = 0  # byte offset or first row group
    end: int | None = None  # exclusive; None = to the end of the file
    compression: str | None = None  # "gzip" / "zstd" for whole-file compressed text inputs
    run_shard: bool = False  # a shard of a finished ylink run (fs.InputFile.run_shard): its columns kept
    sha256: str | None = None  # a run shard's, from its manifest: checked before a byte of it is read
    # (i, n): the i-th of the file's n splits, which hashes the i-th share of its blocks, and what the
    # listing saw of the file, which the task checks it still is (io/input_versions.py)
    piece: tuple[int, int] = (0, 1)
    listed: Listed = Listed()

    def describe(self) -> str:
        if self.start == 0 and self.end is None:
            return self.url
        return f"{self.url}[{self.start}:{self.end}]"


@dataclass(slots=True)
class Record:
    offset: int
    text: str | bytes  # bytes only when valid UTF-8 (see charset.html_text); `decoded()` for a str
    url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Counters the read stage adds up in stats.json (`skipped_part_pptx_shape`: parts of a document
    # its reader left out, document.Parts).
    counters: dict[str, int] = field(default_factory=dict)
    # The language a previous ylink run found (its shards read as input); None for other inputs.
    lang: str | None = None
    lang_score: float | None = None

    def decoded(self) -> str:
        return self.text.decode("utf-8") if isinstance(self.text, bytes) else self.text


@dataclass(slots=True)
class Skip:
    offset: int
    reason: str


# Quarantine reasons of the readers (the `reason` of a quarantine entry): `too_large` for a record
# over input.max_record_bytes or a package over input.max_unpacked_bytes, `timeout` for a document
# over input.time_limit_s, `binary` for a text file or record whose bytes are no text (a PNG named
# .html: io/charset.py sniff_text), and the document readers' `encrypted` and `needs_ocr`; anything
# else that cannot be read is `unreadable`.
UNREADABLE, TOO_LARGE, TIMEOUT, BINARY = "unreadable", "too_large", "timeout", "binary"


@dataclass(slots=True)
class Bad:
    offset: int
    error: str
    reason: str = UNREADABLE


# What a damaged compressed stream raises (gzip: EOFError, zlib.error, BadGzipFile; bz2: OSError;
# xz: LZMAError; zstd: ZstdError, or EOFError from our frame reader). A reader catches only these
# around decompression, so that its own bugs (TypeError, AttributeError...) fail loudly instead of
# being quarantined as a corrupt file; the OSErrors among them that are the storage's are told
# apart by is_io_failure.
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError, zstandard.ZstdError)


def is_io_failure(exc: BaseException) -> bool:
    """True for errors of the storage, not of the record (network, vanished file, a failed read):
    those must fail the task, so that Ray retries it and a rerun reads the file again, instead of
    quarantining good records for good."""
    if isinstance(exc, (ConnectionError, TimeoutError, FileNotFoundError, PermissionError)):
        return True
    if isinstance(exc, OSError) and exc.errno is not None:
        # A system call failed: EIO from a disk, or from s3fs, which reports the storage errors it
        # does not know as OSError(EIO). Decompressors and Arrow's Parquet decoder raise their
        # OSErrors (BadGzipFile, bz2's "Invalid data stream", "Couldn't deserialize thrift")
        # without an errno.
        return True
    module = type(exc).__module__ or ""
    return module.split(".")[0] in {"aiohttp", "botocore", "aiobotocore", "requests", "urllib3"}


def describe_error(exc: BaseException) -> str:
    """One readable line: parsers quote raw bytes in their messages, which are escaped here."""
    text = one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def one_line(text: str, limit: int = 200) -> str:
    """`text` on one line of at most `limit` characters, those that do not print escaped."""
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text[:limit])


def read_whole(f: IO[bytes], max_record_bytes: int) -> bytes | Bad:
    """The file's bytes, or why it cannot be one document."""
    try:
        data = f.read(max_record_bytes + 1)
    except DECOMPRESSION_ERRORS as exc:
        if is_io_failure(exc):
            raise
        return Bad(0, f"compressed file is truncated or corrupt: {describe_error(exc)}")
    if len(data) > max_record_bytes:
        return Bad(0, f"file larger than input.max_record_bytes ({max_record_bytes} bytes); raise it to read it",
                   TOO_LARGE)
    return data
