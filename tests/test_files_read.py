"""Files an op reads count by content in real runs (issue 33, points 1 and 14): a model retrained in
place is not "already complete", a benchmark rewritten between a stop and the resume is not resumed
into a mix of both versions, and `ylink validate` names a missing model."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

import ylink_data
from ylink_data.core.errors import RunStateError

from .conftest import REPO, TEST_DATA

MODELS = REPO / "ylink_data" / "assets" / "models"


def _documents(path, shared_data, n=300):
    with gzip.open(shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        lines = [next(f) for _ in range(n)]
    path.write_text("".join(lines))
    return str(path)


def test_model_retrained_in_place_is_not_already_complete(tmp_path):
    model = tmp_path / "model.bin"
    shutil.copyfile(MODELS / "quality-en.bin", model)
    pipeline = {"name": "tiers", "input": {"paths": [str(TEST_DATA / "cc_en_head-0174.jsonl.gz")]},
                "output": {"path": str(tmp_path / "out")},
                "stages": [{"quality_classifier": {"model": str(model), "tiers": {"high": 0.5, "low": 0.0}}}]}
    ylink_data.run(pipeline, progress=False)
    stamp = os.stat(model)
    shutil.copyfile(MODELS / "quality-zh.bin", model)  # "retrained": other bytes at the same path
    os.utime(model, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with pytest.raises(RunStateError, match=r"changed: files read"):
        ylink_data.run(pipeline, progress=False, reuse=False)
    fresh = ylink_data.run(pipeline, progress=False)  # recomputed from the op that reads it: tiers of the new model
    assert json.loads((tmp_path / "out" / "run.json").read_text())["fingerprinted"]["files read"][0][:2] == [
        "stages[0].quality_classifier.model", str(model)]
    assert fresh.stats["output_records"] > 0


def test_benchmark_rewritten_between_stop_and_resume_is_refused(tmp_path, shared_data):
    bench = tmp_path / "bench.jsonl"
    shutil.copyfile(shared_data / "benchmarks" / "gsm8k" / "test.jsonl", bench)
    config = tmp_path / "p.json"  # JSON is YAML
    config.write_text(json.dumps({
        "name": "decon", "input": {"paths": [_documents(tmp_path / "docs.jsonl", shared_data)], "split_bytes": 65536},
        "output": {"path": str(tmp_path / "out")}, "ray": {"execution": "processes"},
        "stages": [{"decontaminate": {"benchmarks": [{"path": str(bench), "fields": ["question"]}],
                                      "cache_dir": str(tmp_path / "idx")}}]}))
    env = {**os.environ, "YLINK_FAIL_AFTER_TASKS": "1"}
    stopped = subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(config), "--no-progress"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 75, stopped.stderr
    lines = bench.read_text().splitlines(keepends=True)
    bench.write_text("".join(lines[len(lines) // 2:] + lines[:len(lines) // 2]))  # same bytes' size, other file
    with pytest.raises(RunStateError, match=r"changed: files read"):
        ylink_data.run(str(config), progress=False, reuse=False)
    # without --no-reuse the tasks of the old benchmark are not resumed: recomputed from the op that reads it
    rerun = subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(config), "--no-progress"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"recomputing from stages[0] decontaminate (benchmarks[0].path {bench} changed)" in rerun.stderr
    assert "reusing" not in rerun.stderr


def test_validate_names_a_missing_model(tmp_path):
    config = tmp_path / "p.json"
    config.write_text(json.dumps({
        "name": "v", "input": {"paths": [str(TEST_DATA / "cc_en_head-0174.jsonl.gz")]},
        "output": {"path": str(tmp_path / "out")},
        "stages": [{"gopher_quality": {}}, {"quality_classifier": {"model": str(tmp_path / "gone.bin")}}]}))
    done = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(config)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert "stages[1].quality_classifier.model" in errors[0] and "gone.bin" in errors[0]


def test_validate_of_a_flow_names_a_missing_model_that_no_step_writes(tmp_path):
    """pipelines/quality-distill.yaml: its last step reads the model its second step writes (fine
    before it exists); pointed at a model that nothing writes, validate names the step's key."""
    flow = str(REPO / "pipelines" / "quality-distill.yaml")
    # Its input is the quickstart's output: a corpus of ours stands for it (flow_check wants it there).
    corpus = str(TEST_DATA / "cc_en_head-0174.jsonl.gz")
    inputs = ["--set", f"steps.0.run.input.paths=[{corpus}]", "--set", f"steps.2.run.input.paths=[{corpus}]"]
    ok = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", flow, *inputs],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    gone = str(tmp_path / "gone.bin")
    bad = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", flow, *inputs,
                          "--set", f"steps.2.run.stages.0.quality_classifier.model={gone}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, bad.stderr
    assert "steps[2].run.stages[0].quality_classifier.model" in lines[0] and gone in lines[0]
