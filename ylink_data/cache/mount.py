"""`ylink cache mount`: a run's shards as plain files, for training code that only knows paths.

A read-only FUSE file system (libfuse3 through the `mfusepy` binding) that shows the run's layout:

    MOUNTPOINT/manifest.json                  the run's manifest, byte for byte
    MOUNTPOINT/data/part-NNNNN.parquet        each shard, with the size the manifest gives
    MOUNTPOINT/tiers/<tier>/manifest.json     for runs with output tiers: each tier's own manifest
    MOUNTPOINT/tiers/<tier>/data/...          and its shards (so a tier folder is a run too)
    MOUNTPOINT/megatron/part-NNNNN.bin, .idx  the run's Megatron files (output.megatron), tiers' too
    MOUNTPOINT/megatron/data-path.txt         Megatron-LM's --data-path, weighted by tokens, naming
                                              every pair under MOUNTPOINT (for --data-args-path); each
                                              other folder of pairs (tiers/<tier>/megatron/) gets one
                                              naming its own pairs

The data-path.txt files are made from the checked manifest, not read from the run (a run's own
data-path.txt names the pairs where it was written, and the manifest does not list it): Megatron
reads the .bin/.idx files by these paths, through the mount.

Listing and `stat` come from the manifest alone: nothing is downloaded until a file is opened (a
Megatron .bin or .idx is a shard here like any other: one verified file of the cache).
`open` pins the shard in the node-local cache (`ShardCache.get`: downloaded and verified first when
missing, so an open can take as long as one shard's download), `read` serves bytes from the cached
file, `release` unpins it. Opening a shard points the prefetcher at the shards after it in the same
folder, in manifest order, so that a reader going through the run finds the next shards cached.

Every write fails with EROFS: the mount is read-only (`-o ro`) and the file system has no write
operation. `serve()` runs in the foreground until SIGINT/SIGTERM/SIGHUP, which unmount cleanly.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import join
from ylink_data.io.manifest import ManifestError, MegatronPair, ShardRef, read_manifest
from ylink_data.io.run_files import clean_path, inside_run
from ylink_data.io.megatron.write import data_path_args
from ylink_data.cache.prefetch import Prefetcher
from ylink_data.cache.store import ShardCache

log = logging.getLogger(__name__)

__all__ = ["RunTree", "fs_class", "MountError", "serve", "check_mountpoint", "fuse_problem", "unmount", "is_mounted"]


DATA_PATH = "data-path.txt"  # Megatron-LM's --data-args-path file, as output.megatron names it


class MountError(YlinkError):
    """The run cannot be mounted (no FUSE, bad mount point)."""


# -- the run's tree, from its manifest ----------------------------------------------------------

@dataclass
class _Shard:
    ref: ShardRef
    folder: str       # its folder in the mount ("/data", "/tiers/hq/data")
    order: int        # its position among the shards of that folder, in manifest order


@dataclass
class RunTree:
    """What the mount shows: folders, small files held in memory (manifests), and shards."""

    url: str
    dirs: dict[str, list[str]] = field(default_factory=dict)   # folder -> sorted names in it
    blobs: dict[str, bytes] = field(default_factory=dict)      # path -> content (manifests)
    shards: dict[str, _Shard] = field(default_factory=dict)    # path -> shard
    folders: dict[str, list[ShardRef]] = field(default_factory=dict)  # folder -> its shards in order
    mtime_ns: int = 0

    @classmethod
    def load(cls, url: str, storage_options: dict | None = None, mountpoint: str | None = None) -> "RunTree":
        """Read the run's manifest (checked: `ylink_data.io.manifest`) and its tiers' manifests at
        `url`: a local folder or fsspec URL. `mountpoint`: where the tree is served, the base of
        the data-path.txt prefixes (None: prefixes relative to the run folder)."""
        run = read_manifest(url, storage_options)
        tree = cls(url=url, mtime_ns=_created_ns(run.data))
        tree._add_file("/manifest.json")
        tree.blobs["/manifest.json"] = run.raw
        for shard in run.files():  # the Parquet shards, then the Megatron .bin/.idx files
            path = "/" + shard.path
            folder = str(PurePosixPath(path).parent)
            refs = tree.folders.setdefault(folder, [])
            tree.shards[path] = _Shard(shard.ref, folder, len(refs))
            refs.append(shard.ref)
            tree._add_file(path)
        tiers = run.data.get("tiers") or {}
        if not isinstance(tiers, dict):
            raise ManifestError(f"{run.url}: 'tiers' is not an object of tier folders; refusing it")
        for tier, info in tiers.items():
            given = info.get("path") if isinstance(info, dict) else None
            what = f"{run.url} tier {tier!r}"
            folder = "/" + clean_path(given or f"tiers/{tier}", what)
            # its manifest is served as it lies: it, like a shard, must be a file inside the run
            target = "/" + inside_run(run.fs, run.root, f"{folder[1:]}/manifest.json", what)
            if target in tree.shards:
                continue
            try:
                tree.blobs[target] = bytes(run.fs.cat_file(join(run.root, target[1:])))
            except FileNotFoundError:
                log.warning("tier %s of %s has no %s: its folder is shown without one", tier, url, target[1:])
                continue
            tree._add_file(target)
        tree._add_data_paths(run.megatron, mountpoint)
        for names in tree.dirs.values():
            names.sort()
        return tree

    def _add_data_paths(self, pairs: list[MegatronPair], mountpoint: str | None) -> None:
        """megatron/data-path.txt naming every pair, and F/data-path.txt for every other folder F
        holding pairs, naming those; prefixes under `mountpoint`."""
        folders: dict[str, list[dict]] = {"/megatron": []} if pairs else {}
        for pair in pairs:
            entry = {"tokens": pair.tokens, "prefix": pair.prefix}
            folders["/megatron"].append(entry)
            folder = str(PurePosixPath("/" + pair.prefix).parent)
            if folder != "/megatron":
                folders.setdefault(folder, []).append(entry)
        for folder, entries in folders.items():
            path = f"{folder}/{DATA_PATH}"
            if path in self.shards or path in self.blobs:
                log.warning("the run lists its own %s: serving that file, not a data path", path[1:])
                continue
            self._add_file(path)
            self.blobs[path] = data_path_args(entries, str(mountpoint) if mountpoint else "").encode()

    def _add_file(self, path: str) -> None:
        """Enter `path` (a file) and the folders above it."""
        parts = PurePosixPath(path).parts[1:]
        if path in self.dirs:
            raise YlinkError(f"the manifest of {self.url} uses {path[1:]} both as a file and a folder")
        parent = "/"
        self.dirs.setdefault(parent, [])
        for depth, name in enumerate(parts):
            here = _child(parent, name)
            if depth < len(parts) - 1:
                if here in self.shards or here in self.blobs:
                    raise YlinkError(f"the manifest of {self.url} uses {here[1:]} both as a file and a folder")
                self.dirs.setdefault(here, [])
            if name not in self.dirs[parent]:
                self.dirs[parent].append(name)
            parent = here

    @property
    def total_bytes(self) -> int:
        return sum(s.ref.size for s in self.shards.values())


def _created_ns(manifest: dict) -> int:
    with contextlib.suppress(Exception):
        return int(dt.datetime.fromisoformat(manifest["created"]).timestamp() * 1e9)
    return time.time_ns()


# -- the file system ----------------------------------------------------------------------------

def _fuse():
    """The mfusepy module, or a MountError saying what is missing."""
    try:
        import mfusepy
    except ImportError:
        raise MountError("ylink cache mount needs the mfusepy package: pip install mfusepy") from None
    except OSError as exc:  # mfusepy loads libfuse when imported
        raise MountError(f"FUSE is unavailable here: {exc} (install libfuse3: apt-get install fuse3)") from None
    return mfusepy


def _make_fs_class():
    mfusepy = _fuse()

    class RunFS(mfusepy.Operations):
        """The FUSE operations over a `RunTree`; shards come from `cache`, `prefetcher` fills ahead."""

        use_ns = True

        def __init__(self, tree: RunTree, cache: ShardCache, prefetcher: Prefetcher | None = None):
            self.tree = tree
            self.cache = cache
            self.prefetcher = prefetcher
            self.ready = threading.Event()
            self._uid, self._gid = os.getuid(), os.getgid()
            self._lock = threading.Lock()
            self._handles: dict[int, tuple[int, contextlib.ExitStack]] = {}
            self._next_fh = 1

        def init(self, path):
            self.ready.set()

        def getattr(self, path, fh=None):
            t = self.tree.mtime_ns
            base = {"st_uid": self._uid, "st_gid": self._gid, "st_atime": t, "st_mtime": t, "st_ctime": t}
            if path in self.tree.dirs:
                subdirs = sum(1 for name in self.tree.dirs[path] if _child(path, name) in self.tree.dirs)
                return {**base, "st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2 + subdirs}
            shard = self.tree.shards.get(path)
            size = shard.ref.size if shard else len(self.tree.blobs[path]) if path in self.tree.blobs else None
            if size is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            return {**base, "st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": size,
                    "st_blksize": 1 << 20, "st_blocks": (size + 511) // 512}

        def readdir(self, path, fh):
            if path not in self.tree.dirs:
                raise mfusepy.FuseOSError(errno.ENOTDIR if self._exists(path) else errno.ENOENT)
            return [".", "..", *self.tree.dirs[path]]

        def open(self, path, fi):
            if fi.flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
                raise mfusepy.FuseOSError(errno.EROFS)
            if path in self.tree.blobs:
                fi.fh, fi.keep_cache = 0, 1
                return 0
            shard = self.tree.shards.get(path)
            if shard is None:
                raise mfusepy.FuseOSError(errno.EISDIR if path in self.tree.dirs else errno.ENOENT)
            if self.prefetcher is not None:  # before the (maybe long) get: the next shards download alongside
                self.prefetcher.schedule(self.tree.folders[shard.folder][shard.order:])
            stack = contextlib.ExitStack()
            try:
                local = stack.enter_context(self.cache.get(shard.ref))
                fd = os.open(local, os.O_RDONLY)
                stack.callback(os.close, fd)
            except Exception as exc:  # noqa: BLE001 -- a reader gets EIO; the reason goes to the log
                stack.close()
                log.error("cannot serve %s: %s", path[1:], exc)
                raise mfusepy.FuseOSError(errno.EIO) from None
            with self._lock:
                fh = self._next_fh
                self._next_fh += 1
                self._handles[fh] = (fd, stack)
            fi.fh = fh
            fi.keep_cache = 1  # a shard never changes under its path: the kernel may keep its pages
            return 0

        def read(self, path, size, offset, fi):
            if fi.fh == 0:
                return self.tree.blobs[path][offset:offset + size]
            with self._lock:
                handle = self._handles.get(fi.fh)
            if handle is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            return os.pread(handle[0], size, offset)

        def release(self, path, fi):
            with self._lock:
                handle = self._handles.pop(fi.fh, None)
            if handle is not None:
                handle[1].close()  # closes the file and unpins the shard
            return 0

        def statfs(self, path):
            total = self.tree.total_bytes
            return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": (total + 4095) // 4096, "f_bfree": 0,
                    "f_bavail": 0, "f_files": len(self.tree.shards) + len(self.tree.blobs), "f_ffree": 0,
                    "f_namemax": 255}

        def access(self, path, amode):
            if not self._exists(path):
                raise mfusepy.FuseOSError(errno.ENOENT)
            if amode & os.W_OK:
                raise mfusepy.FuseOSError(errno.EROFS)
            return 0

        def close_all(self) -> None:
            """Unpin whatever is still open (the mount is gone)."""
            with self._lock:
                handles, self._handles = list(self._handles.values()), {}
            for _, stack in handles:
                with contextlib.suppress(Exception):
                    stack.close()

        def _exists(self, path: str) -> bool:
            return path in self.tree.dirs or path in self.tree.shards or path in self.tree.blobs

    return RunFS


def _child(folder: str, name: str) -> str:
    return f"/{name}" if folder == "/" else f"{folder}/{name}"


_FS_CLASS = None


def fs_class():
    """The FUSE operations class (`RunFS(tree, cache, prefetcher)`), made on first use: importing
    this module does not need libfuse."""
    global _FS_CLASS
    if _FS_CLASS is None:
        _FS_CLASS = _make_fs_class()
    return _FS_CLASS


# -- mounting -----------------------------------------------------------------------------------

def fuse_problem() -> str | None:
    """Why FUSE cannot be used here, or None when it looks usable."""
    if not os.path.exists("/dev/fuse"):
        return "FUSE is unavailable here: /dev/fuse is missing (in a container: --device /dev/fuse --cap-add SYS_ADMIN)"
    if shutil.which("fusermount3") is None and os.geteuid() != 0:
        return "FUSE is unavailable here: fusermount3 is missing (apt-get install fuse3)"
    try:
        _fuse()
    except MountError as exc:
        return str(exc)
    return None


def check_mountpoint(mountpoint: str | os.PathLike) -> Path:
    """The mount point as an absolute path; a MountError unless it is an empty folder, not mounted."""
    path = Path(mountpoint).absolute()
    try:
        if not path.is_dir():
            raise MountError(f"mount point {path} does not exist or is not a folder (create it with mkdir)")
        if is_mounted(path):
            raise MountError(f"{path} is already a mount point (unmount it first: fusermount3 -u {path})")
        if any(path.iterdir()):
            raise MountError(f"mount point {path} is not empty")
    except OSError as exc:
        hint = f" (a stale mount? fusermount3 -u {path})" if exc.errno == errno.ENOTCONN else ""
        raise MountError(f"cannot use {path} as a mount point: {exc.strerror}{hint}") from None
    return path


def is_mounted(path: str | os.PathLike) -> bool:
    """Whether something is mounted at `path`, by /proc/self/mounts (works on a dead FUSE mount too)."""
    target = os.path.abspath(path)
    with contextlib.suppress(OSError):
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 1 and _unescape(fields[1]) == target:
                    return True
        return False
    return os.path.ismount(target)


def _unescape(field_: str) -> str:
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field_ = field_.replace(code, char)
    return field_


def unmount(mountpoint: str | os.PathLike, lazy: bool = False) -> bool:
    """Unmount a FUSE mount; `lazy` detaches it even while files are open. Returns success."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool:
        cmd = [tool, "-u"] + (["-z"] if lazy else []) + [str(mountpoint)]
    else:
        cmd = ["umount"] + (["-l"] if lazy else []) + [str(mountpoint)]
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if result.returncode != 0:
        log.debug("%s: %s", " ".join(cmd), result.stderr.strip())
    return result.returncode == 0


