"""Issue 13, point 3: a WARC record gives the same Record / Skip / Bad whichever parser reads it, and
damaging one record never changes what any other record gives.

FastWARC read ClueWeb09's responses (HTTP headers ending in bare LF) as `not_html` (28 of 29 pages
dropped, nothing quarantined), and damaging one record could flip a different one between dropped
and kept. Here the fast path is held to warcio alone on every real WARC we have, and a deterministic
fuzz damages one record at a time in the bundled crawl. Below: no record is lost silently in a WARC
gzipped whole, nor an ARC record with a long URL at a split's start or after a damaged record, nor
the records after a damaged one in an uncompressed ARC.
"""
from __future__ import annotations

import gzip
import io
import random
import zlib

import pytest
from warcio.archiveiterator import ArchiveIterator

from ylink_data.io.readers import Bad, Record, Skip, Split, read_split
from ylink_data.io.readers import warc as warc_reader
from ylink_data.io.input_config import InputConfig

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
    """Every item of a whole WARC file, read by the pipeline's reader (the fast path where it can vouch
    for a record), or by warcio alone."""
    saved = warc_reader.FAST_PATH
    warc_reader.FAST_PATH = not warcio_only and saved
    try:
        return list(read_split(Split("mem.warc", "warc", len(data)), io.BytesIO(data), CFG))
    finally:
        warc_reader.FAST_PATH = saved


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


def assert_damage_stays_in_its_record(data: bytes, seed: str) -> None:
    """Damages one record of `data` at a time, CASES_PER_FILE times, and checks that no other
    record's result changes."""
    spans = record_spans(data)
    good = read(data)
    assert len(good) == len(spans)
    rng = random.Random(seed)  # deterministic: the same cases on every run
    for case in range(CASES_PER_FILE):
        k = rng.randrange(len(spans))
        pos, length = spans[k]
        damaged, new_length = damage(data, spans[k], rng)
        items = read(damaged)
        assert others(items, pos, new_length) == others(good, pos, length, new_length - length), (
            f"case {case}: damaging record {k} (offset {pos}) changed another record")


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_damaging_one_record_changes_no_other_record(path):
    assert_damage_stays_in_its_record(path.read_bytes(), path.name)


# ----------------------------------------------------------------------------- a WARC gzipped whole
# `gzip x.warc` makes one gzip member of the whole file. Read member by member, five records in a
# 2 MB member gave one Record and nothing else (warcio's offset does not move inside a member, so
# the reader took the second record for one already read and resynchronised past the end), and
# the same file under the size limit gave one Bad: the result depended on the file's size.

TRAFILATURA = SAMPLES / "trafilatura-eval-pages.warc.gz"


def read_split_of(data: bytes, cfg: InputConfig, start: int = 0, end: int | None = None) -> list:
    return list(read_split(Split("mem.warc.gz", "warc", len(data), start, end), io.BytesIO(data), cfg))


def in_splits(data: bytes, cfg: InputConfig, pieces: int) -> list:
    """Every item of the file read as the planner cuts it: byte ranges, one task each."""
    step = len(data) // pieces + 1
    ranges = [(s, s + step if s + step < len(data) else None) for s in range(0, len(data), step)]
    return [item for start, end in ranges for item in read_split_of(data, cfg, start, end)]


@pytest.mark.parametrize("over_the_limit", [True, False], ids=["member-over-the-limit", "member-under-the-limit"])
@pytest.mark.parametrize("path", [TRAFILATURA, SAMPLES / "CC-MAIN-2020-34-excerpt.warc.gz"], ids=lambda p: p.name)
def test_a_warc_gzipped_whole_gives_every_record_at_its_uncompressed_offset(path, over_the_limit):
    plain = gzip.decompress(path.read_bytes())  # the same records, uncompressed
    whole = gzip.compress(plain)  # one gzip member, as `gzip x.warc` writes it
    largest = max(length for _, length in record_spans(plain))
    limit = largest if over_the_limit else 2 * len(plain)
    assert (len(plain) > limit + (1 << 16)) == over_the_limit
    cfg = InputConfig(paths=["unused"], max_record_bytes=limit)
    expected = read_split_of(plain, cfg)
    assert len(expected) == len(record_spans(plain)) and any(isinstance(i, Record) for i in expected)
    assert read_split_of(whole, cfg) == expected
    assert in_splits(whole, cfg, pieces=4) == expected  # the planner's byte ranges: read once, by the first


