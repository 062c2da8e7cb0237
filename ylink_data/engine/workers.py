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

Workers are forked from a warm parent (`_Zygote`: this module run with `--zygote`), which loads what
every worker needs once (the task code, the run's op modules, what they preload, warmed) while the
driver plans: a worker started from nothing cost ~3 CPU s (imports, numba's loops, jieba's
dictionary), 50 CPU s for 16 workers (issue 40), and a forked one starts in milliseconds with all
of it loaded. The zygote forks a worker for each request, handing it the two pipe ends the driver
made for it (SCM_RIGHTS over a Unix socket), and tells the driver each worker's pid and, once it
has reaped it, its exit status. It dies with the driver, and its workers with it.
"""
from __future__ import annotations

import importlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import traceback
from collections import deque
from contextlib import closing
from multiprocessing.connection import wait  # poll(2): no limit of 1,024 file descriptors
from typing import Any, BinaryIO, Callable, Iterator, Sequence

from ylink_data.core.pipes import child_env, die_with_parent, receive, send, serve_stdio, start_child

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


def _worker_env(preload: Sequence[str]) -> dict[str, str]:
    env = {k: os.environ.get(k, v) for k, v in _WORKER_ENV.items()}
    env[PRELOAD_ENV] = ",".join(preload)
    return env


class _Zygote:
    """The warm process workers are forked from (see the module docstring). Messages from it are
    `_EVENT`s: (b"p", pid, 0) the worker just forked, (b"x", pid, exit code) one it reaped."""

    def __init__(self, preload: Sequence[str]):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**child_env(), **_worker_env(preload), _ZYGOTE_FD_ENV: str(theirs.fileno()),
               "YLINK_PARENT_PID": str(os.getpid())}
        # Its stdout is the driver's stderr: what a library prints in a worker must not mix with the
        # driver's output (a spawned worker's is its stderr too, core/pipes.serve_stdio).
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, "--zygote"], stdin=subprocess.DEVNULL,
                                     stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else None,
                                     pass_fds=(theirs.fileno(),), env=env)
        theirs.close()
        self.exits: dict[int, int] = {}
        self._pending: deque[_Worker] = deque()  # forks asked for whose pid has not come yet
        self._buffer = b""

    def fork(self, worker: "_Worker") -> tuple[BinaryIO, BinaryIO]:
        """Ask for a new worker: its requests pipe and its replies pipe, at once (tasks sent to it wait
        in the pipe while the zygote still loads: the driver plans meanwhile); its pid comes later
        (`pid`). EOFError if the zygote died."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            socket.send_fds(self.sock, [b"f"], [req_r, rep_w])
        except OSError:
            os.close(req_w)
            os.close(rep_r)
            raise EOFError("the zygote is gone") from None
        finally:  # the worker's ends: the zygote has its own copies now
            os.close(req_r)
            os.close(rep_w)
        self._pending.append(worker)
        return os.fdopen(req_w, "wb"), os.fdopen(rep_r, "rb")

    def pid(self, worker: "_Worker") -> int:
        """A forked worker's pid (the zygote says them in the order of the requests)."""
        while worker.forked_pid is None:
            self._take(self._event(None))
        return worker.forked_pid

    def exit_code(self, pid: int, timeout: float = 5.0) -> int | None:
        """The exit code of a worker that ended (negative: the signal), once the zygote reaped it."""
        while pid not in self.exits:
            event = self._event(timeout)
            if event is None:
                return None
            self._take(event)
        return self.exits.pop(pid)

    def _take(self, event: tuple[bytes, int, int]) -> None:
        kind, pid, code = event
        if kind == b"p":
            self._pending.popleft().forked_pid = pid
        else:
            self.exits[pid] = code

    def _event(self, timeout: float | None) -> tuple[bytes, int, int] | None:
        while len(self._buffer) < _EVENT.size:
            if timeout is not None and not select.select([self.sock], [], [], timeout)[0]:
                return None
            data = self.sock.recv(4096)
            if not data:
                raise EOFError("the zygote is gone")
            self._buffer += data
        event, self._buffer = _EVENT.unpack(self._buffer[:_EVENT.size]), self._buffer[_EVENT.size:]
        return event

    def close(self) -> None:
        self.sock.close()  # EOF: the zygote exits (its workers are ended by the pool)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):  # pytest's capture, a notebook's stream
        return False


_EVENT = struct.Struct("<cii")  # (kind, pid, exit code)
_ZYGOTE_FD_ENV = "YLINK_ZYGOTE_FD"


class _Worker:
    def __init__(self, preload: Sequence[str] = (), zygote: _Zygote | None = None) -> None:
        self.zygote = zygote
        self.forked_pid: int | None = None  # set by the zygote's answer
        if zygote is not None:
            self.proc = None
            self.stdin, self.stdout = zygote.fork(self)
        else:
            self.proc = start_child(__name__, env=_worker_env(preload))
            self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.task: int | None = None  # the index of the task it runs

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else self.zygote.pid(self)

    def send(self, fn: Callable, args: tuple) -> None:
        send(self.stdin, pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL))

    def reply(self) -> tuple[str, Any]:
        """("ok", result) or ("error", exception); EOFError when the worker died."""
        (data,) = receive(self.stdout, 1)
        status, value, *where = pickle.loads(data)
        if where:
            value.__cause__ = RemoteTraceback(where[0])
        return status, value

    def died(self) -> str:
        code = self._wait(None)
        self.close()
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            return f"killed by {name}" + (" (as the kernel's OOM killer does)" if name == "SIGKILL" else "")
        return f"exit code {code}"

    def _wait(self, timeout: float | None) -> int | None:
        """Its exit code once it ended (None: not within `timeout` s)."""
        if self.proc is not None:
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
        try:
            return self.zygote.exit_code(self.pid, 60.0 if timeout is None else timeout)
        except (EOFError, OSError):  # the zygote died (killed with the driver's process group): so did its workers
            return None

    def close(self, kill: bool = False) -> None:
        """End the worker: kill it, or close its pipes (EOF ends an idle worker) and wait."""
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:  # the worker died with data in the pipe
                pass
        if kill:
            self._kill()
        if self._wait(5) is None:
            self._kill()
            self._wait(5)

    def _kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, EOFError):  # gone already; or its zygote is, and it with it
            pass


