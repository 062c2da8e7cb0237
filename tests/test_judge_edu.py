"""judge with a document rubric (`rubric: edu`, FineWeb-Edu's 0-5 educational value) against
tests/llmserver.py: real documents (Reuters-21578 articles, THUCNews articles) scored in a real
pipeline run, each with the rubric of its language; scores outside the scale quarantined; a rubric
of one's own with its own scale; and config errors that name their key. The server's answer is
`edu_score(document)` (its educational terms, at most 5), computed here from the text alone."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.llmserver import LLMServer, edu_score
from ylink_data import run
from ylink_data.engine.config import validate_config
from ylink_data.core.errors import ConfigError
from ylink_data.io.llm.config import LLMConfig
from ylink_data.engine.stats import check_invariant
from ylink_data.ops import build_op

from .conftest import REPO, SAMPLES

EN_RUBRIC, ZH_RUBRIC = "could help teach school pupils", "对中小学教学有多大价值"  # a line of each prompt


def reuters(shared: Path, n: int) -> list[str]:
    """The first `n` Reuters articles of 500 to 3,000 characters (real news, not the few-line
    earnings tables: of the first 40, edu_score gives 0 to 5, mean about 3)."""
    out = []
    with gzip.open(shared / "en_reuters21578_nltk/reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            if 500 <= len(text) <= 3000:
                out.append(text)
                if len(out) == n:
                    return out
    return out


def thucnews(shared: Path, n: int) -> list[str]:
    lines = (shared / "zh_thucnews_cnews/cnews.val.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines[::len(lines) // n][:n]]  # every category (sorted by it)


def llm(server: LLMServer) -> dict:
    return LLMConfig(base_url=server.base_url, model="judge-model", backoff_s=0.01, max_retries=1,
                     cache=False).model_dump()


def _rows(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _jsonl(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_edu_rubric_scores_real_documents_in_their_language(ray_session, shared_data, tmp_path):
    english, chinese = reuters(shared_data, 30), thucnews(shared_data, 12)
    # Two documents a judge answers off the scale for: quarantined, never scored.
    off_scale = [english[0] + "\nSCORE=7", chinese[0] + "\nSCORE=-1"]
    docs = english + chinese + off_scale
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs), encoding="utf-8")
    with LLMServer() as server:
        cfg = {"input": {"paths": [str(data)], "format": "jsonl"},
               "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
               "llm": {"base_url": server.base_url, "model": "ylink-test", "backoff_s": 0.01},
               "stages": [{"judge": {"rubric": "edu", "min_score": 1}}]}
        stats = run(cfg, progress=False).stats
        prompts = [r.prompt for r in server.log]
    assert check_invariant(stats) is None
    expected = {t: edu_score(t) for t in english + chinese}
    # The documents span the scale (so that the test can tell a wrong score from a right one).
    assert set(expected.values()) == {0, 1, 2, 3, 4, 5}
    kept, rejected = _rows(tmp_path / "out/data"), _rows(tmp_path / "out/rejected")
    assert sorted(r["text"] for r in kept + rejected) == sorted(expected)
    for r in kept + rejected:
        assert r["judge_score"] == expected[r["text"]] and r["judge_reason"].endswith("educational terms.")
    assert {r["text"] for r in rejected} == {t for t, s in expected.items() if s < 1}  # min_score 1
    assert all(r["reason"] == "judge:low_score" for r in rejected)

    # Each document was asked once, with the rubric of its language (no `lang` column: its script).
    assert len(prompts) == len(docs)
    for doc in docs:
        asked = [p for p in prompts if f"<document>\n{doc}\n</document>" in p]
        assert len(asked) == 1
        assert (ZH_RUBRIC in asked[0]) == (doc in chinese or doc == off_scale[1])
        assert (EN_RUBRIC in asked[0]) == (doc in english or doc == off_scale[0])

    quarantined = _jsonl(tmp_path / "out/quarantine")
    assert sorted(q["error"].split(";")[0] for q in quarantined) == [
        "unusable answer: score -1 is outside 0-5",
        "unusable answer: score 7 is outside 0-5"]
    assert all("raw answer: '{\"reason\"" in q["error"] for q in quarantined)
    stage = next(s for s in stats["stages"] if s["name"] == "judge")
    assert stats["quarantined"] == 2 and stage["counters"]["out_of_range"] == 2
    assert stage["counters"]["scored"] == len(expected) and stage["counters"]["llm_requests"] == len(docs)


def test_lang_column_chooses_the_rubric_and_failures_quarantine(shared_data):
    english, chinese = reuters(shared_data, 4), thucnews(shared_data, 2)
    docs = english + chinese
    # A `lang` column wins over the script: the first English article is labelled Chinese.
    table = pa.table({"id": [f"d{i}" for i in range(len(docs))], "text": docs,
                      "lang": ["zh", "en", None, None, "zh", None]})
    marks = [re.escape(d[:40]) for d in docs]
    with LLMServer() as server:
        server.fail("schema", times=1, match=marks[1])     # JSON without a score
        server.fail("malformed", times=1, match=marks[2])  # not JSON
        server.fail("500", times=2, match=marks[3])        # max_retries 1: given up on
        op = build_op("judge", {"llm": llm(server), "rubric": "edu"})
        result = op.process(table)
        asked = {d: [r.prompt for r in server.log if f"<document>\n{d}\n</document>" in r.prompt] for d in docs}
        op.teardown()
    assert [len(asked[d]) for d in docs] == [1, 1, 1, 2, 1, 1]  # the failed one: asked again once
    assert [ZH_RUBRIC in asked[d][0] for d in docs] == [True, False, False, False, True, True]
    assert [EN_RUBRIC in asked[d][0] for d in docs] == [False, True, True, True, False, False]
    scores, errors = result.table.column("judge_score").to_pylist(), result.errors
    assert [scores[i] for i in (0, 4, 5)] == [edu_score(docs[i]) for i in (0, 4, 5)]
    assert scores[1:4] == [None] * 3
    assert "no score" in errors[1] and '"grade"' in errors[1]
    assert "unterminated" in errors[2] and errors[3].startswith("HTTP 500")
    assert result.counters["unparseable"] == 2 and result.counters["scored"] == 3


def test_own_document_prompt_with_its_scale(shared_data, tmp_path):
    docs = reuters(shared_data, 20)
    rubric = tmp_path / "rubric.txt"
    rubric.write_text('Rate how technical this news article is, from 0 to 3.\n\n<document>\n{text}\n</document>\n\n'
                      'Answer {"reason": "...", "score": N}.', encoding="utf-8")
    table = pa.table({"id": [f"r{i}" for i in range(len(docs))], "text": docs})
    with LLMServer() as server:
        # No rubric: a prompt with {text} scores documents, here on its own scale.
        op = build_op("judge", {"llm": llm(server), "prompt": str(rubric), "scale": [0, 3], "min_score": 2})
        assert (op.rubric, op.scale) == ("edu", (0.0, 3.0))
        result = op.process(table)
        assert all(r.prompt.startswith("Rate how technical") for r in server.log) and server.requests == len(docs)
        op.teardown()
    expected = [edu_score(d) for d in docs]
    assert {s <= 3 for s in expected} == {True, False}  # some inside 0-3, some above it
    scores = result.table.column("judge_score").to_pylist()
    errors = result.errors or [None] * len(docs)
    for s, got, error, dropped in zip(expected, scores, errors, result.dropped):
        if s <= 3:
            assert got == s and error is None and dropped == (None if s >= 2 else "judge:low_score")
        else:
            assert got is None and f"score {s} is outside 0-3" in error and dropped is None
    assert result.counters["out_of_range"] == sum(s > 3 for s in expected)


def _pipeline(stage: dict) -> dict:
    return {"input": {"paths": [str(SAMPLES / "CC-MAIN-2014-35-excerpt.warc.wet")]}, "output": {"path": "out/x"},
            "llm": {"base_url": "http://127.0.0.1:8000/v1", "model": "m"}, "stages": [{"judge": stage}]}


def test_config_errors_name_their_key(tmp_path):
    neither = tmp_path / "neither.txt"
    neither.write_text("Rate this from 0 to 5.", encoding="utf-8")
    responses = tmp_path / "responses.txt"
    responses.write_text("<instruction>\n{instruction}\n</instruction>\n<response>\n{response}\n</response>",
                         encoding="utf-8")
    documents = tmp_path / "documents.txt"
    documents.write_text("<document>\n{text}\n</document>", encoding="utf-8")
    cases = [
        ({"rubric": "nope"}, r"stages\[0\]\.judge\.rubric: Input should be 'response' or 'edu'"),
        ({"prompt": str(neither)}, r"stages\[0\]\.judge\.prompt: .*neither\.txt has neither \{instruction\} and "
                                   r"\{response\} .* nor \{text\}"),
        ({"rubric": "edu", "prompt": str(neither)}, r"stages\[0\]\.judge\.prompt: .* has no \{text\} placeholder"),
        ({"rubric": "edu", "prompt": str(responses)},
         r"stages\[0\]\.judge\.prompt: .* is a rubric for responses, but rubric: edu scores documents: give a "
         r"prompt with \{text\}"),
        ({"rubric": "response", "prompt": str(documents)},
         r"stages\[0\]\.judge\.prompt: .* is a rubric for documents, .*\{instruction\} and \{response\}"),
        ({"rubric": "edu", "min_score": 7}, r"stages\[0\]\.judge\.min_score: 7 is outside the scale, 0-5 \(rubric edu"),
        ({"min_score": 11}, r"stages\[0\]\.judge\.min_score: 11 is outside the scale, 1-10"),
        ({"prompt": str(documents), "scale": [0, 3], "min_score": 4},
         r"stages\[0\]\.judge\.min_score: 4 is outside the scale, 0-3$"),
        ({"rubric": "edu", "min_score": -1}, r"stages\[0\]\.judge\.min_score: Input should be greater than or equal"),
        ({"scale": [5, 5]}, r"stages\[0\]\.judge\.scale: give \[low, high\] with low under high, not \[5, 5\]"),
        ({"scale": [0]}, r"stages\[0\]\.judge\.scale\[1\]: Field required"),
        ({"mode": "pairwise", "rubric": "edu"}, r"stages\[0\]\.judge\.rubric: edu scores documents one at a time"),
        ({"mode": "pairwise", "scale": [0, 3]}, r"stages\[0\]\.judge\.scale: pairwise mode scores wins"),
    ]
    for stage, message in cases:
        with pytest.raises(ConfigError) as err:
            validate_config(_pipeline(stage))
        assert re.search(message, str(err.value), re.M), (stage, str(err.value))
    # What is fine: the rubric's own scale, a document prompt without `rubric`, pairwise wins above 10.
    for stage in ({"rubric": "edu", "min_score": 3}, {"prompt": str(documents)}, {"min_score": 1},
                  {"rubric": "response", "prompt": str(responses), "scale": [0, 100], "min_score": 50},
                  {"mode": "pairwise", "min_score": 12}):
        validate_config(_pipeline(stage))


def test_ylink_validate_passes_a_pipeline_with_the_edu_rubric(tmp_path):
    config = tmp_path / "annotate.yaml"
    config.write_text(yaml.safe_dump(_pipeline({"rubric": "edu", "min_score": 3, "llm": {"temperature": 0.0}})))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(config)], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    config.write_text(yaml.safe_dump(_pipeline({"rubric": "edu", "min_score": 6})))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(config)], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and "stages[0].judge.min_score: 6 is outside the scale, 0-5" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_judge_reads_the_first_max_chars_of_a_document(ray_session, shared_data, tmp_path):
    """`max_chars` bounds what a document costs: the judge sees its first characters only."""
    docs = [t for t in reuters(shared_data, 200) if edu_score(t[:300]) != edu_score(t)][:5]
    assert docs, "some articles hold educational terms after their first 300 characters"
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs), encoding="utf-8")
    with LLMServer() as server:
        run({"input": {"paths": [str(data)], "format": "jsonl"}, "output": {"path": str(tmp_path / "out")},
             "llm": {"base_url": server.base_url, "model": "ylink-test", "backoff_s": 0.01},
             "stages": [{"judge": {"rubric": "edu", "max_chars": 300}}]}, progress=False)
        assert all(len(r.prompt) < 300 + 3000 for r in server.log)  # the rubric and 300 characters
    assert sorted(r["judge_score"] for r in _rows(tmp_path / "out" / "data")) == sorted(edu_score(t[:300]) for t in docs)
