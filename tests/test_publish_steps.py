"""Issue 39, point 1: a run stopped at any step of writing its folder, then resumed, publishes exactly
what an uninterrupted run does, and its folder holds exactly the files its manifest lists.

Before, publishing hard-linked a part to `data/part-NNNNN.parquet.tmp-HEX` and renamed it: a kill
between the two left a whole copy of the shard in data/, which pandas and pyarrow then read as the
run's (and rejected/ got a truncated one, which pandas failed on), and a rerun said "already
complete". Now every file takes shape in _work/staging/, the driver sweeps what killed writers left
when it resumes and before it publishes, and the end of every run checks the folder against its
manifest.

The sweep is generated: an uninterrupted run counts its steps (YLINK_TEST_STOP_AT=0:FILE, core/
storage.py: a temporary file created, written whole, renamed or linked into place, a file removed),
then for every step k a run is stopped at k (the process dies there, as kill -9 would) and resumed.
The pipeline has all a run folder holds: several shards, rejected/ files of two stages (of different
columns: exact_dedup's drops carry fineweb_quality's measures, gopher_quality's do not, so these are
rewritten with them at publish), a quarantine, and a global phase."""
from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import shutil
from pathlib import Path

import pandas
import pyarrow.dataset
import pytest

import ylink_data
from ylink_data.core.errors import RunStateError
from ylink_data.core.storage import STOP_AT_ENV, STOP_EXIT_CODE
from ylink_data.io.layout import RunLayout
from ylink_data.io.manifest import Manifest

from .conftest import TEST_DATA

CC_HEAD = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # 10 real Common Crawl pages (tests/data/SOURCE.md)


