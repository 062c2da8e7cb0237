"""decontaminate: drop (or mark) documents that share a long n-gram with an evaluation set, so a model
is not trained on the test it is scored on. For pre-training corpora and instruction data alike.

```yaml
- decontaminate:
    benchmarks:
      - {path: s3://evals/gsm8k/test.jsonl, fields: [question, answer]}
      - {path: evals/HumanEval.jsonl.gz, fields: [prompt], id_field: task_id, name: humaneval}
    mode: drop          # or annotate
    column: text        # the documents' text to check (instruction data: instruction)
```

Each benchmark is a JSONL, Parquet or CSV file (`.gz` and other compressions by extension), by path
or fsspec URL (the pipeline's `storage:` options apply), with the `fields` whose text is searched
for (`transform.ngram_index`: 13-word n-grams, 13 characters for Chinese and Japanese items, items
shorter than that matched whole from 8 tokens; text normalised as `transform.ngrams` says: NFKC,
lowercase, punctuation and whitespace ignored, digits kept).

- `mode: drop`: a document with a match is dropped with reason `decontaminate:<name>` (`name`: the
  benchmark's file name unless given), and the match is in its row of rejected/ (`keep_rejected`).
- `mode: annotate`: every document is kept; the counters `matched:<name>` count matches.
Both write `decontaminate_benchmark`, `decontaminate_item` (the item's `id_field`, else its position
in the file from 0) and `decontaminate_ngram` (the first matching n-gram, normalised), null where
nothing matched: in drop mode they are null on every kept document.

The index is built from the files once per worker process (`setup`: 0.2 s for GSM8K's questions
and HumanEval's prompts, 56,051 hashes in 0.45 MB plus a 2 MB look-up bitmap), so it is small
enough for every Ray worker of a pre-training run to hold, and looked up column-wise per batch.
"""
from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

import pyarrow as pa
from pydantic import Field

from ..config import did_you_mean
from ..errors import InputError
from ..io.benchmarks import FORMATS, read_benchmark
from ..transform.ngram_index import CHAR_NGRAM, MIN_TOKENS, WORD_NGRAM, NgramIndex
from . import register
from .base import BatchResult, MapOp

COLUMNS = {"decontaminate_benchmark": pa.string(), "decontaminate_item": pa.string(),
           "decontaminate_ngram": pa.string()}
_KEYS = ("path", "fields", "id_field", "name", "format")
NgramSize = Annotated[int, Field(ge=2, le=1000)]


def _benchmark(i: int, entry: Any) -> dict[str, Any]:
    """One `benchmarks` entry, checked (the constructor's errors name the key)."""
    where = f"benchmarks[{i}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected {{path: URL, fields: [..]}}, got {entry!r}")
    for key in entry:
        if key not in _KEYS:
            hint = did_you_mean(key, _KEYS) or f" (keys: {', '.join(_KEYS)})"
            raise ValueError(f"{where}.{key}: unknown key{hint}")
    path, fields = entry.get("path"), entry.get("fields")
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{where}.path: give the path or URL of a JSONL, Parquet or CSV file")
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"{where}.fields: give a list of the fields whose text is searched for, e.g. [question]")
    for key in ("id_field", "name"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise ValueError(f"{where}.{key}: give a string, got {entry[key]!r}")
    fmt = entry.get("format", "auto")
    if fmt not in ("auto", *FORMATS):
        raise ValueError(f"{where}.format: give auto, {', '.join(FORMATS)}; got {fmt!r}")
    return {"path": path, "fields": fields, "id_field": entry.get("id_field"), "name": entry.get("name"),
            "fmt": fmt}


@register
class Decontaminate(MapOp):
    """Drops or marks documents that share an n-gram with an evaluation set; see the module docstring."""

    name = "decontaminate"

    def __init__(self, benchmarks: Annotated[list[Any], Field(min_length=1)],
                 mode: Literal["drop", "annotate"] = "drop", column: str = "text",
                 ngram: NgramSize = WORD_NGRAM, ngram_zh: NgramSize = CHAR_NGRAM,
                 min_item_tokens: Annotated[int, Field(ge=1, le=1000)] = MIN_TOKENS):
        self.benchmarks = [_benchmark(i, entry) for i, entry in enumerate(benchmarks)]
        names = [b["name"] or b["path"] for b in self.benchmarks]
        self.mode, self.column = mode, column
        self.ngram, self.ngram_zh, self.min_item_tokens = ngram, ngram_zh, min_item_tokens
        if len(set(names)) != len(names):
            raise ValueError("benchmarks: the same benchmark is listed twice")
        self.index: NgramIndex | None = None

    def setup(self) -> None:
        items = []
        for i, b in enumerate(self.benchmarks):
            read = read_benchmark(b["path"], b["fields"], id_field=b["id_field"], fmt=b["fmt"], name=b["name"],
                                  storage_options=self.storage_options(b["path"]),
                                  where=f"{self.name}.benchmarks[{i}]")
            items.append((read.name, read.texts, read.ids))
        names = [name for name, _, _ in items]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"{self.name}.benchmarks: two benchmarks are named {twice[0]!r} (their file name): "
                             "give each a `name`")
        self.index = NgramIndex.build(items, word_ngram=self.ngram, char_ngram=self.ngram_zh,
                                      min_tokens=self.min_item_tokens)

    def process(self, table: pa.Table) -> BatchResult:
        if self.index is None:
            self.setup()
        if self.column not in table.column_names:
            raise InputError(f"{self.name}.column: the documents have no column {self.column!r} "
                             f"(columns: {', '.join(table.column_names)}); name the column to check")
        matches = self.index.find(table.column(self.column))
        for name, dtype in COLUMNS.items():  # a second decontaminate replaces the first's columns
            values = [getattr(m, name.removeprefix("decontaminate_")) if m else None for m in matches]
            if name in table.column_names:
                table = table.drop_columns([name])
            table = table.append_column(name, pa.array(values, dtype))
        found = Counter(m.benchmark for m in matches if m)
        if self.mode == "annotate":
            return BatchResult(table, counters={f"matched:{name}": n for name, n in found.items()})
        dropped = [f"{self.name}:{m.benchmark}" if m else None for m in matches]
        return BatchResult(table, dropped=dropped if found else None)
