"""What the document readers (PDF, DOCX, PPTX, Markdown) share: the whole file as bytes, Markdown
tables, and one `Record` per file whose metadata says where each page starts.

A document's text is Markdown: `#` headings, `- ` / `1. ` list items, pipe tables, paragraphs
separated by a blank line. Pages (PDF) and slides (PPTX) are separated by a blank line too, and
`metadata.page_offsets[i]` is the character offset (Python str index) where page i+1 begins, so that
the `chunk` op can give every chunk its page range. Metadata keys (ylink_data/core/schema.py):
`content_type`, `title`, `pages` (page or slide count, where the format has pages), `page_offsets`,
and `skipped_parts` where the reader left parts out (`Parts`).

The readers run in a child process (isolated.py) that turns any failure on a file into a quarantined
file; inside a file, `Parts` keeps one unreadable part from costing the rest.
"""
from __future__ import annotations

import contextlib
import io
import re
import zipfile
from collections import Counter
from typing import Any, Iterator

from ylink_data.core.redaction import redact_url
from ylink_data.io.readers.base import TOO_LARGE, UNREADABLE, Bad, Record, Skip, Split, describe_error

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
MARKDOWN = "text/markdown"

# Quarantine reasons of the document readers beside base.py's (the `reason` of a quarantine entry).
ENCRYPTED, NEEDS_OCR = "encrypted", "needs_ocr"


class Parts:
    """The parts of one file its reader left out because reading them failed (a shape python-pptx
    has no class for, a table python-docx cannot lay out, a slide whose XML is another format's),
    counted by kind. A deck is kept without the one shape: quarantining it whole would lose what a
    user came for. The count goes to the document's `metadata.skipped_parts` and the read stage's
    `skipped_part_<kind>` counters, so nothing is left out silently."""

    def __init__(self) -> None:
        self.skipped: Counter = Counter()
        self.first: str | None = None  # "pptx_shape: NotImplementedError: ...", for a file left empty

    @contextlib.contextmanager
    def part(self, kind: str) -> Iterator[None]:
        """Runs the block for one part; an exception of any kind skips the part (not the file).
        A time limit (DocumentTimeout, a BaseException) and running out of memory pass on: they are
        the whole file's (isolated.py)."""
        try:
            yield
        except MemoryError:
            raise
        except Exception as exc:
            self.skip(kind, describe_error(exc))

    def skip(self, kind: str, why: str) -> None:
        self.skipped[kind] += 1
        if self.first is None:
            self.first = f"{kind}: {why}"

    def nothing_read(self) -> Skip | Bad:
        """What a file with no text is: empty, or unreadable when parts of it could not be read."""
        if not self.skipped:
            return Skip(0, "empty")
        return Bad(0, f"no part of it could be read ({sum(self.skipped.values())} skipped; the first, "
                      f"{self.first}); the file is damaged or uses a feature the reader lacks", UNREADABLE)


def too_large(data: bytes, limit: int) -> Bad | None:
    """A ZIP package (DOCX, PPTX) that unpacks to more than `limit` bytes, from the sizes its central
    directory declares, before anything is unpacked: zipfile reads a member up to its declared size
    and no further (a member that holds more fails its CRC check), so these sizes bound what the
    reader can unpack. python-docx and python-pptx load every member whole, and parsed XML takes
    5-16 times its size (config.py, input.max_unpacked_bytes)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        total = sum(info.file_size for info in z.infolist())
    if total <= limit:
        return None
    return Bad(0, f"unpacks to {total:,} bytes ({total / 2**20:,.0f} MiB), over input.max_unpacked_bytes "
                  f"({limit:,}); raise it to read this file", TOO_LARGE)


def document(split: Split, pages: list[str], content_type: str, title: str | None,
             paged: bool = True, parts: Parts | None = None) -> Record:
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
    counters = {}
    if parts is not None and parts.skipped:
        meta["skipped_parts"] = dict(sorted(parts.skipped.items()))
        counters = {f"skipped_part_{kind}": n for kind, n in meta["skipped_parts"].items()}
    return Record(0, text, redact_url(split.url), meta, counters)


def first_heading(markdown: str) -> str | None:
    # the title runs to its last character that is no space or #, not lazily: a lazy title before
    # [ \t#]* rescans the trailing run at every character
    m = re.search(r"^#{1,6}[ \t]+(.*[^ \t#\n]|.)[ \t#]*$", markdown, re.M)
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
