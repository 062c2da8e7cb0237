"""Config validation: every error names its key path and, where one is close, the intended key."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError

from .conftest import QUICKSTART, REPO, SAMPLES


def _base(tmp_path) -> dict:
    return {"input": {"paths": [str(REPO / "samples/crawl/*.warc.gz")]}, "output": {"path": str(tmp_path / "o")}}


def _problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(raw)
    return info.value.problems


def test_quickstart_is_valid():
    cfg = load_config(QUICKSTART)
    assert cfg.name == "quickstart" and cfg.ray.address is None
    assert [name for name, _ in cfg.ops] == ["extract", "normalize", "langid", "url_filter", "gopher_quality",
                                          "exact_dedup", "minhash_dedup", "quality_classifier"]
    assert cfg.ops[2][1] == {"languages": ["en", "zh"], "min_score": 0.5, "prefix_chars": 1000}
    assert cfg.ops[5][1]["collapse_whitespace"] is True  # defaults filled in


def test_unknown_key_names_its_path_and_suggests(tmp_path):
    raw = _base(tmp_path)
    raw["output"]["keep_rejectd"] = True
    assert _problems(raw) == ["output.keep_rejectd: unknown key; did you mean 'keep_rejected'?"]


def test_unknown_top_level_key_and_wrong_type_are_all_reported(tmp_path):
    raw = _base(tmp_path) | {"stagse": []}
    raw["output"]["shard_bytes"] = "big"
    problems = _problems(raw)
    assert "stagse: unknown key; did you mean 'stages'?" in problems
    assert any(p.startswith("output.shard_bytes: Input should be a valid integer") for p in problems)


def test_unknown_op_and_unknown_parameter(tmp_path):
    problems = _problems(_base(tmp_path) | {"stages": [{"exact_dedupe": {}}, {"exact_dedup": {"lowercse": True}}]})
    assert problems[0] == "stages[0]: unknown op 'exact_dedupe'; did you mean 'exact_dedup'?"
    assert problems[1] == "stages[1].exact_dedup.lowercse: unknown parameter; did you mean 'lowercase'?"


def test_wrong_parameter_type_and_bad_stage_shape(tmp_path):
    problems = _problems(_base(tmp_path) | {"stages": [{"exact_dedup": {"lowercase": "sometimes"}}, {"a": {}, "b": {}}, "exact_dedup"]})
    assert problems[0].startswith("stages[0].exact_dedup.lowercase: Input should be a valid boolean")
    assert problems[1].startswith("stages[1]: expected one op as `- op_name: {params}`")
    assert len(problems) == 2  # a bare `- exact_dedup` is an op with default parameters


def test_missing_required_key_and_bad_format(tmp_path):
    problems = _problems({"input": {"paths": ["x"], "format": "warcc"}})
    assert "output: required key is missing" in problems
    assert any(p.startswith("input.format: Input should be 'auto', 'warc'") for p in problems)


def test_set_overrides_by_dotted_path_with_yaml_values(tmp_path):
    cfg = load_config(QUICKSTART, [f"output.path={tmp_path}/x", "ray.address=auto", "input.split_bytes=1000",
                                   "stages.5.exact_dedup.lowercase=true", "output.keep_rejected=false"])
    assert cfg.output.path == f"{tmp_path}/x" and cfg.ray.address == "auto"
    assert cfg.input.split_bytes == 1000 and cfg.ops[5][1]["lowercase"] is True
    assert cfg.output.keep_rejected is False
    with pytest.raises(ConfigError, match=r"--set stages.9: no list item '9'"):
        load_config(QUICKSTART, ["stages.9.exact_dedup.lowercase=true"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(QUICKSTART, ["output.path"])


def test_include_presets_merge_under_the_pipeline(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "storage.yaml").write_text(yaml.safe_dump(
        {"storage": {"s3": {"endpoint_url": "http://127.0.0.1:9", "key": "${YLINK_TEST_KEY}"}},
         "output": {"keep_rejected": True, "shard_bytes": 1000}}))
    pipeline = _base(tmp_path) | {"include": ["configs/storage.yaml"]}
    pipeline["output"]["shard_bytes"] = 2000
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pipeline))
    import os

    os.environ["YLINK_TEST_KEY"] = "from-env"
    cfg = load_config(path)
    assert cfg.output.keep_rejected is True and cfg.output.shard_bytes == 2000  # the pipeline wins
    assert cfg.storage_options("s3://bucket/x") == {"endpoint_url": "http://127.0.0.1:9", "key": "from-env"}
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(_base(tmp_path) | {"include": "configs/nope.yaml"}))
    with pytest.raises(ConfigError, match=r"include\[0\]: preset 'configs/nope.yaml' not found"):
        load_config(tmp_path / "q.yaml")


def test_yaml_is_data_not_code(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("input: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path)


def test_validate_command_reports_one_line_per_problem(tmp_path):
    raw = _base(tmp_path) | {"stages": [{"exact_dedupp": None}]}
    raw["output"]["keep_rejectd"] = True
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "output.keep_rejectd: unknown key; did you mean 'keep_rejected'?" in proc.stderr
    assert "stages[0]: unknown op 'exact_dedupp'; did you mean 'exact_dedup'?" in proc.stderr
    assert "Traceback" not in proc.stderr
    ok = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(QUICKSTART)], cwd=REPO,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.startswith("ok:")


def test_validate_reports_missing_inputs(tmp_path):
    raw = _base(tmp_path)
    raw["input"]["paths"] = [str(tmp_path / "nothing-here" / "*.warc.gz")]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "input.paths[0]: nothing matches" in lines[0] and "nothing-here" in lines[0]


def test_bundled_presets_are_valid_includes(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    monkeypatch.delenv("S3_ENDPOINT_URL", raising=False)
    pipeline = REPO / "pipelines" / "_preset_check.yaml"
    try:
        pipeline.write_text(yaml.safe_dump(_base(tmp_path) | {
            "include": ["configs/storage/s3.yaml", "configs/cluster/laptop.yaml"]}))
        cfg = load_config(pipeline)  # presets are found relative to the repository from pipelines/
    finally:
        pipeline.unlink()
    assert cfg.ray.num_cpus == 2 and cfg.ray.address is None
    assert cfg.storage_options("s3://b/k") == {"key": "AKIDEXAMPLE", "secret": "not-a-real-secret"}
    assert load_config(QUICKSTART, ["ray.address=auto"]).ray.address == "auto"
    cluster = yaml.safe_load((REPO / "configs/cluster/ray-cluster.yaml").read_text())
    assert cluster == {"ray": {"address": "auto"}}


def test_importing_one_op_module_first_does_not_hide_the_others():
    import subprocess
    import sys

    code = ("import ylink_data.ops.exact_dedup; from ylink_data.ops import validate_stages; "
            "print(sorted(n for n, _ in validate_stages(['exact_dedup', 'langid', 'normalize'])))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['exact_dedup', 'langid', 'normalize']"


def test_when_chooses_stages_by_whether_a_key_is_set(tmp_path, monkeypatch):
    """`- when: {set: llm.base_url, stages: [...], else: [...]}`: the model stages only with a server
    (an unset ${VAR} reads as unset), nested whens, and a typo pointing at the `when`'s key."""
    def config(**when):
        return {"input": {"paths": [str(SAMPLES)]}, "output": {"path": str(tmp_path / "o")},
                "llm": {"base_url": "${YLINK_TEST_WHEN_URL}", "model": "m"},
                "stages": [{"normalize": {}}, {"when": when}, {"exact_dedup": {}}]}

    model = [{"chunk": {}}, {"qa_generate": {}}]
    monkeypatch.delenv("YLINK_TEST_WHEN_URL", raising=False)
    names = lambda cfg: [name for name, _ in load_config(cfg).ops]  # noqa: E731
    assert names(config(set="llm.base_url", stages=model, **{"else": [{"qa_extract": {}}]})) == [
        "normalize", "qa_extract", "exact_dedup"]
    assert names(config(set="llm.base_url", stages=model)) == ["normalize", "exact_dedup"]
    assert names(config(unset="llm.base_url", stages=[{"when": {"unset": "llm.model", "stages": model}},
                                                      {"qa_extract": {}}])) == ["normalize", "qa_extract", "exact_dedup"]
    monkeypatch.setenv("YLINK_TEST_WHEN_URL", "http://127.0.0.1:9/v1")
    assert names(config(set="llm.base_url", stages=model, **{"else": [{"qa_extract": {}}]})) == [
        "normalize", "chunk", "qa_generate", "exact_dedup"]
    with pytest.raises(ConfigError, match=r"stages\[1\]\.when\.stage: unknown key"):
        load_config(config(set="llm.base_url", stage=model))
    with pytest.raises(ConfigError, match=r"stages\[1\]\.when: give one of `set: KEY` or `unset: KEY`"):
        load_config(config(stages=model))
