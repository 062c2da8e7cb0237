"""Whole-file decompression of streamed inputs (JSONL, text, HTML as .gz, .bz2, .xz, .zst): the one
place a reader decompresses a file, each read making at most the bytes it asks for.

A compressed stream may expand by four orders of magnitude (a 172 KB .jsonl.zst of 1 MB lines holds
3.4 GB): memory must be bounded by what a read asks for, never by what a frame or a chunk of input
holds. gzip, bz2 and xz (Python's own readers) decompress with a maximum output length. zstandard's
`decompressobj` has none (64 KiB of input made 1.3 GB in one call), so zstd goes through its stream
reader, which fills only the buffer it is given; that reader ends silently inside a cut-short frame,
so `_FrameWalk` follows the frames' structure as the bytes pass and says so (EOFError, as gzip).

Records are then bounded by input.max_record_bytes (a line is read up to it), documents read whole by
the same, and what a document's reader unpacks by input.max_unpacked_bytes: a DOCX or PPTX package
from its ZIP directory (document.too_large), a PDF stream by decoding it first, bounded (pdf_filters.py),
before PDFium decodes it whole.
"""
from __future__ import annotations

import io
import struct
from typing import IO

import fsspec.compression

READ_SIZE = 1 << 16  # compressed bytes read at a time
BUFFER = 1 << 20  # decompressed bytes a read makes at most (the buffered reader's size)


def decompressed(raw: IO[bytes], compression: str) -> IO[bytes]:
    """`raw` decompressed, each read making at most BUFFER bytes or the size asked, whichever is larger."""
    if compression == "zstd":
        return io.BufferedReader(_ZstdReader(raw), BUFFER)
    return fsspec.compression.compr[compression](raw, mode="rb")


class _ZstdReader(io.RawIOBase):
    def __init__(self, raw: IO[bytes]):
        import zstandard

        self._walk = _FrameWalk()
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            _Tee(raw, self._walk), read_size=READ_SIZE, read_across_frames=True, closefd=False)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._reader.readinto(b)
        if n == 0 and not self._walk.at_boundary():
            raise EOFError("the zstd stream ends inside a frame (truncated file?)")
        return n


class _Tee(io.RawIOBase):
    """`raw`'s bytes, each also shown to `walk`."""

    def __init__(self, raw: IO[bytes], walk: _FrameWalk):
        self._raw, self._walk = raw, walk

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._walk.feed(data)
        return data


_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)
_DICT_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)


class _FrameWalk:
    """Follows the structure of zstd frames (RFC 8878, section 3.1) without decompressing them:
    frame headers, block headers (whose sizes say how many bytes to pass over), checksums, skippable
    frames. `at_boundary()`: the bytes so far end where a frame ends. Bytes that break the format
    are the decoder's to refuse; the walk then just stops following."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._skip = 0
        self._need, self._step = 4, self._magic
        self._checksum = False
        self._lost = False

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._lost:
            if self._skip:
                n = min(self._skip, len(view))
                self._skip -= n
                view = view[n:]
                continue
            n = min(self._need - len(self._buf), len(view))
            self._buf += view[:n]
            view = view[n:]
            if len(self._buf) == self._need:
                field, self._buf = bytes(self._buf), bytearray()
                self._step(field)

    def at_boundary(self) -> bool:
        return self._lost or (self._step == self._magic and not self._buf and not self._skip)

    def _magic(self, field: bytes) -> None:
        (magic,) = struct.unpack("<I", field)
        if magic in _SKIPPABLE:
            self._need, self._step = 4, self._skippable_size
        elif magic == _ZSTD_MAGIC:
            self._need, self._step = 1, self._descriptor
        else:
            self._lost = True

    def _skippable_size(self, field: bytes) -> None:
        self._skip = struct.unpack("<I", field)[0]
        self._need, self._step = 4, self._magic

    def _descriptor(self, field: bytes) -> None:
        fhd = field[0]
        single_segment = (fhd >> 5) & 1
        self._checksum = bool((fhd >> 2) & 1)
        content_size = _CONTENT_SIZE_BYTES[fhd >> 6] or (1 if single_segment else 0)
        rest = (0 if single_segment else 1) + _DICT_ID_BYTES[fhd & 3] + content_size
        self._skip = rest
        self._need, self._step = 3, self._block

    def _block(self, field: bytes) -> None:
        header = int.from_bytes(field, "little")
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        self._skip = 1 if kind == 1 else size  # an RLE block holds one byte, repeated `size` times
        if not last:
            return
        if self._checksum:
            self._need, self._step = 4, self._content_checksum
        else:
            self._need, self._step = 4, self._magic

    def _content_checksum(self, field: bytes) -> None:
        self._need, self._step = 4, self._magic
