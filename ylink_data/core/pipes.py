"""A child Python process that serves its parent over its stdin and stdout: messages are
length-prefixed byte fields, and the child dies with its parent.

Used by the children that work under a deadline (`core/deadline.py`: one HTML page or document file
per round trip) and by the worker processes of a run on one machine (`engine/workers.py`: one task
per round trip).
"""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from typing import BinaryIO

_LENGTH = struct.Struct("<Q")
_PARENT_ENV = "YLINK_PARENT_PID"  # the pid a child's parent had when it started the child


def start_child(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -m MODULE ARGS...` with pipes on its stdin and stdout (stderr is the parent's), running
    the same code as this process; `serve_stdio` in the child makes those pipes its channel."""
    return subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**child_env(), **(env or {}), _PARENT_ENV: str(os.getpid())})


def close_pipes(proc: subprocess.Popen) -> None:
    """Close the pipes to and from a child that has ended or is being ended, never raising: closing
    its stdin flushes what a write left buffered, which a dead child's pipe refuses (BrokenPipeError:
    a reader child killed between two files crashed the next read, issue 39 point 16). Those bytes
    were for the child alone, and it is gone."""
    for stream in (proc.stdin, proc.stdout):
        if stream is None:
            continue
        try:
            stream.close()
        except OSError:  # the buffered bytes are dropped; the file descriptor is closed all the same
            pass


def child_env() -> dict[str, str]:
    """The parent's environment with its import path (as multiprocessing gives a spawned child): the
    child must run the same code as its parent (a checkout may shadow an installed copy)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def serve_stdio() -> tuple[BinaryIO, BinaryIO]:
    """In the child: (requests, replies). The kernel kills it when its parent dies, Ctrl-C is left to
    the parent (which ends its children), what a library prints goes to stderr, not into the
    replies, and a reply to a parent that has gone away ends the child quietly."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.excepthook = _quiet_broken_pipe
    return sys.stdin.buffer, replies


def _quiet_broken_pipe(kind, value, tb) -> None:
    if issubclass(kind, BrokenPipeError):
        os._exit(0)  # no one is left to read a reply, nor a traceback about it
    sys.__excepthook__(kind, value, tb)


def die_with_parent() -> None:
    """On Linux, have the kernel kill this process when its parent dies: a killed run must not leave
    a child chewing a hostile page or a task for minutes. A parent that died before this call (the
    kernel would never tell) ends the child now. Elsewhere stdin's EOF ends the child once it is
    idle."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if os.environ.get(_PARENT_ENV, str(os.getppid())) != str(os.getppid()):
            os._exit(0)


def send(stream: BinaryIO, *fields: bytes) -> None:
    """BrokenPipeError when the other side is gone (a child's parent that died: see `serve_stdio`)."""
    for field in fields:
        stream.write(_LENGTH.pack(len(field)))
        stream.write(field)
    stream.flush()


def receive(stream: BinaryIO, count: int) -> list[bytes]:
    """`count` fields; EOFError when the other side closed its end (or died) first."""
    return [_read_exactly(stream, _LENGTH.unpack(_read_exactly(stream, _LENGTH.size))[0]) for _ in range(count)]


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data
