"""preference_pairs checked by brute force from the scores, groups split across batches put back
together by the task runner, and the pairs and prompts written as the JSONL TRL reads (loaded with
`datasets` and checked with TRL's own format helpers)."""
from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from tests.llmserver import LLMServer
from tests.test_judge import responses_table, seed_rows
from ylink_data.io.preference import write_preference_jsonl, write_prompts_jsonl
from ylink_data.engine.tasks import whole_groups
from ylink_data.ops import build_op


def judged(shared, seed: int, groups: int = 40) -> pa.Table:
    """Real instructions with 1-4 real responses each (the reference output, cut shorter), and
    scores drawn at random on the judge's 1-10 scale."""
    rng = random.Random(seed)
    rows = []
    for g, s in enumerate(seed_rows(shared, groups)):
        words = s["response"].split()
        rows.append([dict(s, response=" ".join(words[:max(1, len(words) - k)]) + f" ({k})")
                     for k in range(rng.randint(1, 4))])
    table = responses_table(rows)
    return table.append_column("judge_score", pa.array([float(rng.randint(1, 10)) for _ in range(table.num_rows)]))


def brute_force(table: pa.Table, strategy: str, min_margin: float) -> list[tuple[str, str, float]]:
    """(chosen id, rejected id, margin) of every pair, straight from the definition."""
    rows = table.to_pylist()
    out = []
    for _, group in itertools.groupby(rows, key=lambda r: r["instruction_id"]):
        group = list(group)
        if strategy == "all":
            candidates = [(a, b) for a in group for b in group if a is not b]
        else:
            best = max(group, key=lambda r: r["judge_score"])  # max/min keep the first of equals
            worst = min(group, key=lambda r: r["judge_score"])
            candidates = [(best, worst)] if best is not worst else []
        for a, b in candidates:
            margin = a["judge_score"] - b["judge_score"]
            if margin > 0 and margin >= min_margin:
                out.append((a["id"], b["id"], margin))
    return out


@pytest.mark.parametrize("strategy", ["best_vs_worst", "all"])
@pytest.mark.parametrize("min_margin", [0.0, 1.0, 3.0])
def test_pairs_match_brute_force(shared_data, strategy, min_margin):
    table = judged(shared_data, seed=7)
    result = build_op("preference_pairs", {"strategy": strategy, "min_margin": min_margin}).process(table)
    out = result.table.to_pylist()
    kept = [r for r, d in zip(out, result.dropped) if d is None]
    by_id = {r["id"]: r for r in table.to_pylist()}
    got = [(r["id"].rsplit("#", 1)[0], next(i for i, v in by_id.items() if v["response"] == r["rejected"]
                                            and v["instruction_id"] == r["instruction_id"]), r["margin"]) for r in kept]
    assert sorted(got) == sorted(brute_force(table, strategy, min_margin)) and got
    for r in kept:
        assert r["prompt"] == r["instruction"] and r["chosen"] == r["text"] == by_id[r["id"].rsplit("#", 1)[0]]["response"]
        assert r["margin"] == r["chosen_score"] - r["rejected_score"] >= max(min_margin, 1)
    # Every input row is accounted for: a pair row (its chosen response), or dropped with a reason.
    paired = {p[0] for p in brute_force(table, strategy, min_margin)}
    groups_paired = {by_id[c]["instruction_id"] for c in paired}
    for row, parent in zip(out, result.parents):
        source = table.slice(parent, 1).to_pylist()[0]
        reason = result.dropped[out.index(row)]
        if source["id"] in paired:
            assert reason is None
        elif source["instruction_id"] in groups_paired:
            assert reason == "preference_pairs:not_chosen"
        else:
            assert reason == "preference_pairs:no_margin"
    assert result.counters["pairs"] == len(kept) and len(set(result.parents)) == table.num_rows


def test_groups_split_across_batches_are_put_back_together(shared_data):
    table = judged(shared_data, seed=3)
    whole = build_op("preference_pairs", {"strategy": "all"}).process(table)
    for size in (1, 2, 3, 5):  # batches that cut groups of 1-4 rows at every place
        batches = [table.slice(i, size) for i in range(0, table.num_rows, size)]
        regrouped = list(whole_groups(iter(batches), "instruction_id"))
        assert pa.concat_tables(regrouped).equals(table)
        for batch in regrouped:  # no group has rows in two batches
            ids = set(batch.column("instruction_id").to_pylist())
            assert not any(ids & set(b.column("instruction_id").to_pylist()) for b in regrouped if b is not batch)
        op = build_op("preference_pairs", {"strategy": "all"})
        rows = [r for b in regrouped for r in op.process(b).table.to_pylist()]
        assert rows == whole.table.to_pylist()
    # Without regrouping, batches of 2 lose pairs: what the runner's regrouping is for.
    op = build_op("preference_pairs", {"strategy": "all"})
    cut = sum(op.process(table.slice(i, 2)).counters.get("pairs", 0) for i in range(0, table.num_rows, 2))
    assert cut < whole.counters["pairs"]


