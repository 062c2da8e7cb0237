"""Running many tasks from a driver, in one of two places with the same task functions (only the
scheduler differs, as datatrove's local and Slurm executors share their steps):

- on Ray: a bounded number in flight, each task retried on worker loss (not on bugs);
- in this process, one after the other: what `ray.execution: auto` does for a batch of one task
  on the embedded Ray (there is nothing to run in parallel, and starting Ray costs seconds), and
  what `ray.execution: local` does for every batch.

Either way every failure is one line, and the public fault injection YLINK_FAIL_AFTER_TASKS (the
driver stops abruptly after N tasks) counts finished tasks; shared by the pipeline runner and
`ylink export`. A task run in this process that crashes it (YLINK_TEST_CRASH_TASK, the OOM killer)
takes the driver with it: the run stops as a killed `ylink run` does, and a rerun resumes."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Sequence

from ..config import RayConfig
from ..errors import ConfigError, YlinkError
from .ray_env import cluster_cpus

FAIL_AFTER_ENV = "YLINK_FAIL_AFTER_TASKS"
FAIL_EXIT_CODE = 75
LOCAL_MAX_TASKS = 1  # `execution: auto`: a batch this small runs in this process on an embedded Ray
RESUME_HINT = "rerun the same command to resume"


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


def runs_here(cfg: RayConfig, tasks: int) -> bool:
    """Whether a batch of `tasks` tasks runs in this process (else on Ray): `ray.execution`. Only
    from the main thread: ops' time limits are SIGALRM, which only the main thread gets (a Ray
    worker runs its task there), so a run started from another thread keeps them on Ray."""
    main = threading.current_thread() is threading.main_thread()
    if cfg.execution == "auto":
        return main and cfg.address is None and tasks <= LOCAL_MAX_TASKS
    if cfg.execution == "local" and not main:
        raise ConfigError("ray.execution: local runs tasks in the calling thread, which must be the main thread "
                          "(ops' time limits are SIGALRM); start the run from it, or use auto or ray")
    return cfg.execution == "local"


def submit_all(fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
               describe: Callable[[int], str], here: bool, resume_hint: str = RESUME_HINT) -> None:
    """Run `fn(*args)` for each args, in this process (`here`) or on Ray (initialised by the caller:
    `ensure_ray`); `on_done(i, result)` as each finishes."""
    if here:
        _run_here(fn, args_list, on_done, describe, resume_hint)
    else:
        _run_on_ray(fn, args_list, on_done, describe, resume_hint)


def _run_here(fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
              describe: Callable[[int], str], resume_hint: str) -> None:
    """In the main thread, where ops' SIGALRM time limits work, as in a Ray worker."""
    for i, args in enumerate(args_list):
        try:
            result = fn(*args)
        except YlinkError:
            raise
        except Exception as exc:
            raise _failed(describe(i), exc, resume_hint) from exc
        on_done(i, result)


_REMOTES: dict[Callable, Any] = {}  # each function becomes a Ray remote function once per process


def _remote(fn: Callable):
    import ray

    if fn not in _REMOTES:
        _REMOTES[fn] = ray.remote(num_cpus=1, max_retries=3)(fn)  # retried on worker loss, not on bugs
    return _REMOTES[fn]


def _run_on_ray(fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
                describe: Callable[[int], str], resume_hint: str) -> None:
    """A bounded number in flight (driver memory stays flat for 100k tasks)."""
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
                if isinstance(cause, YlinkError):
                    raise cause from None
                raise _failed(describe(i), cause, resume_hint) from exc
            on_done(i, result)


def _failed(what: str, cause: BaseException, resume_hint: str) -> YlinkError:
    """The one line of a task that failed, wherever it ran."""
    text = str(cause).strip()
    return YlinkError(f"{what} failed: {type(cause).__name__}: {text.splitlines()[-1] if text else ''}"
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
