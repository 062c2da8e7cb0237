"""PDF stream filters decoded as streams, bounded: what a stream of any filter chain decodes to, counted
before PDFium decodes it whole (pdf.py).

Each filter is a generator from pieces of bytes to pieces of bytes, every piece at most a few BUFFERs
(decompress.py), so a chain holds a few MiB whatever the stream expands to: Flate (zlib with a maximum
output length), LZW (a 4096-entry table of strings of at most 4096 bytes: 16 MiB at worst),
RunLength, ASCIIHex, ASCII85. The image codecs (DCT, JPX, JBIG2, CCITTFax) are left to PDFium as
the last filter of a chain: their bytes are counted as they are, and PDFium decodes an image only
to draw it. Any other filter, or one of those before another, cannot be bounded here: `Unbounded`.
Bytes that break a filter's format raise `DecodeError` at the point they are reached.
"""
from __future__ import annotations

import base64
import binascii
import re
import zlib
from typing import Iterator

from ylink_data.io.readers.decompress import BUFFER, READ_SIZE

Pieces = Iterator[bytes]
IMAGE_CODECS = frozenset({"DCTDecode", "DCT", "JPXDecode", "JBIG2Decode", "CCITTFaxDecode", "CCF"})


class DecodeError(ValueError):
    """The bytes are not of the filter's format."""


class Unbounded(ValueError):
    """A filter (or its place in the chain) that is not decoded here."""


def decoded_size(raw: memoryview, filters: list[str], limit: int) -> int:
    """What `raw` decodes to through `filters` (first applied first), counted up to `limit + 1` bytes,
    where it stops decoding; `limit + 1` also when a stage between makes more than `limit` (whitespace
    that ASCII85 drops costs time to pass over too). Unbounded before any decoding; DecodeError where
    the bytes break a filter."""
    for k, name in enumerate(filters):
        if name in IMAGE_CODECS and k == len(filters) - 1:
            break
        if name not in DECODERS:
            where = "" if name not in IMAGE_CODECS else " before another filter"
            raise Unbounded(f"/{name}{where}")
    pieces: Pieces = (bytes(raw[i:i + READ_SIZE]) for i in range(0, len(raw), READ_SIZE))
    try:
        for name in filters:
            if name in IMAGE_CODECS:
                break
            pieces = _at_most(DECODERS[name](pieces), limit)
        return sum(len(piece) for piece in pieces)
    except _Over:
        return limit + 1


class _Over(Exception):
    pass


def _at_most(pieces: Pieces, limit: int) -> Pieces:
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limit:
            raise _Over
        yield piece


def _flate(pieces: Pieces) -> Pieces:
    d = zlib.decompressobj()
    for piece in pieces:
        while piece and not d.eof:
            try:
                out = d.decompress(piece, BUFFER)
            except zlib.error as exc:
                raise DecodeError(f"Flate: {exc}") from None
            piece = d.unconsumed_tail
            if out:
                yield out
        if d.eof:
            return


_CLEAR, _EOD = 256, 257


def _lzw(pieces: Pieces) -> Pieces:
    """LZW as PDF writes it (ISO 32000-1, 7.4.4): codes of 9 to 12 bits, most significant bit first,
    the width growing one code early (EarlyChange 1, the default)."""
    table: list[bytes] = [bytes([i]) for i in range(256)] + [b"", b""]
    width, prev = 9, None
    bits, nbits = 0, 0
    out = bytearray()
    for piece in pieces:
        for byte in piece:
            bits, nbits = (bits << 8) | byte, nbits + 8
            while nbits >= width:
                nbits -= width
                code = (bits >> nbits) & ((1 << width) - 1)
                bits &= (1 << nbits) - 1
                if code == _CLEAR:
                    del table[258:]
                    width, prev = 9, None
                    continue
                if code == _EOD:
                    yield bytes(out)
                    return
                if code < len(table):
                    entry = table[code]
                elif code == len(table) and prev is not None:
                    entry = prev + prev[:1]
                else:
                    raise DecodeError(f"LZW: code {code} not in the table")
                if prev is not None and len(table) < 4096:
                    table.append(prev + entry[:1])
                prev = entry
                width = min(12, (len(table) + 1).bit_length())
                out += entry
                if len(out) >= BUFFER:
                    yield bytes(out)
                    out.clear()
    yield bytes(out)


def _run_length(pieces: Pieces) -> Pieces:
    """RunLength (7.4.5): a length byte n, then n + 1 bytes as they are (n < 128), or one byte
    257 - n times (n > 128); 128 ends the data."""
    out, carry = bytearray(), b""
    for piece in pieces:
        data, i = carry + piece, 0
        while i < len(data):
            n = data[i]
            if n == 128:
                yield bytes(out)
                return
            if n < 128:
                if i + 1 + n + 1 > len(data):
                    break
                out += data[i + 1:i + n + 2]
                i += n + 2
            else:
                if i + 1 >= len(data):
                    break
                out += data[i + 1:i + 2] * (257 - n)
                i += 2
            if len(out) >= BUFFER:
                yield bytes(out)
                out.clear()
        carry = data[i:]
    yield bytes(out)


_NOT_SPACE = re.compile(rb"[^\x00\t\n\f\r ]+")


def _ascii_hex(pieces: Pieces) -> Pieces:
    """ASCIIHex (7.4.2): two hex digits a byte, white space ignored, `>` the end; an odd last digit
    is followed by 0."""
    carry = b""
    for piece in pieces:
        text = carry + b"".join(_NOT_SPACE.findall(piece))
        end = text.find(b">")
        if end >= 0:
            text = text[:end] + (b"0" if end % 2 else b"")
        cut = len(text) - len(text) % 2
        try:
            yield binascii.unhexlify(text[:cut])
        except binascii.Error as exc:
            raise DecodeError(f"ASCIIHex: {exc}") from None
        carry = text[cut:]
        if end >= 0:
            return


def _ascii85(pieces: Pieces) -> Pieces:
    """ASCII85 (7.4.3): five characters for four bytes, `z` for four zero bytes (only between
    groups), white space ignored, `~>` the end."""
    carry = b""
    for piece in _small(pieces):  # a85decode holds a small object per group: ~25 times its input
        text = carry + b"".join(_NOT_SPACE.findall(piece))
        end = text.find(b"~")
        if end >= 0:
            text = text[:end]
        z = text.rfind(b"z") + 1  # a z ends a group, so the text up to it is whole groups
        cut = len(text) if end >= 0 else z + (len(text) - z) // 5 * 5
        try:
            yield base64.a85decode(text[:cut])
        except ValueError as exc:
            raise DecodeError(f"ASCII85: {exc}") from None
        carry = text[cut:]
        if end >= 0:
            return


def _small(pieces: Pieces) -> Pieces:
    for piece in pieces:
        for i in range(0, len(piece), READ_SIZE):
            yield piece[i:i + READ_SIZE]


DECODERS = {
    "FlateDecode": _flate, "Fl": _flate,
    "LZWDecode": _lzw, "LZW": _lzw,
    "RunLengthDecode": _run_length, "RL": _run_length,
    "ASCIIHexDecode": _ascii_hex, "AHx": _ascii_hex,
    "ASCII85Decode": _ascii85, "A85": _ascii85,
}
