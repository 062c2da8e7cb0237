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
import re
import zlib

import pytest
import zstandard

from ..conftest import SAMPLES, TEST_DATA
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


# ----------------------------------------------------------------------------- issue 39, point 14
# What one compressed unit inflates to, not only what one record holds. A .warc.gz member of one
# small record and 2 GB of NULs (9 MB compressed) grew a worker past 1.8 GB: the member was bounded
# only until its record was found, then warcio read on to the member's end, the NULs as one line,
# growing it a buffer at a time (minutes). Generated over every decompressing reader (WARC per
# record and gzipped whole, WET, ARC, JSONL as .gz and .zst, text and HTML as .gz) and bomb shapes:
# NULs after a record in its unit, a record's first line of NULs, and one well-formed record of the
# bomb's size. Each bomb is one `too_large` quarantine, the real records around it are read as
# without it, and what the bomb adds to the reading process's peak memory is a small part of it.

BOMB = 256 << 20  # bytes the bomb inflates to
RECORD_LIMIT = 4 << 20  # input.max_record_bytes here
SHAPES = ("tail", "line", "record")
PAGES = SAMPLES / "trafilatura-eval-pages.warc.gz"  # real pages and Common Crawl text (samples/crawl/SOURCE.md)
WET = SAMPLES / "CC-MAIN-2014-35-excerpt.warc.wet"
Unit = list[tuple[bytes, int]]  # a compressed unit's content: pieces, each repeated so many times


def _records(path, kind: bytes, count: int = 3) -> list[bytes]:
    """The first `count` records of a real WARC (gzipped per record or plain) whose WARC-Type is `kind`."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        raws = []
        while data:
            d = zlib.decompressobj(31)
            raws.append(d.decompress(data))
            data = d.unused_data
    else:
        raws = [b"WARC/1.0\r\n" + raw for raw in data.split(b"WARC/1.0\r\n")[1:]]
    return [raw for raw in raws if b"WARC-Type: " + kind + b"\r\n" in raw[:2000]][:count]


def _nuls() -> tuple[bytes, int]:
    return bytes(1 << 20), BOMB >> 20


def _prose() -> tuple[bytes, int]:
    """1 MiB of real text, repeated to the bomb's size."""
    text = _bomb_unit()[: 1 << 20].decode("utf-8", "ignore").encode()
    return text.ljust(1 << 20, b" "), BOMB >> 20


def _warc_bomb(kind: bytes, good: bytes, shape: str) -> Unit:
    if shape == "tail":
        return [(good, 1), _nuls(), (b"\r\n", 1)]
    if shape == "line":
        return [(b"WARC/1.0\r\n", 1), _nuls(), (b"\r\n", 1)]
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" if kind == b"response" else b""
    head = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % (len(block) + BOMB), good.partition(b"\r\n\r\n")[0])
    return [(head + b"\r\n\r\n" + block, 1), _prose(), (b"\r\n\r\n", 1)]


def _arc_record(url: bytes, mime: bytes, length: int) -> bytes:
    return b"%s 0.0.0.0 20240101000000 %s %d\n" % (url, mime, length)


def _arc_bomb(good: bytes, shape: str) -> Unit:
    if shape == "tail":
        return [(good, 1), _nuls(), (b"\n", 1)]
    if shape == "line":
        return [(b"http://example.com/bomb 0.0.0.0 20240101000000 text/html ", 1), _nuls(), (b"\n", 1)]
    http = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n"
    return [(_arc_record(b"http://example.com/bomb", b"text/html", len(http) + BOMB) + http, 1), _prose(), (b"\n", 1)]


def _jsonl_bomb(good: bytes, shape: str) -> Unit:
    if shape == "tail":
        return [(good.rstrip(b"\n"), 1), _nuls(), (b"\n", 1)]
    if shape == "line":
        return [_nuls(), (b"\n", 1)]
    return [(b'{"text": "', 1), (_prose()[0].replace(b'"', b" ").replace(b"\\", b" ").replace(b"\n", b" "), BOMB >> 20),
            (b'"}\n', 1)]


def _arc_records() -> list[bytes]:
    """An ARC file's header record, then ARC records of real pages (the sample's responses as captured)."""
    desc = b"1 0 InternetArchive\nURL IP-address Archive-date Content-type Archive-length\n"
    records = [_arc_record(b"filedesc://crawl.arc", b"text/plain", len(desc)) + desc + b"\n"]
    for raw in _records(PAGES, b"response"):
        head, _, block = raw.partition(b"\r\n\r\n")
        block = block[:-4]
        url = re.search(rb"WARC-Target-URI: (\S+)", head).group(1)
        records.append(_arc_record(url, b"text/html", len(block)) + block + b"\n")
    return records


