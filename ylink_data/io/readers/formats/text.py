"""Plain-text and HTML files: one document per file."""
from __future__ import annotations

from typing import IO, Any, Iterator

from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.registry import Reader, register_reader
from ylink_data.io.readers.text import read_html, read_text


@register_reader
class TextReader(Reader):
    format = "text"
    holds_text = True
    extensions = (".txt", ".text")
    order = 40

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        return read_text(split, f, cfg.max_record_bytes)


@register_reader
class HtmlReader(Reader):
    format = "html"
    holds_text = True
    extensions = (".html", ".htm", ".xhtml")
    order = 41
    holds_html = True

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        return read_html(split, f, cfg.max_record_bytes)
