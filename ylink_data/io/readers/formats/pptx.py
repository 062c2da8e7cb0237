"""PowerPoint decks (.pptx): one document per file, read by python-pptx in the document reader child."""
from __future__ import annotations

from ylink_data.io.readers.isolated import DocumentReader, Parse
from ylink_data.io.readers.registry import register_reader


@register_reader
class PptxReader(DocumentReader):
    format = "pptx"
    extensions = (".pptx",)
    order = 70
    kind = ".pptx"

    def sniff_zip(self, names: list[str]) -> bool:
        return any(n.startswith("ppt/") for n in names)

    def load(self) -> Parse:
        from ylink_data.io.readers.pptx import read_pptx

        return lambda split, data, o: read_pptx(split, data, o.max_unpacked_bytes)