def test_a_warc_gzipped_whole_and_cut_short_gives_its_records_then_one_bad():
    plain = gzip.decompress(TRAFILATURA.read_bytes())
    whole = gzip.compress(plain)
    cfg = InputConfig(paths=["unused"])
    expected = read_split_of(plain, cfg)
    got = read_split_of(whole[: len(whole) * 2 // 3], cfg)
    assert 1 < len(got) < len(expected)
    assert got[:-1] == expected[: len(got) - 1]
    last = got[-1]
    assert isinstance(last, Bad) and last.offset == expected[len(got) - 1].offset and "cut short" in last.error


@pytest.mark.parametrize("over_the_limit", [True, False], ids=["member-over-the-limit", "member-under-the-limit"])
def test_a_member_holding_several_records_is_one_bad_whatever_its_size(over_the_limit):
    """In a file gzipped record by record, a member holding more records (files concatenated) has
    no offsets to name them by: it is one Bad with the fix, never a Record and silence."""
    data = TRAFILATURA.read_bytes()
    members = gzip_members(data)
    limit = max(len(raw) for _, _, raw in members)
    k = len(members) // 2
    m = 2
    while over_the_limit and sum(len(raw) for _, _, raw in members[k:k + m]) <= limit + (1 << 16):
        m += 1
    merged = gzip_member(b"".join(raw for _, _, raw in members[k:k + m]))
    pos, end = members[k][0], members[k + m - 1][0] + len(members[k + m - 1][1])
    damaged = data[:pos] + merged + data[end:]
    cfg = InputConfig(paths=["unused"], max_record_bytes=limit if over_the_limit else 2 * len(damaged))
    good, items = read_split_of(data, cfg), read_split_of(damaged, cfg)
    assert others(items, pos, len(merged)) == others(good, pos, end - pos, len(merged) - (end - pos))
    inside = [i for i in items if pos <= i.offset < pos + len(merged)]
    assert len(inside) == 1 and isinstance(inside[0], Bad) and "warcio recompress" in inside[0].error


# ----------------------------------------------------------------------------- ARC records with long URLs
# An ARC record starts with a header line as long as its URL. Looking for the next record at a split's
# start (or after a damaged one) inflated 512 bytes and wanted the whole line in them: a record whose
# URL is longer was not found, the split before stopped at its end and the record was lost.


ARC_DESC = b"1 0 InternetArchive\nURL IP-address Archive-date Content-type Archive-length\n"


def arc_record(url: bytes, mime: bytes, body: bytes) -> bytes:
    return b"%s 0.0.0.0 20140101000000 %s %d\n" % (url, mime, len(body)) + body + b"\n"


def arc_file() -> list[bytes]:
    """The gzip members of an ARC file: its header record, then real pages under URLs short and long."""
    from .test_readers_everywhere import first_html_page

    http = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + first_html_page()
    urls = [b"http://example.com/a", b"http://example.com/" + b"long-path/" * 60, b"http://example.com/b",
            b"http://example.com/search?" + b"q=word&" * 1200, b"http://example.com/c"]
    return [gzip_member(arc_record(b"filedesc://crawl.arc", b"text/plain", ARC_DESC))] + [
        gzip_member(arc_record(url, b"text/html", http)) for url in urls]


def test_arc_records_with_long_urls_are_found_at_every_split_start():
    members = arc_file()
    data = b"".join(members)
    whole = read_split_of(data, CFG)
    assert [type(i) for i in whole] == [Skip] + [Record] * (len(members) - 1)
    starts = [sum(len(m) for m in members[:k]) for k in range(1, len(members))]
    for start in starts:
        for cut in (start - 1, start, start + 1):
            assert read_split_of(data, CFG, 0, cut) + read_split_of(data, CFG, cut) == whole, f"split at {cut}"


def test_arc_records_with_long_urls_are_found_after_a_damaged_one():
    members = arc_file()
    data = b"".join(members)
    whole = read_split_of(data, CFG)
    for k in range(1, len(members) - 1):  # the record before each one is cut short
        pos = sum(len(m) for m in members[:k])
        cut = members[k][: len(members[k]) // 2]
        items = read_split_of(data[:pos] + cut + data[pos + len(members[k]):], CFG)
        assert others(items, pos, len(cut)) == others(whole, pos, len(members[k]), len(cut) - len(members[k]))
        assert [type(i) for i in items if pos <= i.offset < pos + len(cut)] == [Bad]


# ----------------------------------------------------------------------------- damage in an ARC
# After a damaged record in an uncompressed ARC, the reader looked for the next `WARC/1.`: there is
# none in an ARC, so every record after the damaged one was lost without a trace. And a damaged
# header line made the record before it the one blamed (an ARC record ends with one LF, not the
# CRLF CRLF the check counted on).


def real_arc(records: int) -> list[bytes]:
    """The records of an ARC file: its header record, then the first real responses of the bundled
    crawl under their own URLs, as captured (HTTP headers and payload)."""
    out = [arc_record(b"filedesc://crawl.arc", b"text/plain", ARC_DESC)]
    with open(TRAFILATURA, "rb") as f:
        for r in ArchiveIterator(f):
            if len(out) > records:
                break
            if r.rec_type == "response":
                url = r.rec_headers.get_header("WARC-Target-URI").encode()
                out.append(arc_record(url, b"text/html", r.http_headers.to_bytes() + r.raw_stream.read()))
    return out


@pytest.mark.parametrize("gz", [False, True], ids=["arc", "arc.gz"])
def test_damaging_one_arc_record_changes_no_other_record(gz):
    records = real_arc(10)
    data = b"".join(gzip_member(r) if gz else r for r in records)
    assert [type(i) for i in read(data)] == [Skip] + [Record] * (len(records) - 1)
    assert_damage_stays_in_its_record(data, "arc.gz" if gz else "arc")


def test_a_damaged_arc_header_line_blames_its_own_record_and_the_rest_is_read():
    records = real_arc(4)
    data = b"".join(records)
    good = read(data)
    for k in range(1, len(records)):
        pos = sum(len(r) for r in records[:k])
        line_end = records[k].index(b"\n")
        broken = records[k][:line_end - 3] + b":" + records[k][line_end - 2:]  # a digit of its length
        items = read(data[:pos] + broken + data[pos + len(records[k]):])
        assert others(items, pos, len(broken)) == others(good, pos, len(records[k])), f"record {k}"
        assert [type(i) for i in items if i.offset == pos] == [Bad]
