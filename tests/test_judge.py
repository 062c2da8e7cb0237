"""judge against tests/llmserver.py (a real OpenAI-compatible server on 127.0.0.1): scores parsed
and validated, unusable answers quarantined with their raw text, min_score, pairwise verdicts kept
only when both orders agree, and the response cache sparing every request on a rerun. Instructions
and responses are real: the Self-Instruct seed tasks and their reference outputs."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tests.llmserver import LLMServer, judge_score
from ylink_data.io.llm.config import LLMConfig
from ylink_data.ops import build_op
from ylink_data.ops.judge import Unparseable, parse_score, parse_winner


def seed_rows(shared: Path, n: int) -> list[dict]:
    lines = (shared / "instruction_seeds/self_instruct/seed_tasks.jsonl").read_text(encoding="utf-8").splitlines()
    tasks = [json.loads(line) for line in lines[:n]]
    return [{"instruction": t["instruction"], "response": t["instances"][0]["output"]} for t in tasks]


def responses_table(groups: list[list[dict]]) -> pa.Table:
    """Rows as `respond` writes them: one per response, the responses of an instruction adjacent."""
    rows = [{"id": f"r{g}-{k}", "text": r["response"], "instruction": r["instruction"], "response": r["response"],
             "instruction_id": f"i{g}", "response_index": k} for g, group in enumerate(groups)
            for k, r in enumerate(group)]
    return pa.Table.from_pylist(rows)


def llm(server: LLMServer, cache_dir: Path | None = None) -> dict:
    return LLMConfig(base_url=server.base_url, model="judge-model", backoff_s=0.01, max_retries=1,
                     cache=cache_dir is not None, cache_dir=str(cache_dir) if cache_dir else None).model_dump()


def test_parse_score_and_winner():
    assert parse_score('{"reason": "fine", "score": 7}') == (7.0, "fine")
    assert parse_score('```json\n{"score": "8/10", "reason": "ok"}\n```') == (8.0, "ok")
    assert parse_score("The answer is correct but terse.\n**Score**: 6") == (6.0, "The answer is correct but terse.")
    assert parse_score("理由：基本正确。\n评分：9") == (9.0, "理由：基本正确。")
    for bad, why in (('{"score": 11}', "outside"), ("Score: 0", "outside"), ("It is good.", "no score"),
                     ('{"score": true}', "not a number"), ('{"score": "high"}', "not a number")):
        with pytest.raises(Unparseable, match=why):
            parse_score(bad)
    # Issue 33, point 10: strict. Before, "3/10" on 0-5 was stored as 3, and the first of several
    # per-criterion lines (1) where the answer's total says 3.
    with pytest.raises(Unparseable, match="not on this scale"):
        parse_score('{"score": "3/10", "reason": "ok"}', 0, 5)
    assert parse_score('{"score": "3/5"}', 0, 5) == (3.0, "")
    assert parse_score("Clarity\nScore: 1\nDepth\nScore: 1\nAccuracy\nScore: 1\nTotal score: 3", 0, 5)[0] == 3.0
    with pytest.raises(Unparseable, match="ambiguous: 3 different scores"):
        parse_score("Score: 1\nScore: 2\nScore: 3", 0, 5)
    with pytest.raises(Unparseable, match="ambiguous"):
        parse_winner("Winner: A\nOn reflection, Winner: B\nWinner: B")
    assert parse_winner('{"winner": "B", "reason": "clearer"}') == ("B", "clearer")
    assert parse_winner("Both are equally good.\nWinner: tie") == ("tie", "Both are equally good.")
    assert parse_winner('{"winner": "[[A]]"}')[0] == "A"
    with pytest.raises(Unparseable, match="none of"):
        parse_winner('{"winner": "C"}')


def test_pointwise_scores_quarantine_min_score_and_cache(shared_data, tmp_path):
    seeds = seed_rows(shared_data, 12)
    planted = dict(seeds[3], response=seeds[3]["response"] + " SCORE=11")  # a judge leaving the scale
    broken = dict(seeds[5], response="Unparseable please: " + seeds[5]["response"])
    rows = [*seeds, planted, broken]
    table = responses_table([[r] for r in rows])
    with LLMServer() as server:
        server.fail("malformed", times=1, match="Unparseable please")
        op = build_op("judge", {"llm": llm(server, tmp_path / "cache"), "min_score": 5})
        result = op.process(table)
        assert server.requests == len(rows)
        scores = result.table.column("judge_score").to_pylist()
        errors = result.errors
        for i, row in enumerate(rows):
            expected = judge_score(row["response"])  # the test judge's rule, from the text alone
            if row is planted:
                assert scores[i] is None and "score 11 is outside 1-10" in errors[i] and '"score": 11' in errors[i]
            elif row is broken:
                assert scores[i] is None and "raw answer: '{\"pairs\": [{\"question\": \"unterminated'" in errors[i]
            else:
                assert scores[i] == expected and errors[i] is None
                assert result.dropped[i] == (None if expected >= 5 else "judge:low_score")
        assert any(d == "judge:low_score" for d in result.dropped) and any(d is None for d in result.dropped)
        counters = result.counters
        assert (counters["scored"], counters["out_of_range"], counters["unparseable"]) == (len(seeds), 1, 1)
        assert counters["llm_requests"] == len(rows)
        assert counters["llm_prompt_tokens"] == server.usage_sent["prompt_tokens"]
        op.teardown()

        # A second judge with the same cache (a resumed or rerun pipeline) asks the server nothing.
        again = build_op("judge", {"llm": llm(server, tmp_path / "cache"), "min_score": 5})
        second = again.process(table)
        assert server.requests == len(rows)
        assert second.table.column("judge_score").to_pylist() == scores
        assert second.counters["llm_cache_hits"] == len(rows)
        again.teardown()


def test_chinese_rows_get_the_chinese_rubric(tmp_path):
    table = responses_table([[{"instruction": "用一句话介绍长城。", "response": "长城是中国古代修建的军事防御工程。"}],
                             [{"instruction": "Name a prime number.", "response": "Seven is a prime number."}]])
    table = table.append_column("lang", pa.array(["zh", "en"]))
    with LLMServer() as server:
        op = build_op("judge", {"llm": llm(server)})
        op.process(table)
        prompts = [r.prompt for r in server.log]
        assert sum("评分标准" in p for p in prompts) == 1 and sum("Rubric:" in p for p in prompts) == 1
        op.teardown()


def test_failed_request_quarantines_the_row(shared_data):
    table = responses_table([[r] for r in seed_rows(shared_data, 3)])
    with LLMServer() as server:
        server.fail("500", times=2)  # max_retries 1: the first request is given up on
        # one request at a time: concurrent requests could share the two 500s and each succeed on retry
        op = build_op("judge", {"llm": {**llm(server), "max_concurrency": 1}})
        result = op.process(table)
        assert sum(e is not None and "HTTP 500" in e for e in result.errors) == 1
        assert result.table.column("judge_score").null_count == 1
        op.teardown()


def test_missing_column_is_one_line(shared_data):
    table = pa.table({"id": ["a"], "text": ["hello"]})
    with LLMServer() as server:
        op = build_op("judge", {"llm": llm(server)})
        with pytest.raises(Exception, match=r"judge: the rows have no 'instruction' column .*respond"):
            op.process(table)
        op.teardown()


def _copeland(responses: list[str]) -> list[int]:
    """Wins per response against the others of its group, by the test judge's scores."""
    scores = [judge_score(r) for r in responses]
    return [sum(s > t for t in scores) for s in scores]


