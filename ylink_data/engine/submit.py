"""Running many tasks from a driver, in one of three places with the same task functions (only the
executor differs, as datatrove's local and Slurm executors share their steps; engine/executors/):

- `here`, in this process, one after the other: a batch that one process would run anyway (one
  task, or one CPU) under `ray.execution: auto`, and every batch under `local`;
- `processes`, worker processes on this machine, one per CPU: a batch of several tasks without a Ray
  cluster under `auto`, and every batch under `processes`;
- `ray`: under `auto` when `ray.address` names a cluster or this process already runs Ray (a
  notebook's `ray.init()`), and every batch under `ray` (an embedded Ray when the address is null).

`where_to_run` names the place, the scheduler runs the batch on the executor registered under that
name. Either way every failure is one line, and the public fault injection YLINK_FAIL_AFTER_TASKS
(the driver stops abruptly after N tasks) counts finished tasks; shared by the pipeline runner and
`ylink export`."""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ylink_data.core.cputime import tree_cpu_seconds
from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.engine.config import RayConfig
from ylink_data.engine.executors.base import RESUME_HINT, Executor, executor_class, local_cpus

FAIL_AFTER_ENV = "YLINK_FAIL_AFTER_TASKS"
FAIL_EXIT_CODE = 75
MANY_TASKS = 1 << 20  # a batch too big for one process: where a phase's tasks would run
Where = str  # an executor's registered name: here, processes, ray (engine/executors)


class TaskCounter:
    """Counts finished tasks; with YLINK_FAIL_AFTER_TASKS=N the process exits (75) at the N-th, with
    no clean-up, as a killed driver would: what resumes is what the tasks left behind."""

    def __init__(self) -> None:
        self.completed = 0
        self._fail_after = int(os.environ.get(FAIL_AFTER_ENV) or 0)

    def completed_one(self) -> None:
        self.completed += 1
        if self._fail_after and self.completed >= self._fail_after:
            sys.stdout.flush()
            sys.stderr.write(f"ylink: {FAIL_AFTER_ENV}={self._fail_after} reached: stopping abruptly\n")
            sys.stderr.flush()
            os._exit(FAIL_EXIT_CODE)


def timed(fn: Callable, *args: Any) -> tuple[Any, tuple[float, float, float, str]]:
    """`fn(*args)` where the task runs, with its timing: (result, (start, wall, cpu, worker)), start
    as a Unix time (the machines of a cluster keep their clocks in step), wall and CPU in seconds
    (CPU of the worker's process tree: its extractor or reader child's work counts), worker the
    host and process id. Every executor runs tasks through it (`Scheduler.run`)."""
    start, cpu, clock = time.time(), tree_cpu_seconds(), time.perf_counter()
    result = fn(*args)
    return result, (start, time.perf_counter() - clock, tree_cpu_seconds() - cpu, f"{_HOST}:{os.getpid()}")


_HOST = socket.gethostname()


@dataclass
class StepTiming:
    """One batch the scheduler ran: its name, when it started and ended (Unix times, the driver's
    clock), and each task's (start, wall, cpu, worker) in the batch's task order (`ids`: the task
    numbers, when the batch is some of a phase's tasks)."""

    name: str
    started: float
    ended: float = 0.0
    ids: list[int] = field(default_factory=list)
    tasks: dict[int, tuple[float, float, float, str]] = field(default_factory=dict)


def longest_first(costs: Sequence[float]) -> list[int]:
    """The order tasks are handed out in: by estimated cost, largest first (ties in task order), so
    that the long tasks start while every worker is free and the short ones fill the end of the
    batch (LPT list scheduling). Only the order changes: what each task writes is named by its
    number, never by when it ran."""
    return sorted(range(len(costs)), key=lambda i: -costs[i])


def where_to_run(cfg: RayConfig, tasks: int) -> Where:
    """Where a batch of `tasks` tasks runs: `ray.execution` (see the module docstring). In this
    process only from the main thread: ops' time limits are SIGALRM, which only the main thread gets
    (worker processes and Ray workers run their tasks there), so a run started from another thread
    keeps its tasks in worker processes."""
    main = threading.current_thread() is threading.main_thread()
    if cfg.execution == "local":
        if not main:
            raise ConfigError("ray.execution: local runs tasks in the calling thread, which must be the main "
                              "thread (ops' time limits are SIGALRM); start the run from it, or use auto or processes")
        return "here"
    if cfg.execution != "auto":
        return cfg.execution
    if cfg.address is not None or _ray_running():
        return "here" if main and cfg.address is None and tasks <= 1 else "ray"
    return "here" if main and min(tasks, local_cpus(cfg)) <= 1 else "processes"


def _ray_running() -> bool:
    return executor_class("ray").in_use()


