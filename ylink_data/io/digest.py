"""Content digests: what a file holds, not where it lies or when it was touched.

`content_digest(url)` hashes the bytes of a file, or of every file under a folder (with their
relative paths), through fsspec: the run's fingerprint holds it for every file an op reads
(`stages.base.Op.files_read`), so a model retrained or a benchmark rewritten in place is another run.
Size and modification time are not enough (a rewrite within the same second, a copy that keeps the
time, bytes flipped in place); they only let this process skip hashing a local file again: the
memo is keyed by (path, size, inode, mtime_ns, ctime_ns), the digest is of the content.

`sha256_of(fs, path)` is the SHA-256 that run manifests record for their shards, for checking a
shard before it is read as input (`readers.open_split`).
"""
from __future__ import annotations

import hashlib
import os
from typing import Any

import fsspec

from .fs import filesystem, is_local

_BLOCK = 4 << 20
# Local files hashed by this process: (path, stat stamp) -> digest. Small (one entry per file read).
_MEMO: dict[tuple[str, tuple[int, int, int, int]], str] = {}


def _stamp(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _hash_file(fs: fsspec.AbstractFileSystem, path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm) if algorithm != "blake2b" else hashlib.blake2b(digest_size=20)
    with fs.open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _file_digest(fs: fsspec.AbstractFileSystem, path: str, algorithm: str = "blake2b") -> str:
    if not is_local(fs):
        return _hash_file(fs, path, algorithm)
    key = (f"{algorithm}:{os.path.realpath(path)}", _stamp(path))
    if key not in _MEMO:
        digest = _hash_file(fs, path, algorithm)
        if _stamp(path) == key[1]:  # not rewritten while it was read
            _MEMO[key] = digest
        return digest
    return _MEMO[key]


def sha256_of(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """The SHA-256 (hex) of the file's bytes, as run manifests record them."""
    return _file_digest(fs, path, "sha256")


def content_digest(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """A digest of the bytes of the file at `url`, or of every file under the folder at `url` (their
    paths relative to it, then their bytes' digests). Raises FileNotFoundError when there is none."""
    fs, path = filesystem(url, storage_options)
    if not fs.isdir(path):
        if not fs.isfile(path):
            raise FileNotFoundError(url)
        return _file_digest(fs, path)
    root = path.rstrip("/")
    digest = hashlib.blake2b(digest_size=20)
    for name in sorted(fs.find(root)):
        digest.update(f"{name[len(root):]}\0{_file_digest(fs, name)}\n".encode())
    return digest.hexdigest()
