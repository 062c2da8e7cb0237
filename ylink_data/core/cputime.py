"""CPU seconds of a process tree: this process (every thread), the children it has reaped, and its
live descendants (a task's HTML extractor or document reader child, core/deadline.py, keeps running
between tasks and is never reaped while it serves). What a task costs in CPU is the difference of
two readings around it (`engine/submit.timed`), so a task's time in its children counts too."""
from __future__ import annotations

import os
import sys

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process, its reaped children and its live descendants (on
    Linux, from /proc; elsewhere this process and its reaped children only)."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    if sys.platform.startswith("linux"):
        total += sum(_process_cpu(pid) for pid in _descendants(os.getpid()))
    return total


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone meanwhile
        return found
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return found


def _process_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of a live process, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # after the command's ")": state is field 3, utime 14 .. cstime 17 (proc(5)), here 11 .. 14
    return sum(int(v) for v in fields[11:15]) / _TICKS
