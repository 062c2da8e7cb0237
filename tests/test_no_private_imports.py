"""No module of ylink_data/ uses another module's private names (`_name`): a helper shared across
modules is public where it belongs (issue 34 point 5: `config._read_yaml` was read by flow.py and
tokens/mix_config.py). Every import statement counts, also those inside functions; tests may still
reach into privates, so only the package is walked."""
from __future__ import annotations

import ast
from pathlib import Path

import ylink_data

PACKAGE = Path(ylink_data.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str, module: str, modules: set[str]) -> list[str]:
    """`from X import _name` and `X._name` (X bound by `import X` or `from P import X`) in `source`,
    where X is another module of `modules`: one line each, `module:line: X._name`."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> the package module it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if _is_private(alias.name) and node.module in modules and node.module != module:
                    found.append(f"{module}:{node.lineno}: {node.module}.{alias.name}")
                if f"{node.module}.{alias.name}" in modules:  # a module imported from its package
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:  # `import a.b.c` binds `a`, `import a.b.c as m` binds the module
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain, base = [], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                target = ".".join([bound[base.id], *reversed(chain)])
                if target in modules and target != module:
                    found.append(f"{module}:{node.lineno}: {target}.{node.attr}")
    return found


def test_no_module_of_the_package_uses_another_modules_private_names():
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    found = [use for p in paths for use in private_uses(p.read_text(encoding="utf-8"), _module_name(p), modules)]
    assert not found, "private names used across modules (make them public where they belong):\n" + "\n".join(found)


def test_every_way_of_reaching_a_private_name_is_caught():
    """The checker itself, on generated sources: each way of naming another module's private helper,
    for every module of the package as the owner, is found; public names and a module's own privates
    are not."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    for owner in sorted(modules):
        if "." not in owner:
            continue
        parent, leaf = owner.rsplit(".", 1)
        ways = [f"from {owner} import _helper", f"from {owner} import _helper as helper",
                f"from {parent} import {leaf}\n{leaf}._helper()", f"from {parent} import {leaf} as m\nm._helper",
                f"import {owner} as m\nm._helper()", f"def f():\n    from {owner} import _helper"]
        for source in ways:
            assert private_uses(source, "ylink_data.elsewhere", modules), source
        for source in (f"from {owner} import helper", f"from {owner} import __version__",
                       f"import {owner} as m\nm.helper"):
            assert not private_uses(source, "ylink_data.elsewhere", modules), source
        assert not private_uses(f"from {owner} import _helper", owner, modules)
