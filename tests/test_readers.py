"""Readers without Ray: every input format, format detection, splitting, charsets, http(s) and memory://.

Expectations are derived from the real inputs themselves (warcio, json, gzip, pyarrow read the same
bytes independently), never typed in by hand.
"""
from __future__ import annotations

import functools
import gzip
import json
import re
import shutil
import threading
import zlib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from warcio.archiveiterator import ArchiveIterator

from ylink_data.io.input_config import InputConfig
from ylink_data.core.errors import InputError
from ylink_data.io.charset import decode_html
from ylink_data.io.listing import InputFile, expand_paths
from ylink_data.io.readers import (MAX_TASK_BYTES, MIN_TASK_BYTES, TASKS_WANTED, Bad, Record, Skip, Split,
                                   group_splits, open_split, plan_splits, read_split, split_extension)

from .conftest import SAMPLES, TEST_DATA

JSONL_GZ = TEST_DATA / "cc_en_head-0174.jsonl.gz"
TRAFILATURA = SAMPLES / "trafilatura-eval-pages.warc.gz"
CC2020 = SAMPLES / "CC-MAIN-2020-34-excerpt.warc.gz"
CJK = re.compile(r"[\u4e00-\u9fff]")


def no_options(url: str) -> dict:
    return {}


def read_all(url: str | Path, **input_kw):
    """(items, splits): everything the readers yield for one file, split by split, in order."""
    url = str(url)
    cfg = InputConfig(paths=[url], **input_kw)
    splits = plan_splits(expand_paths([url], no_options), cfg, no_options)
    items = []
    for split in splits:
        with open_split(split, {}) as f:
            items.extend(read_split(split, f, cfg))
    return items, splits


def records(items) -> list[Record]:
    return [i for i in items if isinstance(i, Record)]


def warc_records(path: Path):
    """(offset, WARC-Type, target URI, HTTP Content-Type, payload) of every record, by warcio alone."""
    out = []
    with open(path, "rb") as f:
        it = ArchiveIterator(f)
        for rec in it:
            ctype = rec.http_headers.get_header("Content-Type") if rec.http_headers else None
            payload = rec.content_stream().read()
            out.append((it.get_record_offset(), rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"),
                        ctype, payload))
    return out


def jsonl_lines() -> list[bytes]:
    return gzip.decompress(JSONL_GZ.read_bytes()).splitlines(keepends=True)


def expected_jsonl_records(lines: list[bytes]) -> list[Record]:
    out, offset = [], 0
    for line in lines:
        obj = json.loads(line)
        text = obj.pop("text")
        # cc_net / RedPajama put the url at the top, dolma (this file) under metadata
        url = obj["url"] if isinstance(obj.get("url"), str) else obj["metadata"]["url"]
        out.append(Record(offset, text, url, obj))
        offset += len(line)
    return out


# ----------------------------------------------------------------------------- every format


def _declared_meta_charset(payload: bytes) -> str | None:
    m = re.search(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w-]+)""", payload[:8192], re.I)
    return m.group(1).decode().lower() if m else None


def test_warc_gz_responses_are_read_with_their_exact_text():
    source = warc_records(TRAFILATURA)
    responses = [r for r in source if r[1] == "response"]
    assert len(responses) == 45
    items, splits = read_all(TRAFILATURA)
    assert len(splits) == 1
    recs = records(items)
    assert [(r.offset, r.url) for r in recs] == [(o, u) for o, _, u, _, _ in responses]
    # The envelope's Content-Type has no charset: pages that are valid UTF-8 are read as UTF-8, the
    # others by their own meta declaration (gb2312 read as its superset GB18030, as browsers do).
    not_utf8 = 0
    for rec, (*_, payload) in zip(recs, responses):
        assert rec.metadata["warc_type"] == "response"
        if _strict(payload, "utf-8"):
            # A valid UTF-8 page is handed over as its own bytes (no decode and re-encode).
            assert (rec.text, rec.metadata["charset"]) == (payload, "utf-8")
            assert rec.decoded() == payload.decode("utf-8")
        else:
            not_utf8 += 1
            assert _declared_meta_charset(payload) == "gb2312"
            assert (rec.text, rec.metadata["charset"]) == (payload.decode("gb18030"), "gb18030")
    assert 0 < not_utf8 < 45
    # warcinfo is accounted for as a Skip: every record of the file is one item.
    assert len(items) == len(source)
    assert [i.reason for i in items if isinstance(i, Skip)] == ["warc_warcinfo"]


def test_a_made_up_warc_type_adds_no_reason_of_its_own(tmp_path):
    """A damaged or hostile WARC-Type must not name a drop reason (each a key in stats.json): the
    real file's warcinfo record, renamed to types WARC does not have, is counted as one reason."""
    members = []
    warcinfo = zlib.decompressobj(wbits=31).decompress(TRAFILATURA.read_bytes())  # the first gzip member
    assert b"WARC-Type: warcinfo" in warcinfo
    for made_up in (b"conve\xc3\xb8sion", b"x-custom", b"request2"):
        members.append(gzip.compress(warcinfo.replace(b"warcinfo", made_up, 1)))
    path = tmp_path / "types.warc.gz"
    path.write_bytes(b"".join(members))
    items, _ = read_all(path)
    assert [i.reason for i in items] == ["warc_unknown_type"] * 3


