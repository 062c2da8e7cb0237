"""respond and instruction_filter in real pipeline runs against tests/llmserver.py: n responses per
instruction as rows grouped by `instruction_id`, a rerun from the cache, retried faults, refusals
dropped by name; minhash_dedup on the `instruction` column."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.llmserver import REFUSALS, LLMServer
from ylink_data import run
from ylink_data.engine.stats import check_invariant
from ylink_data.ops.instruction_filter import InstructionFilter

SEEDS = Path(__file__).resolve().parent.parent / "ylink_data" / "assets" / "seeds"


def _read(out: Path, folder: str = "data") -> list[dict]:
    return [r for f in sorted((out / folder).rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _instructions(tmp_path: Path) -> tuple[Path, list[dict]]:
    rows = [json.loads(x) for x in (SEEDS / "self_instruct-en.jsonl").read_text().splitlines()[:6]]
    rows += [json.loads(x) for x in (SEEDS / "self_instruct-zh.jsonl").read_text(encoding="utf-8").splitlines()[:2]]
    rows += [{"instruction": "How do I pick a lock on my neighbour's front door?"}, {"instruction": "怎样撬锁进入别人的房间？"}]
    data = tmp_path / "instructions.jsonl"
    data.write_text("".join(json.dumps({"instruction": r["instruction"]}, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return data, rows


def test_n_responses_refusals_cache_and_faults(ray_session, tmp_path):
    data, given = _instructions(tmp_path)
    with LLMServer(seeded_echo=True) as server:
        server.fail("429", times=2, retry_after=0)
        server.fail("500", times=1)
        cfg = {"input": {"paths": [str(data)], "format": "jsonl", "text_field": "instruction"},
               "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
               "llm": {"base_url": server.base_url, "model": "ylink-test", "backoff_s": 0.01, "seed": 10},
               "stages": [{"respond": {"n": 3, "system": "You are a helpful assistant."}}, {"instruction_filter": {}}]}
        run(cfg, progress=False)
        rows = _read(tmp_path / "out")
        rejected = _read(tmp_path / "out", "rejected")
        assert len(rows) == 8 * 3 and len(rejected) == 2 * 3
        for r in rows:
            k = r["response_index"]
            assert r["id"] == f"{r['instruction_id']}#{k}"
            # The server echoes the user message with the request's seed: llm.seed + k.
            assert r["response"] == f"echo (seed {10 + k}): {r['instruction'].splitlines()[-1]}"
            assert r["text"] == f"{r['instruction']}\n\n{r['response']}"
        groups = {}
        for r in rows:
            groups.setdefault(r["instruction_id"], []).append(r["response_index"])
        assert sorted(groups.values()) == [[0, 1, 2]] * 8
        assert [r["instruction"] for r in rows[::3]] == [g["instruction"] for g in given[:8]]
        assert {r["response"] for r in rejected} == set(REFUSALS.values())
        stats = json.loads((tmp_path / "out/stats.json").read_text())
        assert check_invariant(stats) is None
        filt = next(s for s in stats["stages"] if s["name"] == "instruction_filter")
        assert filt["dropped"] == {"instruction_filter:refusal": 6}
        resp = next(s for s in stats["stages"] if s["name"] == "respond")
        assert resp["counters"]["llm_retries"] == 3 and resp["counters"]["llm_requests"] == 30 + 3
        assert all("You are a helpful assistant." in e.prompt for e in server.log)
        before = server.requests
        run(cfg, fresh=True, progress=False)
        assert server.requests == before and _read(tmp_path / "out") == rows


def test_instruction_filter_rules_on_real_ish_responses():
    op = InstructionFilter()
    instruction = "Explain how vaccines train the immune system."
    assert op.verdict(instruction, "Vaccines show the immune system a harmless piece of a germ...", True) is None
    assert op.verdict(instruction, "As an AI language model, I don\u2019t have opinions, but vaccines...", True) == "refusal"
    assert op.verdict(instruction, "I\u2019m sorry, but I can\u2019t help with that request.", True) == "refusal"
    assert op.verdict("请解释疫苗如何训练免疫系统。", "作为一个AI，我无法给出医疗建议。", True) == "refusal"
    assert op.verdict("请解释疫苗如何训练免疫系统。", "疫苗让免疫系统提前认识病原体的一部分。", True) is None
    assert op.verdict("Explain vaccines.", "Fine.", True) == "too_short"  # 2 words < 4
    assert op.verdict("疫苗？", "……", True) == "too_short"  # 3 characters < 6
    assert op.verdict(" ".join(["word"] * 151), "ok", True) == "too_long"
    assert op.verdict(instruction, "  ", True) == "no_response"
    assert op.verdict(instruction, None, False) is None


def test_minhash_dedup_on_the_instruction_column(ray_session, tmp_path):
    # Three responses to each of five real instructions: minhash_dedup on `instruction` keeps one row
    # per instruction; on `id` (all different) it keeps all. JSONL fields other than the text go to
    # `metadata`, so the rows come from respond, which writes the column.
    seeds = [json.loads(x)["instruction"] for x in (SEEDS / "self_instruct-en.jsonl").read_text().splitlines()]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"text": s}) + "\n" for s in [s for s in seeds if len(s.split()) >= 12][:5]))
    with LLMServer(seeded_echo=True) as server:
        for column, kept in (("instruction", 5), ("id", 15)):
            out = tmp_path / column
            cfg = {"input": {"paths": [str(data)], "format": "jsonl"}, "output": {"path": str(out)},
                   "llm": {"base_url": server.base_url, "model": "ylink-test"},
                   "stages": [{"respond": {"n": 3}}, {"minhash_dedup": {"column": column}}]}
            run(cfg, progress=False)
            assert json.loads((out / "stats.json").read_text())["output_records"] == kept
