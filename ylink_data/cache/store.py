"""The node-local shard cache: one folder that every process and job on a node shares.

Layout of `cache_dir`:
    shards/<key>.parquet                   a verified shard (only ever appears by an atomic rename)
    shards/<key>.parquet.tmp-<pid>-<rand>  a download in progress (sized to the shard up front)
    meta/<key>.json                        url, sha256, size and a stamp (size, inode, mtime, ctime)
    locks/<key>.lock                       flock: held exclusively to check, fetch or evict the shard
    locks/<key>.pin                        flock: held shared by readers; eviction needs it exclusively
    budget.lock                            flock: held while space is reserved and shards are evicted
    downloads.log                          one JSON line per completed download

`<key>` hashes the shard's URL, the manifest's sha256 and size (and an etag when the ref carries
one), so a shard whose content changes in a new manifest is a different entry. All locks are
`flock`s on files in `cache_dir`: the kernel drops them when a process dies, so kill -9 never
leaves a lock behind, and a leftover `.tmp-*` file is recognised as dead by its free lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import secrets
import time
from pathlib import Path
from typing import Callable, Iterator

from ylink_data.core.storage import NO_ROOM, filesystem
from ylink_data.io.locks import flock as _flock, is_free as _is_free, unlock as _unlock
from ylink_data.io.manifest import ShardRef
from ylink_data.io.run_files import is_sha256
from ylink_data.cache.download import DownloadError, DownloadPolicy, allocate, check_digest, download, file_stamp, no_room, sha256_file

log = logging.getLogger(__name__)

_SUFFIX = ".parquet"
_TMP = ".tmp-"


class ShardCache:
    """Shards of runs on local disk, downloaded once per node and verified against the manifest.

    `get(ref)` is the one verb: it downloads when needed (other processes wait for it on the
    shard's lock) and pins the shard while the caller's `with` block runs. `max_bytes` is a budget:
    before a download, unpinned shards are evicted, furthest next use first when `evict_hint` was
    given, else least recently used. Safe across threads and processes; picklable (for workers).
    """

    def __init__(self, cache_dir: str | os.PathLike, max_bytes: int | None = None,
                 storage_options: dict | None = None, policy: DownloadPolicy | None = None):
        self.cache_dir = Path(cache_dir).resolve()
        self.max_bytes = max_bytes
        self.storage_options = dict(storage_options or {})
        self.policy = policy or DownloadPolicy()
        self._refs: dict[str, ShardRef] = {}
        self._hint: Callable[[ShardRef], float] | None = None
        self._over_budget = False
        for sub in ("shards", "meta", "locks"):
            (self.cache_dir / sub).mkdir(parents=True, exist_ok=True)
        self._remove_dead_downloads()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_refs", "_hint")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _refs={}, _hint=None)

    # -- the public verbs ---------------------------------------------------------------------

    @contextlib.contextmanager
    def get(self, ref: ShardRef) -> Iterator[str]:
        """The local path of `ref`, downloaded first when missing or damaged; pinned (never
        evicted) until the block ends."""
        key = self.key(ref)
        self._refs[key] = ref
        lock = _flock(self._lock_path(key), fcntl.LOCK_EX)
        pin = None
        try:
            if not self._fresh(key, ref):
                self._fetch(key, ref)
            pin = _flock(self._pin_path(key), fcntl.LOCK_SH)
            # Last use, for LRU eviction. An explicit time: the kernel stamps files with a coarse
            # clock (a tick), and shards used within one tick would tie.
            now = time.time_ns()
            os.utime(pin, ns=(now, now))
        except BaseException:
            if pin is not None:
                _unlock(pin)
            raise
        finally:
            _unlock(lock)
        try:
            yield str(self.path(ref))
        finally:
            _unlock(pin)

    def contains(self, ref: ShardRef) -> bool:
        """Whether `ref` is cached, by the cheap check (size and the stamp recorded at download)."""
        key = self.key(ref)
        stamp = file_stamp(self._shard_path(key))
        return stamp is not None and stamp[0] == ref.size and self._meta_stamp(key) == list(stamp)

    def verify(self, ref: ShardRef) -> bool:
        """Re-hash a cached shard completely. A damaged one is forgotten (the next `get` fetches it
        again); returns whether `ref` is cached and intact."""
        key = self.key(ref)
        lock = _flock(self._lock_path(key), fcntl.LOCK_EX)
        try:
            path = self._shard_path(key)
            if not path.exists():
                return False
            if file_stamp(path)[0] == ref.size and sha256_file(path) == ref.sha256:
                self._write_meta(key, ref)
                return True
            log.warning("cached shard of %s is damaged (sha256 differs): it will be fetched again", ref.url)
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._meta_path(key))
            return False
        finally:
            _unlock(lock)

    def evict_hint(self, next_use: Callable[[ShardRef], float] | None) -> None:
        """Tell eviction when each shard is next needed (smaller: sooner; `math.inf`: never). Shards
        this process has not seen are evicted least recently used first, before any it will need."""
        self._hint = next_use

    def path(self, ref: ShardRef) -> Path:
        """Where `ref` lives when cached (it may not be)."""
        return self._shard_path(self.key(ref))

    @staticmethod
    def key(ref: ShardRef) -> str:
        parts = [ref.url, ref.sha256, str(ref.size)] + ([ref.etag] if ref.etag else [])
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]

    def usage(self) -> int:
        """Bytes held by cached shards and downloads in progress."""
        with self._budget_lock():
            cached, downloading = self._scan()
        return sum(size for _, size in cached) + sum(size for _, _, size in downloading)

    # -- checking and fetching (the caller holds the shard's lock) -----------------------------

    def _fresh(self, key: str, ref: ShardRef) -> bool:
        path = self._shard_path(key)
        stamp = file_stamp(path)
        if stamp is None:
            return False
        if stamp[0] != ref.size:
            log.warning("cached shard of %s has %d bytes instead of %d: fetching it again", ref.url, stamp[0], ref.size)
            return False
        if self._meta_stamp(key) == list(stamp):
            return True
        # Changed since it was verified (or its metadata is missing): hash it once more.
        if sha256_file(path) == ref.sha256:
            self._write_meta(key, ref)
            return True
        log.warning("cached shard of %s was modified (sha256 differs): fetching it again", ref.url)
        return False

    def _fetch(self, key: str, ref: ShardRef) -> None:
        if not is_sha256(ref.sha256):  # "verified" must mean something: no digest, no cache entry
            raise DownloadError(f"cannot cache {ref.url}: no sha256 to verify it against ({ref.sha256!r})")
        shards = self.cache_dir / "shards"
        for leftover in shards.glob(f"{key}{_SUFFIX}{_TMP}*"):  # we hold the lock: their owners died
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
        tmp = shards / f"{key}{_SUFFIX}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
        started = time.perf_counter()
        fs, remote = filesystem(ref.url, self.storage_options)
        fd = -1
        try:
            fd = self._reserve(key, tmp, ref.size)
            allocate(fd, ref.size)
            digest = download(fs, remote, ref.url, ref.size, fd, self.policy)
            check_digest(ref.url, ref.sha256, digest)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            with self._budget_lock():
                os.replace(tmp, self._shard_path(key))
            self._write_meta(key, ref)
            seconds = time.perf_counter() - started
            line = json.dumps({"time": round(time.time(), 3), "url": ref.url, "key": key, "bytes": ref.size,
                               "seconds": round(seconds, 3), "pid": os.getpid()})
            _append(self.cache_dir / "downloads.log", line)
        except OSError as exc:
            if exc.errno not in NO_ROOM:
                raise
            raise no_room(fs, remote, ref.url, ref.size, self.cache_dir, "cache", exc,
                          "free space there, or give the cache a budget the disk can hold (--max-bytes, "
                          "max_cache_bytes), so that it evicts old shards") from None
        finally:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
        log.info("fetched %s (%d bytes) in %.2fs", ref.url, ref.size, seconds)

    def _reserve(self, key: str, tmp: Path, size: int) -> int:
        """Create the download's file at full size (so that other processes count it) and, under
        the budget, evict until it fits. Returns the open file descriptor."""
        with self._budget_lock():
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.ftruncate(fd, size)
                if self.max_bytes is not None:
                    self._evict(key, self.max_bytes)
            except BaseException:
                os.close(fd)
                raise
            return fd

    @contextlib.contextmanager
    def _budget_lock(self) -> Iterator[None]:
        """Held while space is reserved, shards are evicted or renamed into place: a listing of
        shards/ under it is consistent (a rename seen mid-listing could count a shard twice)."""
        fd = _flock(self.cache_dir / "budget.lock", fcntl.LOCK_EX)
        try:
            yield
        finally:
            _unlock(fd)

    # -- eviction (the caller holds budget.lock) -----------------------------------------------

    def _evict(self, keep: str, max_bytes: int) -> None:
        cached, downloading = self._scan()
        used = sum(size for _, size in cached)
        for tmp, owner, size in downloading:
            if owner != keep and _is_free(self._lock_path(owner)):  # its downloader died
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
                continue
            used += size
        if used <= max_bytes:
            self._over_budget = False
            return
        for key, size in self._eviction_order([(k, s) for k, s in cached if k != keep]):
            if used <= max_bytes:
                break
            if self._try_evict(key):
                used -= size
        over = used > max_bytes
        if over:  # warned once per episode: a reader pinning many shards would otherwise flood the log
            log.log(logging.INFO if self._over_budget else logging.WARNING,
                    "shard cache %s holds %d bytes, over its budget of %d: every other shard is in use "
                    "(pinned), so it grows until readers release them", self.cache_dir, used, max_bytes)
        self._over_budget = over

    def _eviction_order(self, cached: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Never needed again first, then shards this process does not know (least recently used
        first), then the ones it will need, furthest next use first."""
        hint = self._hint

        def rank(item: tuple[str, int]) -> tuple[int, float]:
            key = item[0]
            ref = self._refs.get(key)
            if hint is not None and ref is not None:
                with contextlib.suppress(Exception):
                    nxt = float(hint(ref))
                    return (0, self._last_used(key)) if math.isinf(nxt) else (2, -nxt)
            return 1, self._last_used(key)

        return sorted(cached, key=rank)

    def _try_evict(self, key: str) -> bool:
        lock = _flock(self._lock_path(key), fcntl.LOCK_EX | fcntl.LOCK_NB)
        if lock is None:  # being checked or fetched right now
            return False
        try:
            pin = _flock(self._pin_path(key), fcntl.LOCK_EX | fcntl.LOCK_NB)
            if pin is None:  # in use
                return False
            try:
                for path in (self._shard_path(key), self._meta_path(key), self._pin_path(key), self._lock_path(key)):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
            finally:
                _unlock(pin)
        finally:
            _unlock(lock)
        log.info("evicted shard %s from %s", key, self.cache_dir)
        return True

    def _last_used(self, key: str) -> float:
        for path in (self._pin_path(key), self._shard_path(key)):
            with contextlib.suppress(FileNotFoundError):
                return os.stat(path).st_mtime
        return 0.0

    def _scan(self) -> tuple[list[tuple[str, int]], list[tuple[Path, str, int]]]:
        """(cached shards as (key, bytes), downloads in progress as (file, key, bytes))."""
        cached, downloading = [], []
        with os.scandir(self.cache_dir / "shards") as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    if entry.name.endswith(_SUFFIX):
                        cached.append((entry.name[: -len(_SUFFIX)], entry.stat().st_size))
                    elif _TMP in entry.name:
                        owner = entry.name.split(_SUFFIX + _TMP, 1)[0]
                        downloading.append((Path(entry.path), owner, entry.stat().st_size))
        return cached, downloading

    def _remove_dead_downloads(self) -> None:
        """Temporary files whose owner is gone (their shard's lock is free): a killed download."""
        for folder, suffix in (("shards", _SUFFIX), ("meta", ".json")):
            for tmp in (self.cache_dir / folder).glob(f"*{suffix}{_TMP}*"):
                key = tmp.name.split(suffix + _TMP, 1)[0]
                lock = _flock(self._lock_path(key), fcntl.LOCK_EX | fcntl.LOCK_NB)
                if lock is None:
                    continue
                try:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(tmp)
                        log.info("removed %s, left by a download that did not finish", tmp)
                finally:
                    _unlock(lock)

    # -- metadata ----------------------------------------------------------------------------

    def _write_meta(self, key: str, ref: ShardRef) -> None:
        meta = {"url": ref.url, "sha256": ref.sha256, "size": ref.size, "etag": ref.etag,
                "stamp": list(file_stamp(self._shard_path(key)))}
        target = self._meta_path(key)
        tmp = target.with_name(f"{target.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}")
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, target)

    def _meta_stamp(self, key: str) -> list | None:
        try:
            return json.loads(self._meta_path(key).read_text()).get("stamp")
        except (FileNotFoundError, ValueError):
            return None

    def _shard_path(self, key: str) -> Path:
        return self.cache_dir / "shards" / f"{key}{_SUFFIX}"

    def _meta_path(self, key: str) -> Path:
        return self.cache_dir / "meta" / f"{key}.json"

    def _lock_path(self, key: str) -> Path:
        return self.cache_dir / "locks" / f"{key}.lock"

    def _pin_path(self, key: str) -> Path:
        return self.cache_dir / "locks" / f"{key}.pin"


# -- files -------------------------------------------------------------------------------------

def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
