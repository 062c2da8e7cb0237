"""WARC (and ARC, WAT) and WET files: one record per WARC record, cut by byte range."""
from __future__ import annotations

from typing import IO, Any, Iterator

from ylink_data.core.errors import InputError
from ylink_data.io.listing import InputFile
from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.registry import Planning, Reader, register_reader


@register_reader
class WarcReader(Reader):
    format = "warc"
    extensions = (".warc", ".arc", ".wat")
    order = 10
    holds_html = True

    def plan(self, file: InputFile, compression: str | None, planning: Planning) -> list[Split]:
        if compression not in (None, "gzip"):
            raise InputError(f"{file.url}: WARC files are read uncompressed or gzip-compressed per record; "
                             f"recompress it with `warcio recompress`")
        # WARC gzip is per record, read member by member: not a whole-file decompression. An
        # uncompressed WARC is cut by byte range too (warc.py: a split starts at the first
        # `WARC/1.` line at or after its start); an ARC is read whole by its first split.
        return [Split(file.url, "warc", file.size, s, e) for s, e in planning.byte_ranges(file.size)]

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        from ylink_data.io.readers.warc import read_warc  # warcio, only for runs that read WARC

        return read_warc(split, f, cfg.max_record_bytes)


@register_reader
class WetReader(WarcReader):
    """WET files are WARC files of extracted text: read by the WARC reader (their splits say "warc")."""

    format = "wet"
    extensions = (".wet",)
    order = 11
    holds_html = False
