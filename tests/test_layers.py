"""The package's architecture holds (issue 34): its layers are an import-linter `layers` contract
(pyproject.toml, `[tool.importlinter]`) that `lint-imports` keeps, and no module of the package takes
part in an import cycle, counting every import statement (inside functions and under TYPE_CHECKING
too: a cycle held up only by deferred imports breaks as soon as one of them moves to the top)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "ylink_data"


def _contract() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        (contract,) = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return contract


def test_lint_imports_keeps_the_layers_contract():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    done = subprocess.run([lint, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_the_contract_names_every_package_of_the_layers_in_the_folder_layout():
    contract = _contract()
    assert contract["type"] == "layers" and contract["exhaustive"] is True
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    on_disk = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
               if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert on_disk - {"assets"} == layered
    # The five lower layers are folders, one concept each (what DEVELOPERS.md draws).
    assert [layer for layer in contract["layers"][-5:]] == ["engine", "ops", "io", "text", "core"]


def _import_graph() -> "grimp.ImportGraph":
    return grimp.build_graph("ylink_data", cache_dir=None)


def test_no_module_takes_part_in_an_import_cycle():
    graph = _import_graph()
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != module and graph.chain_exists(importer=imported, imported=module):
                cycles.append(f"{module} -> {imported} -> ... -> {module}: "
                              + " -> ".join(graph.find_shortest_chain(importer=imported, imported=module)))
    assert not cycles, "\n".join(cycles)


def test_the_graph_counts_deferred_imports():
    """The cycle check above is only as good as its graph: an import inside a function counts."""
    graph = _import_graph()
    deferred = [(PACKAGE / "__init__.py", "ylink_data.engine.runner")]  # PEP 562: loaded on first use
    for path, imported in deferred:
        assert imported in {i for i in graph.find_modules_directly_imported_by("ylink_data")}, path


def _ray_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name == "ray" or a.name.startswith("ray.") for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "ray":
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("layer", ["core", "text", "io", "ops"])
def test_the_lower_layers_never_import_ray(layer):
    found = {str(p.relative_to(REPO)): lines for p in (PACKAGE / layer).rglob("*.py") if (lines := _ray_imports(p))}
    assert not found


def test_loading_a_config_imports_no_engine_beyond_the_config_and_no_ray():
    """Issue 34 point 3: validating a pipeline loaded the engine (plan, tasks, global phases: ops
    imported them) through cycles; now only the spec."""
    code = ("import sys; from ylink_data.engine.config import load_config; load_config('pipelines/quickstart.yaml'); "
            "print(sorted(m for m in sys.modules if m.startswith('ylink_data.engine') or m.split('.')[0] == 'ray'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['ylink_data.engine', 'ylink_data.engine.config']"