def serve(url: str, mountpoint: str | os.PathLike, cache_dir: str | os.PathLike, *, max_bytes: int | None = None,
          storage_options: dict | None = None, prefetch_bytes: int = 2 << 30, parallel: int = 2,
          allow_other: bool = False, on_ready=None) -> None:
    """Mount the run at `url` read-only at `mountpoint` and serve it until SIGINT, SIGTERM or SIGHUP
    (or an outside `fusermount3 -u`); then unmount and return. Must run in the main thread (it
    takes those signals). `on_ready(tree)` is called once the mount answers."""
    problem = fuse_problem()
    if problem:
        raise MountError(problem)
    mountpoint = check_mountpoint(mountpoint)
    mfusepy = _fuse()
    tree = RunTree.load(url, storage_options, mountpoint=str(mountpoint))
    cache = ShardCache(cache_dir, max_bytes=max_bytes, storage_options=storage_options)
    prefetcher = Prefetcher(cache, window_bytes=prefetch_bytes, parallel=parallel) if prefetch_bytes > 0 else None
    ops = fs_class()(tree, cache, prefetcher)

    # libfuse installs its own SIGINT/SIGTERM/SIGHUP handlers only where none is set; ours (run by
    # Python in this thread while the loop runs in another) unmount, which ends the loop cleanly.
    stopping = threading.Event()

    def stop(signum, frame) -> None:
        stopping.set()

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    errors: list[BaseException] = []
    options = dict(foreground=True, ro=True, fsname=f"ylink:{url}"[:200].replace(",", "_"), subtype="ylink",
                   default_permissions=True)
    if allow_other:
        options["allow_other"] = True

    def loop() -> None:
        try:
            mfusepy.FUSE(ops, str(mountpoint), raw_fi=True, **options)
        except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=loop, name="ylink-fuse", daemon=True)
    try:
        thread.start()
        while thread.is_alive() and not ops.ready.is_set() and not stopping.is_set():
            ops.ready.wait(0.1)
        device = None
        if ops.ready.is_set() and not stopping.is_set():
            with contextlib.suppress(OSError):
                device = os.stat(mountpoint).st_dev
            if on_ready is not None:
                on_ready(tree)
        while thread.is_alive() and not stopping.is_set():
            thread.join(0.2)
        if thread.is_alive():  # a signal: unmount, politely first (files may still be open)
            if unmount(mountpoint):
                thread.join(30)
            else:
                # Readers still hold files open: detach the mount, and end their connection (through
                # fusectl where it is mounted; otherwise our exit ends it): their reads fail (ENOTCONN).
                log.warning("files are still open under %s: detaching the mount (lazy unmount)", mountpoint)
                unmount(mountpoint, lazy=True)
                aborted = False
                if device is not None:
                    with contextlib.suppress(OSError):
                        Path(f"/sys/fs/fuse/connections/{os.minor(device)}/abort").write_text("1")
                        aborted = True
                thread.join(3 if aborted else 0.5)  # without the abort, the loop runs until we exit
        if not ops.ready.is_set() and not stopping.is_set():
            detail = f" (libfuse status {errors[0]})" if errors else ""
            raise MountError(f"cannot mount at {mountpoint}: FUSE refused it{detail}; "
                             "see libfuse's message above (no permission for FUSE here?)")
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        ops.close_all()
        if prefetcher is not None:
            prefetcher.close(timeout=5)
        if thread.is_alive() or is_mounted(mountpoint):
            unmount(mountpoint, lazy=True)
