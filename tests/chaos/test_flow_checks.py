"""Issue 33, point 11: `ylink validate` on a flow checked no step's inputs. A missing `from`, a typo'd
input, a step reading a later step's output or its own, two steps with one output.path, a model
written inside another step's run folder: all "ok", and `ylink run` spent the (paid) LLM step before
failing. Now what the steps read and write is checked against each other and against what is there
(flow/check.py), by validate and by run before the first step.

The flaws are generated from one good flow (judge a sample of real Common Crawl text, distil the
scores, apply the model, like pipelines/quality-distill.yaml), one mutation per class, typos at
places drawn with a fixed seed. Each flaw must fail both commands with an error naming its key, and
the run must not have sent one request to the model server (tests/llmserver.py)."""
from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Callable

import pytest
import yaml

from tests.llmserver import LLMServer

from ..conftest import TEST_DATA
from .processes import ylink

CORPUS = TEST_DATA / "cc_en_head-0174.jsonl.gz"


def good_flow(root: Path, base_url: str) -> dict:
    return {"name": "distil", "steps": [
        {"run": {"input": {"paths": [str(CORPUS)], "sample": 20},
                 "llm": {"base_url": base_url, "model": "ylink-test", "backoff_s": 0.01},
                 "output": {"path": str(root / "annotations")}, "stages": [{"judge": {"rubric": "edu"}}]}},
        {"quality_train": {"from": str(root / "annotations"), "threshold": 3, "output": str(root / "edu.bin"),
                           "autotune_seconds": 0}},
        {"run": {"input": {"paths": [str(CORPUS)]}, "output": {"path": str(root / "scored")},
                 "stages": [{"quality_classifier": {"model": str(root / "edu.bin")}}]}}]}


def typo(path: str, rng: random.Random) -> str:
    """`path` with one letter of its last part changed (a place drawn by `rng`)."""
    head, _, name = path.rpartition("/")
    at = rng.choice([i for i, c in enumerate(name) if c.isalpha()])
    return f"{head}/{name[:at]}{'x' if name[at] != 'x' else 'y'}{name[at + 1:]}"


def _missing_from(flow, root, rng):
    del flow["steps"][1]["quality_train"]["from"]
    return "steps[1].quality_train.from"


def _typo_input(flow, root, rng):
    flow["steps"][0]["run"]["input"]["paths"] = [typo(str(CORPUS), rng)]
    return "steps[0].run.input.paths[0]"


def _typo_from(flow, root, rng):
    flow["steps"][1]["quality_train"]["from"] = typo(str(root / "annotations"), rng)
    return "steps[1].quality_train.from"


def _reads_a_later_output(flow, root, rng):
    flow["steps"][0], flow["steps"][1] = flow["steps"][1], flow["steps"][0]
    return "steps[0].quality_train.from"


def _reads_its_own_output(flow, root, rng):
    flow["steps"][2]["run"]["input"]["paths"] = [str(root / "scored")]
    return "steps[2].run.input.paths[0]"


def _one_output_twice(flow, root, rng):
    flow["steps"][2]["run"]["output"]["path"] = str(root / "annotations")
    return "steps[2].run.output.path"


def _model_inside_a_run_folder(flow, root, rng):
    inside = str(root / "annotations" / rng.choice(["edu.bin", "models/edu.bin", "data/edu.bin"]))
    flow["steps"][1]["quality_train"]["output"] = inside
    flow["steps"][2]["run"]["stages"][0]["quality_classifier"]["model"] = inside
    return "steps[1].quality_train.output"


FLAWS: dict[str, Callable[[dict, Path, random.Random], str]] = {
    f.__name__.lstrip("_"): f for f in (_missing_from, _typo_input, _typo_from, _reads_a_later_output,
                                        _reads_its_own_output, _one_output_twice, _model_inside_a_run_folder)}


@pytest.fixture(scope="module")
def server():
    with LLMServer() as s:
        yield s


def test_the_good_flow_validates(server, tmp_path):
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump(good_flow(tmp_path / "out", server.base_url)))
    checked = ylink("validate", path)
    assert checked.returncode == 0 and "a flow of 3 steps" in checked.stdout, checked.stderr


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("flaw", sorted(FLAWS))
def test_every_flaw_fails_validate_and_run_before_any_step(server, tmp_path, flaw, seed):
    root = tmp_path / "out"
    flow = copy.deepcopy(good_flow(root, server.base_url))
    key = FLAWS[flaw](flow, root, random.Random(f"{flaw}-{seed}"))
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump(flow))
    server.reset()
    for command in ("validate", "run"):
        proc = ylink(command, path, *(["--no-progress"] if command == "run" else []))
        assert proc.returncode == 2, f"{command}: {proc.stdout}{proc.stderr}"
        assert "Traceback" not in proc.stderr and key in proc.stderr, f"{command}: {proc.stderr}"
    assert server.requests == 0, "the run called the model before it failed"
    assert not root.exists(), "the run wrote before it failed"
