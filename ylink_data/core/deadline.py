"""Work on one untrusted input at a time in a child process that is killed at a deadline: what
extracts HTML pages (`text/transform/extract_process.py`) and reads document files
(`io/readers/isolated.py`).

A signal in the working process cannot bound work done in C: Python runs a SIGALRM handler only
once the C call returns (lexbor and libxml2 for HTML, PDFium, lxml under python-docx). A 1.1 MB page
of 100,000 nested <div>s held Resiliparse for 483 s under a 5 s limit (bench/RESULTS.md, "Bounding
extract's time per page"). A process can be killed at any instruction, and when a child dies (a
crash of a C library on a hostile file, the kernel's OOM killer) only the input it held is lost,
not the worker that runs the task.

One child per `DeadlineProcess`, started on first use and reused: an input costs one round trip
through two pipes. The child runs each input under its own SIGALRM at the limit, which stops Python
code and lets it carry on with the next input; the parent kills it `GRACE_S` later when it is stuck
in C, and the next input gets a new child (its start is not counted in that input's time).

A call may also bound the input's memory (`memory_limit`): the child holds its address space to its
own size plus that for the input (core/memory.py), so that an allocation past it fails whatever makes
it, and the input is `ChildOutOfMemory` when it failed with a MemoryError, or failed or killed the
child (PDFium aborts) after its resident memory rose near the limit: the parent samples the child's
peak while it waits, the child resetting it between inputs. A child that ran out gets no next input
(its heap may keep what the input took): a new one starts.

The child is `python -m MODULE ARGS...`, whose main calls `serve(load)`. Messages are length-prefixed
fields (core/pipes.py): requests `((args, time limit, memory limit) pickled, payload bytes)`, the
payload raw so that a page or a file is not pickled; replies `(status, value)` pickled.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from multiprocessing.connection import wait  # poll(2): a worker may hold fds past select()'s 1024
from typing import Any, Callable

from ylink_data.core.errors import DocumentError
from ylink_data.core.memory import limit_address_space, near_limit, reset_peak, usage
from ylink_data.core.timelimit import DocumentTimeout, time_limit, timeout_message
from ylink_data.core.pipes import close_pipes, receive, send, serve_stdio, start_child
from ylink_data.core.startup import startup

GRACE_S = 0.5  # after the limit, for the child's own alarm to answer before it is killed
START_LIMIT_S = 120.0  # imports and warm-up, on a machine busy with other work
SAMPLE_S = 0.01  # how often a parent waiting on an input with a memory limit reads the child's peak
_DIED, _DIED_OUT_OF_MEMORY, _OUT_OF_MEMORY = "died", "died out of memory", "out of memory"
Handler = Callable[[Any, bytes], Any]


class ChildFailed(DocumentError):
    """The work raised on an input (the message is its error as in-process work would word it:
    "ValueError: ..."), or it killed the child twice (`died`)."""

    died = False


class ChildOutOfMemory(DocumentError):
    """The input needed more memory than the call's `memory_limit` (the message says how it ended:
    "MemoryError: ...", "SIGABRT, signal 6")."""


class DeadlineProcess:
    """`call(args, payload, time_limit_s)` runs the child's handler on one input and returns what it
    returned; raises DocumentTimeout (message "timeout: ...") past the limit, by `time_limit_s +
    GRACE_S` at the latest, and `failure` when the handler raised or the child died."""

    failure: type[ChildFailed] = ChildFailed

    def __init__(self, module: str, *args: str, name: str):
        self.module, self.args, self.name = module, args, name  # name: "the hybrid extractor process"
        self._child: subprocess.Popen | None = None
        self._ready = False  # the child said it loaded what it needs

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def spawn(self) -> None:
        """Start the child without waiting for it: it loads its libraries while this process does
        other work (reads the first input)."""
        if self._child is not None and self._child.poll() is None:
            return
        self.close()
        self._child = start_child(self.module, *self.args)
        self._ready = False

    def start(self) -> None:
        """Start the child (unless `spawn` did) and wait until it is ready (also done by `call`)."""
        self.spawn()
        if self._ready:
            return
        with startup():  # the child's imports: once per child, not the first input's work
            reply = self._reply(START_LIMIT_S)
        if reply is None or reply[0] != "ready":
            self.close()
            why = f"did not start in {START_LIMIT_S:g} s" if reply is None else f"failed to start ({reply[1]})"
            raise self.failure(f"{self.name} {why}")
        self._ready = True

    def call(self, args: Any, payload: bytes, time_limit_s: float, memory_limit: int | None = None) -> Any:
        """A child that dies on an input is not proof against the input: the kernel's OOM killer takes
        it (its score is the highest) when any process on the machine needs memory, and anyone may
        kill it. The input goes to a new child once more; only an input that kills that one too is
        failed for it, "it killed ... twice", or ChildOutOfMemory when either death came with the
        child's memory near `memory_limit` (bytes the input may add to the child's own size)."""
        status, value = self._call_once(args, payload, time_limit_s, memory_limit)
        if status in (_DIED, _DIED_OUT_OF_MEMORY):
            retry, value = self._call_once(args, payload, time_limit_s, memory_limit)
            if retry in (_DIED, _DIED_OUT_OF_MEMORY):
                ran_out = _DIED_OUT_OF_MEMORY in (status, retry)
                retry = _OUT_OF_MEMORY if ran_out else _DIED
                value = f"it killed {self.name} twice ({value})"
            status = retry
        if status == "timeout":
            raise DocumentTimeout(value)
        if status == _OUT_OF_MEMORY:
            raise ChildOutOfMemory(value)
        if status != "ok":
            failure = self.failure(value)
            failure.died = status == _DIED
            raise failure
        return value

    def _call_once(self, args: Any, payload: bytes, time_limit_s: float, memory_limit: int | None) -> tuple[str, Any]:
        self.start()  # outside the limit: starting a child is not the input's time
        watch = _Watch(self._child.pid, memory_limit) if memory_limit is not None else None
        try:
            request = pickle.dumps((args, time_limit_s, memory_limit), pickle.HIGHEST_PROTOCOL)
            send(self._child.stdin, request, payload)
            reply = self._reply(time_limit_s + GRACE_S, watch)
        except BrokenPipeError:  # the child died before it read the input
            reply = (_DIED, self._died())
        except BaseException:  # interrupted mid-request (Ctrl-C, a signal's exception): the child's
            self.close()       # state is unknown, so the next input gets a new one
            raise
        if reply is None:  # stuck where its own alarm cannot reach (C code)
            self.close()
            return "timeout", timeout_message(time_limit_s)
        if reply[0] == _OUT_OF_MEMORY:
            self.close()  # its heap may keep what the input took: the next input gets a new child
        return reply

    def _reply(self, timeout: float, watch: _Watch | None = None) -> tuple | None:
        """The child's next reply, or None if none came within `timeout` seconds; a child's memory
        is sampled as it works (`watch`)."""
        out = self._child.stdout
        deadline = time.monotonic() + timeout
        while not wait([out], timeout if watch is None else min(SAMPLE_S, max(0.0, deadline - time.monotonic()))):
            if watch is None or time.monotonic() >= deadline:
                return None
            watch.sample()
        try:
            (reply,) = receive(out, 1)
        except EOFError:
            return (_DIED_OUT_OF_MEMORY if watch is not None and watch.ran_out() else _DIED), self._died()
        return pickle.loads(reply)

    def _died(self) -> str:
        """How the child ended: "SIGKILL, signal 9" or "exit code 1"."""
        code = self._child.wait()
        self.close()
        return f"{signal.Signals(-code).name}, signal {-code}" if code < 0 else f"exit code {code}"

    def close(self) -> None:
        """Kill the child (a new one starts on the next `call`)."""
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.wait()
            close_pipes(child)

    def __enter__(self) -> DeadlineProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self, finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
        # At interpreter exit the modules this needs may be torn down already (their globals None):
        # the child dies with its parent then (pipes.serve_stdio), so there is nothing to close.
        if not finalizing():
            self.close()


class _Watch:
    """A child's peak resident memory while it works on one input, read from its parent."""

    def __init__(self, pid: int, limit: int):
        self.pid, self.limit = pid, limit
        self.base = usage(pid).get("VmRSS")  # idle, before the input: its size
        self.peak = self.base or 0

    def sample(self) -> None:
        # VmHWM: the peak since the child reset it, after its last input; kept between samples
        self.peak = max(self.peak, usage(self.pid).get("VmHWM", 0))

    def ran_out(self) -> bool:
        return self.base is not None and near_limit(self.peak - self.base, self.limit)


