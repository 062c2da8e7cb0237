"""Pipeline configuration: YAML in, a validated `PipelineConfig` out, or a `ConfigError` whose lines
each name the key path at fault and, where one is close, the key that was probably meant.

YAML is data: it is read with a safe loader only, which also refuses aliases that expand too far
(a "billion laughs" would otherwise take all memory). Presets are merged in with `include:`, and
`--set a.b.c=value` overrides any key by dotted path (list items by index: `stages.0.langid...`).
"""
from __future__ import annotations

import contextlib
import copy
import os
import re
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from ylink_data.core.config_model import MiB, StrictModel as _Strict, not_blank as _not_blank
from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.core.suggest import did_you_mean
from ylink_data.io.input_config import InputConfig
from ylink_data.io.llm.config import LLMConfig, LLMOverride, resolve_llm
from ylink_data.core.redaction import Redactor, redact_text
from ylink_data.core.paths import CONFIGS

# Presets are looked up next to the including file, then in ./configs and the repository's configs/.
BUNDLED_PRESETS = CONFIGS
# YAML aliases may add this many values to a document in all: far more than any preset repeats,
# far less than the billion of a "billion laughs" (aliases of aliases of aliases...).
MAX_ALIAS_VALUES = 10_000


class MegatronOutputConfig(_Strict):
    """`output.megatron: {}`: a Megatron-LM .bin/.idx pair next to each published shard (needs a
    `tokenize` stage). `dtype: auto` is the tokenizer's (uint16 when its vocabulary fits, else int32:
    Megatron's .idx has no uint32). `keep_token_ids: false` leaves `token_ids` out of the Parquet
    shards (`num_tokens` stays), at the cost of rewriting each shard as it is published."""

    dtype: Literal["auto", "uint16", "int32"] = "auto"
    keep_token_ids: bool = True

    @field_validator("dtype", mode="before")
    @classmethod
    def _no_uint32(cls, v: Any) -> Any:
        if v == "uint32":
            raise PydanticCustomError("megatron_dtype", "Megatron's .idx has no uint32: use int32 (or auto)")
        return v


class OutputConfig(_Strict):
    path: Annotated[str, _not_blank("a folder or URL")]
    keep_rejected: bool = False
    shard_bytes: int = Field(128 * MiB, gt=0)
    compression: Literal["zstd", "snappy", "gzip", "lz4", "none"] = "zstd"
    megatron: MegatronOutputConfig | None = None
    # Question-answer rows (qa_extract, qa_generate) also as fine-tuning JSONL, OUTPUT/sft/part-NNNNN.jsonl
    sft_format: Literal["alpaca", "sharegpt", "messages"] | None = None
    # Rows of `preference_pairs` as TRL's preference JSONL (DPOTrainer, RewardTrainer), OUTPUT/preference/,
    # and prompts (`prompt`, `instruction` or `question`) as TRL's prompt-only JSONL (PPO), OUTPUT/prompts/:
    # plain strings (standard) or message lists (conversational), io/preference.py
    preference_format: Literal["standard", "conversational"] | None = None
    prompts_format: Literal["standard", "conversational"] | None = None