class Scheduler:
    """Runs a driver's batches of tasks where `where_to_run` says, on the executor registered under
    that name, started on first use and kept for the driver's later batches; `close` ends what they
    started (a Ray it joined lives as long as the process, as before). `on_start(executor)` once
    each executor has started. Counts finished tasks (`counter`: YLINK_FAIL_AFTER_TASKS)."""

    def __init__(self, cfg: RayConfig, on_start: Callable[[Executor], None] | None = None,
                 on_notice: Callable[[str | None], None] = lambda message: None, preload: Sequence[str] = (),
                 resume_hint: str = RESUME_HINT):
        self.cfg = cfg
        self.resume_hint = resume_hint  # the end of a failed task's line (without --fresh after a --fresh run)
        self.preload = tuple(preload)  # modules the worker processes load on start (Op.preload)
        self.counter = TaskCounter()
        self._on_start = on_start
        self._on_notice = on_notice
        self._executors: dict[str, Executor] = {}
        self._started: set[str] = set()
        self.timings: list[StepTiming] = []  # every batch run, in order (stats.json's `timing`)

    def where(self, tasks: int) -> Where:
        """Where a batch of `tasks` runs; its executor is started (Ray joined) when this returns."""
        where = where_to_run(self.cfg, tasks)
        self.executor(where)
        return where

    def executor(self, where: Where) -> Executor:
        """The executor named `where`, started."""
        executor = self._built(where)
        if where not in self._started:
            executor.start()
            self._started.add(where)
            if self._on_start is not None:
                self._on_start(executor)
        return executor

    def _built(self, where: Where) -> Executor:
        if where not in self._executors:
            self._executors[where] = executor_class(where)(self.cfg, self.preload, self._on_notice)
        return self._executors[where]

    def cpus(self) -> int:
        """The CPUs a batch of many tasks runs on: the worker processes, or the Ray cluster's CPUs
        (the partitions of a global phase are cut so that each has work)."""
        return self.executor(where_to_run(self.cfg, MANY_TASKS)).cpus()

    def run(self, fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
            describe: Callable[[int], str], where: Where | None = None, resume_hint: str | None = None,
            lone_to_workers: bool = False, step: str | None = None, ids: Sequence[int] | None = None,
            costs: Sequence[float] | None = None) -> None:
        """`fn(*args)` for each args (where `where`, else `self.where`); `on_done(i, result)` as each
        finishes, in this thread. `lone_to_workers`: a batch of one task goes to the worker processes
        when they are already running (a global phase's: they have loaded what its op preloads).
        `costs`: each task's estimated cost, to hand the tasks out longest first (`longest_first`).
        Each task's timing is kept in `timings` under `step` (`ids`: the tasks' numbers)."""
        where = where or self.where(len(args_list))
        workers = self._executors.get("processes")
        if where == "here" and lone_to_workers and workers is not None and workers.warm and self.cfg.execution == "auto":
            where = "processes"
        order = longest_first(costs) if costs is not None else list(range(len(args_list)))
        timing = StepTiming(step or fn.__name__, time.time(), ids=list(ids) if ids is not None else list(range(len(args_list))))
        self.timings.append(timing)
        hint = resume_hint or self.resume_hint
        results = self.executor(where).map(timed, [(fn, *args_list[i]) for i in order],
                                           lambda k, exc: _one_line(describe(order[k]), exc, hint))
        with contextlib.closing(results):  # a failure in on_done stops the batch's other tasks too
            for k, (result, times) in results:
                i = order[k]
                timing.tasks[i] = times
                on_done(i, result)
                self.counter.completed_one()
        timing.ended = time.time()

    def warm_up(self) -> None:
        """Start now what batches of many tasks will run on, before the driver plans or writes
        anything: worker processes load the code meanwhile (about half a second each), and a
        cluster that cannot be joined is one line before the output folder is touched."""
        where = where_to_run(self.cfg, MANY_TASKS)
        if self.cfg.address:
            self.executor(where)
        self._built(where).warm_up()

    def close(self) -> None:
        executors, self._executors = self._executors, {}
        self._started.clear()
        for executor in executors.values():
            executor.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _one_line(what: str, exc: BaseException, resume_hint: str) -> BaseException:
    """What a driver raises for a task's failure: our own errors as they are (they are one line
    already), anything else as the one line of `_failed`."""
    return exc if isinstance(exc, YlinkError) else _failed(what, exc, resume_hint)


def _failed(what: str, cause: BaseException, resume_hint: str) -> YlinkError:
    """The one line of a task that failed, wherever it ran."""
    text = str(cause).strip()
    name = getattr(cause, "type_name", type(cause).__name__)  # workers.RemoteError stands for another type
    return YlinkError(f"{what} failed: {name}: {text.splitlines()[-1] if text else ''}"
                      f" (finished work is kept: {resume_hint})")
