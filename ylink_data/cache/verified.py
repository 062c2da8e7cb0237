"""A shard read straight from its run (a `ShardLoader` without `cache_dir`), verified as the cache
verifies one: its size and sha256 must be the manifest's before Parquet reads a byte of it.

A local shard is hashed where it lies (one sequential read; the page cache then serves Parquet's
reads) and memory-mapped; a shard whose file has not changed since (same size, inode and times) is
not hashed again by this process, whichever loader opens it (TextDataset makes a loader per
`iter()`, per worker and per state, so a memo per loader would hash every shard every epoch). A
remote shard is downloaded whole by `download` (ranged parts in parallel,
hashed as they arrive) into an unnamed temporary file in TMPDIR, which disappears with its last
user even after kill -9, and memory-mapped: the disk holds it, not the process's memory, and it is
fetched once however many of its row groups are read.
"""
from __future__ import annotations

import contextlib
import mmap
import tempfile
from typing import Iterator

import fsspec
import pyarrow as pa

from ylink_data.core.storage import NO_ROOM, is_local
from ylink_data.io.manifest import ShardRef
from ylink_data.cache.download import (DownloadError, DownloadPolicy, allocate, check_digest, download, file_stamp, no_room,
                       sha256_file, wrong_size)


# The local files this process has verified: (path, file stamp, sha256). The stamp (size, inode,
# mtime_ns, ctime_ns) changes whenever the file is rewritten, replaced or touched, and the path is
# the run folder resolved (`check_manifest`) joined with the shard's path, so every loader of a run
# spells it alike. Shared by every loader of the process; a forked DataLoader worker starts with
# its parent's. Entries are small (a few hundred bytes per shard ever verified).
_VERIFIED: set[tuple[str, tuple[int, int, int, int], str]] = set()


class VerifiedShards:
    """Opens shards of one run, verified."""

    def __init__(self, fs: fsspec.AbstractFileSystem, policy: DownloadPolicy | None = None):
        self.fs = fs
        self.policy = policy or DownloadPolicy()

    @contextlib.contextmanager
    def open(self, path: str, ref: ShardRef) -> Iterator[pa.Buffer]:
        """The content of `path` on the run's filesystem (`ref.url` in messages), verified against `ref`."""
        if is_local(self.fs):
            try:
                f = open(path, "rb")
            except OSError as exc:
                raise DownloadError(f"cannot read {ref.url}: {exc.strerror} (the run changed after its manifest "
                                    "was written?)") from None
            with f:
                self._check_local(f.fileno(), ref)
                yield _mapped(f.fileno(), ref.size)
            return
        with tempfile.TemporaryFile(prefix="ylink-shard-") as f:
            try:
                allocate(f.fileno(), ref.size)
                check_digest(ref.url, ref.sha256, download(self.fs, path, ref.url, ref.size, f.fileno(), self.policy))
            except OSError as exc:
                if exc.errno not in NO_ROOM:
                    raise
                raise no_room(self.fs, path, ref.url, ref.size, tempfile.gettempdir(), "temporary", exc,
                              "set TMPDIR to a disk with room, or give the loader a cache_dir") from None
            yield _mapped(f.fileno(), ref.size)

    def _check_local(self, fd: int, ref: ShardRef) -> None:
        stamp = file_stamp(fd)
        if stamp[0] != ref.size:
            raise wrong_size(ref.url, stamp[0], ref.size)
        key = (ref.url, stamp, ref.sha256)
        if key not in _VERIFIED:
            check_digest(ref.url, ref.sha256, sha256_file(fd))
            _VERIFIED.add(key)


def _mapped(fd: int, size: int) -> pa.Buffer:
    """The file's first `size` bytes as a zero-copy Arrow buffer. The mapping outlives the
    descriptor (closed by the caller) and is unmapped when the last buffer using it is freed."""
    if size == 0:
        return pa.py_buffer(b"")
    return pa.py_buffer(mmap.mmap(fd, size, prot=mmap.PROT_READ))
