"""The reader registry: every `input.format` value maps to one `Reader`, declared in one module of
`formats/`. A reader says which file extensions it recognises (for `format: auto`), whether a file's
first bytes are its format, how it cuts a file into splits and how it reads a split. The values of
`input.format`, detection by extension and the "cannot tell the format" error all come from here, so
adding an input format is one module in `formats/` with one `@register_reader` class.

Readers are small and light to import (their parsers are imported when a split is read): validating a
config lists the formats without loading Arrow, warcio or PDFium.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from ylink_data.io.readers.base import Bad, Record, Skip, Split

if TYPE_CHECKING:
    from ylink_data.io.listing import InputFile

# Not a format: `input.format: auto` picks the reader by extension, then by the file's first bytes.
AUTO = "auto"
# Whole-file compression, recognised by the last extension (`docs.jsonl.zst`); a reader sees the file
# decompressed (open_split), except WARC, whose gzip is per record.
COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
# The first bytes of compressed files: a file that starts so is no format's text, whatever its name
# or input.format say. The first four are those of COMPRESSION; the others ylink does not decompress.
MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz",
         b"\x04\x22\x4d\x18": "lz4", b"\x02\x21\x4c\x18": "lz4", b"7z\xbc\xaf\x27\x1c": "7z",
         b"\xff\x06\x00\x00sNaPpY": "snappy", b"Rar!\x1a\x07": "rar"}
# How to undo each: what the error about a compressed file that ylink cannot read says.
UNDO = {"lz4": "lz4 -d", "7z": "7z x", "snappy": "python -m snappy -d", "rar": "unrar x"}


def compression_of_head(head: bytes) -> str | None:
    """The compression whose magic bytes `head` starts with, if any."""
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


def compressed_problem(url: str, compression: str) -> str:
    """Why a file whose first bytes are `compression`'s cannot be read as it is named, and the fix."""
    exts: dict[str, str] = {}
    for ext, name in COMPRESSION.items():
        exts.setdefault(name, ext)
    known = ", ".join(f"{name} ({ext})" for name, ext in exts.items())
    if compression in exts:
        return (f"{url} is {compression}-compressed, and its name says neither that nor its format; name it so "
                f"(e.g. docs.jsonl{exts[compression]}), or set input.format to read it decompressed")
    return (f"{url} is {compression}-compressed, which ylink does not decompress (it reads {known}, by the file "
            f"name's last extension); decompress it first ({UNDO[compression]} FILE), or recompress it as one of those")


@dataclass(frozen=True)
class Planning:
    """What a reader needs to cut a file into splits: the input section (InputConfig, io/input_config.py,
    which imports this module for the formats, so it is not imported here), the bytes a task reads
    (`task_bytes`) and the storage options of a URL."""

    cfg: Any
    target: int
    storage_options_for: Callable[[str], dict[str, Any]]

    def pieces(self, size: int) -> int:
        """How many pieces a file of `size` is cut into: with input.split_bytes null, an even number
        (two workers finish a file's pieces together)."""
        n = max(1, math.ceil(size / self.target))
        return n + 1 if n > 1 and n % 2 and not self.cfg.split_bytes else n

    def byte_ranges(self, size: int | None) -> list[tuple[int, int | None]]:
        """(start, end) byte ranges of input.split_bytes, or of an even number of equal pieces of
        about `target` bytes; end None is the end of the file."""
        if self.cfg.split_bytes or not size:
            step = self.cfg.split_bytes or self.target
        else:
            step = math.ceil(size / self.pieces(size))
        if not size or size <= step:
            return [(0, None)]
        return [(s, s + step if s + step < size else None) for s in range(0, size, step)]


def whole_file(file: InputFile, fmt: str, compression: str | None) -> Split:
    """The one split of a file read whole; a finished run's shard carries what checks it (its sha256)."""
    return Split(file.url, fmt, file.size, 0, None, compression, run_shard=file.run_shard, sha256=file.sha256)


