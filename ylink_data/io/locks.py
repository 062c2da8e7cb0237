"""`flock` on lock files, one way for every lock ylink takes on a local disk (the shard cache's
locks, a run's OUTPUT/run.lock). The kernel releases a flock when its holder dies, kill -9
included, so a lock file left behind is never a stale lock.

Two things every user of a lock file needs, done here once:
- A lock file may be removed while another process waits on it (the cache evicts a shard, a run
  ends and removes run.lock while still holding it): the lock then taken is on a file no longer at
  the path, so `flock` checks the path still names the locked file and tries again if not.
- A process forked while holding a lock shares the open file, and with it the flock: the child
  closes its copies at once (without unlocking, which would release the parent's lock), so that a
  forked child (a DataLoader worker, a helper process) never keeps a lock for its whole life.
"""
from __future__ import annotations

import contextlib
import fcntl
import os

_held: set[int] = set()  # descriptors holding a lock, closed in forked children


def flock(path: str | os.PathLike, operation: int) -> int | None:
    """Open `path` (created if missing) and flock it with `operation` (`fcntl.LOCK_EX` or
    `LOCK_SH`, with `LOCK_NB` not to wait); the descriptor that holds the lock, or None when
    LOCK_NB was given and another process holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            _held.add(fd)
            return fd
        os.close(fd)


def unlock(fd: int) -> None:
    _held.discard(fd)
    os.close(fd)  # closing the last descriptor of the open file releases its flock


def is_free(path: str | os.PathLike) -> bool:
    """Whether nobody holds `path`'s lock (at this instant)."""
    fd = flock(path, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if fd is None:
        return False
    unlock(fd)
    return True


def _close_inherited_locks() -> None:
    for fd in list(_held):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_locks)