def serve(load: Callable[[], Handler]) -> None:
    """The child's main: `load()` imports what the work needs and returns the handler, then each
    input sent is handled until the parent closes the pipe. An exception of any kind is the input's
    error, reported for it alone; the child carries on with the next. An input with a memory limit
    runs with the child's address space bounded to its size now plus the limit."""
    requests, replies = serve_stdio()
    _first_to_go()
    handle = load()
    reset_peak()
    send(replies, pickle.dumps(("ready", None)))
    while True:
        try:
            header, payload = receive(requests, 2)
        except EOFError:  # the parent closed the pipe or exited
            return
        args, seconds, memory_limit = pickle.loads(header)
        start = _bound_memory(memory_limit)
        ran_out = False
        try:
            with time_limit(seconds):
                _held_if_asked()
                reply = ("ok", handle(args, payload))
        except DocumentTimeout as exc:
            reply = ("timeout", str(exc))
        except Exception as exc:
            reply = ("error", f"{type(exc).__name__}: {exc}")
            ran_out = isinstance(exc, MemoryError)
        finally:
            if memory_limit is not None:
                limit_address_space(None)
        if reply[0] == "error" and start is not None and (
                ran_out or near_limit(usage().get("VmHWM", 0) - start, memory_limit)):
            reply = (_OUT_OF_MEMORY, reply[1])
        message = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        if reply[0] != _OUT_OF_MEMORY:  # one that ran out is ended, its peak left for the kernel to report
            reset_peak()  # the next input's peak is its own: the parent reads it while it waits
        send(replies, message)


def _bound_memory(limit: int | None) -> int | None:
    """Bound this process's address space for one input to its size now plus `limit`; its resident
    size now (None: no limit, or no /proc to measure by)."""
    now = usage()
    if limit is None or not now:
        return None
    reset_peak()
    limit_address_space(now["VmSize"] + limit)
    return now["VmRSS"]


HOLD_ENV = "YLINK_TEST_HOLD_CHILD"  # tests only: see _held_if_asked


def _held_if_asked() -> None:
    """Fault injection for tests (DEVELOPERS.md): with YLINK_TEST_HOLD_CHILD=K:DIR in the environment,
    the first K children (counted by the files in DIR) write DIR/<pid> when an input arrives and wait
    there, to be killed from outside in the middle of that input as the OOM killer would; the time
    limit still ends the wait."""
    value = os.environ.get(HOLD_ENV)
    if not value:
        return
    times, _, folder = value.partition(":")
    if len(os.listdir(folder)) >= int(times):
        return
    with open(os.path.join(folder, str(os.getpid())), "w"):
        pass
    while True:
        signal.pause()


def _first_to_go() -> None:
    """When memory runs out, have the kernel's OOM killer take this child, which holds one hostile
    input, rather than the worker, which holds a task (Linux; raising one's own score needs no
    privilege)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
