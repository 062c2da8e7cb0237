"""WARC, WET and ARC records (gzip per record or uncompressed).

Two parsers, one result: a record gives the same `Record` / `Skip` / `Bad` whichever parser reads
it, and damage in one record never changes what its neighbours give.

- A .warc.gz is read gzip member by gzip member (one record each). Each member is inflated here
  and read straight from its bytes by the fast path, after checks: the member must hold exactly
  one record that fills it (WARC header, Content-Length bytes, CRLF CRLF), with headers in the
  plain form (CRLF lines, each a token, a colon and a value; the WARC header in ASCII), and a
  response must carry usable HTTP headers (the same form, a status, an ASCII Content-Type, no
  transfer or content encoding to undo). The few headers used are read as warcio reads them (first
  of a repeated name, value stripped). A member that fails a check or is cut short by the end of the
  file is read by warcio instead, that one member only; the fast path goes on at the next.
  ClueWeb09's responses, for instance, end their HTTP headers with bare LF: warcio reads them. (The
  fast path replaced FastWARC, issue 17: once a member is checked, parsing it again in C++ cost more
  than reading the few headers needed, about 0.3 s of CPU per 333 MB.)
- A member is inflated to at most input.max_record_bytes + 64 KiB (its record and the headers), never
  further: one that holds more is `too_large` at its offset (or the Skip its record's headers give:
  a request, a metadata record, an HTTP error), and reading goes on at the next gzip member that
  starts a record, found as after a corrupt member. (A member of one small record and 2 GB of NULs,
  9 MB compressed, took a worker to 1.8 GB; issue 39 point 14.) warcio's lines are bounded the same
  way (`_bounded_lines`): it reads a line to its end however long, a buffer at a time.
- Uncompressed WARC, WET and ARC files are read by warcio alone: nothing there marks where a record
  ends but its own Content-Length, so the fast path's framing could not be checked.
- A file gzipped whole (`gzip x.warc`: its first gzip member holds more than one record) is read
  the same way, as one inflated stream; a record's offset is its offset in that stream (what
  `zcat` gives). Its one member is the whole file, inflated once as a stream in bounded memory.
  Nothing in the compressed bytes marks where a record starts, so the split at 0 reads the whole file.
  In a file gzipped record by record, a member holding several records has no offsets to name them
  by: it is one `Bad` naming the fix (`warcio recompress`).

warcio reports a damaged record (broken header, no Content-Length, corrupt or truncated gzip member,
short content) as `Bad` and resumes at the next record instead of losing the rest of the file (in
an uncompressed ARC, the next line that is an ARC header line: an ARC has no `WARC/1.` to find). A
large .warc.gz can be read as several byte-range splits, each starting at the first gzip member at
or after its start offset, and so can an uncompressed WARC, each split starting at the first
`WARC/1.` line at or after its start (a split reads every record that starts before its end, and
warcio's next record always starts at such a line, so splits meet exactly; only a record whose
payload is itself an uncompressed WARC, crossing a split's start, would have that payload read as
records too: read such a file whole, with split_bytes above its size). An uncompressed ARC is read
whole by its first split: an ARC header line is too plain a line to cut a file at.
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import re
import zlib
from typing import IO, Generator, Iterator

from warcio.archiveiterator import ArchiveIterator

# The fast path (_fast_item) reads the plain records; tests turn it off to compare with warcio alone.
FAST_PATH = True
try:  # members are inflated here: zlib-ng is about 1.7x faster than the system zlib
    from zlib_ng import zlib_ng as inflate_lib
except ImportError:  # pragma: no cover - a core dependency; the standard zlib gives the same bytes
    inflate_lib = zlib

from ylink_data.io.charset import Binary, html_text, sniff_text
from ylink_data.io.readers.base import (BINARY, DECOMPRESSION_ERRORS, TOO_LARGE, UNREADABLE, Bad, Record, Skip, Split,
                                        describe_error, is_io_failure)
from ylink_data.io.readers.text import decode_text

GZIP_MAGIC = b"\x1f\x8b\x08"
_SCAN_CHUNK = 1 << 20
_INFLATE_CHUNK = 1 << 16
_HEADER_ROOM = 1 << 16  # a member may hold this much WARC and HTTP header beside max_record_bytes of body
_HTML_TYPES = ("text/html", "application/xhtml")
_TOO_LARGE = "record larger than input.max_record_bytes"
# WARC 1.1's record types (section 6); any other is counted as warc_unknown_type.
_WARC_TYPES = frozenset({"warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion",
                         "continuation"})
_MANY_RECORDS = ("a gzip member holds more than one WARC record (gzip files concatenated?); "
                 "recompress the file with `warcio recompress`")
# Header blocks in the one form that the fast path and warcio read alike: CRLF line ends, no folded
# lines, every line a token, a colon and a value.
_HEADER_LINES = rb"(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*\r\n)*\r\n"
# Each starts a line (or a run of scheme characters): a search tries it only there, not from every
# "WARC/" or letter inside the lines it would read on (quadratic, issue 39).
_WARC_HEAD = re.compile(rb"(?<![^\n])WARC/\d+\.\d+\r\n" + _HEADER_LINES)
_HTTP_HEAD = re.compile(rb"(?<![^\n])HTTP/1\.[01] \d{3}(?: [^\r\n]*)?\r\n" + _HEADER_LINES)
_ARC_LINE = re.compile(rb"(?<![^\n])\S+ \S+ \d{14} (?:\S+ )*\d+\r?\n")  # URL IP DATE [TYPE ...] LENGTH
_ARC_URL = re.compile(rb"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*:\S")  # how an ARC header line starts
_PEEK = 512  # inflated bytes that show whether a gzip member starts a record
_LINE_START = re.compile(rb"\n(?=[A-Za-z])")  # where a WARC or an ARC header line may start
# How the next record is found at a split's start or after a damaged record (`next_record_start`):
# in a .warc.gz, the next gzip member that inflates to a record; in an uncompressed WARC, the next
# `WARC/1.` at a line start; in any other uncompressed file (an ARC), the next line that starts a
# record, ARC header line or WARC header: nothing fixed marks an ARC header line.
GZIP, WARC_LINES, ARC_LINES = "gzip", "warc", "arc"


def read_warc(split: Split, f: IO[bytes], max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    f.seek(0)
    head = f.read(5)
    gz = head[:2] == GZIP_MAGIC[:2]
    if gz and _gzipped_whole(f, max_record_bytes + _HEADER_ROOM):
        # One gzip stream (`gzip x.warc`): read like an uncompressed WARC, offsets in the inflated
        # stream. Nothing in the compressed bytes marks a record, so the split at 0 reads it all.
        if split.start == 0:
            stream = _Inflated(f, keep=max_record_bytes + _HEADER_ROOM + 2 * _SCAN_CHUNK)
            yield from _read_inflated(stream, max_record_bytes)
        return
    layout = GZIP if gz else _uncompressed_layout(head)
    if layout == ARC_LINES and split.start > 0:
        return  # an ARC header line is too plain to cut the file at: the split at 0 reads it all
    end = split.end if split.end is not None and layout != ARC_LINES else float("inf")
    pos = split.start if split.start == 0 else next_record_start(f, split.start, layout)
    yield from _records(f, pos, end, layout, max_record_bytes)


def _uncompressed_layout(head: bytes) -> str:
    """WARC_LINES for a file that starts as a WARC does, ARC_LINES for any other (an ARC, or a WARC
    whose first record is damaged: the line scan finds WARC headers too)."""
    return WARC_LINES if head.startswith(b"WARC/") else ARC_LINES


def _records(f: IO[bytes], pos: int | None, end: float, layout: str,
             max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    read = _read_members if layout == GZIP else _read_from
    while pos is not None and pos < end:
        resume = yield from read(f, pos, end, layout, max_record_bytes)
        # warcio's offsets can run backwards inside a damaged gzip member: never read a record twice
        pos = resume if resume is None or resume > pos else next_record_start(f, pos + 1, layout)


def _read_inflated(stream: _Inflated, max_record_bytes: int) -> Iterator[Record | Skip | Bad]:
    """The records of a WARC gzipped whole, at their offsets in the inflated stream."""
    try:
        layout = _uncompressed_layout(stream.read(5))
        yield from _records(stream, 0, float("inf"), layout, max_record_bytes)
    except CorruptGzipStream as exc:  # met while looking for the next record after a damaged one
        yield Bad(stream.failed_at, f"nothing after this point can be read: {exc}")


class CorruptGzipStream(Exception):
    """A whole-file gzip stream that is corrupt or ends too soon (not EOFError: warcio takes that
    for the end of the file)."""


class _Inflated(io.RawIOBase):
    """The inflated bytes of a whole-file gzip stream (every member in turn), seekable. The last
    `keep` bytes are kept, so that resynchronising after a damaged record seeks back into them;
    a seek further back inflates again from the top. Where the stream is corrupt or cut short, one
    read raises CorruptGzipStream, so that the record being read becomes `Bad`; then it ends."""

    def __init__(self, f: IO[bytes], keep: int):
        f.seek(0)
        self._gz = gzip.GzipFile(fileobj=f, mode="rb")
        self._keep = keep
        self._kept = bytearray()  # the bytes just before self._gz.tell()
        self._pos = 0
        self.failed_at: int | None = None
        self._failure = ""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            raise io.UnsupportedOperation("the end of a gzip stream is known only once inflated")
        self._pos = pos if whence == io.SEEK_SET else self._pos + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        """Fills `b` up to the end of the stream (warcio and the resync scan take a short read for
        the end)."""
        view, done = memoryview(b), 0
        while done < len(view) and (n := self._read_some(view[done:])):
            done += n
        if not done and self._failure:
            failure, self._failure = self._failure, ""
            raise CorruptGzipStream(failure)
        return done

    def _read_some(self, b) -> int:
        if self.failed_at is not None and self._pos >= self.failed_at:
            return 0
        end = self._gz.tell()
        if self._pos < end - len(self._kept) or self._pos > end:
            self._kept = bytearray()
            if self._inflate(lambda: self._gz.seek(self._pos)) is None:
                return 0
            end = self._pos
        if self._pos < end:  # from the kept bytes
            at = len(self._kept) - (end - self._pos)
            n = min(len(b), end - self._pos)
            b[:n] = self._kept[at:at + n]
        else:
            data = self._inflate(lambda: self._gz.read1(len(b)))
            if not data:
                return 0
            n = len(data)
            b[:n] = data
            self._kept += data
            if len(self._kept) > 2 * self._keep:  # trimmed now and then: a copy per `keep` bytes read
                del self._kept[:-self._keep]
        self._pos += n
        return n

    def _inflate(self, step):
        """step()'s result, or None where the stream fails (the failure is kept to be raised)."""
        try:
            return step()
        except DECOMPRESSION_ERRORS as exc:
            if is_io_failure(exc):
                raise
            self.failed_at = self._gz.tell()
            self._failure = (f"the gzip stream is corrupt or cut short after {self.failed_at} inflated bytes: "
                             f"{describe_error(exc)}")
            return None