class WorkerPool:
    """Up to `size` worker processes, started as tasks need them and kept until `close`."""

    def __init__(self, size: int, preload: Sequence[str] = (), fork: bool = True):
        self.size = max(1, size)
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []
        # Forked from a zygote where the OS allows it (Linux: SCM_RIGHTS, PDEATHSIG), else each from nothing.
        self._fork = fork and sys.platform.startswith("linux")
        self._zygote: _Zygote | None = None

    def start(self) -> None:
        """Start every worker now, so that they load the code while the driver still plans."""
        while len(self._idle) < self.size:
            self._idle.append(self._new_worker())

    def _new_worker(self) -> _Worker:
        if not self._fork:
            return _Worker(self.preload)
        if self._zygote is None or self._zygote.proc.poll() is not None:
            if self._zygote is not None:
                self._zygote.close()
            self._zygote = _Zygote(self.preload)
        try:
            return _Worker(self.preload, self._zygote)
        except EOFError:  # the zygote died (the OOM killer): a new one
            self._zygote.close()
            self._zygote = _Zygote(self.preload)
            return _Worker(self.preload, self._zygote)

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
                    worker = self._idle.pop() if self._idle else self._new_worker()
                    worker.task, args = queue.popleft()
                    attempts[worker.task] += 1
                    try:
                        worker.send(fn, args)
                    except BrokenPipeError:  # it died before it read the task: a reply says how
                        pass
                    busy[worker.stdout] = worker
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
        zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()


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


def load_worker_code() -> None:
    """What every task needs, loaded before the first task comes (a pool is started ahead of its
    tasks, WorkerPool.start): the task functions, the run's op modules (an op named by a task that
    is not among them loads every op module then, `ops.op_class`) and what they load on first use
    (numba's compiled loops: ~1 s), with a `warm()` each."""
    import ylink_data.engine.tasks  # noqa: F401

    for name in filter(None, os.environ.get(PRELOAD_ENV, "").split(",")):
        warm = getattr(importlib.import_module(name), "warm", None)
        if warm is not None:
            warm()


def _main() -> None:
    requests, replies = serve_stdio()
    load_worker_code()
    _serve(requests, replies)


def _zygote_main() -> None:
    """The zygote: load the workers' code once, then fork a worker for each request on the socket
    (its two pipe ends come with it), reporting each worker's pid and, once reaped, its exit code."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(os.environ.pop(_ZYGOTE_FD_ENV)))
    load_worker_code()
    children: set[int] = set()
    while True:
        ready = select.select([sock], [], [], 0.2)[0]
        for pid in list(children):  # reap the workers that ended, and say how
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                sock.sendall(_EVENT.pack(b"x", pid, os.waitstatus_to_exitcode(status)))
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 1, 2)
        if not msg:  # the driver closed its end: done (its workers end with their pipes)
            return
        pid = os.fork()
        if pid == 0:
            sock.close()
            _forked_worker(*fds)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        sock.sendall(_EVENT.pack(b"p", pid, 0))


def _forked_worker(requests_fd: int, replies_fd: int) -> None:
    """A worker forked from the zygote: dies with it (and so with the driver), serves its pipes."""
    zygote = os.getppid()
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != zygote:  # it died before the line above
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _serve(os.fdopen(requests_fd, "rb"), os.fdopen(replies_fd, "wb"))
    finally:
        os._exit(0)


if __name__ == "__main__":
    # The module's own copy, not `__main__`'s: RemoteError must pickle by the name the driver knows.
    from ylink_data.engine import workers

    workers._zygote_main() if "--zygote" in sys.argv[1:] else workers._main()
