"""Issue 39 point 2: input files are known by their content, not by their URL, size and mtime.

Both input files edited during a killed run (same size, mtime put back) made the resume publish 147
old and 60 new documents of one file, and `sed -i` on a finished run's input made the rerun say
"already complete". Now each task records what it read of each file (io/input_versions.py), a
resume or rerun checks the files against it, and run.json's fingerprint holds each file's content.

The sweep is generated: every way an input can change (a byte changed with the size and times put
back, a line appended, a line cut off, the file replaced by another, and, as the control, replaced
by a copy of itself) x when (during a killed run, after a finished run). A changed file is refused
in one line with nothing published, and --fresh then equals a clean run of the new files; the copy
changes nothing. A file written between the plan and its reading stops the run the same way.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.core.errors import InputError, RunStateError
from ylink_data.engine.config import load_config
from ylink_data.engine.runner import INPUT_CONTENT, Runner
from ylink_data.io.input_versions import BLOCK, SplitRead, block_count, content_id, file_contents, hash_blocks
from ylink_data.io.listing import expand_paths
from ylink_data.io.readers import plan_splits

from ..conftest import TEST_DATA
from .processes import ylink

JSONL = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # real Common Crawl documents (see tests/data/SOURCE.md)
PIECES = 3  # splits per input file: A's are phase 0's first tasks


def _put_back_times(path: Path, st: os.stat_result) -> None:
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _same_size(path: Path) -> None:
    """One letter in the middle of a document changed, the size and times put back (`sed -i` keeps the size)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(b'"text"', len(data) // 2) + 12
    data[at] = ord("Q") if data[at] != ord("Q") else ord("R")
    path.write_bytes(bytes(data))
    _put_back_times(path, st)


def _appended(path: Path) -> None:
    with open(path, "ab") as f:
        f.write(json.dumps({"text": "a document appended after the run read the file"}).encode() + b"\n")


def _truncated(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))


