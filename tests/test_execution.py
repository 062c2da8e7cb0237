"""Where tasks run (`ray.execution`, engine/submit.py): a batch of one task runs in the driver and
one of several in worker processes on this machine, without starting Ray, and a run gives the same
bytes, manifest, stats and resume behaviour whether its tasks run in the driver, in worker processes
or on Ray. Also: `import ylink_data` stays light."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml

import ylink_data
from ylink_data.engine.config import RayConfig
from ylink_data.core.errors import ConfigError
from ylink_data.engine.submit import where_to_run

from .chaos.processes import python, start_ylink, wait_until, ylink
from .conftest import SAMPLES, quickstart_config
from .test_resume import _counts, _done_markers, _stop_in_phase_1, _ylink_run

SPLIT = 60_000  # the sample crawl in a few dozen tasks, so that Ray runs several at once


def test_importing_ylink_data_imports_no_heavy_library():
    proc = subprocess.run([sys.executable, "-c", "import sys, ylink_data; print(sorted({m.split('.')[0] for m in "
                           "sys.modules} & {'ray', 'pyarrow', 'pandas', 'torch', 'openai', 'pydantic', 'fsspec'}))"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_public_names_load_on_first_use():
    from ylink_data import Run, RunResult, open_run, preview_op, run, sample_rejected, write_report
    from ylink_data.engine.runner import run as runner_run

    assert run is runner_run and ylink_data.run is runner_run
    assert all(callable(f) for f in (Run, RunResult, open_run, preview_op, sample_rejected, write_report))
    assert set(ylink_data.__all__) <= set(dir(ylink_data))
    with pytest.raises(AttributeError, match="no attribute 'runn'"):
        ylink_data.runn  # noqa: B018


@pytest.mark.parametrize("execution, address, cpus, tasks, where", [
    ("auto", None, 2, 0, "here"), ("auto", None, 2, 1, "here"), ("auto", None, 2, 2, "processes"),
    ("auto", None, 1, 50, "here"),  # one CPU: one process would run them all anyway
    ("auto", "auto", 2, 1, "ray"), ("auto", "ray://head:10001", 2, 0, "ray"),
    ("processes", None, 2, 1, "processes"), ("processes", None, 1, 50, "processes"),
    ("local", None, 2, 50, "here"), ("local", "auto", 2, 50, "here"), ("ray", None, 2, 1, "ray"),
    ("ray", None, 2, 0, "ray")])
def test_where_a_batch_runs(execution, address, cpus, tasks, where, monkeypatch):
    monkeypatch.setattr("ylink_data.engine.submit._ray_running", lambda: False)  # other tests' Ray
    assert where_to_run(RayConfig(execution=execution, address=address, num_cpus=cpus), tasks) == where


def test_a_process_that_runs_ray_already_keeps_its_batches_on_it(ray_session):
    """A notebook that called ray.init(): its runs' batches of several tasks go to that Ray."""
    assert where_to_run(RayConfig(num_cpus=2), 2) == "ray"
    assert where_to_run(RayConfig(num_cpus=2), 1) == "here"
    assert where_to_run(RayConfig(num_cpus=2, execution="processes"), 2) == "processes"


def test_outside_the_main_thread_batches_run_in_worker_processes(monkeypatch):
    """An op's time limit is a SIGALRM, which only the main thread gets: a run started from another
    thread (a web server's, a notebook's executor) runs its tasks in worker processes, whose main
    thread runs them, even a single task."""
    monkeypatch.setattr("ylink_data.engine.submit._ray_running", lambda: False)
    got = {}

    def where() -> None:
        got["auto"] = where_to_run(RayConfig(num_cpus=1), 1)
        with pytest.raises(ConfigError, match=r"^ray\.execution: local .* main thread"):
            where_to_run(RayConfig(execution="local"), 1)
        got["ray"] = where_to_run(RayConfig(execution="ray"), 1)

    thread = threading.Thread(target=where)
    thread.start()
    thread.join()
    assert got == {"auto": "processes", "ray": "ray"}


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
    """Every file a finished run publishes, by path, but its manifest, stats and run.json (compared
    apart); not the reuse files in _work/, laid out by the partitions of the machine that ran it."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "stats.json", "run.json", "run.lock")
            and p.relative_to(run).parts[0] != "_work"}


def _assert_same_bytes(got, expected) -> None:
    got_files, expected_files = _files(got), _files(expected)
    assert sorted(got_files) == sorted(expected_files)
    assert any(name.startswith("rejected/") for name in expected_files)  # the drops are compared too
    assert [n for n in got_files if got_files[n] != expected_files[n]] == []
    manifest = {k: v for k, v in json.loads((expected / "manifest.json").read_text()).items() if k != "created"}
    assert {k: v for k, v in json.loads((got / "manifest.json").read_text()).items() if k != "created"} == manifest
    stats = ylink_data.open_run(str(expected)).stats
    assert _counts(ylink_data.open_run(str(got)).stats) == _counts(stats)


@pytest.mark.parametrize("execution", ["local", "processes"])
def test_in_the_driver_and_in_worker_processes_equals_on_ray(on_ray, tmp_path, execution):
    tasks = json.loads((on_ray / "run.json").read_text())["tasks"]
    assert tasks >= 10
    out = tmp_path / "run"
    ylink_data.run(quickstart_config(out, input__split_bytes=SPLIT, ray__execution=execution, ray__num_cpus=2),
                   progress=False)
    _assert_same_bytes(out, on_ray)


@pytest.mark.parametrize("execution", ["local", "processes"])
def test_stopped_twice_then_resumed_equals_on_ray(on_ray, tmp_path, execution):
    """YLINK_FAIL_AFTER_TASKS counts tasks run in the driver or in worker processes as it counts
    Ray's: stopped in phase 0, again at its end, then in phase 1; the last run finishes what is left."""
    out = tmp_path / "run"
    config = _write(tmp_path, quickstart_config(out, input__split_bytes=SPLIT, ray__execution=execution,
                                                ray__num_cpus=2))
    tasks = json.loads((on_ray / "run.json").read_text())["tasks"]

    first = _ylink_run(config, fail_after=3)
    assert first.returncode == 75, first.stderr
    # Worker processes may finish the task they had when the driver stopped: one more marker each.
    assert 3 <= _done_markers(out, 0) <= (3 if execution == "local" else 5) and not (out / "manifest.json").exists()
    _stop_in_phase_1(config, out, tasks, cpus=2)
    last = _ylink_run(config, fail_after=None)
    assert last.returncode == 0, last.stderr
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
    # In the driver tasks run one by one in the order they are handed out (longest first): those
    # before task 4 in that order finished, task 4 took the driver down.
    assert _done_markers(out, 0) == _handed_out_before(config, 4) and not (out / "manifest.json").exists()
    config["ray"]["execution"] = "ray"  # not fingerprinted: where tasks run changes no output
    rerun = ylink("run", _write(tmp_path, config), "--no-progress")
    assert rerun.returncode == 0 and "resuming" in rerun.stderr, rerun.stderr
    _assert_same_bytes(out, on_ray)