def _gzipped_whole(f: IO[bytes], limit: int) -> bool:
    """True when the file's first gzip member holds more than its first record: the whole file was
    gzipped as one stream instead of record by record. Read from at most `limit` inflated bytes of
    that member, as every member is."""
    head = _GzipMembers(f, 0).next(limit)
    if head is None or head.end == _CORRUPT:
        return False  # the member-by-member reader says what it is
    it = _bounded_lines(ArchiveIterator(io.BytesIO(head.data), ensure_http_headers=False))
    try:
        if next(iter(it), None) is None:
            return False
        it.read_to_end()
    except Exception as exc:  # a damaged first record: the member-by-member reader says what it is
        if is_io_failure(exc):
            raise
        return False
    return not _member_ended(it) and _starts_record(it.next_line)


def _read_members(f: IO[bytes], pos: int, end: float, layout: str,
                  max_record_bytes: int) -> Generator[Record | Skip | Bad, None, int | None]:
    """The records of a .warc.gz from `pos` on, one gzip member each, each inflated to at most
    max_record_bytes + _HEADER_ROOM bytes; returns where to resume after a member that could not be
    inflated or was too large (None: the end)."""
    members = _GzipMembers(f, pos)
    limit = max_record_bytes + _HEADER_ROOM
    while members.offset < end:
        start = members.offset
        member = members.next(limit)
        if member is None:
            return None
        if member.end == _CORRUPT:
            yield Bad(start, f"corrupt gzip member: {member.error}")
            return next_record_start(f, start + 1, layout)
        if member.end == _OVER:
            # Not inflated any further (a member of one small record and 2 GB of NULs took a worker to
            # 1.8 GB): its record is read from what was inflated, and reading goes on at the next member.
            yield _oversized_item(start, member.data, max_record_bytes)
            return next_record_start(f, members.offset, layout)
        if member.end == _CUT:
            # warcio says how much of a record cut short by the end of the file is missing (it
            # inflates no more than was there: less than `limit`)
            return (yield from _read_from(f, start, end, layout, max_record_bytes, one_member=True))
        item = _member_item(start, member.data, max_record_bytes)
        if item is not None:  # an empty member holds no record
            yield item
    return None


