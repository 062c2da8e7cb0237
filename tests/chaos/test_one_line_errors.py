"""Issue 13, point 9 (output folder): expected failures end with one line, never a traceback. A
read-only output folder gave a traceback whose last error was the clean-up's, not the cause; a full
disk gave its one line followed by Ray's "Unhandled error" tracebacks of the other tasks that failed
the same way. Both are made for real: a read-only or tiny tmpfs in a private mount namespace."""
from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
import yaml

from ..conftest import TEST_DATA, quickstart_config
from .processes import in_mount_namespace, needs_mount_namespace, python, ylink, ylink_in_mount_namespace


@pytest.fixture(autouse=True)
def _mounts():
    needs_mount_namespace()


def _one_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Unhandled error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _pipeline(tmp_path, out) -> str:
    path = tmp_path / "pipeline.yaml"
    cfg = quickstart_config(out, input__split_bytes=60_000)
    cfg["stages"] = [{"extract": {}}]
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.parametrize("below", ["", "/new/run"])
def test_a_read_only_output_folder_is_one_line(tmp_path, below):
    mount = tmp_path / "ro"
    mount.mkdir()
    out = f"{mount}{below}"
    line = _one_line(ylink_in_mount_namespace(f"mount -t tmpfs -o ro,size=1m tmpfs {mount}",
                                              "run", _pipeline(tmp_path, out), "--no-progress"))
    assert line.startswith(f"ylink: error: {out} is not writable (Read-only file system)"), line


_ATOMIC_WRITE = """
import os, sys
from fsspec.implementations.local import LocalFileSystem
from ylink_data.core.errors import OutputError
from ylink_data.core.storage import atomic_write
try:
    with atomic_write(LocalFileSystem(), sys.argv[1] + "/shard.bin") as f:
        f.write(b"x" * (1 << 20))
except OutputError as exc:
    print(exc)
print("left:", os.listdir(sys.argv[1]))
"""


@pytest.mark.parametrize("options, expected", [("ro,size=1m", "is not writable (Read-only file system)"),
                                               ("size=64k", "no space left for {folder} (No space left on device)")])
def test_atomic_write_names_the_folder_and_the_cause_not_its_clean_up(tmp_path, options, expected):
    folder = tmp_path / "mnt"
    folder.mkdir()
    proc = in_mount_namespace(f"mount -t tmpfs -o {options} tmpfs {folder}",
                              [sys.executable, "-c", _ATOMIC_WRITE, str(folder)])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert expected.format(folder=folder) in proc.stdout
    assert "left: []" in proc.stdout  # and no temporary file is left behind


def test_a_file_size_limit_is_named_as_no_room_like_a_full_disk(tmp_path):
    """EFBIG (a file past the process's or the file system's largest file) is the cache's "no
    room" already: writing a run's output takes the same one line, not a bare OSError."""
    limited = ("import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))\n" + _ATOMIC_WRITE)
    proc = python(limited, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert f"no space left for {tmp_path} (File too large)" in proc.stdout
    assert "left: []" in proc.stdout


def test_a_full_disk_is_one_line_without_ray_noise(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    line = _one_line(ylink_in_mount_namespace(f"mount -t tmpfs -o size=400k tmpfs {full}",
                                              "run", _pipeline(tmp_path, full / "run"), "--no-progress"))
    assert "No space left on device" in line and "rerun the same command to resume" in line



@pytest.mark.parametrize("execution", ["processes", "ray"])
def test_a_worker_that_dies_under_its_task_is_one_line(tmp_path, execution):
    """A worker process killed under its task (the OOM killer, a crash in C code) ended the run, once
    Ray's retries ran out, with WorkerCrashedError's traceback: only errors a task raised were one
    line. The worker dies for real here (YLINK_TEST_CRASH_TASK: it exits on the spot), every retry;
    worker processes on this machine retry as Ray does and fail with the same line."""
    pipeline = _pipeline(tmp_path, tmp_path / "run")
    proc = ylink("run", pipeline, "--no-progress", "--set", f"ray.execution={execution}", "--set", "ray.num_cpus=2",
                 env={"YLINK_TEST_CRASH_TASK": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ylink:")]  # the rest: Ray's retries
    assert len(errors) == 1 and errors[0] == proc.stderr.strip().splitlines()[-1], proc.stderr
    assert errors[0].startswith("ylink: error: phase 0 task 1 (") and "failed: WorkerCrashedError: " in errors[0]
    assert errors[0].endswith("(finished work is kept: rerun the same command to resume)")

    rerun = ylink("run", pipeline, "--no-progress")
    assert rerun.returncode == 0 and "resuming" in rerun.stderr, rerun.stderr


def test_a_folder_given_as_a_file_is_one_line(tmp_path):
    """`ylink langid FOLDER` printed IsADirectoryError's traceback."""
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "langid", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    line = _one_line(proc)
    assert str(tmp_path) in line and "is a folder" in line


def test_an_os_error_no_command_expected_is_one_line_naming_the_file(tmp_path):
    """An OSError that no command turns into a message of its own (here: the model's folder cannot
    be made under /proc) is one line naming the file, not a traceback."""
    docs = gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt").read().splitlines()
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("\n".join(docs[::2]) + "\n")
    bad.write_text("\n".join(docs[1::2]) + "\n")
    target = "/proc/ylink-no-such-folder/model.bin"
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "quality", "train", "--positive", str(good),
                           "--negative", str(bad), "--output", target], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ylink:")]  # the rest is progress
    assert len(errors) == 1 and errors[0] == proc.stderr.strip().splitlines()[-1], proc.stderr
    assert errors[0].startswith("ylink: error: /proc/ylink-no-such-folder") and "FileNotFoundError" in errors[0]
