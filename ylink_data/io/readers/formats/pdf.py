"""PDF files: one document per file, read by PDFium in the document reader child."""
from __future__ import annotations

from ylink_data.io.listing import InputFile
from ylink_data.io.readers.base import Split
from ylink_data.io.readers.isolated import DocumentReader, Parse
from ylink_data.io.readers.registry import Planning, register_reader


@register_reader
class PdfReader(DocumentReader):
    format = "pdf"
    extensions = (".pdf",)
    order = 50
    kind = "PDF"

    def sniff(self, head: bytes) -> bool:
        return b"%PDF-" in head  # anywhere in the first KiB, as PDF readers accept it

    def plan(self, file: InputFile, compression: str | None, planning: Planning) -> list[Split]:
        if planning.cfg.ocr:
            from ylink_data.io.readers.ocr import tesseract

            tesseract()  # a missing binary is a config error now, not a failed task later
        return super().plan(file, compression, planning)

    def load(self) -> Parse:
        from ylink_data.io.readers.pdf import read_pdf

        return lambda split, data, o: read_pdf(split, data, o.ocr, o.ocr_languages, o.max_unpacked_bytes)
