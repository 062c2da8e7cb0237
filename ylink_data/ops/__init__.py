"""The op registry: every YAML op name maps to one class in one module of this package.

Add an op with one small module and one `@register` line; its `__init__` signature is its
parameter schema (types and defaults), so the config is validated without any extra code.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from typing import Any

from pydantic import ConfigDict, ValidationError, create_model

from ylink_data.core.suggest import did_you_mean
from ylink_data.engine.config import format_loc
from ylink_data.core.errors import ConfigError
from ylink_data.ops.base import (BatchResult, Document, DocumentFilter, DocumentMapper, DocumentSplitter, GlobalOp, MapOp, Op,  # noqa: F401 -- the shapes an op module imports from here
                   fan_out)

REGISTRY: dict[str, type[Op]] = {}

_NOT_OPS = {"base", "describe"}  # modules of this package that hold no ops


def register(cls: type[Op]) -> type[Op]:
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a `name` (its YAML key)")
    REGISTRY[cls.name] = cls
    return cls


_loaded = False


def load_ops() -> None:
    """Import every module of this package once: each registers its ops (one module per op family).
    A flag, not an empty registry, says it happened: importing one op module first must not hide
    the others."""
    global _loaded
    if _loaded:
        return
    for module in pkgutil.iter_modules(__path__):
        if module.name not in _NOT_OPS:
            importlib.import_module(f"{__name__}.{module.name}")
    _loaded = True


def op_class(name: str) -> type[Op]:
    load_ops()
    return REGISTRY[name]


def _params_model(cls: type[Op]) -> Any:
    hints = typing.get_type_hints(cls.__init__, include_extras=True)  # keep Annotated[..., Field(ge=0)]
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(cls.__init__).parameters.items():
        if pname == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = ... if param.default is param.empty else param.default
        fields[pname] = (hints.get(pname, Any), default)
    return create_model(f"{cls.__name__}Params", __config__=ConfigDict(extra="forbid"), **fields)


def validate_stages(stages: list[Any], source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Check every `- op_name: {params}` item; return [(op name, validated params)]."""
    load_ops()
    problems: list[str] = []
    ops: list[tuple[str, dict[str, Any]]] = []
    for i, item in enumerate(stages):
        where = f"stages[{i}]"
        if isinstance(item, str):
            item = {item: {}}  # `- exact_dedup` is `- exact_dedup: {}`
        if not isinstance(item, dict) or len(item) != 1:
            problems.append(f"{where}: expected one op as `- op_name: {{params}}`, got {item!r}")
            continue
        (name, params), = item.items()
        if name not in REGISTRY:
            known = ", ".join(sorted(REGISTRY))
            hint = did_you_mean(name, REGISTRY) or f" (known ops: {known})"
            problems.append(f"{where}: unknown op {name!r}{hint}")
            continue
        params = {} if params is None else params
        if not isinstance(params, dict):
            problems.append(f"{where}.{name}: parameters must be a mapping, got {params!r}")
            continue
        model = _params_model(REGISTRY[name])
        try:
            checked = model.model_validate(params)
        except ValidationError as exc:
            for err in exc.errors():
                loc = format_loc((f"{where}.{name}", *err["loc"]))
                if err["type"] == "extra_forbidden":
                    allowed = list(model.model_fields)
                    hint = did_you_mean(err["loc"][-1], allowed) or (
                        f"; {name} takes {', '.join(allowed)}" if allowed else f"; {name} takes no parameters")
                    problems.append(f"{loc}: unknown parameter{hint}")
                else:
                    problems.append(f"{loc}: {err['msg']}")
            continue
        params = checked.model_dump()
        try:  # checks across parameters live in the op's constructor, which loads nothing
            REGISTRY[name](**params)
        except (ValueError, TypeError) as exc:
            # "min_score: 7 is outside..." names its parameter: the line points at it, as pydantic's do.
            key, sep, rest = str(exc).partition(": ")
            problems.append(f"{where}.{name}.{key}: {rest}" if sep and key in params else f"{where}.{name}: {exc}")
            continue
        ops.append((name, params))
    if problems:
        raise ConfigError(problems, source)
    return ops


def build_op(name: str, params: dict[str, Any]) -> Op:
    return op_class(name)(**params)


__all__ = ["REGISTRY", "register", "op_class", "validate_stages", "build_op", "Op", "MapOp",
           "DocumentFilter", "DocumentMapper", "GlobalOp", "BatchResult", "Document"]
