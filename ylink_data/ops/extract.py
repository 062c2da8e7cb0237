"""extract: HTML documents become their main text; everything else passes through untouched.

Readers have already decoded each page (HTTP charset, then <meta>, then detection) and recorded its
content type in `metadata["content_type"]`. Only documents whose type says HTML are extracted: WET
conversion records, text files and JSONL/Parquet rows are text already and keep their text and
metadata as they are. An extracted document records its extractor in `metadata["extractor"]`.
"""
from __future__ import annotations

from pydantic import NonNegativeInt

from ylink_data.text.transform.extract import DEFAULT_EXTRACTOR, ExtractorName
from ylink_data.text.transform.extract_process import DEFAULT_TIME_LIMIT_S, ExtractorProcess
from ylink_data.ops import register
from ylink_data.ops.base import Document, DocumentMapper, Seconds
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext


@register
class Extract(DocumentMapper):
    """Main text of HTML pages. Drops a page with no main text (`extract:empty`) or with less than
    `min_chars` characters of it (`extract:too_short`). A page that takes longer than `time_limit_s`
    is quarantined with reason `timeout`: the extractor runs in a child process of the worker, killed
    if it is still on the page half a second after the limit (`text/transform/extract_process.py`), so
    no page holds its task much longer, whatever the C parsers do with it."""

    name = "extract"
    makes_text = True

    def __init__(self, extractor: ExtractorName = DEFAULT_EXTRACTOR, time_limit_s: Seconds = DEFAULT_TIME_LIMIT_S,
                 min_chars: NonNegativeInt = 0):
        self.extractor = extractor
        self.page_limit_s = time_limit_s  # enforced by the extractor process; the base's SIGALRM
        # (`time_limit_s`) would fire only after the C parsers return
        self.min_chars = min_chars
        self._process: ExtractorProcess | None = None

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        self._extractor().spawn()  # ready by the first page, which waits for it

    def teardown(self) -> None:
        if self._process is not None:
            self._process.close()

    def _extractor(self) -> ExtractorProcess:
        if self._process is None:
            self._process = ExtractorProcess(self.extractor)
        return self._process

    def map(self, doc: Document) -> Document | str:
        if not is_html(doc):
            return doc
        text, engine = self._extractor().extract(doc.text, doc.url, self.page_limit_s)
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