class RayConfig(_Strict):
    # null: this machine; "auto": the cluster this machine joined (`ray start`); "host:port": a
    # cluster's GCS; "ray://host:port": Ray Client, from a machine outside the cluster.
    address: str | None = None
    # Where tasks run (pipeline/submit.py): `auto` runs a batch that one process would run anyway
    # (one task, or one CPU) in this process, several tasks in worker processes on this machine
    # (started in a fraction of a second, where an embedded Ray takes seconds), and uses Ray when
    # `address` names a cluster or this process already runs Ray; `processes`, `ray` (an embedded
    # Ray when address is null) and `local` (this process, one task after another) always there.
    # Results and resume are the same either way.
    execution: Literal["auto", "processes", "ray", "local"] = "auto"
    num_cpus: int | None = Field(None, gt=0)  # CPUs (worker processes, or the embedded Ray's); null: all this process may use
    object_store_memory: int | None = Field(None, gt=0)
    # How long a run on a cluster waits while no node has a CPU (every worker node lost, or an
    # autoscaler still adding one) before it stops, resumable; the progress line says it waits.
    max_wait_for_cpus_s: float = Field(600.0, gt=0)

    @field_validator("address")
    @classmethod
    def _address_form(cls, value: str | None) -> str | None:
        if value is None or value == "auto":
            return value
        rest = value[len("ray://"):] if value.startswith("ray://") else value
        host, sep, port = rest.rpartition(":")
        if "/" in rest or not sep or not host or not port.isdigit():
            raise ValueError("not auto, HOST:PORT (a cluster's GCS, port 6379 by default) or "
                             "ray://HOST:PORT (Ray Client, port 10001 by default); null runs on this machine")
        return value


class PipelineConfig(_Strict):
    name: str = "pipeline"
    input: InputConfig
    output: OutputConfig
    stages: list[Any] = Field(default_factory=list)
    ray: RayConfig = Field(default_factory=RayConfig)
    storage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The model server of every op that calls one (ylink_data/io/llm/config.py); an op's `llm:` overrides it.
    llm: LLMOverride | None = None
    # Resolved stage list: (op name, validated params), filled in by `validate_config`.
    ops: list[tuple[str, dict[str, Any]]] = Field(default_factory=list, exclude=True)
    # Masks credentials, the values `${VAR}` expanded to included, wherever the config is written or shown.
    _redactor: Redactor = PrivateAttr(default_factory=Redactor)

    def storage_options(self, url: str) -> dict[str, Any]:
        """fsspec options for `url`'s protocol (`storage: {s3: {...}}`)."""
        protocol = url.split("://", 1)[0] if "://" in url else "file"
        aliases = {"s3a": "s3", "gcs": "gs", "https": "http"}
        options = self.storage.get(protocol) or self.storage.get(aliases.get(protocol, "")) or {}
        # An unset `${VAR}` leaves "": drop it so the backend uses its own default (e.g. AWS itself).
        return {k: v for k, v in options.items() if v not in ("", None)}

    def redact(self, value: Any) -> Any:
        """`value` (a dump of this config, a message, a URL) with every credential masked, the
        values read from the environment included: fit for run.json, reports, logs and the console."""
        return self._redactor.redact(value)

    @contextlib.contextmanager
    def redacting_errors(self) -> Iterator[None]:
        """A YlinkError raised inside leaves with its message redacted: storage backends quote
        URLs, and the credentials in them, in their errors."""
        try:
            yield
        except YlinkError as exc:
            exc.args = (self.redact(str(exc)),)
            raise


# ----------------------------------------------------------------------------- loading


def load_config(
    pipeline: str | os.PathLike | dict,
    overrides: list[str] | dict[str, Any] | None = None,
) -> PipelineConfig:
    """Read, merge, override and validate a pipeline; raise ConfigError listing every problem."""
    if isinstance(pipeline, dict):
        raw, base_dir, source = copy.deepcopy(pipeline), Path.cwd(), None
    else:
        path = Path(pipeline)
        source = str(path)
        raw, base_dir = _read_yaml(path), path.resolve().parent
    raw = _apply_includes(raw, base_dir, source, seen=())
    for key, value in _parse_overrides(overrides):
        _set_dotted(raw, key, value, source)
    return validate_config(raw, source)


