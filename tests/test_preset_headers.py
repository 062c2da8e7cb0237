"""Every filter preset's header shows a use that works: its `stages:` example, taken from the file,
validates and keeps documents of a bundled WARC sample in the preset's language (a top-level
include on WARC input once ran Gopher on raw HTML and kept 0 of 182)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import ylink_data
from ylink_data.engine.config import BUNDLED_PRESETS, load_config

from .conftest import SAMPLES

PRESET_FILES = sorted((BUNDLED_PRESETS / "filters").glob("*.yaml"))
# Mostly English pages (trafilatura's evaluation set); for Chinese, every bundled WARC file (most
# Chinese pages of the Common Crawl excerpt are SEO spam that the full zh preset drops).
SAMPLE = {"en": SAMPLES / "trafilatura-eval-pages.warc.gz", "zh": SAMPLES / "*.warc.gz",
          None: SAMPLES / "trafilatura-eval-pages.warc.gz"}


def header_example(preset: Path) -> list:
    """The `#   stages:` block of the preset's header comment, as YAML."""
    text = preset.read_text()
    found = re.search(r"^#   stages:\n((?:#     .*\n)+)", text, re.M)
    assert found, f"{preset.name}: its header shows no `stages:` example"
    return yaml.safe_load("stages:\n" + "".join(line[1:] + "\n" for line in found.group(1).splitlines()))["stages"]


@pytest.mark.parametrize("preset", PRESET_FILES, ids=[p.stem for p in PRESET_FILES])
def test_the_header_example_keeps_documents(ray_session, preset, tmp_path):
    lang = preset.stem.rsplit("-", 1)[-1] if preset.stem.endswith(("en", "zh")) else None
    cfg = {"name": preset.stem, "input": {"paths": [str(SAMPLE[lang])]},
           "output": {"path": str(tmp_path / "out")}, "stages": header_example(preset)}
    assert any(name == "extract" for name, _ in load_config(cfg).ops)  # validates, text first
    _, stats = ylink_data.run(cfg, progress=False)
    assert stats["output_records"] > 0