def _oversized_item(offset: int, head: bytes, max_record_bytes: int) -> Skip | Bad:
    """What a gzip member that inflates past max_record_bytes + _HEADER_ROOM is, from those first bytes,
    as `_member_item` reads a member: several records in it are one Bad naming the fix; else the Skip
    its record's headers give (a request, a metadata record, an HTTP error), or too_large."""
    items = _read_from(io.BytesIO(head), 0, float("inf"), WARC_LINES, max_record_bytes)
    first = next(items, None)
    if first is not None and not isinstance(first, Bad) and next(items, None) is not None:
        return Bad(offset, _MANY_RECORDS)
    if isinstance(first, Skip):
        return dataclasses.replace(first, offset=offset)
    return Bad(offset, f"gzip member inflates past input.max_record_bytes ({max_record_bytes} bytes) and 64 KiB "
                       f"of headers, a record too large or more after it; not inflated further; raise "
                       f"input.max_record_bytes to read it", TOO_LARGE)


def _member_item(offset: int, data: bytes, max_record_bytes: int) -> Record | Skip | Bad | None:
    """The record that one inflated gzip member holds: the fast path's reading where it can vouch
    for it, warcio's otherwise."""
    item = _fast_item(offset, data, max_record_bytes) if FAST_PATH else None
    if item is not None:
        return item
    items = _read_from(io.BytesIO(data), 0, float("inf"), WARC_LINES, max_record_bytes)
    first = next(items, None)
    if first is None:
        return None
    if not isinstance(first, Bad) and next(items, None) is not None:
        return Bad(offset, _MANY_RECORDS)
    return dataclasses.replace(first, offset=offset)