@pytest.mark.parametrize("fmt", ["standard", "conversational"])
def test_jsonl_in_trl_layout(shared_data, tmp_path, fmt):
    datasets = pytest.importorskip("datasets")
    data_utils = pytest.importorskip("trl.data_utils")
    table = judged(shared_data, seed=5)
    result = build_op("preference_pairs", {}).process(table)
    pairs = result.table.filter(pa.array([d is None for d in result.dropped]))
    fs = fsspec.filesystem("file")
    entry = write_preference_jsonl(fs, str(tmp_path), "preference/part-00000.jsonl", [pairs], fmt)
    prompts = write_prompts_jsonl(fs, str(tmp_path), "prompts/part-00000.jsonl", [table], fmt)
    assert entry["rows"] == pairs.num_rows and prompts["rows"] == len(set(table.column("instruction").to_pylist()))

    loaded = datasets.load_dataset("json", data_files=str(tmp_path / entry["path"]), split="train")
    assert loaded.column_names == ["prompt", "chosen", "rejected"] and len(loaded) == pairs.num_rows
    assert all(data_utils.is_conversational(example) == (fmt == "conversational") for example in loaded)
    for example, row in zip(loaded, pairs.to_pylist()):
        if fmt == "conversational":
            assert example["prompt"] == [{"role": "user", "content": row["instruction"]}]
            assert example["chosen"] == [{"role": "assistant", "content": row["chosen"]}]
            assert example["rejected"] == [{"role": "assistant", "content": row["rejected"]}]
        else:
            assert (example["prompt"], example["chosen"], example["rejected"]) == (
                row["instruction"], row["chosen"], row["rejected"])
    # TRL's own preparation of a conversational preference example joins prompt and answers.
    if fmt == "conversational":
        joined = data_utils.maybe_unpair_preference_dataset(loaded.select(range(2)))
        assert len(joined) == 4 and set(joined.column_names) == {"prompt", "completion", "label"}

    prompt_set = datasets.load_dataset("json", data_files=str(tmp_path / prompts["path"]), split="train")
    assert prompt_set.column_names == ["prompt"]
    assert all(data_utils.is_conversational(e) == (fmt == "conversational") for e in prompt_set)
    lines = (tmp_path / entry["path"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == list(loaded)


def test_datagen_pipeline_validates_without_calling_a_model(monkeypatch, capsys):
    """`ylink validate pipelines/datagen.yaml` checks the whole config, the judge's own `llm:`
    included, and sends no request: the server behind YLINK_LLM_BASE_URL hears nothing."""
    from ylink_data.cli import main
    from ylink_data.ops import op_class

    try:
        op_class("respond"), op_class("instruct_generate")
    except KeyError:
        pytest.skip("needs the DataGen ops of branch gen (instruct_generate, respond)")
    pipeline = str(Path(__file__).resolve().parent.parent / "pipelines" / "datagen.yaml")
    with LLMServer() as server:
        monkeypatch.setenv("YLINK_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("YLINK_LLM_MODEL", "ylink-test")
        assert main(["validate", pipeline]) == 0
        assert server.requests == 0
    monkeypatch.setenv("YLINK_LLM_BASE_URL", "localhost:8000")  # no scheme: the key is named
    assert main(["validate", pipeline]) != 0
    assert "base_url must be an http:// or https:// URL" in capsys.readouterr().err


def test_env_default_in_config(monkeypatch, tmp_path):
    """`${VAR:-default}`: the default when VAR is unset or empty, VAR's value (masked) otherwise."""
    from ylink_data.engine.config import load_config

    cfg = {"input": {"paths": [str(tmp_path)]}, "output": {"path": str(tmp_path / "out")},
           "llm": {"base_url": "${YLINK_TEST_URL:-http://127.0.0.1:9/v1}", "model": "m"}, "stages": []}
    monkeypatch.delenv("YLINK_TEST_URL", raising=False)
    assert load_config(cfg).llm.base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("YLINK_TEST_URL", "http://judge.internal:8000/v1")
    loaded = load_config(cfg)
    assert loaded.llm.base_url == "http://judge.internal:8000/v1"
    assert "judge.internal" not in str(loaded.redact(loaded.model_dump()))
