"""What an op takes, in words: its parameters (type, bounds, default) and its docstrings, read from
the registry and the validated schema (`params_model`), never written by hand. `ylink ops` and the
documentation site's op reference (docs/hooks/reference.py) both print this, so neither can drift
from what `ylink validate` accepts."""
from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ylink_data.ops import REGISTRY, params_model, load_ops


@dataclass
class ParamInfo:
    name: str
    type: str  # without bounds: "float | null", "dict[int, float]"
    bounds: str  # "in [0, 1]", "values: ≥ 0", or "" when the type has none
    default: str  # YAML-ish text of the default, or "required"


@dataclass
class OpInfo:
    name: str
    family: str  # the module that holds the op ("gopher", "minhash_dedup")
    summary: str  # one line
    doc: str  # the class docstring
    module_doc: str  # the module's docstring (many ops point to it for their rules)
    params: list[ParamInfo]


def op_names() -> list[str]:
    load_ops()
    return sorted(REGISTRY)


def describe_op(name: str) -> OpInfo:
    load_ops()
    cls = REGISTRY[name]
    fields = params_model(cls).model_fields
    params = [ParamInfo(pname, *type_and_bounds(f.annotation, f.metadata), default_text(f))
              for pname, f in fields.items()]
    doc = inspect.getdoc(cls) or ""
    module = sys.modules[cls.__module__]
    return OpInfo(name, cls.__module__.rsplit(".", 1)[-1], summary_line(doc), doc,
                  inspect.cleandoc(module.__doc__ or ""), params)


def summary_line(doc: str) -> str:
    """The docstring's first sentence, on one line: what `ylink ops` lists."""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z])", first, maxsplit=1)[0]
    sentence = re.sub(r";\s*see the module docstring\.?$", ".", sentence) or "(no docstring)"
    if len(sentence) <= SUMMARY_CHARS:
        return sentence
    return sentence[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " …"  # one line: `ylink ops NAME` has the rest


SUMMARY_CHARS = 110


def format_op_list() -> str:
    infos = [describe_op(n) for n in op_names()]
    width = max(len(i.name) for i in infos)
    return "\n".join(f"{i.name:<{width}}  {i.summary}" for i in infos)


def format_op(name: str) -> str:
    """`ylink ops NAME`: the parameters as a table, then the docstrings."""
    info = describe_op(name)
    rows = [("parameter", "type", "bounds", "default")] + [(p.name, p.type, p.bounds or "-", p.default)
                                                           for p in info.params]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    table = "\n".join(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
                      for r in rows) if info.params else "  (no parameters)"
    parts = [f"{info.name} (ylink_data/ops/{info.family}.py)", "", table, "", info.doc]
    if info.module_doc:
        parts += ["", f"About {info.family}:", info.module_doc]
    return "\n".join(parts).rstrip()


# ------------------------------------------------------------------ types in words

_BOUND_TEXT = {"ge": "≥ {}", "gt": "> {}", "le": "≤ {}", "lt": "< {}",
               "min_length": "at least {} item(s)", "max_length": "at most {} items"}


def _constraints(metadata: list[Any]) -> dict[str, Any]:
    """{'ge': 0, 'le': 1, ...} from annotated_types' Ge/Le/MinLen... and FieldInfo(ge=...)."""
    found: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, FieldInfo):
            found |= _constraints(item.metadata)
            continue
        for key in _BOUND_TEXT:
            value = getattr(item, key, None)
            if value is not None:
                found[key] = value
    return found


def _bound_text(c: dict[str, Any]) -> str:
    low = ("[", c["ge"]) if "ge" in c else ("(", c["gt"]) if "gt" in c else None
    high = ("]", c["le"]) if "le" in c else (")", c["lt"]) if "lt" in c else None
    words = []
    if low and high:
        words.append(f"in {low[0]}{low[1]}, {high[1]}{high[0]}")
    else:
        words += [_BOUND_TEXT[k].format(c[k]) for k in ("ge", "gt", "le", "lt") if k in c]
    words += [_BOUND_TEXT[k].format(c[k]) for k in ("min_length", "max_length") if k in c]
    return ", ".join(words)


def type_and_bounds(annotation: Any, metadata: list[Any] = (), where: str = "") -> tuple[str, str]:
    """(the type without bounds, its bounds) of a parameter's annotation; bounds inside a container
    say where they apply ("values: ≥ 0")."""
    bounds: list[str] = []
    text = _walk(annotation, bounds, where)
    own = _bound_text(_constraints(list(metadata)))
    if own:
        bounds.insert(0, f"{where}: {own}" if where else own)
    return text, "; ".join(dict.fromkeys(bounds))  # tuple[float ≥ 0, float ≥ 0]: said once


def _walk(tp: Any, bounds: list[str], where: str) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        text, inner = type_and_bounds(args[0], list(args[1:]), where)
        if inner:
            bounds.append(inner)
        return text
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_walk(a, bounds, where) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) if isinstance(a, str) else str(a) for a in args)
    if tp is type(None):
        return "null"
    if origin is dict:
        key, value = args or (Any, Any)
        return f"dict[{_walk(key, bounds, _at(where, 'keys'))}, {_walk(value, bounds, _at(where, 'values'))}]"
    if origin in (list, tuple, set, frozenset):
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            args = args[:1]
        inner = ", ".join(_walk(a, bounds, _at(where, "items")) for a in args) if args else "any"
        return f"{'list' if origin is tuple and len(args) == 1 else origin.__name__}[{inner}]"
    if tp is Any:
        return "any"
    return getattr(tp, "__name__", str(tp))


def _at(where: str, part: str) -> str:
    return f"{where} {part}".strip()


def default_text(field: FieldInfo) -> str:
    if field.is_required() or field.default is PydanticUndefined:
        return "required"
    value = field.default
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        value = list(value)
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return repr(value) if isinstance(value, str) else str(value)
