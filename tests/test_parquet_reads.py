"""Every whole-file Parquet read of the package goes through `core/parquet.read_table`, which does not
pre-buffer: `pyarrow.parquet.read_table` over a Python file object pre-buffers through futures that can
outlive the read, and a process that exits while one is alive aborts (exit 134, "terminate called
without an active exception"; issue 42: one run in three of getting-started's snippet did). Checked
on the source, call by call, and on the snippet itself, run several times."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ylink_data

from .conftest import REPO, quickstart_config

PACKAGE = Path(ylink_data.__file__).parent
HELPER = PACKAGE / "core" / "parquet.py"


def _direct_reads(path: Path) -> list[int]:
    """Lines of `path` that call pyarrow.parquet's read_table (as pq.read_table or imported by name)."""
    tree = ast.parse(path.read_text())
    names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "pyarrow.parquet" for alias in node.names if alias.name == "read_table"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "read_table" and isinstance(func.value, ast.Name)
                    and func.value.id == "pq") or (isinstance(func, ast.Name) and func.id in names):
                lines.append(node.lineno)
    return lines


def test_no_module_reads_parquet_with_pre_buffering():
    found = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if p != HELPER and (lines := _direct_reads(p))}
    assert found == {}, "read whole Parquet files with ylink_data.core.parquet.read_table"


def test_reading_a_run_then_exiting_never_aborts(tmp_path):
    """getting-started.md's snippet on a run with rejected/, in fresh interpreters."""
    import ylink_data as y

    out = tmp_path / "run"
    cfg = quickstart_config(out, input__paths=[str(REPO / "samples/crawl/CC-MAIN-2020-34-excerpt.warc.gz")])
    cfg["stages"] = [{"extract": {}}, {"langid": {}}, {"gopher_quality": {}}, {"exact_dedup": {}}]
    y.run(cfg, progress=False)
    code = ("import ylink_data\n"
            f"run = ylink_data.open_run({str(out)!r})\n"
            "run.stats, run.manifest, run.to_pandas(), run.rejected('gopher_quality'), run.rejected(), run.quarantine()\n")
    statuses = [subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode
                for _ in range(8)]
    assert statuses == [0] * 8


def test_leaving_a_loader_with_break_then_exiting_never_aborts(tmp_path):
    """reading-output.md's PyTorch snippet: the first batch, then `break` and exit while the loader's
    decode threads read ahead. Their row-group reads used Arrow's pool, which aborted the interpreter
    at exit (2 of 15 runs); they now read in the decode thread alone (cache/loader.py)."""
    pytest.importorskip("torch")
    import ylink_data as y

    out = tmp_path / "run"
    y.run(quickstart_config(out), progress=False)
    code = ("from torch.utils.data import DataLoader\n"
            "from ylink_data.torch import TextDataset\n"
            f"for batch in DataLoader(TextDataset({str(out)!r}, batch_size=2, shuffle=False), batch_size=None):\n"
            "    break\n")
    statuses = [subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode
                for _ in range(12)]
    assert statuses == [0] * 12
