"""Issue 33, point 8: memory while decompressing. A 172 KB .jsonl.zst of 1 MB lines took a worker to
3.4 GB (each 64 KiB of input was decompressed with no limit on its output); the same file as gzip
stayed at 195 MB. Generated over every whole-file decompressor a reader uses: the same bomb (many
1 MB lines of real text in one stream),
one stream of a compressor fed UNITS times, read through the readers' own entry points in a child process whose peak RSS is the measure."""
from __future__ import annotations

import bz2
import gzip
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
import resource, sys
from ylink_data.config import InputConfig
from ylink_data.io.readers import Split, open_split, read_split, split_extension
path = sys.argv[1]
fmt, compression = split_extension(path)
split = Split(path, fmt, None, 0, None, compression)
kinds = {}
with open_split(split, {}) as f:
    for item in read_split(split, f, InputConfig(paths=[path])):
        kinds[type(item).__name__] = kinds.get(type(item).__name__, 0) + 1
print(kinds.get("Record", 0), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
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