def test_uncompressed_warc_reads_the_same_documents_as_its_gzip(tmp_path):
    plain = tmp_path / "trafilatura.warc"
    plain.write_bytes(gzip.decompress(TRAFILATURA.read_bytes()))  # every member, concatenated
    gz_recs = records(read_all(TRAFILATURA)[0])
    items, _ = read_all(plain)
    recs = records(items)
    assert len(recs) == len(gz_recs) == 45
    assert [(r.url, r.text) for r in recs] == [(r.url, r.text) for r in gz_recs]
    # offsets are positions in the uncompressed file now, as warcio sees them
    assert [r.offset for r in recs] == [o for o, t, *_ in warc_records(plain) if t == "response"]


def test_uncompressed_common_crawl_warc():
    source = warc_records(SAMPLES / "CC-MAIN-2014-35-excerpt.warc")
    html = [(o, u, p) for o, t, u, c, p in source
            if t == "response" and (c or "").startswith("text/html") and p.strip()]
    items, _ = read_all(SAMPLES / "CC-MAIN-2014-35-excerpt.warc")
    assert len(items) == len(source)
    assert [(r.offset, r.url) for r in records(items)] == [(o, u) for o, u, _ in html]
    for rec, (_, _, payload) in zip(records(items), html):
        assert rec.decoded().encode(rec.metadata["charset"]) == payload  # decoded losslessly


@pytest.mark.parametrize("name", ["CC-MAIN-2014-35-excerpt.warc.wet", "CC-MAIN-2024-22-whirlwind.warc.wet.gz"])
def test_wet_conversion_records(name):
    source = warc_records(SAMPLES / name)
    conversions = [(o, u, p.decode("utf-8")) for o, t, u, _, p in source if t == "conversion" and p.strip()]
    assert conversions
    items, splits = read_all(SAMPLES / name)
    assert split_extension(name)[0] == "wet" and {s.format for s in splits} == {"warc"}
    assert [(r.offset, r.url, r.text) for r in records(items)] == conversions
    assert all(r.metadata["content_type"] == "text/plain" for r in records(items))
    assert len(items) == len(source)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".json.gz", ".jsonl.zst"])
def test_jsonl_plain_and_compressed(tmp_path, suffix):
    lines = jsonl_lines()
    raw = b"".join(lines)
    path = tmp_path / f"cc_en{suffix}"
    if suffix == ".jsonl":
        path.write_bytes(raw)
    elif suffix.endswith(".gz"):
        shutil.copyfile(JSONL_GZ, path)
    else:
        path.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw))
    items, splits = read_all(path)
    expected = expected_jsonl_records(lines)
    assert len(expected) == len(lines) == 10
    assert items == expected
    assert [s.compression for s in splits] == [{".jsonl": None, ".jsonl.gz": "gzip", ".json.gz": "gzip",
                                                ".jsonl.zst": "zstd"}[suffix]]


