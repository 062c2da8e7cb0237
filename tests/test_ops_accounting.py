"""How the runner accounts for what ops do, run through the real task code (`execute_task`, the
function each Ray task runs) in this process: drops are counted per reason and written to rejected/,
a document whose op raises is quarantined with its id, and the invariant holds per task."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from ylink_data.engine.config import load_config
from ylink_data.engine.runner import Runner
from ylink_data.engine.tasks import TaskSpec, execute_task
from ylink_data.ops import REGISTRY, DocumentFilter, DocumentMapper, op_class, validate_stages
from ylink_data.io.layout import RunLayout

from .conftest import SAMPLES

def _staged(tmp_path, entry: dict) -> str:
    """Where a task's rejected/ or quarantine/ file (its marker's entry) waits for the publish phase."""
    return RunLayout.for_url(str(tmp_path / "out"), {}).staged(0, entry["path"])



class _NoSpam(DocumentFilter):
    """Test op: drops pages that mention casinos; raises on pages without a url."""

    name = "test_no_spam"

    def __init__(self, word: str = "casino"):
        self.word = word

    def filter(self, doc):
        if doc.url is None:
            raise ValueError("no url to judge by")
        return "spam" if self.word in doc.text.lower() else True


@pytest.fixture
def no_spam_op():
    op_class("exact_dedup")  # load the built-in ops first
    REGISTRY[_NoSpam.name] = _NoSpam
    yield _NoSpam
    del REGISTRY[_NoSpam.name]


def test_op_params_come_from_the_constructor(no_spam_op):
    assert validate_stages([{"test_no_spam": {"word": "lottery"}}]) == [("test_no_spam", {"word": "lottery"})]
    assert validate_stages(["test_no_spam"]) == [("test_no_spam", {"word": "casino"})]


def test_drops_and_errors_are_accounted_in_a_task(no_spam_op, tmp_path):
    cfg = load_config({"input": {"paths": [str(SAMPLES / "CC-MAIN-2020-34-excerpt.warc.gz")]},
                       "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
                       "stages": [{"test_no_spam": {"word": "the"}}]})
    plan = Runner(cfg).plan()
    spec = TaskSpec(cfg, plan.phases[0], 0, splits=plan.tasks[0])
    marker = execute_task(spec)

    read, op = marker["stats"]["stages"]["0"], marker["stats"]["stages"]["1"]
    assert op["in"] == read["out"] == 16
    assert op["dropped"] == {"test_no_spam:spam": op["in"] - op["out"] - op["quarantined"]} != {}
    kept = sum(p["rows"] for p in marker["parts"])
    assert kept == op["out"]
    assert marker["stats"]["input_records"] == kept + sum(read["dropped"].values()) + sum(
        op["dropped"].values()) + op["quarantined"] + read["quarantined"]
    rejected = pq.read_table(_staged(tmp_path, marker["rejected"][0]))
    assert set(rejected.column("reason").to_pylist()) == {"test_no_spam:spam"}
    assert all("the" in t.lower() for t in rejected.column("text").to_pylist())
    for part in marker["parts"]:
        assert not any("the" in t.lower() for t in pq.read_table(part["path"]).column("text").to_pylist())
    # This sample has no response without a url, so nothing is quarantined by the op.
    assert op["quarantined"] == 0 and marker["quarantine"] == []


def test_a_document_whose_op_raises_is_quarantined(no_spam_op, tmp_path):
    text = tmp_path / "note.txt"
    text.write_text("Plain text files carry no url, so this op raises on them.\n")
    cfg = load_config({"input": {"paths": [str(text)]}, "output": {"path": str(tmp_path / "out")},
                       "stages": ["test_no_spam"]})
    plan = Runner(cfg).plan()
    spec = TaskSpec(cfg, plan.phases[0], 0, splits=plan.tasks[0])
    marker = execute_task(spec)
    assert marker["stats"]["stages"]["1"]["quarantined"] == 1 and marker["parts"] == []
    entries = [json.loads(line) for line in open(_staged(tmp_path, marker["quarantine"][0]))]
    assert len(entries) == 1
    assert entries[0]["stage"] == "test_no_spam" and entries[0]["file"] == str(text)
    assert entries[0]["error"] == "ValueError: no url to judge by" and len(entries[0]["id"]) == 32


class _Shout(DocumentMapper):
    """Test op: upper-cases text, tags the language; drops empty pages; dawdles on one page."""

    name = "test_shout"

    def __init__(self, slow_word: str = "", time_limit_s: float = 0.5):
        self.slow_word = slow_word
        self.time_limit_s = time_limit_s

    def map(self, doc):
        if self.slow_word and self.slow_word in doc.text:
            while True:  # a pathological document: only the time limit ends this
                pass
        if len(doc.text) < 16000:
            return "short"
        doc.text = doc.text.upper()
        doc.lang, doc.lang_score = "xx", 0.5
        doc.metadata["shouted"] = True
        return doc


@pytest.fixture
def shout_op():
    op_class("exact_dedup")
    REGISTRY[_Shout.name] = _Shout
    yield _Shout
    del REGISTRY[_Shout.name]


def test_a_mapper_changes_documents_and_a_slow_one_is_quarantined_as_timeout(shout_op, tmp_path):
    cfg = load_config({"input": {"paths": [str(SAMPLES / "CC-MAIN-2020-34-excerpt.warc.gz")]},
                       "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
                       "stages": [{"test_shout": {"slow_word": "baidu", "time_limit_s": 0.2}}]})
    plan = Runner(cfg).plan()
    marker = execute_task(TaskSpec(cfg, plan.phases[0], 0, splits=plan.tasks[0]))
    op = marker["stats"]["stages"]["1"]
    entries = [json.loads(line) for line in open(_staged(tmp_path, marker["quarantine"][0]))]
    assert op["quarantined"] == len(entries) >= 1
    assert {e["reason"] for e in entries} == {"timeout"} and op["counters"]["quarantined_timeout"] == len(entries)
    assert all(e["error"] == "timeout: over the 0.2 s time limit" for e in entries)
    kept = pq.read_table(marker["parts"][0]["path"])
    assert kept.num_rows == op["out"] > 0
    assert all(t == t.upper() for t in kept.column("text").to_pylist())
    assert set(kept.column("lang").to_pylist()) == {"xx"}
    assert all(json.loads(m)["shouted"] for m in kept.column("metadata").to_pylist())
    rejected = pq.read_table(_staged(tmp_path, marker["rejected"][0]))
    assert set(rejected.column("reason").to_pylist()) == {"test_shout:short"}
    assert all(len(t) < 16000 for t in rejected.column("text").to_pylist())