def validate_config(raw: Any, source: str | None = None) -> PipelineConfig:
    if not isinstance(raw, dict):
        raise ConfigError("the pipeline must be a mapping of keys (name, input, output, stages...)", source)
    if "steps" in raw:
        raise ConfigError("steps: this is a flow (steps of pipelines and commands), not one pipeline: run it with "
                          "`ylink run`, or ylink_data.engine.flow.run_flow(load_flow(PATH))", source)
    raw = dict(raw)
    raw.pop("include", None)
    env = _EnvExpansion()
    raw["storage"] = env.expand(raw.get("storage") or {})
    if raw.get("llm") is not None:
        raw["llm"] = env.expand(raw["llm"])
    if isinstance(raw.get("stages"), list):
        raw["stages"] = [_expand_op_llm(item, env) for item in _choose_stages(raw["stages"], raw, source)]
    from ylink_data.ops import validate_stages  # late import: ops import config helpers

    problems: list[str] = []
    try:
        cfg = PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        problems += [_describe(err, raw) for err in exc.errors()]
    ops: list[tuple[str, dict[str, Any]]] = []
    if isinstance(raw.get("stages"), list):
        try:
            ops = validate_stages(raw["stages"])
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError([redact_text(p, env.values) for p in problems], source)
    if cfg.output.megatron is not None and not any(name == "tokenize" for name, _ in ops):
        raise ConfigError("output.megatron: Megatron files are made of token ids; add a stage "
                          "`- tokenize: {tokenizer: PATH_OR_URL}` (a tokenizer.json)", source)
    problems = _resolve_llm_ops(cfg, ops)
    if problems:
        raise ConfigError([redact_text(p, env.values) for p in problems], source)
    cfg.ops = ops
    cfg._redactor = Redactor.knowing(env.values)
    if cfg.output.path.startswith("memory://"):
        raise ConfigError(
            "output.path: memory:// lives in one process and Ray workers cannot see it; "
            "use a local path or an object-store URL", source)
    return cfg


def _read_yaml(path: Path, what: str = "pipeline") -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} file {path}: {exc}") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid YAML{where}: {problem}", str(path)) from None
    return {} if data is None else data


