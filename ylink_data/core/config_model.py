"""What every YAML document ylink validates with pydantic shares (the pipeline, the mixture, the input section in io/input_config.py): strict
sections, paths that cannot be blank, and one line per validation error."""
from __future__ import annotations

from typing import Any, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from ylink_data.core.errors import did_you_mean, format_loc

MiB = 1024 * 1024


class Strict(BaseModel):
    """A YAML section: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def not_blank(what: str) -> AfterValidator:
    """An empty path names the working directory: `--set input.paths=` read it recursively, and
    `--set output.path=` made it the output folder."""
    def check(path: str) -> str:
        if not path.strip():
            raise PydanticCustomError("empty_path", f"empty path: name {what}")
        return path
    return AfterValidator(check)


def describe_error(err: dict, model: type[BaseModel]) -> str:
    """One line for one pydantic error of `model` (the pipeline's PipelineConfig, the mixture YAML's
    MixConfig): where, what, and the allowed keys or the closest one for an unknown key."""
    loc = tuple(err["loc"])
    where = format_loc(loc)
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        hint = did_you_mean(loc[-1], allowed) or (f"; allowed: {', '.join(sorted(allowed))}" if allowed else "")
        return f"{where}: unknown key{hint}"
    if err["type"] == "missing":
        return f"{where}: required key is missing"
    got = err.get("input")
    shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
    return f"{where}: {err['msg']}{shown}"


def _allowed_keys(model: Any, loc: tuple) -> list[str]:
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return []
        model = _model_in(fields[part].annotation)
    fields = getattr(model, "model_fields", None)
    return [k for k, f in fields.items() if not f.exclude] if fields else []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, list, dict) or get_args(annotation):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
