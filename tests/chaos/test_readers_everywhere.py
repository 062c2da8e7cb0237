"""Issue 13, point 16: every reader on every filesystem the README names, plain and compressed.

A plain .jsonl read over http:// gave no document and one quarantine entry ("compressed stream is
truncated or corrupt after byte 0: TypeError: AbstractBufferedFile.readline() takes 1 positional
argument but 2 were given") and the run exited 0. Here each format is read from a local folder, a
real HTTP server, a real S3 server (SeaweedFS) and memory://, all on 127.0.0.1, through
plan_splits / open_split / read_split (what a run's tasks do), with small splits so that byte
ranges are read too; every filesystem must give exactly the local file's items.
"""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import uuid

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
import zstandard
from warcio.archiveiterator import ArchiveIterator

from ylink_data.io.input_config import InputConfig
from ylink_data.io.listing import expand_paths
from ylink_data.io.readers import Bad, Record, open_split, plan_splits, read_split

from ..conftest import REPO, SAMPLES, TEST_DATA
from ..httpserver import FileServer
from ..s3server import s3_server

SPLIT_BYTES = 20_000  # several byte-range splits for the larger WARC and JSONL files


def _jsonl_lines() -> list[bytes]:
    return gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines(keepends=True)


def first_html_page() -> bytes:
    with open(SAMPLES / "trafilatura-eval-pages.warc.gz", "rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type == "response":
                return record.content_stream().read()
    raise AssertionError("no page in the sample")


def _parquet(lines: list[bytes]) -> bytes:
    rows = [json.loads(line) for line in lines]
    table = pa.table({"text": [r["text"] for r in rows], "url": [r["metadata"]["url"] for r in rows]})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=4)
    return out.getvalue()


def sample_files() -> dict[str, bytes]:
    """One real file per format, named by its extension."""
    lines = _jsonl_lines()
    jsonl = b"".join(lines)
    text = json.loads(lines[0])["text"].encode()
    return {
        "crawl.warc.gz": (SAMPLES / "CC-MAIN-2020-34-excerpt.warc.gz").read_bytes(),
        "crawl.warc": (SAMPLES / "CC-MAIN-2014-35-excerpt.warc").read_bytes(),
        "crawl.warc.wet": (SAMPLES / "CC-MAIN-2014-35-excerpt.warc.wet").read_bytes(),
        "crawl.warc.wet.gz": (SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.wet.gz").read_bytes(),
        "docs.jsonl": jsonl,
        "docs.jsonl.gz": gzip.compress(jsonl),
        "docs.jsonl.zst": zstandard.compress(jsonl),
        "docs.parquet": _parquet(lines),
        "doc.txt": text,
        "doc.txt.gz": gzip.compress(text),
        "page.html": first_html_page(),
    }


FILES = sample_files()


@pytest.fixture(scope="module")
def local_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("everywhere")
    for name, data in FILES.items():
        (root / name).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def http_root(local_root):
    with FileServer(local_root) as server:
        yield server.url("").rstrip("/"), {}


@pytest.fixture(scope="module")
def s3_root(tmp_path_factory, local_root):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        fs = server.filesystem()
        fs.mkdir("everywhere")
        for name in FILES:
            fs.put_file(str(local_root / name), f"everywhere/in/{name}")
        yield "s3://everywhere/in", server.storage_options()


@pytest.fixture(scope="module")
def memory_root():
    folder = f"/everywhere-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    for name, data in FILES.items():
        fs.pipe(f"{folder}/{name}", data)
    yield f"memory://{folder}", {}
    fs.rm(folder, recursive=True)


def read_everything(url: str, options: dict) -> list:
    """Every item of one file, split by split, as a run's tasks read it."""
    cfg = InputConfig(paths=[url], split_bytes=SPLIT_BYTES)
    files = expand_paths([url], lambda _: options)
    items = []
    for split in plan_splits(files, cfg, lambda _: options):
        with open_split(split, options) as f:
            items.extend(read_split(split, f, cfg))
    return items


@pytest.fixture(scope="module")
def local_items(local_root) -> dict[str, list]:
    items = {name: read_everything(str(local_root / name), {}) for name in FILES}
    for name, got in items.items():  # the reference itself: documents, nothing unreadable
        assert any(isinstance(i, Record) for i in got) and not any(isinstance(i, Bad) for i in got), name
    return items


@pytest.mark.parametrize("where", ["http", "s3", "memory"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_every_format_reads_the_same_from_every_filesystem(request, local_items, where, name):
    root, options = request.getfixturevalue(f"{where}_root")
    assert read_everything(f"{root}/{name}", options) == local_items[name]


def test_a_run_over_http_keeps_every_line_of_a_plain_jsonl(tmp_path, http_root, local_items):
    """The whole command, as the issue ran it: `ylink run` on a plain .jsonl served over http://."""
    root, _ = http_root
    pipeline = tmp_path / "pipeline.yaml"
    out = tmp_path / "out"
    pipeline.write_text(yaml.safe_dump({"name": "http-jsonl", "input": {"paths": [f"{root}/docs.jsonl"]},
                                        "output": {"path": str(out)}, "stages": []}))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(pipeline)], capture_output=True,
                          text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((out / "stats.json").read_text())
    lines = len(_jsonl_lines())
    assert stats["input_records"] == stats["output_records"] == lines == len(local_items["docs.jsonl"])
    assert stats["quarantined"] == 0
    kept = pq.read_table(out / "data").column("text").to_pylist()
    assert sorted(kept) == sorted(i.text for i in local_items["docs.jsonl"])


def test_a_reader_bug_is_not_quarantined_as_a_corrupt_stream(http_root):
    """A reader's own error (here: readline(limit) on fsspec's raw HTTP file, which does not take a
    limit) must fail loudly, not pass for a corrupt compressed stream that is quarantined."""
    root, _ = http_root
    url = f"{root}/docs.jsonl"
    cfg = InputConfig(paths=[url])
    split = plan_splits(expand_paths([url], lambda _: {}), cfg, lambda _: {})[0]
    fs, path = fsspec.core.url_to_fs(url)
    with fs.open(path, "rb") as raw, pytest.raises(TypeError):
        list(read_split(split, raw, cfg))
