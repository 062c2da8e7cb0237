"""Benchmark: the quality-distillation flow (pipelines/quality-distill.yaml, as shipped) end to end
against the test model server (tests/llmserver.py), on real documents: what the judge's
annotations cost (requests, tokens, seconds: stats.json's `llm_*` counters), how well the distilled
classifier agrees with the judge on documents it never read, and how fast it scores the corpus.

    .venv/bin/python bench/bench_quality_distill.py [--english 4000] [--chinese 1000] [--sample 2000]
        [--latency 0.0]

The test server's judge scores a document by a rule on its text (`edu_score` in tests/llmserver.py:
how many educational terms it holds, at most 5), answering at once (or after `--latency` seconds, to
see how concurrency hides a slow server); its token counts are a quarter of the characters (a real
server's tokenizer counts Chinese denser). What a real judge costs follows from the counters: the
requests and tokens per document are the same; the seconds are the server's.

Corpus: Reuters-21578 articles of 500 to 3,000 characters and THUCNews articles (../shared/data,
research-only: read in place), in a run made by a `normalize` pipeline.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.llmserver import LLMServer, edu_score  # noqa: E402
from tests.test_judge_edu import reuters, thucnews  # noqa: E402
from ylink_data import run  # noqa: E402
from ylink_data.flow import load_flow, run_flow  # noqa: E402
from ylink_data.text.quality.train import roc_auc, spearman  # noqa: E402

SHARED = REPO.parent / "shared" / "data"


def rows(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.rglob("*.parquet")) if "_work" not in f.parts
            for r in pq.read_table(f).to_pylist()]


def stage_counters(stats: dict, name: str) -> dict:
    for stage in stats["stages"]:
        if stage["name"] == name:
            return stage.get("counters", {})
    return {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--english", type=int, default=4000)
    ap.add_argument("--chinese", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds the test server waits before each answer")
    ap.add_argument("--autotune-seconds", type=float, default=300)
    args = ap.parse_args()
    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="ylink-distill-") as tmp:
        root = Path(tmp)
        docs = reuters(SHARED, args.english) + thucnews(SHARED, args.chinese)
        (root / "docs.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs),
                                         encoding="utf-8")
        run({"input": {"paths": [str(root / "docs.jsonl")], "format": "jsonl"}, "output": {"path": str(root / "corpus")},
             "stages": [{"normalize": {}}]}, progress=False)
        out = root / "flow"
        overrides = [f"steps.0.run.input.paths=[{root / 'corpus'}]", f"steps.0.run.input.sample={args.sample}",
                     f"steps.0.run.output.path={out / 'annotations'}",
                     f"steps.1.quality_train.from={out / 'annotations'}", f"steps.1.quality_train.output={out / 'edu.bin'}",
                     f"steps.1.quality_train.autotune_seconds={args.autotune_seconds}",
                     f"steps.2.run.input.paths=[{root / 'corpus'}]", f"steps.2.run.output.path={out / 'scored'}",
                     f"steps.2.run.stages.0.quality_classifier.model={out / 'edu.bin'}"]
        seconds: list[float] = []
        marks = [time.perf_counter()]

        def say(message: str) -> None:
            if " done in " in message:
                marks.append(time.perf_counter())
                seconds.append(marks[-1] - marks[-2])

        with LLMServer(latency=args.latency) as server:
            os.environ["YLINK_LLM_BASE_URL"] = server.base_url
            run_flow(load_flow(str(REPO / "pipelines" / "quality-distill.yaml"), overrides), progress=False, say=say)
        annotated = rows(out / "annotations" / "data")
        counters = stage_counters(json.loads((out / "annotations" / "stats.json").read_text()), "judge")
        metrics = json.loads((out / "edu.metrics.json").read_text())
        seen = {r["text"] for r in annotated}
        scored = [r for r in rows(out / "scored") if r.get("edu_score") is not None]
        unseen = [r for r in scored if r["text"] not in seen]
        truth = np.array([edu_score(r["text"]) for r in unseen])
        scores = np.array([r["edu_score"] for r in unseen])
        n = len(annotated)
        print(f"\ncorpus {len(docs):,} documents ({args.english:,} English, {args.chinese:,} Chinese); judge sample "
              f"{args.sample:,}; test server latency {args.latency:g} s\n")
        print("| step | seconds | what |\n| --- | ---: | --- |")
        print(f"| 1. annotate | {seconds[0]:.1f} | {n:,} scored; {counters.get('llm_requests', 0):,} requests, "
              f"{counters.get('llm_prompt_tokens', 0):,} prompt + {counters.get('llm_completion_tokens', 0):,} "
              f"completion tokens ({counters.get('llm_prompt_tokens', 0) / max(n, 1):,.0f} + "
              f"{counters.get('llm_completion_tokens', 0) / max(n, 1):,.0f} a document) |")
        tuned = metrics["autotune"]
        held = metrics["heldout"]
        print(f"| 2. quality_train | {seconds[1]:.1f} | {len(tuned.get('trials', []))} candidates, chose "
              f"{json.dumps(tuned.get('params'))}; held out ({held['annotations']} annotations): ROC AUC "
              f"{held['roc_auc']:.3f}, F1 at 3 {held['f1']:.3f}, Spearman {held['spearman']:.3f} |")
        print(f"| 3. apply | {seconds[2]:.1f} | {len(scored):,} documents scored; on the {len(unseen):,} the judge never "
              f"read: ROC AUC {roc_auc(truth >= 3, scores):.3f} (judge >= 3), Spearman {spearman(scores, truth):.3f} |")
        print(f"\njudge scores of the sample: " + ", ".join(
            f"{k}: {sum(1 for r in annotated if int(r['judge_score']) == k)}" for k in range(6)))
        print("stats.json judge counters:", json.dumps(counters, sort_keys=True))


if __name__ == "__main__":
    main()
