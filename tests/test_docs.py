"""Issue 35, point 1: the documentation site builds with `mkdocs build --strict` (a broken link, a
page left out of the nav or a reference that fails to render stops it), and its reference pages are
printed from the code: every registered op, every config key and every command is in them. The
README stays a first visit's page (at most 300 lines) whose links into docs/ all exist."""
from __future__ import annotations

import functools
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
    return (site / f"{name}.html").read_text()


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


# ---------------------------------------------------------------------------- offline, from the file system


def test_the_site_browses_from_the_file_system(site):
    """Issue 42 point 2: README says open site/index.html. Every link of every page, followed from
    the file it is in as a browser does from file://, reaches a file (a page, a stylesheet, an
    image), never a folder (which a browser shows as a listing) or nothing."""
    broken = []
    # 404.html is a web server's error page (its links are absolute, from the server's root): no page links it
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    assert len(pages) > 20
    for page in pages:
        for target in re.findall(r'(?:href|src)="([^"#?]+)', page.read_text()):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # http(s)://, mailto:, data: ...
            resolved = (page.parent / target).resolve()
            if not resolved.is_file():
                broken.append(f"{page.relative_to(site)} -> {target}")
    assert broken == []
    assert 'href="getting-started.html"' in (site / "index.html").read_text()


# ---------------------------------------------------------------------------- the API reference, complete

# The notebook API (`ylink_data`'s names, `ylink_data.explore`) and the PyTorch datasets: each public
# name, and each public member of a class among them (the Run that open_run returns), has a docstring
# and is shown on the API page under its own id.
PUBLIC_MODULES = ("ylink_data", "ylink_data.explore", "ylink_data.torch")


def _members(cls: type) -> list[str]:
    """The public attributes, methods and properties a user of `cls` sees that ylink-data defines
    (its own and its ylink_data bases'; not object's, torch's or NamedTuple's machinery)."""
    import dataclasses

    names: list[str] = []
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("ylink_data"):
            continue
        names += [n for n in vars(klass) if not n.startswith("_")]
        if dataclasses.is_dataclass(klass):
            names += [f.name for f in dataclasses.fields(klass) if not f.name.startswith("_")]
        names += [n for n in getattr(klass, "_fields", ()) if not n.startswith("_")]
    return sorted(set(names))


def public_api() -> list[tuple[str, object, str | None]]:
    """(id on the API page, the object, its member name or None) for every public name."""
    import importlib

    out = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("__"):  # __version__: the package's metadata, not an API to document
                continue
            obj = getattr(module, name)
            path = f"{obj.__module__}.{obj.__qualname__}"
            out.append((path, obj, None))
            if isinstance(obj, type):
                out += [(f"{path}.{member}", obj, member) for member in _members(obj)]
    return out


def test_every_public_name_has_a_docstring_shown_on_the_api_page(site):
    import inspect

    page = _page(site, "reference/api")
    api = public_api()
    assert {"ylink_data.io.runs.Run.to_pandas", "ylink_data.io.runs.Run.quarantine",
            "ylink_data.torch.TextDataset", "ylink_data.torch.TextDataset.state_dict",
            "ylink_data.explore.PreviewResult.newly_kept"} <= {path for path, _, _ in api}
    undocumented, missing = [], []
    for path, obj, member in api:
        if f'id="{path}"' not in page:  # mkdocstrings shows a name only with its docstring
            missing.append(path)
        if member is None:
            own = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
            # a dataclass or NamedTuple without one gets its signature as __doc__: "Run(url: str, ...)"
            if not (own or "").strip() or own.startswith(f"{obj.__name__}("):
                undocumented.append(path)
            continue
        value = inspect.getattr_static(obj, member, None)  # None: a field without a default
        if isinstance(value, (property, classmethod, staticmethod, functools.cached_property)) or inspect.isfunction(value):
            target = getattr(value, "fget", None) or getattr(value, "func", None) or getattr(value, "__func__", value)
            if not (target.__doc__ or "").strip():
                undocumented.append(path)
    assert undocumented == [], "public names without a docstring"
    assert missing == [], "public names the API page does not show"