def test_jsonl_zst_of_several_frames(tmp_path):
    """zstd files written in pieces (one frame per piece, as parallel compressors do) read as one stream."""
    lines = jsonl_lines()
    path = tmp_path / "frames.jsonl.zst"
    path.write_bytes(b"".join(zstandard.compress(b"".join(lines[i:i + 3])) for i in range(0, len(lines), 3)))
    assert read_all(path)[0] == expected_jsonl_records(lines)


def test_parquet(tmp_path):
    objs = [json.loads(line) for line in jsonl_lines()]
    path = tmp_path / "cc_en.parquet"
    pq.write_table(pa.Table.from_pylist(objs), path)
    items, _ = read_all(path)
    expected = [(n, o["text"], o["metadata"]["url"]) for n, o in enumerate(objs)]
    assert [(i.offset, i.text, i.url) for i in items] == expected
    assert all(isinstance(i, Record) for i in items)
    assert [i.metadata["id"] for i in items] == [o["id"] for o in objs]


def test_text_file_is_one_document(tmp_path):
    prose = max((json.loads(line)["text"] for line in jsonl_lines()), key=len)
    path = tmp_path / "article.txt"
    path.write_text(prose, encoding="utf-8")
    items, _ = read_all(path)
    assert items == [Record(0, prose, None, {"content_type": "text/plain"})]
    # a UTF-8 byte order mark is not part of the text
    path.write_bytes(b"\xef\xbb\xbf" + prose.encode())
    assert [i.text for i in read_all(path)[0]] == [prose]


def test_html_file_is_one_document(tmp_path):
    pages = [p for _, t, _, _, p in warc_records(TRAFILATURA) if t == "response"]
    # a real page saved as a file: one in UTF-8 and one whose meta tag declares gb2312
    utf8 = next(p for p in pages if _strict(p, "utf-8") and len(CJK.findall(p.decode("utf-8"))) > 500)
    gb = next(p for p in pages if not _strict(p, "utf-8"))
    for name, payload, codec in [("utf8.html", utf8, "utf-8"), ("gb.htm", gb, "gb18030")]:
        path = tmp_path / name
        path.write_bytes(payload)
        items, _ = read_all(path)
        assert items == [Record(0, payload.decode(codec), None, {"content_type": "text/html", "charset": codec})]
        assert len(CJK.findall(items[0].text)) > 500 and "\ufffd" not in items[0].text


# ----------------------------------------------------------------------------- format detection


@pytest.mark.parametrize("name, expected", [
    ("CC-MAIN-x.warc.gz", ("warc", "gzip")),
    ("CC-MAIN-x.warc", ("warc", None)),
    ("CC-MAIN-x.warc.wet.gz", ("wet", "gzip")),
    ("CC-MAIN-x.warc.wet", ("wet", None)),
    ("x.wet.gz", ("wet", "gzip")),
    ("x.arc.gz", ("warc", "gzip")),
    ("docs.jsonl", ("jsonl", None)),
    ("docs.json.gz", ("jsonl", "gzip")),
    ("docs.jsonl.zst", ("jsonl", "zstd")),
    ("docs.ndjson.bz2", ("jsonl", "bz2")),
    ("part-0.parquet", ("parquet", None)),
    ("notes.TXT", ("text", None)),
    ("page.html", ("html", None)),
    ("https://host/path/page.htm?x=1.zip", ("html", None)),
    ("s3://bucket/dir.d/README", (None, None)),
    ("archive.tar.gz", (None, "gzip")),
    ("Report.PDF", ("pdf", None)),
    ("https://host/a/deck.pptx?download=1", ("pptx", None)),
    ("letter.docx", ("docx", None)),
    ("README.md", ("markdown", None)),
    ("notes.markdown.gz", ("markdown", "gzip")),
])
def test_split_extension(name, expected):
    assert split_extension(name) == expected


def test_unknown_extension_is_an_input_error_naming_the_file(tmp_path):
    path = tmp_path / "report.xyz"
    path.write_bytes(b"PK\x03\x04")  # a ZIP header but no ZIP: not sniffed as a DOCX/PPTX
    files = [InputFile(str(path), 4)]
    with pytest.raises(InputError, match=re.escape(str(path))):
        plan_splits(files, InputConfig(paths=[str(path)]), no_options)
    # an explicit format overrides the extension
    assert plan_splits(files, InputConfig(paths=[str(path)], format="text"), no_options)[0].format == "text"


