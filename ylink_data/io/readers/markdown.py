"""Markdown files, as they are: the text is already the document's Markdown. The title is the
front matter's `title:` or the first heading; the front matter itself is not part of the text."""
from __future__ import annotations

import re
from typing import Iterator

from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.document import MARKDOWN, document, first_heading
from ylink_data.io.readers.text import decode_text

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_TITLE = re.compile(r"^title:[ \t]*(\S(?:.*\S)?)[ \t]*$", re.M)  # no lazy group before spaces: linear


def read_markdown(split: Split, data: bytes) -> Iterator[Record | Skip | Bad]:
    text = decode_text(data, "Markdown")
    if isinstance(text, Bad):
        yield text
        return
    title = None
    front = _FRONT_MATTER.match(text)
    if front:
        m = _TITLE.search(front.group(1))
        title = m.group(1).strip("'\"") if m else None
        text = text[front.end():]
    text = text.replace("\r\n", "\n").strip("\n")
    if not text.strip():
        yield Skip(0, "empty")
        return
    yield document(split, [text], MARKDOWN, title or first_heading(text), paged=False)
