"""Storage through fsspec, for every layer: the filesystem of a URL, paths joined, files written
atomically (complete or not at all) with one-line errors for a read-only or full folder, JSON files,
and a writer that hashes what passes through it.

A local file written atomically takes shape under a temporary name and is renamed into place. The
temporary name is never one that readers list: inside a `staging` block (a run's writers: its
`_work/staging/` folder) it lies in that folder, elsewhere it is hidden beside the file
(`.NAME.tmp-HEX`); `is_temporary` knows both, and an older ylink's `NAME.tmp-HEX`, so that whoever
owns the folder sweeps what a killed writer left (io/layout.py)."""
from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import hashlib
import json
import os
import re
import uuid
from typing import IO, Any, Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ylink_data.core.errors import OutputError
from ylink_data.core.paths import package_path


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem for `url` and the path within it (`package://` URLs: the package's files, core/paths.py)."""
    return fsspec.core.url_to_fs(package_path(url), **(storage_options or {}))


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    return isinstance(fs, LocalFileSystem)


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def full_url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """A path as users write it: plain for local files, with its protocol otherwise."""
    return path if is_local(fs) else fs.unstrip_protocol(path)


class HashingWriter:
    """A write-only file wrapper that counts bytes and computes sha256 as data passes through, so a
    shard's checksum costs no second read."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.sha256.update(data)
        self.bytes += len(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
# In the name of the empty file written and removed at once to learn whether a folder can be written
# (io/writable.py, before every run): one left by a kill in between is no foreign file (io/layout.py).
WRITE_PROBE = "ylink-write-check-"


# No room on the disk, in the user's quota, or in one file (EFBIG: past the file system's or the
# process's largest file): the same fix for the user, more space.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def output_error(exc: BaseException, folder: str) -> OutputError | None:
    """The one-line error for a write into `folder` that failed because the folder is read-only,
    not ours to write, or full; None for any other failure."""
    if isinstance(exc, PermissionError) or (isinstance(exc, OSError) and exc.errno in _NOT_WRITABLE):
        return OutputError(f"{folder} is not writable ({_reason(exc)}): choose a writable output.path")
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        return OutputError(f"no space left for {folder} ({_reason(exc)}): free some space, then rerun the "
                           "same command to resume (finished work is kept)")
    return None


def _reason(exc: BaseException) -> str:
    if getattr(exc, "strerror", None):
        return exc.strerror
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# The staging folder of the writes in progress: (the folder it serves, the staging folder), set by
# `staging`; a context variable, so that each thread and task has its own.
_STAGING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("ylink_staging", default=None)
_TEMPORARY = re.compile(r"\.tmp-[0-9a-f]{12}$")


@contextlib.contextmanager
def staging(root: str, folder: str) -> Iterator[None]:
    """In the block, every local file under `root` written atomically (`atomic_write`,
    `publish_copy`, and so every writer built on them) takes shape in `folder` (inside `root`: the
    same filesystem, so the rename is atomic), never beside the file it becomes."""
    token = _STAGING.set((root.rstrip("/"), folder.rstrip("/")))
    try:
        yield
    finally:
        _STAGING.reset(token)


def temporary_path(path: str) -> str:
    """Where the local file `path` takes shape before it is renamed into place: in the staging
    folder of the block (`staging`) when `path` lies under its root, else hidden beside it."""
    name = path.rsplit("/", 1)[-1]
    tag = f".tmp-{uuid.uuid4().hex[:12]}"
    staged = _STAGING.get()
    if staged is not None and path.startswith(staged[0] + "/") and not path.startswith(staged[1] + "/"):
        return f"{staged[1]}/{name}{tag}"
    parent = path.rsplit("/", 1)[0] if "/" in path else "."
    return f"{parent}/.{name}{tag}"


def is_temporary(name: str) -> bool:
    """Whether a file name is an atomic write's temporary one (`temporary_path`'s, or an older
    ylink's `NAME.tmp-HEX` beside the file): what a writer killed before its rename left."""
    return _TEMPORARY.search(name) is not None


STOP_AT_ENV, STOP_EXIT_CODE = "YLINK_TEST_STOP_AT", 137  # tests only: see `step`


def step() -> None:
    """Fault injection for tests (DEVELOPERS.md). Every change this module makes to a folder is a
    step: a temporary file created, then written whole, renamed or linked into place, a file
    removed (`remove`). With YLINK_TEST_STOP_AT=K:FILE in the environment each step adds a byte to
    FILE (under a lock: worker processes count together) and the process that makes the K-th dies
    on the spot (exit 137), as a kill -9 would; K=0 only counts. A test stops a run at every step in
    turn and resumes it."""
    spec = os.environ.get(STOP_AT_ENV)
    if not spec:
        return
    limit, path = spec.split(":", 1)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"x")
        count = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if count == int(limit):
        os._exit(STOP_EXIT_CODE)


