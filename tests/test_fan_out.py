"""Ops that make several rows of one document (BatchResult.parents, `DocumentSplitter`), run through
the real task code (`execute_task`) on 10 real Common Crawl pages: child ids, inherited fields, drops
and errors per document, and the books (`in + created == out + dropped + quarantined`)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ylink_data.engine.config import load_config
from ylink_data.engine.runner import Runner
from ylink_data.engine.stats import check_invariant
from ylink_data.engine.tasks import TaskSpec, execute_task
from ylink_data.ops import REGISTRY, DocumentSplitter, fan_out, op_class
from ylink_data.io.layout import RunLayout


JSONL = Path(__file__).parent / "data" / "cc_en_head-0174.jsonl.gz"  # 10 real Common Crawl pages (data/SOURCE.md)

def _staged(tmp_path, entry: dict) -> str:
    """Where a task's rejected/ or quarantine/ file (its marker's entry) waits for the publish phase."""
    return RunLayout.for_url(str(tmp_path / "out"), {}).staged(0, entry["path"])



class _Lines(DocumentSplitter):
    """Test op: one row per line of 80+ characters; drops documents without one; raises on a
    document whose text mentions `boom`."""

    name = "test_lines"
    columns = {"line_no": pa.int32()}

    def __init__(self, boom: str = "\x00never"):
        self.boom = boom

    def split(self, doc):
        if self.boom in doc.text:
            raise ValueError("boom")
        return [{"text": line, "line_no": i} for i, line in enumerate(doc.text.split("\n")) if len(line) >= 80] \
            or "no_long_line"


@pytest.fixture
def lines_op(monkeypatch):
    op_class("exact_dedup")  # the built-in ops first, then this one beside them for the test
    monkeypatch.setitem(REGISTRY, _Lines.name, _Lines)


def _texts() -> list[str]:
    """The pages' texts, read without ylink's readers."""
    with gzip.open(JSONL, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def test_rows_made_from_documents_are_accounted(lines_op, tmp_path):
    texts = _texts()
    boom_text = texts[5]  # the one page with a single long line (hand-checked)
    boom = next(x for x in boom_text.split("\n") if len(x) >= 80)[:40]
    cfg = load_config({"input": {"paths": [str(JSONL)]},
                       "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
                       "stages": [{"test_lines": {"boom": boom}}]})
    plan = Runner(cfg).plan()
    marker = execute_task(TaskSpec(cfg, plan.phases[0], 0, splits=plan.tasks[0]))
    read, op = marker["stats"]["stages"]["0"], marker["stats"]["stages"]["1"]

    # Expected from the pages read with json: one row per long line, per page.
    long_lines = [[x for x in t.split("\n") if len(x) >= 80] for t in texts if boom not in t]
    with_lines = [v for v in long_lines if v]
    without = len(long_lines) - len(with_lines)
    assert op["in"] == read["out"] == len(texts) == 10
    assert op["quarantined"] == 1 and without == 1
    assert op["dropped"] == {"test_lines:no_long_line": without}
    assert op["out"] == sum(map(len, with_lines)) == 203 - 1
    assert op["created"] == op["out"] - len(with_lines)
    assert op["in"] + op["created"] == op["out"] + without + op["quarantined"]

    kept = pa.concat_tables([pq.read_table(p["path"]) for p in marker["parts"]])
    assert kept.num_rows == op["out"]
    rows = kept.to_pylist()
    assert [r["text"] for r in rows] == [x for v in with_lines for x in v]
    assert {r["source"] for r in rows} == {str(JSONL)}
    # ids: the parent's id, '#', the row's position among its parent's rows
    parents = [r["id"].split("#")[0] for r in rows]
    assert [int(r["id"].split("#")[1]) for r in rows] == [k for v in with_lines for k in range(len(v))]
    assert [r["line_no"] for r in rows][:2] == [1, 2]  # the first page: "Abstract: ...", "Language: ..." (hand-checked)
    assert len(set(r["id"] for r in rows)) == len(rows)
    assert all(len(p) == 32 for p in parents) and len(set(parents)) == len(with_lines)

    # the dropped documents keep their own ids and rows in rejected/, the error its id in quarantine
    rejected = pq.read_table(_staged(tmp_path, marker["rejected"][0]))
    assert rejected.num_rows == without and set(rejected.column("reason").to_pylist()) == {"test_lines:no_long_line"}
    assert all("#" not in i for i in rejected.column("id").to_pylist())
    assert rejected.column("line_no").null_count == without
    entries = [json.loads(x) for x in open(_staged(tmp_path, marker["quarantine"][0]))]
    assert [e["error"] for e in entries] == ["ValueError: boom"] and "#" not in entries[0]["id"]


def test_fan_out_builds_rows_in_input_order():
    table = pa.table({"id": ["a", "b", "c"], "text": ["x", "y", "z"], "url": ["u1", "u2", "u3"],
                      "metadata": ['{"k": 1}', None, None]})
    out, parents = fan_out(table, [[{"text": "x1"}, {"text": "x2", "metadata": {"k": 2}}], None, [{"text": "z1", "n": 5}]],
                           {"n": pa.int64()})
    assert parents == [0, 0, 1, 2]
    assert out.to_pylist() == [
        {"id": "a#0", "text": "x1", "url": "u1", "metadata": '{"k": 1}', "n": None},
        {"id": "a#1", "text": "x2", "url": "u1", "metadata": '{"k": 2}', "n": None},
        {"id": "b", "text": "y", "url": "u2", "metadata": None, "n": None},
        {"id": "c#0", "text": "z1", "url": "u3", "metadata": None, "n": 5}]
    with pytest.raises(ValueError, match=r"\['nope'\]"):
        fan_out(table, [[{"nope": 1}], None, None], {})


def test_stats_invariant_counts_created_rows():
    stats = {"input_records": 3, "created": 4, "output_records": 6, "quarantined": 0,
             "stages": [{"name": "read", "in": 3, "out": 3, "dropped": {}, "quarantined": 0},
                        {"name": "chunk", "in": 3, "created": 4, "out": 6, "dropped": {"chunk:empty": 1},
                         "quarantined": 0}]}
    assert check_invariant(stats) is None
    assert "accounting gap" in check_invariant({**stats, "created": 3})
    stats["created"] = 3
    stats["stages"][1]["created"] = 3
    stats["output_records"] = stats["stages"][1]["out"] = 5
    assert check_invariant(stats) is None
    stats["stages"][1]["out"] = 6
    assert "stage chunk" in check_invariant(stats)
