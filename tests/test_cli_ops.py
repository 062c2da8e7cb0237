"""Issue 35, point 5: `ylink --version`, `ylink ops` (every op, one line each) and `ylink ops NAME`
(its parameters, types, bounds and defaults). The expectations come from the registry and the
validated schema, not from the text printed: every registered op is listed once, every parameter of
its signature gets a row, and every printed default, read back as YAML, is what the validator gives
that parameter when it is left out."""
from __future__ import annotations

import inspect
import subprocess
import sys
import tomllib
from typing import Annotated, Any

import pytest
import yaml
from pydantic import TypeAdapter

from ylink_data.cli import main
from ylink_data.ops import REGISTRY, params_model, load_ops

from .conftest import REPO

load_ops()


def _ylink(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_version_is_the_package_version():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    proc = _ylink("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ylink-data {version}"


def test_ops_lists_every_registered_op_on_one_line():
    proc = _ylink("ops")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == sorted(REGISTRY)
    assert all(len(line.split()) > 1 for line in lines), "an op without a summary"


def test_an_unknown_op_is_one_line_with_a_suggestion():
    proc = _ylink("ops", "minhash_dedupe")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["ylink: error: no op named 'minhash_dedupe'; did you mean 'minhash_dedup'?"]


def _rows(printed: str) -> dict[str, list[str]]:
    """parameter -> its printed columns (type, bounds, default), from the table of `ylink ops NAME`."""
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["parameter"])
    starts = [lines[header].index(word) for word in ("parameter", "type", "bounds", "default")]
    rows = {}
    for line in lines[header + 1:]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_ops_name_prints_every_parameter_with_a_default_the_validator_gives(name, capsys):
    assert main(["ops", name]) == 0
    printed = capsys.readouterr().out
    rows = _rows(printed)
    signature = [p for p in inspect.signature(REGISTRY[name].__init__).parameters if p != "self"]
    assert list(rows) == signature
    model = params_model(REGISTRY[name])
    schema = model.model_json_schema()["properties"]
    for param, (type_text, bounds, default) in rows.items():
        assert type_text, f"{name}.{param} has no type"
        # A bound anywhere in the parameter's JSON schema (the validator's) is printed, and only then.
        assert (bounds != "-") == _has_bound(schema[param]), f"{name}.{param}: bounds {bounds!r}"
        field = model.model_fields[param]
        if default == "required":
            assert field.is_required(), f"{name}.{param}"
            continue
        # The printed default, given back as YAML, validates to what the op gets without it.
        adapter = TypeAdapter(Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation)
        loaded = yaml.safe_load(default)
        assert adapter.validate_python(loaded) == adapter.validate_python(field.default), f"{name}.{param}: {default}"
    doc = inspect.getdoc(REGISTRY[name])
    assert doc.splitlines()[0] in printed  # the docstring follows the table


def _has_bound(schema: Any) -> bool:
    if isinstance(schema, dict):
        return bool({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
                 "minProperties", "maxProperties", "minLength", "maxLength"} & set(schema)) \
            or any(_has_bound(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_bound(v) for v in schema)
    return False
