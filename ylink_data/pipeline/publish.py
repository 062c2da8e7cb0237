"""Publishing: the final phase's parts become shards of about `shard_bytes` in data/.

Parts are packed in task order, so shard contents depend on the input only. A shard made of one
part is hard-linked (no bytes copied) or server-side copied; several parts are concatenated.
The parts stay until the manifest is written, so a crash mid-publish can simply redo a shard.
"""
from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from ..io.fs import publish_copy, write_json
from ..io.parquet import ParquetFileWriter
from .layout import RunLayout


def pack_shards(parts: list[dict[str, Any]], shard_bytes: int) -> list[list[dict[str, Any]]]:
    groups: list[list[dict[str, Any]]] = []
    size = 0
    for part in parts:
        if part["rows"] == 0:
            continue
        if not groups or size + part["bytes"] > shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += part["bytes"]
    return groups


def publish_shard(layout: RunLayout, index: int, parts: list[dict[str, Any]], compression: str,
                  tier: str | None = None, number: int | None = None) -> dict[str, Any]:
    """Shard `index` of the run (its marker's number); with a tier, shard `number` of that tier."""
    target = layout.shard(index if tier is None else number, tier)
    if len(parts) == 1:
        publish_copy(layout.fs, parts[0]["path"], target)
        rows, nbytes, sha = parts[0]["rows"], parts[0]["bytes"], parts[0]["sha256"]
    else:
        writer = ParquetFileWriter(layout.fs, target, compression)
        for part in parts:
            with layout.fs.open(part["path"], "rb") as f:
                pf = pq.ParquetFile(f)
                for i in range(pf.num_row_groups):
                    writer.write(pf.read_row_group(i))
        written = writer.close()
        rows, nbytes, sha = written.rows, written.bytes, written.sha256
    entry = {"path": "/".join((*layout.tier_dir(tier), "data", target.rsplit("/", 1)[-1])), "rows": rows,
             "bytes": nbytes, "sha256": sha}
    if tier is not None:
        entry["tier"] = tier
    write_json(layout.fs, layout.shard_marker(index), entry)
    return entry
