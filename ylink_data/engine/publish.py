"""Publishing: the final phase's parts become shards of about `shard_bytes` in data/.

Parts are packed in task order, so shard contents depend on the input only. A shard made of one
part is hard-linked (no bytes copied) or server-side copied; several small parts are concatenated
(a part of 4 MiB or more is never rewritten: LINKED_PART_BYTES).
The parts stay until the manifest is written, so a crash mid-publish can simply redo a shard.
With `output.megatron`, the same task writes the shard's Megatron .bin/.idx pair from its
`token_ids` column before the shard's marker, which records the pair's entry; with
`output.sft_format`, `preference_format` or `prompts_format`, likewise its rows as fine-tuning,
preference or prompt JSONL (sft/, preference/, prompts/part-NNNNN.jsonl; pipeline/sft.py).
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import publish_copy, write_json
from ylink_data.io.parquet import ParquetFileWriter
from ylink_data.text.tokens.encode import TOKEN_IDS
from ylink_data.io.megatron.write import write_pair
from ylink_data.io.layout import RunLayout
from ylink_data.engine.megatron import MegatronPlan, pair_prefix
from ylink_data.engine.sft import KINDS, jsonl_columns


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


def publish_shard(layout: RunLayout, index: int, parts: list[dict[str, Any]], compression: str,
                  tier: str | None = None, number: int | None = None,
                  megatron: MegatronPlan | None = None, jsonl: dict[str, str] | None = None) -> dict[str, Any]:
    """Shard `index` of the run (its marker's number); with a tier, shard `number` of that tier.
    With `megatron`, also the shard's .bin/.idx pair (the marker's "megatron" entry); with
    `jsonl` ({kind: format}, pipeline/sft.py), its rows as JSONL of each kind (the marker's entry
    under the kind's name)."""
    jsonl = jsonl or {}
    number = index if tier is None else number
    target = layout.shard(number, tier)
    drop_ids = megatron is not None and not megatron.keep_token_ids
    tables: list[pa.Table] = []  # the shard's rows in order, with the columns its companion files need
    if len(parts) == 1 and not drop_ids:
        publish_copy(layout.fs, parts[0]["path"], target)
        rows, nbytes, sha = parts[0]["rows"], parts[0]["bytes"], parts[0]["sha256"]
        if megatron is not None or jsonl:
            with layout.fs.open(parts[0]["path"], "rb") as f:
                pf = pq.ParquetFile(f)
                tables.append(pf.read(columns=_companion_columns(pf.schema_arrow, megatron, jsonl)))
    else:
        writer = ParquetFileWriter(layout.fs, target, compression)
        for part in parts:
            with layout.fs.open(part["path"], "rb") as f:
                pf = pq.ParquetFile(f)
                wanted = _companion_columns(pf.schema_arrow, megatron, jsonl)
                for i in range(pf.num_row_groups):
                    table = pf.read_row_group(i)
                    if wanted:
                        tables.append(table.select(wanted))
                    writer.write(table.drop_columns([TOKEN_IDS]) if drop_ids else table)
        written = writer.close()
        rows, nbytes, sha = written.rows, written.bytes, written.sha256
    entry = {"path": "/".join((*layout.tier_dir(tier), "data", target.rsplit("/", 1)[-1])), "rows": rows,
             "bytes": nbytes, "sha256": sha}
    if tier is not None:
        entry["tier"] = tier
    if megatron is not None:
        columns = [_token_ids(t, target) for t in tables]
        ids = pa.chunked_array([c for column in columns for c in column.chunks], columns[0].type)
        entry["megatron"] = write_pair(layout.fs, layout.root, pair_prefix(layout, number, tier), ids, megatron.dtype)
    for kind, fmt in jsonl.items():
        path = "/".join((*layout.tier_dir(tier), kind, f"part-{number:05d}.jsonl"))
        entry[kind] = KINDS[kind][2](layout.fs, layout.root, path, tables, fmt)
    write_json(layout.fs, layout.shard_marker(index), entry)
    return entry


def _companion_columns(schema: pa.Schema, megatron: MegatronPlan | None, jsonl: dict[str, str]) -> list[str]:
    """The columns the shard's Megatron pair and JSONL files are made of (those the shard has)."""
    wanted = [TOKEN_IDS] if megatron is not None and TOKEN_IDS in schema.names else []
    return wanted + [c for c in jsonl_columns(schema, jsonl) if c not in wanted]


def _token_ids(table: pa.Table, shard: str) -> pa.ChunkedArray:
    if TOKEN_IDS not in table.column_names:
        raise YlinkError(f"{shard}: its documents have no {TOKEN_IDS} column for output.megatron (is an op "
                         "after `tokenize` dropping it?); keep `tokenize` among the last stages")
    return table.column(TOKEN_IDS)
