"""Issue 42, point 3: every command block of the README and of the documentation's pages runs as
written, and what the pages quote of its output is what it prints. The pages are run in the order a
newcomer reads them (README.md, then the site's navigation), in one folder laid out as a clone, one
page after the other, so that `make run`'s output is there for the pages that read it. Every bash
block runs unless a marker says why it cannot here (`<!-- recipe: not run: REASON -->`: a cluster,
a training job); python blocks run where marked; quoted outputs (`<!-- recipe: output -->`) are
compared (tests/docblocks.py). The recipes are run apart, each in an empty folder
(tests/test_docs_recipes.py).

`make` is the Makefile's, with its install steps taken as done (this environment has what they
install; they would pip-install into it), and `make test` shown (`make -n`), not run: it is this suite.
"""
from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from .conftest import REPO
from .docblocks import block_env, parse, run_blocks

SKIP_TOP = {".git", ".venv", "out", "site", ".pytest_cache", "__pycache__"}
MAKE = """#!/bin/bash
# The pages' `make TARGET`: the Makefile's, its install steps taken as done (this test's environment
# has installed them), and `make test`, the suite that runs this, shown but not run.
set -eu
done_already=(-o .venv/bin/ylink -o .venv/.test -o .venv/.torch -o .venv/.docs)
if [ "${1:-}" = test ]; then exec /usr/bin/make -n "${done_already[@]}" "$@"; fi
exec /usr/bin/make "${done_already[@]}" "$@"
"""


def _nav(entries) -> list[str]:
    out = []
    for entry in entries:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            out += _nav(value) if isinstance(value, list) else [value]
    return out


def pages() -> list[Path]:
    """README.md, then the site's pages in navigation order (the recipes aside), then any page the
    navigation leaves out."""
    nav = [REPO / "docs" / p for p in _nav(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])]
    every = sorted(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts)
    ordered = [REPO / "README.md", *nav, *(p for p in every if p not in nav)]
    return [p for p in ordered if p.is_file() and "recipes" not in p.relative_to(REPO).parts]  # generated: no file


PAGES = pages()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A folder laid out as a fresh clone (the repository's files linked, no out/ nor site/), its
    .venv this test's environment."""
    root = tmp_path_factory.mktemp("newcomer")
    work = root / "ylink-data"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name == "notebooks":  # a copy: a notebook finds the clone from its own folder
            shutil.copytree(entry, work / entry.name)
        elif entry.name not in SKIP_TOP and not entry.name.endswith(".egg-info"):
            (work / entry.name).symlink_to(entry)
    (work / ".venv").symlink_to(Path(sys.prefix))
    shims = root / "bin"
    shims.mkdir()
    (shims / "make").write_text(MAKE)
    (shims / "make").chmod(0o755)
    return work, block_env(root, [str(shims)])


def _run(page: Path, clone) -> None:
    work, env = clone
    skipped = run_blocks(page, work, env, run_unmarked=True)
    for reason in skipped:
        warnings.warn(f"command block not run: {reason}")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_page_commands_run_as_written(page, clone):
    if page.name != "README.md" and not (clone[0] / "out" / "quickstart" / "manifest.json").exists():
        _run(REPO / "README.md", clone)  # a page chosen alone: the README's `make run` first
    _run(page, clone)


def test_every_page_is_walked():
    names = {str(p.relative_to(REPO)) for p in PAGES}
    assert "README.md" in names and "docs/getting-started.md" in names
    assert not [n for n in names if n.startswith("docs/recipes/")]
    assert os.path.exists(REPO / "Makefile")
