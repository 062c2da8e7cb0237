"""The mixture YAML of `ylink mix`, validated as pipelines are (`config.py`): read with the bounded
safe loader, every problem one line naming its key (with "did you mean" for a typo), `${VAR}` in
`storage:` read from the environment and masked wherever the mixture is shown, `--set KEY=VALUE`.

    name: web-mix
    sources:                                   # runs, tiers of runs, or materialised mixtures
      - {path: out/en-run, weight: 0.6}
      - {path: s3://bucket/zh-run/tiers/high, weight: 0.4}
    tokens: 1_000_000                          # the budget
    seed: 0
    max_epochs: 4
    output: {path: out/web-mix, materialize: false}
    storage: {}
"""
from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path
from typing import Annotated, Any, Iterator

from pydantic import Field, PrivateAttr, ValidationError

from ylink_data.core.config_model import Strict, describe_error, not_blank
from ylink_data.core.env_expansion import EnvExpansion
from ylink_data.core.overrides import parse_overrides, set_dotted
from ylink_data.core.yaml_file import read_yaml
from ylink_data.engine.config import PipelineConfig
from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.core.redaction import Redactor, redact_text


class MixSource(Strict):
    path: Annotated[str, not_blank("a run, a tier or a mixture folder (path or URL)")]
    # A share of the mixture's tokens: weights are normalised, so 0.6/0.4 and 3/2 are the same mixture.
    weight: float = Field(gt=0, allow_inf_nan=False)


class MixOutput(Strict):
    path: Annotated[str, not_blank("a folder or URL")]
    # Write the chosen documents, shuffled, as Megatron pairs (a run of its own: the token loader
    # reads it, another mixture takes it as a source); otherwise only mixture.json and the blend file.
    materialize: bool = False
    # Tokens per materialised .bin (whole documents, so a pair may pass it by one document):
    # 64 Mi uint16 tokens are 128 MiB, output.shard_bytes' default for Parquet shards.
    shard_tokens: int = Field(64 * 2 ** 20, gt=0, le=2 ** 40)


class MixConfig(Strict):
    name: str = "mixture"
    sources: list[MixSource] = Field(min_length=1)
    tokens: int = Field(gt=0, le=2 ** 62)
    seed: int = Field(0, ge=0, le=2 ** 63 - 1)
    # Repeating a source is a choice made in the YAML: by default no source is taken more than once
    # over. (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models", found up to about 4
    # epochs nearly as good as new data: the usual value to allow.)
    max_epochs: float = Field(1.0, gt=0, allow_inf_nan=False)
    output: MixOutput
    storage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    _redactor: Redactor = PrivateAttr(default_factory=Redactor)
    _source: str | None = PrivateAttr(default=None)

    def storage_options(self, url: str) -> dict[str, Any]:
        """fsspec options for `url`'s protocol, as a pipeline's `storage:` gives them."""
        return PipelineConfig.storage_options(self, url)  # type: ignore[arg-type] - reads .storage only

    def redact(self, value: Any) -> Any:
        return self._redactor.redact(value)

    def error(self, problem: str) -> ConfigError:
        """A ConfigError naming the mixture file, credentials masked."""
        return ConfigError(self._redactor.redact_text(problem), self._source)

    @contextlib.contextmanager
    def redacting_errors(self) -> Iterator[None]:
        try:
            yield
        except YlinkError as exc:
            exc.args = (self._redactor.redact_text(str(exc)),)
            raise


def load_mix_config(mixture: str | os.PathLike | dict, overrides: list[str] | dict[str, Any] | None = None) -> MixConfig:
    """Read, override and validate a mixture YAML; a ConfigError lists every problem by key."""
    if isinstance(mixture, dict):
        raw, source = copy.deepcopy(mixture), None
    else:
        raw, source = read_yaml(Path(mixture), "mixture"), str(mixture)
    if not isinstance(raw, dict):
        raise ConfigError("the mixture must be a mapping of keys (name, sources, tokens, output...)", source)
    for key, value in parse_overrides(overrides, source):
        set_dotted(raw, key, value, source)
    env = EnvExpansion()
    raw["storage"] = env.expand(raw.get("storage") or {})
    try:
        cfg = MixConfig.model_validate(raw)
    except ValidationError as exc:
        problems = [redact_text(describe_error(err, MixConfig), env.values) for err in exc.errors()]
        raise ConfigError(problems, source) from None
    cfg._redactor = Redactor.knowing(env.values)
    cfg._source = source
    return cfg