class Reader(ABC):
    """One input format. Subclasses set `format` and `extensions`, and implement `read`."""

    format: ClassVar[str]  # its `input.format` value, and the `format` of the splits it plans
    extensions: ClassVar[tuple[str, ...]] = ()  # lower case, with the dot: what `auto` recognises
    # Where the format stands in input.format's list of values (its error message, the docs): web
    # formats, tables, then documents. A reader that leaves it lists last.
    order: ClassVar[int] = 1000
    # Its records are rows of named fields (JSON objects, Parquet rows): input.text_field, url_field
    # and chat (conversations) apply, and `ylink validate` checks the field names (engine/field_check.py).
    named_fields: ClassVar[bool] = False
    # Its documents are HTML pages (WARC responses, .html files; not WET's extracted text): a text
    # filter with no `extract` before it gets a warning (engine/stage_warnings.py).
    holds_html: ClassVar[bool] = False
    # Its files are text, whatever their extension says: its `read` gives their bytes to
    # io/charset.py `sniff_text` (binary content quarantined as `binary`, UTF-16 decoded);
    # tests/chaos/test_binary_as_text.py sends every binary format to every such reader.
    holds_text: ClassVar[bool] = False
    # Read in the document reader child (io/readers/isolated.py, DocumentReader), not in-process.
    isolated: ClassVar[bool] = False

    def sniff(self, head: bytes) -> bool:
        """Whether the first KiB of a file whose name says nothing is this format."""
        return False

    def sniff_zip(self, names: list[str]) -> bool:
        """Whether a ZIP package holding these member names is this format (read only when no
        reader knows the file's first bytes)."""
        return False

    def plan(self, file: InputFile, compression: str | None, planning: Planning) -> list[Split]:
        """The splits a task reads: one whole file unless the format can be cut."""
        return [whole_file(file, self.format, compression)]

    @abstractmethod
    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        """Every record of the split, each a document (Record), not one (Skip) or unreadable (Bad)."""


READERS: dict[str, Reader] = {}


def register_reader(cls: type[Reader]) -> type[Reader]:
    """Class decorator: registers one instance of `cls` under its format."""
    if not getattr(cls, "format", None) or cls.format == AUTO:
        raise TypeError(f"{cls.__name__} needs a `format` (its input.format value, not {AUTO!r})")
    for ext in cls.extensions:
        owner = _reader_of_extension(ext)
        if ext in COMPRESSION or (owner is not None and owner.format != cls.format):
            raise TypeError(f"{cls.__name__}: extension {ext!r} is already {owner.format if owner else 'a compression'}'s")
    READERS[cls.format] = cls()
    return cls


_loaded = False


def load_readers() -> None:
    """Import every module of `formats/` once: each registers its reader(s)."""
    global _loaded
    if _loaded:
        return
    from ylink_data.io.readers import formats

    for module in pkgutil.iter_modules(formats.__path__):
        importlib.import_module(f"{formats.__name__}.{module.name}")
    _loaded = True


def readers() -> list[Reader]:
    """Every registered reader, in input.format's order."""
    load_readers()
    return sorted(READERS.values(), key=lambda r: r.order)


def reader_for(fmt: str) -> Reader | None:
    load_readers()
    return READERS.get(fmt)


def input_formats() -> tuple[str, ...]:
    """The values input.format accepts: auto, then every reader's format."""
    return (AUTO, *(r.format for r in readers()))


def format_of_extension(ext: str) -> str | None:
    """The format a file extension (".jsonl") names, or None."""
    load_readers()
    reader = _reader_of_extension(ext.lower())
    return reader.format if reader else None


def _reader_of_extension(ext: str) -> Reader | None:
    return next((r for r in READERS.values() if ext in r.extensions), None)


def sniffed_format(head: bytes, zip_names: Callable[[], list[str] | None]) -> str | None:
    """The format whose reader knows these first bytes, else, for a ZIP package, its member names
    (`zip_names`: None when it is no readable ZIP)."""
    for reader in readers():
        if reader.sniff(head):
            return reader.format
    if not head.startswith(b"PK\x03\x04"):
        return None
    names = zip_names()
    if names is None:
        return None
    return next((r.format for r in readers() if r.sniff_zip(names)), None)


def listed(formats: tuple[str, ...] | list[str], quote: bool = False) -> str:
    """"a, b or c" ("'a', 'b' or 'c'" quoted): the formats as error messages list them."""
    words = [repr(f) if quote else f for f in formats]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
