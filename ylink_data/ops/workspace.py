"""What a global op sees when it resolves (`GlobalOp.resolve(workspace)`), and the one format in which
it hands back its decisions. The engine implements `Workspace` (engine/global_phase.py); ops learn
nothing else of the run.

Decision files
--------------
A decision file is one Parquet file with the columns
- `task` (int64): the task of the phase whose documents it decides about;
- `row` (int64): the position of a document in that task's parts, counted from 0 over the part files
  in order (the `row` that `read_key_columns` gives each key);
- `reason` (string): the drop reason (`<op name>` or `<op name>:<rule>`), null to keep the row;
- any other column: a value the op adds to the documents it decides about (a duplicate-cluster id);
  every task of the next phase adds it, null where the op decided nothing, so shards share a schema.

Rows are sorted by (`task`, `row`) (`write_decision_file` sorts them), so that the next phase's tasks
read only their own rows (`read_decisions`). Columns named in the file's schema metadata under
`REJECTED_ONLY_KEY` (a JSON list of names) are evidence about a removal (`minhash_dedup`'s `dup_of`):
they go onto the rows written to `rejected/` only, so the kept documents' schema does not grow.

The task that decides writes its decision file itself, at `workspace.decision_path(name)`, and
returns the path; `resolve` adds the paths to `workspace.decisions`. No decision passes through the
driver, whose memory stays flat however big the corpus.
"""
from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import fsspec
import numpy as np
import pyarrow as pa

from ylink_data.io.parquet import ParquetFileWriter
from ylink_data.core.parquet import read_table

DECISION_COLUMNS = ("task", "row", "reason")
REJECTED_ONLY_KEY = b"ylink.rejected_only"  # schema metadata: columns for rejected/ rows only
# A dedup op's evidence on its rejected rows: the id of the document kept for a removed one, and the
# similarity measured between them (1.0 for an exact copy).
DUP_EVIDENCE = ("dup_of", "dup_similarity")
SIMILARITY_BINS = 20  # stats.json's histogram of the removals' similarities: 0.05 wide


class Workspace(ABC):
    """A global op's view of its phase: the documents' keys (in every task's parts), a folder to
    spill to, a way to run tasks, and where its decision files go.

    `fs` is the run's filesystem: every path below is on it, and it pickles, so task functions take
    it as an argument. `parts[task]` lists a task's part files in order and `rows[task]` counts their
    documents. `run_url` names the run folder, for an op that stamps files it writes outside it
    (`minhash_dedup`'s saved index). `decisions` collects the decision files' paths."""

    fs: fsspec.AbstractFileSystem
    run_url: str
    parts: dict[int, list[str]]
    rows: dict[int, int]
    cpus: int
    decisions: list[str]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def partitions(self, items: int, per_partition: int) -> int:
        """How many partitions to cut `items` into: enough that none holds more than `per_partition`
        (what bounds a task's memory), and at least two per CPU, so that every CPU has work
        whatever the corpus size and one slow partition does not leave the others idle. The ops'
        results do not depend on it (tests/test_global_partitions.py)."""
        return max(1, math.ceil(items / per_partition), 2 * self.cpus)

    @abstractmethod
    def run_tasks(self, fn: Callable, args_list: Sequence[tuple], label: str) -> list[Any]:
        """`fn(*args)` for each args as tasks (on workers, in parallel); the results in input order.
        `fn` is a module-level function and its arguments pickle; `label` names the step in progress."""

    @abstractmethod
    def storage_options(self, url: str) -> dict[str, Any]:
        """fsspec options for a URL outside the run folder the op reads or writes (a saved index),
        from the pipeline's `storage:` block (`OpContext.storage_options`, for `resolve`)."""

    @abstractmethod
    def key_column(self, name: str) -> str:
        """The column of the parts where this op's `keys()` value `name` was stored."""

    @abstractmethod
    def work_path(self, *parts: str) -> str:
        """A path in the phase's own folder, to spill to: removed before every attempt of the phase."""

    def decision_path(self, name: str) -> str:
        """Where decision file `name` goes (see the module docstring for its format)."""
        return self.work_path("decisions", f"{name}.parquet")


