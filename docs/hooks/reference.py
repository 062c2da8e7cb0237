"""MkDocs hook: the reference pages are printed from the code at build time, so they cannot drift:
reference/ops.md from the op registry (`ylink_data.ops.describe`, what `ylink ops NAME` prints),
reference/config.md from the pydantic config schema (types, bounds and defaults, and the comments
written beside each field in ylink_data/engine/config.py), reference/cli.md from the argparse parser
(`ylink_data.cli.build_parser`). The Python API page uses mkdocstrings (docs/reference/api.md)."""
from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import typing
from pathlib import Path

from mkdocs.structure.files import File

# This checkout's code, whatever ylink_data the environment has installed (an editable install of
# another clone): the references describe the code next to them.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

GENERATED = {"reference/ops.md", "reference/config.md", "reference/cli.md"}


def on_files(files, config):
    for path, text in (("reference/ops.md", ops_page()), ("reference/config.md", config_page()),
                       ("reference/cli.md", cli_page())):
        files.append(File.generated(config, path, content=text))
    return files


# ------------------------------------------------------------------ ops


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def ops_page() -> str:
    from ylink_data.ops.describe import describe_op, op_names

    infos = [describe_op(n) for n in op_names()]
    lines = ["# Ops", "",
             "Every op of the registry, printed from the code when this site is built (`ylink ops` and "
             "`ylink ops NAME` print the same). A parameter's type, bounds and default are the ones "
             "`ylink validate` checks.", "", "| op | what it does |", "| --- | --- |"]
    lines += [f"| [`{i.name}`](#{i.name}) | {_cell(i.summary)} |" for i in infos]
    for i in infos:
        lines += ["", f"## {i.name}", "", f"`ylink_data/ops/{i.family}.py`", ""]
        if i.params:
            lines += ["| parameter | type | bounds | default |", "| --- | --- | --- | --- |"]
            lines += [f"| `{p.name}` | `{_cell(p.type)}` | {_cell(p.bounds) or '-'} | `{_cell(p.default)}` |"
                      for p in i.params]
        else:
            lines.append("No parameters.")
        lines += ["", _as_text(i.doc)]
        if i.module_doc:
            lines += ["", f"??? note \"About `{i.family}` (the module's docstring)\"", "",
                      _indent(_as_text(i.module_doc))]
    return "\n".join(lines) + "\n"


def _as_text(doc: str) -> str:
    """A docstring as Markdown: its text is Markdown already, except `<...>` placeholders."""
    return re.sub(r"<(?=[a-z_])", "&lt;", doc)


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line else "" for line in text.splitlines())


# ------------------------------------------------------------------ config


def config_page() -> str:
    from pydantic import BaseModel

    from ylink_data.engine.config import PipelineConfig

    lines = ["# Config keys", "",
             "Every key of a pipeline YAML, printed from the schema `ylink validate` checks "
             "(`ylink_data/engine/config.py`) when this site is built; the notes are the comments written beside "
             "each field there. `--set KEY=VALUE` overrides any of them by the dotted path.", "",
             "| key | type | bounds | default | notes |", "| --- | --- | --- | --- | --- |"]

    def walk(model: type[BaseModel], prefix: str) -> None:
        notes = _field_comments(model)
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            from ylink_data.ops.describe import default_text, type_and_bounds

            type_text, bounds = type_and_bounds(field.annotation, field.metadata)
            default = "required" if field.is_required() else (
                _factory_text(field.default_factory) if field.default_factory is not None else default_text(field))
            key = f"{prefix}{name}"
            lines.append(f"| `{key}` | `{_cell(type_text)}` | {_cell(bounds) or '-'} | `{_cell(default)}` | "
                         f"{_cell(notes.get(name, ''))} |")
            for sub in _models_in(field.annotation):
                walk(sub, f"{key}.")

    walk(PipelineConfig, "")
    lines += ["", "`stages:` is a list of `- op_name: {params}` items: see [Ops](ops.md) for every op's parameters."]
    return "\n".join(lines) + "\n"


def _factory_text(factory) -> str:
    """A default made by a factory: an empty list or mapping as YAML, a section as its keys below."""
    value = factory()
    return "the keys below" if hasattr(value, "model_dump") else ("[]" if isinstance(value, list) else "{}")


def _models_in(annotation) -> list:
    from pydantic import BaseModel

    found = []
    for tp in (annotation, *typing.get_args(annotation)):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            found.append(tp)
    return found


def _field_comments(model) -> dict[str, str]:
    """{field: the comment lines above it and beside it} in the model's source."""
    notes: dict[str, str] = {}
    pending: list[str] = []
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):  # a model built at run time has no source: no notes, the rest holds
        return notes
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"    (\w+)\s*:", line)
        if match and not stripped.startswith(("def ", "@")):
            beside = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            notes[match.group(1)] = " ".join([*pending, beside]).strip()
        pending = []
    return notes


# ------------------------------------------------------------------ CLI


def cli_page() -> str:
    from ylink_data.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: the page must not depend on it
    parser = build_parser()
    lines = ["# Command line", "",
             "Every `ylink` command, with the help its parser prints (`ylink COMMAND --help`), printed from "
             "the parser when this site is built.", "", "```text", parser.format_help().rstrip(), "```"]
    for name, sub in _commands(parser, "ylink"):
        lines += ["", f"## {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _commands(parser: argparse.ArgumentParser, prefix: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")