def _handed_out_before(config: dict, task: int) -> int:
    """How many of phase 0's tasks the scheduler hands out before `task` (engine/submit.longest_first)."""
    from ylink_data.engine.config import load_config
    from ylink_data.engine.runner import Runner
    from ylink_data.engine.submit import longest_first
    from ylink_data.engine.tasks import split_bytes

    plan = Runner(load_config(config, {})).plan()
    return longest_first([sum(split_bytes(s) for s in splits) for splits in plan.tasks]).index(task)


def test_a_worker_process_that_dies_is_replaced_and_its_task_retried(on_ray, tmp_path):
    """A worker process killed under its task (here it exits on the spot at the task's first two
    attempts, as one the OOM killer took would) is replaced and the task run again; the run is the
    same as on Ray."""
    out = tmp_path / "run"
    config = quickstart_config(out, input__split_bytes=SPLIT, ray__execution="processes", ray__num_cpus=2)
    flag = tmp_path / "attempts"
    proc = ylink("run", _write(tmp_path, config), "--no-progress",
                 env={"YLINK_TEST_CRASH_TASK": "4", "YLINK_TEST_CRASH_TIMES": f"2:{flag}"})
    assert proc.returncode == 0, proc.stderr
    assert flag.read_text() == "xx"  # two attempts died, the third ran
    _assert_same_bytes(out, on_ray)


def test_a_killed_driver_takes_its_worker_processes_with_it(tmp_path):
    """kill -9 of `ylink run`: its worker processes die too (PDEATHSIG), so that none goes on
    writing beside a rerun; the rerun resumes."""
    out = tmp_path / "run"
    config = _write(tmp_path, quickstart_config(out, input__split_bytes=SPLIT, ray__execution="processes",
                                                ray__num_cpus=2))
    proc = start_ylink("run", config, "--no-progress")
    workers: list[int] = []

    def two_workers_busy() -> bool:
        workers[:] = [pid for pid in _children(proc.pid) if "ylink_data.engine.workers" in _cmdline(pid)]
        return len(workers) == 2 and _done_markers(out, 0) >= 1

    wait_until(two_workers_busy, proc, "two worker processes running tasks")
    for pid in workers:  # stopped, a worker cannot end by itself on its closed pipe: only a signal ends it
        os.kill(pid, signal.SIGSTOP)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []
    rerun = ylink("run", config, "--no-progress")
    assert rerun.returncode == 0 and "resuming" in rerun.stderr, rerun.stderr


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone meanwhile
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its (dead) parent's reaper."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_memory_inputs_reach_worker_processes(tmp_path):
    """memory:// lives in the driver only: its files travel to worker processes with the task."""
    import fsspec

    mem = fsspec.filesystem("memory")
    files = sorted(SAMPLES.glob("*.warc.gz"))[:3]
    for path in files:
        mem.pipe_file(f"/exec-test/{path.name}", path.read_bytes())
    runs = {}
    for name, paths in [("memory", ["memory://exec-test/*.warc.gz"]), ("local", [str(p) for p in files])]:
        out = tmp_path / name
        cfg = {"input": {"paths": paths, "split_bytes": SPLIT}, "output": {"path": str(out)},
               "stages": [{"extract": {}}], "ray": {"execution": "processes", "num_cpus": 2}}
        _, stats = ylink_data.run(cfg, progress=False)
        assert json.loads((out / "run.json").read_text())["tasks"] > 2
        runs[name] = (sorted(ylink_data.open_run(str(out)).to_arrow().column("text").to_pylist()), _counts(stats))
    assert runs["memory"][0] and runs["memory"] == runs["local"]
