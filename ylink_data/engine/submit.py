"""Running many tasks from a driver, in one of three places with the same task functions (only the
scheduler differs, as datatrove's local and Slurm executors share their steps):

- in this process, one after the other: a batch that one process would run anyway (one task, or
  one CPU) under `ray.execution: auto`, and every batch under `local`;
- in worker processes on this machine (pipeline/workers.py), one per CPU: a batch of several tasks
  without a Ray cluster under `auto`, and every batch under `processes`. They start in a fraction of
  a second, where an embedded Ray takes seconds to start and stop;
- on Ray: a bounded number in flight, each task retried on worker loss (not on bugs), under `auto`
  when `ray.address` names a cluster or this process already runs Ray (a notebook's `ray.init()`),
  and every batch under `ray` (an embedded Ray when the address is null).

Either way every failure is one line, and the public fault injection YLINK_FAIL_AFTER_TASKS (the
driver stops abruptly after N tasks) counts finished tasks; shared by the pipeline runner and
`ylink export`. A task run in this process that crashes it (YLINK_TEST_CRASH_TASK, the OOM killer)
takes the driver with it: the run stops as a killed `ylink run` does, and a rerun resumes."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Literal, Sequence

from ylink_data.engine.config import RayConfig
from ylink_data.core.errors import ClusterError, ConfigError, YlinkError
from ylink_data.engine.cluster_watch import ClusterWatch
from ylink_data.engine.ray_env import cluster_cpus, ensure_ray
from ylink_data.engine.workers import WorkerPool

FAIL_AFTER_ENV = "YLINK_FAIL_AFTER_TASKS"
FAIL_EXIT_CODE = 75
RESUME_HINT = "rerun the same command to resume"
MANY_TASKS = 1 << 20  # a batch too big for one process: where a phase's tasks would run
Where = Literal["here", "processes", "ray"]


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


def local_cpus(cfg: RayConfig) -> int:
    """The worker processes of a run on this machine: `ray.num_cpus`, else the CPUs this process may
    use (a `taskset` or a container's cpuset counts)."""
    if cfg.num_cpus:
        return cfg.num_cpus
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _ray_running() -> bool:
    ray = sys.modules.get("ray")  # deciding must not import Ray
    return ray is not None and ray.is_initialized()


class Scheduler:
    """Runs a driver's batches of tasks where `where_to_run` says, starting what a batch needs on
    first use (the worker processes, Ray) and keeping it for the driver's later batches; `close`
    ends the worker processes (a Ray it started lives as long as the process, as before). Counts
    finished tasks (`counter`: YLINK_FAIL_AFTER_TASKS)."""

    def __init__(self, cfg: RayConfig, on_ray_start: Callable[[], None] | None = None,
                 on_notice: Callable[[str | None], None] = lambda message: None, preload: Sequence[str] = ()):
        self.cfg = cfg
        self.preload = tuple(preload)  # modules the worker processes load on start (Op.preload)
        self.counter = TaskCounter()
        self._on_ray_start = on_ray_start
        self._on_notice = on_notice
        self._watch: ClusterWatch | None = None
        self._pool: WorkerPool | None = None

    def where(self, tasks: int) -> Where:
        """Where a batch of `tasks` runs; if on Ray, Ray is up (and watched) when this returns."""
        where = where_to_run(self.cfg, tasks)
        if where == "ray" and self._watch is None:
            # An embedded Ray gets the CPUs worker processes would (Ray itself ignores a `taskset`).
            joined = ensure_ray(self.cfg if self.cfg.address else
                                self.cfg.model_copy(update={"num_cpus": local_cpus(self.cfg)}))
            self._watch = ClusterWatch(self.cfg.max_wait_for_cpus_s, self._on_notice, RESUME_HINT,
                                       client_address=joined.hostport if joined and joined.client else None)
            self._watch.start()
            if self._on_ray_start is not None:
                self._on_ray_start()
        return where

    def cpus(self) -> int:
        """The CPUs a batch of many tasks runs on: the worker processes, or the Ray cluster's CPUs
        (the partitions of a global phase are cut so that each has work)."""
        return cluster_cpus() if self.where(MANY_TASKS) == "ray" else local_cpus(self.cfg)

    def run(self, fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
            describe: Callable[[int], str], where: Where | None = None, resume_hint: str = RESUME_HINT,
            lone_to_workers: bool = False) -> None:
        """`fn(*args)` for each args (where `where`, else `self.where`); `on_done(i, result)` as each
        finishes, in this thread. `lone_to_workers`: a batch of one task goes to the worker processes
        when they are already running (a global phase's: they have loaded what its op preloads)."""
        where = where or self.where(len(args_list))
        if where == "here" and lone_to_workers and self._pool is not None and self.cfg.execution == "auto":
            where = "processes"

        def done(i: int, result: Any) -> None:
            on_done(i, result)
            self.counter.completed_one()

        if where == "here":
            _run_here(fn, args_list, done, describe, resume_hint)
        elif where == "processes":
            self._processes().run(fn, args_list, done, lambda i, exc: _one_line(describe(i), exc, resume_hint))
        else:
            _run_on_ray(fn, args_list, done, describe, resume_hint, self._watch)

    def warm_up(self) -> None:
        """Start now what batches of many tasks will run on, before the driver plans or writes
        anything: worker processes load the code meanwhile (about half a second each), and a
        cluster that cannot be joined is one line before the output folder is touched."""
        where = where_to_run(self.cfg, MANY_TASKS)
        if where == "processes":
            self._processes().start()
        elif where == "ray" and self.cfg.address:
            self.where(MANY_TASKS)

    def _processes(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(local_cpus(self.cfg), self.preload)
        return self._pool

    def close(self) -> None:
        if self._watch is not None:
            self._watch.stop()  # this process may leave Ray now (ray.shutdown at exit): no alarm
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_here(fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
              describe: Callable[[int], str], resume_hint: str) -> None:
    """In the main thread, where ops' SIGALRM time limits work, as in a worker."""
    for i, args in enumerate(args_list):
        try:
            result = fn(*args)
        except YlinkError:
            raise
        except Exception as exc:
            raise _failed(describe(i), exc, resume_hint) from exc
        on_done(i, result)


def _one_line(what: str, exc: BaseException, resume_hint: str) -> BaseException:
    """What a driver raises for a task's failure: our own errors as they are (they are one line
    already), anything else as the one line of `_failed`."""
    return exc if isinstance(exc, YlinkError) else _failed(what, exc, resume_hint)


_REMOTES: dict[Callable, Any] = {}  # each function becomes a Ray remote function once per process


def _remote(fn: Callable):
    import ray

    if fn not in _REMOTES:
        _REMOTES[fn] = ray.remote(num_cpus=1, max_retries=3)(fn)  # retried on worker loss, not on bugs
    return _REMOTES[fn]


def _run_on_ray(fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
                describe: Callable[[int], str], resume_hint: str, watch: ClusterWatch) -> None:
    """A bounded number in flight (driver memory stays flat for 100k tasks); while they wait for a
    CPU, `watch` tells so and gives up after ray.max_wait_for_cpus_s."""
    import ray

    remote = _remote(fn)
    limit = 2 * cluster_cpus()
    queue = list(enumerate(args_list))
    queue.reverse()
    in_flight: dict[Any, int] = {}
    while queue or in_flight:
        while queue and len(in_flight) < limit:
            i, args = queue.pop()
            in_flight[remote.remote(*args)] = i
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
        if not ready:
            try:
                watch.check_cpus()
            except ClusterError:
                _settle(in_flight)
                raise
        for ref in ready:
            i = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as exc:
                _settle(in_flight)
                # Every failure Ray reports is one line: an error the task raised, and as well a
                # worker that died under it (OOM killer, segfault) once its retries ran out, an
                # object lost with its node...
                if not isinstance(exc, ray.exceptions.RayError):
                    raise
                cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                error = _one_line(describe(i), cause, resume_hint)
                raise error from (None if error is cause else exc)
            on_done(i, result)


def _failed(what: str, cause: BaseException, resume_hint: str) -> YlinkError:
    """The one line of a task that failed, wherever it ran."""
    text = str(cause).strip()
    name = getattr(cause, "type_name", type(cause).__name__)  # workers.RemoteError stands for another type
    return YlinkError(f"{what} failed: {name}: {text.splitlines()[-1] if text else ''}"
                      f" (finished work is kept: {resume_hint})")


def _settle(in_flight: dict) -> None:
    """Stop the other tasks of a failed phase and collect their outcomes: Ray prints the error of
    every task whose result is never fetched ("Unhandled error ..."), burying the one line that says
    what went wrong under tracebacks of the same failure."""
    import ray

    for ref in in_flight:
        ray.cancel(ref, force=True)  # the run stops here; what they finished is kept by its markers
    for ref in in_flight:
        with contextlib.suppress(Exception):  # cancelled, or failed too: the first error is the one reported
            ray.get(ref)
