"""Flows: a YAML file whose top level is `steps:`, run in order by `ylink run` (and checked by
`ylink validate`), so that work made of pipelines and a training command runs as one.

    name: quality-distill
    steps:
      - run: {input: ..., output: ..., stages: [...]}     # a pipeline, written inline
      - run: other-pipeline.yaml                          # or a file (relative to this one)
        set: {input.sample: 500}                          # with keys set, as --set does
      - quality_train: {from: RUN, label_column: judge_score, threshold: 3, output: MODEL.bin}

A `run` step is a pipeline like any other: it resumes where it stopped and is skipped when its run
is complete, so a flow stopped at any step and run again redoes nothing that is done. A
`quality_train` step is `ylink quality train --from RUN` with the same keys (`from`, `label_column`,
`threshold`, `output`, `autotune_seconds`, `seed`, `lang`, `test_fraction`); it trains again on every
run of the flow (seconds on a few thousand annotations, and the same seed gives the same bytes).
Steps see what earlier steps wrote: every step is validated before the first one runs, and what the
steps read and write is checked against each other and against what is there (flow_check.py): an
input that no earlier step writes must exist, no step reads a later step's output or its own, and
no two steps write one place.
"""
from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from ylink_data.core.overrides import parse_overrides, set_dotted
from ylink_data.core.yaml_file import read_yaml
from ylink_data.engine.config import apply_includes, validate_config
from ylink_data.core.errors import ConfigError
from ylink_data.flow.check import flow_problems
from ylink_data.flow.steps import Flow, QualityTrainStep, Step


def is_flow(raw: Any) -> bool:
    return isinstance(raw, dict) and "steps" in raw


def path_is_flow(path: str) -> bool:
    """Whether the YAML file at `path` is a flow (a pipeline otherwise; errors are the loader's)."""
    try:
        return is_flow(read_yaml(Path(path)))
    except ConfigError:
        return False


def load_flow(path: str, overrides: list[str] | None = None) -> Flow:
    """Read and validate a flow; `overrides` (`--set`) address the flow's own keys
    (`steps.0.run.input.sample=100`). Every problem of every step is reported at once."""
    source = str(path)
    raw = read_yaml(Path(path))
    base_dir = Path(path).resolve().parent
    for key, value in parse_overrides(overrides, source):
        set_dotted(raw, key, value, source)
    extra = sorted(set(raw) - {"name", "steps"})
    problems: list[str] = [f"{k}: not a key of a flow (a flow has name and steps; a pipeline has no steps)"
                           for k in extra]
    if not isinstance(raw.get("steps"), list) or not raw["steps"]:
        raise ConfigError(problems + ["steps: expected a list of steps (run: PIPELINE, quality_train: {...})"], source)
    steps: list[Step] = []
    for i, item in enumerate(raw["steps"]):
        where = f"steps[{i}]"
        kinds = [k for k in ("run", "quality_train") if isinstance(item, dict) and k in item]
        if len(kinds) != 1 or set(item) - {kinds[0], "set"} or ("set" in item and kinds[0] != "run"):
            problems.append(f"{where}: expected one of `run: PIPELINE` (with an optional `set:`) or "
                            f"`quality_train: {{from, output, ...}}`, got {sorted(item) if isinstance(item, dict) else item!r}")
            continue
        try:
            steps.append(_step(kinds[0], item, where, base_dir, source))
        except ConfigError as exc:
            problems += [f"{where}.{p}" if not p.startswith(where) else p for p in exc.problems]
    if not problems:  # the steps' reads and writes against each other and what is there (flow_check)
        problems = flow_problems(steps)
    if problems:
        raise ConfigError(problems, source)
    return Flow(str(raw.get("name") or Path(path).stem), steps, source)


def _step(kind: str, item: dict, where: str, base_dir: Path, source: str | None) -> Step:
    if kind == "quality_train":
        try:
            return Step(kind, where, train=QualityTrainStep.model_validate(item[kind] or {}))
        except ValidationError as exc:
            raise ConfigError([f"quality_train.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()],
                              source) from None
    body = item["run"]
    if isinstance(body, str):
        file = (base_dir / body).resolve()
        pipeline_raw, pipeline_dir = read_yaml(file), file.parent
    elif isinstance(body, dict):
        pipeline_raw, pipeline_dir = copy.deepcopy(body), base_dir
    else:
        raise ConfigError(f"run: expected a pipeline file or a pipeline written inline, got {body!r}", source)
    pipeline_raw = apply_includes(pipeline_raw, pipeline_dir, source, seen=())
    sets = item.get("set") or {}
    if not isinstance(sets, dict):
        raise ConfigError("set: expected a mapping of dotted keys to values", source)
    for key, value in sets.items():
        set_dotted(pipeline_raw, str(key), value, source)
    try:
        return Step(kind, where, pipeline=validate_config(pipeline_raw, source))
    except ConfigError as exc:
        raise ConfigError([f"run.{p}" for p in exc.problems], source) from None


def run_flow(flow: Flow, *, fresh: bool = False, progress: bool | None = None,
             say: Callable[[str], None] = print, reuse: bool = True) -> list[str]:
    """Run the steps in order; returns what each wrote (a run folder or a model file). `fresh`
    starts every pipeline step over (llm-cache/ is kept, so no answer is paid for twice); `reuse=False`
    refuses a step's folder that holds a run of another configuration (`--no-reuse`)."""
    from ylink_data.engine.runner import Runner
    from ylink_data.train.quality import train_from_run

    written: list[str] = []
    for n, step in enumerate(flow.steps, start=1):
        started = time.perf_counter()
        if step.pipeline is not None:
            cfg = step.pipeline
            say(f"{flow.name}: step {n}/{len(flow.steps)}: run {cfg.name} -> {cfg.redact(cfg.output.path)}")
            with cfg.redacting_errors():
                result = Runner(cfg, fresh=fresh, progress=progress, reuse=reuse).run()
            written.append(result.path)
        else:
            t = step.train
            say(f"{flow.name}: step {n}/{len(flow.steps)}: quality_train --from {t.run} -> {t.output}")
            train_from_run(t.run, t.output, label_column=t.label_column, threshold=t.threshold,
                           autotune_seconds=t.autotune_seconds, seed=t.seed, lang=t.lang,
                           test_fraction=t.test_fraction, progress=lambda m: say(f"  {m}"))
            written.append(t.output)
        say(f"{flow.name}: step {n} done in {time.perf_counter() - started:.1f} s")
    return written
