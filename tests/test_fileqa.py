"""pipelines/fileqa.yaml on the bundled documents (samples/documents), as a user runs it: without a
model only the pairs the documents hold (the Poetry FAQ's `### ...?` sections), with a model server
(tests/llmserver.py) those pairs kept as they are and grounded pairs written from the chunks of every
other document; the fine-tuning JSONL holds exactly the kept pairs."""
from __future__ import annotations

import json
import re

import pyarrow.parquet as pq

from tests.llmserver import LLMServer, grounded_pairs
from ylink_data import run
from ylink_data.engine.config import load_config
from ylink_data.engine.stats import check_invariant

from .conftest import REPO

PIPELINE = REPO / "pipelines" / "fileqa.yaml"
FAQ = REPO / "samples" / "documents" / "poetry-faq.md"


def faq_questions() -> list[str]:
    """The FAQ's questions, read independently: its Markdown headings that end in '?'."""
    return [m.group(1).strip() for m in re.finditer(r"^#+\s+(.*\?)\s*$", FAQ.read_text(encoding="utf-8"), re.M)]


def rows_and_jsonl(out):
    rows = [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    jsonl = [json.loads(line) for f in sorted((out / "sft").glob("*.jsonl")) for line in f.read_text().splitlines()]
    return rows, jsonl


def test_without_a_model_the_pairs_the_documents_hold(ray_session, tmp_path, monkeypatch):
    monkeypatch.delenv("YLINK_LLM_BASE_URL", raising=False)
    cfg = load_config(PIPELINE, [f"output.path={tmp_path / 'out'}"])
    assert [name for name, _ in cfg.ops] == ["qa_extract", "exact_dedup"]
    monkeypatch.chdir(REPO)  # input paths are relative to the repository, as in `make`-style use
    result = run(PIPELINE, progress=False, **{"output.path": str(tmp_path / "out")})
    rows, jsonl = rows_and_jsonl(tmp_path / "out")
    questions = faq_questions()
    assert len(questions) >= 5 and [r["question"] for r in rows] == questions
    assert all(r["qa_method"] == "heading" and r["answer"] for r in rows)
    assert [j["messages"][0]["content"] for j in jsonl] == questions
    assert [j["messages"][1]["content"] for j in jsonl] == [r["answer"] for r in rows]
    stats = result.stats
    assert check_invariant(stats) is None and stats["input_records"] == 4
    assert next(s for s in stats["stages"] if s["name"] == "qa_extract")["dropped"] == {"qa_extract:none": 3}


def test_with_a_model_faq_pairs_kept_and_the_rest_generated(ray_session, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    with LLMServer() as server:
        monkeypatch.setenv("YLINK_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("YLINK_LLM_MODEL", "ylink-test")
        result = run(PIPELINE, progress=False, **{"output.path": str(tmp_path / "out")})
        rows, jsonl = rows_and_jsonl(tmp_path / "out")
        extracted = [r for r in rows if r["qa_method"] == "heading"]
        generated = [r for r in rows if r["chunk_id"] is not None]
        assert [r["question"] for r in extracted] == faq_questions()
        assert len(extracted) + len(generated) == len(rows)  # every row is a pair: no chunk or document left
        # One request per chunk of the three other documents, none for the FAQ's pairs; each chunk's
        # pairs are the server's own pairs of that chunk, all grounded in it.
        assert server.requests == len({r["chunk_id"] for r in generated}) > 3
        by_chunk: dict[str, list] = {}
        for r in generated:
            by_chunk.setdefault(r["chunk_id"], []).append({"question": r["question"], "answer": r["answer"]})
        for r in generated:
            assert by_chunk[r["chunk_id"]] == grounded_pairs(r["context"], 3)[:len(by_chunk[r["chunk_id"]])]
        assert {r["source"].rsplit("/", 1)[-1] for r in generated} == {"multi_page.pdf", "word_tables.docx",
                                                                       "powerpoint_sample.pptx"}
        pdf = [r for r in generated if r["source"].endswith(".pdf")]
        assert pdf and all(1 <= r["page_start"] <= r["page_end"] <= 5 for r in pdf)  # page ranges carried through
        assert [j["messages"][0]["content"] for j in jsonl] == [r["question"] for r in rows]
        assert check_invariant(result.stats) is None
