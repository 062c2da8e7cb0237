"""WARC, WET and ARC records (gzip per record or uncompressed).

Two parsers, one result. FastWARC (C++) reads the bulk of a file at about twice warcio's speed;
warcio takes over from the last good record whenever FastWARC stops on something it will not read
(a damaged record, an ARC file, a payload encoding it cannot undo) and always re-reads a split's
last record, because FastWARC hands back a record cut short by the end of the file without a word.
warcio's path reports a damaged record (broken header, corrupt or truncated gzip member, short
content) as `Bad` and resumes at the next record instead of losing the rest of the file. A large
.warc.gz can be read as several byte-range splits, each starting at the first gzip member at or
after its start offset.
"""
from __future__ import annotations

import zlib
from typing import IO, Generator, Iterator

from warcio.archiveiterator import ArchiveIterator

try:
    from fastwarc.warc import ArchiveIterator as FastArchiveIterator
except ImportError:  # pragma: no cover - a core dependency; warcio alone still reads everything
    FastArchiveIterator = None

from ..charset import html_text
from .base import Bad, Record, Skip, Split, describe_error, is_io_failure

GZIP_MAGIC = b"\x1f\x8b\x08"
_SCAN_CHUNK = 1 << 20
_HTML_TYPES = ("text/html", "application/xhtml")
_TOO_LARGE = "record larger than input.max_record_bytes"


