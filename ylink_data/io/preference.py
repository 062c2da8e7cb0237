"""Preference pairs and prompts as the JSONL that TRL's trainers read, in TRL's two formats
(TRL documentation, "Dataset formats and types"):

- preference (DPOTrainer, RewardTrainer), from `preference_pairs`' `prompt`/`chosen`/`rejected`:
    standard:       {"prompt": P, "chosen": C, "rejected": R}
    conversational: {"prompt": [{"role": "user", "content": P}],
                     "chosen": [{"role": "assistant", "content": C}],
                     "rejected": [{"role": "assistant", "content": R}]}
- prompt-only (PPO, RLOO, GRPO, online DPO), from `prompt`, else `instruction`, else `question`:
    standard:       {"prompt": P}
    conversational: {"prompt": [{"role": "user", "content": P}]}
  once per distinct prompt of the shard (the responses and pairs of one instruction share it).

Records hold only these keys, as the trainers expect; the provenance of each pair (ids, scores,
margin) is in the run's Parquet shards, row for row in the same order.
"""
from __future__ import annotations

from typing import Any, Iterable

import fsspec
import pyarrow as pa

from ylink_data.core.errors import YlinkError
from ylink_data.io.sft import write_jsonl

FORMATS = ("standard", "conversational")
PREFERENCE_COLUMNS = ("prompt", "chosen", "rejected")
PROMPT_COLUMNS = ("prompt", "instruction", "question")  # the first one a table has


def preference_needed(schema: pa.Schema) -> list[str]:
    return [c for c in PREFERENCE_COLUMNS if c in schema.names]


def prompts_needed(schema: pa.Schema) -> list[str]:
    return [c for c in PROMPT_COLUMNS if c in schema.names]


def _turn(fmt: str, role: str, text: str) -> Any:
    return [{"role": role, "content": text}] if fmt == "conversational" else text


def preference_record(fmt: str, prompt: str, chosen: str, rejected: str) -> dict[str, Any]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown preference format {fmt!r}; one of {', '.join(FORMATS)}")
    return {"prompt": _turn(fmt, "user", prompt), "chosen": _turn(fmt, "assistant", chosen),
            "rejected": _turn(fmt, "assistant", rejected)}


def write_preference_jsonl(fs: fsspec.AbstractFileSystem, root: str, path: str, tables: Iterable[pa.Table],
                           fmt: str) -> dict[str, Any]:
    """One record per row of `tables`; rows without the pair columns are an error (one line)."""
    def records(table: pa.Table) -> list[dict[str, Any]]:
        missing = [c for c in PREFERENCE_COLUMNS if c not in table.column_names]
        if missing and table.num_rows:
            raise YlinkError(f"output.preference_format: the documents have no {', '.join(missing)} column; "
                             "add `preference_pairs` (after `respond` and `judge`) to the stages")
        columns = [table.column(c).to_pylist() for c in PREFERENCE_COLUMNS] if table.num_rows else [[], [], []]
        return [preference_record(fmt, p, c, r) for p, c, r in zip(*columns)]

    return write_jsonl(fs, root, path, tables, records)


def write_prompts_jsonl(fs: fsspec.AbstractFileSystem, root: str, path: str, tables: Iterable[pa.Table],
                        fmt: str) -> dict[str, Any]:
    """One record per distinct prompt of `tables`, in order of first appearance."""
    seen: set[str] = set()

    def records(table: pa.Table) -> list[dict[str, Any]]:
        column = next((c for c in PROMPT_COLUMNS if c in table.column_names), None)
        if column is None:
            if table.num_rows:
                raise YlinkError("output.prompts_format: the documents have no prompt, instruction or question "
                                 "column; add an op that makes them (instruct_generate, qa_generate)")
            return []
        out = []
        for prompt in table.column(column).to_pylist():
            if prompt and prompt not in seen:
                seen.add(prompt)
                out.append({"prompt": _turn(fmt, "user", prompt)})
        return out

    return write_jsonl(fs, root, path, tables, records)