def _read_from(f: IO[bytes], pos: int, end: float, layout: str, max_record_bytes: int,
               one_member: bool = False) -> Generator[Record | Skip | Bad, None, int | None]:
    """Records from `pos` on until one is damaged; returns where to resume after it (None: the end).
    With `one_member`, returns as soon as a gzip member has been read to its end.
    Each record is read to its end before it is reported, so that damage found while finishing it
    (corrupt gzip data, a Content-Length that does not match) makes that record `Bad` instead of
    being blamed on its neighbour, and a `Bad` is never reported for a record already reported."""
    f.seek(pos)
    it = _bounded_lines(ArchiveIterator(f, ensure_http_headers=False))
    records = iter(it)
    last = -1
    while True:
        start = it.offset  # the previous record was read to its end: this is where the next starts
        try:
            record = next(records, None)
        except Exception as exc:
            if is_io_failure(exc):
                raise
            yield _unreadable(start, exc)
            return next_record_start(f, start + 1, layout)
        if record is None:
            return None
        current = it.offset
        if current >= end or current <= last:
            return None if current >= end else next_record_start(f, last + 1, layout)
        last = current
        try:
            if record.format == "warc" and record.rec_headers.get_header("Content-Length") is None:
                # warcio would take the rest of the file for this record's content
                item: Record | Skip | Bad = Bad(current, "no Content-Length in the WARC header")
            else:
                item = _convert(record, current, max_record_bytes)
                warnings = it.err_count
                it.read_to_end()
                missing = getattr(record.raw_stream, "limit", 0)
                if missing:
                    item = Bad(current, f"truncated record: {missing} bytes of its Content-Length are missing")
                elif it.err_count > warnings or _overran(it, current, f, layout):
                    item = Bad(current, "record does not end where its Content-Length says (invalid Content-Length?)")
        except Exception as exc:
            if is_io_failure(exc):
                raise
            item = _unreadable(current, exc)
        framing = isinstance(item, Bad) and not item.error.startswith(_TOO_LARGE)
        if one_member and not framing and not _member_ended(it):
            # the records after it in this member have no offset of their own to be named by
            item = Bad(current, _MANY_RECORDS)
            framing = True
        yield item
        if framing:
            return next_record_start(f, current + 1, layout)  # the framing is not to be trusted: resync
        if one_member:
            return it.offset