def write_decision_file(fs: fsspec.AbstractFileSystem, path: str, table: pa.Table,
                        rejected_only: Sequence[str] = ()) -> None:
    """Write `table` (columns `task`, `row`, `reason` and the op's own) as a decision file at `path`,
    sorted by task and row; `rejected_only` names the columns for rejected/ rows only."""
    table = table.sort_by([("task", "ascending"), ("row", "ascending")])
    if rejected_only:
        table = table.replace_schema_metadata({REJECTED_ONLY_KEY: json.dumps(list(rejected_only)).encode()})
    writer = ParquetFileWriter(fs, path, "zstd")
    writer.write(table)
    writer.close()


def removal_breakdowns(table: pa.Table, dropped: np.ndarray, source_column: str) -> dict[str, Counter]:
    """A dedup op's `decision_breakdowns`: per source (`source_column`) the documents it saw and those
    it removed, and the removals' similarities (`dup_similarity`) in bins of 0.05 (`0.80` holds
    [0.80, 0.85); `1.00` exact copies)."""
    if source_column in table.column_names:
        sources = table.column(source_column).cast(pa.string()).fill_null("(none)").to_pylist()
    else:
        sources = ["(none)"] * table.num_rows
    out = {"in_by_source": Counter(sources),
           "removed_by_source": Counter(s for s, d in zip(sources, dropped) if d)}
    if "dup_similarity" in table.column_names and dropped.any():
        sims = table.column("dup_similarity").to_numpy(zero_copy_only=False)[dropped]
        sims = sims[~np.isnan(sims)]
        bins = np.minimum(np.floor(sims * SIMILARITY_BINS + 1e-9), SIMILARITY_BINS) / SIMILARITY_BINS
        out["similarity"] = Counter(f"{b:.2f}" for b in bins)
    return out


def read_key_columns(fs: fsspec.AbstractFileSystem, paths: list[str], columns: list[str]) -> pa.Table:
    """The given columns of a task's parts, plus the `row` each value belongs to."""
    tables = []
    for path in paths:
        tables.append(read_table(fs, path, columns=columns))
    table = pa.concat_tables(tables) if tables else pa.table({c: [] for c in columns})
    return table.append_column("row", pa.array(range(table.num_rows), pa.int64()))


@dataclass
class Decisions:
    """What the decision files say about one task's rows."""

    reasons: dict[int, str]  # row -> drop reason
    columns: dict[str, dict[int, Any]]  # the op's column -> row -> value
    types: dict[str, pa.DataType]
    rejected_only: set[str] = field(default_factory=set)  # columns written to rejected/ rows only


def read_decisions(fs: fsspec.AbstractFileSystem, files: list[str], task: int) -> Decisions:
    """The rows of `task` a global op decided about: drop reasons and any columns it adds."""
    out = Decisions({}, {}, {})
    for path in files:
        table = read_table(fs, path, filters=[("task", "=", task)])
        meta = table.schema.metadata or {}
        if REJECTED_ONLY_KEY in meta:
            out.rejected_only.update(json.loads(meta[REJECTED_ONLY_KEY]))
        # Every task adds the op's columns (null where it decided nothing), so shards share a schema.
        for name in table.column_names:
            if name not in DECISION_COLUMNS:
                out.columns.setdefault(name, {})
                out.types[name] = table.schema.field(name).type
        if table.num_rows == 0:
            continue
        rows = table.column("row").to_pylist()
        for r, reason in zip(rows, table.column("reason").to_pylist()):
            if reason is not None:
                out.reasons[r] = reason
        for name in table.column_names:
            if name not in DECISION_COLUMNS:
                out.columns[name].update(zip(rows, table.column(name).to_pylist()))
    return out
