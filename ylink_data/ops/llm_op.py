"""The base of every op that calls a model: its `llm` parameter (the pipeline's `llm:` block with
the op's own keys on top, resolved by config.py before any work starts), one client per worker
built in `setup`, and the client's usage counters reported with each batch."""
from __future__ import annotations

from typing import Any, ClassVar

from ylink_data.ops.base import MapOp
from ylink_data.io.llm.client import LLMClient
from ylink_data.io.llm.config import LLMConfig, fingerprint_llm
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext


class LLMOp(MapOp):
    """Subclasses take `llm: LLMOverride | None = None` in `__init__` and store it as `self.llm`."""

    uses_llm: ClassVar[bool] = True  # config.py resolves the `llm` parameter of such ops
    llm: dict[str, Any] | None = None
    _client: LLMClient | None = None

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        if self._client is None:
            config = self.llm_config()
            options = ctx.storage_options(config.cache_dir) if config.cache_dir else {}
            self._client = LLMClient(config, options)

    def teardown(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def llm_config(self) -> LLMConfig:
        if not self.llm or "base_url" not in self.llm or "model" not in self.llm:
            raise ValueError(f"{self.name} calls a model: give it an `llm:` block with base_url and model")
        return LLMConfig.model_validate(self.llm)

    @property
    def client(self) -> LLMClient:
        self.setup()
        return self._client

    @classmethod
    def fingerprint_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The op's parameters as the run's fingerprint holds them: of `llm`, only what changes an
        answer (io/llm/config.py ANSWER_KEYS), so a new key or server resumes the run."""
        return {**params, "llm": fingerprint_llm(params.get("llm"))}
