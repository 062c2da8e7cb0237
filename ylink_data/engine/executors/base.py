"""What runs a driver's tasks: one small interface, one module per executor, a registry by name.

The names are those `where_to_run` gives (engine/submit.py) from `ray.execution`: `here` (this
process; `local`), `processes` (worker processes on this machine), `ray`. An executor is one module
of this package with one `@register`ed subclass of `Executor`; the scheduler picks it by name, so
adding one touches nothing else. Every executor runs the same module-level task functions (as
NeMo Curator's executors run the same stages), so only where they run differs, never the output.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterator, Sequence

from ylink_data.core.errors import ConfigError
from ylink_data.engine.config import RayConfig

RESUME_HINT = "rerun the same command to resume"


def resume_hint(fresh: bool) -> str:
    """How to resume a command that stopped: with --fresh, rerunning it would throw its finished tasks away."""
    return "rerun the same command without --fresh to resume (with --fresh it starts over)" if fresh else RESUME_HINT

# What the driver raises for task `i` that raised `exc`: the one line of submit._one_line.
Fail = Callable[[int, BaseException], BaseException]


class Shared(ABC):
    """A large object an executor put where its tasks fetch it (Ray's object store), travelling in
    the task's arguments in place of the object; `get` (in the task) gives the object back."""

    @abstractmethod
    def get(self) -> Any: ...


def get(value: Any) -> Any:
    """In a task: the object `value` stands for, whichever executor's `put` made it."""
    return value.get() if isinstance(value, Shared) else value


class Executor(ABC):
    """Runs batches of tasks for one driver. Built cheaply (nothing starts); `start` before a batch,
    `close` once the driver is done. Failures are reported through `fail` as one line each."""

    name: ClassVar[str] = ""
    # True when tasks run in the driver's own process: they see what it holds (memory:// files),
    # so nothing needs to be put for them.
    in_this_process: ClassVar[bool] = False

    def __init__(self, cfg: RayConfig, preload: Sequence[str] = (),
                 on_notice: Callable[[str | None], None] = lambda message: None):
        self.cfg = cfg
        self.preload = tuple(preload)  # modules workers load on start (Op.preload)
        self.on_notice = on_notice  # a line the progress display shows while the run waits (None: no longer)

    @classmethod
    def in_use(cls) -> bool:
        """Whether this process already runs this executor's system (a notebook's ray.init()):
        `ray.execution: auto` then keeps its batches there. Deciding must start nothing."""
        return False

    def start(self) -> None:
        """Make `cpus`, `put` and `map` usable (join a cluster); called before each batch, so a
        second call does nothing. Workers may still start as tasks need them."""

    def warm_up(self) -> None:
        """Start now what batches of many tasks will run on, while the driver still plans."""

    @abstractmethod
    def cpus(self) -> int:
        """How many tasks run at once: a global phase cuts at least that many partitions."""

    @abstractmethod
    def map(self, fn: Callable, args_list: Sequence[tuple], fail: Fail) -> Iterator[tuple[int, Any]]:
        """`fn(*args)` for each args, yielding `(i, result)` as each finishes. The first task that
        fails stops the others (what they finished is kept by their markers) and `fail(i, exc)` is
        raised. Closing the iterator early stops the tasks still running."""

    def put(self, data: bytes) -> bytes | Shared:
        """`data` as tasks will get it (`get`): large objects go once to where tasks fetch them."""
        return data

    def other_nodes(self) -> int:
        """Machines other than this one that run tasks (they must see the run's paths too)."""
        return 0

    @property
    def warm(self) -> bool:
        """Whether workers are running already, with the ops' code loaded."""
        return False

    def close(self) -> None:
        """End what `start` and `map` started (a Ray this process joined stays, as Ray does)."""


EXECUTORS: dict[str, type[Executor]] = {}


def register(cls: type[Executor]) -> type[Executor]:
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a `name` (what ray.execution and where_to_run call it)")
    EXECUTORS[cls.name] = cls
    return cls


def executor_class(name: str) -> type[Executor]:
    """The executor registered as `name`, importing this package's modules on first use (each
    registers its own, as ops do)."""
    if name not in EXECUTORS:
        package = __name__.rpartition(".")[0]
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{module.name}")
    try:
        return EXECUTORS[name]
    except KeyError:
        raise ConfigError(f"ray.execution: no executor named {name!r} (registered: {', '.join(sorted(EXECUTORS))}); "
                          "use auto, local, processes or ray") from None


def local_cpus(cfg: RayConfig) -> int:
    """The worker processes of a run on this machine: `ray.num_cpus`, else the CPUs this process may
    use (a `taskset` or a container's cpuset counts)."""
    if cfg.num_cpus:
        return cfg.num_cpus
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