def read_warc(split: Split, f: IO[bytes], max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    f.seek(0)
    gz = f.read(2) == GZIP_MAGIC[:2]
    end = split.end if split.end is not None else float("inf")
    pos: int | None = split.start if split.start == 0 else next_record_start(f, split.start, gz)
    if pos is not None and FastArchiveIterator is not None:
        pos = yield from _read_fast(f, pos, end, max_record_bytes)
    while pos is not None and pos < end:
        pos = yield from _read_from(f, pos, end, gz, max_record_bytes)


def _read_from(f: IO[bytes], pos: int, end: float, gz: bool,
               max_record_bytes: int) -> Generator[Record | Skip | Bad, None, int | None]:
    """Records from `pos` on until one is damaged; returns where to resume after it (None: the end).
    Each record is read to its end before it is reported, so that damage found while finishing it
    (corrupt gzip data, a Content-Length that does not match) makes that record `Bad` instead of
    being blamed on its neighbour, and a `Bad` is never reported for a record already reported."""
    f.seek(pos)
    it = ArchiveIterator(f, ensure_http_headers=False)
    records = iter(it)
    while True:
        start = it.offset  # the previous record was read to its end: this is where the next starts
        try:
            record = next(records, None)
        except Exception as exc:
            if is_io_failure(exc):
                raise
            yield Bad(start, f"unreadable record: {describe_error(exc)}")
            return next_record_start(f, start + 1, gz)
        if record is None:
            return None
        current = it.offset
        if current >= end:
            return None
        try:
            item = _convert(record, current, max_record_bytes)
            warnings = it.err_count
            it.read_to_end()
            missing = getattr(record.raw_stream, "limit", 0)
            if missing:
                item = Bad(current, f"truncated record: {missing} bytes of its Content-Length are missing")
            elif it.err_count > warnings:
                item = Bad(current, "record does not end where its Content-Length says (invalid Content-Length?)")
        except Exception as exc:
            if is_io_failure(exc):
                raise
            item = Bad(current, f"unreadable record: {describe_error(exc)}")
        yield item
        if isinstance(item, Bad) and not item.error.startswith(_TOO_LARGE):
            return next_record_start(f, current + 1, gz)  # the framing is not to be trusted: resync


def _read_fast(f: IO[bytes], pos: int, end: float,
               max_record_bytes: int) -> Generator[Record | Skip | Bad, None, int | None]:
    """Records from `pos` with FastWARC; returns where warcio must go on (None: nothing left).
    Each item is held back until the next record parses, so the record FastWARC stopped at, and
    the split's last one, are left to warcio, which checks them."""
    f.seek(pos)
    held: Record | Skip | Bad | None = None
    try:
        for rec in FastArchiveIterator(f, parse_http=True, auto_decode="all", fsspec_args=False):
            offset = rec.stream_pos  # absolute: FastWARC starts counting at the stream's tell()
            if offset >= end:
                break
            headers = rec.headers
            rtype = headers.get("WARC-Type") or ""
            http = rec.http_headers if rtype == "response" and rec.is_http_parsed else None
            item = _to_item(offset, rtype, headers.get, http.status_code if http else None,
                            (http.get("Content-Type") if http else None) or headers.get("Content-Type") or "",
                            rec.reader, max_record_bytes)
            if held is not None:
                yield held
            held = item
    except Exception as exc:
        if is_io_failure(exc):
            raise
    return held.offset if held is not None else pos


def _convert(record, offset: int, max_record_bytes: int) -> Record | Skip | Bad:
    headers = record.rec_headers
    http = record.http_headers if record.rec_type == "response" else None
    content_type = (http.get_header("Content-Type") if http else None) or headers.get_header("Content-Type") or ""
    return _to_item(offset, record.rec_type, headers.get_header, _status(http), content_type,
                    record.content_stream(), max_record_bytes)


def _to_item(offset: int, rtype: str, header, status: int | None, content_type: str, payload: IO[bytes],
             max_record_bytes: int) -> Record | Skip | Bad:
    """One WARC record as the pipeline sees it, whichever parser read it."""
    if rtype not in ("response", "conversion", "resource"):
        return Skip(offset, f"warc_{rtype}")
    if status is not None and not 200 <= status < 300:
        return Skip(offset, "http_status")
    body = payload.read(max_record_bytes + 1)
    if len(body) > max_record_bytes:
        return Bad(offset, f"{_TOO_LARGE} ({max_record_bytes} bytes); raise it to read it")
    url = _target_uri(header("WARC-Target-URI"))
    meta = {"warc_type": rtype, "warc_record_id": header("WARC-Record-ID"), "warc_date": header("WARC-Date")}
    if status is not None:
        meta["http_status"] = status
    if rtype == "conversion":
        if not body.strip():
            return Skip(offset, "empty")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Bad(offset, f"invalid UTF-8 in a conversion record at byte {exc.start}")
        lang = header("WARC-Identified-Content-Language")
        if lang:
            meta["warc_identified_language"] = lang
        meta["content_type"] = "text/plain"
        return Record(offset, text, url, meta)
    if not _is_html(content_type, body):
        return Skip(offset, "not_html")
    if not body.strip():
        return Skip(offset, "empty")
    text, encoding = html_text(body, content_type)
    meta["content_type"] = content_type.split(";")[0].strip() or "text/html"
    meta["charset"] = encoding
    return Record(offset, text, url, meta)


def _target_uri(uri: str | None) -> str | None:
    """As warcio normalises it: wget 1.19 wraps the URI in <>, and spaces are percent-encoded."""
    if uri and uri.startswith("<") and uri.endswith(">"):
        uri = uri[1:-1]
    return uri.replace(" ", "%20") if uri else uri


def _status(http) -> int | None:
    if http is None:
        return None
    try:
        return int(http.get_statuscode())
    except (TypeError, ValueError):
        return None


def _is_html(content_type: str, body: bytes) -> bool:
    ctype = content_type.lower()
    if ctype:
        return ctype.startswith(_HTML_TYPES)
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def next_record_start(f: IO[bytes], pos: int, gz: bool) -> int | None:
    """The offset of the first record starting at or after `pos`, or None at the end of the file.
    For gzip, a candidate member must decompress to a WARC header, so compressed bytes that happen
    to look like a gzip header are not mistaken for a record."""
    needle = GZIP_MAGIC if gz else b"WARC/1."
    while True:
        f.seek(pos)
        chunk = f.read(_SCAN_CHUNK + 64)
        if not chunk:
            return None
        start = 0
        while (i := chunk.find(needle, start)) != -1:
            cand = pos + i
            if _looks_like_record(f, cand, gz):
                return cand
            start = i + 1
        if len(chunk) <= len(needle):
            return None
        pos += len(chunk) - len(needle)


def _looks_like_record(f: IO[bytes], cand: int, gz: bool) -> bool:
    f.seek(max(cand - 1, 0))
    head = f.read(4097 if cand else 4096)
    if not gz:
        return cand == 0 or head[:1] == b"\n"
    try:
        out = zlib.decompressobj(31).decompress(head[1:] if cand else head, 16)
    except zlib.error:
        return False
    return out.startswith(b"WARC/") or out[:1].isalnum()  # ARC records start with a URL line
