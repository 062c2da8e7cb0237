"""What the benchmarks share: timing a side in CPU seconds of this process.

CPU seconds, not wall time: documents per CPU-second is documents/s per core, and unlike wall time it
does not count the time other jobs on this shared machine hold the core. Every timed side is
single-threaded; wall / CPU is kept in `WALL_OVER_CPU` and printed as a check."""
from __future__ import annotations

import time
from typing import Callable

WALL_OVER_CPU: list[float] = []


def timed(fn: Callable[[], object]) -> float:
    """CPU seconds `fn()` took in this process."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    WALL_OVER_CPU.append(wall / cpu if cpu else 1.0)
    return cpu