def test_pairwise_both_orders_and_position_bias(shared_data):
    seeds = seed_rows(shared_data, 8)
    # Groups of 1 to 4 real responses to one instruction: the reference output and cut versions of it.
    groups = []
    for g, seed in enumerate(seeds):
        words = seed["response"].split()
        cuts = [" ".join(words[:max(1, len(words) * k // 4)]) for k in range(4, 4 - (g % 4) - 1, -1)]
        groups.append([dict(seed, response=c) for c in dict.fromkeys(cuts)])
    table = responses_table(groups)
    comparisons = sum(len(g) * (len(g) - 1) // 2 for g in groups)
    with LLMServer() as server:
        op = build_op("judge", {"llm": llm(server), "mode": "pairwise"})
        result = op.process(table)
        assert server.requests == 2 * comparisons  # every pair asked in both orders
        expected = [w for g in groups for w in _copeland([r["response"] for r in g])]
        assert result.table.column("judge_score").to_pylist() == expected
        ties = sum(judge_score(a["response"]) == judge_score(b["response"])
                   for g in groups for i, a in enumerate(g) for b in g[i + 1:])
        assert result.counters["pairwise_consistent"] == comparisons - ties
        assert result.counters.get("pairwise_ties", 0) == ties
        op.teardown()

    # A judge that always prefers the response shown first contradicts itself on every swapped pair:
    # no verdict is kept, every response scores 0, and preference_pairs finds nothing to pair.
    with LLMServer(judge_bias="A") as server:
        op = build_op("judge", {"llm": llm(server), "mode": "pairwise"})
        biased = op.process(table)
        assert biased.counters["pairwise_inconsistent"] == comparisons
        assert set(biased.table.column("judge_score").to_pylist()) == {0.0}
        pairs = build_op("preference_pairs", {}).process(biased.table)
        assert set(pairs.dropped) == {"preference_pairs:no_margin"}
        op.teardown()


def test_prompt_file_needs_its_placeholders(tmp_path):
    bad = tmp_path / "rubric.txt"
    bad.write_text("Rate {response} from 1 to 10.", encoding="utf-8")
    with pytest.raises(Exception, match=r"has no \{instruction\} placeholder"):
        build_op("judge", {"prompt": str(bad)})
    good = tmp_path / "good.txt"
    good.write_text("Instruction:\n{instruction}\nAnswer:\n<response>\n{response}\n</response>\nScore: ?", encoding="utf-8")
    assert build_op("judge", {"prompt": str(good)}).templates["zh"].startswith("Instruction:")
