"""Content digests: what a file holds, not where it lies or when it was touched.

`content_digest(url)` hashes the bytes of a file, or of every file under a folder (with their
relative paths), through fsspec: the run's fingerprint holds it for every file an op reads
(`stages.base.Op.files_read`), so a model retrained or a benchmark rewritten in place is another run.
Size and modification time are not enough (a rewrite within the same second, a copy that keeps the
time, bytes flipped in place); they only let this process skip hashing a local file again: the
memo is keyed by (path, size, inode, mtime_ns, ctime_ns), the digest is of the content.

`sha256_of(fs, path)` is the SHA-256 that run manifests record for their shards, for checking a
shard before it is read as input (`readers.open_split`).

`store_version(info)` is the content hash a remote store keeps for an object (S3's and HTTP's ETag,
GCS's md5Hash or crc32c, Azure's etag), from what fsspec's `info`, `find` or `glob`
gives: a remote file is known by it without a byte of it being read (`io/input_versions.py`, and the
op files a worker checks against the driver's, `engine/files_read.py`).

What ylink writes to read back later (a cache, an index) carries a checksum of its content, written
with it and checked before it is trusted, through the helpers here: `new_digest` while writing a
file and `file_digest(path, end)` when reading it back (the decontamination index's footer),
`seal` / `unseal` for a JSON entry (the LLM response cache), `write_checksum` / `has_checksum` for a
sidecar (a downloaded quality model). Whatever fails the check is treated as absent: rebuilt,
asked again or fetched again, never used.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import fsspec

from ylink_data.core.storage import filesystem, is_local

_BLOCK = 4 << 20
# A stamp taken this soon after a file's last change may share its clock tick with a later change
# (NFS servers' clocks too): it cannot vouch that the file did not change since (io/input_versions.py).
RACY_NS = 2_000_000_000
# Local files hashed by this process: (path, stat stamp) -> digest. Small (one entry per file read).
_MEMO: dict[tuple[str, tuple[int, int, int, int]], str] = {}


def _stamp(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def new_digest() -> Any:
    """The checksum ylink writes with what it reads back (a BLAKE2b of 20 bytes: fast, and no
    accidental change passes it)."""
    return hashlib.blake2b(digest_size=20)


def _hasher(algorithm: str) -> Any:
    return new_digest() if algorithm == "blake2b" else hashlib.new(algorithm)


def _hash_file(fs: fsspec.AbstractFileSystem, path: str, algorithm: str, end: int | None = None) -> str:
    digest = _hasher(algorithm)
    left = end
    with fs.open(path, "rb") as f:
        while left is None or left > 0:
            block = f.read(_BLOCK if left is None else min(_BLOCK, left))
            if not block:
                break
            digest.update(block)
            left = None if left is None else left - len(block)
    return digest.hexdigest()


def _file_digest(fs: fsspec.AbstractFileSystem, path: str, algorithm: str = "blake2b", end: int | None = None) -> str:
    if not is_local(fs):
        return _hash_file(fs, path, algorithm, end)
    key = (f"{algorithm}:{end}:{os.path.realpath(path)}", _stamp(path))
    if key not in _MEMO:
        digest = _hash_file(fs, path, algorithm, end)
        # not rewritten while it was read, nor too soon after its last write for its stamp to vouch for
        # it (a second write in the same clock tick would leave the stamp equal)
        if _stamp(path) == key[1] and time.time_ns() - key[1][3] >= RACY_NS:
            _MEMO[key] = digest
        return digest
    return _MEMO[key]


def sha256_of(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """The SHA-256 (hex) of the file's bytes, as run manifests record them."""
    return _file_digest(fs, path, "sha256")


def file_digest(path: str | os.PathLike, end: int | None = None) -> str:
    """`new_digest` of a local file's first `end` bytes (all of them by default), read in blocks
    (never mapped: the pages read stay out of the process's memory)."""
    return _file_digest(fsspec.filesystem("file"), str(path), end=end)


