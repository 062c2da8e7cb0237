"""Where tasks run (`ray.execution`, pipeline/submit.py): a batch of one task on the embedded Ray runs
in the driver without starting Ray, and a run gives the same bytes, manifest, stats and resume
behaviour whether its tasks run in the driver or on Ray. Also: `import ylink_data` stays light."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
import yaml

import ylink_data
from ylink_data.config import RayConfig
from ylink_data.errors import ConfigError
from ylink_data.pipeline.submit import runs_here

from .chaos.processes import python, ylink
from .conftest import SAMPLES, quickstart_config
from .test_resume import _counts, _done_markers, _ylink_run

SPLIT = 60_000  # the sample crawl in a few dozen tasks, so that Ray runs several at once


def test_importing_ylink_data_imports_no_heavy_library():
    proc = subprocess.run([sys.executable, "-c", "import sys, ylink_data; print(sorted({m.split('.')[0] for m in "
                           "sys.modules} & {'ray', 'pyarrow', 'pandas', 'torch', 'openai', 'pydantic', 'fsspec'}))"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_public_names_load_on_first_use():
    from ylink_data import Run, RunResult, open_run, preview_op, run, sample_rejected, write_report
    from ylink_data.pipeline.runner import run as runner_run

    assert run is runner_run and ylink_data.run is runner_run
    assert all(callable(f) for f in (Run, RunResult, open_run, preview_op, sample_rejected, write_report))
    assert set(ylink_data.__all__) <= set(dir(ylink_data))
    with pytest.raises(AttributeError, match="no attribute 'runn'"):
        ylink_data.runn  # noqa: B018


@pytest.mark.parametrize("execution, address, tasks, here", [
    ("auto", None, 0, True), ("auto", None, 1, True), ("auto", None, 2, False),
    ("auto", "auto", 1, False), ("auto", "ray://head:10001", 0, False),
    ("local", None, 50, True), ("local", "auto", 50, True), ("ray", None, 1, False), ("ray", None, 0, False)])
def test_where_a_batch_runs(execution, address, tasks, here):
    assert runs_here(RayConfig(execution=execution, address=address), tasks) is here


def test_outside_the_main_thread_batches_run_on_ray():
    """An op's time limit is a SIGALRM, which only the main thread gets: a run started from another
    thread (a web server's, a notebook's executor) keeps its tasks on Ray, where limits hold."""
    got = {}

    def where() -> None:
        got["auto"] = runs_here(RayConfig(), 1)
        with pytest.raises(ConfigError, match=r"^ray\.execution: local .* main thread"):
            runs_here(RayConfig(execution="local"), 1)
        got["ray"] = runs_here(RayConfig(execution="ray"), 1)

    thread = threading.Thread(target=where)
    thread.start()
    thread.join()
    assert got == {"auto": False, "ray": False}


def test_an_unknown_execution_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"ray\.execution"):
        ylink_data.run(quickstart_config(tmp_path / "run"), ray={"execution": "fast"})


def test_a_one_task_run_never_starts_ray(tmp_path):
    """The whole run, `ylink run` in a new process, ends without Ray ever imported."""
    out = tmp_path / "run"
    cfg = {"input": {"paths": [str(SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.gz")]}, "output": {"path": str(out)},
           "stages": [{"extract": {}}, {"gopher_repetition": {}}]}
    proc = python("import sys, ylink_data; r = ylink_data.run(sys.argv[1], progress=False); "
                  "print(r.stats['input_records'], 'ray' in sys.modules)", _write(tmp_path, cfg))
    assert proc.returncode == 0, proc.stderr
    records, ray_imported = proc.stdout.split()
    assert int(records) > 0 and ray_imported == "False"
    assert json.loads((out / "run.json").read_text())["tasks"] == 1
    assert ylink_data.open_run(str(out)).stats["output_records"] > 0


def _write(tmp_path, cfg: dict) -> str:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


# ----------------------------------------------------------------------------- both ways, same run


@pytest.fixture(scope="module")
def on_ray(ray_session, tmp_path_factory):
    """The quickstart (extract ... exact and MinHash dedup, quality scores) with every batch on Ray."""
    out = tmp_path_factory.mktemp("on_ray") / "run"
    ylink_data.run(quickstart_config(out, input__split_bytes=SPLIT, ray__execution="ray"), progress=False)
    return out


def _files(run) -> dict[str, bytes]:
    """Every file a finished run holds, by path, but its manifest, stats and run.json (compared apart)."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "stats.json", "run.json", "run.lock")}


