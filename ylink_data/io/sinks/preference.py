"""`output.preference_format`: each shard's preference pairs (`preference_pairs`' prompt, chosen,
rejected) as TRL's JSONL, `preference/part-NNNNN.jsonl` (io/preference.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import fsspec

from ylink_data.io.sinks.base import register
from ylink_data.io.sinks.jsonl import JsonlSink

if TYPE_CHECKING:
    import pyarrow as pa


@register
class PreferenceSink(JsonlSink):
    name = "preference"
    key = "preference_format"
    makers = ("preference_pairs",)

    @classmethod
    def columns_needed(cls) -> tuple[tuple[str, ...], ...]:
        from ylink_data.io.preference import PREFERENCE_COLUMNS

        return (PREFERENCE_COLUMNS,)

    def columns(self, schema: "pa.Schema") -> list[str]:
        from ylink_data.io.preference import preference_needed

        return preference_needed(schema)

    def write_file(self, fs: fsspec.AbstractFileSystem, root: str, path: str, tables: list["pa.Table"]) -> dict[str, Any]:
        from ylink_data.io.preference import write_preference_jsonl

        return write_preference_jsonl(fs, root, path, tables, self.format)
