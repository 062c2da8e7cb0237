"""Issue 33, point 15: every stage's books balance, `in + created == out + dropped + quarantined`,
the read stage's too. The read stage counted an unreadable record as quarantined but not as read (a
JSONL with one bad line of 77: in 76, out 76, quarantined 1), and `ylink inspect` showed quarantined
records in its `dropped` column.

The inputs are generated: real files of every input format (the sample crawl, the bundled documents,
real JSONL lines and Parquet rows of them, an HTML page, a text file), each broken one way per run
(cut short, a stretch overwritten with random bytes, emptied, or, for line formats, lines that are not
JSON inserted), the places drawn with a fixed seed. Each run goes through ops that keep, drop,
quarantine and create rows, and every stage's books are checked, as is `ylink inspect`'s table."""
from __future__ import annotations

import gzip
import io
import json
import os
import random
import re
import subprocess
import sys
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ylink_data

from ..conftest import REPO, SAMPLES, TEST_DATA
from .test_readers_everywhere import first_html_page

DOCUMENTS = REPO / "samples" / "documents"


def real_files() -> dict[str, bytes]:
    """One real file of every input format, named with its extension (the reader is chosen by it)."""
    lines = gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines(keepends=True)[:40]
    rows = [json.loads(line) for line in lines]
    parquet = io.BytesIO()
    pq.write_table(pa.table({"text": [r["text"] for r in rows]}), parquet, row_group_size=8)
    return {
        "docs.jsonl": b"".join(lines),
        "docs.jsonl.gz": gzip.compress(b"".join(lines[:20])),
        "rows.parquet": parquet.getvalue(),
        "page.html": first_html_page(),
        "note.txt": rows[0]["text"].encode(),
        "crawl.warc.gz": (SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.gz").read_bytes(),
        "crawl.warc": (SAMPLES / "CC-MAIN-2014-35-excerpt.warc").read_bytes(),
        **{p.name: p.read_bytes() for p in sorted(DOCUMENTS.iterdir()) if p.is_file()},
    }


def cut_short(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(1, max(2, len(data)))]


def overwritten(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data))
    n = rng.randrange(1, 512)
    return data[:start] + rng.randbytes(n) + data[start + n:]


def emptied(data: bytes, rng: random.Random) -> bytes:
    return b""


def bad_lines(data: bytes, rng: random.Random) -> bytes:
    """Lines that are not JSON (or hold a lone surrogate) among the real ones; other files as they are."""
    gz = data[:2] == b"\x1f\x8b"
    lines = (gzip.decompress(data) if gz else data).splitlines(keepends=True)
    if not lines or not lines[0].lstrip().startswith(b"{"):
        return data
    for _ in range(3):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"{not json\n", b'{"text": "\\ud83d"}\n', b"[1, 2]\n"]))
    joined = b"".join(lines)
    return gzip.compress(joined) if gz else joined


BREAKS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "cut_short": cut_short, "overwritten": overwritten, "emptied": emptied, "bad_lines": bad_lines}


def books(stage: dict) -> tuple[int, int]:
    return (stage["in"] + stage.get("created", 0),
            stage["out"] + sum(stage["dropped"].values()) + stage["quarantined"])


@pytest.mark.parametrize("how, seed", [(how, seed) for how in sorted(BREAKS)
                                       for seed in ([0] if how == "emptied" else [0, 1])])
def test_every_stage_balances_its_books_over_broken_inputs(tmp_path, how, seed):
    rng = random.Random(f"{how}-{seed}")
    folder = tmp_path / "in"
    folder.mkdir()
    for name, data in real_files().items():
        (folder / name).write_bytes(BREAKS[how](data, rng))
    out = tmp_path / "run"
    _, stats = ylink_data.run({
        "input": {"paths": [str(folder)], "time_limit_s": 60},
        "output": {"path": str(out)},
        "stages": [{"extract": {}}, {"normalize": {}}, {"gopher_quality": {}}, {"chunk": {"size": 800, "overlap": 0}},
                   {"exact_dedup": {}}]}, progress=False)

    assert stats["quarantined"] > 0, "nothing was broken enough to quarantine"
    read, *ops = stats["stages"]
    assert read["in"] == stats["input_records"]
    for stage in stats["stages"]:
        came, went = books(stage)
        assert came == went, f"{how}/{seed}: stage {stage['name']}: {stage}"
    for before, after in zip(stats["stages"], ops):
        assert after["in"] == before["out"], f"{after['name']} read {after['in']}, {before['name']} gave {before['out']}"
    quarantined = sum(1 for q in (out / "quarantine").glob("*.jsonl") for line in q.read_text().splitlines() if line)
    assert quarantined == stats["quarantined"] == sum(s["quarantined"] for s in stats["stages"])

    # `ylink inspect` shows each term of the books in its own column
    shown = subprocess.run([sys.executable, "-m", "ylink_data.cli", "inspect", str(out), "--limit", "0"],
                           capture_output=True, text=True, cwd=REPO, timeout=120,
                           env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    header = next(line for line in shown.stdout.splitlines() if re.search(r"\bstage\b.*\bin\b.*\bout\b", line))
    created = any(s.get("created") for s in stats["stages"])  # its column shows only where rows were made
    columns = ["stage", "in", "out", "dropped", "quarantined", *(["created"] if created else []), "main"]
    assert re.findall(r"\w+", header)[:len(columns)] == columns, header
    for stage in stats["stages"]:
        numbers = [int(n.replace(",", "")) for n in re.search(
            rf"^│ {stage['name']} +" + " +".join([r"([\d,]+)"] * (len(columns) - 2)), shown.stdout, re.M).groups()]
        assert numbers == [stage["in"], stage["out"], sum(stage["dropped"].values()), stage["quarantined"],
                           *([stage["created"]] if created else [])], (stage, shown.stdout)
