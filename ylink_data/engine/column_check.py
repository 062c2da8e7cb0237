"""The columns op parameters name, checked before any task: a typo in `judge.text_column` or
`minhash_dedup.column` failed the run mid-way (after paid LLM calls, for judge), while validate said
ok. Each op declares the columns it reads by parameter and the ones it adds (`Op.columns_read`,
`Op.columns_added`); the columns start from the document schema (what every reader of documents
makes: extra JSONL/Parquet fields go into `metadata`), and each op in stage order must find what it
reads among those of the input and the ops before it. Where what is there is not known (a previous
run's shards as input, which keep their own columns; an op that declares nothing), nothing is
checked from there on: a false error on a valid pipeline is worse than a late one."""
from __future__ import annotations

from ylink_data.core.errors import did_you_mean
from ylink_data.engine.config import PipelineConfig
from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.ops import op_class


def column_problems(cfg: PipelineConfig, run_shards: bool) -> list[str]:
    """One line per op parameter that names a column no row has at that op's place in the stages."""
    if run_shards or cfg.input.chat:
        return []
    available = set(DOCUMENT_SCHEMA.names)
    problems = []
    for i, (name, params) in enumerate(cfg.ops):
        cls = op_class(name)
        reads, adds = cls.columns_read(params), cls.columns_added(params)
        for key, column in reads or []:
            if column not in available:
                problems.append(f"stages[{i}].{name}.{key}: no column {column!r} at this stage (columns: "
                                f"{', '.join(sorted(available))}){did_you_mean(column, available)}")
        if reads is None or adds is None:
            break
        available |= set(adds)
    return problems


__all__ = ["column_problems"]
