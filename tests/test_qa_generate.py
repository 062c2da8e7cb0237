"""qa_generate in real pipeline runs (real Ray, real Parquet) against tests/llmserver.py: the pairs,
the accounting, the misbehaving server's retries and quarantines, the response cache on a rerun,
and the API key nowhere in the run folder or on the console."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.llmserver import LLMServer, grounded_pairs
from ylink_data import run
from ylink_data.engine.stats import check_invariant
from ylink_data.ops.qa_generate import parse_pairs, Unparseable
from ylink_data.text.transform import grounding

KEY = "ylinktest-0123456789abcdefghij"  # no well-known token shape: masked only as the value read from ${VAR}


def _chunks(shared: Path) -> list[str]:
    """Real chunks: paragraphs of docling's multi_page.md (English, MIT) and THUCNews articles
    (Chinese, Sina news), each long enough for three sentences."""
    md = (shared / "documents/pdf/docling/multi_page.md").read_text(encoding="utf-8")
    english = [p for p in md.split("\n\n") if len(p) > 250 and not p.startswith(("#", "-", "|"))][:4]
    lines = (shared / "zh_thucnews_cnews/cnews.val.txt").read_text(encoding="utf-8").splitlines()
    chinese = [line.split("\t", 1)[1][:400] for line in lines[:3]]
    return english + chinese


def _pipeline(tmp_path: Path, chunks: list[str], server: LLMServer, **llm) -> dict:
    data = tmp_path / "chunks.jsonl"
    data.write_text("".join(json.dumps({"text": c}, ensure_ascii=False) + "\n" for c in chunks), encoding="utf-8")
    return {"input": {"paths": [str(data)], "format": "jsonl"},
            "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
            "llm": {"base_url": server.base_url, "model": "ylink-test", "api_key": "${YLINK_TEST_LLM_KEY}",
                    "backoff_s": 0.01, **llm},
            "stages": [{"qa_generate": {"pairs": 3}}]}


def _rows(out: Path) -> list[dict]:
    return [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((out / "quarantine").glob("*.jsonl")) for line in f.read_text().splitlines()]


def _counters(stats: dict) -> dict:
    return next(s for s in stats["stages"] if s["name"] == "qa_generate").get("counters", {})


def test_pairs_accounting_cache_and_key(ray_session, shared_data, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("YLINK_TEST_LLM_KEY", KEY)
    chunks = _chunks(shared_data)
    with LLMServer(api_key=KEY, latency=0.05) as server:
        cfg = _pipeline(tmp_path, chunks, server, max_concurrency=2)
        run(cfg, progress=False)
        rows = _rows(tmp_path / "out")
        # The server's own pairs for each chunk, in order: every one supported (copied sentences).
        expected = [(c, p) for c in chunks for p in grounded_pairs(c, 3)]
        assert [(r["context"], {"question": r["question"], "answer": r["answer"]}) for r in rows] == expected
        assert all(r["answer_support"] == 1.0 and r["id"] == f"{r['chunk_id']}#{k}"
                   for r in rows for k in [int(r["id"].rsplit("#", 1)[1])])
        assert {r["chunk_id"] for r in rows} == {r["chunk_id"] for r in rows if r["id"].endswith("#0")}
        stats = json.loads((tmp_path / "out/stats.json").read_text())
        assert check_invariant(stats) is None and stats["output_records"] == len(expected)
        counters = _counters(stats)
        assert counters["llm_requests"] == server.requests == len(chunks)
        assert counters["llm_prompt_tokens"] == server.usage_sent["prompt_tokens"] > 0
        assert counters["llm_completion_tokens"] == server.usage_sent["completion_tokens"] > 0
        assert server.max_in_flight <= 2  # one task: max_concurrency bounds the worker
        # The Chinese chunks got the Chinese prompt, the English ones the English prompt.
        prompts = {r.prompt for r in server.log}
        assert sum("问答对" in p for p in prompts) == 3 and sum("question-answer pairs" in p for p in prompts) == 4

        # A rerun from scratch (--fresh) asks nothing again: every answer comes from OUTPUT/llm-cache/.
        again = run(cfg, fresh=True, progress=False)
        assert server.requests == len(chunks)
        assert _counters(again.stats)["llm_cache_hits"] == len(chunks)
        assert "llm_requests" not in _counters(again.stats)
        assert _rows(tmp_path / "out") == rows
    console = capfd.readouterr()
    files = [f for f in (tmp_path / "out").rglob("*") if f.is_file()]
    assert any("llm-cache" in str(f) for f in files) and any(f.name == "run.json" for f in files)
    for f in files:
        assert KEY.encode() not in f.read_bytes(), f
    assert KEY not in console.out and KEY not in console.err
    run_json = json.loads((tmp_path / "out/run.json").read_text())
    assert run_json["config"]["llm"]["api_key"] == "***"


def test_misbehaving_server(ray_session, shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("YLINK_TEST_LLM_KEY", KEY)
    chunks = _chunks(shared_data)
    marks = [c[:30] for c in chunks]  # each chunk's opening, unique to it
    assert all(sum(m in c for c in chunks) == 1 for m in marks)
    marks = [re.escape(m) for m in marks]
    with LLMServer() as server:
        server.fail("429", times=1, match=marks[0], retry_after=1)
        server.fail("500", times=1, match=marks[1])
        server.fail("stall", times=1, match=marks[2], seconds=4)
        server.fail("malformed", times=1, match=marks[3])
        server.fail("500", times=99, match=marks[4])       # never answers: given up after max_retries
        server.fail("unsupported", times=1, match=marks[5])
        server.fail("schema", times=1, match=marks[6])
        result = run(_pipeline(tmp_path, chunks, server, timeout_s=1.5, max_retries=2), progress=False)
    stats = result.stats
    assert check_invariant(stats) is None
    by_chunk = {c: [r for r in _rows(tmp_path / "out") if r["context"] == c] for c in chunks}
    for c in chunks[:3]:  # retried, then answered in full
        assert [(r["question"], r["answer"]) for r in by_chunk[c]] == [(p["question"], p["answer"])
                                                                     for p in grounded_pairs(c, 3)]
    assert [len(by_chunk[c]) for c in chunks[3:]] == [0, 0, 2, 0]  # the made-up pair of chunk 5 dropped
    stage = next(s for s in stats["stages"] if s["name"] == "qa_generate")
    assert stage["dropped"] == {"qa_generate:unsupported": 1}
    rejected = pq.read_table(next((tmp_path / "out/rejected").glob("*.parquet"))).to_pylist()
    assert [r["answer_support"] < 0.5 for r in rejected] == [True]
    counters = stage["counters"]
    # 429, 500 and the stall: one retry each; the dead chunk: max_retries of them.
    assert counters["llm_retries"] == 1 + 1 + 1 + 2 and counters["llm_failed"] == 1
    assert counters["llm_requests"] == server.requests == len(chunks) + 5
    # Retry-After honoured: the 429'd chunk came back no sooner than a second later (backoff_s is 0.01).
    first, second = [r for r in server.log if chunks[0] in r.prompt]
    assert first.status == 429 and second.began - first.ended >= 0.9
    quarantined = {q["id"]: q for q in _quarantine(tmp_path / "out")}
    assert stats["quarantined"] == 3 and len(quarantined) == 3
    errors = sorted(q["error"] for q in quarantined.values())
    assert any('raw answer: \'{"pairs": [{"question": "unterminated\'' in e and "not JSON" in e for e in errors)
    assert any("wrong" not in e and '"questions"' in e and "pairs: Field required" in e for e in errors)
    assert any(e.startswith("HTTP 500") and "gave up after 3 attempts" in e for e in errors)


def test_parse_and_support():
    """The answer parser takes fenced JSON and bare lists, and names what is wrong; the support measure
    tells a copied answer from a made-up one in both scripts."""
    assert [p.answer for p in parse_pairs('```json\n[{"question": "q?", "answer": " a "}]\n```')] == ["a"]
    with pytest.raises(Unparseable, match="pairs.0.answer"):
        parse_pairs('{"pairs": [{"question": "q?"}]}')
    with pytest.raises(Unparseable, match="not JSON"):
        parse_pairs("Sure! Here are your pairs:")
    context = "The typewriter was patented in 1868 by Christopher Latham Sholes. 打字机在1868年获得专利。"
    assert grounding.support("Christopher Latham Sholes patented it in 1868.", context) == 1.0
    assert grounding.support("The moon is made of green cheese.", context) == 0.0
    assert grounding.support("打字机在1868年获得专利", context) == 1.0
    # made-up Chinese: 月亮 由绿 ... share no character pair with the context
    assert grounding.support("月亮由绿色奶酪制成。", context) == 0.0
    assert grounding.support("Yes.", context) == 0.0
