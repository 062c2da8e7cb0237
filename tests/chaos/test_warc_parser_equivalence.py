"""Issue 13, point 3: a WARC record gives the same Record / Skip / Bad whichever parser reads it, and
damaging one record never changes what any other record gives.

FastWARC read ClueWeb09's responses (HTTP headers ending in bare LF) as `not_html` (28 of 29 pages
dropped, nothing quarantined), and damaging one record could flip a different one between dropped
and kept. Here the fast path is held to warcio alone on every real WARC we have, and a deterministic
fuzz damages one record at a time in the bundled crawl.
"""
from __future__ import annotations

import io
import random
import zlib

import pytest
from warcio.archiveiterator import ArchiveIterator

from ylink_data.io.readers import Record, Split, read_split
from ylink_data.io.readers import warc as warc_reader
from ylink_data.config import InputConfig

from ..conftest import SAMPLES
from ..test_malformed import gzip_member, gzip_members

CLUEWEB = "cc_samples/resiliparse_CC-MAIN-2020-34/tests/data/clueweb-quirk.warc.gz"
BUNDLED = sorted(p for p in SAMPLES.iterdir() if ".warc" in p.name)
SHARED_WARCS = ["cc_samples/resiliparse_CC-MAIN-2020-34/tests/data/clueweb-quirk.warc.gz",
                "cc_samples/resiliparse_CC-MAIN-2020-34/tests/data/warcfile.warc.gz",
                "cc_samples/whirlwind_CC-MAIN-2024-22/whirlwind.warc.gz",
                "cc_samples/whirlwind_CC-MAIN-2024-22/whirlwind.warc.wet.gz",
                "cc_samples/whirlwind_CC-MAIN-2024-22/whirlwind.warc.wat.gz",
                "cc_samples/dolma/tests/data/warc/sample-0000.warc.gz",
                "cc_samples/dolma/tests/data/warc/sample-0001.warc.gz",
                "cc_samples/eugeneware_CC-MAIN-2014-35/test/fixtures/"
                "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
                "cc_samples/eugeneware_CC-MAIN-2014-35/test/fixtures/"
                "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.wet",
                "cc_samples/eugeneware_CC-MAIN-2014-35/test/fixtures/"
                "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.wat"]
CFG = InputConfig(paths=["unused"])


def read(data: bytes, *, warcio_only: bool = False) -> list:
    """Every item of a whole WARC file, read by the pipeline's reader (FastWARC where it can vouch
    for a record), or by warcio alone."""
    saved = warc_reader.FastArchiveIterator
    warc_reader.FastArchiveIterator = None if warcio_only else saved
    try:
        return list(read_split(Split("mem.warc", "warc", len(data)), io.BytesIO(data), CFG))
    finally:
        warc_reader.FastArchiveIterator = saved


# ----------------------------------------------------------------------------- real files


def test_clueweb_pages_with_bare_lf_http_headers_are_all_read(shared_data):
    data = (shared_data / CLUEWEB).read_bytes()
    items = read(data)
    pages = [i for i in items if isinstance(i, Record) and i.metadata["content_type"] == "text/html"]
    # warcio alone, straight from the file, is the independent count of HTML responses
    with io.BytesIO(data) as f:
        html = [r for r in ArchiveIterator(f) if r.rec_type == "response"
                and (r.http_headers.get_header("Content-Type") or "").startswith("text/html")]
    assert len(html) == len(pages) == 29
    assert [p.url for p in pages] == [r.rec_headers.get_header("WARC-Target-URI") for r in html]
    assert items == read(data, warcio_only=True)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_warcs_read_the_same_with_either_parser(path):
    data = path.read_bytes()
    assert read(data) == read(data, warcio_only=True)


@pytest.mark.parametrize("name", SHARED_WARCS, ids=lambda n: n.rsplit("/", 1)[-1])
def test_shared_warcs_read_the_same_with_either_parser(shared_data, name):
    data = (shared_data / name).read_bytes()
    items = read(data)
    assert items and items == read(data, warcio_only=True)


# ----------------------------------------------------------------------------- fuzz


def record_spans(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of every record: its gzip member, or warcio's span in an uncompressed file."""
    if data[:2] == b"\x1f\x8b":
        return [(pos, len(member)) for pos, member, _ in gzip_members(data)]
    spans = []
    it = ArchiveIterator(io.BytesIO(data))
    for _ in it:
        spans.append((it.get_record_offset(), it.get_record_length()))
    return spans


def damage(data: bytes, span: tuple[int, int], rng: random.Random) -> tuple[bytes, int]:
    """`data` with the record at `span` damaged one way or another: 1-4 bits flipped in its header
    or its body, or its tail cut off; for gzip, in the record (recompressed) or in the compressed
    bytes themselves. Returns the damaged file and the record's new length."""
    pos, length = span
    gz = data[:2] == b"\x1f\x8b"
    kind = rng.choice(["header", "body", "truncate"] + (["raw_flip", "raw_truncate"] if gz else []))
    raw = data[pos:pos + length]
    if gz and not kind.startswith("raw"):
        raw = zlib.decompressobj(31).decompress(raw)
    head_end = raw.find(b"\r\n\r\n") + 4
    if kind == "truncate" or kind == "raw_truncate":
        raw = raw[:rng.randrange(1, len(raw))]
    else:
        lo, hi = {"header": (0, head_end), "body": (head_end, len(raw))}.get(kind, (0, len(raw)))
        lo, hi = (lo, hi) if hi > lo else (0, len(raw))
        flipped = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(lo, hi)] ^= 1 << rng.randrange(8)
        raw = bytes(flipped)
    new = gzip_member(raw) if gz and not kind.startswith("raw") else raw
    return data[:pos] + new + data[pos + length:], len(new)


def others(items: list, pos: int, length: int, shift: int = 0) -> list:
    """The items of every record but the one at [pos, pos + length), later offsets moved by `shift`."""
    out = []
    for item in items:
        if pos <= item.offset < pos + length:
            continue
        fields = {k: getattr(item, k) for k in item.__slots__}
        if item.offset > pos:
            fields["offset"] += shift
        out.append(type(item)(**fields))
    return out


CASES_PER_FILE = 40


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_damaging_one_record_changes_no_other_record(path):
    data = path.read_bytes()
    spans = record_spans(data)
    good = read(data)
    assert len(good) == len(spans)
    rng = random.Random(path.name)  # deterministic: the same cases on every run
    for case in range(CASES_PER_FILE):
        k = rng.randrange(len(spans))
        pos, length = spans[k]
        damaged, new_length = damage(data, spans[k], rng)
        items = read(damaged)
        assert others(items, pos, new_length) == others(good, pos, length, new_length - length), (
            f"case {case}: damaging record {k} (offset {pos}) changed another record")
