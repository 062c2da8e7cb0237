"""Issue 35, point 2: the recipes under docs/recipes/ run. Each page's fenced blocks marked with an
HTML comment on the line before them (invisible on the site) are executed in order, in a fresh
folder per page that holds links to the repository's bundled data (samples/, configs/, pipelines/,
tests/data/), so a recipe that stops working fails here. The markers:

    <!-- recipe: run -->                    run this bash or python block (it fails on a non-zero exit)
    <!-- recipe: file=NAME -->              write this block to NAME (a pipeline YAML, say)
    <!-- recipe: run needs=duckdb -->       run it only where the module is installed (else skipped, said)
    <!-- recipe: run requires=input.paths_from -->  run it once the config key exists (else skipped, said)
    <!-- recipe: mirror URL=REPO_FILE -->   (anywhere on the page) serve REPO_FILE at URL's path from the
                                            test HTTP server (tests/httpserver.py) and write that server's
                                            address for URL's scheme and host in every block: the page shows
                                            the real URL, the test reads the bundled copy.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .conftest import REPO
from .httpserver import FileServer

RECIPES = REPO / "docs" / "recipes"
LINKED = ("samples", "configs", "pipelines", "tests/data")  # what a recipe may read, as in a clone
MARKER = re.compile(r"^<!-- recipe: (.*?) -->\s*$")
FENCE = re.compile(r"^```(\w+)?\s*$")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    options: dict[str, str] = field(default_factory=dict)


def parse(page: Path) -> tuple[list[Block], list[tuple[str, str]]]:
    """The marked blocks of a recipe page, and its mirrors (URL, repository file)."""
    lines = page.read_text().splitlines()
    blocks, mirrors = [], []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        if marker and marker.group(1).startswith("mirror "):
            url, _, local = marker.group(1)[len("mirror "):].partition("=")
            mirrors.append((url.strip(), local.strip()))
        elif marker and i + 1 < len(lines) and FENCE.match(lines[i + 1]):
            options = dict(o.partition("=")[::2] for o in marker.group(1).split())
            lang = FENCE.match(lines[i + 1]).group(1) or ""
            end = next(k for k in range(i + 2, len(lines)) if lines[k].strip() == "```")
            blocks.append(Block(lang, "\n".join(lines[i + 2:end]) + "\n", i + 2, options))
            i = end
        i += 1
    return blocks, mirrors


def _skip_reason(block: Block) -> str | None:
    module = block.options.get("needs")
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    key = block.options.get("requires")
    if key:
        from ylink_data.engine.config import PipelineConfig

        model = PipelineConfig
        for part in key.split("."):
            fields = getattr(model, "model_fields", {})
            if part not in fields:
                return f"the config has no {key} yet (the block runs once it exists)"
            model = fields[part].annotation
    return None


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "recipe"
    for rel in LINKED:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).symlink_to(REPO / rel)
    return work


def run_page(page: Path, tmp_path: Path) -> list[str]:
    """Run a page's blocks; return what was skipped and why."""
    blocks, mirrors = parse(page)
    work = _workdir(tmp_path)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(REPO),
           "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1",
           "NO_COLOR": "1", **{k: v for k, v in os.environ.items() if k.startswith("YLINK_SHARED")}}
    skipped = []
    served = tmp_path / "served"
    for url, local in mirrors:
        target = served / urlsplit(url).path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / local, target)
    with FileServer(served) as server:
        base = server.url("").rstrip("/")
        for block in blocks:
            code = block.code
            for url, _ in mirrors:
                parts = urlsplit(url)
                code = code.replace(f"{parts.scheme}://{parts.netloc}", base)
            where = f"{page.relative_to(REPO) if page.is_relative_to(REPO) else page.name}:{block.line}"
            if "file" in block.options:
                (work / block.options["file"]).write_text(code)
                continue
            if "run" not in block.options:
                continue
            reason = _skip_reason(block)
            if reason:
                skipped.append(f"{where}: {reason}")
                continue
            if block.lang == "bash":
                argv = ["bash", "-euo", "pipefail", "-c", code]
            elif block.lang == "python":
                argv = [sys.executable, "-c", code]
            else:
                raise AssertionError(f"{where}: a run marker on a {block.lang or 'plain'} block (bash or python only)")
            proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"{where} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return skipped


PAGES = sorted(p for p in RECIPES.glob("*.md") if p.name != "index.md")


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_recipe_runs(page, tmp_path):
    blocks, _ = parse(page)
    assert any("run" in b.options for b in blocks), f"{page.name} has no block marked <!-- recipe: run -->"
    skipped = run_page(page, tmp_path)
    ran = sum("run" in b.options for b in blocks) - len(skipped)
    if skipped and not ran:
        pytest.skip("; ".join(skipped))
    for reason in skipped:  # the rest ran: say what did not, without hiding that the page passed
        warnings.warn(f"recipe block not run: {reason}")


def test_a_failing_block_fails_its_recipe(tmp_path):
    """The runner itself can fail: a block that exits non-zero is reported with its page and line."""
    page = tmp_path / "broken.md"
    page.write_text("# Broken\n\n<!-- recipe: run -->\n```bash\nylink ops no_such_op\n```\n")
    with pytest.raises(AssertionError, match=r"broken.md:4 failed \(exit 2\)"):
        run_page(page, tmp_path)
