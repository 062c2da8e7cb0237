"""What kind of directory entry a listed local input path is: the one place that decides which
entries of an input folder, wildcard or name are read as files.

fsspec lists every entry of a folder that is not a folder as a file: a FIFO (reading it waits
forever for a writer), a symlink to /dev/zero (an endless file), a socket, a device, a symlink to a
folder (not descended into), a dangling symlink or a loop. Only a regular file (or a symlink to one)
is an input file:
- entries that hold no data of their own (FIFO, socket, character or block device, a symlink to a
  folder) are skipped with one logged line naming them;
- entries that point at data which is not there (a dangling symlink, a symlink loop) and names that
  are not UTF-8 are refused in one line: the first is a missing input, and the second cannot be
  written where a file's name goes (ids, the `source` column, run.json are UTF-8 text), so the user
  renames it rather than have a run that loses it or fails half-way.
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from ylink_data.core.errors import InputError
from ylink_data.core.file_errors import entry_kind


@dataclass(frozen=True)
class Skipped:
    path: str
    why: str  # "a FIFO (named pipe)"

    def what(self) -> str:
        """What the entry is: "a FIFO (named pipe)", "a symlink to a character device (/dev/zero)"."""
        return f"a symlink to {self.why} ({os.readlink(self.path)})" if os.path.islink(self.path) else self.why

    def line(self) -> str:
        what = self.what()
        hint = " (a folder's listing does not follow it; name it in input.paths to read it)" if "folder" in what else ""
        return f"skipped {shown_name(self.path)}: it is {what}, not a file{hint}"


def classify(path: str) -> Skipped | None:
    """None for a readable regular file; Skipped for an entry that holds no data; InputError (one
    line, naming the path and the fix) for one that should be data and cannot be read."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"the name of {shown_name(path)} is not UTF-8 (run.json, ids and the source column "
                         f"hold file names as UTF-8 text); rename it, e.g. `convmv -f latin1 -t utf8 --notest "
                         f"FILE`") from None
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what reading the path would open
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"{path} is a symlink to {os.readlink(path)}, which does not exist; "
                             f"fix or remove the link") from None
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{path} is a symlink loop (it leads back to itself); fix or remove the link") from None
        raise
    if stat.S_ISREG(mode):
        if not os.access(path, os.R_OK):
            raise InputError(f"no permission to read {path}")
        return None
    return Skipped(path, entry_kind(mode))


def shown_name(path: str) -> str:
    """The path on one line, bytes that are not UTF-8 shown as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
