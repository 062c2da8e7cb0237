"""Issue 13, point 1: two runs into one output folder. The second `ylink run` (same config, another
config, with or without --fresh) used to race the first: one crashed with a traceback, `_work/` was
left in a finished run, and the second config then answered "already complete" with the first
config's rows. Now the first run holds the folder (flock locally, a lease object on S3) and any
other run is refused with one line naming the holder; a holder killed with -9 never blocks a rerun.

The first run is frozen with SIGSTOP (its whole process group, Ray included) once it holds the
folder, so the second one meets it there whatever the machine's speed."""
from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest
import yaml

import ylink_data
from ylink_data.core.errors import RunStateError
from ylink_data.io.layout import RunLayout
from ylink_data.engine.lock import Holder, Lease, LocalLock

from ..conftest import quickstart_config
from ..s3server import s3_server
from .processes import finish, python, signal_group, start_ylink, wait_until, ylink

SPLIT = 60_000  # the sample crawl becomes a few dozen tasks


def _configs(out: str, storage: dict | None = None) -> tuple[dict, dict]:
    """Two configurations of the sample crawl that keep different documents."""
    a = quickstart_config(out, input__split_bytes=SPLIT)
    a["stages"] = [{"extract": {}}, {"langid": {"languages": ["en", "zh"], "min_score": 0.5}}]
    b = json.loads(json.dumps(a))
    b["stages"].append({"gopher_quality": {"language": "auto"}})
    for cfg in (a, b):
        cfg["output"]["path"] = out
        cfg["storage"] = storage or {}
    return a, b


def _write(tmp_path, name: str, cfg: dict):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _refused(proc, folder: str, holder_pid: int) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"output.path {folder} is in use by another ylink run" in lines[0]
    assert f"pid {holder_pid}," in lines[0] and "since " in lines[0]


def _texts(url: str, **kw) -> list[str]:
    return sorted(ylink_data.open_run(url, **kw).to_arrow().column("text").to_pylist())