def _assert_same_bytes(got, expected) -> None:
    got_files, expected_files = _files(got), _files(expected)
    assert sorted(got_files) == sorted(expected_files)
    assert any(name.startswith("rejected/") for name in expected_files)  # the drops are compared too
    assert [n for n in got_files if got_files[n] != expected_files[n]] == []
    manifest = {k: v for k, v in json.loads((expected / "manifest.json").read_text()).items() if k != "created"}
    assert {k: v for k, v in json.loads((got / "manifest.json").read_text()).items() if k != "created"} == manifest
    stats = ylink_data.open_run(str(expected)).stats
    assert _counts(ylink_data.open_run(str(got)).stats) == _counts(stats)


def test_in_the_driver_equals_on_ray(on_ray, tmp_path):
    tasks = json.loads((on_ray / "run.json").read_text())["tasks"]
    assert tasks >= 10
    out = tmp_path / "run"
    ylink_data.run(quickstart_config(out, input__split_bytes=SPLIT, ray__execution="local"), progress=False)
    _assert_same_bytes(out, on_ray)


def test_in_the_driver_stopped_twice_then_resumed_equals_on_ray(on_ray, tmp_path):
    """YLINK_FAIL_AFTER_TASKS counts tasks run in the driver as it counts Ray's: stopped in phase 0,
    then in phase 1, the third run finishes what is left."""
    out = tmp_path / "run"
    config = _write(tmp_path, quickstart_config(out, input__split_bytes=SPLIT, ray__execution="local"))
    tasks = json.loads((on_ray / "run.json").read_text())["tasks"]

    first = _ylink_run(config, fail_after=3)
    assert first.returncode == 75, first.stderr
    assert _done_markers(out, 0) == 3 and not (out / "manifest.json").exists()
    second = _ylink_run(config, fail_after=tasks)
    assert second.returncode == 75 and "resuming" in second.stderr, second.stderr
    assert _done_markers(out, 0) == tasks and 0 < _done_markers(out, 1) < tasks
    third = _ylink_run(config, fail_after=None)
    assert third.returncode == 0, third.stderr
    _assert_same_bytes(out, on_ray)


def test_a_task_that_crashes_the_driver_stops_the_run_and_a_rerun_resumes(on_ray, tmp_path):
    """In the driver, the process a task takes down (YLINK_TEST_CRASH_TASK: as the OOM killer would)
    is the run itself: it stops with the task's exit code and no manifest; the tasks before the
    crash keep their markers, and a rerun without the crash finishes the run on Ray as it would
    have in the driver."""
    out = tmp_path / "run"
    config = quickstart_config(out, input__split_bytes=SPLIT, ray__execution="local")
    crashed = ylink("run", _write(tmp_path, config), "--no-progress", env={"YLINK_TEST_CRASH_TASK": "4"})
    assert crashed.returncode == 137, crashed.stderr
    assert _done_markers(out, 0) == 4 and not (out / "manifest.json").exists()
    config["ray"]["execution"] = "ray"  # not fingerprinted: where tasks run changes no output
    rerun = ylink("run", _write(tmp_path, config), "--no-progress")
    assert rerun.returncode == 0 and "resuming" in rerun.stderr, rerun.stderr
    _assert_same_bytes(out, on_ray)
