"""Operating a run on a Ray cluster (issue 26): every way of failing to join one is one line before
anything is written; Ray Client addresses work; a run that lost every worker node waits on its
progress line, stops after ray.max_wait_for_cpus_s and resumes; a lost head node is one line with the
resume hint; the warning about local paths names each one and counts only nodes that run tasks.

The clusters are real Ray nodes started with the `ray` CLI on 127.0.0.1 (tests/raycluster.py: a head
with no CPU and two worker nodes of one CPU); the driver is `ylink` in a subprocess."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError
from ylink_data.engine.node_paths import local_paths
from ylink_data.engine.progress import RunProgress

from .conftest import REPO, quickstart_config
from .raycluster import RayCliCluster

SPLIT = 100_000  # 26 phase-0 tasks over the sample crawl: a kill lands mid-phase


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ylink(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ylink: error:")]


@pytest.fixture
def cluster(tmp_path_factory):
    """A head with no CPU (tasks go to workers, as on a real cluster) and two worker nodes of one CPU,
    started with the `ray` CLI on 127.0.0.1 (tests/raycluster.py); the head serves Ray Client too."""
    with RayCliCluster(tmp_path_factory.mktemp("rc"), workers=2) as c:
        yield c


def _pipeline(tmp_path: Path, output: Path, **ray) -> Path:
    cfg = quickstart_config(output, input__split_bytes=SPLIT)
    cfg["ray"] = ray
    path = tmp_path / f"{output.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _wait_for_markers(folder: Path, count: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (folder.is_dir() and len(list(folder.glob("task-*.json"))) >= count):
        assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before {count} tasks of {folder} were done"
        assert time.monotonic() < deadline, f"{count} tasks of {folder} not done in {timeout} s"
        time.sleep(0.1)


def _same_output(a: Path, b: Path) -> None:
    ra, rb = ylink_data.open_run(str(a)), ylink_data.open_run(str(b))
    assert rb.stats["output_records"] == ra.stats["output_records"] > 50
    assert [s["sha256"] for s in rb.manifest["shards"]] == [s["sha256"] for s in ra.manifest["shards"]]


@pytest.mark.parametrize("address, says", [
    ("127.0.0.1:{port}", "no Ray cluster (GCS) answers at 127.0.0.1:{port} (refused)"),
    ("ray://127.0.0.1:{port}", "no Ray Client server (`ray start --head` listens on 10001) answers at 127.0.0.1:{port}"),
    ("no-such-host.invalid:6379", "no such host 'no-such-host.invalid'"),
    ("auto", "no Ray cluster (GCS) answers at 127.0.0.1:{port}"),  # RAY_ADDRESS names a cluster that is gone
])
def test_a_cluster_that_cannot_be_joined_is_one_line_before_anything_is_written(tmp_path, address, says):
    port = _free_port()
    address, says = address.format(port=port), says.format(port=port)
    output = tmp_path / "out"
    pipeline = _pipeline(tmp_path, output)
    env = {"RAY_ADDRESS": f"127.0.0.1:{port}"} if address == "auto" else {}
    for command in ("run", "validate"):
        proc = _ylink(command, str(pipeline), "--set", f"ray.address={address}", env=env, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"ylink: error: ray.address {address}") and says in lines[0], lines[0]
        assert "ray start --head" in lines[0] or "correct the host name" in lines[0]
        assert not output.exists(), "a run that could not join its cluster wrote to its output folder"


def test_an_address_of_no_known_form_points_at_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"ray\.address: .*not auto, HOST:PORT .*ray://HOST:PORT"):
        load_config(quickstart_config(tmp_path / "out"), {"ray.address": "ray:/head:10001"})


def test_ray_client_address_and_validate(cluster, tmp_path):
    local = tmp_path / "local"
    ylink_data.run(quickstart_config(local, input__split_bytes=SPLIT), progress=False)
    output = tmp_path / "client"
    pipeline = _pipeline(tmp_path, output, address=cluster.client_address)

    proc = _ylink("validate", str(pipeline), env=cluster.env)
    assert proc.returncode == 0, proc.stderr
    assert f"ray.address {cluster.client_address}: 3 nodes, 2 with CPUs (2 CPUs)" in proc.stdout
    # Only the two worker nodes run tasks: the head has no CPU. Each local path is named.
    warning = next(line for line in proc.stderr.splitlines() if "warning:" in line)
    assert "runs tasks on 2 other nodes with CPUs" in warning
    for i, path in enumerate(yaml.safe_load(pipeline.read_text())["input"]["paths"]):
        assert f"input.paths[{i}]: {path}" in warning
    assert f"output.path: {output}" in warning

    proc = _ylink("run", str(pipeline), "--no-progress", env=cluster.env)
    assert proc.returncode == 0, proc.stderr
    _same_output(local, output)


def test_no_worker_left_waits_then_stops_and_the_rerun_resumes(cluster, tmp_path):
    local = tmp_path / "local"
    ylink_data.run(quickstart_config(local, input__split_bytes=SPLIT), progress=False)
    output = tmp_path / "cluster"
    pipeline = _pipeline(tmp_path, output, address=cluster.address, max_wait_for_cpus_s=6)
    proc = subprocess.Popen([sys.executable, "-m", "ylink_data.cli", "run", str(pipeline), "--no-progress"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env)
    _wait_for_markers(output / "_work" / "phase0" / "done", 2, proc)
    for i in (1, 2):
        cluster.kill_worker(i)
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 2, stderr
    assert "waiting for a CPU: no node of the Ray cluster has one" in stderr
    [error] = _errors(stderr)
    assert "has had a CPU for" in error and "(ray.max_wait_for_cpus_s: 6)" in error
    assert "rerun the same command to resume" in error
    done_before = len(list((output / "_work" / "phase0" / "done").glob("task-*.json")))
    assert 2 <= done_before < 26, "the workers were lost after phase 0: nothing was left to wait for"

    for i in (1, 2):
        cluster.start_worker(i)
    proc = _ylink("run", str(pipeline), "--no-progress", env=cluster.env)
    assert proc.returncode == 0, proc.stderr
    assert f"26/26 tasks ({done_before} done before this run)" in proc.stderr
    _same_output(local, output)


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_lost_head_node_is_one_line_with_the_resume_hint(cluster, tmp_path, how):
    """A head that is gone (killed) or hung (its GCS SIGSTOPped: the kernel still accepts connections
    to its port, so only a request shows it does not answer) ends the run with the same one line."""
    output = tmp_path / "cluster"
    pipeline = _pipeline(tmp_path, output, address=cluster.address)
    # Ray gives a lost GCS this long before it ends the driver; ylink speaks 5 s earlier (3 s here).
    env = {**cluster.env, "RAY_gcs_rpc_server_reconnect_timeout_s": "8"}
    proc = subprocess.Popen([sys.executable, "-m", "ylink_data.cli", "run", str(pipeline), "--no-progress"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait_for_markers(output / "_work" / "phase0" / "done", 2, proc)
        with contextlib.ExitStack() as lost:
            if how == "killed":
                assert cluster.kill_head(), "the head node was not running"
            else:
                lost.enter_context(cluster.stopped_gcs())
            _, stderr = proc.communicate(timeout=120)
            if how == "stopped":  # joining a hung head is one line too, not a wait for ever
                joined = _ylink("validate", str(pipeline), env=cluster.env, timeout=120)
                assert joined.returncode == 2, joined.stderr
                [line] = joined.stderr.strip().splitlines()
                assert f"no Ray cluster (GCS) answers at {cluster.address}" in line and "hung or stopped" in line, line
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, stderr
    [error] = _errors(stderr)
    assert f"lost the Ray cluster: its head node at {cluster.address} has not answered for 3 s" in error
    assert "rerun the same command to resume once the cluster is back" in error
    assert "Failed to connect to GCS within" not in stderr  # ylink spoke before Ray ended the process
    assert not (output / "manifest.json").exists()


def test_local_paths_name_every_file_a_worker_opens(tmp_path):
    cfg = quickstart_config(tmp_path / "out")
    cfg["input"]["paths"].append("s3://bucket/crawl/*.warc.gz")
    cfg["stages"].append({"decontaminate": {"benchmarks": [{"path": str(tmp_path / "bench.jsonl"),
                                                              "fields": ["question"]}]}})
    (tmp_path / "bench.jsonl").write_text('{"question": "What is the capital of France?"}\n')
    cfg = load_config(cfg)
    found = dict((value, key) for key, value in local_paths(cfg))
    assert set(found) >= {*(p for p in cfg.input.paths if "://" not in p), str(tmp_path / "out"),
                          str(tmp_path / "bench.jsonl")}
    assert "s3://bucket/crawl/*.warc.gz" not in found
    assert found[str(tmp_path / "bench.jsonl")] == f"stages[{len(cfg.ops) - 1}].decontaminate.benchmarks[0].path"
    # The default fastText model ships inside the package: every node with the same environment has it.
    assert not any("ylink_data" in value for value in found)


def test_progress_after_a_resume_says_how_many_tasks_were_done_before(capsys):
    progress = RunProgress(enabled=False)
    with progress:
        handle = progress.phase("phase 0: read", total=5, already_done=3)
        progress.advance(handle, docs=10)
        progress.advance(handle, docs=7)
        progress.finish(handle)
        fresh = progress.phase("phase 1: apply", total=5)
        for _ in range(5):
            progress.advance(fresh, docs=1)
        progress.finish(fresh)
    err = capsys.readouterr().err
    assert "phase 0: read: 5/5 tasks (3 done before this run), 17 docs" in err
    assert "phase 1: apply: 5/5 tasks, 5 docs" in err


def test_waiting_for_a_cpu_is_said_once_and_its_end_too(capsys):
    progress = RunProgress(enabled=False)
    with progress:
        progress.phase("phase 0: read", total=2)
        for waited in (0, 2, 4):
            progress.waiting(f"waiting for a CPU ({waited} s)")
        progress.waiting(None)
        progress.waiting(None)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["waiting for a CPU (0 s)", "a CPU is available again: the run goes on"]
