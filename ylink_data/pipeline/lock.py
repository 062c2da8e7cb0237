"""One run at a time in an output folder: the driver holds OUTPUT/run.lock from before it looks at
the folder until the manifest is written (or the run fails), and a second run is refused with one
line that says who holds it.

- Local folders: `flock` on the file. The kernel releases it when the holder dies (kill -9
  included), so a lock is never stale; the file's content (host, pid, since) is only for messages.
- Object stores (s3://, gs://...): a lease object {owner, host, pid, since, expires} that the holder
  renews from a background thread. It is taken with a conditional write where the store offers one
  (S3: If-None-Match to create, If-Match on the ETag read to take over) and always verified by
  reading it back. A lease past its expiry, or one whose holder is a dead process on this machine,
  is stale: the next run takes it over and says so.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import socket
import threading
import time
import uuid
from typing import Callable, Iterator

from ..errors import RunStateError
from ..io.fs import is_local, writing_into
from ..io.locks import flock, unlock
from .layout import RunLayout

LEASE_TTL_S = 60.0  # a dead holder's lease on an object store blocks other hosts this long


@dataclasses.dataclass
class Holder:
    """Who holds a run folder."""

    owner: str  # unique per acquisition
    host: str
    pid: int
    since: str  # UTC, ISO 8601
    node: str = ""  # this machine and PID namespace: a pid is only meaningful there
    expires: float = 0.0  # leases: Unix time after which the lease is stale

    @classmethod
    def me(cls) -> "Holder":
        return cls(uuid.uuid4().hex, socket.gethostname(), os.getpid(),
                   dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), _node())

    @classmethod
    def parse(cls, data: bytes) -> "Holder | None":
        with contextlib.suppress(ValueError, TypeError, KeyError):
            raw = json.loads(data)
            return cls(**{k: raw[k] for k in ("owner", "host", "pid", "since")},
                       node=str(raw.get("node", "")), expires=float(raw.get("expires", 0)))
        return None

    def encode(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {self.since}"

    def is_dead_here(self) -> bool:
        """A holder on this machine whose process is gone (kill -9): its lease need not expire."""
        if not self.node or self.node != _node():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's live process
            return False
        return False


def _node() -> str:
    """This machine's boot and PID namespace (Linux); "" elsewhere, where leases only expire."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def _condition_failed(exc: OSError) -> bool:
    """A conditional write lost: the object exists, or changed since we read its ETag."""
    if isinstance(exc, FileExistsError):
        return True
    response = getattr(exc.__cause__, "response", None) or {}  # s3fs keeps botocore's error as the cause
    return response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict")


def _holder_in(path: str) -> Holder | None:
    """Who a held lock file says holds it (it may be gone or half-written already)."""
    try:
        with open(path, "rb") as f:
            return Holder.parse(f.read(4096))
    except OSError:
        return None


def _busy(layout: RunLayout, holder: Holder | None) -> RunStateError:
    who = f" ({holder.describe()})" if holder else ""
    return RunStateError(f"output.path {layout.url} is in use by another ylink run{who}; wait for it to "
                         "finish, or choose another output.path")


@contextlib.contextmanager
def hold_run_folder(layout: RunLayout, note: Callable[[str], None]) -> Iterator["FolderLock"]:
    """Hold `layout`'s folder for the block; raise RunStateError at once if another run holds it."""
    lock: FolderLock = LocalLock(layout) if is_local(layout.fs) else Lease(layout)
    lock.acquire(note)
    try:
        yield lock
    finally:
        lock.release()


