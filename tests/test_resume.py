"""Resume: a run stopped abruptly (YLINK_FAIL_AFTER_TASKS, exit 75, no clean-up) and rerun gives the
same rows and ids as an uninterrupted run, whichever phase it was stopped in."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import yaml

import ylink_data

from .conftest import REPO, quickstart_config

SPLIT = 60_000  # small splits: the sample crawl becomes a few dozen tasks


def _ylink_run(config_path, fail_after: int | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("YLINK_FAIL_AFTER_TASKS", None)
    if fail_after is not None:
        env["YLINK_FAIL_AFTER_TASKS"] = str(fail_after)
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(config_path), "--no-progress"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _stop_in_phase_1(config_path, out, tasks: int, cpus: int) -> None:
    """Resume a run stopped in phase 0 of the quickstart and stop it again halfway through phase 1:
    first at the end of phase 0, then after exact_dedup's global phase (a task per phase-0 task
    with documents, one per partition, two partitions per CPU, and its marker) and half of phase 1."""
    done = _done_markers(out, 0)
    second = _ylink_run(config_path, fail_after=tasks - done)
    assert second.returncode == 75 and "resuming" in second.stderr, second.stderr
    assert _done_markers(out, 0) == tasks and _done_markers(out, 1) == 0
    with_rows = sum(1 for m in (out / "_work" / "phase0" / "done").glob("task-*.json")
                    if any(p["rows"] for p in json.loads(m.read_text())["parts"]))
    third = _ylink_run(config_path, fail_after=with_rows + 2 * cpus + 1 + tasks // 2)
    assert third.returncode == 75 and "resuming" in third.stderr, third.stderr
    assert 0 < _done_markers(out, 1) < tasks


def _counts(stats: dict) -> dict:
    """stats.json without timings (each stage's seconds, the run's `timing`), which differ from run to run."""
    return {**{k: v for k, v in stats.items() if k != "timing"},
            "stages": [{k: v for k, v in s.items() if not k.endswith("seconds")} for s in stats["stages"]]}


def _done_markers(out, phase: int) -> int:
    folder = out / "_work" / f"phase{phase}" / "done"
    return len(list(folder.glob("task-*.json"))) if folder.exists() else 0


@pytest.fixture(scope="module")
def reference(ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    ylink_data.run(quickstart_config(out, input__split_bytes=SPLIT))
    return out


def _assert_same_run(got_path, expected_path) -> None:
    expected, got = ylink_data.open_run(str(expected_path)), ylink_data.open_run(str(got_path))
    assert _counts(got.stats) == _counts(expected.stats)
    assert got.to_arrow().equals(expected.to_arrow())
    assert [s["sha256"] for s in got.manifest["shards"]] == [s["sha256"] for s in expected.manifest["shards"]]
    assert got.rejected().sort_by("id").equals(expected.rejected().sort_by("id"))


def test_interrupted_twice_then_resumed_equals_uninterrupted(reference, tmp_path):

    out = tmp_path / "resumed"
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(yaml.safe_dump(quickstart_config(out, input__split_bytes=SPLIT, ray__num_cpus=2)))
    tasks = json.loads((reference / "run.json").read_text())["tasks"]
    assert tasks >= 10

    first = _ylink_run(config_path, fail_after=3)  # stopped in phase 0
    assert first.returncode == 75, first.stderr
    assert not (out / "manifest.json").exists()
    assert 3 <= _done_markers(out, 0) < tasks

    _stop_in_phase_1(config_path, out, tasks, cpus=2)  # resumed, stopped again (twice more) in phase 1
    assert not (out / "manifest.json").exists()

    last = _ylink_run(config_path, fail_after=None)
    assert last.returncode == 0, last.stderr

    _assert_same_run(out, reference)


def test_kill_9_mid_run_then_rerun_equals_uninterrupted(reference, tmp_path):
    """No fault injection: the whole process group (driver, Ray, workers) is SIGKILLed mid-phase."""
    out = tmp_path / "killed"
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(yaml.safe_dump(quickstart_config(out, input__split_bytes=SPLIT)))
    proc = subprocess.Popen([sys.executable, "-m", "ylink_data.cli", "run", str(config_path), "--no-progress"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while _done_markers(out, 0) < 5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "manifest.json").exists() and _done_markers(out, 0) >= 5

    rerun = _ylink_run(config_path, fail_after=None)
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming" in rerun.stderr
    _assert_same_run(out, reference)
