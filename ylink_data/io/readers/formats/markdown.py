"""Markdown files: one document per file, its title the first heading (in the document reader child,
as every document format, so that one time limit and one quarantine rule hold for all of them)."""
from __future__ import annotations

from ylink_data.io.readers.isolated import DocumentReader, Parse
from ylink_data.io.readers.registry import register_reader


@register_reader
class MarkdownReader(DocumentReader):
    format = "markdown"
    holds_text = True
    extensions = (".md", ".markdown")
    order = 80
    kind = "Markdown"

    def load(self) -> Parse:
        from ylink_data.io.readers.markdown import read_markdown

        return lambda split, data, o: read_markdown(split, data)
