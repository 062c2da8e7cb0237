"""What the document readers (PDF, DOCX, PPTX, Markdown) share: the whole file as bytes, Markdown
tables, and one `Record` per file whose metadata says where each page starts.

A document's text is Markdown: `#` headings, `- ` / `1. ` list items, pipe tables, paragraphs
separated by a blank line. Pages (PDF) and slides (PPTX) are separated by a blank line too, and
`metadata.page_offsets[i]` is the character offset (Python str index) where page i+1 begins, so that
the `chunk` op can give every chunk its page range. Metadata keys (ylink_data/schema.py):
`content_type`, `title`, `pages` (page or slide count, where the format has pages) and `page_offsets`.
"""
from __future__ import annotations

import re
from typing import Any

from ...redaction import redact_url
from .base import Record, Split

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
MARKDOWN = "text/markdown"

# Quarantine reasons of the document readers (the `reason` of a quarantine entry).
UNREADABLE, ENCRYPTED, NEEDS_OCR = "unreadable", "encrypted", "needs_ocr"


def document(split: Split, pages: list[str], content_type: str, title: str | None,
             paged: bool = True) -> Record:
    """One record from the Markdown of each page (one entry for formats without pages)."""
    text, starts = "", []
    for page in pages:
        page = page.strip("\n")
        if text and page:
            text += "\n\n"
        starts.append(len(text))
        text += page
    meta: dict[str, Any] = {"content_type": content_type}
    if title:
        meta["title"] = " ".join(title.split())
    if paged:
        meta["pages"] = len(pages)
        meta["page_offsets"] = starts
    return Record(0, text, redact_url(split.url), meta)


def first_heading(markdown: str) -> str | None:
    m = re.search(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", markdown, re.M)
    return m.group(1).strip() if m else None


def table(rows: list[list[str]]) -> str:
    """A Markdown pipe table; the first row is the header. Cells are one line, pipes escaped."""
    rows = [[" ".join(c.split()).replace("|", "\\|") for c in row] for row in rows if row]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def number_lists(markdown: str) -> str:
    """Ordered list items numbered 1, 2, 3... per list and level (readers write each as `1. `)."""
    out, counters = [], {}
    for line in markdown.split("\n"):
        m = _ITEM.match(line)
        if m:
            indent = len(m.group(1))
            counters = {k: v for k, v in counters.items() if k <= indent}  # deeper lists end
            counters[indent] = counters.get(indent, 0) + 1
            line = f"{m.group(1)}{counters[indent]}. {m.group(2)}"
        elif not _BULLET.match(line):
            counters = {}  # anything but a list item ends every list
        out.append(line)
    return "\n".join(out)


_ITEM = re.compile(r"^( *)1\. (.*)$")
_BULLET = re.compile(r"^ *- ")