def _unreadable(offset: int, exc: Exception) -> Bad:
    """A record warcio fails on: too_large where it met a line longer than a header line can be."""
    reason = TOO_LARGE if isinstance(exc, LineTooLong) else UNREADABLE
    return Bad(offset, f"unreadable record: {describe_error(exc)}", reason)


def _overran(it: ArchiveIterator, current: int, f: IO[bytes], layout: str) -> bool:
    """True when a record's Content-Length ran into the next record's header: warcio checks only that
    a blank line follows the content, which the end of a header line provides. A record that ends
    as it should is followed by CRLF CRLF and the next record; if only the next record's first line
    is damaged, that record is to blame, not this one. An ARC record ends with one LF, as does a
    line it ran into: it ran over when the next record's header line lies inside it."""
    if not it.next_line or _starts_record(it.next_line):
        return False
    if layout == ARC_LINES:
        return _holds_record_start(f, current, it.offset)
    return it.offset - current - it.get_record_length() < 4  # the blank lines after the content


def _holds_record_start(f: IO[bytes], start: int, end: int) -> bool:
    """Whether a record starts inside [start + 1, end); warcio reads on from where `f` is left."""
    back = f.tell()
    try:
        found = _next_line_record(f, start + 1)
    finally:
        f.seek(back)
    return found is not None and found < end


def _member_ended(it: ArchiveIterator) -> bool:
    """After a record read to its end: nothing follows it in its gzip member (warcio reads no line
    past the end of a member)."""
    return not it.next_line


class LineTooLong(ValueError):
    """A line warcio reads (a WARC, ARC or HTTP header line, or what follows a record) is longer
    than any header line can be."""


def _bounded_lines(it: ArchiveIterator) -> ArchiveIterator:
    """`it`, its lines read at most _HEADER_ROOM bytes each: warcio reads a line to its end however
    long, growing it a buffer at a time (quadratic): the run of NULs after a record's end took a
    worker past 1.8 GB. A line longer than that raises LineTooLong (the record is then `Bad`, and
    reading resumes at the next record); a caller's own shorter length is kept."""
    readline = it.reader.readline

    def bounded(length: int | None = None) -> bytes:
        asked = length if length is not None and 0 <= length <= _HEADER_ROOM else None
        cap = _HEADER_ROOM if asked is None else asked
        parts, size = [], 0
        while size < cap:  # warcio's own readline may stop short of a line's end: pieces are joined
            piece = readline(cap - size)
            if not piece:
                break
            parts.append(piece)
            size += len(piece)
            if piece.endswith(b"\n"):
                break
        else:
            if asked is None:
                raise LineTooLong(f"a line of over {_HEADER_ROOM:,} bytes where a header line or the end "
                                  f"of a record should be")
        return b"".join(parts)

    it.reader.readline = bounded
    return it


_WHOLE, _OVER, _CUT, _CORRUPT = "whole", "over", "cut", "corrupt"


@dataclasses.dataclass
class _Member:
    """One gzip member inflated: `data`, at most the limit asked; `end` says how it ended: _WHOLE,
    _OVER (it inflates to more: `data` is its first `limit` bytes and the rest is not inflated),
    _CUT (the file ends inside it) or _CORRUPT (not gzip, or damaged: `error`)."""

    data: bytes
    end: str
    error: str = ""


class _GzipMembers:
    """The gzip members of `f` from `offset` on, each inflated on its own, so that a record is
    known to fill exactly one member."""

    def __init__(self, f: IO[bytes], offset: int):
        f.seek(offset)
        self.f, self.offset, self._rest = f, offset, b""

    def next(self, limit: int) -> _Member | None:
        """The next member inflated to at most `limit` bytes (None at the end of the file). `offset`
        moves past a whole member; past one that is not whole, to the compressed bytes read so far
        (never on to the next member: where a member ends is known only once inflated whole)."""
        data = self._rest or self.f.read(_INFLATE_CHUNK)
        if not data:
            return None
        d = inflate_lib.decompressobj(31)
        out, size, used = [], 0, 0
        while True:
            try:
                piece = d.decompress(data, limit + 1 - size)
            except inflate_lib.error as exc:
                self.offset += used + 1
                return _Member(b"", _CORRUPT, describe_error(exc))
            out.append(piece)
            size += len(piece)
            if d.eof:
                used += len(data) - len(d.unused_data)
                self._rest = d.unused_data
                self.offset += used
                return _Member(b"".join(out), _WHOLE)
            used += len(data) - len(d.unconsumed_tail)
            if size > limit:
                self.offset += used
                return _Member(b"".join(out)[:limit], _OVER)
            data = d.unconsumed_tail or self.f.read(_INFLATE_CHUNK)
            if not data:
                self.offset += used
                return _Member(b"".join(out), _CUT)


