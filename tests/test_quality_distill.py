"""The quality-distillation flow (issue 24.2): pipelines/quality-distill.yaml as shipped, run against
tests/llmserver.py, whose judge scores a document by a rule on its text (`edu_score`: the number of
educational terms it holds, at most 5), so that a classifier can learn it. A corpus of real
Reuters and THUCNews articles; the judge reads a seeded sample; `quality_train` distils its scores;
the classifier then scores the whole corpus, and must agree with the judge on the documents the
judge never read far above chance."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.llmserver import LLMServer, edu_score
from tests.test_judge_edu import reuters, thucnews
from ylink_data import run
from ylink_data.flow import load_flow, run_flow
from ylink_data.engine.stats import check_invariant
from ylink_data.text.quality import QualityModel
from ylink_data.text.quality.train import roc_auc, spearman
from ylink_data.train.quality import train_from_run

from .conftest import REPO, SHARED_DATA

FLOW = REPO / "pipelines" / "quality-distill.yaml"
SAMPLE = 500


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, ray_session) -> Path:
    """A finished run of 1,000 Reuters and 250 THUCNews articles (read through `normalize`)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"research-only data not found at {SHARED_DATA} (CI always has ../shared/data)")
    shared_data = SHARED_DATA
    root = tmp_path_factory.mktemp("corpus")
    docs = reuters(shared_data, 1000) + thucnews(shared_data, 250)
    data = root / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs), encoding="utf-8")
    run({"input": {"paths": [str(data)], "format": "jsonl"}, "output": {"path": str(root / "run")},
         "stages": [{"normalize": {}}]}, progress=False)
    return root / "run"


def _rows(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.rglob("data/*.parquet")) for r in pq.read_table(f).to_pylist()]


def _flow_overrides(corpus: Path, out: Path, autotune_seconds: float = 20) -> list[str]:
    return [f"steps.0.run.input.paths=[{corpus}]", f"steps.0.run.input.sample={SAMPLE}",
            f"steps.0.run.output.path={out / 'annotations'}", "steps.0.run.llm.backoff_s=0.01",
            f"steps.1.quality_train.from={out / 'annotations'}",
            f"steps.1.quality_train.output={out / 'edu.bin'}",
            f"steps.1.quality_train.autotune_seconds={autotune_seconds}",
            f"steps.2.run.input.paths=[{corpus}]", f"steps.2.run.output.path={out / 'scored'}",
            f"steps.2.run.stages.0.quality_classifier.model={out / 'edu.bin'}"]


