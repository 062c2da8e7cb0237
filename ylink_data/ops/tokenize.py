"""tokenize: token ids for training, from a Hugging Face tokenizer.json.

Adds `token_ids` (list<uint16> when the tokenizer's largest id is at most 65,535, else list<uint32>)
and `num_tokens` (int32). Each document's ids are exactly `Tokenizer.encode(text).ids`, followed by
the end-of-document id (`append_eod`, default on: `<|endoftext|>` or the first end token the
vocabulary has, or `eod_token`), of the tokenizer without the padding and truncation an inference
tokenizer.json may switch on (`load_tokenizer` turns them off: a batch encode would pad every
document, and training text is never cut). The tokenizer is read once per worker process, by path or any
fsspec URL (`storage:` options apply). Nothing is dropped; a document with no text gets just the
end-of-document id.

One tokenizer thread per worker core: a Ray task holds one CPU and a worker runs one task at a
time, but the Rust tokenizer's batch encoding runs on a rayon pool as large as the machine, in every
worker. In a Ray worker the op gives it the task's CPUs instead (TOKENIZERS_PARALLELISM=false for
one: encoding stays on the task's own thread; RAYON_NUM_THREADS for more). Measured in
bench/bench_tokenize.py: not slower per core, and no oversubscription.
"""
from __future__ import annotations

from typing import Any

import os

import pyarrow as pa

from ylink_data.core.errors import InputError
from ylink_data.text.tokens.encode import NUM_TOKENS, TOKEN_IDS, encode_texts
from ylink_data.text.tokens.load import LoadedTokenizer, load_tokenizer
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, MapOp, named_files
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext


@register
class Tokenize(MapOp):
    """Adds `token_ids` and `num_tokens`; see the module docstring."""

    name = "tokenize"
    writes_tokens = NUM_TOKENS
    writes_document_tokens = True

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("tokenizer", params.get("tokenizer"))

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return [TOKEN_IDS, NUM_TOKENS]

    def __init__(self, tokenizer: str, append_eod: bool = True, eod_token: str | None = None):
        if not tokenizer.strip():
            raise ValueError("tokenizer: give the path or URL of a tokenizer.json")
        self.tokenizer, self.append_eod, self.eod_token = tokenizer, append_eod, eod_token
        self._tok: LoadedTokenizer | None = None

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        use_task_cpus(ctx.task_cpus)
        try:
            self._tok = load_tokenizer(self.tokenizer, ctx.storage_options(self.tokenizer), self.eod_token)
        except InputError as exc:  # the key to fix, then what is wrong with the file
            key = "eod_token" if self.eod_token is not None and "to end documents with" in str(exc) else "tokenizer"
            raise InputError(f"{self.name}.{key}: {exc}") from None
        if self.append_eod and self._tok.eod_id is None:
            raise InputError(f"{self.name}.tokenizer: {self.tokenizer} has no end-of-document token "
                             "(<|endoftext|>, </s>...): name one with eod_token, or set append_eod: false")

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


def use_task_cpus(cpus: int | None) -> None:
    """Let the tokenizers library use the `cpus` the task holds and no more (`OpContext.task_cpus`;
    None: the library keeps its default)."""
    if cpus is None:
        return
    if cpus <= 1:
        # Read by the library at every batch call: the batch is encoded on the calling thread.
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    else:
        # Read when the rayon pool starts, at the first parallel call of the process.
        os.environ.setdefault("RAYON_NUM_THREADS", str(cpus))
