"""The input's field names, checked on the first records of the input by `ylink validate` and before
every run (engine/preflight.py): a typo in `input.text_field` made `ylink run` quarantine every record
("no text field 'txet'"), and one in `input.url_field` left every url null. The check reads the first
SAMPLE_RECORDS records of the first JSONL or Parquet file (bounded: one file, a hundred records) and
names the key when none of them has the field."""
from __future__ import annotations

import itertools
from typing import Any

from ylink_data.core.errors import did_you_mean
from ylink_data.engine.config import PipelineConfig
from ylink_data.core.file_errors import file_problem
from ylink_data.io.readers import Bad, Record, Split, open_split, read_split
from ylink_data.io.readers.base import is_io_failure
from ylink_data.io.readers.registry import reader_for
from ylink_data.core.redaction import redact_url

SAMPLE_RECORDS = 100


def field_problems(cfg: PipelineConfig, splits: list[Split]) -> list[str]:
    """One line per field key that none of the first records of the first JSONL/Parquet input has."""
    inp = cfg.input
    split = next((s for s in splits if reader_for(s.format).named_fields and not s.run_shard), None)
    if split is None or inp.chat:
        return []
    records: list[Record] = []
    missing_text: list[Bad] = []
    try:
        with open_split(split, cfg.storage_options(split.url)) as f:
            for item in itertools.islice(read_split(split, f, inp), SAMPLE_RECORDS):
                if isinstance(item, Record):
                    records.append(item)
                elif isinstance(item, Bad) and item.error.startswith("no text field"):
                    missing_text.append(item)
    except Exception as exc:  # the storage's failures: one line naming the file and the cause
        if not is_io_failure(exc):
            raise
        return [file_problem(exc, split.url)]
    where = redact_url(split.url)
    problems = []
    if missing_text and not records:
        problems.append(f"input.text_field: none of the first {len(missing_text)} records of {where} has it: "
                        f"{missing_text[0].error}")
    if inp.url_field and records and not any(r.url for r in records):
        fields = sorted({key for r in records for key in _dotted_keys(r.metadata or {})})
        problems.append(f"input.url_field: none of the first {len(records)} records of {where} has "
                        f"{inp.url_field!r} (fields: {', '.join(fields[:12])}){did_you_mean(inp.url_field, fields)}")
    return problems


def _dotted_keys(obj: dict[str, Any], prefix: str = "") -> list[str]:
    """Every key of `obj`, nested ones dotted (`metadata.url`), as input.url_field names them."""
    keys = []
    for key, value in obj.items():
        keys.append(f"{prefix}{key}")
        if isinstance(value, dict):
            keys += _dotted_keys(value, f"{prefix}{key}.")
    return keys