def _fast_item(offset: int, data: bytes, max_record_bytes: int) -> Record | Skip | Bad | None:
    """The member's record read straight from its bytes, or None where warcio must decide. Only
    header blocks in the plain form (_WARC_HEAD, _HTTP_HEAD) are read here, and as warcio reads
    them (`_headers`); anything else is warcio's."""
    head = _WARC_HEAD.match(data)
    if head is None or not data.endswith(b"\r\n\r\n") or not head.group().isascii():
        return None
    headers = _headers(_WARC_NAMES, head.group())
    length = headers.get(b"content-length")
    if not (length and length.isdigit() and head.end() + int(length) + 4 == len(data)):
        return None  # not exactly one record filling the member
    rtype = headers.get(b"warc-type") or ""
    status, content_type = None, headers.get(b"content-type") or ""
    payload_start, payload_end = head.end(), head.end() + int(length)
    uri = _target_uri(headers.get(b"warc-target-uri")) or ""
    if rtype in ("response", "request", "revisit") and not uri:
        return None  # warcio cannot read these without a target URI: leave it to say so
    if rtype == "response" and uri.startswith(("http:", "https:")):
        http = _usable_http(data, payload_start, payload_end)
        if http is None:
            return None
        payload_start, status, content_type = http
    elif rtype == "response" or (rtype in ("conversion", "resource") and (
            content_type.lower().startswith("application/http") or data.startswith(b"HTTP/", payload_start))):
        return None  # warcio reads no HTTP headers here: leave it to say what the record holds
    return _to_item(offset, rtype, lambda name: headers.get(name.lower().encode()), status, content_type,
                    data[payload_start:payload_end], max_record_bytes)


def _header_names(*names: str) -> re.Pattern:
    """Finds the header lines of these names in a plain-form block (each line follows a CRLF)."""
    return re.compile(rb"\r\n(%s):([^\r\n]*)" % b"|".join(re.escape(n.encode()) for n in names), re.I)


# The WARC headers _fast_item and _to_item look at, and the HTTP headers _usable_http does.
_WARC_NAMES = _header_names("Content-Length", "WARC-Type", "Content-Type", "WARC-Target-URI", "WARC-Record-ID",
                            "WARC-Date", "WARC-Identified-Content-Language")
_HTTP_NAMES = _header_names("Content-Type", "Content-Encoding", "Transfer-Encoding")


def _headers(names: re.Pattern, block: bytes) -> dict[bytes, str | None]:
    """{lower-case name: value} of the named headers in a plain-form block, as warcio reads them:
    the first of a repeated name, its value stripped; a value that is not ASCII is None here (the
    callers leave such a record to warcio, which decodes it)."""
    out: dict[bytes, str | None] = {}
    for name, value in names.findall(block):
        name = name.lower()
        if name not in out:
            out[name] = value.decode("ascii").strip() if value.isascii() else None
    return out


def _usable_http(data: bytes, start: int, end: int) -> tuple[int, int, str] | None:
    """(payload start, status, Content-Type) of a response's HTTP headers, when they are plain CRLF
    lines within the record with a status and an ASCII Content-Type, and no transfer or content
    encoding (warcio undoes those with fallbacks of its own)."""
    head = _HTTP_HEAD.match(data, start)
    if head is None or head.end() > end:
        return None
    block = head.group()
    http = _headers(_HTTP_NAMES, block)
    status, content_type = int(block[9:12]), http.get(b"content-type")
    if not status or not content_type or b"content-encoding" in http or b"transfer-encoding" in http:
        return None
    return head.end(), status, content_type


