"""Finished runs as input (issue 33, point 2): a shard whose bytes changed after its manifest was
written fails the run in one line naming it, and a folder that holds runs, or a wildcard over them,
reads each run's shards only (never its rejected/ rows, quarantine, caches or JSON files), also a run
copied without its run.json (issue 39, point 6)."""
from __future__ import annotations

import gzip
import json

import pytest

import ylink_data
from ylink_data.core.errors import InputError
from ylink_data.io.llm.cache import CachedAnswer, ResponseCache, request_key


def _first_run(out, shared_data, start: int, n: int = 300):
    with gzip.open(shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        lines = f.readlines()[start:start + n]
    docs = out.parent.parent / f"{out.name}.jsonl"  # beside the folder of runs, not in it
    docs.write_text("".join(lines))
    ylink_data.run({"name": out.name, "input": {"paths": [str(docs)]},
                    "output": {"path": str(out), "keep_rejected": True, "shard_bytes": 100_000},
                    "stages": [{"gopher_quality": {}}]}, progress=False)
    return ylink_data.open_run(str(out))


def _run(out, paths):
    return ylink_data.run({"name": "second", "input": {"paths": paths}, "output": {"path": str(out)},
                           "stages": []}, progress=False)


@pytest.fixture
def runs(tmp_path, shared_data):
    folder = tmp_path / "runs"
    folder.mkdir()
    return [_first_run(folder / "a", shared_data, 0), _first_run(folder / "b", shared_data, 300)]


def test_a_shard_damaged_in_place_fails_the_run_naming_it(runs, tmp_path):
    first = runs[0]
    assert (tmp_path / "runs" / "a" / "rejected").is_dir()
    shard = tmp_path / "runs" / "a" / first.manifest["shards"][0]["path"]
    data = bytearray(shard.read_bytes())
    for at in range(len(data) // 2, len(data) // 2 + 8):  # bytes flipped, the size kept
        data[at] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        _run(tmp_path / "out", [str(tmp_path / "runs" / "a")])
    assert str(shard) in str(err.value) and "sha256" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize("named", ["folder", "wildcard"])
def test_a_folder_of_runs_reads_each_runs_shards_only(runs, tmp_path, named):
    path = str(tmp_path / "runs") + ("/*" if named == "wildcard" else "")
    # What a run of an LLM op keeps beside its shards: its answers in llm-cache/ (never documents).
    cache = ResponseCache(str(tmp_path / "runs" / "a" / "llm-cache"))
    cache.put(request_key("m", [{"role": "user", "content": "Rate this."}], {}), CachedAnswer("Score: 3", "stop", 5, 2))
    # A plain file beside the runs is input as any file is (one document).
    (tmp_path / "runs" / "notes.jsonl").write_text((tmp_path / "a.jsonl").read_text().splitlines()[0] + "\n")
    result = _run(tmp_path / "out", [path])
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    read = [f[0] for f in info["fingerprinted"]["input files"]]
    shards = sorted(str(tmp_path / "runs" / r.manifest["name"] / s["path"]) for r in runs for s in r.manifest["shards"])
    assert [f for f in read if f.endswith(".parquet")] == shards
    kept = sum(r.stats["output_records"] for r in runs)
    assert read == sorted([*shards, str(tmp_path / "runs" / "notes.jsonl")])
    assert result.stats["input_records"] == result.stats["output_records"] == kept + 1
    assert result.stats["quarantined"] == 0


# What a run folder holds besides what its manifest lists (and besides data/): each left out of a copy
# in turn, and all at once. The manifest and data/ say "a run" (issue 39, point 6).
BESIDE_THE_SHARDS = ("run.json", "stats.json", "README.md")


@pytest.mark.parametrize("left_out", [pytest.param(names, id="+".join(names)) for names in
                                      [*((n,) for n in BESIDE_THE_SHARDS), BESIDE_THE_SHARDS]])
def test_a_run_copied_without_its_bookkeeping_is_read_as_a_run(runs, tmp_path, left_out):
    """A run folder copied without run.json (or its card, or its stats) inside a folder of inputs: its
    shards only, never its rejected/ rows as kept, its card as a document or its JSON as bad records."""
    import shutil

    top = {p.name for p in (tmp_path / "runs" / "a").iterdir() if p.is_file()}
    assert top - {"manifest.json"} == set(BESIDE_THE_SHARDS)  # every file of a run beside its manifest
    copies = tmp_path / "copies"
    copies.mkdir()
    for run in runs:
        shutil.copytree(tmp_path / "runs" / run.manifest["name"], copies / run.manifest["name"])
        for name in left_out:
            (copies / run.manifest["name"] / name).unlink()
    result = _run(tmp_path / "out", [str(copies)])
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    read = [f[0] for f in info["fingerprinted"]["input files"]]
    assert read == sorted(str(copies / r.manifest["name"] / s["path"]) for r in runs for s in r.manifest["shards"])
    assert result.stats["input_records"] == result.stats["output_records"] == sum(r.stats["output_records"] for r in runs)
    assert result.stats["quarantined"] == 0
