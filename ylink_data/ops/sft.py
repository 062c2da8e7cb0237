"""sft_tokenize: chat rows (read with `input.chat: true`) to supervised fine-tuning tokens.

Each row's conversation (OpenAI `messages`, ShareGPT or Alpaca; `format: auto` tells them apart per
row, `ylink_data/text/tokens/chat.py`) is checked, rendered with a Jinja2 chat template (`chat_template:`
inline, or the `chat_template` of a Hugging Face `tokenizer_config.json` by path or URL; default the
bundled ChatML, `ylink_data/assets/chat_templates/`) and tokenized by the tokenizer.json at
`tokenizer` (`ylink_data/text/tokens/sft.py`). Adds `token_ids` (list<uint16|uint32>, exactly
`encode(rendered, add_special_tokens=False).ids`), `loss_mask` (list<uint8>: 1 on the assistant
answers and their end-of-turn tokens) and `num_tokens` (int32). `text` stays the conversation as
read.

Drops, each with its reason: a malformed conversation `sft_tokenize:<rule>` (the rules of
tokens/chat.py), `template_error` (the template's `raise_exception`, or any error it raises while
rendering), `template_not_incremental`, and `too_long` past `max_tokens` — unless `truncate: true`
keeps the first `max_tokens` tokens (dropped as `too_long` all the same when no answer token is left).
"""
from __future__ import annotations

from typing import Any, Literal

import jinja2
import numpy as np
import pyarrow as pa
from pydantic import PositiveInt

from ylink_data.text.tokens.chat import Malformed, parse_row, to_messages
from ylink_data.text.tokens.encode import NUM_TOKENS, TOKEN_IDS, ids_to_arrow
from ylink_data.text.tokens.load import LoadedTokenizer, load_tokenizer
from ylink_data.text.tokens.pack import LOSS_MASK
from ylink_data.core.errors import InputError
from ylink_data.text.tokens.sft import ChatTemplate, compile_template, encode_rendered, load_chat_template, render_with_spans
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, MapOp, named_files
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext


@register
class SftTokenize(MapOp):
    """Adds `token_ids`, `loss_mask` and `num_tokens` to chat rows; see the module docstring.
    `alternate` (default on) drops conversations whose user and assistant turns do not take turns,
    which most templates (and most trainers' assumptions) require."""

    name = "sft_tokenize"
    writes_tokens = NUM_TOKENS

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("tokenizer", params.get("tokenizer")) + named_files("tokenizer_config",
                                                                              params.get("tokenizer_config"))

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return [TOKEN_IDS, LOSS_MASK, NUM_TOKENS]

    def __init__(self, tokenizer: str, chat_template: str | None = None, tokenizer_config: str | None = None,
                 format: Literal["auto", "messages", "sharegpt", "alpaca"] = "auto",
                 max_tokens: PositiveInt | None = None, truncate: bool = False, alternate: bool = True,
                 bos_token: str | None = None, eos_token: str | None = None):
        if not tokenizer.strip():
            raise ValueError("tokenizer: give the path or URL of a tokenizer.json")
        if chat_template is not None and tokenizer_config is not None:
            raise ValueError("give chat_template (the template's text) or tokenizer_config (a tokenizer_config.json "
                             "holding one), not both")
        if truncate and max_tokens is None:
            raise ValueError("truncate: true needs max_tokens")
        self.tokenizer, self.chat_template, self.tokenizer_config = tokenizer, chat_template, tokenizer_config
        self.format, self.max_tokens, self.truncate, self.alternate = format, max_tokens, truncate, alternate
        self.special_tokens = {k: v for k, v in (("bos_token", bos_token), ("eos_token", eos_token)) if v is not None}
        if chat_template is not None:
            try:
                compile_template(chat_template)  # a syntax error is a config error, before any work
            except InputError as exc:
                raise ValueError(f"chat_template: {exc}") from None
        self._tok: LoadedTokenizer | None = None
        self._template: ChatTemplate | None = None

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        self._tok = load_tokenizer(self.tokenizer, ctx.storage_options(self.tokenizer))
        options = ctx.storage_options(self.tokenizer_config) if self.tokenizer_config else None
        self._template = load_chat_template(self.chat_template, self.tokenizer_config, options, self.special_tokens)

    def _conversation(self, text: str | None) -> tuple[str, list[tuple[int, int]]]:
        messages = to_messages(parse_row(text or ""), self.format, self.alternate)
        try:
            return render_with_spans(self._template, messages)
        except jinja2.TemplateError as exc:
            raise Malformed("template_error", str(exc)) from None

    def process(self, table: pa.Table) -> BatchResult:
        if self._tok is None:
            self.setup()
        dropped: list[str | None] = [None] * table.num_rows
        errors: list[str | None] = [None] * table.num_rows
        rendered, rows = [], []
        for i, text in enumerate(table.column("text").to_pylist()):
            try:
                rendered.append(self._conversation(text))
                rows.append(i)
            except Malformed as exc:
                dropped[i] = f"{self.name}:{exc.rule}"
            except Exception as exc:  # a template's own bug on one row must not stop the task: quarantine it
                errors[i] = f"{type(exc).__name__}: {exc}"
        ids: list[list[int]] = [[] for _ in range(table.num_rows)]
        masks: list[np.ndarray] = [np.zeros(0, np.uint8)] * table.num_rows
        for i, (row_ids, mask) in zip(rows, encode_rendered(self._tok.tokenizer, rendered)):
            if self.max_tokens is not None and len(row_ids) > self.max_tokens:
                if not self.truncate or not mask[:self.max_tokens].any():
                    dropped[i] = f"{self.name}:too_long"
                    continue
                row_ids, mask = row_ids[:self.max_tokens], mask[:self.max_tokens]
            ids[i], masks[i] = row_ids, mask
        token_ids, num_tokens = ids_to_arrow(ids, self._tok.dtype)
        flat_mask = np.concatenate(masks) if masks else np.zeros(0, np.uint8)
        loss_mask = type(token_ids).from_arrays(token_ids.offsets, pa.array(flat_mask, pa.uint8()))
        for name in (TOKEN_IDS, LOSS_MASK, NUM_TOKENS):  # a second sft_tokenize replaces the first's columns
            if name in table.column_names:
                table = table.drop_columns([name])
        table = table.append_column(TOKEN_IDS, token_ids).append_column(LOSS_MASK, loss_mask)
        return BatchResult(table.append_column(NUM_TOKENS, num_tokens), dropped=dropped if any(dropped) else None,
                           errors=errors if any(errors) else None)
