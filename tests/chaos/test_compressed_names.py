"""Issue 39, point 20 (the `.lz4` line): a `docs.jsonl.lz4` got "cannot tell the format ...; set
input.format", and with input.format set its compressed bytes were read as JSONL. A file whose name
says neither its format nor its compression is now known by its first bytes (io/readers/registry.py's
MAGIC): a compression ylink reads is read decompressed when input.format names the format; any other
is refused in one line saying how to undo it.

Generated over every compression in MAGIC that a real compressor here can make (Python's gzip, bz2,
lzma and zstandard; the lz4 command), each file named without its extension (and `.lz4` as lz4's
own), with input.format auto and jsonl."""
from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest
import zstandard

import ylink_data
from ylink_data.core.errors import InputError
from ylink_data.io.readers.registry import COMPRESSION, MAGIC, compression_of_head

from ..conftest import TEST_DATA


def _lz4(data: bytes) -> bytes:
    return subprocess.run(["lz4", "-c", "-q"], input=data, capture_output=True, check=True).stdout


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data), "lz4": _lz4,
}
LINES = gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes())


def _made(name: str) -> bool:
    return name != "lz4" or shutil.which("lz4") is not None


def test_every_compression_ylink_reads_is_made_here():
    assert set(COMPRESSION.values()) <= set(COMPRESSORS) and set(COMPRESSORS) <= set(MAGIC.values())


@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_magic_bytes_name_each_compression(compression):
    if not _made(compression):
        pytest.skip("no lz4 command")
    assert compression_of_head(COMPRESSORS[compression](LINES)[:64]) == compression


@pytest.mark.parametrize("fmt", ["auto", "jsonl"])
@pytest.mark.parametrize("name", ["docs.data", "docs", "docs.jsonl.lz4"])
@pytest.mark.parametrize("compression", sorted(COMPRESSORS))
def test_compressed_bytes_are_read_decompressed_or_refused_never_read_as_text(compression, name, fmt, tmp_path):
    if not _made(compression):
        pytest.skip("no lz4 command")
    path = tmp_path / name
    path.write_bytes(COMPRESSORS[compression](LINES))
    cfg = {"name": "compressed", "input": {"paths": [str(path)], "format": fmt},
           "output": {"path": str(tmp_path / "out")}, "stages": []}
    if compression in COMPRESSION.values() and fmt != "auto":
        stats = ylink_data.run(cfg, progress=False).stats
        assert stats["output_records"] == len(LINES.splitlines()) and stats["quarantined"] == 0
        return
    with pytest.raises(InputError) as refused:
        ylink_data.run(cfg, progress=False)
    line = str(refused.value)
    assert line.startswith(f"{path} is {compression}-compressed") and "\n" not in line, line
    if compression in COMPRESSION.values():
        assert "set input.format" in line, line
    else:
        assert "does not decompress" in line and "lz4 -d" in line, line
    assert not (tmp_path / "out").exists()