def _replaced(path: Path) -> None:
    """Another file of the same size renamed over it, its times those of the old one."""
    st = path.stat()
    data = path.read_bytes()
    other = path.with_suffix(".new")
    other.write_bytes(data[: len(data) // 3] + data[len(data) // 3:].replace(b"the ", b"The ", 5))
    os.replace(other, path)
    _put_back_times(path, st)


def _copied_back(path: Path) -> None:
    """The same bytes under a new inode, with new times: nothing to refuse."""
    other = path.with_suffix(".copy")
    shutil.copyfile(path, other)
    os.replace(other, path)


CHANGES: dict[str, tuple[Callable[[Path], None], bool]] = {  # name -> (change, whether the content changes)
    "same size, times put back": (_same_size, True),
    "appended": (_appended, True),
    "truncated": (_truncated, True),
    "replaced by another file": (_replaced, True),
    "copied back unchanged": (_copied_back, False),
}


def _inputs(root: Path) -> tuple[list[Path], int]:
    """Two JSONL files of real documents, A cut into PIECES splits, B smaller than one of them; and
    input.split_bytes. Tasks are handed out longest first (engine/submit.py), so A's splits are read
    before B's, whatever the order of equal ones."""
    root.mkdir(parents=True)
    text = gzip.decompress(JSONL.read_bytes())
    files = [root / "A.jsonl", root / "B.jsonl"]
    for f, copies in zip(files, (PIECES + 1, 1)):
        f.write_bytes(text * copies)
    return files, -(-files[0].stat().st_size // PIECES)


def _config(files: list[Path], out: Path, split_bytes: int) -> dict:
    return {"name": "content", "input": {"paths": [str(f) for f in files], "split_bytes": split_bytes},
            "output": {"path": str(out)}, "stages": [{"gopher_quality": {}}], "ray": {"execution": "local"}}


def _documents(out: Path) -> list[tuple[str, str]]:
    return sorted((r["id"], r["text"]) for f in sorted((out / "data").glob("*.parquet"))
                  for r in pq.read_table(f, columns=["id", "text"]).to_pylist())


def _assert_equals_a_clean_run(out: Path, files: list[Path], split_bytes: int) -> None:
    """The run in `out` published what an uninterrupted run of the files as they are now does."""
    clean = out.parent / "clean"
    ylink_data.run(_config(files, clean, split_bytes), progress=False)
    assert _documents(out) == _documents(clean)


def _published(out: Path) -> dict[str, bytes]:
    """Every file a reader of the run sees: the manifest, the shards."""
    return {p.name: p.read_bytes() for p in [out / "manifest.json", *sorted((out / "data").glob("*"))] if p.exists()}


@pytest.mark.parametrize("when", ["killed run", "finished run"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_every_change_of_an_input_is_caught(tmp_path, change, when):
    files, split_bytes = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    config = _config(files, out, split_bytes)
    (tmp_path / "p.yaml").write_text(json.dumps(config))
    if when == "killed run":  # killed once A's splits are read, B's not yet (_inputs)
        killed = ylink("run", tmp_path / "p.yaml", env={"YLINK_FAIL_AFTER_TASKS": str(PIECES)})
        assert killed.returncode == 75, killed.stderr
        assert len(list((out / "_work" / "phase0" / "done").glob("task-*.json"))) == PIECES
    else:
        ylink_data.run(config, progress=False)
    before = _published(out)
    time.sleep(0.05)  # past the clock tick of the files' last write: a change moves their ctime
    make_change, content_changes = CHANGES[change]
    for f in files:
        make_change(f)

    rerun = ylink("run", tmp_path / "p.yaml")
    if not content_changes:
        assert rerun.returncode == 0, rerun.stderr
        assert ("already complete" in rerun.stderr) == (when == "finished run")
        _assert_equals_a_clean_run(out, files, split_bytes)
        return
    assert rerun.returncode == 2, rerun.stderr
    errors = [line for line in rerun.stderr.splitlines() if line.startswith("ylink: error:")]
    line = errors[-1] if errors else rerun.stderr
    assert len(errors) == 1 and line.startswith("ylink: error: output.path") and "Traceback" not in rerun.stderr, line
    assert "A.jsonl" in line or "changed: input files" in line, line
    assert "--fresh" in line
    assert _published(out) == before  # nothing published, nothing withdrawn

    ylink_data.run(config, fresh=True, progress=False)
    _assert_equals_a_clean_run(out, files, split_bytes)


def test_a_file_written_between_the_plan_and_its_reading_stops_the_run(tmp_path):
    files, split_bytes = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    cfg = load_config(_config(files, out, split_bytes))

    class WrittenAfterThePlan(Runner):
        def plan(self):
            plan = super().plan()
            time.sleep(0.05)
            _same_size(files[1])
            return plan

    with pytest.raises(InputError) as err:
        WrittenAfterThePlan(cfg, progress=False).run()
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{files[1]} changed while the run was reading it"), line
    assert not (out / "manifest.json").exists() and not list(out.glob("data/*"))
    # A's splits were read before B's: the rerun sees B changed after nothing of it was read, and finishes.
    ylink_data.run(_config(files, out, split_bytes), progress=False)
    _assert_equals_a_clean_run(out, files, split_bytes)


def test_run_json_holds_each_file_content_in_its_fingerprint(tmp_path):
    files, split_bytes = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    ylink_data.run(_config(files, out, split_bytes), progress=False)
    info = json.loads((out / "run.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert [url for url, _ in info["fingerprinted"][INPUT_CONTENT]] == [str(f) for f in files]
    for (url, content), f in zip(info["fingerprinted"][INPUT_CONTENT], files):
        size = f.stat().st_size
        with open(f, "rb") as opened:
            assert content == content_id(hash_blocks(opened, range(block_count(size)), size))
    assert manifest["fingerprint"] == info["fingerprint"] != info["plan_fingerprint"]


POSITIONS = {"first byte": lambda size: 0, "last byte of a block": lambda size: BLOCK - 1,
             "first byte of a block": lambda size: BLOCK, "middle": lambda size: size // 2,
             "last byte": lambda size: size - 1}


def test_a_files_content_id_does_not_depend_on_how_it_was_cut(tmp_path):
    """Each split hashes its share of the file's blocks: whatever the cut (input.split_bytes, the
    planner's pieces), the shares make the whole file's id, and a byte changed anywhere changes it."""
    path = tmp_path / "big.jsonl"
    text = gzip.decompress(JSONL.read_bytes())
    path.write_bytes(text * (int(2.6 * BLOCK) // len(text)))
    size = path.stat().st_size
    with open(path, "rb") as f:
        whole = content_id(hash_blocks(f, range(block_count(size)), size))

    def by_splits(split_bytes: int | None) -> tuple[str, int]:
        cfg = load_config(_config([path], tmp_path / "out", split_bytes or 1)).input
        cfg = cfg.model_copy(update={"split_bytes": split_bytes})
        files = expand_paths([str(path)], lambda url: {})
        splits = plan_splits(files, cfg, lambda url: {})
        records = []
        for split in splits:
            read = SplitRead(split, *_local(split), None)
            read.before()
            read.after()
            records.append(read.record())
        return file_contents(files, records)[0][0][1], len(splits)

    cuts = {by_splits(b) for b in (None, 1 << 20, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK, 64 << 20)}
    assert {content for content, _ in cuts} == {whole}
    assert len({n for _, n in cuts}) >= 4  # the cuts differ
    for name, at in POSITIONS.items():
        data = bytearray(path.read_bytes())
        data[at(size)] ^= 1
        changed = tmp_path / f"changed-{name.replace(' ', '-')}.jsonl"
        changed.write_bytes(bytes(data))
        with open(changed, "rb") as f:
            assert content_id(hash_blocks(f, range(block_count(size)), size)) != whole, name


def _local(split):
    import fsspec

    return fsspec.filesystem("file"), split.url


def test_a_killed_runs_file_touched_while_part_of_it_is_unread_is_refused(tmp_path):
    """Only part of a file's blocks on record and its stamp moved (touched, copied back): nothing can
    tell the unread part is the same, so the resume refuses rather than risk a mix (documented)."""
    files, split_bytes = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    (tmp_path / "p.yaml").write_text(json.dumps(_config(files, out, split_bytes)))
    killed = ylink("run", tmp_path / "p.yaml", env={"YLINK_FAIL_AFTER_TASKS": "1"})
    assert killed.returncode == 75, killed.stderr
    time.sleep(0.05)
    _copied_back(files[0])
    with pytest.raises(RunStateError, match="whose input files changed since it read them .*: .*A.jsonl"):
        ylink_data.run(_config(files, out, split_bytes), progress=False)


def test_inputs_on_s3_are_known_by_their_etag(tmp_path):
    from ..s3server import s3_server

    files, split_bytes = _inputs(tmp_path / "in")
    with s3_server(tmp_path / "s3") as server:
        server.upload_folder(tmp_path / "in", "bucket/in")
        fs = server.filesystem()
        config = {**_config([Path("x")], tmp_path / "out", split_bytes),
                  "input": {"paths": ["s3://bucket/in/*.jsonl"], "split_bytes": split_bytes},
                  "storage": {"s3": server.storage_options()}}
        ylink_data.run(config, progress=False)
        info = json.loads((tmp_path / "out" / "run.json").read_text())
        assert all(content.startswith(("etag:", "md5:")) for _, content in info["fingerprinted"][INPUT_CONTENT])
        markers_gone = not (tmp_path / "out" / "_work").exists()
        assert markers_gone
        data = bytearray(fs.cat_file("bucket/in/A.jsonl"))
        data[len(data) // 2] ^= 1  # the same size: only the store's hash tells
        fs.pipe_file("bucket/in/A.jsonl", bytes(data))
        with pytest.raises(RunStateError, match="input files changed since it read them .*: s3://bucket/in/A.jsonl"):
            ylink_data.run(config, progress=False)


@pytest.mark.parametrize("when", ["killed run", "finished run"])
def test_a_run_from_before_inputs_were_recorded_is_refused_clearly(tmp_path, when):
    """A run folder written by a ylink that recorded no content of its inputs (run.json without
    "input content", markers without "inputs"): nothing can tell whether they changed, so a rerun is
    refused in one line that names --fresh, and --fresh works."""
    files, split_bytes = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    config = _config(files, out, split_bytes)
    (tmp_path / "p.yaml").write_text(json.dumps(config))
    if when == "killed run":
        assert ylink("run", tmp_path / "p.yaml", env={"YLINK_FAIL_AFTER_TASKS": "2"}).returncode == 75
        for marker in (out / "_work" / "phase0" / "done").glob("task-*.json"):
            marker.write_text(json.dumps({k: v for k, v in json.loads(marker.read_text()).items() if k != "inputs"}))
    else:
        ylink_data.run(config, progress=False)
        info = json.loads((out / "run.json").read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        info["fingerprint"] = manifest["fingerprint"] = info.pop("plan_fingerprint")  # as then: one fingerprint
        del info["fingerprinted"][INPUT_CONTENT], info["input stamps"]
        (out / "run.json").write_text(json.dumps(info))
        (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunStateError, match="from before ylink recorded what its input files hold .*--fresh"):
        ylink_data.run(config, progress=False)
    ylink_data.run(config, fresh=True, progress=False)
    _assert_equals_a_clean_run(out, files, split_bytes)
