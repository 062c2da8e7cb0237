"""A time limit on one piece of work (a document in an op, a page in the extractor process).

SIGALRM in the main thread, which is where Ray runs tasks: the handler runs at the next Python
instruction, so it stops Python code, but C code (a parser) only once it returns. Work that can get
stuck in C runs in a child process that is killed instead (`text/transform/extract_process.py`)."""
from __future__ import annotations

import contextlib
import signal
import threading


class DocumentTimeout(BaseException):
    """One document took longer than its time limit. A BaseException, like KeyboardInterrupt, so
    that a library's broad `except Exception` cannot swallow it and run on past the limit. Its message
    starts with "timeout", which quarantines the document with reason `timeout`."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise DocumentTimeout in this thread after `seconds` (main thread only; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum, frame):
        raise DocumentTimeout(timeout_message(seconds))

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timeout_message(seconds: float) -> str:
    return f"timeout: over the {seconds:g} s time limit"