class FolderLock:
    def acquire(self, note: Callable[[str], None]) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raise RunStateError unless this run still holds the folder (before publishing a manifest)."""

    def release(self) -> None:
        raise NotImplementedError


class LocalLock(FolderLock):
    def __init__(self, layout: RunLayout):
        self.layout = layout
        self.path = layout.lock
        self.fd: int | None = None

    def acquire(self, note: Callable[[str], None]) -> None:
        try:
            with writing_into(self.layout.url):
                previous = self._lock()
        except BaseException:
            self.release()
            raise
        if previous is not None:
            note(f"note: the previous run in {self.layout.url} ({previous.describe()}) ended without "
                 "releasing its lock; taking over")

    def _lock(self) -> Holder | None:
        """Lock the file and write who we are into it; returns who it said held it before."""
        import fcntl

        os.makedirs(self.layout.root, exist_ok=True)
        self.fd = flock(self.path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if self.fd is None:
            raise _busy(self.layout, _holder_in(self.path))
        previous = Holder.parse(os.pread(self.fd, 4096, 0))
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, Holder.me().encode(), 0)
        return previous

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.path)  # while still locked: a run that opened it meanwhile retries on a new file
        unlock(self.fd)
        self.fd = None


class Lease(FolderLock):
    def __init__(self, layout: RunLayout, ttl_s: float = LEASE_TTL_S):
        self.layout = layout
        self.fs, self.path = layout.fs, layout.lock
        self.ttl_s = ttl_s
        self.me = Holder.me()
        self.lost: str | None = None  # why this run no longer holds the lease
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._held = False

    # ------------------------------------------------------------------ store access

    def _read(self) -> tuple[Holder | None, str | None, bool]:
        """(holder, its ETag, whether an object is there). The ETag is read first, so a conditional
        write based on it fails if the object changed after we read it."""
        self.fs.invalidate_cache(self.path)  # s3fs answers info() from a cached listing of the folder
        try:
            etag = self.fs.info(self.path).get("ETag")
            data = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return None, None, False
        return Holder.parse(data), etag, True

    def _write(self, create: bool, etag: str | None) -> bool:
        """Write our lease: only if none exists (`create`), or only over the object with `etag`.
        False when the condition failed (someone else wrote first)."""
        lease = dataclasses.replace(self.me, expires=time.time() + self.ttl_s)
        kwargs = {}
        if create:
            kwargs["mode"] = "create"  # S3: If-None-Match; other stores: a check, then the write
        elif etag and "s3" in self.fs.protocol:
            kwargs["IfMatch"] = etag
        try:
            self.fs.pipe_file(self.path, lease.encode(), **kwargs)
        except OSError as exc:
            if _condition_failed(exc):
                return False
            raise
        holder, _, _ = self._read()  # verify: on stores without conditional writes the last writer wins
        if holder is None or holder.owner != lease.owner:
            return False
        self.me = lease
        return True

    # ------------------------------------------------------------------ the lease

    def acquire(self, note: Callable[[str], None]) -> None:
        with writing_into(self.layout.url):
            for _ in range(5):  # each round loses only to a run that took the lease meanwhile
                holder, etag, present = self._read()
                live = holder is not None and holder.expires > time.time() and not holder.is_dead_here()
                if live:
                    raise _busy(self.layout, holder)
                if self._write(create=not present, etag=etag):
                    break
            else:
                raise _busy(self.layout, self._read()[0])
        self._held = True
        if present:
            why = "its process is gone" if holder and holder.is_dead_here() else "its lease expired"
            who = f" ({holder.describe()})" if holder else ""
            note(f"note: the previous run in {self.layout.url}{who} ended without releasing its lease "
                 f"({why}); taking over")
        self._renewer = threading.Thread(target=self._renew_until_stopped, name="ylink-lease", daemon=True)
        self._renewer.start()

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):  # three renewals may fail before the lease runs out
            try:
                holder, etag, _ = self._read()
                if holder is None or holder.owner != self.me.owner:
                    self.lost = f"taken over by {holder.describe()}" if holder else "its lease object was deleted"
                    return
                if not self._write(create=False, etag=etag):
                    self.lost = "taken over by another run"
                    return
            except Exception:  # noqa: BLE001 -- a network blip: retry until the lease runs out
                if time.time() > self.me.expires:
                    self.lost = "it could not be renewed before it expired"
                    return

    def check(self) -> None:
        if self.lost is None and time.time() > self.me.expires:
            self.lost = "it could not be renewed before it expired"
        if self.lost is not None:
            raise RunStateError(f"this run lost its lease on {self.layout.url} ({self.lost}): nothing was "
                                "published; rerun the same command to resume")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if not self._held:
            return
        self._held = False
        with contextlib.suppress(Exception):  # an unreleased lease only delays the next run
            holder, _, _ = self._read()
            if holder is not None and holder.owner == self.me.owner:
                self.fs.rm_file(self.path)


