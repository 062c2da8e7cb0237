"""The engine's side of a global op's phase: `GlobalContext` is the `Workspace` (ops/workspace.py,
where the decision-file format is described) that `GlobalOp.resolve` gets, over the run folder's
resolve folder of the phase and the run's scheduler."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import fsspec

from ylink_data.core.storage import join
from ylink_data.io.layout import RunLayout
from ylink_data.engine.plan import StageRef
from ylink_data.engine.tasks import internal_column
from ylink_data.ops.workspace import Workspace


@dataclass
class GlobalContext(Workspace):
    layout: RunLayout
    phase: int
    ref: StageRef
    parts: dict[int, list[str]]  # task -> its part files, in order
    rows: dict[int, int]  # task -> number of documents in its parts
    runner: Callable[[Callable, Sequence[tuple], str], list[Any]]  # (fn, args per task, label)
    storage: Callable[[str], dict[str, Any]]  # the pipeline's `storage:` options per URL
    cpus: int = 1  # what run_tasks runs on at once: cut the work into at least this many partitions
    decisions: list[str] = field(default_factory=list)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return self.layout.fs

    @property
    def run_url(self) -> str:
        return self.layout.url

    def run_tasks(self, fn: Callable, args_list: Sequence[tuple], label: str) -> list[Any]:
        return self.runner(fn, args_list, label)

    def storage_options(self, url: str) -> dict[str, Any]:
        return self.storage(url)

    def key_column(self, name: str) -> str:
        return internal_column(self.ref, name)

    def work_path(self, *parts: str) -> str:
        return join(self.layout.resolve_dir(self.phase), *parts)
