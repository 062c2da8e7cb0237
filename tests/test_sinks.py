"""Sinks and the manifest model (issue 34 point 2): an output format is one registered `Sink`, and
manifest.json is one typed model that reads back what earlier ylinks wrote, byte for byte.

- A toy sink registered here (a TSV of each shard's ids and text lengths) runs in a real pipeline on
  the bundled crawl's WET files: the runner and publish find it through the registry alone, its files
  are written and listed in its own manifest section, the checked reader serves them, its folder is
  the run's own, and the check for missing files (resume, "already complete") covers them.
- manifest.json files written by the code before the sinks (tests/data/manifests_v1: real runs of
  the quickstart, of output.megatron with tiers and of sft_format + prompts_format with tiers) read
  into the model and write back to the same bytes, and the checked reader lists their files.
- For every registered sink, a section naming a file outside the run is refused with one line.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

import ylink_data
from ylink_data.core.storage import atomic_write, join
from ylink_data.io.layout import RunLayout
from ylink_data.io.manifest import Manifest, ManifestError, check_manifest, read_manifest, write_manifest
from ylink_data.io.run_files import check_file, check_listed_once, listed_entries
from ylink_data.io.sinks import SINKS, ShardOutput, Sink
from ylink_data.io.sinks.base import Listed, relative_to

from .conftest import REPO

OLD_MANIFESTS = Path(__file__).parent / "data" / "manifests_v1"
WET = [str(REPO / "samples" / "crawl" / "CC-MAIN-2014-35-excerpt.warc.wet"),
       str(REPO / "samples" / "crawl" / "CC-MAIN-2024-22-whirlwind.warc.wet.gz")]


@dataclass(frozen=True)
class LengthsSink(Sink):
    """lengths/part-NNNNN.tsv: "id<TAB>characters of text" per row of the shard."""

    name = "lengths"
    label = "text lengths"

    @classmethod
    def plan(cls, cfg: Any) -> "LengthsSink":
        return cls()

    def columns(self, schema) -> list[str]:
        return [c for c in ("id", "text") if c in schema.names]

    def write(self, shard: ShardOutput) -> dict[str, Any]:
        path = shard.path(self.name, ".tsv")
        lines = [f"{i}\t{len(t)}\n" for table in shard.tables
                 for i, t in zip(table.column("id").to_pylist(), table.column("text").to_pylist())]
        data = "".join(lines).encode()
        with atomic_write(shard.fs, join(shard.root, path)) as f:
            f.write(data)
        return {"path": path, "rows": len(lines), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def section(self, entries: list[dict[str, Any]], folder: str = "") -> dict[str, Any]:
        kept = [{**e, "path": relative_to(e["path"], folder)} for e in entries if relative_to(e["path"], folder)]
        return {"rows": sum(e["rows"] for e in kept), "files": kept}

    @classmethod
    def check(cls, fs, root, what, section, seen) -> Listed:
        return Listed([check_listed_once(check_file(fs, root, f"{what} file {i}", e), f"{what} file {i}", seen)
                       for i, e in enumerate(listed_entries(section, what))])

    @classmethod
    def listed(cls, section: Any, what: str) -> list[dict[str, Any]]:
        return listed_entries(section, what)


@pytest.fixture
def lengths_sink():
    SINKS[LengthsSink.name] = LengthsSink
    yield LengthsSink
    del SINKS[LengthsSink.name]


def test_a_registered_sink_writes_its_files_and_its_manifest_section(lengths_sink, tmp_path):
    out = tmp_path / "run"
    # Small splits and shards: several publish tasks (worker processes), each shard its own file.
    cfg = {"name": "lengths", "input": {"paths": WET, "split_bytes": 2000}, "output": {"path": str(out), "shard_bytes": 1},
           "stages": [{"normalize": {}}]}
    result = ylink_data.run(cfg, progress=False)

    manifest = json.loads((out / "manifest.json").read_text())
    section = manifest["lengths"]
    assert list(manifest)[-1] == "lengths"  # after the run's own keys, as every sink's section
    rows = [row for shard in manifest["shards"] for row in pq.read_table(out / shard["path"]).to_pylist()]
    assert result.stats["output_records"] == len(rows) == section["rows"] >= 4
    assert len(section["files"]) == len(manifest["shards"]) >= 2
    got = []
    for entry in section["files"]:
        data = (out / entry["path"]).read_bytes()
        assert entry["path"].startswith("lengths/part-") and entry["bytes"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        got += data.decode().splitlines()
    assert got == [f"{r['id']}\t{len(r['text'])}" for r in rows]  # every kept row, in shard order

    checked = read_manifest(str(out))  # the checked reader serves the section through the model
    assert [f.path for f in checked.section_files("lengths")] == [e["path"] for e in section["files"]]
    assert [f.path for f in checked.files()] == [s["path"] for s in manifest["shards"]] + \
        [e["path"] for e in section["files"]]
    assert checked.model.sections["lengths"] == section
    assert checked.model.to_dict() == manifest

    # Its folder is the run's own (not a foreign entry that would refuse the rerun), and the rerun of
    # a complete run checks its files too: one gone, the run is no longer complete and is made again.
    layout = RunLayout.for_url(str(out), {})
    assert layout.foreign_entries() == [] and layout.missing_shards(manifest) == []
    assert ylink_data.run(cfg, progress=False).stats == result.stats  # already complete
    first = out / section["files"][0]["path"]
    written = first.read_bytes()
    first.unlink()
    assert layout.missing_shards(manifest) == [section["files"][0]["path"]]
    ylink_data.run(cfg, progress=False)
    assert first.read_bytes() == written


@pytest.mark.parametrize("name", sorted(p.name for p in OLD_MANIFESTS.glob("*.json")))
def test_manifests_of_the_code_before_read_back_unchanged(tmp_path, name):
    raw = (OLD_MANIFESTS / name).read_bytes()
    data = json.loads(raw)
    model = Manifest.from_dict(data, name)
    write_manifest(LocalFileSystem(), str(tmp_path / "manifest.json"), model)
    assert (tmp_path / "manifest.json").read_bytes() == raw

    checked = check_manifest(LocalFileSystem(), str(tmp_path), name, data)
    assert [(s.path, s.rows, s.ref.size, s.ref.sha256) for s in checked.shards] == \
        [(s["path"], s["rows"], s["bytes"], s["sha256"]) for s in data["shards"]]
    expected = [s["path"] for s in data["shards"]]
    expected += [p[kind]["path"] for p in data.get("megatron", {}).get("files", []) for kind in ("bin", "idx")]
    expected += [f["path"] for kind in ("sft", "preference", "prompts") for f in data.get(kind, {}).get("files", [])]
    assert [f.path for f in checked.files()] == expected
    assert [p.prefix for p in checked.megatron] == [p["prefix"] for p in data.get("megatron", {}).get("files", [])]


def test_the_fixtures_cover_every_section_they_claim():
    """The fixtures hold a plain run, Megatron pairs, sft and prompts JSONL and tier manifests."""
    keys = set().union(*(json.loads(p.read_text()) for p in OLD_MANIFESTS.glob("*.json")))
    assert {"megatron", "sft", "prompts", "tier", "tiers"} <= keys


def _section_outside_the_run(name: str) -> Any:
    """A section of sink `name` as its own writer shapes it, with one file path leaving the run."""
    entry = {"path": "../other-run/x", "rows": 1, "bytes": 10, "sha256": "0" * 64}
    if name == "shards":
        return [entry]
    if name == "megatron":
        pair = {"prefix": "../other-run/x", "documents": 1, "tokens": 2,
                "bin": {**entry, "path": "../other-run/x.bin"}, "idx": {**entry, "path": "../other-run/x.idx"}}
        return {"dtype": "uint16", "tokenizer": None, "tokens": 2, "documents": 1, "files": [pair]}
    return {"format": "x", "rows": 1, "files": [entry]}


@pytest.mark.parametrize("name", list(SINKS))
def test_every_sink_refuses_a_file_outside_the_run(tmp_path, name):
    data = {"version": 1, "shards": []} | {name: _section_outside_the_run(name)}
    with pytest.raises(ManifestError, match=r"path '\.\./other-run/x[^']*' leaves the run folder; refusing it"):
        check_manifest(LocalFileSystem(), str(tmp_path), "m.json", data)
