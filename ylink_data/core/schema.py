"""The one Arrow schema every document is stored in, and how document ids are made.

Ids are a pure function of where a record came from (the input file and the record's offset in
it), so the same input gives the same ids on every rerun, however the work is split or scheduled.
"""
from __future__ import annotations

import hashlib

import pyarrow as pa

DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.large_string()),
        pa.field("url", pa.string()),
        pa.field("source", pa.string()),
        pa.field("lang", pa.string()),
        pa.field("lang_score", pa.float32()),
        # Format-specific facts (WARC headers, extra JSONL fields...) as a JSON object string:
        # portable across Parquet readers and pandas, unlike a map or struct of unknown shape.
        # Documents (PDF, DOCX, PPTX, Markdown; io/readers/document.py) carry `content_type`,
        # `title`, and for PDF and PPTX `pages` (page or slide count) and `page_offsets` (the
        # character offset in `text` where each page or slide begins), so that a chunk of the
        # text can name its pages, and `skipped_parts` ({kind: count}) where the reader left out
        # parts it could not read; `url` is the file's path or URL.
        pa.field("metadata", pa.string()),
    ]
)

# Columns whose names start with this prefix are internal to a run (e.g. a global op's key) and
# are never written to the published shards.
INTERNAL_PREFIX = "__"


def document_id(source: str, offset: int) -> str:
    """A stable 32-hex-digit id for the record at `offset` (byte or row position) of `source`."""
    return hashlib.blake2b(f"{source}\x00{offset}".encode(), digest_size=16).hexdigest()