def load_yaml(text: str) -> Any:
    """YAML text as plain data, safely: no Python objects, and no alias bombs."""
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing aliases that add more than MAX_ALIAS_VALUES values in all, or that
    refer to a node from inside it. Counting while composing stops a bomb before it is built:
    the composed document shares aliased nodes, but everything that walks it later (environment
    expansion, validation, run.json) would copy each one."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._alias_values = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values in it, aliases expanded
        self._open: set[str] = set()  # anchors of the nodes being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and event.anchor in self.anchors:
            if event.anchor in self._open:
                raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} refers to the value "
                                                  "it is in; write the values out", event.start_mark)
            self._alias_values += self._size(self.anchors[event.anchor])
            if self._alias_values > MAX_ALIAS_VALUES:
                raise yaml.composer.ComposerError(None, None, f"aliases expand too far (more than "
                                                  f"{MAX_ALIAS_VALUES:,} values); write the values out",
                                                  event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is None or isinstance(event, yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.discard(anchor)

    def _size(self, node: yaml.Node) -> int:
        if id(node) not in self._sizes:
            if isinstance(node, yaml.SequenceNode):
                size = 1 + sum(self._size(item) for item in node.value)
            elif isinstance(node, yaml.MappingNode):
                size = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
            else:
                size = 1
            self._sizes[id(node)] = size
        return self._sizes[id(node)]


def _apply_includes(raw: Any, base_dir: Path, source: str | None, seen: tuple[Path, ...]) -> Any:
    """Merge `include:` presets under the including file (the includer's keys win), and splice the
    stages of presets named by `- include: PRESET` items into the stage list where they stand."""
    if isinstance(raw, dict) and isinstance(raw.get("stages"), list):
        raw["stages"] = _splice_stage_presets(raw["stages"], base_dir, source, seen)
    if not isinstance(raw, dict) or "include" not in raw:
        return raw
    includes = raw.pop("include")
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError("include: expected a preset path or a list of them", source)
    merged: dict[str, Any] = {}
    for i, name in enumerate(includes):
        sub = _load_preset(name, f"include[{i}]", base_dir, source, seen)
        if not isinstance(sub, dict):
            raise ConfigError(f"include[{i}]: preset {name!r} must be a mapping", source)
        merged = _deep_merge(merged, sub)
    return _deep_merge(merged, raw)


def _splice_stage_presets(stages: list[Any], base_dir: Path, source: str | None,
                          seen: tuple[Path, ...]) -> list[Any]:
    """`- include: filters/gopher-zh` in a stage list becomes that preset's stages, in place, so
    presets compose (a top-level `include:` of two presets would let the second's stages win)."""
    out: list[Any] = []
    for i, item in enumerate(stages):
        if not (isinstance(item, dict) and list(item) == ["include"]):
            out.append(item)
            continue
        name, where = item["include"], f"stages[{i}].include"
        if not isinstance(name, str):
            raise ConfigError(f"{where}: expected a preset path, got {name!r}", source)
        sub = _load_preset(name, where, base_dir, source, seen)
        if not isinstance(sub, dict) or not isinstance(sub.get("stages"), list):
            raise ConfigError(f"{where}: preset {name!r} has no `stages:` list", source)
        out.extend(sub["stages"])
    return out


def _load_preset(name: str, where: str, base_dir: Path, source: str | None, seen: tuple[Path, ...]) -> Any:
    """A preset's content with its own includes applied; `where` names the key in errors."""
    path = _find_preset(name, base_dir)
    if path is None:
        searched = ", ".join(str(d) for d in _preset_dirs(base_dir))
        raise ConfigError(f"{where}: preset {name!r} not found (searched {searched})", source)
    if path in seen:
        raise ConfigError(f"{where}: {name!r} includes itself", source)
    return _apply_includes(_read_yaml(path), path.parent, str(path), (*seen, path))


def _find_preset(name: str, base_dir: Path) -> Path | None:
    candidates = [d / name for d in _preset_dirs(base_dir)]
    candidates += [c.with_suffix(".yaml") for c in candidates if not c.suffix]
    return next((c.resolve() for c in candidates if c.is_file()), None)


def _preset_dirs(base_dir: Path) -> list[Path]:
    return [base_dir, base_dir.parent, Path.cwd() / "configs", BUNDLED_PRESETS]


def _deep_merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _parse_overrides(overrides: list[str] | dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not overrides:
        return []
    if isinstance(overrides, dict):
        return list(overrides.items())
    parsed = []
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set output.path=/tmp/out")
        try:
            value = load_yaml(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        parsed.append((key.strip(), value))
    return parsed


def _set_dotted(raw: dict, dotted: str, value: Any, source: str | None) -> None:
    """Set `a.b.0.c` in nested dicts/lists; a dict value is merged into what is there."""
    parts = dotted.split(".")
    node: Any = raw
    for depth, part in enumerate(parts[:-1]):
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            node = node[_list_index(node, part, where, source)]
        elif isinstance(node, dict):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
        else:
            raise ConfigError(f"--set {dotted}: {where} is not a mapping", source)
    last = parts[-1]
    if isinstance(node, list):
        node[_list_index(node, last, dotted, source)] = value
    elif isinstance(value, dict) and isinstance(node.get(last), dict):
        node[last] = _deep_merge(node[last], value)
    else:
        node[last] = value


def _list_index(node: list, part: str, where: str, source: str | None) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"--set {where}: no list item {part!r} (the list has {len(node)} items)", source)
    return int(part)


# `${VAR}`, or `${VAR:-default}` as in the shell: the default when VAR is unset or empty (written in
# the YAML, so no credential: a local server's address that `ylink validate` can check).
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


_WHEN_KEYS = {"set", "unset", "stages", "else"}


def _choose_stages(stages: list[Any], raw: dict[str, Any], source: str | None, where: str = "stages") -> list[Any]:
    """A stage item `- when: {set: KEY, stages: [...], else: [...]}` becomes its `stages` when the
    config value at dotted KEY is set (present and not empty: an unset `${VAR}` reads as empty),
    else its `else` stages (none if absent); `unset: KEY` is the opposite test. So one pipeline
    runs its model stages only where a model server is given (`set: llm.base_url`)."""
    out: list[Any] = []
    for i, item in enumerate(stages):
        if not (isinstance(item, dict) and list(item) == ["when"]):
            out.append(item)
            continue
        at, when = f"{where}[{i}].when", item["when"]
        if not isinstance(when, dict):
            raise ConfigError(f"{at}: expected {{set: KEY, stages: [...], else: [...]}}, got {when!r}", source)
        unknown = sorted(set(when) - _WHEN_KEYS)
        if unknown:
            raise ConfigError(f"{at}.{unknown[0]}: unknown key; a `when` takes set or unset, stages and else", source)
        tests = [k for k in ("set", "unset") if k in when]
        if len(tests) != 1 or not isinstance(when[tests[0]], str) or not when[tests[0]]:
            raise ConfigError(f"{at}: give one of `set: KEY` or `unset: KEY` (a dotted config key such as "
                              "llm.base_url)", source)
        for key in ("stages", "else"):
            if not isinstance(when.get(key, []), list):
                raise ConfigError(f"{at}.{key}: expected a list of stages", source)
        value: Any = raw
        for part in when[tests[0]].split("."):
            value = value.get(part) if isinstance(value, dict) else None
        is_set = value not in (None, "", [], {})
        chosen, name = (when.get("stages", []), "stages") if is_set == (tests[0] == "set") else (when.get("else", []), "else")
        out.extend(_choose_stages(chosen, raw, source, f"{at}.{name}"))
    return out


def _expand_op_llm(item: Any, env: "_EnvExpansion") -> Any:
    """An op's own `llm:` parameter reads `${VAR}` as the top-level block does (its api_key)."""
    if isinstance(item, dict) and len(item) == 1:
        (name, params), = item.items()
        if isinstance(params, dict) and isinstance(params.get("llm"), dict):
            return {name: {**params, "llm": env.expand(params["llm"])}}
    return item


def _resolve_llm_ops(cfg: PipelineConfig, ops: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Give each op that calls a model (`uses_llm`) its whole `llm` parameter: the pipeline's block
    with the op's own keys on top and the response cache in OUTPUT/llm-cache/ unless set, checked
    as an LLMConfig. Problems name the op's key."""
    from ylink_data.ops import op_class

    block = cfg.llm.model_dump(exclude_none=True) if cfg.llm else {}
    default_cache = cfg.output.path.rstrip("/") + "/llm-cache"
    problems = []
    for i, (name, params) in enumerate(ops):
        if not getattr(op_class(name), "uses_llm", False):
            continue
        merged = resolve_llm(block, params.get("llm"), default_cache)
        try:
            params["llm"] = LLMConfig.model_validate(merged).model_dump()
        except ValidationError as exc:
            for err in exc.errors():
                key = format_loc(err["loc"])
                if err["type"] == "missing":
                    problems.append(f"llm.{key}: {name} (stages[{i}]) calls a model: set `{key}` in the pipeline's "
                                    f"top-level `llm:` block or in the op's own `llm:` parameter")
                else:
                    problems.append(f"stages[{i}].{name}.llm.{key}: {err['msg']}")
    return problems


class _EnvExpansion:
    """`${VAR}` in storage options and `llm:` blocks reads the environment, so credentials stay out of YAML files.
    `values` collects what was put in: each is treated as a credential from then on. Values shared
    by YAML aliases are expanded once per use: the loader already bounds what aliases add."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def expand(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.expand(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        if isinstance(value, str):
            return _ENV_REF.sub(self._lookup, value)
        return value

    def _lookup(self, match: re.Match) -> str:
        found = os.environ.get(match.group(1), "")
        if found:
            self.values.add(found)
            return found
        return match.group(2) or ""


# ----------------------------------------------------------------------------- error messages


def format_loc(loc: tuple | list) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _describe(err: dict, raw: dict, model: type[BaseModel] = PipelineConfig) -> str:
    """One line for one pydantic error of `model` (PipelineConfig, or the mixture YAML's)."""
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
