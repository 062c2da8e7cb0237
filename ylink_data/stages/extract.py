"""extract: HTML documents become their main text; everything else passes through untouched.

Readers have already decoded each page (HTTP charset, then <meta>, then detection) and recorded its
content type in `metadata["content_type"]`. Only documents whose type says HTML are extracted: WET
conversion records, text files and JSONL/Parquet rows are text already and keep their text and
metadata as they are. An extracted document records its extractor in `metadata["extractor"]`.
"""
from __future__ import annotations

from ..transform.extract import DEFAULT_EXTRACTOR, ExtractorName, extract_with_engine, load_extractor
from . import register
from .base import Document, DocumentMapper


@register
class Extract(DocumentMapper):
    """Main text of HTML pages. Drops a page with no main text (`extract:empty`) or with less than
    `min_chars` characters of it (`extract:too_short`); a page that takes longer than `time_limit_s`
    is quarantined with reason `timeout`, so one pathological page cannot stall its task."""

    name = "extract"

    def __init__(self, extractor: ExtractorName = DEFAULT_EXTRACTOR, time_limit_s: float = 5.0, min_chars: int = 0):
        self.extractor = extractor
        self.time_limit_s = time_limit_s
        self.min_chars = min_chars

    def setup(self) -> None:
        load_extractor(self.extractor)

    def map(self, doc: Document) -> Document | str:
        if not is_html(doc):
            return doc
        text, engine = extract_with_engine(doc.text, doc.url, self.extractor)
        text = text.strip()
        if not text:
            return "empty"
        if len(text) < self.min_chars:
            return "too_short"
        doc.text = text
        doc.metadata["extractor"] = engine
        return doc


def is_html(doc: Document) -> bool:
    """True for pages the readers marked as HTML (`text/html`, `application/xhtml+xml`)."""
    return "html" in str(doc.metadata.get("content_type") or "").lower()
