"""Word documents (.docx): one document per file, read by python-docx in the document reader child."""
from __future__ import annotations

from ylink_data.io.readers.isolated import DocumentReader, Parse
from ylink_data.io.readers.registry import register_reader


@register_reader
class DocxReader(DocumentReader):
    format = "docx"
    extensions = (".docx",)
    order = 60
    kind = ".docx"

    def sniff_zip(self, names: list[str]) -> bool:
        return any(n.startswith("word/") for n in names)

    def load(self) -> Parse:
        from ylink_data.io.readers.docx import read_docx

        return lambda split, data, o: read_docx(split, data, o.max_unpacked_bytes)
