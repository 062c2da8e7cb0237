"""`ylink inspect` shows documents of a run folder and of raw input files, readably."""
from __future__ import annotations

import subprocess
import sys

import ylink_data

from .conftest import SAMPLES, quickstart_config


def _ylink(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", *args], capture_output=True, text=True,
                          timeout=120, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})


def test_inspect_a_run_folder(ray_session, tmp_path):
    out = tmp_path / "run"
    _, stats = ylink_data.run(quickstart_config(out))
    proc = _ylink("inspect", str(out), "--limit", "3", "--chars", "80")
    assert proc.returncode == 0, proc.stderr
    first = ylink_data.open_run(str(out)).to_arrow().slice(0, 3).to_pylist()
    assert f"{stats['output_records']:,} documents kept of {stats['input_records']:,} input records" in proc.stdout
    for doc in first:
        assert doc["id"] in proc.stdout
    assert proc.stdout.count("chars") == 3


def test_inspect_a_warc_file_and_a_bad_path(tmp_path):
    warc = SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.gz"
    proc = _ylink("inspect", str(warc), "--limit", "5")
    assert proc.returncode == 0, proc.stderr
    assert "an.wikipedia.org/wiki/Escopete" in proc.stdout and "Escopete" in proc.stdout
    missing = _ylink("inspect", str(tmp_path / "nope.warc.gz"))
    assert missing.returncode == 2 and "nope.warc.gz" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
