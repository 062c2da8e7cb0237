"""The memory of a process, and a hard bound on it: what holds a child that works on one untrusted
input (`core/deadline.py`) to a memory limit per input.

The bound is the address space (RLIMIT_AS, set by the child on itself before each input: its own
size then, plus the limit): past it an allocation fails, whatever makes it (Python, PDFium, lxml,
zlib), so no input can take a machine's memory. Python code gets a MemoryError; a C library gets a
null pointer, and gives an error or aborts (PDFium aborts: a 600 KB PDF whose page stream inflates
to gigabytes). Which failures were the limit's is told by how far the child's resident memory rose
on that input (`near_limit`): a failure after rising a quarter of the limit or more is taken for
running out of it. Linux only (/proc); elsewhere nothing is bounded or measured.
"""
from __future__ import annotations

import resource

_FIELDS = ("VmSize", "VmRSS", "VmHWM")  # address space, resident now, resident at its peak


def usage(pid: int | str = "self") -> dict[str, int]:
    """{"VmSize", "VmRSS", "VmHWM"} of a live process in bytes; {} where /proc does not say (another
    system, or the process has ended)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            lines = [line.split() for line in f if line.startswith(_FIELDS)]
    except OSError:
        return {}
    return {parts[0].rstrip(":"): int(parts[1]) * 1024 for parts in lines}


def limit_address_space(limit: int | None) -> None:
    """Hold this process's address space to `limit` bytes (None: back to its hard limit, unbounded
    unless the system sets one); the soft limit only, so that it can be raised again."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if limit is None:
        soft = hard
    else:
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def reset_peak() -> None:
    """Make this process's VmHWM its resident size now (Linux 4.0+), to measure one input's peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def near_limit(rise: int, limit: int) -> bool:
    """Whether an input that failed after resident memory rose by `rise` bytes ran out of `limit`.
    Memory growing to the limit stops where the next allocation would pass it: a buffer that doubles
    fails with at least a third of the limit in use, filled before it asked for more; a failure after
    using less is the input's own (a crash, a parse error)."""
    return rise >= limit // 4