# ----------------------------------------------------------------------------- splitting


@pytest.fixture
def plain_jsonl(tmp_path) -> Path:
    path = tmp_path / "cc_en.jsonl"
    path.write_bytes(b"".join(jsonl_lines()))
    return path


def _split_sizes():
    first = len(jsonl_lines()[0])
    # exactly on a line start, one byte either side, and sizes much smaller than most lines
    return [first, first - 1, first + 1, 1000, 4096, 30000]


@pytest.mark.parametrize("split_bytes", _split_sizes())
def test_jsonl_byte_ranges_yield_each_line_once(plain_jsonl, split_bytes):
    whole, whole_splits = read_all(plain_jsonl)
    assert len(whole_splits) == 1
    items, splits = read_all(plain_jsonl, split_bytes=split_bytes)
    size = plain_jsonl.stat().st_size
    assert len(splits) == -(-size // split_bytes) > 1
    assert [(s.start, s.end) for s in splits][0] == (0, split_bytes) and splits[-1].end is None
    assert items == whole == expected_jsonl_records(jsonl_lines())
    offsets = [i.offset for i in items]
    assert len(set(offsets)) == len(offsets)


def _gzip_members(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        d = zlib.decompressobj(31)
        d.decompress(data[pos:])
        pos = len(data) - len(d.unused_data)
    return starts


def test_warc_gz_byte_ranges_yield_each_record_once():
    whole, _ = read_all(CC2020)
    assert len(whole) == len(warc_records(CC2020)) == 50
    items, splits = read_all(CC2020, split_bytes=20_000)
    assert len(splits) == -(-CC2020.stat().st_size // 20_000) == 7
    members = set(_gzip_members(CC2020.read_bytes()))
    assert any(s.start not in members for s in splits[1:]), "split starts fall inside gzip members"
    assert items == whole
    # and split by split: every record belongs to the split in which its member starts
    for split in splits:
        cfg = InputConfig(paths=[split.url], split_bytes=20_000)
        with open_split(split, {}) as f:
            offsets = [i.offset for i in read_split(split, f, cfg)]
        end = split.end if split.end is not None else float("inf")
        assert offsets == sorted(o for o in members if split.start <= o < end)


UNCOMPRESSED = SAMPLES / "CC-MAIN-2014-35-excerpt.warc"


@pytest.mark.parametrize("split_bytes", [1000, 7777, 50_000])
def test_uncompressed_warc_byte_ranges_yield_each_record_once(split_bytes):
    whole, whole_splits = read_all(UNCOMPRESSED)
    assert len(whole_splits) == 1
    offsets = [o for o, *_ in warc_records(UNCOMPRESSED)]
    assert [i.offset for i in whole] == offsets
    items, splits = read_all(UNCOMPRESSED, split_bytes=split_bytes)
    assert len(splits) == -(-UNCOMPRESSED.stat().st_size // split_bytes) > 1
    assert any(s.start not in offsets for s in splits[1:]), "split starts fall inside records"
    assert items == whole


@pytest.mark.parametrize("damage", ["short payload", "broken first line"])
def test_uncompressed_warc_split_at_a_damaged_record(tmp_path, damage):
    """Whichever byte a split ends at, around a damaged record, the two splits together read what the
    whole file gives: no record is read twice or by neither. With a broken first line, the record
    after the split's end is one the next split cannot find (it looks for `WARC/1.` lines): this
    split reads it (Bad) and goes on to where the next one starts."""
    data = UNCOMPRESSED.read_bytes()
    offsets = [o for o, *_ in warc_records(UNCOMPRESSED)]
    if damage == "short payload":  # the third record's Content-Length reaches into the fourth
        damaged = data[:offsets[3] - 300] + data[offsets[3] - 100:]
    else:
        assert data[offsets[3]:offsets[3] + 8] == b"WARC/1.0"
        damaged = data[:offsets[3]] + b"WARX" + data[offsets[3] + 4:]
    path = tmp_path / "damaged.warc"
    path.write_bytes(damaged)
    whole, _ = read_all(path)
    assert len([i for i in whole if isinstance(i, Bad)]) == 1
    for cut in range(offsets[2] - 50, offsets[4], 97):  # split ends in and around the damage
        first = Split(str(path), "warc", len(damaged), 0, cut)
        second = Split(str(path), "warc", len(damaged), cut, None)
        items = []
        for split in (first, second):
            with open_split(split, {}) as f:
                items.extend(read_split(split, f, InputConfig(paths=[str(path)])))
        assert items == whole, f"split at {cut}"


def test_an_uncompressed_arc_is_read_whole_by_its_first_split(tmp_path):
    """An ARC header line is too plain to cut a file at: the first split reads it all."""
    from .chaos.test_warc_parser_equivalence import real_arc

    path = tmp_path / "crawl.arc"
    path.write_bytes(b"".join(real_arc(6)))
    whole, _ = read_all(path)
    assert [type(i) for i in whole] == [Skip] + [Record] * 6
    items, splits = read_all(path, split_bytes=2000)
    assert len(splits) > 2 and items == whole


def test_task_size_follows_the_input_when_split_bytes_is_null():
    """With split_bytes null a task reads the input's size / TASKS_WANTED bytes, between
    MIN_TASK_BYTES and MAX_TASK_BYTES: the number of tasks depends on the input alone (never on the
    machine), large inputs make TASKS_WANTED tasks or more, and a file is cut into an even number of
    equal pieces (two workers finish its last pieces together)."""
    mib = 1 << 20
    cfg = InputConfig(paths=["x"])
    assert cfg.split_bytes is None

    def ranges(size: int, name: str = "f.warc.gz") -> list[tuple[int, int | None]]:
        return [(s.start, s.end) for s in plan_splits([InputFile(name, size)], cfg, no_options)]

    for size in (300 * mib, 50 * mib, 4096 * mib, 5 * mib, 2 * MIN_TASK_BYTES + 1):
        target = min(MAX_TASK_BYTES, max(MIN_TASK_BYTES, -(-size // TASKS_WANTED)))
        n = -(-size // target)
        n += n % 2 if n > 1 else 0
        step = -(-size // n)
        assert ranges(size) == [(k * step, (k + 1) * step if k < n - 1 else None) for k in range(n)], size
        assert n >= min(TASKS_WANTED, size // MIN_TASK_BYTES) and -(-size // n) <= MAX_TASK_BYTES
    # a file under MIN_TASK_BYTES stays whole
    assert plan_splits([InputFile("small.warc.gz", MIN_TASK_BYTES - 1)], cfg, no_options) == [
        Split("small.warc.gz", "warc", MIN_TASK_BYTES - 1, 0, None)]
    # 400 files of 1 MiB: 400 MiB in all, tasks of 400/64 MiB: 6 whole files a task, in input order
    files = [InputFile(f"f{k:03d}.warc.gz", mib) for k in range(400)]
    tasks = group_splits(plan_splits(files, cfg, no_options), cfg.split_bytes)
    assert [len(t) for t in tasks] == [6] * 66 + [4]
    assert [s.url for t in tasks for s in t] == [f.url for f in files]
    # and a set split_bytes is taken as it is
    assert len(plan_splits([InputFile("big.warc.gz", 300 * mib)], InputConfig(paths=["x"], split_bytes=100 * mib),
                           no_options)) == 3


def test_parquet_row_groups_are_split(tmp_path):
    objs = [json.loads(line) for line in jsonl_lines()]
    path = tmp_path / "cc_en.parquet"
    pq.write_table(pa.Table.from_pylist(objs), path, row_group_size=2)
    groups = pq.ParquetFile(path).num_row_groups
    assert groups == 5
    whole, _ = read_all(path)
    size = path.stat().st_size
    items, splits = read_all(path, split_bytes=size // 3)
    assert len(splits) > 1
    assert [(s.start, s.end) for s in splits][0][0] == 0 and splits[-1].end == groups
    assert all(a.end == b.start for a, b in zip(splits, splits[1:]))
    assert [(i.offset, i.text) for i in items] == [(i.offset, i.text) for i in whole]
    assert [i.text for i in items] == [o["text"] for o in objs]


def test_group_splits_packs_small_files_and_keeps_ranges_apart(tmp_path, plain_jsonl):
    lines = jsonl_lines()
    small = []
    for n, line in enumerate(lines[:4]):
        p = tmp_path / f"small-{n}.jsonl"
        p.write_bytes(line)
        small.append(InputFile(str(p), len(line)))
    big = InputFile(str(plain_jsonl), plain_jsonl.stat().st_size)
    target = 16384
    assert sum(f.size for f in small) < target < big.size
    splits = plan_splits([*small[:2], big, *small[2:]], InputConfig(paths=["x"], split_bytes=target), no_options)
    ranges = [s for s in splits if s.url == big.url]
    assert len(ranges) == -(-big.size // target)
    tasks = group_splits(splits, target)
    assert [s for t in tasks for s in t] == splits  # each split once, order kept
    for r in ranges:
        assert [r] in tasks
    assert [[s.url for s in t] for t in tasks if t[0].url != big.url] == [[f.url for f in small[:2]],
                                                                          [f.url for f in small[2:]]]
    # a cap on files per task
    capped = group_splits([s for s in splits if s.url != big.url], target, max_files=3)
    assert [len(t) for t in capped] == [3, 1]
    # small files up to the byte target: whole files that do not fit start a new task
    sizes = [s.size for s in splits if s.url != big.url]
    by_bytes = group_splits([s for s in splits if s.url != big.url], sizes[0] + sizes[1])
    assert [[s.size for s in t] for t in by_bytes][0] == sizes[:2]


def test_group_splits_keeps_a_big_whole_file_alone():
    splits = [Split("a.jsonl.gz", "jsonl", 100, 0, None, "gzip"), Split("b.jsonl.gz", "jsonl", 5000, 0, None, "gzip"),
              Split("c.jsonl.gz", "jsonl", 100, 0, None, "gzip")]
    assert group_splits(splits, 1000) == [[splits[0]], [splits[1]], [splits[2]]]


# ----------------------------------------------------------------------------- charsets


def _cc2020_pages():
    return [(c or "", p) for _, t, _, c, p in warc_records(CC2020) if t == "response"]


def _declares_gb(content_type: str, payload: bytes) -> bool:
    pattern = r"""charset\s*=\s*["']?\s*(gb2312|gbk)"""
    return bool(re.search(pattern, content_type, re.I) or re.search(pattern.encode(), payload[:8192], re.I))


def _strict(payload: bytes, codec: str) -> bool:
    try:
        payload.decode(codec)
        return True
    except UnicodeDecodeError:
        return False


def _cjk_and_replacement_ratios(text: str) -> tuple[float, float]:
    """Among the characters outside ASCII: the share of CJK ideographs and punctuation, and of U+FFFD."""
    wide = [ch for ch in text if ord(ch) > 127]
    cjk = sum(1 for ch in wide if re.match(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]", ch))
    return cjk / len(wide), text.count("\ufffd") / len(wide)


def test_chinese_pages_decode_with_many_cjk_and_few_replacements():
    pages = [(c, p) for c, p in _cc2020_pages() if _declares_gb(c, p)]
    assert len(pages) >= 5
    misdeclared = [p for _, p in pages if not _strict(p, "gb2312")]
    assert misdeclared, "the sample has a page declaring gb2312 that uses GBK characters"
    texts = {r.text for r in records(read_all(CC2020)[0])}
    for content_type, payload in pages:
        text, encoding = decode_html(payload, content_type)
        assert text in texts, "the reader gives the same text as decode_html"
        assert len(CJK.findall(text)) >= 150
        cjk, replaced = _cjk_and_replacement_ratios(text)
        assert cjk > 0.95 and replaced < 0.005, (encoding, cjk, replaced)
        assert text.encode(encoding) == payload, "decoded losslessly"
        # the measure tells a wrong decoding apart
        wrong_cjk, wrong_replaced = _cjk_and_replacement_ratios(payload.decode("utf-8", "replace"))
        assert wrong_cjk < 0.1 and wrong_replaced > 0.5
    for payload in misdeclared:
        text, encoding = decode_html(payload, "text/html")
        assert encoding == "gb18030" and "\ufffd" not in text


def _sentences(pages) -> list[str]:
    found = set()
    for content_type, payload in pages:
        text = re.sub(r"<[^>]*>", "\n", decode_html(payload, content_type)[0])
        for piece in re.split(r"[^\u4e00-\u9fff]+", text):
            if len(piece) >= 8:
                found.add(piece)
    return sorted(found, key=lambda s: (-len(s), s))


def _encodable(s: str, *codecs_: str) -> bool:
    try:
        for c in codecs_:
            s.encode(c)
        return True
    except UnicodeEncodeError:
        return False


@pytest.fixture(scope="module")
def chinese_sentences() -> list[str]:
    return _sentences([(c, p) for c, p in _cc2020_pages() if _declares_gb(c, p)])


def _page(sentence: str, meta: str | None) -> str:
    head = f'<meta charset="{meta}">' if meta else ""
    return f"<html><head>{head}<title>t</title></head><body><p>{sentence}</p></body></html>"


@pytest.mark.parametrize("codec", ["gbk", "big5", "shift_jis"])
def test_real_sentence_reencoded_with_a_meta_tag_decodes_back(chinese_sentences, codec):
    common = [s for s in chinese_sentences if _encodable(s, "gbk", "big5", "shift_jis")]
    assert common
    sentence = common[0]
    html = _page(sentence, codec)
    text, _ = decode_html(html.encode(codec))
    assert text == html
    assert not _strict(html.encode(codec), "utf-8")


def test_every_gbk_sentence_with_a_meta_tag_decodes_exactly(chinese_sentences):
    gbk = [s for s in chinese_sentences if _encodable(s, "gbk")][:60]
    assert len(gbk) >= 20
    for sentence in gbk:
        html = _page(sentence, "gbk")
        assert decode_html(html.encode("gbk")) == (html, "gb18030")


def test_header_charset_wins_over_meta(chinese_sentences):
    sentence = next(s for s in chinese_sentences if _encodable(s, "big5"))
    html = _page(sentence, "gbk")
    body = html.encode("big5")
    # Both labels decode these bytes without error, so only the order decides.
    assert _strict(body, "gb18030") and body.decode("gb18030") != html
    assert decode_html(body, "text/html; charset=big5") == (html, "big5hkscs")
    assert decode_html(body, "text/html") == (body.decode("gb18030"), "gb18030")


def test_meta_charset_wins_over_detection(chinese_sentences):
    sentence = next(s for s in chinese_sentences if _encodable(s, "shift_jis"))
    body = _page(sentence, "gbk").encode("shift_jis")
    # Detection reads these bytes as Shift_JIS; the page says gbk, and gbk decodes them: the
    # declaration is honoured (as browsers do).
    assert _strict(body, "gb18030")
    assert decode_html(body) == (body.decode("gb18030"), "gb18030")
    assert decode_html(_page(sentence, None).encode("shift_jis"))[0] != body.decode("gb18030")


def test_a_declaration_that_does_not_decode_is_skipped(chinese_sentences):
    sentence = next(s for s in chinese_sentences if _encodable(s, "gbk"))
    html = _page(sentence, "gbk")
    body = html.encode("gbk")
    assert not _strict(body, "utf-8")
    assert decode_html(body, "text/html; charset=utf-8") == (html, "gb18030")


def test_undeclared_chinese_pages_are_detected():
    pages = [(c, p) for c, p in _cc2020_pages() if _declares_gb(c, p)]
    for _, payload in pages:
        undeclared = re.sub(rb"charset", b"chrset", payload, flags=re.I)
        text, encoding = decode_html(undeclared)
        assert text == undeclared.decode("gb18030"), encoding


# ----------------------------------------------------------------------------- http(s) and memory://


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_samples():
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(SAMPLES)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_warc_gz_over_http_equals_the_local_file(http_samples):
    url = f"{http_samples}/{CC2020.name}"
    local, local_splits = read_all(CC2020, split_bytes=20_000)
    remote, remote_splits = read_all(url, split_bytes=20_000)
    assert [(s.start, s.end, s.size) for s in remote_splits] == [(s.start, s.end, s.size) for s in local_splits]
    assert len(remote_splits) > 1
    assert remote == local and len(records(remote)) == 16


def test_missing_http_url_is_an_input_error(http_samples):
    url = f"{http_samples}/no-such-file.warc.gz"
    with pytest.raises(InputError, match=re.escape(url)):
        expand_paths([url], no_options)


def test_memory_filesystem(plain_jsonl):
    fs = fsspec.filesystem("memory")
    path = "/ylink-test-readers/cc_en.jsonl"
    fs.pipe(path, plain_jsonl.read_bytes())
    try:
        url = "memory://ylink-test-readers/cc_en.jsonl"
        files = expand_paths(["memory://ylink-test-readers/*.jsonl"], no_options)
        assert [f.size for f in files] == [plain_jsonl.stat().st_size]
        assert files[0].url.startswith("memory://") and files[0].url.endswith("cc_en.jsonl")
        items, _ = read_all(url, split_bytes=5000)
        assert items == read_all(plain_jsonl)[0] == expected_jsonl_records(jsonl_lines())
    finally:
        fs.rm("/ylink-test-readers", recursive=True)


def test_bad_items_carry_offsets_not_exceptions(tmp_path):
    """A sanity check of the item types: a reader never raises for a record's content."""
    path = tmp_path / "mixed.jsonl"
    lines = jsonl_lines()[:2]
    path.write_bytes(lines[0] + b"{not json}\n" + lines[1])
    items, _ = read_all(path)
    assert [type(i) for i in items] == [Record, Bad, Record]
    assert items[1].offset == len(lines[0])


@pytest.mark.parametrize("name", ["CC-MAIN-2020-34-excerpt.warc.gz", "dolma-wget-sample-0000.warc.gz",
                                  "trafilatura-eval-pages.warc.gz", "CC-MAIN-2024-22-whirlwind.warc.gz"])
def test_fast_path_reads_the_bulk_and_warcio_agrees(name, monkeypatch):
    """The fast path vouches for every gzip member of the samples but the responses whose payload is
    chunked (wget keeps the transfer encoding; warcio undoes it), and the result equals what warcio
    alone produces (tests/chaos/test_warc_parser_equivalence.py checks every WARC for that)."""
    from ylink_data.io.readers import warc

    path = SAMPLES / name
    split = Split(str(path), "warc", path.stat().st_size)
    cfg = InputConfig(paths=[str(path)])
    vouched = []
    fast_item = warc._fast_item

    def counting(offset, data, max_record_bytes):
        item = fast_item(offset, data, max_record_bytes)
        vouched.append(item is not None or b"\r\nTransfer-Encoding: chunked\r\n" in data)
        return item

    monkeypatch.setattr(warc, "_fast_item", counting)
    with open(path, "rb") as f:
        hybrid = list(read_split(split, f, cfg))
    monkeypatch.setattr(warc, "FAST_PATH", False)
    with open(path, "rb") as f:
        warcio_only = list(read_split(split, f, cfg))
    assert hybrid == warcio_only
    assert len(vouched) == len(hybrid) and all(vouched)


@pytest.mark.parametrize("binary_type", [pa.binary(), pa.large_binary(), pa.binary_view()], ids=str)
@pytest.mark.parametrize("bad_rows", [(), (1,), (0, 2, 3)], ids=lambda r: f"not-utf8-{len(r)}")
def test_parquet_text_stored_as_bytes_is_read_as_utf8_and_only_other_bytes_quarantined(tmp_path, binary_type, bad_rows):
    """Issue 33: older Spark and Hive write strings as BINARY without a UTF-8 annotation; every row
    was quarantined ("is bytes, not a string"). Generated over Arrow's byte types and over which rows
    hold bytes that are not UTF-8 (Latin-1 text): only those are quarantined, the rest are read."""
    objs = [json.loads(line) for line in jsonl_lines()][:6]
    texts = [o["text"].encode("utf-8") for o in objs]
    for i in bad_rows:
        texts[i] = "Café crème, naïve façade".encode("latin-1")
    urls = [o["metadata"]["url"].encode() for o in objs]
    path = tmp_path / "spark.parquet"
    pq.write_table(pa.table({"text": pa.array(texts, binary_type), "url": pa.array(urls, binary_type)}), path)
    items, _ = read_all(path)
    assert len(items) == len(objs)
    for i, (item, obj) in enumerate(zip(items, objs)):
        if i in bad_rows:
            assert isinstance(item, Bad) and "not UTF-8" in item.error and item.offset == i, item
        else:
            assert isinstance(item, Record) and (item.text, item.url) == (obj["text"], obj["metadata"]["url"])
