"""Issue 41 part 1: a rerun into the same output.path after a config change reuses every phase whose
inputs and ops are unchanged and recomputes from the first changed op on (engine/reuse.py), says so
in one line, and publishes byte for byte what a --fresh run of the new config publishes; the old run
stays published until the new one is complete (engine/swap.py).

Generated: every kind of change (`CHANGES`: a global op's threshold, a parameter of a per-document op
in phase 0, a later op added, a later op removed, a file read by an op rewritten) is run on a finished
run, checked against the line it prints and a --fresh run of the new config; and a reuse rerun is
stopped at every step it takes (YLINK_TEST_STOP_AT, as tests/test_publish_steps.py does), its folder
checked to be the old run, the new run, or a folder readers refuse, and the rerun after it the new run.
Before reuse every change was refused ("holds a run of a different configuration")."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

import ylink_data
from ylink_data.core.errors import RunStateError
from ylink_data.core.storage import STOP_EXIT_CODE
from ylink_data.engine.reuse import KEY_FILE, clean

from .test_publish_steps import _files, _inputs, _run, _without_times

PHASE0 = "read → gopher_quality → fineweb_quality → minhash_dedup keys"


def _config(tmp: Path, largest: int, out: Path) -> dict:
    """Phase 0 (read → gopher_quality → fineweb_quality → minhash_dedup's keys), minhash_dedup's
    global phase, phase 1 (its decisions applied → badwords with a word list file)."""
    return {"name": "reuse", "input": {"paths": [str(tmp / "in")], "split_bytes": largest + 1},
            "output": {"path": str(out), "keep_rejected": True, "shard_bytes": 6000},
            "ray": {"execution": "local", "num_cpus": 2},
            "stages": [{"gopher_quality": {}}, {"fineweb_quality": {"annotate": True}},
                       {"minhash_dedup": {"threshold": 0.8}},
                       {"badwords": {"lists": [str(tmp / "words.txt")]}}]}


def _threshold(cfg: dict, tmp: Path) -> None:
    cfg["stages"][2]["minhash_dedup"]["threshold"] = 0.5


def _phase0_param(cfg: dict, tmp: Path) -> None:
    cfg["stages"][1]["fineweb_quality"]["annotate"] = False


def _added(cfg: dict, tmp: Path) -> None:
    cfg["stages"].append({"c4_quality": {}})


def _removed(cfg: dict, tmp: Path) -> None:
    del cfg["stages"][3]


def _file_rewritten(cfg: dict, tmp: Path) -> None:
    (tmp / "words.txt").write_text("the\n")  # a word of most pages: badwords now drops them


# change: (how the config or a file changes, the line the rerun prints)
CHANGES: dict[str, tuple[Callable[[dict, Path], None], str]] = {
    "threshold of a global op": (
        _threshold, f"reusing phase 0 ({PHASE0} made again); recomputing from stages[2] minhash_dedup (threshold 0.8 → 0.5)"),
    "parameter of a per-document op in phase 0": (
        _phase0_param, "recomputing from stages[1] fineweb_quality (annotate true → false)"),
    "later op added": (_added, f"reusing phase 0 ({PHASE0}); recomputing from stages[4] c4_quality (added)"),
    "later op removed": (_removed, f"reusing phase 0 ({PHASE0}); recomputing from stages[3] (badwords removed)"),
    "file read by an op rewritten": (
        _file_rewritten, f"reusing phase 0 ({PHASE0}); recomputing from stages[3] badwords (lists[0] {{words}} changed)"),
}


def _published(out: Path) -> dict[str, bytes]:
    """The run's files for readers (not _work/, nor the lock file a killed run leaves)."""
    return {name: data for name, data in _files(out).items() if not name.startswith("_work/") and name != "run.lock"}


def _assert_same_output(out: Path, reference: Path) -> None:
    """Every published file byte for byte the reference's, but for clock readings (stats.json's
    timings, the manifest's `created`) and run.json's start time and output.path."""
    files, expected = _published(out), _published(reference)
    assert set(files) == set(expected)
    assert [n for n in expected if n not in ("manifest.json", "stats.json", "run.json") and files[n] != expected[n]] == []
    assert _without_times(out) == _without_times(reference)
    run, ref = (json.loads((p / "run.json").read_text()) for p in (out, reference))
    assert (run["fingerprint"], run["fingerprinted"]) == (ref["fingerprint"], ref["fingerprinted"])


def _assert_reuse_files_bounded(out: Path) -> None:
    """Only the phase that ends in the global op stays in _work/, every file of it hashed in reuse.json."""
    work = out / "_work"
    assert sorted(p.name for p in work.iterdir()) == ["phase0"]
    kept = json.loads((work / "phase0" / KEY_FILE).read_text())["files"]
    assert sorted(kept) == sorted(str(p.relative_to(work / "phase0")) for p in (work / "phase0").rglob("*")
                                  if p.is_file() and p.name != KEY_FILE)


@pytest.fixture()
def inputs(tmp_path):
    largest = _inputs(tmp_path / "in")
    (tmp_path / "words.txt").write_text("zzzz-no-page-has-it\n")
    return tmp_path, largest


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_rerun_after_a_change_reuses_the_unchanged_phases_and_publishes_what_fresh_does(inputs, capfd, change):
    tmp, largest = inputs
    out = tmp / "out"
    cfg = _config(tmp, largest, out)
    ylink_data.run(cfg, progress=False)
    _assert_reuse_files_bounded(out)
    before = _published(out)
    how, line = CHANGES[change]
    new = copy.deepcopy(cfg)
    how(new, tmp)
    capfd.readouterr()
    ylink_data.run(new, progress=False)
    printed = [entry for entry in capfd.readouterr().err.splitlines() if "recomputing from" in entry]
    assert printed == [line.format(words=tmp / "words.txt")]
    fresh = tmp / "fresh"
    ylink_data.run({**new, "output": {**new["output"], "path": str(fresh)}}, progress=False, fresh=True)
    _assert_same_output(out, fresh)
    assert _published(out) != before  # the change changed the output: what is compared is the new run
    _assert_reuse_files_bounded(out)


def test_no_reuse_refuses_a_change_and_clean_removes_the_reuse_files(inputs):
    tmp, largest = inputs
    out = tmp / "out"
    cfg = _config(tmp, largest, out)
    ylink_data.run(cfg, progress=False)
    before = _files(out)
    new = copy.deepcopy(cfg)
    _threshold(new, tmp)
    with pytest.raises(RunStateError, match=r"a different configuration \(changed: stages\) and --no-reuse refuses"):
        ylink_data.run(new, progress=False, reuse=False)
    assert _files(out) == before  # nothing touched
    held = clean(str(out))
    assert held > 0 and not (out / "_work").exists() and _published(out) == _published(out)
    assert _published(out) == {n: d for n, d in before.items() if not n.startswith("_work/")}
    assert clean(str(out)) == 0
    ylink_data.run(new, progress=False)  # nothing to reuse: every phase runs, the same result
    fresh = tmp / "fresh"
    ylink_data.run({**new, "output": {**new["output"], "path": str(fresh)}}, progress=False)
    _assert_same_output(out, fresh)


@pytest.mark.parametrize("fresh", [False, True], ids=["reuse", "fresh"])
def test_a_rerun_of_another_config_stopped_at_any_step_leaves_the_old_run_or_the_new_one(tmp_path, fresh):
    """Every step of a reuse rerun (remaking minhash_dedup's keys, resolving it again, phase 1,
    publishing in _work/next/, the swap), or of a --fresh one (every phase, then the same swap):
    stopped there, the folder is the old run, the new run, or a folder without a manifest that
    readers refuse; the next rerun (without --fresh, as the interrupt line says) completes it into
    the new run. The --fresh run's steps are many more: every other one is stopped at."""
    largest = _inputs(tmp_path / "in")
    (tmp_path / "words.txt").write_text("zzzz-no-page-has-it\n")
    out = tmp_path / "out"
    cfg = _config(tmp_path, largest, out)
    ylink_data.run(cfg, progress=False)
    old = tmp_path / "old"
    shutil.copytree(out, old)  # the old run as it was, _work/ and all (markers name paths in `out`)
    new = copy.deepcopy(cfg)
    _threshold(new, tmp_path)
    counter = tmp_path / "steps"
    assert _run(new, f"0:{counter}", fresh) == 0
    steps = counter.stat().st_size
    reference = tmp_path / "new"
    shutil.copytree(out, reference)
    assert steps > 30
    seen = set()
    for k in sorted({*range(1, steps + 1, 2 if fresh else 1), steps}):
        shutil.rmtree(out)
        shutil.copytree(old, out)
        assert _run(new, f"{k}:{tmp_path / f'count-{k}'}", fresh) == STOP_EXIT_CODE, f"step {k} of {steps}"
        if (out / "manifest.json").exists():
            state = "old" if _published(out) == _published(old) else "new"
            if state == "new":
                _assert_same_output(out, reference)
        else:
            state = "refused"
            with pytest.raises(Exception, match="manifest"):
                ylink_data.open_run(str(out))
        seen.add(state)
        ylink_data.run(new, progress=False)
        _assert_same_output(out, reference)
    assert seen == {"old", "refused", "new"}


def test_reuse_files_that_changed_since_are_not_reused(inputs, capfd):
    """A reuse file whose bytes are no longer those reuse.json hashed: the phase runs again, said in one line."""
    tmp, largest = inputs
    out = tmp / "out"
    cfg = _config(tmp, largest, out)
    ylink_data.run(cfg, progress=False)
    part = sorted((out / "_work" / "phase0").glob("task-*.parquet"))[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 1
    part.write_bytes(bytes(data))
    new = copy.deepcopy(cfg)
    _added(new, tmp)
    capfd.readouterr()
    ylink_data.run(new, progress=False)
    err = capfd.readouterr().err
    assert f"reuse files of phase 0: {part.name} is not what was kept; the phase runs again" in err
    assert "recomputing from stages[4] c4_quality (added)" in err and "reusing" not in err
    fresh = tmp / "fresh"
    ylink_data.run({**new, "output": {**new["output"], "path": str(fresh)}}, progress=False)
    _assert_same_output(out, fresh)


def test_the_interrupt_line_of_a_fresh_run_says_to_rerun_without_fresh():
    from ylink_data.engine.executors.base import RESUME_HINT, resume_hint

    assert resume_hint(False) == RESUME_HINT
    assert "without --fresh" in resume_hint(True)
