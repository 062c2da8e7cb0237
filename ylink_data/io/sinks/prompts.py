"""`output.prompts_format`: each shard's distinct prompts as TRL's prompt-only JSONL,
`prompts/part-NNNNN.jsonl` (io/preference.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import fsspec

from ylink_data.io.sinks.base import register
from ylink_data.io.sinks.jsonl import JsonlSink

if TYPE_CHECKING:
    import pyarrow as pa


@register
class PromptsSink(JsonlSink):
    name = "prompts"
    key = "prompts_format"
    makers = ("instruct_generate", "preference_pairs", "qa_extract", "qa_generate", "respond")

    @classmethod
    def columns_needed(cls) -> tuple[tuple[str, ...], ...]:
        from ylink_data.io.preference import PROMPT_COLUMNS

        return tuple((c,) for c in PROMPT_COLUMNS)

    def columns(self, schema: "pa.Schema") -> list[str]:
        from ylink_data.io.preference import prompts_needed

        return prompts_needed(schema)

    def write_file(self, fs: fsspec.AbstractFileSystem, root: str, path: str, tables: list["pa.Table"]) -> dict[str, Any]:
        from ylink_data.io.preference import write_prompts_jsonl

        return write_prompts_jsonl(fs, root, path, tables, self.format)