def _convert(record, offset: int, max_record_bytes: int) -> Record | Skip | Bad:
    headers = record.rec_headers
    http = record.http_headers if record.rec_type == "response" else None
    content_type = (http.get_header("Content-Type") if http else None) or headers.get_header("Content-Type") or ""
    return _to_item(offset, record.rec_type or "", headers.get_header, _status(http), content_type,
                    record.content_stream(), max_record_bytes)


def _to_item(offset: int, rtype: str, header, status: int | None, content_type: str, payload: IO[bytes] | bytes,
             max_record_bytes: int) -> Record | Skip | Bad:
    """One WARC record as the pipeline sees it, whichever parser read it (the payload: a stream, or
    the bytes themselves)."""
    if not rtype:
        return Bad(offset, "no WARC-Type in the WARC header")
    if rtype not in ("response", "conversion", "resource"):
        # The type names the drop reason: a damaged or made-up one must not add a counter of its own
        # (a file of a million distinct types would be a million keys in stats.json).
        return Skip(offset, f"warc_{rtype}" if rtype in _WARC_TYPES else "warc_unknown_type")
    if status is not None and not 200 <= status < 300:
        return Skip(offset, "http_status")
    body = payload if isinstance(payload, bytes) else payload.read(max_record_bytes + 1)
    if len(body) > max_record_bytes:
        return Bad(offset, f"{_TOO_LARGE} ({max_record_bytes} bytes); raise it to read it", TOO_LARGE)
    url = _target_uri(header("WARC-Target-URI"))
    meta = {"warc_type": rtype, "warc_record_id": header("WARC-Record-ID"), "warc_date": header("WARC-Date")}
    if status is not None:
        meta["http_status"] = status
    if rtype == "conversion":
        if not body.strip():
            return Skip(offset, "empty")
        text = decode_text(body, "a conversion record's text")  # sniffed as a text file is: binary, UTF-16
        if isinstance(text, Bad):
            return Bad(offset, f"a conversion record: {text.error}", text.reason)
        lang = header("WARC-Identified-Content-Language")
        if lang:
            meta["warc_identified_language"] = lang
        meta["content_type"] = "text/plain"
        return Record(offset, text, url, meta)
    if not _is_html(content_type, body):
        return Skip(offset, "not_html")
    if not body.strip():
        return Skip(offset, "empty")
    sniffed = sniff_text(body)  # a PNG served as text/html is no page; a UTF-16 page without a BOM is one
    if isinstance(sniffed, Binary):
        return Bad(offset, sniffed.error("HTML"), BINARY)
    text, encoding = sniffed if sniffed is not None else html_text(body, content_type)
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


def next_record_start(f: IO[bytes], pos: int, layout: str) -> int | None:
    """The offset of the first record starting at or after `pos`, or None at the end of the file.
    For gzip, a candidate member must decompress to a WARC header, so compressed bytes that happen
    to look like a gzip header are not mistaken for a record."""
    if layout == ARC_LINES:
        return _next_line_record(f, pos)
    gz = layout == GZIP
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
        out = zlib.decompressobj(31).decompress(head[1:] if cand else head, _PEEK)
    except zlib.error:
        return False
    return _peek_starts_record(out)


def _next_line_record(f: IO[bytes], pos: int) -> int | None:
    """In an uncompressed ARC: the offset of the first line at or after `pos` (> 0) that starts a
    record, or None at the end of the file."""
    pos -= 1  # from the line end before a record that starts at `pos`
    while True:
        f.seek(pos)
        chunk = f.read(_SCAN_CHUNK)
        for m in _LINE_START.finditer(chunk):
            peek = chunk[m.end():m.end() + _PEEK]
            if len(peek) < _PEEK:  # the line goes on past the chunk
                f.seek(pos + m.end())
                peek = f.read(_PEEK)
            if _peek_starts_record(peek):
                return pos + m.end()
        if len(chunk) <= 1:
            return None
        pos += len(chunk) - 1  # a line end in the chunk's last byte is matched in the next chunk


def _peek_starts_record(peek: bytes) -> bool:
    """Whether the first _PEEK bytes from an offset (fewer at the end of the file) start a record.
    An ARC header line is as long as its URL: a line longer than the peek shows only its start."""
    long_line = len(peek) == _PEEK and b"\n" not in peek
    return _starts_record(peek) or (long_line and _ARC_URL.match(peek) is not None)


def _starts_record(data: bytes) -> bool:
    return data.startswith(b"WARC/") or _ARC_LINE.match(data) is not None
