"""Publishing: the final phase's parts become shards of about `shard_bytes` in data/.

Parts are packed in task order, so shard contents depend on the input only (a part of 4 MiB or
more is never rewritten: LINKED_PART_BYTES). One task per shard writes it through every sink the
run has (`ylink_data.io.sinks`: the Parquet shard, then its Megatron pair, its JSONL files...)
before the shard's marker, which records each sink's entry for the manifest.
The parts stay until the manifest is written, so a crash mid-publish can simply redo a shard.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.storage import write_json
from ylink_data.io.layout import RunLayout
from ylink_data.io.manifest import SHARDS
from ylink_data.io.sinks import ShardOutput, Sink


# Merging parts into one shard rewrites them (inflate, re-encode, compress again: about what writing
# them cost) in one task, which runs while every other core waits: a part of this size or more is a
# shard of its own (hard-linked, no byte copied). Only smaller parts are merged, to spare readers a
# crowd of tiny files; a filter that keeps little leaves little to rewrite.
LINKED_PART_BYTES = 4 * 1024 * 1024


def pack_shards(parts: list[dict[str, Any]], shard_bytes: int) -> list[list[dict[str, Any]]]:
    """Consecutive parts into shards of at most `shard_bytes`; a part of min(shard_bytes,
    LINKED_PART_BYTES) or more alone."""
    alone = min(shard_bytes, LINKED_PART_BYTES)
    groups: list[list[dict[str, Any]]] = []
    size = 0
    for part in parts:
        if part["rows"] == 0:
            continue
        big = part["bytes"] >= alone
        if not groups or big or size + part["bytes"] > shard_bytes or groups[-1][-1]["bytes"] >= alone:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += part["bytes"]
    return groups


def publish_shard(layout: RunLayout, index: int, parts: list[dict[str, Any]], sinks: list[Sink],
                  tier: str | None = None, number: int | None = None) -> dict[str, Any]:
    """Shard `index` of the run (its marker's number); with a tier, shard `number` of that tier: its
    Parquet file and every other sink's files of it (`sinks`: `plan_sinks`, Parquet first). The
    marker is the Parquet shard's entry, with each other sink's entry under its name."""
    shard = ShardOutput(layout.fs, layout.root, tier, index if tier is None else number, parts,
                        _companion_tables(layout, parts, sinks),
                        tuple(c for sink in sinks for c in sink.dropped_columns()))
    marker: dict[str, Any] = {}
    for sink in sinks:
        entry = sink.write(shard)
        if sink.name == SHARDS:
            marker.update(entry)
        else:
            marker[sink.name] = entry
    write_json(layout.fs, layout.shard_marker(index), marker)
    return marker


def _companion_tables(layout: RunLayout, parts: list[dict[str, Any]], sinks: list[Sink]) -> list[pa.Table]:
    """The shard's rows in order, each part with the columns the sinks other than Parquet are made of
    (those it has); none when there are no such sinks."""
    if not any(sink.name != SHARDS for sink in sinks):
        return []
    tables = []
    for part in parts:
        with layout.fs.open(part["path"], "rb") as f:
            pf = pq.ParquetFile(f)
            wanted: list[str] = []
            for sink in sinks:
                wanted += [c for c in sink.columns(pf.schema_arrow) if c not in wanted]
            tables.append(pf.read(columns=wanted))
    return tables