# What stores call the hash of an object's content, in the order trusted: a digest of the bytes
# before an opaque version tag. ETag is S3's, HTTP's and Azure's; md5Hash and crc32c are GCS's.
_STORE_HASHES = (("md5Hash", "md5"), ("Content-MD5", "md5"), ("crc32c", "crc32c"),
                 ("ETag", "etag"), ("etag", "etag"), ("Etag", "etag"))


def store_version(info: dict[str, Any]) -> str | None:
    """`kind:value` of the content hash a store gives for one object (its fsspec `info`), or None
    when it gives none (a local file, memory://, a server without ETag): such files are hashed."""
    for key, kind in _STORE_HASHES:
        value = info.get(key)
        if isinstance(value, (bytes, bytearray)):
            value = value.hex()
        if isinstance(value, str) and value.strip('"'):
            return f"{kind}:{value.strip()}"
    return None


def file_version(url: str, storage_options: dict[str, Any] | None = None) -> str | None:
    """`store_version` of the object at `url` (one metadata request), None for a local file or a
    store that keeps no hash."""
    fs, path = filesystem(url, storage_options)
    if is_local(fs):
        return None
    fs.invalidate_cache(path)  # asked of the store now, not from the listings fsspec keeps
    return store_version(fs.info(path))


def local_state(url: str) -> tuple | None:
    """Where a local file (or every file under a local folder) lies and its stamp (size, inode,
    mtime, ctime): equal before and after something read it means that nothing was written or
    swapped in between (a write changes ctime, which no user can set back). None for a URL."""
    fs, path = filesystem(url)
    if not is_local(fs):
        return None
    names = [path] if not os.path.isdir(path) else sorted(fs.find(path))
    try:
        return tuple((os.path.realpath(n), _stamp(n)) for n in names)
    except FileNotFoundError:
        return ()


def content_digest(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """A digest of the bytes of the file at `url`, or of every file under the folder at `url` (their
    paths relative to it, then their bytes' digests). Raises FileNotFoundError when there is none."""
    fs, path = filesystem(url, storage_options)
    if not fs.isdir(path):
        if not fs.isfile(path):
            raise FileNotFoundError(url)
        return _file_digest(fs, path)
    root = path.rstrip("/")
    digest = new_digest()
    for name in sorted(fs.find(root)):
        digest.update(f"{name[len(root):]}\0{_file_digest(fs, name)}\n".encode())
    return digest.hexdigest()


_CHECKSUM = "checksum"


def _canonical(entry: dict[str, Any]) -> bytes:
    # surrogatepass: JSON may carry a lone surrogate (its \ud800 escape); the entry is still
    # checked (and its text judged by whoever reads it) instead of the check raising.
    text = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def seal(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` (JSON values) with the checksum of its content, for `unseal` to check."""
    digest = new_digest()
    digest.update(_canonical(entry))
    return {**entry, _CHECKSUM: digest.hexdigest()}


def unseal(entry: Any) -> dict[str, Any] | None:
    """The entry `seal` made, without its checksum, when it holds one that matches; None otherwise
    (damaged, edited, or written without one)."""
    if not isinstance(entry, dict) or not isinstance(entry.get(_CHECKSUM), str):
        return None
    body = {k: v for k, v in entry.items() if k != _CHECKSUM}
    return body if seal(body)[_CHECKSUM] == entry[_CHECKSUM] else None


def _sidecar(path: str | os.PathLike) -> str:
    return f"{os.fspath(path)}.{_CHECKSUM}"


def write_checksum(path: str | os.PathLike) -> None:
    """Writes the checksum of the local file at `path` beside it (`path.checksum`), atomically."""
    tmp = f"{_sidecar(path)}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(file_digest(path))
    os.replace(tmp, _sidecar(path))


def has_checksum(path: str | os.PathLike) -> bool:
    """Whether the local file at `path` is there with the content its `write_checksum` recorded."""
    try:
        with open(_sidecar(path)) as f:
            recorded = f.read().strip()
        return file_digest(path) == recorded
    except OSError:
        return False
