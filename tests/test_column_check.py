"""Issue 33, point 14: a column an op parameter names (`judge.text_column`, `minhash_dedup.column`...)
that no row has was caught only by `run`, mid-way. Walks every registered op: each must declare the
columns it reads and adds (`Op.columns_read`, `Op.columns_added`); a real pipeline of each declared op
plans (as validate and run do, before any task) with its defaults, and is refused, naming the key,
with each of its column parameters misspelt."""
from __future__ import annotations

import pytest

from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError
from ylink_data.engine.runner import Runner
from ylink_data.ops import REGISTRY, load_ops

from .conftest import REPO

load_ops()
TOKENIZER = str(REPO / "samples/chat/tokenizer.json")

# The ops before one that reads what others make, for a pipeline where its defaults are right.
BEFORE = {"instruction_filter": [{"instruct_generate": {"count": 4}}],
          "preference_pairs": [{"instruct_generate": {"count": 4}}, {"respond": {"n": 2}}, {"judge": {"mode": "pairwise"}}]}


def _params(name: str, shared: dict) -> dict:
    """The parameters an op needs to be valid in a pipeline over documents."""
    return {"decontaminate": {"benchmarks": [{"path": shared.get("gsm8k", ""), "fields": ["question"]}]},
            "judge": {"rubric": "edu"}, "instruct_generate": {"count": 4},
            "tokenize": {"tokenizer": TOKENIZER}, "sft_tokenize": {"tokenizer": TOKENIZER}}.get(name, {})


def _pipeline(tmp_path, stages: list) -> dict:
    return {"name": "columns", "input": {"paths": [str(REPO / "samples/crawl/*.warc.gz")]},
            "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},  # never called: planning only
            "output": {"path": str(tmp_path / "out")}, "stages": stages}


def _plan_problems(raw: dict) -> list[str]:
    try:
        Runner(load_config(raw)).plan()
    except ConfigError as exc:
        return exc.problems
    return []


@pytest.fixture
def benchmarks(shared_data) -> dict:
    return {"gsm8k": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl")}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_op_declares_its_columns_and_a_typo_in_each_is_refused(name, tmp_path, benchmarks):
    cls, params = REGISTRY[name], _params(name, benchmarks)
    before = BEFORE.get(name, [])
    raw = _pipeline(tmp_path, [*before, {name: params}])
    checked = load_config(raw).ops[-1][1]
    reads, adds = cls.columns_read(checked), cls.columns_added(checked)
    assert reads is not None and adds is not None, f"{name} declares no columns"
    assert _plan_problems(raw) == []  # its defaults: no false error
    for key, column in reads:
        typo = column[::-1] if column[::-1] != column else column + "x"
        problems = _plan_problems(_pipeline(tmp_path, [*before, {name: {**params, key: typo}}]))
        where = f"stages[{len(before)}].{name}.{key}"
        assert len(problems) == 1 and problems[0].startswith(f"{where}: no column {typo!r}"), problems


def test_a_column_a_later_op_reads_is_found_among_those_an_earlier_op_adds(tmp_path, benchmarks):
    """quality_classifier's score column feeds minhash_dedup's keep: highest_score; spelt the other way
    round, it is refused with the name it meant."""
    classify = {"quality_classifier": {"score_column": "edu_score"}}
    ok = _pipeline(tmp_path, [classify, {"minhash_dedup": {"keep": "highest_score", "score_column": "edu_score"}}])
    assert _plan_problems(ok) == []
    typo = _pipeline(tmp_path, [classify, {"minhash_dedup": {"keep": "highest_score", "score_column": "edu_scroe"}}])
    (problem,) = _plan_problems(typo)
    assert problem.startswith("stages[1].minhash_dedup.score_column: no column 'edu_scroe'")
    assert problem.endswith("did you mean 'edu_score'?") and "\n" not in problem
    # A measure column of an annotating filter is there for the ops after it.
    measured = _pipeline(tmp_path, [{"gopher_repetition": {"annotate": True}},
                                    {"minhash_dedup": {"keep": "highest_score", "score_column": "gopher_dup_line_frac"}}])
    assert _plan_problems(measured) == []
    # Before the op that adds it, the column is not there yet.
    early = _pipeline(tmp_path, [{"minhash_dedup": {"keep": "highest_score"}}, {"quality_classifier": {}}])
    (problem,) = _plan_problems(early)
    assert problem.startswith("stages[0].minhash_dedup.score_column: no column 'quality_score'")


def test_judge_text_column_typo_is_refused_by_validate_before_any_llm_call(tmp_path, benchmarks):
    raw = _pipeline(tmp_path, [{"judge": {"rubric": "edu", "text_column": "txet"}}])
    (problem,) = _plan_problems(raw)
    assert problem.startswith("stages[0].judge.text_column: no column 'txet' at this stage")
    assert problem.endswith("did you mean 'text'?")
