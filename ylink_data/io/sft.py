"""Question–answer rows as fine-tuning JSONL, in the layouts common trainers read:

- `alpaca`:   {"instruction": Q, "input": "", "output": A}                     (Alpaca, LLaMA-Factory)
- `sharegpt`: {"conversations": [{"from": "human", "value": Q}, {"from": "gpt", "value": A}]}
- `messages`: {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": A}]}
              (OpenAI fine-tuning, TRL's SFTTrainer)

Every record also keeps where the pair came from under "meta": the row's id, source file, URL and
whichever provenance columns the run has (page range, chunk, heading path, how the pair was found),
so a pair in a training set can always be traced back to its document.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import fsspec
import pyarrow as pa

from ..errors import YlinkError
from .fs import HashingWriter, atomic_write, join

FORMATS = ("alpaca", "sharegpt", "messages")
PAIR_COLUMNS = ("question", "answer")
# Kept under "meta" when the run has them (chunk and qa ops write them; any missing is left out).
PROVENANCE = ("id", "source", "url", "lang", "title", "page_start", "page_end", "chunk_index", "heading_path",
              "qa_method")


def needed_columns(schema: pa.Schema) -> list[str]:
    """The columns of `schema` that the JSONL records are made of."""
    return [c for c in (*PAIR_COLUMNS, *PROVENANCE) if c in schema.names]


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


def write_sft_jsonl(fs: fsspec.AbstractFileSystem, root: str, path: str, tables: Iterable[pa.Table],
                    fmt: str) -> dict[str, Any]:
    """Write `root/path` (JSONL, one record per row of `tables`, in order); returns its manifest entry
    {"path", "rows", "bytes", "sha256"}. Rows without both a question and an answer are an error:
    output.sft_format needs an op that makes pairs (qa_extract, qa_generate)."""
    rows = 0
    with atomic_write(fs, join(root, path)) as raw:
        out = HashingWriter(raw)
        for table in tables:
            missing = [c for c in PAIR_COLUMNS if c not in table.column_names]
            if missing and table.num_rows:
                raise YlinkError(f"output.sft_format: the documents have no {' or '.join(missing)} column; "
                                 "add an op that makes question-answer pairs (qa_extract, qa_generate)")
            columns = {c: table.column(c).to_pylist() for c in table.column_names}
            meta_names = [c for c in PROVENANCE if c in columns]
            lines = []
            for i in range(table.num_rows):
                meta = {c: columns[c][i] for c in meta_names if columns[c][i] is not None}
                record = sft_record(fmt, columns["question"][i], columns["answer"][i], meta)
                lines.append(json.dumps(record, ensure_ascii=False))
            if lines:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))
            rows += len(lines)
    return {"path": path, "rows": rows, "bytes": out.bytes, "sha256": out.sha256.hexdigest()}
