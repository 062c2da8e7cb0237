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
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from ylink_data.core.errors import ConfigError, YlinkError, format_loc
from ylink_data.io.input_config import InputConfig
from ylink_data.io.llm.config import LLMConfig, LLMOverride, resolve_llm
from ylink_data.core.redaction import Redactor, redact_text
from ylink_data.core.paths import CONFIGS
from ylink_data.core.config_model import MiB, Strict, describe_error, not_blank
from ylink_data.core.env_expansion import EnvExpansion
from ylink_data.core.overrides import deep_merge, parse_overrides, set_dotted
from ylink_data.core.yaml_file import read_yaml

# Presets are looked up next to the including file, then in ./configs and the repository's configs/.
BUNDLED_PRESETS = CONFIGS


class MegatronOutputConfig(Strict):
    """`output.megatron: {}`: a Megatron-LM .bin/.idx pair next to each published shard (needs a
    `tokenize` stage). `dtype: auto` is the tokenizer's (uint16 when its largest id fits, else int32:
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


class OutputConfig(Strict):
    path: Annotated[str, not_blank("a folder or URL")]
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


class RayConfig(Strict):
    # null: this machine; "auto": the cluster this machine joined (`ray start`); "host:port": a
    # cluster's GCS; "ray://host:port": Ray Client, from a machine outside the cluster.
    address: str | None = None
    # Where tasks run (engine/submit.py): `auto` runs a batch that one process would run anyway
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


class PipelineConfig(Strict):
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

    def document_tokens_params(self) -> dict[str, Any] | None:
        """The parameters of the last op whose token ids are a document's own (`Op.writes_document_tokens`:
        `tokenize`), which output.megatron writes; None without one. Sinks ask the config, not the ops."""
        from ylink_data.ops import op_class  # late import, as validate_config's

        found = [params for name, params in self.ops if op_class(name).writes_document_tokens]
        return found[-1] if found else None

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
        raw, base_dir = read_yaml(path), path.resolve().parent
    raw = apply_includes(raw, base_dir, source, seen=())
    for key, value in parse_overrides(overrides, source):
        set_dotted(raw, key, value, source)
    return validate_config(raw, source)


def validate_config(raw: Any, source: str | None = None) -> PipelineConfig:
    if not isinstance(raw, dict):
        raise ConfigError("the pipeline must be a mapping of keys (name, input, output, stages...)", source)
    if "steps" in raw:
        raise ConfigError("steps: this is a flow (steps of pipelines and commands), not one pipeline: run it with "
                          "`ylink run`, or ylink_data.flow.run_flow(ylink_data.flow.load_flow(PATH))", source)
    raw = dict(raw)
    raw.pop("include", None)
    env = EnvExpansion()
    raw["storage"] = env.expand(raw.get("storage") or {})
    if raw.get("llm") is not None:
        raw["llm"] = env.expand(raw["llm"])
    if isinstance(raw.get("stages"), list):
        raw["stages"] = [_expand_op_llm(item, env) for item in _choose_stages(raw["stages"], raw, source)]
    from ylink_data.ops import op_class, validate_stages  # late import: loading the ops is heavy

    problems: list[str] = []
    try:
        cfg = PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        problems += [describe_error(err, PipelineConfig) for err in exc.errors()]
    ops: list[tuple[str, dict[str, Any]]] = []
    if isinstance(raw.get("stages"), list):
        try:
            ops = validate_stages(raw["stages"])
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError([redact_text(p, env.values) for p in problems], source)
    if cfg.output.megatron is not None and not any(op_class(name).writes_document_tokens for name, _ in ops):
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


def apply_includes(raw: Any, base_dir: Path, source: str | None, seen: tuple[Path, ...]) -> Any:
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
        merged = deep_merge(merged, sub)
    return deep_merge(merged, raw)


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
    return apply_includes(read_yaml(path), path.parent, str(path), (*seen, path))


def _find_preset(name: str, base_dir: Path) -> Path | None:
    candidates = [d / name for d in _preset_dirs(base_dir)]
    candidates += [c.with_suffix(".yaml") for c in candidates if not c.suffix]
    return next((c.resolve() for c in candidates if c.is_file()), None)


def _preset_dirs(base_dir: Path) -> list[Path]:
    return [base_dir, base_dir.parent, Path.cwd() / "configs", BUNDLED_PRESETS]


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


def _expand_op_llm(item: Any, env: "EnvExpansion") -> Any:
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
        if not op_class(name).uses_llm:
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


# ----------------------------------------------------------------------------- error messages


