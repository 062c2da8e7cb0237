"""What an op gets from the run it works in: `OpContext`, given to `Op.setup(ctx)`. The engine builds
it (engine/tasks.py `cached_op`); an op used on its own (`preview_op`, a test, a notebook) gets the
default, which reads files with fsspec's own options."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


def no_storage_options(url: str) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class OpContext:
    """`storage_options(url)`: fsspec options for a URL the op reads (a model, a tokenizer, a
    benchmark, a word list), from the pipeline's `storage:` block; credentials stay here, never in
    the op's parameters (which are written to run.json). `task_cpus`: the CPUs the task running the op
    holds (a Ray task's `num_cpus`), for libraries with thread pools of their own; None where the
    engine does not know (the driver, a worker process, a script): they keep their defaults."""

    storage_options: Callable[[str], dict[str, Any]] = no_storage_options
    task_cpus: int | None = None


DEFAULT_CONTEXT = OpContext()
