"""What the benchmarks share: timing a side in CPU seconds of this process.

CPU seconds, not wall time: documents per CPU-second is documents/s per core, and unlike wall time it
does not count the time other jobs on this shared machine hold the core. Every timed side is
single-threaded; wall / CPU is kept in `WALL_OVER_CPU` and printed as a check."""
from __future__ import annotations

import subprocess
import sys
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


_BUSY = "x = 0\nfor i in range(20_000_000): x += i\n"


def two_core_ceiling(code: str = _BUSY) -> float:
    """2 CPUs / 1 CPU throughput of a pure-Python busy loop right now (2.0 on two idle cores): what a
    shared machine's second core gives at the moment, to read a speed-up on 2 CPUs against. `code`:
    another workload to run the same way (e.g. the NumPy work of an op, which shares the cores'
    caches and memory bandwidth as a busy loop does not)."""
    def timed_loops(cores: str, n: int) -> float:
        started = time.perf_counter()
        procs = [subprocess.Popen(["taskset", "-c", cores, sys.executable, "-c", code]) for _ in range(n)]
        for p in procs:
            p.wait()
        return time.perf_counter() - started

    return 2 * timed_loops("0", 1) / timed_loops("0-1", 2)
