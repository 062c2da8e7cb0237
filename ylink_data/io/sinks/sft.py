"""`output.sft_format`: each shard's question-answer (or instruction-response) rows as fine-tuning
JSONL, `sft/part-NNNNN.jsonl`, in the layout the format names (io/sft.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import fsspec

from ylink_data.io.sinks.base import register
from ylink_data.io.sinks.jsonl import JsonlSink

if TYPE_CHECKING:
    import pyarrow as pa


@register
class SftSink(JsonlSink):
    name = "sft"
    key = "sft_format"
    makers = ("qa_extract", "qa_generate", "respond")

    @classmethod
    def columns_needed(cls) -> tuple[tuple[str, ...], ...]:
        from ylink_data.io.sft import PAIR_COLUMNS

        return PAIR_COLUMNS

    def columns(self, schema: "pa.Schema") -> list[str]:
        from ylink_data.io.sft import needed_columns

        return needed_columns(schema)

    def write_file(self, fs: fsspec.AbstractFileSystem, root: str, path: str, tables: list["pa.Table"]) -> dict[str, Any]:
        from ylink_data.io.sft import write_sft_jsonl

        return write_sft_jsonl(fs, root, path, tables, self.format)
