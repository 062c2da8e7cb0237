"""Every Python name a page, a pipeline, a preset, a notebook or a comment of the package writes out
(`ylink_data.cache.packed.PackedBatches`) exists (issue 42 point 3: pipelines/sft.yaml named
`ylink_data.text.tokens.pack.PackedBatches`, which never did). The names are found by their dotted
form and resolved by importing the longest module prefix and reading the attributes after it."""
from __future__ import annotations

import importlib
import re
import warnings

from ylink_data.ops import REGISTRY, load_ops

from .conftest import REPO

DOTTED = re.compile(r"(?<![\w./-])ylink_data(?:\.[A-Za-z_]\w*)+")
FILES = ("README.md", "DEVELOPERS.md", "docs/**/*.md", "pipelines/**/*.yaml", "configs/**/*.yaml",
         "configs/**/*.md", "notebooks/*.ipynb", "samples/**/*.md", "ylink_data/**/*.py", "ylink_data/**/*.md",
         "Makefile", "pyproject.toml")
SUFFIXES = (".py", ".md", ".yaml", ".json", ".txt", ".jsonl", ".bin", ".ipynb")  # file names, not Python names


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        except ImportError:  # an optional extra missing here: the module exists
            return True
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def named() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for pattern in FILES:
        for path in REPO.glob(pattern):
            for match in DOTTED.finditer(path.read_text(errors="replace")):
                name = match.group(0)
                if not name.endswith(SUFFIXES):
                    found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_python_name_the_project_writes_exists():
    found = named()
    assert "ylink_data.cache.packed.PackedBatches" in found and len(found) > 100
    missing = {name: sorted(where) for name, where in found.items() if not _resolves(name)}
    assert missing == {}


def test_the_llm_page_names_every_op_that_calls_a_model():
    load_ops()
    first = (REPO / "docs" / "guide" / "llm.md").read_text().split("\n\n", 1)[0]
    assert [n for n, cls in sorted(REGISTRY.items()) if cls.uses_llm and f"`{n}`" not in first] == []
