"""Plain-text and HTML files: one document per file. Their bytes are sniffed first (io/charset.py
sniff_text): binary content is quarantined as `binary`, UTF-16 decoded, with or without a byte order
mark."""
from __future__ import annotations

from typing import IO, Iterator

from ylink_data.io.charset import Binary, decode_html, sniff_text
from ylink_data.io.readers.base import BINARY, Bad, Record, Skip, Split, read_whole


def read_text(split: Split, f: IO[bytes], max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    data = read_whole(f, max_record_bytes)
    if isinstance(data, Bad):
        yield data
        return
    text = decode_text(data)
    if isinstance(text, Bad):
        yield text
        return
    yield Record(0, text, None, {"content_type": "text/plain"}) if text.strip() else Skip(0, "empty")


def decode_text(data: bytes, read_as: str = "text") -> str | Bad:
    """A text file's bytes as a str: UTF-16 (with or without a byte order mark) or UTF-8 (its byte
    order mark dropped); Bad for binary content (`binary`) or bytes that are not UTF-8."""
    sniffed = sniff_text(data)
    if isinstance(sniffed, Binary):
        return Bad(0, sniffed.error(read_as), BINARY)
    if sniffed is not None:
        return sniffed[0]
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
    sniffed = sniff_text(data)
    if isinstance(sniffed, Binary):
        yield Bad(0, sniffed.error("HTML"), BINARY)
        return
    text, encoding = sniffed if sniffed is not None else decode_html(data)
    yield Record(0, text, None, {"content_type": "text/html", "charset": encoding})
