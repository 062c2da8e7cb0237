"""Issue 33, point 8: memory while decompressing. A 172 KB .jsonl.zst of 1 MB lines took a worker to
3.4 GB (each 64 KiB of input was decompressed with no limit on its output); the same file as gzip
stayed at 195 MB. Generated over every whole-file decompressor a reader uses: the same bomb (1 MB
lines of real text, one compressor's stream fed UNITS times), read through the readers' own entry
points in a child process whose peak RSS is the measure; and a zstd stream cut at every place."""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zlib

import pytest
import zstandard

from ..conftest import TEST_DATA
from .processes import python

JSONL = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # real Common Crawl documents (see tests/data/SOURCE.md)
LINE_BYTES = 1 << 20
LINES_PER_UNIT, UNITS = 16, 24  # 384 MiB decompressed
# What each codec's streaming compressor makes of the unit fed UNITS times: one gzip member, one xz
# stream, one zstd frame (`gzip` and `zstd` write one for a whole file, however large). bz2 takes
# 10 s to compress a unit here, so its file is the unit's stream repeated (a valid multi-stream .bz2):
# its reader bounds each read the same way whatever a stream holds.
COMPRESSORS = {"gz": lambda: zlib.compressobj(1, wbits=31), "xz": lambda: lzma.LZMACompressor(preset=0),
               "zst": lambda: zstandard.ZstdCompressor().compressobj(), "bz2": None}


def _write_bomb(path, ext: str, unit: bytes) -> None:
    with path.open("wb") as f:
        if COMPRESSORS[ext] is None:
            f.write(bz2.compress(unit) * UNITS)
            return
        compressor = COMPRESSORS[ext]()
        for _ in range(UNITS):
            f.write(compressor.compress(unit))
        f.write(compressor.flush())


READ = """
import sys
from ylink_data.io.input_config import InputConfig
from ylink_data.io.readers import Split, open_split, read_split, split_extension
path = sys.argv[1]
fmt, compression = split_extension(path)
split = Split(path, fmt, None, 0, None, compression)
kinds = {}
with open_split(split, {}) as f:
    for item in read_split(split, f, InputConfig(paths=[path])):
        kinds[type(item).__name__] = kinds.get(type(item).__name__, 0) + 1
# VmHWM: this process's own peak. ru_maxrss is not: Linux carries it across exec from the forked
# parent, so inside a long pytest session it reports the test runner's size.
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(kinds.get("Record", 0), peak * 1024)
"""


def _bomb_unit() -> bytes:
    with gzip.open(JSONL, "rt") as f:
        text = json.loads(f.readline())["text"]
    line = json.dumps({"text": (text + "\n") * (LINE_BYTES // len(text.encode()))}).encode() + b"\n"
    return line * LINES_PER_UNIT


@pytest.mark.parametrize("ext", list(COMPRESSORS))
def test_a_compressed_jsonl_of_huge_lines_is_read_in_bounded_memory(ext, tmp_path):
    unit = _bomb_unit()
    bomb = tmp_path / f"bomb.jsonl.{ext}"
    _write_bomb(bomb, ext, unit)
    done = python(READ, bomb)
    assert done.returncode == 0, done.stderr[-3000:]
    records, peak = map(int, done.stdout.split())
    assert records == LINES_PER_UNIT * UNITS  # every line read, none lost
    decompressed = len(unit) * UNITS
    # Measured (2026-12, this machine): 91-95 MB for each codec; before the fix zstd peaked at 499 MB,
    # its one frame decompressed whole by one call.
    assert peak < decompressed // 2, f"{ext}: peak RSS {peak:,} bytes reading {decompressed:,} decompressed"


def _zstd_stream_of_every_frame_kind() -> tuple[bytes, bytes]:
    """(compressed, content): frames with and without a checksum and a content size, raw, RLE and
    compressed blocks, an empty frame, a streamed frame of several blocks, and a skippable frame."""
    with gzip.open(JSONL, "rb") as f:
        prose = f.read(200_000)  # real documents: compressed blocks
    pieces = [(zstandard.ZstdCompressor(write_checksum=True), prose[:50_000]),
              (zstandard.ZstdCompressor(write_content_size=False), b"a" * 300_000),  # RLE blocks
              (zstandard.ZstdCompressor(level=-5), bytes(range(256)) * 40),  # raw blocks
              (zstandard.ZstdCompressor(), b"")]
    data = b"".join(c.compress(p) for c, p in pieces)
    data += b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!"  # a skippable frame
    streamed = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    data += b"".join(streamed.compress(prose[i:i + 40_000]) + streamed.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
                     for i in range(0, len(prose), 40_000)) + streamed.flush()
    return data, b"".join(p for _, p in pieces) + prose


def test_a_zstd_stream_cut_anywhere_says_so_and_a_whole_one_reads_whole():
    """The bounded zstd reader follows the frames' structure itself (zstandard's stream reader ends
    silently inside a cut-short frame): generated over every cut of a stream of every frame kind."""
    from ylink_data.io.readers.decompress import decompressed

    data, content = _zstd_stream_of_every_frame_kind()
    assert decompressed(io.BytesIO(data), "zstd").read() == content
    ends = set(range(1, len(data), max(1, len(data) // 400))) | set(range(len(data) - 40, len(data)))
    for end in sorted(ends):
        try:
            got = decompressed(io.BytesIO(data[:end]), "zstd").read()
        except (EOFError, zstandard.ZstdError):
            continue
        # A cut that falls between two frames is a whole stream of fewer frames: its content is a
        # prefix made of whole frames, never a frame's part.
        assert content.startswith(got) and data[:end] in _frame_prefixes(data), end


def _frame_prefixes(data: bytes) -> set[bytes]:
    """`data` cut at the end of each of its frames (zstandard's own frame sizes)."""
    cuts, pos = {b""}, 0
    while pos < len(data):
        if data[pos:pos + 4] == b"\x50\x2a\x4d\x18":
            pos += 8 + int.from_bytes(data[pos + 4:pos + 8], "little")
        else:
            pos += _frame_size(data[pos:])
        cuts.add(data[:pos])
    return cuts


def _frame_size(data: bytes) -> int:
    """The first frame's size in bytes: what the decompressor leaves unused after it."""
    d = zstandard.ZstdDecompressor().decompressobj()
    d.decompress(data)
    return len(data) - len(d.unused_data)
