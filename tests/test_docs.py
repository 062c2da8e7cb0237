"""Issue 35, point 1: the documentation site builds with `mkdocs build --strict` (a broken link, a
page left out of the nav or a reference that fails to render stops it), and its reference pages are
printed from the code: every registered op, every config key and every command is in them. The
README stays a first visit's page (at most 300 lines) whose links into docs/ all exist."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ylink_data.cli import build_parser
from ylink_data.engine.config import PipelineConfig
from ylink_data.ops import REGISTRY, load_ops

from .conftest import REPO


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
                           "--site-dir", str(out)], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(out)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text()


def test_the_op_reference_has_every_registered_op_and_its_parameters(site):
    load_ops()
    page = _page(site, "reference/ops")
    for name, cls in REGISTRY.items():
        assert f'id="{name}"' in page, name
    # a parameter with a bound, as the validator states it
    assert "<code>threshold</code>" in page and "in (0, 1)" in page


def test_the_config_reference_has_every_key_of_the_schema(site):
    page = _page(site, "reference/config")
    for section, field in PipelineConfig.model_fields.items():
        if field.exclude:
            continue
        assert f"<code>{section}</code>" in page, section
    for key in ("input.paths", "output.keep_rejected", "ray.address"):
        assert f"<code>{key}</code>" in page, key


def test_the_cli_reference_has_every_command(site):
    page = _page(site, "reference/cli")
    commands = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in commands:
        assert f'id="ylink-{name}"' in page, name


def test_the_api_reference_renders_the_public_functions(site):
    page = _page(site, "reference/api")
    for name in ("run", "open_run", "ShardLoader", "TextDataset"):
        assert re.search(rf'id="ylink_data\.[\w.]*\b{name}"', page), name


def test_the_readme_is_short_and_its_links_into_the_site_exist():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert len(links) >= 5
    for link in links:
        assert (REPO / link).is_file(), link
    assert "make run" in readme and "make test" in readme and "make docs" in readme


def test_every_recipe_is_listed_on_the_recipes_page():
    index = (REPO / "docs" / "recipes" / "index.md").read_text()
    pages = sorted(p.name for p in (REPO / "docs" / "recipes").glob("*.md") if p.name != "index.md")
    assert pages and [p for p in pages if f"]({p})" not in index] == []
