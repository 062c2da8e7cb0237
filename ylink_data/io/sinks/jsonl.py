"""What the JSONL sinks share (`sft.py`, `preference.py`, `prompts.py`): each shard's rows as one
JSONL file of records in one format, `<kind>/part-NNNNN.jsonl`, and a manifest section per kind:

    "<kind>": {"format": F, "rows": N, "files": [{"path", "rows", "bytes", "sha256"}, ...]}

A kind is one subclass: its name (section and folder), its `output:` key (whose value is the
format), the columns its records need (`needed`) and its writer (`write_file`, io/sft.py's
`write_jsonl` underneath), its modules imported when it writes: reading a manifest loads no
pyarrow."""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fsspec

from ylink_data.io.run_files import check_files, listed_entries
from ylink_data.io.sinks.base import Listed, ShardOutput, Sink, relative_to

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class JsonlSink(Sink):
    label = "JSONL"
    named_in_label = True
    format: str = ""

    @classmethod
    def plan(cls, cfg: Any) -> "JsonlSink | None":
        fmt = getattr(cfg.output, cls.key)
        return None if fmt is None else cls(fmt)

    @abstractmethod
    def columns(self, schema: "pa.Schema") -> list[str]:
        """The columns of `schema` its records are made of."""

    @abstractmethod
    def write_file(self, fs: fsspec.AbstractFileSystem, root: str, path: str, tables: list["pa.Table"]) -> dict[str, Any]:
        """Write `root/path` in its format; returns its entry {"path", "rows", "bytes", "sha256"}."""

    def write(self, shard: ShardOutput) -> dict[str, Any]:
        return self.write_file(shard.fs, shard.root, shard.path(self.folder, ".jsonl"), shard.tables)

    def section(self, entries: list[dict[str, Any]], folder: str = "") -> dict[str, Any]:
        if folder:
            entries = [{**f, "path": relative_to(f["path"], folder)} for f in entries
                       if relative_to(f["path"], folder) is not None]
        return {"format": self.format, "rows": sum(f["rows"] for f in entries), "files": entries}

    @classmethod
    def check(cls, fs: fsspec.AbstractFileSystem, root: str, what: str, section: Any,
              seen: dict[str, Any]) -> Listed:
        """{"files": [{"path", "bytes", "sha256"}, ...], ...}, every file checked as a shard is."""
        return Listed(check_files(fs, root, what, section, seen))

    @classmethod
    def listed(cls, section: Any, what: str) -> list[dict[str, Any]]:
        return listed_entries(section, what)
