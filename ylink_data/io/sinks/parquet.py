"""The sink every run has: the kept documents as Parquet shards, `data/part-NNNNN.parquet` (a tier's
under `tiers/<tier>/data/`), listed in the manifest's `shards`:

    "shards": [{"path": "data/part-00000.parquet", "rows": N, "bytes": B, "sha256": "...",
                "tier": "high" (runs with output tiers only)}, ...]

A shard made of one part is hard-linked (no bytes copied) or server-side copied; several small parts
are concatenated (engine/publish.py packs them). The parts stay until the manifest is written, so a
crash mid-publish can simply redo a shard.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fsspec

from ylink_data.core.storage import join, publish_copy
from ylink_data.io.run_files import ManifestError, RunFile, ShardRef, check_file, count, json_type
from ylink_data.io.sinks.base import Listed, ShardOutput, Sink, register, relative_to


@dataclass(frozen=True)
class RunShard:
    """One checked manifest entry: its path inside the run folder (normalised, "data/part-00000.parquet"),
    its row count, and where to fetch it."""

    path: str
    rows: int
    ref: ShardRef


@dataclass
class ListedShards(Listed):
    shards: list[RunShard]


@register
@dataclass(frozen=True)
class ParquetShards(Sink):
    name = "shards"
    folder = "data"
    label = "shards"
    compression: str = "zstd"

    @classmethod
    def plan(cls, cfg: Any) -> "ParquetShards":
        return cls(cfg.output.compression)

    def write(self, shard: ShardOutput) -> dict[str, Any]:
        """The shard's Parquet file of `shard.schema`: its one part linked when it holds just that, else
        its parts rewritten into it; its entry is the shard's publish marker."""
        import pyarrow as pa

        from ylink_data.core.schema import DOCUMENT_SCHEMA
        from ylink_data.io.parquet import file_schema, rewrite

        path = shard.path(self.folder, ".parquet")
        target = join(shard.root, path)
        parts = shard.parts
        schema = shard.schema
        if schema is None:
            own = file_schema(shard.fs, parts[0]["path"]) if parts else DOCUMENT_SCHEMA
            schema = pa.schema([f for f in own if f.name not in shard.dropped])
        if len(parts) == 1 and file_schema(shard.fs, parts[0]["path"]) == schema:
            publish_copy(shard.fs, parts[0]["path"], target)
            rows, nbytes, sha = parts[0]["rows"], parts[0]["bytes"], parts[0]["sha256"]
        else:
            written = rewrite(shard.fs, [part["path"] for part in parts], target, schema, self.compression)
            rows, nbytes, sha = written.rows, written.bytes, written.sha256
        entry = {"path": path, "rows": rows, "bytes": nbytes, "sha256": sha}
        if shard.tier is not None:
            entry["tier"] = shard.tier
        return entry

    def section(self, entries: list[dict[str, Any]], folder: str = "") -> list[dict[str, Any]]:
        """The manifest's shards; a tier's without their "tier" key, paths relative to its folder."""
        if not folder:
            return entries
        out = []
        for entry in entries:
            path = relative_to(entry["path"], folder)
            if path is not None:
                out.append({k: v for k, v in entry.items() if k != "tier"} | {"path": path})
        return out

    @classmethod
    def check(cls, fs: fsspec.AbstractFileSystem, root: str, what: str, section: Any,
              seen: dict[str, Any]) -> ListedShards:
        shards = []
        for index, entry in enumerate(section):
            shard = _check_shard(fs, root, f"{what} shard {index}", entry)
            if shard.path in seen:
                raise ManifestError(f"{what} shard {index}: path {shard.path!r} is also shard {seen[shard.path]}; "
                                    "a run lists each shard once, refusing it")
            seen[shard.path] = index
            shards.append(shard)
        return ListedShards([RunFile(s.path, s.ref) for s in shards], shards)

    @classmethod
    def listed(cls, section: Any, what: str) -> list[dict[str, Any]]:
        if not isinstance(section, list) or not all(isinstance(s, dict) for s in section):
            raise ManifestError(f"{what}: the shard list is unreadable")
        return section


def _check_shard(fs: fsspec.AbstractFileSystem, root: str, what: str, entry: Any) -> RunShard:
    if not isinstance(entry, dict):
        raise ManifestError(f"{what}: a JSON {json_type(entry)}, not an object with path, rows, bytes and sha256")
    file = check_file(fs, root, what, entry)
    rows = count(entry, "rows", what)
    if rows > file.ref.size:  # every row holds at least its own id: a shard has fewer rows than bytes
        raise ManifestError(f"{what}: rows {rows} in a shard of {file.ref.size} bytes is impossible; refusing it")
    return RunShard(path=file.path, rows=rows, ref=file.ref)
