"""Question–answer and instruction–response rows as fine-tuning JSONL, in the layouts common
trainers read (Q: `question` or `instruction`, A: `answer` or `response`):

- `alpaca`:   {"instruction": Q, "input": "", "output": A}                     (Alpaca, LLaMA-Factory)
- `sharegpt`: {"conversations": [{"from": "human", "value": Q}, {"from": "gpt", "value": A}]}
- `messages`: {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": A}]}
              (OpenAI fine-tuning, TRL's SFTTrainer)

Every record also keeps where the pair came from under "meta": the row's id, source file, URL and
whichever provenance columns the run has (page range, chunk, heading path, how the pair was found,
the instruction and score of a generated response), so a pair in a training set can always be
traced back to its document. `write_jsonl` is the one way a publish task writes a JSONL file
beside its shard (this, io/preference.py).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable

import fsspec
import pyarrow as pa

from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import HashingWriter, atomic_write, join
from ylink_data.text.datagen.prompt import instruction_prompt

FORMATS = ("alpaca", "sharegpt", "messages")
# (prompt, answer) columns, the first pair a table has: qa_extract/qa_generate's, then respond's.
PAIR_COLUMNS = (("question", "answer"), ("instruction", "response"))
# Kept under "meta" when the run has them (chunk, qa and datagen ops write them; any missing is left out).
PROVENANCE = ("id", "source", "url", "lang", "title", "page_start", "page_end", "chunk_index", "heading_path",
              "qa_method", "instruction_id", "response_index", "judge_score")


def needed_columns(schema: pa.Schema) -> list[str]:
    """The columns of `schema` that the JSONL records are made of."""
    return [c for c in (*(c for pair in PAIR_COLUMNS for c in pair), "input", *PROVENANCE) if c in schema.names]


def pair_columns(names: list[str]) -> tuple[str, str] | None:
    return next((pair for pair in PAIR_COLUMNS if all(c in names for c in pair)), None)


def sft_record(fmt: str, question: str, answer: str, meta: dict[str, Any]) -> dict[str, Any]:
    if fmt == "alpaca":
        record: dict[str, Any] = {"instruction": question, "input": "", "output": answer}
    elif fmt == "sharegpt":
        record = {"conversations": [{"from": "human", "value": question}, {"from": "gpt", "value": answer}]}
    elif fmt == "messages":
        record = {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}
    else:
        raise ValueError(f"unknown SFT format {fmt!r}; one of {', '.join(FORMATS)}")
    record["meta"] = meta
    return record


def write_jsonl(fs: fsspec.AbstractFileSystem, root: str, path: str, tables: Iterable[pa.Table],
                records: Callable[[pa.Table], list[dict[str, Any]]]) -> dict[str, Any]:
    """Write `root/path` atomically, one JSON line per record that `records(table)` makes of each
    table in turn; returns its manifest entry {"path", "rows", "bytes", "sha256"}."""
    rows = 0
    with atomic_write(fs, join(root, path)) as raw:
        out = HashingWriter(raw)
        for table in tables:
            lines = [json.dumps(record, ensure_ascii=False) for record in records(table)]
            if lines:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))
            rows += len(lines)
    return {"path": path, "rows": rows, "bytes": out.bytes, "sha256": out.sha256.hexdigest()}


def write_sft_jsonl(fs: fsspec.AbstractFileSystem, root: str, path: str, tables: Iterable[pa.Table],
                    fmt: str) -> dict[str, Any]:
    """Write `root/path` (JSONL, one record per row of `tables`, in order); returns its manifest entry.
    Rows without a question and an answer (or an instruction and a response) are an error:
    output.sft_format needs an op that makes pairs (qa_extract, qa_generate, respond)."""
    def records(table: pa.Table) -> list[dict[str, Any]]:
        if not table.num_rows:
            return []
        pair = pair_columns(table.column_names)
        if pair is None:
            raise YlinkError("output.sft_format: the documents have no question and answer (or instruction and "
                             "response) columns; add an op that makes them (qa_extract, qa_generate, respond)")
        columns = {c: table.column(c).to_pylist() for c in table.column_names}
        meta_names = [c for c in PROVENANCE if c in columns]
        prompts = columns[pair[0]]
        if pair[0] == "instruction" and "input" in columns:  # the prompt the response answered
            prompts = [instruction_prompt(p, given) for p, given in zip(prompts, columns["input"])]
        return [sft_record(fmt, prompts[i], columns[pair[1]][i],
                           {c: columns[c][i] for c in meta_names if columns[c][i] is not None})
                for i in range(table.num_rows)]

    return write_jsonl(fs, root, path, tables, records)