def test_the_shipped_flow_distils_the_judge_into_a_classifier(corpus, tmp_path, monkeypatch):
    out = tmp_path / "flow"
    with LLMServer() as server:
        monkeypatch.setenv("YLINK_LLM_BASE_URL", server.base_url)
        # Documents about wheat get no answer, ever: quarantined with the error, never scored or lost.
        server.fail("500", times=10_000, match="wheat")
        written = run_flow(load_flow(str(FLOW), _flow_overrides(corpus, out)), progress=False, say=lambda _m: None)
        asked = server.requests
        # Run again: every step is done; the judge is not asked again.
        run_flow(load_flow(str(FLOW), _flow_overrides(corpus, out)), progress=False, say=lambda _m: None)
        assert server.requests == asked
    assert written == [str(out / "annotations"), str(out / "edu.bin"), str(out / "scored")]

    # 1. The sample: SAMPLE documents of the corpus, each scored by the judge's rule or quarantined.
    annotated = _rows(out / "annotations")
    stats = json.loads((out / "annotations" / "stats.json").read_text())
    assert check_invariant(stats) is None
    quarantine = [json.loads(line) for f in (out / "annotations" / "quarantine").glob("*.jsonl")
                  for line in f.read_text().splitlines()]
    corpus_texts = {r["text"] for r in _rows(corpus)}
    assert quarantine and all(q["stage"] == "judge" and "HTTP 500" in q["error"] for q in quarantine)
    assert not any("wheat" in r["text"] for r in annotated)
    assert len(annotated) + len(quarantine) == SAMPLE
    assert all(r["text"] in corpus_texts for r in annotated)
    assert all(r["judge_score"] == edu_score(r["text"]) for r in annotated)
    assert {0, 5} <= {int(r["judge_score"]) for r in annotated}

    # 2. The classifier's metrics: its choice, and agreement with the held-out annotations.
    metrics = json.loads((out / "edu.metrics.json").read_text())
    assert metrics["kind"] == "binary" and metrics["params"]["threshold"] == 3
    assert metrics["autotune"]["trials"] and metrics["autotune"]["params"]
    held = metrics["heldout"]
    assert held["annotations"] >= 0.15 * len(annotated)
    # ~100 held-out annotations, so these vary with the sample, which varies with the corpus's
    # temporary path (the ids name it). Over 14 samples (sample_seed 0-13): AUC 0.62-0.76 (mean
    # 0.70, sd 0.04), Spearman 0.33-0.45 (0.39, 0.04), F1 0.49-0.71 (0.62, 0.07); once in CI AUC
    # 0.636. Each bound is about 4 sd below the mean and above chance (AUC 0.5 and Spearman 0, sd
    # ~0.06 and ~0.1 at this size). The sharp test of agreement is on the 750 unseen documents below.
    assert held["spearman"] > 0.2 and held["f1"] > 0.4 and held["roc_auc"] > 0.55

    # 3. The whole corpus scored and tiered; on the documents the judge never read, the classifier
    # agrees with it far above chance (AUC 0.5, Spearman 0).
    scored = [r for f in sorted((out / "scored").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert len(scored) == len(_rows(corpus))  # kept in a tier, or rejected below them: each with its score
    unseen = [r for r in scored if r["text"] not in {a["text"] for a in annotated}]
    assert len(unseen) > 500
    truth = np.array([edu_score(r["text"]) for r in unseen])
    scores = np.array([r["edu_score"] for r in unseen])
    auc, rho = roc_auc(truth >= 3, scores), spearman(scores, truth)
    print(f"unseen documents: ROC AUC {auc:.3f}, Spearman {rho:.3f}")
    # chance: 0.5 (sd ~0.02 on 750 documents) and 0. Over the 14 samples above: AUC 0.69-0.78 (mean
    # 0.73, sd 0.025), Spearman 0.33-0.50 (0.42, 0.045); the bounds are about 4 sd below the means.
    assert auc > 0.62 and rho > 0.25
    # Each document in the tier its score gives. Which documents the judge read depends on their
    # ids, and so on the corpus's temporary path: whether any reaches the high tier varies (in CI
    # once none did), so the test asks for both sides of the tiers' lower bound, and the rule.
    bounds = {"high": (0.8, 1.0), "mid": (0.5, 0.8), None: (0.0, 0.5)}
    assert all(bounds[r["edu_tier"]][0] <= r["edu_score"] <= bounds[r["edu_tier"]][1] for r in scored)
    assert {"mid", None} <= {r["edu_tier"] for r in scored}
    scored_stats = json.loads((out / "scored" / "stats.json").read_text())
    assert check_invariant(scored_stats) is None


def test_a_graded_model_predicts_the_expected_score(corpus, tmp_path, ray_session):
    """Without a threshold, one class per score: the model's score is the expected judge score, 0-5."""
    with LLMServer() as server:
        run({"input": {"paths": [str(corpus)], "sample": SAMPLE, "sample_seed": 3},
             "llm": {"base_url": server.base_url, "model": "judge", "backoff_s": 0.01},
             "output": {"path": str(tmp_path / "annotations")},
             "stages": [{"judge": {"rubric": "edu"}}]}, progress=False)
    result = train_from_run(str(tmp_path / "annotations"), str(tmp_path / "graded.bin"), autotune_seconds=30,
                            test_fraction=0.2)
    assert result["kind"] == "graded"
    assert result["labels"]["classes"] == [f"__label__{k}" for k in range(6)]
    # ~100 held-out annotations, chance 0 (sd ~0.1); 0.12 with the fixed defaults: six classes need the search
    assert result["heldout"]["spearman"] > 0.3
    model = QualityModel.load(str(tmp_path / "graded.bin"))
    assert model.grades is not None and model.scale == (0.0, 5.0)
    texts = [r["text"] for r in _rows(corpus)][:400]
    scores = model.scores(texts)
    assert scores.min() >= 0 and scores.max() <= 5 and scores.std() > 0.3
    assert spearman(scores, np.array([edu_score(t) for t in texts])) > 0.3
    # quality_classifier thresholds live on the model's scale: 3 is valid here, 6 is not.
    from ylink_data.core.errors import InputError
    from ylink_data.ops import build_op

    op = build_op("quality_classifier", {"model": str(tmp_path / "graded.bin"), "min_score": 3})
    op.setup()
    with pytest.raises(InputError, match=r"min_score: 6 is outside .*0-5"):
        build_op("quality_classifier", {"model": str(tmp_path / "graded.bin"), "min_score": 6}).setup()


def test_quality_train_from_a_run_on_the_command_line(corpus, tmp_path):
    """`ylink quality train --from RUN --label-column COLUMN`: one-line errors that say the fix."""
    ylink = [sys.executable, "-m", "ylink_data.cli"]
    r = subprocess.run(ylink + ["quality", "train", "--from", str(corpus), "--label-column", "judge_score",
                                "--threshold", "3", "--output", str(tmp_path / "m.bin")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "no 'judge_score' column" in r.stderr and "--label-column" in r.stderr
    r = subprocess.run(ylink + ["quality", "train", "--from", str(corpus), "--positive", "x", "--output", "m.bin"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "leave out --positive" in r.stderr
    r = subprocess.run(ylink + ["validate", str(FLOW), "--set", "steps.1.quality_train.treshold=3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "steps[1].quality_train.treshold" in r.stderr
    r = subprocess.run(ylink + ["validate", str(FLOW)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "steps[0].run.input.paths[0]: 'out/quickstart' does not exist" in r.stderr
    sets = [f"--set={kv}" for kv in _flow_overrides(corpus, tmp_path)]
    r = subprocess.run(ylink + ["validate", str(FLOW), *sets], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "a flow of 3 steps" in r.stdout, r.stderr
    from ylink_data.core.errors import ConfigError

    with pytest.raises(ConfigError, match="this is a flow"):  # the one-pipeline API says what to use
        run(str(FLOW))
