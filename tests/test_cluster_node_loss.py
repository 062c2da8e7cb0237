"""A worker node lost mid-run (issue 26 point 6): a real Ray cluster started with the `ray` CLI on
this machine (a head with no CPUs and two 1-CPU worker nodes, tests/raycluster.py), input and output
on a real S3 server (tests/s3server.py), the quickstart with its two global phases (exact and MinHash
dedup) and `tokenize` into Megatron files. Worker node 1 (its raylet, agents and Ray workers) is
SIGKILLed by PID once during phase 0 and, in a second run after it was started again, during the
MinHash dedup's global phase; each run still ends with exit 0 and exactly the bytes of the same
pipeline run on one machine (worker processes, `ray.address: null`): shards, Megatron .bin/.idx,
rejected files, manifest and stats counts.

Everything stays on 127.0.0.1 (every raylet, the GCS, the driver): the cluster runs with
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, the setting under which Ray keeps 127.0.0.1 instead of
replacing it with the machine's network address (see tests/raycluster.py), and each kill checks that
no socket of the cluster's processes or of the driver is on another address."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import ylink_data

from .conftest import REPO, SAMPLES, quickstart_config
from .raycluster import RayCliCluster
from .s3server import s3_server
from .tokenruns import crawl_tokenizer

pytestmark = pytest.mark.slow

SPLIT, SHARD_BYTES = 60_000, 50_000  # the sample crawl in dozens of tasks: a kill lands with most still to run
RUN_TIMEOUT_S = 240
POLL_S = 0.05
EXACT, MINHASH = 0, 1  # the phases whose global op is exact_dedup, minhash_dedup (resolve after their tasks)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.upload_folder(SAMPLES, "crawl-in/cc")
        server.upload_folder(crawl_tokenizer(tmp_path_factory.mktemp("tokenizer")).parent, "models/crawl")
        server.filesystem().mkdir("runs")
        yield server


@pytest.fixture(scope="module")
def tokenizer(s3) -> str:
    """A byte-level BPE trained on the crawl (tests/tokenruns.py), read by every node from S3."""
    return "s3://models/crawl/tokenizer.json"


def _config(s3, output: str, tokenizer: str) -> dict:
    """The quickstart (exact_dedup, minhash_dedup) plus tokenize and Megatron output, S3 in and out."""
    cfg = quickstart_config(Path("unused"), input__split_bytes=SPLIT, output__shard_bytes=SHARD_BYTES)
    cfg["name"] = "node-loss"
    cfg["input"]["paths"] = [f"s3://crawl-in/cc/{Path(p).name}" for p in cfg["input"]["paths"]]
    cfg["output"].update(path=output, megatron={})
    cfg["stages"].append({"tokenize": {"tokenizer": tokenizer}})
    cfg["storage"] = {"s3": s3.storage_options()}
    names = [next(iter(stage)) for stage in cfg["stages"]]
    assert names.index("exact_dedup") < names.index("minhash_dedup") < names.index("tokenize")
    return cfg


@pytest.fixture(scope="module")
def reference(s3, tokenizer) -> str:
    """The run on one machine: worker processes, no Ray."""
    url = "s3://runs/one-machine"
    cfg = _config(s3, url, tokenizer)
    cfg["ray"] = {"address": None, "execution": "processes", "num_cpus": 2}
    ylink_data.run(cfg, progress=False)
    return url


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with RayCliCluster(tmp_path_factory.mktemp("rc"), workers=2) as cluster:
        yield cluster


# ----------------------------------------------------------------------------------- helpers
def _markers(fs, url: str, phase: int) -> int:
    """Phase `phase`'s task markers written so far (layout.task_marker: _work/phaseN/done/task-*.json)."""
    folder = f"{url.removeprefix('s3://')}/_work/phase{phase}/done"
    fs.invalidate_cache(folder)
    try:
        return sum(1 for p in fs.ls(folder, detail=False) if p.rsplit("/", 1)[-1].startswith("task-"))
    except FileNotFoundError:
        return 0


def _resolved(fs, url: str, phase: int) -> bool:
    """Whether phase `phase`'s global op finished (layout.resolve_marker: _work/phaseN/resolved.json)."""
    path = f"{url.removeprefix('s3://')}/_work/phase{phase}/resolved.json"
    fs.invalidate_cache(path.rsplit("/", 1)[0])
    return fs.exists(path)