def test_a_second_run_is_refused_while_the_first_holds_the_folder(tmp_path):
    out = tmp_path / "run"
    a, b = _configs(str(out))
    a_path, b_path = _write(tmp_path, "a", a), _write(tmp_path, "b", b)

    first = start_ylink("run", a_path, "--no-progress")
    wait_until(lambda: (out / "run.json").exists(), first, "holding the output folder")
    signal_group(first, signal.SIGSTOP)
    try:
        for args in ([a_path], [b_path], [b_path, "--fresh"], [a_path, "--fresh"]):
            _refused(ylink("run", *args, "--no-progress"), str(out), first.pid)
    finally:
        signal_group(first, signal.SIGCONT)
    code, _, err = finish(first)
    assert code == 0, err
    assert not (out / "_work").exists() and not (out / "run.lock").exists()
    first_texts = _texts(str(out))

    # The folder holds the first configuration: with --no-reuse the second one is told so, and --fresh
    # gives its own documents, the same as it gives alone.
    other = ylink("run", b_path, "--no-progress", "--no-reuse")
    assert other.returncode == 2 and "different configuration" in other.stderr
    alone = tmp_path / "b-alone"
    assert ylink("run", b_path, "--no-progress", "--set", f"output.path={alone}").returncode == 0
    fresh = ylink("run", b_path, "--no-progress", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert _texts(str(out)) == _texts(str(alone)) != first_texts


def test_a_run_killed_while_holding_the_folder_never_blocks_the_rerun(tmp_path):
    out = tmp_path / "run"
    a, _ = _configs(str(out))
    a_path = _write(tmp_path, "a", a)
    first = start_ylink("run", a_path, "--no-progress")
    # run.json, not _work/: the run makes _work/staging/ before it writes run.json, and a run killed
    # in between has nothing to resume (its rerun starts, rightly, without "resuming").
    wait_until(lambda: (out / "run.json").exists(), first, "starting its tasks")
    signal_group(first, signal.SIGKILL)
    first.wait(timeout=60)
    assert (out / "run.lock").exists()  # what a killed holder leaves: a lock file nobody holds

    rerun = ylink("run", a_path, "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    assert f"(host {Holder.me().host}, pid {first.pid}," in rerun.stderr
    assert "ended without releasing its lock" in rerun.stderr and "resuming" in rerun.stderr
    assert not (out / "run.lock").exists()


_FORK_THEN_DIE = """
import os, sys, time
from ylink_data.io.layout import RunLayout
from ylink_data.engine.lock import LocalLock
LocalLock(RunLayout.for_url(sys.argv[1], {})).acquire(print)
child = os.fork()
if child == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # let the test read the parent's output to its end
        os.dup2(null, fd)
    time.sleep(300)  # a process the run forked (a helper, a DataLoader worker), alive after the run
    os._exit(0)
print("child", child, flush=True)
os._exit(0)  # the run dies without releasing its lock, as with kill -9
"""


def test_a_process_forked_by_a_dead_run_does_not_keep_its_lock(tmp_path):
    """A forked child shares its parent's open files and their flocks: run.lock stayed held by the
    child of a run killed with -9, and every rerun was refused as long as the child lived."""
    out = tmp_path / "run"
    died = python(_FORK_THEN_DIE, out)
    assert died.returncode == 0, died.stderr
    child = int(died.stdout.split("child ")[1])
    try:
        notes: list[str] = []
        lock = LocalLock(RunLayout.for_url(str(out), {}))
        lock.acquire(notes.append)
        lock.release()
        assert notes and "ended without releasing its lock; taking over" in notes[0]
    finally:
        os.kill(child, signal.SIGKILL)


def test_already_complete_needs_the_manifest_of_this_configuration(ray_session, tmp_path):
    """The state the race left: run.json of the second configuration over the first one's finished
    run. That is not "already complete" for the second configuration."""
    out, other = tmp_path / "run", tmp_path / "other"
    a, b = _configs(str(out))
    ylink_data.run(a)
    ylink_data.run({**b, "output": {**b["output"], "path": str(other)}})
    shutil.copy(other / "run.json", out / "run.json")

    with pytest.raises(RunStateError, match="manifest.json is of another configuration than its run.json"):
        ylink_data.run(b)
    ylink_data.run(b, fresh=True)
    assert _texts(str(out)) == _texts(str(other))


# ---------------------------------------------------------------------------------------- S3 lease


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.filesystem().mkdir("runs")
        yield server


def test_s3_a_second_run_is_refused_while_the_first_holds_the_lease(s3, tmp_path):
    url = "s3://runs/busy"
    a, b = _configs(url, {"s3": s3.storage_options()})
    a_path, b_path = _write(tmp_path, "a", a), _write(tmp_path, "b", b)
    fs = s3.filesystem()

    first = start_ylink("run", a_path, "--no-progress")
    wait_until(lambda: fs.invalidate_cache() or fs.exists("runs/busy/run.json"), first, "holding the lease")
    signal_group(first, signal.SIGSTOP)
    try:
        _refused(ylink("run", a_path, "--no-progress"), url, first.pid)
        _refused(ylink("run", b_path, "--no-progress", "--fresh"), url, first.pid)
    finally:
        signal_group(first, signal.SIGCONT)
    code, _, err = finish(first)
    assert code == 0, err
    fs.invalidate_cache()
    assert fs.exists("runs/busy/manifest.json") and not fs.exists("runs/busy/run.lock")


def test_s3_a_lease_left_by_a_killed_run_on_this_machine_is_taken_over(s3, tmp_path):
    url = "s3://runs/killed"
    a, _ = _configs(url, {"s3": s3.storage_options()})
    a_path = _write(tmp_path, "a", a)
    fs = s3.filesystem()
    first = start_ylink("run", a_path, "--no-progress")
    wait_until(lambda: fs.invalidate_cache() or fs.exists("runs/killed/run.json"), first, "holding the lease")
    signal_group(first, signal.SIGKILL)
    first.wait(timeout=60)
    left = Holder.parse(fs.cat_file("runs/killed/run.lock"))
    assert left is not None and left.pid == first.pid

    rerun = ylink("run", a_path, "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    assert f"pid {first.pid}," in rerun.stderr and "(its process is gone); taking over" in rerun.stderr
    fs.invalidate_cache()
    assert not fs.exists("runs/killed/run.lock")


def _foreign_lease(expires: float) -> bytes:
    """A lease as a run on another machine writes it."""
    return Holder("0" * 32, "other-host", 4242, "2026-01-01T00:00:00+00:00", node="boot/1", expires=expires).encode()


def test_s3_a_live_lease_of_another_machine_refuses_and_an_expired_one_is_taken_over(ray_session, s3, tmp_path, capfd):
    url = "s3://runs/elsewhere"
    a, _ = _configs(url, {"s3": s3.storage_options()})
    fs = s3.filesystem()
    fs.pipe_file("runs/elsewhere/run.lock", _foreign_lease(time.time() + 3600))
    with pytest.raises(RunStateError, match=r"in use by another ylink run \(host other-host, pid 4242, since "):
        ylink_data.run(a)
    assert not fs.exists("runs/elsewhere/run.json")  # refused before touching the folder

    fs.pipe_file("runs/elsewhere/run.lock", _foreign_lease(time.time() - 1))
    capfd.readouterr()
    ylink_data.run(a, progress=False)
    err = capfd.readouterr().err
    assert "(host other-host, pid 4242, since 2026-01-01T00:00:00+00:00) ended without releasing its lease " \
           "(its lease expired); taking over" in err
    fs.invalidate_cache()
    assert fs.exists("runs/elsewhere/manifest.json") and not fs.exists("runs/elsewhere/run.lock")


def test_s3_the_holder_renews_its_lease_and_notices_when_it_is_lost(s3):
    layout, key = RunLayout.for_url("s3://runs/renewed", s3.storage_options()), "runs/renewed/run.lock"
    fs = s3.filesystem()
    holder = Lease(layout, ttl_s=4)
    holder.acquire(print)
    try:
        time.sleep(6)  # past the first expiry: only renewals keep the lease alive
        with pytest.raises(RunStateError, match=r"in use by another ylink run"):
            Lease(layout).acquire(print)
        holder.check()

        fs.pipe_file(key, _foreign_lease(time.time() + 3600))  # someone took it (a clock far off, say)
        deadline = time.monotonic() + 60
        while holder.lost is None and time.monotonic() < deadline:
            time.sleep(0.2)
        with pytest.raises(RunStateError, match="lost its lease on s3://runs/renewed .*nothing was published"):
            holder.check()
    finally:
        holder.release()
    assert fs.exists(key)  # a lease that is not ours is never deleted


def test_a_lease_on_a_store_without_conditional_writes_is_read_again_before_each_irreversible_step():
    """memory:// has no conditional write, like many object stores: two runs can each write their
    lease and read it back before the other writes. The one whose lease was overwritten went on
    believing it held the folder until its next renewal (15 s), through --fresh's removal of the old
    run and the manifest write; it must find out at its next irreversible step."""
    layout = RunLayout.for_url("memory://no-conditions/run", {})
    first = Lease(layout)
    first.acquire(print)
    try:
        first.check()  # its own lease, read back: held
        layout.fs.pipe_file(layout.lock, _foreign_lease(time.time() + 3600))  # the other run wrote last
        with pytest.raises(RunStateError, match=r"lost its lease on memory://no-conditions/run \(taken over by "
                                                r"host other-host, pid 4242, since "):
            first.check()
    finally:
        first.release()
    assert Holder.parse(layout.fs.cat_file(layout.lock)).host == "other-host"  # and leaves it alone
