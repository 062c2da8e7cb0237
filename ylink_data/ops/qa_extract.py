"""qa_extract: question–answer pairs documents already hold, one row per pair, no model
(text/transform/qa.py).

HTML or text: a document is read as HTML while it still is a page (`metadata.content_type` says
HTML, as the HTML and WARC readers set it, and no `extract` has run on it: `extract` records
`metadata.extractor`). From a page only schema.org markup is taken (`FAQPage`/`QAPage` questions in
JSON-LD and microdata, `qa_method` `jsonld` | `microdata`), so put `qa_extract` before `extract`
for web pages. Every other document (plain text, Markdown, PDF/DOCX/PPTX text, pages after
`extract`) is searched for FAQ sections (a heading or bold line ending in `?`/`？` and the text
under it: `heading`) and `Q:`/`A:`, `Question:`/`Answer:`, `问：`/`答：` pairs (`pattern`).

Each pair becomes a row with the id `<document id>#<k>` and the document's `source`, `url` and
`lang`, and the columns `question`, `answer` (tags stripped, whitespace collapsed), `context` (the
FAQ block it came from: the block's text, or for markup the page's pairs as "question\\nanswer"
paragraphs), `qa_method`, and `text` = question, a newline, answer (so text filters and dedup work on
pairs). A document without any pair is dropped as `qa_extract:none`, or with `unmatched: keep` kept as
it is, for `chunk` and `qa_generate` after it (which pass the pairs through: pipelines/fileqa.yaml).
"""
from __future__ import annotations

from typing import Any, Literal

import pyarrow as pa

from ylink_data.ops import register
from ylink_data.ops.base import KEEP_ROW, Document, DocumentSplitter, Seconds
from ylink_data.ops.extract import is_html
from ylink_data.text.transform.qa import structured_pairs, text_pairs


def reads_as_html(doc: Document) -> bool:
    """A page still in HTML: the readers marked it HTML and no `extract` has replaced its text."""
    return is_html(doc) and "extractor" not in doc.metadata


@register
class QaExtract(DocumentSplitter):
    """One row per question–answer pair a document holds; see the module docstring."""

    name = "qa_extract"
    columns = {"question": pa.string(), "answer": pa.large_string(), "context": pa.large_string(),
               "qa_method": pa.string()}

    keeps_pairs = True

    def __init__(self, time_limit_s: Seconds = 10.0, unmatched: Literal["drop", "keep"] = "drop"):
        # extruct parses a page with lxml; 10 s is far above the slowest of the FAQ pages measured
        # (bench/bench_qa_extract.py), so only a pathological page is quarantined as `timeout`.
        self.time_limit_s, self.unmatched = time_limit_s, unmatched

    def split(self, doc: Document) -> list[dict[str, Any]] | str:
        pairs = structured_pairs(doc.text, doc.url) if reads_as_html(doc) else text_pairs(doc.text)
        if not pairs:
            return KEEP_ROW if self.unmatched == "keep" else "none"
        return [{"text": f"{p.question}\n{p.answer}", "question": p.question, "answer": p.answer,
                 "context": p.context, "qa_method": p.method} for p in pairs]
