"""Moving one shard's bytes from any fsspec URL into a local file: ranged parts fetched in parallel,
written and hashed in order as they arrive, each request retried with backoff when the failure is
transient (5xx, 408/429, timeouts, resets); and the few things done to such a local file (claim its
space, stamp it, hash it). What a shard is and where it lives is `store.py`'s business; this module
only moves and checks bytes."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import random
import shutil
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import fsspec
from fsspec.asyn import AsyncFileSystem, sync

from ylink_data.core.errors import YlinkError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DownloadPolicy:
    """How a shard is fetched. A part is one ranged GET of at most `part_bytes`; a shard smaller
    than `parallel` such parts is still cut into `parallel` parts (of at least `min_part_bytes`),
    so that a shard fetched alone uses every connection: the shard a reader waits for arrives as
    fast as the link allows. `timeout_s` bounds each GET (the whole part); attempt n waits about
    `backoff_s * 2**(n-1)` seconds (±50% jitter, at most `max_backoff_s`)."""

    part_bytes: int = 16 << 20
    min_part_bytes: int = 1 << 20
    parallel: int = 4
    attempts: int = 6
    timeout_s: float = 120.0
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0


class DownloadError(YlinkError):
    """A shard could not be fetched, or what arrived is not what the manifest promised."""


class NoRoomError(YlinkError):
    """A local disk (the cache's, or the temporary folder) has no room for a shard."""


class _NotRetryable(Exception):
    """A failure that another attempt cannot fix (wrong size); carries its own message."""


def download(fs: fsspec.AbstractFileSystem, path: str, url: str, size: int, fd: int,
             policy: DownloadPolicy = DownloadPolicy()) -> str:
    """Write the first `size` bytes of `path` into `fd` (at offset 0) and return their sha256 hex
    digest. Parts are requested `policy.parallel` at a time but consumed in order, so the digest is
    computed while the data streams in and at most `parallel` parts are held in memory."""
    sha = hashlib.sha256()
    step = max(1, min(policy.part_bytes, max(policy.min_part_bytes, -(-size // max(1, policy.parallel)))))
    if size <= 0:
        return sha.hexdigest()
    # A generator: a manifest that claims an absurd size fails at its first part, not by listing parts.
    todo = ((start, min(start + step, size)) for start in range(0, size, step))
    pool = ThreadPoolExecutor(max_workers=min(policy.parallel, -(-size // step)), thread_name_prefix="ylink-range")
    pending: deque[tuple[int, Future]] = deque()

    def submit() -> None:
        part = next(todo, None)
        if part is not None:
            pending.append((part[0], pool.submit(fetch_range, fs, path, url, part[0], part[1], size, policy)))

    try:
        for _ in range(policy.parallel):
            submit()
        while pending:
            offset, future = pending.popleft()
            data = future.result()
            _pwrite_all(fd, data, offset)
            sha.update(data)
            submit()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return sha.hexdigest()


def fetch_range(fs: fsspec.AbstractFileSystem, path: str, url: str, start: int, end: int, size: int,
                policy: DownloadPolicy) -> bytes:
    """Bytes [start, end) of `path`, retried per `policy`; a `DownloadError` naming `url` at the end."""
    for attempt in range(1, policy.attempts + 1):
        try:
            data = _cat_range(fs, path, start, end, policy.timeout_s)
            if len(data) == end - start:
                return data
            if len(data) == size > end - start:  # the server ignored Range and sent the whole file
                return data[start:end]
            raise _NotRetryable(f"got {len(data):,} bytes for bytes {start}-{end - 1}: the remote file is "
                                f"smaller than the manifest's {size:,} bytes")
        except Exception as exc:  # noqa: BLE001 -- every backend raises its own types; sorted below
            reason = describe(exc, policy.timeout_s)
            if not retryable(exc):
                raise DownloadError(f"cannot download {url}: {reason}") from exc
            if attempt == policy.attempts:
                raise DownloadError(f"cannot download {url}: {reason} (gave up after {attempt} attempts)") from exc
            delay = min(policy.max_backoff_s, policy.backoff_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
            log.warning("%s (bytes %d-%d): %s; attempt %d of %d in %.1fs", url, start, end - 1, reason,
                        attempt + 1, policy.attempts, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _cat_range(fs: fsspec.AbstractFileSystem, path: str, start: int, end: int, timeout_s: float) -> bytes:
    if isinstance(fs, AsyncFileSystem) and not fs.asynchronous:
        # Through the filesystem's own event loop, so that a timeout cancels the request itself.
        return sync(fs.loop, fs._cat_file, path, start=start, end=end, timeout=timeout_s)
    return fs.cat_file(path, start=start, end=end)


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind an exception or its causes (aiohttp, botocore, requests), if any."""
    seen = 0
    while exc is not None and seen < 5:
        for attr in ("status", "status_code", "code"):
            value = getattr(exc, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(value, int):
                return value
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def retryable(exc: BaseException) -> bool:
    """Whether another attempt may succeed: server errors, throttling, timeouts and dropped
    connections yes; missing files, permissions, other 4xx answers and wrong sizes no."""
    if isinstance(exc, (_NotRetryable, FileNotFoundError, PermissionError, IsADirectoryError,
                        NotADirectoryError, TypeError, AttributeError, NotImplementedError)):
        return False
    status = _status(exc)
    if status is not None and 400 <= status < 500:
        return status in (408, 425, 429)
    return True


def describe(exc: BaseException, timeout_s: float) -> str:
    """One line for a person: what went wrong with one request."""
    if isinstance(exc, _NotRetryable):
        return str(exc)
    if isinstance(exc, FileNotFoundError):
        return "not found"
    if isinstance(exc, TimeoutError):  # asyncio's and fsspec's timeouts are TimeoutErrors too
        return f"no answer within {timeout_s:g}s"
    status = _status(exc)
    text = " ".join(str(exc).split())
    if status is not None:
        return f"HTTP {status}" + (f" ({text[:200]})" if text and str(status) not in text else "")
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def check_digest(url: str, expected: str, digest: str) -> None:
    """A `DownloadError` unless the bytes of `url` hash to the manifest's `expected` sha256."""
    if digest != expected:
        raise DownloadError(f"cannot use {url}: its sha256 is {digest}, the manifest says {expected} "
                            "(the file changed after the run was written?)")


def wrong_size(url: str, actual: int, expected: int) -> DownloadError:
    return DownloadError(f"cannot use {url}: it has {actual:,} bytes, the manifest says {expected:,} "
                         "(the run changed after its manifest was written, or the copy is incomplete)")


def no_room(fs: fsspec.AbstractFileSystem, path: str, url: str, size: int, folder: str | os.PathLike, kind: str,
            exc: OSError, fix: str) -> YlinkError:
    """The one-line error for a shard that the disk of `folder` (the `kind` folder: "cache",
    "temporary") cannot hold (`exc`: ENOSPC, EDQUOT or EFBIG). A manifest that claims more bytes
    than the file has fails the same way; the remote size (asked only now, on failure) tells the
    two apart."""
    with contextlib.suppress(Exception):
        actual = int(fs.size(path))
        if actual != size:
            return wrong_size(url, actual, size)
    free = shutil.disk_usage(folder).free
    return NoRoomError(f"the {kind} folder {folder} has no room for {url}: it needs {size:,} bytes, {free:,} are free "
                       f"({exc.strerror}); {fix}")


def allocate(fd: int, size: int) -> None:
    """Claim a download's disk space before fetching it, so that a full disk fails at once, not
    halfway through the shard. Filesystems that cannot allocate ahead fail at the write instead."""
    if size:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise


def file_stamp(file: str | os.PathLike | int) -> tuple[int, int, int, int] | None:
    """(size, inode, mtime, ctime) of a path or open descriptor: changes whenever the file is
    rewritten, replaced or touched. None when the path does not exist."""
    try:
        st = os.stat(file)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def sha256_file(file: str | os.PathLike | int) -> str:
    """The sha256 hex digest of a file's whole content (a path, or an open descriptor read from its start)."""
    sha = hashlib.sha256()
    with open(file, "rb", closefd=not isinstance(file, int)) as f:
        f.seek(0)
        while chunk := f.read(4 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written