@contextlib.contextmanager
def atomic_write(fs: fsspec.AbstractFileSystem, path: str, mode: str = "wb") -> Iterator[IO]:
    """Write `path` so that it appears complete or not at all. Local files take shape under a
    temporary name (`temporary_path`) and are renamed; on object stores an upload only becomes
    visible when it completes, so the object is written in place. Nothing is published if the
    block raises. A folder that is read-only, not ours or full raises OutputError naming it."""
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    with writing_into(full_url(fs, parent) if parent else "."):
        if is_local(fs):
            yield from _atomic_write_local(path, parent, mode)
        else:
            yield from _atomic_write_remote(fs, path, mode)


def _atomic_write_local(path: str, parent: str, mode: str) -> Iterator[IO]:
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = temporary_path(path)
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    f = open(tmp, mode)
    try:
        step()
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        step()
        os.replace(tmp, path)
        step()
    except BaseException:
        # Clean-up must never replace the error that brought us here: on a full disk the close
        # fails too, in a read-only folder the removal.
        with contextlib.suppress(OSError):
            f.close()
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _atomic_write_remote(fs: fsspec.AbstractFileSystem, path: str, mode: str) -> Iterator[IO]:
    f = fs.open(path, mode)
    try:
        yield f
    except BaseException:
        with contextlib.suppress(Exception):
            if hasattr(f, "discard"):
                f.discard()  # abort the pending upload instead of committing it
            else:
                f.close()
            if fs.exists(path):
                fs.rm(path)
        raise
    f.close()
    step()


@contextlib.contextmanager
def writing_into(folder: str) -> Iterator[None]:
    """Writes into `folder` in the block: a read-only, foreign or full folder becomes an OutputError."""
    try:
        yield
    except OSError as exc:
        error = output_error(exc, folder)
        if error is None:
            raise
        raise error from None


def write_json(fs: fsspec.AbstractFileSystem, path: str, obj: Any) -> None:
    data = json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False).encode()
    with atomic_write(fs, path) as f:
        f.write(data + b"\n")


def read_json(fs: fsspec.AbstractFileSystem, path: str) -> Any:
    # One GET: opening a file over HTTP asks for its size first, a second round trip.
    return json.loads(fs.cat_file(path))


def publish_copy(fs: fsspec.AbstractFileSystem, src: str, dst: str) -> None:
    """Make `dst` a copy of `src` atomically, keeping `src` (so a crash mid-publish can redo it).
    Local: a hard link when possible (no bytes copied) at a temporary name (`temporary_path`),
    renamed into place; object stores: a server-side copy."""
    if is_local(fs):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = temporary_path(dst)
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        try:
            os.link(src, tmp)
        except OSError:
            fs.copy(src, tmp)
        step()
        os.replace(tmp, dst)
    else:
        fs.copy(src, dst)
    step()


def remove(fs: fsspec.AbstractFileSystem, path: str, recursive: bool = False) -> None:
    """Remove `path` (a folder with `recursive`): one step (`step`)."""
    fs.rm(path, recursive=recursive)
    step()
