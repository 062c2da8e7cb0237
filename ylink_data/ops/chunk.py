"""chunk: long documents into chunks of a target size, one row per chunk (text/transform/chunking.py).

Cuts at Markdown headings, paragraphs and sentences (English and Chinese sentence ends), never
inside a sentence unless one sentence alone is larger than `size`; `overlap` repeats the previous
chunk's last sentences. Each chunk is a row with the id `<document id>#<k>`, the document's `source`,
`url` and `lang`, and:
- `chunk_index` (k, from 0), `heading_path` (the Markdown headings above it, outermost first),
- `chunk_start`, `chunk_end`: its span in the document's text, in characters; `chunk_overlap`: the
  characters at its start that repeat the previous chunk (so `text[chunk_overlap:]` of the chunks,
  joined in order, is the document's text),
- `page_start`, `page_end`: the pages it spans (1-based), from the document readers' page offsets
  (`metadata.page_offsets`: the character offset where each page begins); null without them.
A document whose text is only whitespace is dropped as `chunk:empty`.

Defaults (ours): 2,000 characters with 200 of overlap, about 500 English tokens, small enough for a
question-generation prompt with room for the answer; with `unit: tokens` the size and overlap count
the tokens of `tokenizer` (a tokenizer.json path or URL), as LlamaIndex's SentenceSplitter does
(1,024 / 200 by default there).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Literal

import pyarrow as pa
from pydantic import NonNegativeInt, PositiveInt

from ylink_data.core.errors import InputError
from ylink_data.text.tokens.load import load_tokenizer
from ylink_data.text.transform.chunking import chunk_text
from ylink_data.ops import register
from ylink_data.ops.base import Document, DocumentSplitter, named_files
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

PAGE_OFFSETS = "page_offsets"  # the readers' metadata key: character offset where each page begins


@register
class Chunk(DocumentSplitter):
    """One row per chunk of each document; see the module docstring."""

    name = "chunk"
    keeps_pairs = True  # question-answer rows (qa_extract's) pass through whole
    columns = {"chunk_index": pa.int32(), "heading_path": pa.list_(pa.string()), "chunk_start": pa.int64(),
               "chunk_end": pa.int64(), "chunk_overlap": pa.int32(), "page_start": pa.int32(),
               "page_end": pa.int32()}

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("tokenizer", params.get("tokenizer")) if params.get("unit") == "tokens" else []

    def __init__(self, size: PositiveInt = 2000, overlap: NonNegativeInt = 200,
                 unit: Literal["chars", "tokens"] = "chars", tokenizer: str | None = None):
        if overlap >= size:
            raise ValueError(f"overlap ({overlap}) must be smaller than size ({size})")
        if unit == "tokens" and not tokenizer:
            raise ValueError("unit: tokens needs tokenizer: the path or URL of a tokenizer.json")
        self.size, self.overlap, self.unit, self.tokenizer = size, overlap, unit, tokenizer
        self._measure = len

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        if self.unit != "tokens":
            return
        try:
            tok = load_tokenizer(self.tokenizer, ctx.storage_options(self.tokenizer)).tokenizer
        except InputError as exc:
            raise InputError(f"{self.name}.tokenizer: {exc}") from None
        self._measure = lambda text: len(tok.encode(text, add_special_tokens=False).ids)

    def split(self, doc: Document) -> list[dict[str, Any]] | str:
        if self.unit == "tokens" and self._measure is len:
            self.setup()
        text = doc.text
        chunks = chunk_text(text, self.size, self.overlap, self._measure)
        if not chunks:
            return "empty"
        offsets = doc.metadata.get(PAGE_OFFSETS)
        metadata = {k: v for k, v in doc.metadata.items() if k != PAGE_OFFSETS} or None
        rows = []
        for c in chunks:
            pages = page_range(offsets, c.start, c.end) if offsets else (None, None)
            rows.append({"text": text[c.start:c.end], "metadata": metadata, "chunk_index": c.index,
                         "heading_path": list(c.heading_path), "chunk_start": c.start, "chunk_end": c.end,
                         "chunk_overlap": c.body_start - c.start, "page_start": pages[0], "page_end": pages[1]})
        return rows


def page_range(offsets: list[int], start: int, end: int) -> tuple[int, int]:
    """The 1-based pages of the span [start, end) given where each page begins."""
    return max(1, bisect_right(offsets, start)), max(1, bisect_right(offsets, max(start, end - 1)))
