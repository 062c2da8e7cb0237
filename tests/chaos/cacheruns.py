"""Helpers for the cache's chaos tests: a small real run to damage, the `ylink` command in its own
process (with this checkout's code), and a tiny real disk (tmpfs) to fill."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from fsspec.implementations.local import LocalFileSystem

import ylink_data
from ylink_data.io.parquet import ParquetFileWriter

from ..test_cache_store import _documents

DOCS_PER_SHARD = 50   # documents of 2,000 characters of the bundled crawl: shards of about 100 kB


def write_run(root: Path, shards: int = 3) -> dict:
    """A run folder as ylink writes it (real pages, ylink's Parquet writer, a version-1 manifest);
    returns its manifest."""
    docs = _documents()
    fs, entries = LocalFileSystem(), []
    for i in range(shards):
        chunk = docs[i * DOCS_PER_SHARD:(i + 1) * DOCS_PER_SHARD]
        table = pa.table({"id": [f"{root.name}-{i}-{j}" for j in range(len(chunk))], "text": chunk})
        writer = ParquetFileWriter(fs, str(root / "data" / f"part-{i:05d}.parquet"), compression="none")
        writer.write(table)
        entries.append({**writer.close().to_json(), "path": f"data/part-{i:05d}.parquet"})
    manifest = {"version": 1, "shards": entries}
    write_manifest(root, manifest)
    return manifest


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
