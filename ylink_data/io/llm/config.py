"""The `llm:` block: which OpenAI-compatible server answers, with which model and sampling, and how
hard to try. One top-level block serves every op that calls a model; an op's own `llm:` parameter
overrides any of its keys (a judge on another endpoint, say).

    llm:
      base_url: http://127.0.0.1:8000/v1     # vLLM, SGLang, llama.cpp's server, Ollama, a hosted API
      model: Qwen2.5-7B-Instruct
      api_key: ${LLM_API_KEY}                 # read from the environment, masked everywhere
      max_concurrency: 16                     # requests in flight per worker process
      timeout_s: 120
      max_retries: 5
      temperature: 0.2
      seed: 0

`${VAR}` is expanded by config.py, which treats every value it read as a credential from then on; the
`api_key` and `headers` keys are masked by name too (redaction.py), so neither reaches run.json,
stats, quarantine files, reports or the console; and the client masks their values, in any case,
in whatever a server answers (client.py), so a server quoting them back puts them in no output.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

# Defaults, ours: a local server takes 16 concurrent requests comfortably (vLLM batches them), a
# long answer from a 7B model on one GPU takes well under 2 minutes, and 5 retries with backoff
# from 1 s ride out a server restart of about half a minute.
DEFAULT_CONCURRENCY = 16
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 5

# The keys whose values change what the server answers: the response cache's key and the run's
# fingerprint hold these. Where the server is, how many requests run at once, how long to wait
# and credentials do not change an answer (moving a model to another server is no new run).
ANSWER_KEYS = ("model", "temperature", "top_p", "max_tokens", "seed", "extra_body")


def _http_url(v: str | None) -> str | None:
    if not v:  # unset, or an unset ${VAR}: no server (an op that calls one says so)
        return None
    if not v.startswith(("http://", "https://")):
        raise PydanticCustomError("http_url", "base_url must be an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
    return v.rstrip("/") if v else v


class LLMOverride(BaseModel):
    """The pipeline's top-level `llm:` block as written, and an op's own `llm:` parameter: any key
    of LLMConfig, each optional (an op's key replaces the block's); the op checks the merged whole."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    headers: dict[str, str] | None = None
    max_concurrency: Annotated[int, Field(ge=1, le=4096)] | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = None
    max_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    backoff_s: Annotated[float, Field(ge=0, le=600)] | None = None
    max_backoff_s: Annotated[float, Field(ge=0, le=3600)] | None = None
    max_unreachable_share: Annotated[float, Field(ge=0, le=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    seed: int | None = None
    extra_body: dict[str, Any] | None = None
    cache: bool | None = None
    cache_dir: str | None = None

    _base_url = field_validator("base_url")(classmethod(lambda cls, v: _http_url(v)))


class LLMConfig(BaseModel):
    """The resolved block an op calls its model with (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    # Unset or empty (an unset ${VAR}): no key, as local servers need none.
    api_key: str | None = None
    # Extra HTTP headers (an organisation, a gateway's routing); masked in run.json like the key.
    headers: dict[str, str] = Field(default_factory=dict)
    max_concurrency: Annotated[int, Field(ge=1, le=4096)] = DEFAULT_CONCURRENCY
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = DEFAULT_TIMEOUT_S
    max_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_RETRIES
    # Exponential backoff: the k-th retry waits a random time in [0, backoff_s * 2**k] ("full
    # jitter"), at most max_backoff_s; a Retry-After header is waited for instead, up to max_backoff_s.
    backoff_s: Annotated[float, Field(ge=0, le=600)] = 1.0
    max_backoff_s: Annotated[float, Field(ge=0, le=3600)] = 60.0
    # More than this share of one batch's requests unable to connect to the server stops the run
    # unfinished (client.py): a server that is down quarantines no row. Half (ours): failing to
    # connect after max_retries is never the row's fault, and a blip in a large batch costs a few
    # rows, not the run; 1 turns it off.
    max_unreachable_share: Annotated[float, Field(ge=0, le=1)] = 0.5
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    seed: int | None = None
    # Server-specific request fields (vLLM's `guided_json`, `top_k`...), sent as they are.
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # Responses kept by (model, messages, parameters): a resumed or rerun pipeline asks nothing twice.
    cache: bool = True
    # Where: any fsspec folder; unset, the run's OUTPUT/llm-cache/ (config.py fills it in).
    cache_dir: str | None = None

    _base_url = field_validator("base_url")(classmethod(lambda cls, v: _http_url(v)))

    def answer_params(self) -> dict[str, Any]:
        """The keys that change an answer, unset ones left out (see ANSWER_KEYS)."""
        dump = self.model_dump()
        return {k: dump[k] for k in ANSWER_KEYS if dump[k] not in (None, {})}


def resolve_llm(block: dict[str, Any] | None, override: dict[str, Any] | None,
                cache_dir: str | None) -> dict[str, Any]:
    """The pipeline's `llm:` block with an op's override on top (unset keys left alone), and the
    default cache folder filled in: the raw dict an op validates as an `LLMConfig`."""
    merged = {k: v for k, v in (block or {}).items() if v is not None}
    merged.update({k: v for k, v in (override or {}).items() if v is not None})
    if merged.get("cache_dir") is None and cache_dir is not None:
        merged["cache_dir"] = cache_dir
    return merged


def fingerprint_llm(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """An op's resolved `llm` parameter as the run's fingerprint holds it: only what changes an answer
    (no key, no server address, no concurrency), so rotating a key or moving a server resumes."""
    if not params:
        return params
    return {k: params[k] for k in ANSWER_KEYS if params.get(k) not in (None, {})}
