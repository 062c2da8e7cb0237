"""Issue 13, point 9: every op parameter has its bounds in the schema, so a value out of range is a
one-line config error before any work. `exact_dedup.rows_per_partition: 0` passed validation and
ended the run in a ZeroDivisionError; `extract.time_limit_s: -1` passed, then quarantined every
document and the run "succeeded" with 0 kept.

The probes are generated from the op registry: every numeric parameter (also inside a mapping, such
as `top_n_grams`' fractions) must have a lower bound, and 0, -1, a value just below its lower bound
and, for fractions, 1.5 (anything past its upper bound) must be refused naming
`stages[0].<op>.<param>`. An op added later without bounds fails here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from ylink_data.engine.config import load_config, validate_config
from ylink_data.core.errors import ConfigError
from ylink_data.ops import REGISTRY, load_ops, params_model

from ..conftest import REPO, SAMPLES

load_ops()


def numeric_probes(schema: dict) -> Iterator[tuple[Callable[[Any], Any], dict]]:
    """(wrap, number schema) for each number a parameter holds: the parameter itself, or a value of a
    mapping; `wrap(v)` is the parameter's value holding v."""
    for option in schema.get("anyOf", [schema]):
        if option.get("type") in ("integer", "number"):
            yield (lambda v: v), option
        elif option.get("type") == "object" and isinstance(option.get("additionalProperties"), dict):
            for _, inner in numeric_probes(option["additionalProperties"]):
                yield (lambda v: {"2": v}), inner  # "2": a valid key for dict[int, ...] and dict[str, ...]


def out_of_range(number: dict) -> list[float]:
    """0, -1 and 1.5 where they are out of range, and the values just past each bound."""
    low = number.get("minimum", number.get("exclusiveMinimum"))
    high = number.get("maximum", number.get("exclusiveMaximum"))
    step = 1 if number["type"] == "integer" else 0.5
    candidates = {0, -1, low - step if "minimum" in number else low}
    if high is not None:
        candidates |= {1.5 if number["type"] == "number" else high + 1, high + step if "maximum" in number else high}
    return sorted(v for v in candidates if not in_range(v, number))


def in_range(value: float, number: dict) -> bool:
    return (value >= number.get("minimum", float("-inf")) and value > number.get("exclusiveMinimum", float("-inf"))
            and value <= number.get("maximum", float("inf")) and value < number.get("exclusiveMaximum", float("inf")))


def numeric_parameters() -> list[tuple[str, str, Callable, dict]]:
    found = []
    for op in sorted(REGISTRY):
        for param, schema in params_model(REGISTRY[op]).model_json_schema()["properties"].items():
            found += [(op, param, wrap, number) for wrap, number in numeric_probes(schema)]
    return found


NUMERIC = numeric_parameters()


def pipeline(stage: dict) -> dict:
    return {"input": {"paths": [str(SAMPLES / "CC-MAIN-2014-35-excerpt.warc.wet")]}, "output": {"path": "out/x"},
            "stages": [stage]}


def test_the_registry_has_numeric_parameters_to_probe():
    ops = {op for op, *_ in NUMERIC}
    assert {"exact_dedup", "extract", "gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality",
            "minhash_dedup", "quality_classifier", "url_filter", "normalize", "badwords"} <= ops


@pytest.mark.parametrize("op, param, wrap, number", NUMERIC,
                         ids=[f"{p[0]}.{p[1]}" for p in NUMERIC])
def test_every_numeric_parameter_refuses_values_out_of_its_bounds(op, param, wrap, number):
    assert "minimum" in number or "exclusiveMinimum" in number, f"{op}.{param} has no lower bound in its signature"
    for value in out_of_range(number):
        with pytest.raises(ConfigError) as err:
            validate_config(pipeline({op: {param: wrap(value)}}))
        assert f"stages[0].{op}.{param}" in str(err.value), (value, str(err.value))


@pytest.mark.parametrize("op, param", [("badwords", "lists"), ("gopher_quality", "stop_words"), ("langid", "languages"),
                                       ("gopher_quality", "zh_stop_words"), ("pii", "types")])
def test_lists_that_cannot_be_empty_are_refused_empty(op, param):
    with pytest.raises(ConfigError, match=rf"stages\[0\]\.{op}\.{param}"):
        validate_config(pipeline({op: {param: []}}))


def presets_and_pipelines() -> list[Path]:
    paths = sorted((REPO / "configs").rglob("*.yaml")) + sorted((REPO / "pipelines").glob("*.yaml"))
    # Kubernetes manifests (configs/cluster/rayjob.yaml) are no ylink config: test_cluster_manifests checks them.
    return [p for p in paths if "apiVersion" not in (yaml.safe_load(p.read_text()) or {})]


@pytest.mark.parametrize("path", presets_and_pipelines(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_preset_and_pipeline_still_validates(path):
    raw = yaml.safe_load(path.read_text())
    if "steps" in raw:  # a flow: every step's pipeline or command
        from ylink_data.flow import load_flow

        # A step that reads another command's output (pipelines/quality-distill.yaml reads the
        # quickstart's out/quickstart) reads a bundled corpus instead: validation checks inputs exist.
        corpus = REPO / "tests" / "data" / "cc_en_head-0174.jsonl.gz"
        overrides = [f"steps.{i}.run.input.paths=[{corpus}]" for i, step in enumerate(raw["steps"])
                     if "run" in step and any(str(p).startswith("out/") for p in step["run"]["input"].get("paths", []))]
        load_flow(str(path), overrides)
    elif "input" in raw:
        load_config(path)
    elif "stages" in raw:  # a stage preset, where a pipeline's stage list includes it
        load_config({**pipeline({}), "stages": [{"include": str(path)}]})
    else:  # a settings preset (cluster, storage), included at the top
        load_config({**pipeline({}), "stages": [], "include": [str(path)]})


@pytest.mark.parametrize("key, value", [("exact_dedup.rows_per_partition", 0), ("extract.time_limit_s", -1)])
def test_ylink_validate_refuses_the_reported_values_in_one_line(tmp_path, key, value):
    op, param = key.split(".")
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(pipeline({op: {param: value}})))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(config)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"stages[0].{key}" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
