"""`ylink validate` (and a run's start) warn, one line each, when a text filter would read HTML (no
`extract` before it) and when an op pinned to one language follows a langid that keeps others.
Generated over every op that declares `reads_text` and every language-pinned op."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ylink_data.engine.config import load_config
from ylink_data.engine.runner import Runner
from ylink_data.engine.stage_warnings import stage_warnings
from ylink_data.ops import REGISTRY, load_ops

from .conftest import REPO, SAMPLES

load_ops()
TEXT_OPS = sorted(name for name, cls in REGISTRY.items() if cls.reads_text)
PINNED_OPS = sorted(name for name, cls in REGISTRY.items() if hasattr(cls, "language") and cls.reads_text
                    and name != "langid")
WARC = SAMPLES / "trafilatura-eval-pages.warc.gz"
WET = SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.wet.gz"


def _warnings(tmp_path: Path, paths: list[str], stages: list, **input_keys) -> list[str]:
    cfg = load_config({"name": "w", "input": {"paths": paths, **input_keys},
                       "output": {"path": str(tmp_path / "out")}, "stages": stages})
    return stage_warnings(cfg, Runner(cfg).plan().files)


def _html_file(tmp_path: Path) -> str:
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>The committee met on Tuesday to discuss the budget.</p></body></html>")
    return str(page)


def test_the_generated_cases_cover_the_filters():
    assert {"gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality", "badwords", "langid"} <= set(TEXT_OPS)


@pytest.mark.parametrize("op", TEXT_OPS)
def test_a_text_filter_on_html_input_warns(tmp_path, op):
    for paths, extra in (([str(WARC)], {}), ([_html_file(tmp_path)], {}), ([str(WET)], {"format": "warc"})):
        found = _warnings(tmp_path, paths, [{"normalize": {}}, {op: {}}], **extra)
        assert len(found) == 1 and f"{op} (stage 2)" in found[0] and "extract" in found[0] and "\n" not in found[0]
    assert _warnings(tmp_path, [str(WARC)], [{"extract": {}}, {op: {}}]) == []   # text first: fine
    assert _warnings(tmp_path, [str(WET)], [{op: {}}]) == []                     # WET is text already


@pytest.mark.parametrize("op", PINNED_OPS)
@pytest.mark.parametrize("language,kept,warns", [
    ("en", ["en", "zh"], True), ("en", None, True), ("en", ["en"], False), ("en", ["en", "fr"], False),
    ("zh", ["en", "zh"], True), ("zh", None, True), ("zh", ["zh"], False), ("auto", ["en", "zh"], False)])
def test_a_pinned_language_after_a_wider_langid_warns(tmp_path, op, language, kept, warns):
    stages = [{"extract": {}}, {"langid": {"languages": kept}}, {op: {"language": language}}]
    found = _warnings(tmp_path, [str(WARC)], stages)
    assert len(found) == warns
    if warns:
        assert f"{op} (stage 3)" in found[0] and "langid (stage 2)" in found[0] and "language: auto" in found[0]


def test_the_en_preset_after_a_bilingual_langid_is_one_warning(tmp_path):
    stages = [{"extract": {}}, {"langid": {"languages": ["en", "zh"]}}, {"include": "filters/en"}]
    (found,) = _warnings(tmp_path, [str(WARC)], stages)
    assert "gopher_quality" in found and "fineweb_quality" in found and "keeps zh too" in found


def test_validate_and_run_print_the_warnings(tmp_path):
    """The issue's pipeline: a top-level include of the English preset on WARC input."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"name: p\ninput: {{paths: ['{WARC}']}}\noutput: {{path: '{tmp_path / 'out'}'}}\n"
                        f"include: [filters/en]\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ylink = [sys.executable, "-m", "ylink_data.cli"]
    validate = subprocess.run([*ylink, "validate", str(pipeline)], env=env, capture_output=True, text=True)
    assert validate.returncode == 0 and "ok:" in validate.stdout
    assert [line for line in validate.stderr.splitlines() if "warning" in line] == [
        line for line in validate.stderr.splitlines() if "gopher_quality (stage 2) reads plain text" in line] != []
    run = subprocess.run([*ylink, "run", str(pipeline), "--no-progress"], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and "gopher_quality (stage 2) reads plain text" in run.stderr + run.stdout
