"""Malformed input: each kind of broken record is quarantined as exactly one `Bad`, counted, and does
not stop the run or take its good neighbours with it.

Broken files are made from the real samples in tmp_path; what the readers must still yield is derived
from the unbroken file, never typed in.
"""
from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest
import zstandard

import ylink_data
from ylink_data.io.readers import Bad, Record
from ylink_data.engine.stats import check_invariant
from ylink_data.core.schema import document_id

from .conftest import REPO, SAMPLES
from .test_readers import (CC2020, JSONL_GZ, expected_jsonl_records, jsonl_lines, read_all, records,
                           warc_records)

CC2014 = SAMPLES / "CC-MAIN-2014-35-excerpt.warc"


# ----------------------------------------------------------------------------- helpers


def gzip_members(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(offset, compressed member, decompressed member) for each gzip member of a file."""
    out, pos = [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        raw = d.decompress(data[pos:]) + d.flush()
        end = len(data) - len(d.unused_data)
        out.append((pos, data[pos:end], raw))
        pos = end
    return out


def gzip_member(raw: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(raw) + c.flush()


def warc_type(raw: bytes) -> str:
    return re.search(rb"WARC-Type: (\w+)", raw).group(1).decode()


def shifted(items, after: int, delta: int):
    """The items with offsets past `after` moved by `delta` (a member that changed size)."""
    out = []
    for item in items:
        copy = type(item)(**{k: getattr(item, k) for k in item.__slots__})
        if copy.offset > after:
            copy.offset += delta
        out.append(copy)
    return out


def split_bads(items):
    return [i for i in items if isinstance(i, Bad)], [i for i in items if not isinstance(i, Bad)]


def break_header(raw: bytes, how: str) -> bytes:
    if how == "version":
        assert raw.startswith(b"WARC/1.0\r\n")
        return b"WARX/1.0" + raw[8:]
    if how == "content_length":
        # same size, not a number
        return re.sub(rb"Content-Length: (\d+)", lambda m: b"Content-Length: x" + m.group(1)[1:], raw, count=1)
    raise ValueError(how)


# ----------------------------------------------------------------------------- broken files


def make_broken_header_warc_gz(dst: Path, how: str = "version") -> tuple[int, int]:
    """(a) the middle response member of the sample with a broken WARC header; returns (offset of
    that member, change in its compressed size)."""
    data = CC2020.read_bytes()
    members = gzip_members(data)
    responses = [m for m in members if warc_type(m[2]) == "response"]
    pos, comp, raw = responses[len(responses) // 2]
    new = gzip_member(break_header(raw, how))
    dst.write_bytes(data[:pos] + new + data[pos + len(comp):])
    return pos, len(new) - len(comp)


def make_truncated_warc_gz(dst: Path) -> int:
    """(b) the sample cut half-way through its last member; returns that member's offset."""
    data = CC2020.read_bytes()
    pos, comp, _ = gzip_members(data)[-1]
    dst.write_bytes(data[:pos + len(comp) // 2])
    return pos


def make_corrupt_deflate_warc_gz(dst: Path, which: int) -> int:
    """(c) 64 bytes of garbage over the middle of one member's deflate data; returns its offset."""
    data = CC2020.read_bytes()
    pos, comp, _ = gzip_members(data)[which]
    mid = pos + len(comp) // 2
    garbage = bytes(random.Random(which).randrange(256) for _ in range(64))
    dst.write_bytes(data[:mid] + garbage + data[mid + 64:])
    return pos


def make_broken_jsonl(dst: Path) -> tuple[list[bytes], list[int]]:
    """(e) real lines with one of invalid UTF-8, one of invalid JSON, one that is a JSON list;
    returns the file's lines and the indexes of the broken ones."""
    lines = list(jsonl_lines())
    text_at = lines[1].index(b'"text":"') + 20
    lines[1] = lines[1][:text_at] + b"\xff\xfe" + lines[1][text_at + 2:]
    lines[4] = lines[4][:len(lines[4]) // 2] + b"\n"
    lines[7] = b"[" + lines[7].rstrip(b"\n") + b"]\n"
    dst.write_bytes(b"".join(lines))
    return lines, [1, 4, 7]


def make_truncated_jsonl_gz(dst: Path, fraction: float = 0.5) -> list[bytes]:
    """(f) the real .jsonl.gz cut at `fraction` of its bytes; returns the complete lines in it."""
    data = JSONL_GZ.read_bytes()
    cut = data[:int(len(data) * fraction)]
    dst.write_bytes(cut)
    partial = zlib.decompressobj(31).decompress(cut)
    return partial.splitlines(keepends=True)[:partial.count(b"\n")]


# ----------------------------------------------------------------------------- reader level: WARC


@pytest.mark.parametrize("how", ["version", "content_length"])
def test_a_broken_warc_header_in_a_gzip_member(tmp_path, how):
    path = tmp_path / "broken-header.warc.gz"
    pos, delta = make_broken_header_warc_gz(path, how)
    good, _ = read_all(CC2020)
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [pos]
    assert rest == shifted([i for i in good if i.offset != pos], pos, delta)
    assert len(items) == len(good)


def test_a_broken_member_inside_a_byte_range_split(tmp_path):
    path = tmp_path / "broken-header.warc.gz"
    pos, delta = make_broken_header_warc_gz(path, "content_length")
    good, _ = read_all(CC2020)
    items, splits = read_all(path, split_bytes=20_000)
    assert len(splits) > 1
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [pos]
    assert rest == shifted([i for i in good if i.offset != pos], pos, delta)


def test_b_truncated_last_member(tmp_path):
    path = tmp_path / "truncated.warc.gz"
    pos = make_truncated_warc_gz(path)
    good, _ = read_all(CC2020)
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [pos]
    assert rest == [i for i in good if i.offset < pos]
    assert items[-1] is bads[0]


def test_b_truncated_response_says_how_much_is_missing(tmp_path):
    data = CC2020.read_bytes()
    members = gzip_members(data)
    k = max(i for i, m in enumerate(members) if warc_type(m[2]) == "response")
    pos, comp, raw = members[k]
    path = tmp_path / "truncated-response.warc.gz"
    # the member is complete gzip, but its WARC record stops 1000 bytes short of its Content-Length
    new = gzip_member(raw[:-1004])  # the record and the 4 bytes (CRLF CRLF) that end it
    path.write_bytes(data[:pos] + new + data[pos + len(comp):])
    good, _ = read_all(CC2020)
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [pos]
    assert bads[0].error == "truncated record: 1000 bytes of its Content-Length are missing"
    assert rest == shifted([i for i in good if i.offset != pos], pos, len(new) - len(comp))


@pytest.mark.parametrize("kind", ["response", "request"])
def test_c_garbage_over_deflate_data(tmp_path, kind):
    members = gzip_members(CC2020.read_bytes())
    which = [i for i, m in enumerate(members) if warc_type(m[2]) == kind][len(members) // 6]
    path = tmp_path / f"corrupt-{kind}.warc.gz"
    pos = make_corrupt_deflate_warc_gz(path, which)
    good, _ = read_all(CC2020)
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [pos]
    assert rest == [i for i in good if i.offset != pos], "later records are still read"
    assert any(i.offset > pos for i in rest)


@pytest.mark.parametrize("how", ["version", "content_length"])
def test_d_uncompressed_warc_with_a_broken_header(tmp_path, how):
    data = CC2014.read_bytes()
    good, _ = read_all(CC2014)
    offsets = [i.offset for i in good]
    target = offsets[len(offsets) // 2]
    end = next(o for o in offsets if o > target)
    broken = break_header(data[target:end], how)
    assert len(broken) == end - target
    path = tmp_path / "broken.warc"
    path.write_bytes(data[:target] + broken + data[end:])
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [target]
    assert rest == [i for i in good if i.offset != target]
    assert any(i.offset > target for i in rest), "records after the broken one are read"


@pytest.mark.parametrize("name", ["trafilatura-eval-pages.warc.gz", "CC-MAIN-2014-35-excerpt.warc"])
def test_warc_record_larger_than_max_record_bytes(name):
    source = warc_records(SAMPLES / name)
    sizes = sorted(len(p) for _, t, _, c, p in source if t == "response" and (c or "").startswith("text/html"))
    limit = sizes[-2] - 1  # the two largest pages are over it
    good, _ = read_all(SAMPLES / name)
    items, _ = read_all(SAMPLES / name, max_record_bytes=limit)
    too_large = {o for o, t, _, c, p in source if t == "response" and (c or "").startswith("text/html")
                 and len(p) > limit}
    assert len(too_large) == 2
    bads, rest = split_bads(items)
    assert {b.offset for b in bads} == too_large
    assert all("max_record_bytes" in b.error and b.reason == "too_large" for b in bads)
    assert rest == [i for i in good if i.offset not in too_large]


# ----------------------------------------------------------------------------- reader level: JSONL


@pytest.mark.parametrize("split_bytes", [None, 3000])
def test_e_bad_jsonl_lines(tmp_path, split_bytes):
    path = tmp_path / "broken.jsonl"
    lines, broken = make_broken_jsonl(path)
    items, _ = read_all(path, **({"split_bytes": split_bytes} if split_bytes else {}))
    offsets = [sum(len(x) for x in lines[:n]) for n in range(len(lines))]
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [offsets[n] for n in broken]
    assert "invalid UTF-8" in bads[0].error
    assert "invalid JSON" in bads[1].error
    assert "JSON object" in bads[2].error and "list" in bads[2].error
    expected = expected_jsonl_records(lines[:1])
    for n, line in enumerate(lines):
        if n and n not in broken:
            rec = expected_jsonl_records([line])[0]
            rec.offset = offsets[n]
            expected.append(rec)
    assert rest == expected


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.9])
def test_f_truncated_jsonl_gz(tmp_path, fraction):
    path = tmp_path / "truncated.jsonl.gz"
    complete = make_truncated_jsonl_gz(path, fraction)
    assert 0 < len(complete) < len(jsonl_lines())
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert rest == expected_jsonl_records(complete)
    assert [b.offset for b in bads] == [sum(len(x) for x in complete)]
    assert "truncated or corrupt" in bads[0].error


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.95])
def test_f_truncated_jsonl_zst(tmp_path, fraction):
    lines = jsonl_lines()
    c = zstandard.ZstdCompressor().compressobj()
    # one zstd block per line, as a streaming writer that flushes often makes
    data = b"".join(c.compress(line) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for line in lines) + c.flush()
    cut = data[:int(len(data) * fraction)]
    partial = zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    complete = partial.splitlines(keepends=True)[:partial.count(b"\n")]
    assert 0 < len(complete) < len(lines)
    path = tmp_path / "truncated.jsonl.zst"
    path.write_bytes(cut)
    items, _ = read_all(path)
    bads, rest = split_bads(items)
    assert rest == expected_jsonl_records(complete)
    assert [b.offset for b in bads] == [sum(len(x) for x in complete)]
    assert "truncated" in bads[0].error


def _long_text(min_bytes: int) -> str:
    texts = [json.loads(line)["text"] for line in jsonl_lines()]
    out, n = [], 0
    while n < min_bytes:
        for t in texts:
            out.append(t)
            n += len(t.encode())
    return "\n\n".join(out)


def test_g_line_longer_than_max_record_bytes(tmp_path):
    lines = list(jsonl_lines())
    long_line = json.dumps({"text": _long_text(200_000), "url": "https://example.org/long"}).encode() + b"\n"
    assert 190_000 < len(long_line) < 400_000
    lines.insert(3, long_line)
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(lines))
    items, _ = read_all(path, max_record_bytes=64 * 1024)
    offsets = [sum(len(x) for x in lines[:n]) for n in range(len(lines))]
    bads, rest = split_bads(items)
    assert [b.offset for b in bads] == [offsets[3]]
    assert "max_record_bytes" in bads[0].error and bads[0].reason == "too_large"
    assert [(r.offset, r.text) for r in rest] == [
        (offsets[n], json.loads(line)["text"]) for n, line in enumerate(lines) if n != 3]
    # with the default limit the same line is a document
    assert sum(isinstance(i, Record) for i in read_all(path)[0]) == len(lines)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_g_a_huge_line_is_skipped_without_holding_it_in_memory(tmp_path, suffix):
    line = json.dumps({"text": _long_text(16 * 1024 * 1024)}).encode() + b"\n"
    after = jsonl_lines()[0]
    data = line + after
    path = tmp_path / f"huge{suffix}"
    path.write_bytes(gzip.compress(data, 1) if suffix.endswith(".gz") else data)
    del data
    tracemalloc.start()
    try:
        items, _ = read_all(path, max_record_bytes=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [type(i) for i in items] == [Bad, Record]
    assert items[1].offset == len(line) and items[1].text == json.loads(after)["text"]
    assert peak < len(line) / 4, f"peak {peak} bytes while skipping a {len(line)}-byte line"


@pytest.mark.parametrize("name", ["empty.warc.gz", "empty.warc", "empty.jsonl", "empty.jsonl.gz", "empty.jsonl.zst"])
def test_h_empty_files_have_no_records(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    items, splits = read_all(path)
    assert items == [] and len(splits) == 1


def test_h_empty_compressed_streams_have_no_records(tmp_path):
    (tmp_path / "e.jsonl.gz").write_bytes(gzip.compress(b""))
    (tmp_path / "e.jsonl.zst").write_bytes(zstandard.compress(b""))
    assert read_all(tmp_path / "e.jsonl.gz")[0] == []
    assert read_all(tmp_path / "e.jsonl.zst")[0] == []


def test_i_text_file_with_invalid_utf8(tmp_path):
    prose = next(t for t in (json.loads(x)["text"] for x in jsonl_lines()) if "\u2019" in t and "\u201c" in t)
    data = prose.encode("cp1252")  # a real text saved in Windows-1252: not UTF-8
    with pytest.raises(UnicodeDecodeError) as exc:
        data.decode("utf-8")
    path = tmp_path / "cp1252.txt"
    path.write_bytes(data)
    items, _ = read_all(path)
    assert len(items) == 1 and isinstance(items[0], Bad)
    assert items[0].offset == exc.value.start
    assert "invalid UTF-8" in items[0].error
    # the same text in UTF-8 is one document
    path.write_bytes(prose.encode())
    assert [i.text for i in read_all(path)[0]] == [prose]


# ----------------------------------------------------------------------------- pipeline level


@pytest.fixture
def broken_crawl(crawl_copy) -> tuple[Path, dict[str, tuple[int, int]]]:
    """The sample crawl plus broken files (a), (b), (e), (f); for each broken file, how many records
    it holds and how many of them are broken, both derived from how it was made."""
    make_broken_header_warc_gz(crawl_copy / "broken-header.warc.gz")
    make_truncated_warc_gz(crawl_copy / "truncated.warc.gz")
    lines, broken = make_broken_jsonl(crawl_copy / "broken.jsonl")
    complete = make_truncated_jsonl_gz(crawl_copy / "truncated.jsonl.gz")
    warc_count = len(gzip_members(CC2020.read_bytes()))
    return crawl_copy, {"broken-header.warc.gz": (warc_count, 1), "truncated.warc.gz": (warc_count, 1),
                        "broken.jsonl": (len(lines), len(broken)), "truncated.jsonl.gz": (len(complete) + 1, 1)}


def test_pipeline_quarantines_and_completes(ray_session, broken_crawl, tmp_path):
    crawl, expected = broken_crawl
    out = tmp_path / "run"
    config = {"name": "malformed", "input": {"paths": [str(crawl)]},
              "output": {"path": str(out), "keep_rejected": True}, "stages": [{"exact_dedup": {}}]}

    # what the readers say about each file, on their own
    bads, recs, total = set(), set(), 0
    for path in sorted(crawl.iterdir()):
        items, _ = read_all(path)
        file_bads = {(str(path), b.offset, b.error) for b in items if isinstance(b, Bad)}
        if path.name in expected:
            assert (len(items), len(file_bads)) == expected[path.name], path.name
        else:
            assert not file_bads, path.name
        total += len(items)
        bads |= file_bads
        recs |= {document_id(str(path), r.offset) for r in records(items)}
    assert len(bads) == sum(n for _, n in expected.values())

    result_path, stats = ylink_data.run(config)
    assert result_path == str(out) and (out / "manifest.json").exists()
    on_disk = json.loads((out / "stats.json").read_text())
    assert on_disk == stats
    assert stats["quarantined"] == len(bads)
    assert stats["input_records"] == total
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    assert stats["input_records"] == stats["output_records"] + dropped + stats["quarantined"]
    assert check_invariant(stats) is None

    # the quarantine names the file, offset and error of each bad record
    entries = []
    for qfile in sorted((out / "quarantine").glob("*.jsonl")):
        entries += [json.loads(line) for line in qfile.read_text().splitlines() if line.strip()]
    assert {(e["file"], e["offset"], e["error"]) for e in entries} == bads
    assert len(entries) == len(bads)
    assert all(e["stage"] == "read" for e in entries)

    run = ylink_data.open_run(str(out))
    assert sorted(run.quarantine(), key=json.dumps) == sorted(entries, key=json.dumps)

    # every good record of the broken files went on: kept, or dropped by exact_dedup as a duplicate
    kept = set(run.to_arrow(columns=["id"]).column("id").to_pylist())
    rejected = run.rejected()
    assert rejected.num_rows > 0 and all(r.startswith("exact_dedup") for r in rejected.column("reason").to_pylist())
    assert kept | set(rejected.column("id").to_pylist()) == recs
    assert len(kept) == stats["output_records"]
    sources = set(run.to_arrow(columns=["source"]).column("source").to_pylist())
    assert {str(crawl / "broken.jsonl"), str(crawl / "truncated.jsonl.gz")} <= sources


# ----------------------------------------------------------------------------- command line


def _write_pipeline(tmp_path: Path, input_path: str) -> Path:
    import yaml

    cfg = {"name": "missing", "input": {"paths": [input_path]}, "output": {"path": str(tmp_path / "out")},
           "stages": [{"exact_dedup": {}}]}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("command", [[sys.executable, "-m", "ylink_data.cli"], [sys.executable, "-m", "ylink_data"]])
@pytest.mark.parametrize("what", ["missing", "glob"])
def test_cli_run_with_unreadable_input_is_one_line(tmp_path, command, what):
    input_path = str(tmp_path / "no-such-file.warc.gz") if what == "missing" else str(tmp_path / "nothing-*.warc.gz")
    pipeline = _write_pipeline(tmp_path, input_path)
    proc = subprocess.run([*command, "run", str(pipeline)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert input_path in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_ylink_console_script(tmp_path):
    script = Path(sys.executable).with_name("ylink")
    if not script.exists():
        pytest.skip("the ylink console script is not installed next to this interpreter")
    input_path = str(tmp_path / "absent" / "x.jsonl")
    proc = subprocess.run([str(script), "run", str(_write_pipeline(tmp_path, input_path))],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and input_path in proc.stderr
