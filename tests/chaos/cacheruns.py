"""Helpers for the cache's chaos tests: a small real run to damage, the `ylink` command in its own
process (with this checkout's code), and a tiny real disk (tmpfs) to fill."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import ylink_data

from .. import shardruns

DOCS_PER_SHARD = 50   # documents of 2,000 characters of the bundled crawl: shards of about 100 kB


def write_run(root: Path, shards: int = 3) -> dict:
    """A small real run (shards of about 100 kB, ids unique across runs); returns its manifest."""
    return shardruns.write_run(root, shards, DOCS_PER_SHARD, id_prefix=f"{root.name}-")


def write_manifest(root: Path, manifest) -> None:
    (root / "manifest.json").write_text(json.dumps(manifest) if not isinstance(manifest, str) else manifest)


YLINK = [sys.executable, "-m", "ylink_data.cli"]


def ylink_env(**extra: str) -> dict:
    """The environment for `ylink` in its own process: it imports the ylink_data this test imports."""
    here = str(Path(ylink_data.__file__).resolve().parent.parent)
    path = os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, **extra}


def ylink(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """`ylink ARGS` in its own process, to its end."""
    return subprocess.run([*YLINK, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=ylink_env())


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The command's error, checked to be one line (no traceback) and a failure."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.fixture
def small_disk(tmp_path):
    """A real 320 KiB file system (tmpfs), mounted for the test and unmounted after it: room for
    about two shards. Skips where this process may not mount (not root, no CAP_SYS_ADMIN)."""
    def make(size_kib: int = 320) -> Path:
        folder = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here to fill: {done.stderr.strip() or done.returncode}")
        mounted.append(folder)
        return folder

    mounted: list[Path] = []
    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
