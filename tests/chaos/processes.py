"""The real `ylink` command in other processes: run to the end, started in the background (its own
process group, so that it can be stopped, continued or killed with its Ray workers), or run inside a
private mount namespace where a folder is a tiny (full) or read-only file system."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Callable

import pytest

from ..conftest import REPO

YLINK = [sys.executable, "-m", "ylink_data.cli"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("YLINK_FAIL_AFTER_TASKS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])  # this checkout's ylink_data
    return env


def ylink(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*YLINK, *map(str, args)], cwd=REPO, env=_env() | (env or {}), capture_output=True,
                          text=True, timeout=timeout)


def python(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -c code args...` with this checkout's ylink_data (and `env` added)."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, env=_env() | (env or {}),
                          capture_output=True, text=True, timeout=timeout)


def start_ylink(*args: str) -> subprocess.Popen:
    return subprocess.Popen([*YLINK, *map(str, args)], cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to the process and every process it started (Ray's raylet and workers)."""
    os.killpg(proc.pid, sig)


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen, what: str, limit_s: float = 180) -> None:
    """Poll until `condition()` holds; fail (with the process's output) if `proc` ends first."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"ylink ended (exit {proc.returncode}) before {what}:\n{err[-3000:]}")
        if time.monotonic() > deadline:
            signal_group(proc, signal.SIGKILL)
            pytest.fail(f"ylink did not get to {what} in {limit_s:.0f} s")
        time.sleep(0.05)


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def needs_mount_namespace() -> None:
    """Skip unless this machine lets us mount a tmpfs in a private mount namespace (root, or user
    namespaces enabled): that is how a full disk and a read-only folder are made for real."""
    probe = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", "mount -t tmpfs none /mnt"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here (unshare: {probe.stderr.strip()[:200]})")


def in_mount_namespace(setup: str, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `argv` after the shell commands `setup` (mounts) in a private mount namespace: the
    mounts vanish with the process, and every process it starts (Ray workers) sees them."""
    script = f"set -e; {setup}; exec {shlex.join(argv)}"
    return subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def ylink_in_mount_namespace(setup: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return in_mount_namespace(setup, [*YLINK, *map(str, args)], timeout=timeout)


def wait_for(condition: Callable[[], bool], what: str, limit_s: float = 120) -> None:
    """Poll until `condition()` holds (a state to wait for, not a time: `limit_s` only keeps a
    regression from hanging the suite)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {limit_s:.0f} s for {what}")
        time.sleep(0.01)
