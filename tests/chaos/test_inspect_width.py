"""Point 14: `ylink inspect` output must not depend on the terminal's width or the checkout's path
length. It failed in a fresh clone at a longer path: the document's id (which holds the file's path)
and its URL shared a panel title, which rich cuts to the width, so the URL was lost."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ..conftest import SAMPLES

WARC = SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.gz"


def _deep(tmp_path, name: str):
    """A folder whose path is longer than any terminal is wide."""
    folder = tmp_path.joinpath(*["a-rather-long-folder-name-for-a-checkout"] * 6)
    folder.mkdir(parents=True)
    assert len(str(folder / name)) > 250
    return folder / name


def _inspect(path, columns: int) -> str:
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "inspect", str(path), "--limit", "3"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("columns", [40, 80, 300])
def test_ids_and_urls_of_input_records_are_printed_whole(tmp_path, columns):
    warc = _deep(tmp_path, WARC.name)
    shutil.copy(WARC, warc)
    out = _inspect(warc, columns)
    lines = [line for line in out.splitlines() if line.startswith("#1 ")]
    assert len(lines) == 1, out
    assert lines[0].startswith(f"#1 {warc}@") and lines[0].endswith("https://an.wikipedia.org/wiki/Escopete")


@pytest.mark.parametrize("columns", [40, 300])
def test_ids_and_urls_of_parquet_documents_are_printed_whole(tmp_path, columns):
    shard = _deep(tmp_path, "part-00000.parquet")
    url = "https://zh.wikipedia.org/wiki/" + "%E4%B8%AD%E6%96%87" * 12  # a real-shaped long URL
    pq.write_table(pa.table({"id": ["0123456789abcdef0123456789abcdef"], "text": ["一段中文文本。"],
                             "url": [url], "source": [str(tmp_path)]}), shard)
    out = _inspect(shard, columns)
    assert f"#1 0123456789abcdef0123456789abcdef  {url}" in out.splitlines()
