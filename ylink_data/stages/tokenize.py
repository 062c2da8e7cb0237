"""tokenize: token ids for training, from a Hugging Face tokenizer.json.

Adds `token_ids` (list<uint16> when the vocabulary holds at most 65,536 tokens, else list<uint32>)
and `num_tokens` (int32). Each document's ids are exactly `Tokenizer.encode(text).ids`, followed by
the end-of-document id (`append_eod`, default on: `<|endoftext|>` or the first end token the
vocabulary has, or `eod_token`). The tokenizer is read once per worker process, by path or any
fsspec URL (`storage:` options apply). Nothing is dropped; a document with no text gets just the
end-of-document id.
"""
from __future__ import annotations

import pyarrow as pa

from ..tokens.encode import NUM_TOKENS, TOKEN_IDS, encode_texts
from ..tokens.load import LoadedTokenizer, load_tokenizer
from . import register
from .base import BatchResult, MapOp


@register
class Tokenize(MapOp):
    """Adds `token_ids` and `num_tokens`; see the module docstring."""

    name = "tokenize"

    def __init__(self, tokenizer: str, append_eod: bool = True, eod_token: str | None = None):
        if not tokenizer.strip():
            raise ValueError("tokenizer: give the path or URL of a tokenizer.json")
        self.tokenizer, self.append_eod, self.eod_token = tokenizer, append_eod, eod_token
        self._tok: LoadedTokenizer | None = None

    def setup(self) -> None:
        self._tok = load_tokenizer(self.tokenizer, self.storage_options(self.tokenizer), self.eod_token)
        if self.append_eod and self._tok.eod_id is None:
            from ..errors import InputError
            raise InputError(f"tokenizer {self.tokenizer} has no end-of-document token (<|endoftext|>, </s>...): "
                             "name one with eod_token, or set append_eod: false")

    @property
    def loaded(self) -> LoadedTokenizer:
        if self._tok is None:
            self.setup()
        return self._tok

    def process(self, table: pa.Table) -> BatchResult:
        texts = table.column("text").to_pylist()
        token_ids, num_tokens = encode_texts(self.loaded, [t or "" for t in texts], self.append_eod)
        for name in (TOKEN_IDS, NUM_TOKENS):  # a second tokenize replaces the first's columns
            if name in table.column_names:
                table = table.drop_columns([name])
        return BatchResult(table.append_column(TOKEN_IDS, token_ids).append_column(NUM_TOKENS, num_tokens))
