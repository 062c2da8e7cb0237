"""JSON Lines: one record per line, cut by byte range when uncompressed."""
from __future__ import annotations

from typing import IO, Any, Iterator

from ylink_data.io.listing import InputFile
from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.jsonl import read_jsonl
from ylink_data.io.readers.registry import Planning, Reader, register_reader, whole_file


@register_reader
class JsonlReader(Reader):
    format = "jsonl"
    holds_text = True
    extensions = (".jsonl", ".json", ".ndjson")
    order = 20
    named_fields = True

    def plan(self, file: InputFile, compression: str | None, planning: Planning) -> list[Split]:
        if compression is not None:  # a compressed stream cannot be entered in the middle
            return [whole_file(file, self.format, compression)]
        return [Split(file.url, self.format, file.size, s, e) for s, e in planning.byte_ranges(file.size)]

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        return read_jsonl(split, f, cfg.max_record_bytes, cfg.text_field, cfg.url_field, cfg.chat)
