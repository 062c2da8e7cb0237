"""One-time start-up work, timed apart from the work on documents: a model, a dictionary or a child
process that a worker loads once (an op's `setup`, jieba's dictionary on the first Chinese batch, an
extractor or reader child starting). The engine subtracts what `startup()` blocks took during a
stage's batches from the stage's `seconds` and counts it as its `startup_seconds`, so that a stage's
documents per second is its rate on documents, not a worker's start divided by a few documents.

Blocks nest (a `setup` that loads a model): only the outermost one counts. Per process; the work of
one thread at a time (loads happen in the task's thread)."""
from __future__ import annotations

import contextlib
import time
from typing import Iterator

_spent = 0.0
_depth = 0


@contextlib.contextmanager
def startup() -> Iterator[None]:
    """Time the block as one-time start-up work."""
    global _spent, _depth
    _depth += 1
    started = time.perf_counter()
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _spent += time.perf_counter() - started


def startup_seconds() -> float:
    """Seconds this process has spent in `startup()` blocks so far."""
    return _spent


__all__ = ["startup", "startup_seconds"]
