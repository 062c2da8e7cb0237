"""Issue 35, point 2, and issue 42, point 2: the recipes under docs/recipes/ run as written, each in an
empty folder of its own, away from the repository, with `YLINK_CLONE` naming the clone (a recipe
links or copies the bundled data it reads from there: it says where to run it and works there).
Each page's blocks marked with an HTML comment on the line before them (invisible on the site) are
run in order; every bash block of a recipe is either run or says why not. The markers are
tests/docblocks.py's."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from .conftest import REPO
from .docblocks import block_env, parse, run_blocks

RECIPES = REPO / "docs" / "recipes"
LINKED = ("samples", "configs", "pipelines", "tests/data")  # a clone's data, for guides run as in a clone


def _workdir(tmp_path: Path) -> Path:
    """A folder laid out as a clone's data (for the guides' commands, tests/test_docs_sequences.py)."""
    work = tmp_path / "recipe"
    for rel in LINKED:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).symlink_to(REPO / rel)
    return work


def run_page(page: Path, tmp_path: Path) -> list[str]:
    """Run a recipe's marked blocks in an empty folder; return what was skipped and why."""
    work = tmp_path / "empty"
    work.mkdir()
    env = {**block_env(tmp_path), "YLINK_CLONE": str(REPO)}
    return run_blocks(page, work, env, run_unmarked=False)


PAGES = sorted(p for p in RECIPES.glob("*.md") if p.name != "index.md")


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_recipe_runs(page, tmp_path):
    blocks, _ = parse(page)
    assert any("run" in b.options for b in blocks), f"{page.name} has no block marked <!-- recipe: run -->"
    unmarked = [b.line for b in blocks if b.lang == "bash" and not ("run" in b.options or "not run" in b.options)]
    assert not unmarked, f"{page.name}: bash blocks at lines {unmarked} neither run nor say why not"
    skipped = run_page(page, tmp_path)
    ran = sum("run" in b.options for b in blocks) - len([s for s in skipped if "not run" not in s])
    if not ran:
        pytest.skip("; ".join(skipped))
    for reason in skipped:  # the rest ran: say what did not, without hiding that the page passed
        warnings.warn(f"recipe block not run: {reason}")


def test_a_failing_block_fails_its_recipe(tmp_path):
    """The runner itself can fail: a block that exits non-zero is reported with its page and line."""
    page = tmp_path / "broken.md"
    page.write_text("# Broken\n\n<!-- recipe: run -->\n```bash\nylink ops no_such_op\n```\n")
    with pytest.raises(AssertionError, match=r"broken.md:4 failed \(exit 2\)"):
        run_page(page, tmp_path)


def test_a_quoted_output_that_differs_fails(tmp_path):
    """An output block is compared with what the block before it printed."""
    page = tmp_path / "quoted.md"
    page.write_text("# Quoted\n\n<!-- recipe: run -->\n```bash\necho 'kept 12 of 40'\n```\n\n"
                    "<!-- recipe: output -->\n```\nkept ... of 40\n```\n\n"
                    "<!-- recipe: run -->\n```bash\necho 'kept 12 of 40'\n```\n\n"
                    "<!-- recipe: output -->\n```\nkept 13 of 40\n```\n")
    with pytest.raises(AssertionError, match=r"quoted.md:19: the page quotes 'kept 13 of 40'"):
        run_page(page, tmp_path)


def test_a_recipe_that_reads_the_clone_without_saying_so_fails(tmp_path):
    """A recipe runs in an empty folder: one that reads samples/ as if run from the clone fails."""
    page = tmp_path / "assumes.md"
    page.write_text("# Assumes\n\n<!-- recipe: run -->\n```bash\nls samples/crawl\n```\n")
    with pytest.raises(AssertionError, match=r"assumes.md:4 failed"):
        run_page(page, tmp_path)
