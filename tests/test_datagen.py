"""pipelines/datagen.yaml end to end against the test server (tests/llmserver.py), as a user runs it:
Self-Instruct from the bundled seeds, filters, dedup, three responses per instruction, a pointwise
judge, best-vs-worst preference pairs, and the three JSONL outputs — checked against the server's
own rules (its responses and `judge_score`), computed here independently; then a rerun that asks
the server nothing (the response cache)."""
from __future__ import annotations

import json

import yaml

from tests.llmserver import LLMServer, judge_score
from ylink_data import run
from ylink_data.engine.stats import check_invariant

from .conftest import REPO

N = 3  # respond.n in pipelines/datagen.yaml


def read_jsonl(folder):
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_datagen_pipeline_end_to_end(ray_session, tmp_path, monkeypatch):
    cfg = yaml.safe_load((REPO / "pipelines" / "datagen.yaml").read_text())
    assert [next(iter(s)) for s in cfg["stages"]][-3:] == ["respond", "judge", "preference_pairs"]
    assert cfg["stages"][-3]["respond"]["n"] == N and cfg["stages"][-1]["preference_pairs"]["min_margin"] == 2
    cfg["stages"][0]["instruct_generate"]["count"] = 20  # a small run: 20 new instructions
    cfg["output"]["path"] = str(tmp_path / "out")
    monkeypatch.chdir(REPO)  # the seed path is relative to the repository
    # Echoes that differ by the response's seed (llm.seed + k), so the judge has a choice.
    with LLMServer(seeded_echo=True, vary_by_seed=True) as server:
        monkeypatch.setenv("YLINK_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("YLINK_LLM_MODEL", "ylink-test")
        result = run(cfg, progress=False)
        stats = result.stats
        assert check_invariant(stats) is None
        stages = {s["name"]: s for s in stats["stages"]}
        generated = stages["instruct_generate"]["created"]
        assert generated >= 20 and stages["instruct_generate"]["dropped"]  # rejected candidates named
        instructions = stages["respond"]["in"]
        assert stages["respond"]["out"] == N * instructions
        asked = server.requests
        assert stages["respond"]["counters"]["llm_requests"] == N * instructions
        assert stages["judge"]["counters"]["llm_requests"] == N * instructions

        out = tmp_path / "out"
        pairs, sft, prompts = read_jsonl(out / "preference"), read_jsonl(out / "sft"), read_jsonl(out / "prompts")
        assert len(pairs) == stats["output_records"] > 0
        for pair in pairs:
            # the server's N responses to this instruction, scored by its judge: best against worst
            responses = [f"echo (seed {k}): {pair['prompt'].splitlines()[-1]}" + "!" * k for k in range(N)]
            scores = [judge_score(r) for r in responses]
            assert pair["chosen"] in responses and pair["rejected"] in responses
            assert judge_score(pair["chosen"]) == max(scores) and judge_score(pair["rejected"]) == min(scores)
            assert max(scores) - min(scores) >= 2
        assert [(s["messages"][0]["content"], s["messages"][1]["content"]) for s in sft] == [
            (p["prompt"], p["chosen"]) for p in pairs]
        assert [p["prompt"] for p in prompts] == [p["prompt"] for p in pairs]
        manifest = json.loads((out / "manifest.json").read_text())
        assert {k: manifest[k]["rows"] for k in ("sft", "preference", "prompts")} == {
            "sft": len(pairs), "preference": len(pairs), "prompts": len(pairs)}

        # A rerun from scratch asks the server nothing: every answer is in OUTPUT/llm-cache/.
        again = run(cfg, fresh=True, progress=False)
        assert server.requests == asked
        assert read_jsonl(out / "preference") == pairs and again.stats["output_records"] == len(pairs)
