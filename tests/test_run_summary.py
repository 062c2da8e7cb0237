"""The lines `ylink run` prints count the same things (issue 42 point 3: the phase line said "106 docs"
and the summary "201 records in" for the same input, a WARC's request and metadata records being
records and not documents). For every bundled input file: the summary's records are stats.json's
input records, and its documents, when fewer, the phase line's docs."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, SAMPLES, TEST_DATA

INPUTS = sorted([*SAMPLES.glob("*.warc*"), *TEST_DATA.glob("*.jsonl.gz"), *(REPO / "samples" / "chat").glob("*.jsonl"),
                 *(REPO / "samples" / "documents").glob("*.*")])


@pytest.mark.parametrize("path", INPUTS, ids=[p.name for p in INPUTS])
def test_phase_line_and_summary_count_the_same_documents(path, tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "p.json"  # a pipeline of no ops: what the reader makes is what is kept
    chat = {"chat": True} if path.parent.name == "chat" else {}  # conversations, not documents of a text field
    cfg.write_text(json.dumps({"name": "count", "input": {"paths": [str(path)], **chat}, "output": {"path": str(out)},
                               "stages": []}))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(cfg), "--no-progress"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads((out / "stats.json").read_text())
    read = stats["stages"][0]
    phase = re.search(r"^phase 0: .*?, ([\d,]+) docs in ", proc.stderr, re.M)
    done = re.search(r"^done: ([\d,]+) records in(?: \(([\d,]+) documents[;)])?", proc.stderr, re.M)
    assert phase and done, proc.stderr
    number = lambda s: int(s.replace(",", ""))  # noqa: E731
    assert number(done.group(1)) == stats["input_records"]
    assert number(phase.group(1)) == read["out"]
    if read["out"] != stats["input_records"]:  # records that are not documents: the summary says how many are
        assert done.group(2) and number(done.group(2)) == read["out"], proc.stderr
    else:
        assert done.group(2) is None
