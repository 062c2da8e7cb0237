"""Worker processes on this machine: what a run's tasks run in when it has several tasks and no Ray
cluster (`ray.execution: auto` or `processes`: engine/executors/processes.py).

Each worker is this module run as `python -m ylink_data.engine.workers`, serving one task at a time
over its pipes (core/pipes.py): a request is `(function, args)` pickled, a reply `("ok", result)` or
`("error", exception, traceback text)`. The functions are the same module-level task functions Ray runs, so only the
scheduler differs; a worker keeps its ops (and their models) from task to task, as a Ray worker does.

Against an embedded Ray, a pool starts only the processes a local run needs: no GCS, raylet,
dashboard, agents or log monitor, whose start and stop cost a run about 4 s here and whose Python
processes compete with the tasks for the CPUs (bench/RESULTS.md, "Issue 17 on a quiet machine").
What Ray gives a task is kept: it runs in its worker's main thread (ops' SIGALRM time limits hold),
alone on one CPU (`OMP_NUM_THREADS=1`, which pyarrow's thread pool honours, and one tokenizer
thread, as Ray sets them), and a worker that dies under it (the OOM killer, a segfault) is replaced and the task retried
up to `MAX_RETRIES` times, as Ray's `max_retries` does. Workers die with the driver (PDEATHSIG), so a
killed run leaves none behind to write beside its rerun.
"""
from __future__ import annotations

import importlib
import os
import pickle
import signal
import subprocess
import traceback
from collections import deque
from contextlib import closing
from multiprocessing.connection import wait  # poll(2): no limit of 1,024 file descriptors
from typing import Any, BinaryIO, Callable, Iterator, Sequence

from ylink_data.core.pipes import close_pipes, receive, send, serve_stdio, start_child

MAX_RETRIES = 3  # as the Ray tasks' max_retries (executors/ray): retried on worker loss, never on bugs
_WORKER_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


class WorkerCrashedError(RuntimeError):
    """A task's worker process died under it on every attempt (Ray's name for the same failure)."""


class RemoteTraceback(Exception):
    """The traceback of a task's exception in its worker, made the exception's cause in the driver
    (as concurrent.futures does): `ylink --debug` shows where the task failed."""

    def __str__(self) -> str:
        return self.args[0]


class RemoteError(RuntimeError):
    """An exception a task raised that cannot travel back pickled: its type's name and message."""

    def __init__(self, type_name: str, message: str):
        super().__init__(type_name, message)
        self.type_name, self.message = type_name, message

    def __str__(self) -> str:
        return self.message


PRELOAD_ENV = "YLINK_WORKER_PRELOAD"  # comma-separated modules a worker loads on start (op modules, Op.preload)