def _start_run(tmp_path: Path, cfg: dict, cluster: RayCliCluster) -> tuple[subprocess.Popen, Path]:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = tmp_path / "driver.log"
    with open(log, "wb") as out:
        driver = subprocess.Popen([sys.executable, "-m", "ylink_data.cli", "run", str(path), "--no-progress",
                                   "--set", f"ray.address={cluster.address}"],
                                  cwd=REPO, env=cluster.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    return driver, log


def _kill_node_when(cluster: RayCliCluster, driver: subprocess.Popen, log: Path, ready: Callable[[], bool],
                    what: str) -> dict[int, str]:
    """Polls until `ready()`, then SIGKILLs worker node 1; fails if the run ended first. Checks, while
    the run runs, that no socket of the cluster or the driver leaves 127.0.0.1."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not ready():
        if driver.poll() is not None:
            pytest.fail(f"the run ended (exit {driver.returncode}) before {what}: the kill could not land "
                        f"mid-phase\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {RUN_TIMEOUT_S} s\n{log.read_text()[-3000:]}")
        time.sleep(POLL_S)
    sockets = cluster.non_loopback_sockets(driver.pid)
    killed = cluster.kill_worker(1)
    assert sockets == [], "sockets off 127.0.0.1"
    assert driver.poll() is None, f"the run ended before the kill\n{log.read_text()[-3000:]}"
    assert "raylet" in killed.values(), f"worker node 1's raylet was not alive at the kill: {killed}"
    workers = [name for name in killed.values() if name.startswith("ray::") and "Agent" not in name]
    assert workers, f"worker node 1 had no Ray worker process at the kill: {killed}"
    return killed


def _finish(driver: subprocess.Popen, log: Path) -> None:
    try:
        driver.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        driver.kill()
        driver.wait()
        pytest.fail(f"the run did not end within {RUN_TIMEOUT_S} s of losing a node\n{log.read_text()[-4000:]}")
    assert driver.returncode == 0, log.read_text()[-4000:]


def _counts(stats: dict) -> dict:
    """stats.json without timings, which differ from run to run."""
    return {**{k: v for k, v in stats.items() if k != "timing"},
            "stages": [{k: v for k, v in s.items() if not k.endswith("seconds")} for s in stats["stages"]]}


def _files(fs, url: str) -> dict[str, bytes]:
    """Every file a finished run publishes by path, but its manifest, stats and run.json (compared
    apart); not the reuse files in _work/, laid out by the partitions of the machines that ran it."""
    root = url.removeprefix("s3://")
    fs.invalidate_cache(root)
    return {p[len(root) + 1:]: fs.cat_file(p) for p, info in sorted(fs.find(root, detail=True).items())
            if info["type"] == "file" and p.rsplit("/", 1)[-1] not in ("manifest.json", "stats.json", "run.json")
            and not p[len(root) + 1:].startswith("_work/")}


def _assert_same_run(fs, got: str, expected: str) -> None:
    got_files, expected_files = _files(fs, got), _files(fs, expected)
    assert sorted(got_files) == sorted(expected_files)
    assert any(n.startswith("rejected/") for n in expected_files)  # the drops are compared too
    assert sum(n.startswith("megatron/") and n.endswith((".bin", ".idx")) for n in expected_files) >= 4
    # data-path.txt names the run's own folder; everything else byte for byte.
    data_path = "megatron/data-path.txt"
    assert got_files.pop(data_path).decode() == expected_files.pop(data_path).decode().replace(
        expected.removeprefix("s3://"), got.removeprefix("s3://")).replace(expected, got)
    assert [n for n in got_files if got_files[n] != expected_files[n]] == []

    def manifest(url):
        return {k: v for k, v in json.loads(fs.cat_file(f"{url.removeprefix('s3://')}/manifest.json")).items()
                if k != "created"}

    want = manifest(expected)
    assert [s["sha256"] for s in manifest(got)["shards"]] == [s["sha256"] for s in want["shards"]]
    assert manifest(got) == want
    assert want["megatron"]["files"] and want["rows"] > 50
    a = _counts(json.loads(fs.cat_file(f"{expected.removeprefix('s3://')}/stats.json")))
    assert _counts(json.loads(fs.cat_file(f"{got.removeprefix('s3://')}/stats.json"))) == a


def _tasks(fs, url: str) -> int:
    return json.loads(fs.cat_file(f"{url.removeprefix('s3://')}/run.json"))["tasks"]


def _run_losing_node_1(s3, tokenizer, reference, cluster, tmp_path, url: str, ready: Callable[[], bool], what: str,
                       at_kill: Callable[[], None]) -> None:
    """A cluster run into `url` whose worker node 1 is SIGKILLed once `ready()`; `at_kill()` checks
    the kill landed where meant; then the run must end well with the reference's bytes."""
    fs = s3.filesystem()
    cluster.start_worker(1)  # alive (nothing to do) unless an earlier test killed it: two CPUs at the start
    driver, log = _start_run(tmp_path, _config(s3, url, tokenizer), cluster)
    try:
        _kill_node_when(cluster, driver, log, ready, what)
        at_kill()
        _finish(driver, log)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert cluster.non_loopback_sockets() == []
    _assert_same_run(fs, url, reference)


# ----------------------------------------------------------------------------------- tests
def test_worker_node_lost_in_phase_0(s3, tokenizer, reference, cluster, tmp_path):
    fs = s3.filesystem()
    tasks = _tasks(fs, reference)
    assert tasks >= 20
    url = "s3://runs/lost-in-phase-0"

    def still_in_phase_0() -> None:
        after = _markers(fs, url, 0)
        assert after < tasks, f"phase 0 had finished ({after}/{tasks} markers) when the kill landed"

    _run_losing_node_1(s3, tokenizer, reference, cluster, tmp_path, url, lambda: _markers(fs, url, 0) >= 1,
                       "phase 0's first task marker", still_in_phase_0)


def test_worker_node_lost_in_a_global_phase(s3, tokenizer, reference, cluster, tmp_path):
    fs = s3.filesystem()
    tasks = _tasks(fs, reference)
    url = "s3://runs/lost-in-minhash-dedup"

    def in_minhash_global_phase() -> None:
        assert _resolved(fs, url, EXACT)
        assert not _resolved(fs, url, MINHASH), "minhash_dedup's global phase had finished when the kill landed"

    # MinHash dedup's global phase starts when the last of phase 1's tasks is done.
    _run_losing_node_1(s3, tokenizer, reference, cluster, tmp_path, url, lambda: _markers(fs, url, MINHASH) >= tasks,
                       "the end of phase 1 (the start of minhash_dedup's global phase)", in_minhash_global_phase)
