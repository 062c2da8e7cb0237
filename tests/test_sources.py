"""Pipelines over every kind of location fsspec gives us: memory:// (shipped to Ray workers by the
driver, since that filesystem lives in one process) and http:// from a real server on loopback."""
from __future__ import annotations

import functools
import gzip
import http.server
import json
import threading

import fsspec
import pytest

import ylink_data

from .conftest import SAMPLES, TEST_DATA


@pytest.fixture
def http_root():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SAMPLES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_memory_input_runs_on_ray_workers(ray_session, tmp_path):
    lines = gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines()
    mem = fsspec.filesystem("memory")
    mem.pipe_file("/ylink-test/docs.jsonl", b"\n".join(lines) + b"\n")
    _, stats = ylink_data.run({"input": {"paths": ["memory://ylink-test/*.jsonl"]},
                               "output": {"path": str(tmp_path / "out")}, "stages": []})
    table = ylink_data.open_run(str(tmp_path / "out")).to_arrow()
    expected = [json.loads(line)["text"] for line in lines]
    assert stats["input_records"] == len(lines) and table.column("text").to_pylist() == expected
    # dolma keeps the url at metadata.url: found without configuration.
    assert table.column("url").to_pylist() == [json.loads(line)["metadata"]["url"] for line in lines]
    metadata = json.loads(table.column("metadata")[0].as_py())
    assert metadata["metadata"]["perplexity"] > 0 and "text" not in metadata


def test_http_input_equals_local_input(ray_session, http_root, tmp_path):
    name = "CC-MAIN-2020-34-excerpt.warc.gz"
    _, local = ylink_data.run({"input": {"paths": [str(SAMPLES / name)]},
                               "output": {"path": str(tmp_path / "local")}, "stages": []})
    _, remote = ylink_data.run({"input": {"paths": [f"{http_root}/{name}"], "split_bytes": 40_000},
                                "output": {"path": str(tmp_path / "http")}, "stages": []})
    assert remote["input_records"] == local["input_records"] > 40
    a = ylink_data.open_run(str(tmp_path / "local")).to_arrow()
    b = ylink_data.open_run(str(tmp_path / "http")).to_arrow()
    assert b.column("text").to_pylist() == a.column("text").to_pylist()
    assert set(b.column("source").to_pylist()) == {f"{http_root}/{name}"}