class _Worker:
    def __init__(self, preload: Sequence[str] = ()) -> None:
        env = {k: os.environ.get(k, v) for k, v in _WORKER_ENV.items()}
        env[PRELOAD_ENV] = ",".join(preload)
        self.proc = start_child(__name__, env=env)
        self.task: int | None = None  # the index of the task it runs

    def send(self, fn: Callable, args: tuple) -> None:
        send(self.proc.stdin, pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL))

    def reply(self) -> tuple[str, Any]:
        """("ok", result) or ("error", exception); EOFError when the worker died."""
        (data,) = receive(self.proc.stdout, 1)
        status, value, *where = pickle.loads(data)
        if where:
            value.__cause__ = RemoteTraceback(where[0])
        return status, value

    def died(self) -> str:
        code = self.proc.wait()
        self.close()
        if code < 0:
            name = signal.Signals(-code).name
            return f"killed by {name}" + (" (as the kernel's OOM killer does)" if name == "SIGKILL" else "")
        return f"exit code {code}"

    def close(self, kill: bool = False) -> None:
        """End the worker: kill it, or close its pipes (EOF ends an idle worker) and wait."""
        close_pipes(self.proc)
        if kill:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WorkerPool:
    """Up to `size` worker processes, started as tasks need them and kept until `close`."""

    def __init__(self, size: int, preload: Sequence[str] = ()):
        self.size = max(1, size)
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []

    def start(self) -> None:
        """Start every worker now, so that they load the code while the driver still plans."""
        while len(self._idle) < self.size:
            self._idle.append(_Worker(self.preload))

    def run(self, fn: Callable, args_list: Sequence[tuple], on_done: Callable[[int, Any], None],
            on_error: Callable[[int, BaseException], BaseException]) -> None:
        """`fn(*args)` for each args; `on_done(i, result)` as each finishes (see `results`)."""
        with closing(self.results(fn, args_list, on_error)) as results:
            for i, value in results:
                on_done(i, value)

    def results(self, fn: Callable, args_list: Sequence[tuple],
                on_error: Callable[[int, BaseException], BaseException]) -> Iterator[tuple[int, Any]]:
        """`fn(*args)` for each args, one task per worker at a time, yielding `(i, result)` as each
        finishes. The first task that raises stops the others (their workers are killed: what they
        finished is kept by their markers) and `on_error(i, exception)` is raised. Closing the iterator
        before its end kills the workers still running tasks."""
        queue = deque(enumerate(args_list))
        attempts = [0] * len(args_list)
        busy: dict[BinaryIO, _Worker] = {}
        try:
            while queue or busy:
                while queue and len(busy) < self.size:
                    worker = self._idle.pop() if self._idle else _Worker(self.preload)
                    worker.task, args = queue.popleft()
                    attempts[worker.task] += 1
                    try:
                        worker.send(fn, args)
                    except BrokenPipeError:  # it died before it read the task: a reply says how
                        pass
                    busy[worker.proc.stdout] = worker
                for stream in wait(list(busy)):
                    worker = busy.pop(stream)
                    i = worker.task
                    try:
                        status, value = worker.reply()
                    except EOFError:
                        how = worker.died()
                        if attempts[i] > MAX_RETRIES:
                            raise on_error(i, WorkerCrashedError(
                                f"the worker process running it died ({how}) on each of {attempts[i]} attempts"))
                        queue.appendleft((i, args_list[i]))
                        continue
                    self._idle.append(worker)
                    if status != "ok":
                        raise on_error(i, value)
                    yield i, value
        except BaseException:
            for worker in busy.values():  # stopped mid-task: their state is unknown
                worker.close(kill=True)
            raise

    def close(self) -> None:
        """End the workers. They are idle (each replied to its last task, whose files and marker were
        written before it returned), so they are killed: a clean interpreter exit of each would
        hold up the end of the run by a quarter of a second for nothing."""
        workers, self._idle = self._idle, []
        for worker in workers:
            worker.close(kill=True)


# ----------------------------------------------------------------------------- the worker


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    while True:
        try:
            (data,) = receive(requests, 1)
        except EOFError:  # the driver closed the pipe or exited
            return
        try:
            fn, args = pickle.loads(data)
            reply: tuple = ("ok", fn(*args))
        except Exception as exc:  # the task's failure, reported by the driver as one line
            reply = ("error", exc, traceback.format_exc())
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            if reply[0] == "error":  # an exception whose constructor takes other arguments fails here
                pickle.loads(payload)  # (not a result: a helper task's table would be copied for nothing)
        except Exception as exc:
            if reply[0] == "error":
                reply = ("error", RemoteError(type(reply[1]).__name__, str(reply[1])), reply[2])
            else:
                reply = ("error", RemoteError(type(exc).__name__, f"the task's result cannot be sent back: {exc}"),
                         traceback.format_exc())
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        send(replies, payload)


def _main() -> None:
    requests, replies = serve_stdio()
    # What every task needs, loaded before the first task comes (a pool is started ahead of its
    # tasks, WorkerPool.start): the task functions, the run's op modules (an op named by a task that
    # is not among them loads every op module then, `ops.op_class`) and what they load on first use
    # (numba's compiled loops: ~1 s), with a `warm()` each.
    import ylink_data.engine.tasks  # noqa: F401

    for name in filter(None, os.environ.get(PRELOAD_ENV, "").split(",")):
        warm = getattr(importlib.import_module(name), "warm", None)
        if warm is not None:
            warm()

    _serve(requests, replies)


if __name__ == "__main__":
    # The module's own copy, not `__main__`'s: RemoteError must pickle by the name the driver knows.
    from ylink_data.engine.workers import _main as main

    main()
