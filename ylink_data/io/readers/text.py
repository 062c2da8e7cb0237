"""Plain-text and HTML files: one document per file."""
from __future__ import annotations

from typing import IO, Iterator

from ylink_data.io.charset import decode_html
from ylink_data.io.readers.base import Bad, Record, Skip, Split, read_whole


def read_text(split: Split, f: IO[bytes], max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    data = read_whole(f, max_record_bytes)
    if isinstance(data, Bad):
        yield data
        return
    text = decode_utf8(data)
    if isinstance(text, Bad):
        yield text
        return
    yield Record(0, text, None, {"content_type": "text/plain"}) if text.strip() else Skip(0, "empty")


def decode_utf8(data: bytes) -> str | Bad:
    """A text file's bytes as a str (a UTF-8 byte order mark dropped), or why they are not UTF-8."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Bad(exc.start, f"invalid UTF-8 at byte {exc.start}; convert the file to UTF-8")


def read_html(split: Split, f: IO[bytes], max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    data = read_whole(f, max_record_bytes)
    if isinstance(data, Bad):
        yield data
        return
    if not data.strip():
        yield Skip(0, "empty")
        return
    text, encoding = decode_html(data)
    yield Record(0, text, None, {"content_type": "text/html", "charset": encoding})