def _case(fmt: str, shape: str) -> tuple[str, str, list[Unit], int]:
    """(file name, codec, units, index of the bomb unit): the units are the file's compressed units,
    good records around the bomb's."""
    if fmt in ("warc.gz", "warc.gz gzipped whole", "wet.gz"):
        kind = b"conversion" if fmt == "wet.gz" else b"response"
        first, middle, last = _records(WET if fmt == "wet.gz" else PAGES, kind)
        codec = "gzip" if fmt == "warc.gz gzipped whole" else "members"
        name = "bomb.warc.wet.gz" if fmt == "wet.gz" else "bomb.warc.gz"
        return name, codec, [[(first, 1)], _warc_bomb(kind, middle, shape), [(last, 1)]], 1
    if fmt == "arc.gz":
        desc, first, middle, last = _arc_records()
        return "bomb.arc.gz", "members", [[(desc, 1)], [(first, 1)], _arc_bomb(middle, shape), [(last, 1)]], 2
    if fmt in ("jsonl.gz", "jsonl.zst"):
        with gzip.open(JSONL) as f:
            first, middle, last = f.readline(), f.readline(), f.readline()
        return f"bomb.{fmt}", fmt.split(".")[1], [[(first, 1)], _jsonl_bomb(middle, shape), [(last, 1)]], 1
    return f"bomb.{fmt}", "gz", [[_prose()]], 0  # text and HTML: one document per file


CASES = [(fmt, shape) for fmt in ("warc.gz", "warc.gz gzipped whole", "wet.gz", "arc.gz", "jsonl.gz", "jsonl.zst")
         for shape in SHAPES] + [("txt.gz", "record"), ("html.gz", "record")]


def _gzip_member(unit: Unit) -> bytes:
    """One gzip member of the unit's content, made fast: after a full flush, deflate gives a repeated
    piece the same bytes each time."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    out, crc, size = [], 0, 0
    for piece, times in unit:
        first = c.compress(piece) + c.flush(zlib.Z_FULL_FLUSH)
        again = c.compress(piece) + c.flush(zlib.Z_FULL_FLUSH) if times > 1 else b""
        out += [first] + [again] * (times - 1)
        for _ in range(times):
            crc = zlib.crc32(piece, crc)
        size += len(piece) * times
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + b"".join(out) + c.flush()
            + (crc).to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little"))


def _write(path, codec: str, units: list[Unit]) -> None:
    with path.open("wb") as f:
        if codec == "members":
            for unit in units:
                f.write(_gzip_member(unit))
        elif codec in ("gz", "gzip"):
            f.write(_gzip_member([piece for unit in units for piece in unit]))
        else:
            c = zstandard.ZstdCompressor().compressobj()
            for piece, times in (piece for unit in units for piece in unit):
                for _ in range(times):
                    f.write(c.compress(piece))
            f.write(c.flush())


READ_BOTH = """
import json, os, sys
from ylink_data.io.input_config import InputConfig
from ylink_data.io.listing import InputFile
from ylink_data.io.readers import open_split, plan_splits, read_split

def read(path):
    cfg = InputConfig(paths=[path], max_record_bytes=int(sys.argv[3]))
    items = []
    for split in plan_splits([InputFile(path, os.path.getsize(path))], cfg, lambda url: {}):
        with open_split(split, {}) as f:
            items += [[type(i).__name__, i.decoded() if hasattr(i, "decoded") else None, getattr(i, "reason", None)]
                      for i in read_split(split, f, cfg)]
    return items

def peak():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))

good = read(sys.argv[1])  # the same format without the bomb: the readers loaded and used
before = peak()
bombed = read(sys.argv[2])
print(json.dumps({"good": good, "bombed": bombed, "rise": peak() - before}))
"""


@pytest.mark.parametrize("fmt,shape", CASES, ids=[f"{f}-{s}" for f, s in CASES])
def test_a_compressed_unit_is_bounded_in_what_it_inflates(fmt, shape, tmp_path):
    name, codec, units, bomb = _case(fmt, shape)
    bombed, good = tmp_path / name, tmp_path / "good" / name
    good.parent.mkdir()
    _write(bombed, codec, units)
    rest = units[:bomb] + units[bomb + 1:]  # text and HTML: a file of real text instead, one document
    _write(good, codec, rest or [[(_bomb_unit()[:4000].decode("utf-8", "ignore").encode(), 1)]])
    assert bombed.stat().st_size < BOMB // 20
    done = python(READ_BOTH, good, bombed, RECORD_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    bad = [item for item in out["bombed"] if item[0] == "Bad"]
    assert [reason for _, _, reason in bad] == ["too_large"], out["bombed"]
    # nothing else lost or changed
    assert [item for item in out["bombed"] if item[0] != "Bad"] == (out["good"] if rest else [])
    # Measured (2026-12): 7-12 MB added, 24-27 MB for the WARC gzipped whole (it keeps the last 2 x
    # max_record_bytes inflated to resync in); before the fix a 256 MiB member of NULs after a record took
    # over 300 s (warcio read the NULs as one line, a buffer at a time) and 1.1 GB at 512 MiB.
    assert out["rise"] < BOMB // 5, f"{fmt} {shape}: the bomb added {out['rise']:,} bytes to the peak"