def _inputs(folder: Path) -> int:
    """Two files of five real pages each, with each page's first line alone (too short for
    gopher_quality), a copy of one page (exact_dedup drops one of the two) and a line that is no JSON
    (quarantined); returns the size of the larger, so that each file is a task of its own."""
    pages = [json.loads(line) for line in gzip.open(CC_HEAD, "rt")]
    folder.mkdir()
    for k in range(2):
        rows = []
        for page in pages[5 * k:5 * k + 5]:
            rows += [{"text": page["text"], "url": page["id"]},
                     {"text": page["text"].split("\n", 1)[0], "url": page["id"] + "#first-line"}]
        rows.append({"text": pages[5 * k]["text"], "url": pages[5 * k]["id"] + "?copy"})
        (folder / f"part{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    return max(p.stat().st_size for p in folder.iterdir())


def _config(inputs: Path, largest: int, out: Path, execution: str) -> dict:
    return {"name": "steps", "input": {"paths": [str(inputs)], "split_bytes": largest + 1},
            "output": {"path": str(out), "keep_rejected": True, "shard_bytes": 6000},
            "ray": {"execution": execution, "num_cpus": 2},
            "stages": [{"gopher_quality": {}}, {"fineweb_quality": {"annotate": True}}, {"exact_dedup": {}}]}


def _run_stopped_at(cfg: dict, spec: str, fresh: bool = False) -> None:
    """In a process of its own (forked from a clean server, see _run): the run, stopped at a step."""
    os.environ[STOP_AT_ENV] = spec
    ylink_data.run(cfg, progress=False, fresh=fresh)


def _run(cfg: dict, spec: str, fresh: bool = False) -> int:
    """The run in a new process (forked from a server that has loaded ylink and this module, so each
    costs only the run), with YLINK_TEST_STOP_AT=`spec`; its exit code."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, "ylink_data.engine.runner", "ylink_data.ops.gopher",
                                    "ylink_data.ops.fineweb", "ylink_data.ops.exact_dedup"])
    process = context.Process(target=_run_stopped_at, args=(cfg, spec, fresh))
    process.start()
    process.join()
    return process.exitcode


def _expected_files(out: Path) -> set[str]:
    """What a finished run folder must hold, from its manifest alone: the run's own files, the shards
    and the rejected/ and quarantine/ files it lists."""
    manifest = json.loads((out / "manifest.json").read_text())
    listed = [s["path"] for s in manifest["shards"]]
    listed += [f["path"] for kind in ("rejected", "quarantine") for f in manifest[kind]["files"]]
    return {"manifest.json", "stats.json", "README.md", "run.json", *listed}


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _without_times(out: Path) -> tuple:
    manifest = {k: v for k, v in json.loads((out / "manifest.json").read_text()).items() if k != "created"}
    timed = lambda key: key == "timing" or "seconds" in key  # noqa: E731 -- clock readings, not results
    stats = {k: v for k, v in json.loads((out / "stats.json").read_text()).items() if not timed(k)}
    stats["stages"] = [{k: v for k, v in s.items() if not timed(k)} for s in stats["stages"]]
    return manifest, stats


def _assert_published(out: Path, reference: Path) -> None:
    """The folder is its manifest's, nothing else; what readers of it get is what the manifest says;
    and every file but the run's own bookkeeping is byte for byte the uninterrupted run's."""
    # _work/ holds only the reuse files a finished run keeps (engine/reuse.py), never read as the run's
    files = {name: data for name, data in _files(out).items() if not name.startswith("_work/")}
    assert set(files) == _expected_files(out), "the folder holds what its manifest does not list"
    manifest = json.loads((out / "manifest.json").read_text())
    assert RunLayout.for_url(str(out), {}).listing_problems(Manifest.from_dict(manifest)) == []
    assert len(pandas.read_parquet(out / "data")) == manifest["rows"]  # the card's own snippets
    assert pyarrow.dataset.dataset(out / "rejected").count_rows() == manifest["rejected"]["rows"] > 0
    expected = {name: data for name, data in _files(reference).items() if not name.startswith("_work/")}
    changed = [n for n in expected if n not in ("manifest.json", "stats.json", "run.json") and files.get(n) != expected[n]]
    assert changed == []
    assert _without_times(out) == _without_times(reference)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The inputs, an uninterrupted run, and how many steps it takes."""
    tmp = tmp_path_factory.mktemp("steps")
    largest = _inputs(tmp / "in")
    reference = tmp / "reference"
    counter = tmp / "steps"
    assert _run(_config(tmp / "in", largest, reference, "local"), f"0:{counter}") == 0
    manifest = json.loads((reference / "manifest.json").read_text())
    assert len(manifest["shards"]) >= 2 and manifest["quarantine"]["rows"] == 2
    assert {f["path"].rsplit("stage", 1)[1] for f in manifest["rejected"]["files"]} == {"01.parquet", "03.parquet"}
    return tmp, largest, reference, counter.stat().st_size


def test_a_run_stopped_at_any_step_and_resumed_is_the_uninterrupted_run(setup):
    tmp, largest, reference, steps = setup
    assert steps > 50  # every file of the run: parts, markers, rejected/, quarantine/, shards, card, manifest
    for k in range(1, steps + 1):
        out = tmp / f"stopped-{k}"
        cfg = _config(tmp / "in", largest, out, "local")
        assert _run(cfg, f"{k}:{tmp / f'count-{k}'}") == STOP_EXIT_CODE, f"step {k} of {steps}"
        ylink_data.run(cfg, progress=False)  # resumed (or, stopped past the manifest, found complete)
        _assert_published(out, reference)
        shutil.rmtree(out)


def test_worker_processes_stopped_at_publish_steps_leave_nothing_stray(setup):
    """The same with worker processes (the issue's setting): a worker dies at a step of a publish
    job; whether the run then fails or retries the job, once it is resumed its folder is its manifest's."""
    tmp, largest, reference, steps = setup
    for k in range(steps // 2, steps + 1, 7):  # steps past the middle: the global phase and publish
        out = tmp / f"workers-{k}"
        cfg = _config(tmp / "in", largest, out, "processes")
        _run(cfg, f"{k}:{tmp / f'workers-count-{k}'}")
        ylink_data.run(cfg, progress=False)
        _assert_published(out, reference)
        shutil.rmtree(out)


# Files a finished run's folders may come to hold that its manifest does not list, made from one of its
# files: what an older ylink's killed publish left (a whole copy at a temporary name, the issue's
# `data/part-00001.parquet.tmp-HEX`), a file of the run's own naming that no manifest lists (an
# attempt's leftover), and a file that is not the run's. The first two are removed, the last refused.
STRAYS = {
    "older temporary copy": (lambda name: f"{name}.tmp-0123456789ab", "removed"),
    "this ylink's temporary copy": (lambda name: f".{name}.tmp-0123456789ab", "removed"),
    "unlisted file of the run's naming": (lambda name: "part-00099.parquet" if name.startswith("part-") else
                                          f"phase9-task-00099{name[name.index('-task-') + 11:]}", "removed"),
    "file that is not the run's": (lambda name: f"notes-{name}", "refused"),
}


@pytest.mark.parametrize("stray", list(STRAYS))
def test_a_finished_run_with_files_its_manifest_does_not_list_is_never_complete_with_them(setup, tmp_path, stray):
    """Every folder of a finished run (data/, rejected/, quarantine/), each kind of stray file: the
    rerun removes the run's own leftovers and says complete, or refuses what is not the run's in one
    line naming it; readers never see a row the manifest does not list."""
    _, _, reference, _ = setup
    name_of, fate = STRAYS[stray]
    manifest = json.loads((reference / "manifest.json").read_text())
    files = [manifest["shards"][0]["path"], manifest["rejected"]["files"][0]["path"],
             manifest["quarantine"]["files"][0]["path"]]
    for rel in files:
        out = tmp_path / "run"
        shutil.copytree(reference, out)
        folder, name = rel.rsplit("/", 1)
        stray_path = out / folder / name_of(name)
        shutil.copyfile(out / rel, stray_path)
        cfg = json.loads((out / "run.json").read_text())["config"]
        cfg["output"]["path"] = str(out)
        if fate == "removed":
            ylink_data.run(cfg, progress=False)
            assert not stray_path.exists()
            _assert_published(out, reference)
        else:
            with pytest.raises(RunStateError) as err:
                ylink_data.run(cfg, progress=False)
            assert f"{folder}/{stray_path.name}" in str(err.value) and "\n" not in str(err.value)
        shutil.rmtree(out)
