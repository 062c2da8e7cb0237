"""The columns op parameters name, and the columns the output formats are made of, checked before
any task (engine/preflight.py): a typo in `judge.text_column` or `minhash_dedup.column` failed the run
mid-way (after paid LLM calls, for judge), and `output.sft_format` without question-answer columns or
`keep: highest_score` ranking by a text column failed after all the work, while validate said ok.

Each op declares the columns it reads by parameter and the ones it adds (`Op.columns_read`,
`Op.columns_added`, with their Arrow types where it knows them), and which of those it reads as
numbers (`Op.numeric_columns`); each sink the columns its files are made of (`Sink.columns_needed`).
The columns start from the document schema, what every reader of documents makes, a previous run's
shards included (extra JSONL/Parquet fields and a run's own columns go into `metadata`), and each op
in stage order must find what it reads among those of the input and the ops before it. Where what
is there is not known (an op that declares nothing) nothing is checked from there on, and a column
of unknown type is not checked for numbers: a false error on a valid pipeline is worse than a late
one. Conversations (`input.chat`) are not checked."""
from __future__ import annotations

from typing import Any

from ylink_data.core.errors import did_you_mean
from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.engine.config import PipelineConfig
from ylink_data.io.sinks import SINKS
from ylink_data.ops import op_class


def column_problems(cfg: PipelineConfig) -> list[str]:
    """One line per op parameter that names a column no row has at that op's place in the stages (or
    one of another type than the op reads), and per output format whose columns no stage makes."""
    if cfg.input.chat:
        return []
    available: dict[str, Any] = {f.name: f.type for f in DOCUMENT_SCHEMA}  # name -> Arrow type, None: unknown
    problems = []
    for i, (name, params) in enumerate(cfg.ops):
        cls = op_class(name)
        reads, adds = cls.columns_read(params), cls.columns_added(params)
        numeric = set(cls.numeric_columns(params))
        for key, column in reads or []:
            where = f"stages[{i}].{name}.{key}"
            if column not in available:
                problems.append(f"{where}: no column {column!r} at this stage (columns: "
                                f"{', '.join(sorted(available))}){did_you_mean(column, available)}")
            elif key in numeric and available[column] is not None and not _numbers(available[column]):
                numbers = sorted(c for c, t in available.items() if t is not None and _numbers(t))
                problems.append(f"{where}: column {column!r} holds {available[column]}, and {name} reads it as "
                                f"numbers (scores); name a numeric column ({', '.join(numbers)})")
        if reads is None or adds is None:
            return problems
        available |= adds if isinstance(adds, dict) else {c: available.get(c) for c in adds}
    return problems + _sink_problems(cfg, set(available))


def _sink_problems(cfg: PipelineConfig, columns: set[str]) -> list[str]:
    problems = []
    for sink in SINKS.values():
        needed = sink.columns_needed()
        if sink.key is None or getattr(cfg.output, sink.key, None) is None or not needed:
            continue
        if not any(set(one) <= columns for one in needed):
            sets = ", or ".join(" and ".join(filter(None, (", ".join(one[:-1]), one[-1]))) for one in needed)
            problems.append(f"output.{sink.key}: no stage makes the columns its records are made of ({sets}; "
                            f"columns: {', '.join(sorted(columns))}); add an op that makes them "
                            f"({', '.join(sink.makers)}), or remove output.{sink.key}")
    return problems


def _numbers(dtype: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype) \
        or pa.types.is_boolean(dtype)


__all__ = ["column_problems"]
