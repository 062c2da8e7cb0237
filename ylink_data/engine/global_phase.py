"""What a global op sees when it resolves: every task's parts of the phase, a place to spill, a way
to run tasks (in as many partitions as `partitions` says), and one way to hand back its decisions.

A decision file is Parquet with columns `task`, `row`, `reason` (null keeps the row) and any extra
columns the op adds to the documents (e.g. a duplicate-cluster id); rows refer to the position of a
document in its task's parts. The next phase's tasks read only their own rows from these files.
Columns named in the file's `ylink.rejected_only` metadata (a JSON list) are evidence about a
removal (`minhash_dedup`'s `dup_of`): they go onto the rows written to `rejected/` only, so the
kept documents' schema does not grow.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.storage import join
from ylink_data.io.parquet import ParquetFileWriter
from ylink_data.io.layout import RunLayout
from ylink_data.engine.plan import StageRef
from ylink_data.engine.tasks import REJECTED_ONLY_KEY, internal_column


@dataclass
class GlobalContext:
    layout: RunLayout
    phase: int
    ref: StageRef
    parts: dict[int, list[str]]  # task -> its part files, in order
    rows: dict[int, int]  # task -> number of documents in its parts
    run_tasks: Callable[[Callable, Sequence[tuple], str], list[Any]]  # (fn, args per task, label)
    cpus: int = 1  # what run_tasks runs on at once: cut the work into at least this many partitions
    decisions: list[str] = field(default_factory=list)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def partitions(self, items: int, per_partition: int) -> int:
        """How many partitions to cut `items` into: enough that none holds more than `per_partition`
        (what bounds a task's memory), and at least two per CPU, so that every CPU has work
        whatever the corpus size and one slow partition does not leave the others idle. The ops'
        results do not depend on it (tests/test_global_partitions.py)."""
        return max(1, math.ceil(items / per_partition), 2 * self.cpus)

    def key_column(self, name: str) -> str:
        """The internal column where this op's `keys()` value `name` was stored."""
        return internal_column(self.ref, name)

    def work_path(self, *parts: str) -> str:
        return join(self.layout.resolve_dir(self.phase), *parts)

    def decision_path(self, name: str) -> str:
        """Where decision file `name` goes. The task that decides writes it (`write_decision_file`),
        so that no decision passes through the driver, whose memory stays flat however big the
        corpus; the op then adds the paths it got back to `decisions`."""
        return self.work_path("decisions", f"{name}.parquet")


def write_decision_file(layout: RunLayout, path: str, table: pa.Table, rejected_only: Sequence[str] = ()) -> None:
    table = table.sort_by([("task", "ascending"), ("row", "ascending")])
    if rejected_only:
        table = table.replace_schema_metadata({REJECTED_ONLY_KEY: json.dumps(list(rejected_only)).encode()})
    writer = ParquetFileWriter(layout.fs, path, "zstd")
    writer.write(table)
    writer.close()


def read_key_columns(layout: RunLayout, paths: list[str], columns: list[str]) -> pa.Table:
    """The given columns of a task's parts, plus the `row` each value belongs to."""
    tables = []
    for path in paths:
        with layout.fs.open(path, "rb") as f:
            tables.append(pq.read_table(f, columns=columns))
    table = pa.concat_tables(tables) if tables else pa.table({c: [] for c in columns})
    return table.append_column("row", pa.array(range(table.num_rows), pa.int64()))
