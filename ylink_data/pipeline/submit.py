"""Running many Ray tasks from a driver: a bounded number in flight, every failure one line, and
the public fault injection YLINK_FAIL_AFTER_TASKS (the driver stops abruptly after N tasks), shared
by the pipeline runner and `ylink export`."""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Sequence

from ..errors import YlinkError
from .ray_env import cluster_cpus

FAIL_AFTER_ENV = "YLINK_FAIL_AFTER_TASKS"
FAIL_EXIT_CODE = 75


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


def submit_all(remote, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
               describe: Callable[[int], str], resume_hint: str = "rerun the same command to resume") -> None:
    """Run `remote(*args)` for each args, a bounded number in flight (driver memory stays flat
    for 100k tasks); `on_done(i, result)` as each finishes."""
    import ray

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
                raise YlinkError(f"{describe(i)} failed: {type(cause).__name__}: "
                                 f"{str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
                                 f" (finished work is kept: {resume_hint})") from exc
            on_done(i, result)


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
